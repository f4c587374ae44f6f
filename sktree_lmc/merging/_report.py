"""How good a merge is, measured without the sites' rows: the merge report.

A merge of models trained apart is meant to approximate their ensemble (the
sites' predictions averaged with the merge's weights): that function is what
the models know together, and averaging their parameters can only approximate
it. :func:`merge_report` compares the merged model with that ensemble on rows
drawn from the distributions the members' input encoders summarize
(:func:`~sktree_lmc.encoding._common_encoding.probe_columns`: every column's fitted
quantiles, knots or categories, the columns joined by the encoder's Gaussian copula;
each member's share of the rows drawn from its own encoder), or on rows the user
gives, and relates the distance to the members' own distance from the
ensemble. :func:`~sktree_lmc.merge_estimators` stores the result on the merged
model (``merge_report_``), warns with :class:`MergeQualityWarning` when the
merge is farther from the ensemble than the members are, and with
``aligner="auto"`` keeps the alignment whose merge is closest.

This module imports the encoding's probe rows and nothing of the estimators'
internals but their public predictions.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..encoding._common_encoding import probe_columns

__all__ = ["MergeQualityWarning", "MergeReport", "ensemble_predictions", "members_probe_rows",
           "merge_report", "probe_rows"]

#: A merge is flagged when its distance to the ensemble is above this multiple of the
#: members' mean distance (MergeReport.disagreement) ...
FLAG_THRESHOLD = 1.0
#: ... and above this share of the ensemble's own spread (MergeReport.signal_loss): models
#: fitted on the same rows agree so closely that any merge is farther from their ensemble than
#: they are, without losing what they know.
SIGNAL_LOSS_THRESHOLD = 0.3

#: Distances below this are rounding (a merge at lam=0, or of equal models).
_NEGLIGIBLE = 1e-4


class MergeQualityWarning(UserWarning):
    """A merged model is farther from its members' ensemble than the members are.

    Issued by :func:`~sktree_lmc.merge_estimators` when its report
    (``merge_report_``) finds the merged model's predictions farther from
    the members' averaged predictions than the members themselves are on
    average: the merge lost what the models know. Try ``aligner="auto"``,
    ``aligner="am"`` with rows ``X``, or :func:`~sktree_lmc.refit_leaves` on
    the merged model.

    Examples
    --------
    >>> import warnings
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import MergeQualityWarning, SoftTreeEnsembleClassifier
    >>> from sktree_lmc import merge_estimators
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=20, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     naive = merge_estimators(a, b, aligner="naive")  # no alignment
    >>> naive.merge_report_.flagged
    True
    >>> any(issubclass(w.category, MergeQualityWarning) for w in caught)
    True
    """


@dataclasses.dataclass(frozen=True)
class MergeReport:
    """How close a merged model is to its members' ensemble.

    Parameters
    ----------
    aligner : str
        The alignment of the merge: ``"wm"``, ``"am"``, ``"naive"``, or
        ``"custom"`` for a :class:`~sktree_lmc.ModelAligner` of other
        settings; followed by ``"+distill"`` when its leaves were refitted to
        the ensemble (``merge_estimators(distill=...)``).
    disagreement : float
        ``distance / member_distance``: below 1, the merged model is closer
        to the ensemble than the members are on average (a merge that
        works).
    distance : float
        Mean distance of the merged model's predictions from the ensemble's:
        the total variation distance of the class probabilities
        (classifiers), or the root mean square difference of the predictions
        over the ensemble predictions' standard deviation (regressors).
    member_distance : float
        The same distance of every member from the ensemble, averaged with
        the merge's weights.
    signal_loss : float
        ``distance`` over the ensemble's own distance from its mean
        prediction (how much its predictions vary from row to row): the share
        of what the ensemble predicts that the merge moved. Models fitted on
        the same rows agree so closely that any merge has a ``disagreement``
        above 1; it matters when the merge also moved much of the signal.
    rows : {"probe", "X"}
        The rows compared: rows drawn from the input encoder's summaries of
        the columns (no data needed), or the rows ``X`` given to the merge.
    n_rows : int
        Number of rows compared.
    candidates : dict
        ``aligner="auto"``: the ``disagreement`` of every alignment tried
        (the kept one included); otherwise the kept one's alone.
    flagged : bool
        ``disagreement > 1`` and ``signal_loss > 0.3``:
        :class:`MergeQualityWarning` was issued.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=5, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> report = merge_estimators(a, b).merge_report_
    >>> report.rows, {"am", "wm"} <= set(report.candidates)
    ('probe', True)
    >>> bool(report.disagreement < 1), report.flagged
    (True, False)
    """

    aligner: str
    disagreement: float
    distance: float
    member_distance: float
    signal_loss: float
    rows: str
    n_rows: int
    candidates: dict
    flagged: bool


def members_probe_rows(estimators, weights, n_rows=2048, random_state=0):
    """Probe rows of a merge: each member's share drawn from its own encoder.

    Models fitted apart each summarize their own rows; the rows on which
    their merge is compared with (and distilled to) their ensemble are a
    mixture of those summaries, member ``k`` giving about ``weights[k]`` of
    the rows (:func:`probe_rows` with ``joint=True``: its columns' fitted
    distributions joined by its encoder's Gaussian copula), shuffled.

    Parameters
    ----------
    estimators : list of fitted soft tree ensembles
        The members, with the same input columns.
    weights : array-like of shape (K,)
        Non-negative weights (normalized here); a member of weight 0 gives no
        row.
    n_rows : int, default=2048
        Rows to draw in all.
    random_state : int, default=0
        Seed of the draws (member ``k`` draws with ``random_state + k``) and of
        the shuffle.

    Returns
    -------
    X : ndarray or pandas.DataFrame of shape (n_rows, n_features_in_)
        As :func:`probe_rows`.
    """
    weights = np.asarray(weights, dtype=np.float64)
    share = weights / weights.sum() * n_rows
    counts = np.floor(share).astype(np.int64)
    counts[np.argsort(counts - share, kind="stable")[: n_rows - counts.sum()]] += 1
    parts = [probe_rows(est, int(c), random_state=random_state + k, joint=True)
             for k, (est, c) in enumerate(zip(estimators, counts)) if c > 0]
    order = np.random.RandomState(random_state).permutation(n_rows)
    if hasattr(parts[0], "iloc"):
        import pandas as pd

        return pd.concat(parts, ignore_index=True).iloc[order].reset_index(drop=True)
    if any(part.dtype == object for part in parts):
        parts = [part.astype(object) for part in parts]
    return np.concatenate(parts)[order]


def probe_rows(estimator, n_rows=2048, random_state=0, joint=False):
    """Raw input rows drawn from the distribution ``estimator.encoder_`` summarizes.

    Parameters
    ----------
    estimator : fitted soft tree ensemble
        Its encoder gives every column's values
        (:func:`~sktree_lmc.encoding._common_encoding.probe_columns`, with 1/16 of the
        rows missing in the columns that had missing values).
    n_rows : int, default=2048
        Rows to draw.
    random_state : int, default=0
        Seed of the columns' orders (of the copula's draws with ``joint``).
    joint : bool, default=False
        Join the columns by the encoder's Gaussian copula (its
        ``dependence_``) instead of drawing them independently.

    Returns
    -------
    X : ndarray or pandas.DataFrame of shape (n_rows, n_features_in_)
        A DataFrame with the fitted column names when the model was fitted on
        one, else a float64 array (an object array with categorical columns).
        Columns whose distribution the encoder does not know hold zeros.
    """
    encoder = estimator.encoder_
    columns = probe_columns(encoder, n_rows, missing_share=1 / 16, random_state=random_state,
                            joint=joint)
    columns = [np.zeros(n_rows) if c is None else c for c in columns]
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        return pd.DataFrame({name: c for name, c in zip(names, columns)})
    if any(c.dtype == object for c in columns):
        return np.column_stack([c.astype(object) for c in columns])
    return np.column_stack(columns)


def _predictions(estimator, X, classifier):
    """Class probabilities of a classifier (``classifier``), predictions (2-D)
    of a regressor."""
    if classifier:
        return estimator.predict_proba(X)
    out = np.asarray(estimator.predict(X), dtype=np.float64)
    return out.reshape(len(out), -1)


def ensemble_predictions(estimators, weights, X, *, classifier):
    """The members' predictions on ``X`` and their weighted average.

    Parameters
    ----------
    estimators : list of fitted soft tree ensembles
        The members (of one class).
    weights : array-like of shape (K,)
        Non-negative weights, normalized here.
    X : array-like
        Rows every member can predict.
    classifier : bool
        Whether the members are classifiers (their task, decided once by the
        merge).

    Returns
    -------
    members : list of ndarray of shape (n, C)
        Probabilities (classifiers) or predictions (regressors) per member.
    ensemble : ndarray of shape (n, C)
        Their weighted average.
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    members = [_predictions(est, X, classifier) for est in estimators]
    return members, sum(wi * p for wi, p in zip(w, members))


def _distance(pred, ensemble, classifier, spread):
    """Total variation (classifiers), or RMS difference over ``spread``."""
    if classifier:
        return float(0.5 * np.abs(pred - ensemble).sum(axis=1).mean())
    return float(np.sqrt(np.mean((pred - ensemble) ** 2)) / spread)


def merge_report(merged, members, ensemble, weights, *, aligner, rows, classifier,
                 candidates=None):
    """The :class:`MergeReport` of ``merged`` against its members' ensemble.

    Parameters
    ----------
    merged : ndarray of shape (n, C)
        The merged model's predictions (probabilities for classifiers).
    members, ensemble : see :func:`ensemble_predictions`
        The members' predictions on the same rows, and their average.
    weights : array-like of shape (K,)
        The merge's weights.
    aligner : str
        The name of the alignment used.
    rows : {"probe", "X"}
        Where the rows came from.
    classifier : bool
        Whether the predictions are class probabilities (compared by total
        variation) or a regressor's (by their RMS difference over the
        ensemble's spread).
    candidates : dict or None, default=None
        The disagreements of the alignments tried (``aligner="auto"``).

    Returns
    -------
    MergeReport
    """
    spread = float(np.std(ensemble)) or 1.0
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    distance = _distance(merged, ensemble, classifier, spread)
    member = float(sum(wi * _distance(p, ensemble, classifier, spread)
                       for wi, p in zip(w, members)))
    disagreement = distance / max(member, _NEGLIGIBLE)
    signal = _distance(np.broadcast_to(ensemble.mean(axis=0), ensemble.shape), ensemble,
                       classifier, spread)
    signal_loss = distance / max(signal, _NEGLIGIBLE)
    candidates = dict(candidates or {aligner: disagreement})
    # a merge at an endpoint (lam=0) or of equal models: both distances are rounding
    flagged = (disagreement > FLAG_THRESHOLD and signal_loss > SIGNAL_LOSS_THRESHOLD
               and distance > _NEGLIGIBLE)
    return MergeReport(aligner=aligner, disagreement=float(disagreement), distance=distance,
                       member_distance=member, signal_loss=float(signal_loss), rows=rows,
                       n_rows=int(len(ensemble)), candidates=candidates,
                       flagged=bool(flagged))

"""Training on disjoint shards, and merging the shard models (in rounds).

:class:`ShardedSoftTreeEnsemble` splits the rows into shards
(:func:`make_shards`), or takes the partitions of a dask collection as shards,
fits one clone of a soft tree ensemble per shard (joblib backend or dask
workers) and merges the fitted clones with the N-way merge of
:mod:`._merge`, for ``n_rounds`` federated rounds (see :mod:`._federated`).
"""

from __future__ import annotations

import copy
import os
import sys
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import check_random_state, get_tags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods, StrOptions, validate_params
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    _check_y,
    _num_samples,
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from ..training._boosting import averaged_site_trees, feature_gains, grow_shared_trees
from ..merging._bridge import combine
from ..merging._calibrate import PredictionSums, calibrate_mean, has_mean_loss, prediction_sums
from ..encoding._encoding import (
    SKETCH_SIZE,
    TabularEncoder,
    as_rows,
    check_categorical_features,
    encoders_differ,
    fit_encoding,
    rows_and_columns,
)
from .._estimators import (
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    _BaseSoftTreeEnsemble,
    _lazy_on_dask,
)
from ._dask import WORKER_TIMEOUT, DaskSession, aligned_partitions, is_dask_collection
from ._federated import (
    RoundSettings,
    RoundsSpeedup,
    RoundsValidation,
    _DaskShards,
    _LocalShards,
    run_rounds,
)
from ..merging._merge import ALIGNER_SHORTCUTS, ModelAligner, check_aligner
from ..model._architectures import SymmetryOps, TreeArchitecture
from ._checkpoint import (
    check_checkpoint_path,
    config_of,
    qualified_name,
    read_checkpoint,
    rows_fingerprint,
    write_checkpoint,
)
from ..merging._matching import Alignment
from ..model._params import TreeParams
from .._persistence import (
    check_complete_state,
    check_format,
    encoder_as_dict,
    encoder_from_dict,
    stamp,
)
from ..training._objective import objective_from_params, rescaled_weights
from ..training._plan import FitPlan, Recipe, Validation, auto_early_stopping, teacher_trees
from ..merging._refit import refit_leaves
from ..utils._threads import torch_threads
from .._validation import _check_given_encoder, _NumberInterval, _torch_seed
from ..utils._progress import ProgressLog, Stopwatch, writable

__all__ = ["ShardedSoftTreeEnsemble", "make_shards"]


def checkpoint_types():
    """The classes a checkpoint file may hold, by qualified name: the only
    ones :func:`~._checkpoint.read_checkpoint` rebuilds (the estimators, the
    aligner and its alignments, parameters and architectures, the encoder and
    the ``QuantileTransformer`` of its quantile encoding)."""
    from sklearn.preprocessing import QuantileTransformer

    classes = (SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor, ModelAligner, Alignment,
               SymmetryOps, TreeArchitecture, TreeParams, TabularEncoder, QuantileTransformer)
    return {qualified_name(cls): cls for cls in classes}


def _largest_remainder(total, fractions):
    """Integer counts summing to ``total``, proportional to ``fractions``."""
    raw = total * np.asarray(fractions, dtype=np.float64)
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts


def _strata(y, is_classifier, n_bins):
    """Integer labels used by the stratified and skewed splits."""
    if is_classifier:
        return np.unique(y, return_inverse=True)[1].ravel()
    t = np.asarray(y, dtype=np.float64).reshape(len(y), -1)[:, 0]
    edges = np.quantile(t, np.linspace(0, 1, n_bins + 1)[1:-1])
    return np.searchsorted(edges, t, side="right")


@validate_params(
    {
        "y": ["array-like"],
        "n_shards": [_NumberInterval(Integral, 1, None, closed="left")],
        "split": [StrOptions({"iid", "stratified", "class_skewed", "contiguous"})],
        "skew": [_NumberInterval(Real, 0, 1, closed="neither")],
        "is_classifier": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_shards(y, n_shards, split="iid", *, skew=0.8, is_classifier=True, random_state=None):
    """Disjoint shard indices of ``len(y)`` rows.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        Targets (used by the stratified and skewed splits).
    n_shards : int
        Number of shards ``K``, from 1 to ``n_samples`` (every shard gets at
        least one row with the ``"iid"``, ``"contiguous"`` and
        ``"stratified"`` splits).
    split : {"iid", "stratified", "class_skewed", "contiguous"}, default="iid"
        ``"iid"``: a random partition into ``K`` near-equal parts.
        ``"contiguous"``: ``K`` consecutive blocks of near-equal size, rows in
        order (data that arrives site by site; the blocks of a dask
        collection's partitions); draws nothing from ``random_state``.
        ``"stratified"``: every shard has the class proportions of ``y``.
        ``"class_skewed"``: shard ``k`` is dominated by class ``k mod C``: of
        each class, a share proportional to ``skew`` goes to the shards it
        dominates and a share proportional to ``(1 - skew) / (C - 1)`` to each
        other shard (two balanced classes and two shards: 80%/20% and
        20%/80%, the split of the paper). For regressors the classes are
        quantile bins of the (first) target: 10 for ``"stratified"`` and
        ``max(K, 2)`` for ``"class_skewed"``.
    skew : float in (0, 1), default=0.8
        Dominance of the skewed split.
    is_classifier : bool, default=True
        Whether ``y`` holds class labels.
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffling.

    Returns
    -------
    shards : list of ndarray
        ``K`` sorted, disjoint index arrays covering all rows.

    Raises
    ------
    ValueError
        If ``n_shards`` is not an int from 1 to ``n_samples`` (a float, a
        boolean, 0, more shards than rows), ``skew`` is not in (0, 1) (NaN
        included), or ``split`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import make_shards
    >>> y = np.repeat([0, 1], 50)
    >>> a, b = make_shards(y, 2, "class_skewed", skew=0.8, random_state=0)
    >>> float(np.mean(y[a] == 0)), float(np.mean(y[b] == 0))  # the split of the paper
    (0.8, 0.2)
    """
    n = _num_samples(y)
    if n_shards > n:
        raise ValueError(
            f"n_shards={n_shards} is more shards than rows ({n}): some shards would be empty."
        )
    if split == "contiguous":
        return [np.asarray(part, dtype=np.int64)
                for part in np.array_split(np.arange(n), n_shards)]
    rng = check_random_state(random_state)
    if split == "iid":
        perm = rng.permutation(n)
        return [np.sort(part) for part in np.array_split(perm, n_shards)]
    n_bins = 10 if split == "stratified" else max(n_shards, 2)
    labels = _strata(y, is_classifier, n_bins)
    classes = np.unique(labels)
    C = len(classes)
    parts = [[] for _ in range(n_shards)]
    if split == "stratified":
        order = np.concatenate([rng.permutation(np.flatnonzero(labels == c)) for c in classes])
        for k in range(n_shards):
            parts[k].append(order[k::n_shards])
    elif split == "class_skewed":
        if C < 2:
            raise ValueError("split='class_skewed' needs at least two classes.")
        q = np.full((n_shards, C), (1.0 - skew) / (C - 1))
        q[np.arange(n_shards), np.arange(n_shards) % C] = skew
        q /= q.sum(axis=0, keepdims=True)
        for j, c in enumerate(classes):
            idx = rng.permutation(np.flatnonzero(labels == c))
            counts = _largest_remainder(len(idx), q[:, j])
            for k, chunk in enumerate(np.split(idx, np.cumsum(counts)[:-1])):
                parts[k].append(chunk)
    else:
        raise ValueError(f"Unknown split {split!r}.")
    shards = [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
    empty = [k for k, shard in enumerate(shards) if not len(shard)]
    if empty:
        raise ValueError(
            f"split={split!r} with n_shards={n_shards} leaves shard(s) {empty} empty "
            f"({n} rows); use fewer shards."
        )
    return shards


def _check_shard_classes(k, n_rows, classes, present):
    missing = np.setdiff1d(classes, present)
    if len(missing):
        raise ValueError(
            f"Shard {k} ({n_rows} rows) has no sample of class(es) {missing.tolist()}; every "
            "shard must contain every class. Use fewer shards or split='stratified'."
        )


def _validation_rows(validation):
    """``(X, y, sample_weight)`` of the user's :class:`~._plan.Validation`
    rows, or None without them."""
    return None if validation is None else (validation.X, validation.y,
                                            validation.sample_weight)


#: Upper bound of ``server_learning_rate``: the server step multiplies the
#: averaged update of the shards by it; far larger values only throw the merged
#: model out of float32's range (or make every later local fit diverge).
_MAX_SERVER_LEARNING_RATE = 100.0

#: ``local_epochs="auto"`` with ``n_rounds > 1``: the rounds together may train
#: this many times the estimator's ``max_epochs``. Every merge gives back part of
#: the round's progress (the average of K models that drifted apart on their own
#: rows is not as far along as each of them), so rounds that only take the
#: full-data fit's epochs end behind it where that fit uses all of its epochs;
#: the round-level early stopping ends the rounds sooner where fewer suffice.
#: Measured in ``docs/sharded.md`` ("Three times the epochs per round": at
#: twice, electricity's class-skewed shards stayed 0.5-0.6 points behind).
_AUTO_ROUND_BUDGET = 3

#: ``local_epochs="auto"`` with ``n_rounds > 1``: the epochs of all rounds up
#: to which an estimator's ``max_epochs`` is read as the epochs of every round
#: (FedAvg's local epochs): three fits at the estimators' default
#: ``max_epochs=150``, what ``"auto"`` gives the full-data estimator passed as
#: it is. ``max_epochs=15`` with 10 rounds (the owner's acceptance protocol,
#: "the full fit's 150 epochs split across the 10 rounds") trains 15 epochs per
#: round, not ``ceil(3 * 15 / 10)`` = 5, a third of the full-data fit's epochs
#: (measured in ``docs/sharded.md``, "The acceptance protocol").
_AUTO_ROUND_CAP = _AUTO_ROUND_BUDGET * 150


def _auto_round_epochs(max_epochs, n_rounds):
    """The epochs of every round that ``local_epochs="auto"`` gives an
    estimator of ``max_epochs`` in ``n_rounds`` rounds: ``max_epochs`` for one
    round; else ``ceil(3 * max_epochs / n_rounds)`` (the rounds together train
    three full-data fits' epochs), or more: ``max_epochs`` per round while the
    rounds together stay within :data:`_AUTO_ROUND_CAP` epochs, and the cap
    shared by the rounds above it."""
    if n_rounds == 1:
        return max_epochs
    spread = -(-_AUTO_ROUND_BUDGET * max_epochs // n_rounds)
    return max(spread, min(max_epochs, -(-_AUTO_ROUND_CAP // n_rounds)))


class _ShardedData(NamedTuple):
    """The shards of a fit and what the fit needs of its rows.

    Attributes
    ----------
    shards : _LocalShards or _DaskShards
        Where the shard data lives.
    sizes : ndarray of shape (n_shards,)
        Rows per shard.
    weight_sums : list of float or None
        Sum of the sample weights per shard (None without sample weights).
    encoder : TabularEncoder
        The input encoding every shard shares.
    rows : tuple
        ``(X, y, sample_weight)`` of all training rows: as checked here for
        in-memory input, the dask collections for dask input (the leaf refit's).
    X_site : array-like or None
        The training rows at the merging site (activation matching), None for
        dask input.
    n_classes : int
        The classes of all shards (0 for a regression): the teacher's trees and
        the rounds' early stopping follow the estimator's rules for them
        (:func:`~sktree_lmc.training._plan.teacher_trees`,
        :func:`~sktree_lmc.training._plan.auto_early_stopping`).
    """

    shards: Any
    sizes: np.ndarray
    weight_sums: Any
    encoder: Any
    rows: tuple
    X_site: Any
    n_classes: int = 0


def _partition_sums(X, y, sample_weight, model):
    """:func:`~sktree_lmc.prediction_sums` of ``model`` on one partition (None
    for an empty one)."""
    if len(y) == 0:
        return None
    return prediction_sums(model, X, y, sample_weight)


def distributed_prediction_sums(model, X, y, sample_weight=None, *,
                                worker_timeout=WORKER_TIMEOUT):
    """:func:`~sktree_lmc.prediction_sums` of ``model`` over the rows ``X``,
    ``y`` (``sample_weight``): in memory, or for dask collections computed
    on the workers partition by partition, only the sums travelling (a
    :class:`WorkerLostError` names the partitions left when the workers are
    lost)."""
    if not is_dask_collection(X):
        return prediction_sums(model, X, y, sample_weight)
    X_parts, y_parts, w_parts = aligned_partitions(X, y, sample_weight)

    def describe(what, unfinished, why):
        return (f"fit stopped while {what}: {why}; partition(s) {unfinished} of "
                f"{len(X_parts)} did not finish.")

    session = DaskSession("fit", describe, worker_timeout=worker_timeout, unit="partition")
    Xf, yf, wf = session.partitions((X_parts, y_parts, w_parts))
    shared = session.send(model, "sending the merged model for its mean calibration")
    tasks = [session.submit(_partition_sums, x, t, wf[k] if wf else None, shared)
             for k, (x, t) in enumerate(zip(Xf, yf))]
    del Xf, yf, wf
    sums = session.gather(tasks, "summing the merged model's predictions")
    return PredictionSums.total(s for s in sums if s is not None)


def _estimator_has(attr):
    def check(self):
        if hasattr(self, "merged_"):
            return hasattr(self.merged_, attr)
        est = self.estimator if self.estimator is not None else SoftTreeEnsembleClassifier()
        return hasattr(est, attr)

    return check


class ShardedSoftTreeEnsemble(MetaEstimatorMixin, BaseEstimator):
    """Fit clones of a soft tree ensemble on disjoint shards in parallel, and merge them.

    The training rows are split into ``n_shards`` disjoint shards; a clone of
    ``estimator`` is fitted on each through :class:`joblib.Parallel` (on the
    active joblib backend: loky processes, dask or Ray), and the fitted models
    are aligned and averaged into one model of the same size
    (:class:`ModelAligner`). It is a classifier or a regressor as
    ``estimator`` is: ``predict``, ``predict_proba``, ``score`` and
    ``classes_`` are the merged model's. A worker sees its own shard only.
    With ``n_rounds > 1`` this is federated training with matched averaging.
    With a dask array or DataFrame as ``X`` the shards are its partitions,
    fitted where they live, and only parameters travel. Read more in
    ``docs/sharded.md``.

    Parameters
    ----------
    estimator : SoftTreeEnsembleClassifier or SoftTreeEnsembleRegressor, default=None
        The model to clone (unfitted). None means
        ``SoftTreeEnsembleClassifier()``.
    n_shards : int, default=4
        Number of shards ``K`` (at least 2).
    split : {"iid", "stratified", "class_skewed", "contiguous"}, default="iid"
        How rows are assigned to shards; see :func:`make_shards`. Every shard
        of a classifier must contain every class. Not used with dask input,
        whose shards are its partitions.
    skew : float in (0, 1), default=0.8
        Dominance of the ``"class_skewed"`` split (share of a shard's rows
        from its dominant class, for balanced classes).
    aligner : {"wm", "am", "naive"} or ModelAligner, default="wm"
        How the shard models are aligned before averaging: weight matching,
        activation matching (on training rows at the merging site, drawn from
        ``random_state`` when the aligner has none), plain averaging, or a
        :class:`ModelAligner` with other settings.
    merge_weights : {"size", "uniform"}, default="size"
        Weight of each shard model in the average: its number of rows (sum
        of sample weights) or equal.
    n_rounds : int, default=1
        Federated rounds ``R``; ``1`` is the one-shot merge. With ``R > 1``
        every shard continues from the merged model for ``local_epochs``
        epochs and the shard models are merged again. The rounds are one
        training run of the estimator: its learning-rate schedule spans all
        of them, and with ``early_stopping=True`` each shard holds out
        ``validation_fraction`` of its rows and the rounds stop when the
        merged model's validation loss has not improved by ``tol`` for
        ``max(2, ceil(n_iter_no_change / local_epochs))`` rounds (the model
        kept is the last round's whose validation loss is within one
        standard error of the best, as good within the noise of the
        validation rows and trained longer).
    local_epochs : "auto", int >= 1 or None, default="auto"
        Epochs each shard trains in every round. ``"auto"``: ``max_epochs``
        for one round; else ``ceil(3 * max_epochs / n_rounds)``, so the rounds
        may take three times the epochs of one full-data fit, since every
        merge gives back part of a round's progress, but never fewer than
        ``min(max_epochs, ceil(450 / n_rounds))``: a small ``max_epochs`` is
        the epochs of every round (``max_epochs=15``, 10 rounds: 15 per round;
        the default 150: 45 per round). Round-level early stopping ends them
        sooner. An int: that many per round. None: the estimator's
        ``max_epochs`` in every round.
    shard_fraction : float in (0, 1], default=1.0
        Client sampling (FedAvg's ``C``): after round 1, each round trains
        and merges a random ``max(2, round(shard_fraction * n_shards))`` of
        the shards; the others keep their models and wait.
    keep_optimizer_state : bool, default=True
        Whether each shard keeps its Adam state across rounds (mapped into
        the merged model's basis) instead of restarting Adam every round.
    server_momentum : float in [0, 1), default=0.0
        Momentum on the merged model's updates across rounds (FedAvgM); 0 is
        plain averaging.
    server_learning_rate : float in (0, 100], default=1.0
        Step size of the server on the shards' averaged update (1: plain
        averaging); a step that leaves a non-finite model is a ``ValueError``.
    first_round_epochs : int >= 1, default=None
        Local epochs of round 1 (None: ``local_epochs``).
    shard_init : {"independent", "shared"}, default="independent"
        How the shard models of round 1 start: from their own seeds (the
        independently trained models whose alignment the paper studies), or
        all from the first shard's seed, as FedAvg's clients start from the
        server's model.
    shard_batch_size : "auto", int or None, default="auto"
        Minibatch size of the shard fits. ``"auto"``: the estimator's
        ``batch_size`` times the shard's share of the rows, so that a shard
        takes as many Adam steps per epoch as a fit on all rows and the
        full-data estimator can be passed as it is. An int: that size; None:
        the estimator's.
    refit_leaves : bool, default=False
        Re-solve the merged model's leaves on all training rows at the end
        (:func:`refit_leaves`; federated, on the workers, for dask input).
    teacher : {"auto", "averaged", "shared", "local"}, default="auto"
        Where the gradient-boosted teacher of ``teacher_weight > 0`` grows.
        ``"auto"``: ``"averaged"`` for a one-shot merge (``n_rounds=1``),
        ``"shared"`` for federated rounds (``n_rounds > 1``), which bring the
        merged model to the full-data model's level, where the student of
        an averaged teacher stays behind it (``teacher_kind_`` says which
        ran). ``"averaged"``: each shard grows a teacher on its own rows and
        sends its trees (a few hundred bytes each; ``boosting_bytes_``), and
        every shard distills their average, weighted by the shards' rows, and
        draws its features by the sum of their gains: the same teacher
        everywhere, in one exchange; an average of teachers that each saw
        ``1 / n_shards`` of the rows, less accurate than one grown on all of
        them. ``"shared"``: one teacher grown over all shards from the
        histograms they send, level after level (no row moves): the teacher
        of a boosting on all rows, for far more bytes than the rows
        themselves. One-shot merges are no more accurate than with
        ``"averaged"``, but federated rounds gain from it (see
        ``docs/sharded.md``, "The teacher of federated rounds").
        ``"local"``: each shard grows its own on its rows, as a lone
        estimator does, distills it alone and sends nothing for it (less
        accurate once merged: the shards distill different teachers).
        ``split_init="boosting"``'s start is grown over all shards whatever
        the teacher (every shard must start from the same trees).
    round_speedup : bool, default=True
        With ``n_rounds > 1`` and round-level early stopping: once a round
        has lowered the merged model's validation loss by more than two
        standard errors of the change (paired by validation rows: the model
        is clearly under-trained), the later rounds train three times the
        local epochs (each still within its share of the learning-rate
        schedule) at the estimator's ``learning_rate`` times ``sqrt(batch_size
        / shard batch size)`` (``sqrt(n_shards)`` with
        ``shard_batch_size="auto"``): Adam's steps on minibatches
        ``1 / n_shards`` the size make about ``sqrt(n_shards)`` times less
        progress where the gradient noise dominates, so rounds at the
        estimator's own pace end behind the full-data fit where it trains
        all of its epochs. A sped-up round that raises the validation loss by
        more than two standard errors is dropped: the next round starts
        again from where it started, at the estimator's pace from then on
        (``history_`` marks ``sped_up`` and ``speedup_dropped`` rounds).
        See ``docs/sharded.md``, "Under-trained rounds".
    checkpoint : str, path-like or callable, default=None
        After every round, the state to resume from (merged and shard models,
        Adam states, history; parameters only, never rows), written
        atomically to this file with a checksum, or passed to this callable as
        a dict. ``fit(X, y, resume_from=...)`` continues from it after
        checking that the settings and the input encoding are the same. A
        path names the file (not a directory; ``<path>.tmp`` is written
        beside it, then renamed). The file holds plain data only (read with
        ``torch.load(weights_only=True)``; the package's own types and the
        encoder's ``QuantileTransformer`` are rebuilt, any other type is
        refused), so reading it runs no code; its checksum detects damage,
        not tampering: resume only from files of a source you trust to hold
        the model you want. Settings that are not plain values (a callable
        ``scoring``) cannot be written to a file: use a callable.
    worker_timeout : float > 0, default=60.0
        Dask input only: the longest time, in seconds, that the fit waits
        while the scheduler has no worker alive (workers that come back cost
        only what dask recomputes). Then, or when a task is lost with its
        workers, :class:`~sktree_lmc.WorkerLostError` names the round and the
        unfinished shards. Long tasks on live workers are never timed out.
    n_jobs : int, default=None
        Passed to :class:`joblib.Parallel` (not 0); None uses the active
        backend's default.
    random_state : int, RandomState instance or None, default=None
        Seeds the split and the clones (shard ``k``'s clone gets
        ``random_state=seed_k``, drawn in order), so the result does not
        depend on the backend or the number of jobs.
    verbose : int, default=0
        ``1``: progress over rounds (a bar on a terminal, else a line per
        round with the merged model's losses); ``2``: lines even on a
        terminal; ``3`` or more: also :class:`joblib.Parallel`'s messages.

    Attributes
    ----------
    estimators_ : list of estimators
        The fitted shard models (in their own bases), each shard's latest.
    merged_ : estimator
        The merged model, used for prediction. A regressor whose loss
        predicts the mean (``"squared_error"``, ``"poisson"``, ``"gamma"``)
        has its mean prediction over the training rows set to the targets'
        (:func:`~sktree_lmc.calibrate_mean`, from sums computed per shard, or per
        partition on the workers for dask input).
    aligner_ : ModelAligner
        The fitted N-way aligner of the last round.
    shard_indices_ : list of ndarray or None
        Row indices of every shard (None for dask input).
    shard_partitions_ : list of list of int
        Partitions of every shard (dask input only).
    shard_sizes_ : ndarray of shape (n_shards,)
        Rows per shard.
    weights_ : ndarray of shape (n_merged,)
        Normalized merge weights of the shards merged in the last round
        (``history_[-1]["shards"]``).
    n_iter_ : int
        Rounds run (``n_rounds_``; fewer than ``n_rounds`` when round-level
        early stopping stopped), as ``n_iter_`` counts epochs for the
        estimators.
    teacher_kind_ : {"averaged", "shared", "local"} or None
        The teacher the shards distilled (``teacher``, with ``"auto"``
        decided; ``"shared"`` where an averaged teacher fell back to it, or
        for ``split_init="boosting"``, whose start is the teacher). None
        without a teacher (``teacher_weight=0``).
    boosting_bytes_ : int or None
        Bytes the shards sent while the gradient-boosted trees of
        ``teacher_weight > 0`` or ``split_init="boosting"`` were grown over
        all of them (before round 1): histograms, or with
        ``teacher="averaged"`` their own trees (the average goes back to
        every shard: ``n_shards`` times these bytes). None when none were
        (the estimator uses neither, or ``teacher="local"`` without
        ``split_init="boosting"``).
    n_alignment_sweeps_ : int
        Refinement sweeps of the last round's N-way alignment
        (``aligner_.n_iter_``).
    encoder_ : TabularEncoder
        The input encoding of every shard model and of the merged model,
        fitted once before the shards train: on all rows, or for dask input
        from the partitions' summaries (:meth:`TabularEncoder.from_summaries`).
    n_rounds_ : int
        Rounds run (fewer than ``n_rounds`` when early stopping ended them).
    history_ : list of dict
        One entry per round: ``round``, ``shards`` (those merged),
        ``train_loss`` and ``validation_loss`` (the merged model's, None
        without early stopping), ``bytes_sent`` and ``bytes_received`` (the
        parameters sent to and received from the shards) and ``wall_time``
        (seconds); with ``round_speedup`` (from round 2 on) ``sped_up``
        (whether the round trained faster), ``speedup_next`` (whether the
        next one does) or ``speedup_dropped`` (the round made the merged
        model clearly worse and was retried).
    classes_ : ndarray of shape (n_classes,)
        Class labels (classifiers only).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when ``X`` has string column names.

    See Also
    --------
    merge_estimators : Merge fitted models (two, or a list).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier
    >>> X, y = make_classification(n_samples=600, random_state=0)
    >>> base = SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, device="cpu")
    >>> sharded = ShardedSoftTreeEnsemble(base, n_shards=3, random_state=0).fit(X, y)
    >>> len(sharded.estimators_), sharded.shard_sizes_.tolist()
    (3, [200, 200, 200])
    >>> sharded.predict_proba(X[:2]).shape
    (2, 2)

    Federated rounds (``local_epochs="auto"``: 10 epochs per round here):

    >>> rounds = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=5,
    ...                                  random_state=0).fit(X, y)
    >>> [h["round"] for h in rounds.history_]
    [1, 2, 3, 4, 5]

    On a dask cluster (the ``distributed`` extra), with the
    data where it lives (one shard per partition, only parameters travel)::

        from dask.distributed import Client
        import dask.dataframe as dd
        client = Client("scheduler-address:8786")
        X, y = dd.read_parquet("features/"), dd.read_parquet("labels/")["label"]
        ShardedSoftTreeEnsemble(base, n_shards=8, n_rounds=10).fit(X, y)

    or, with in-memory arrays, the shard fits on the cluster through joblib::

        from joblib import parallel_config
        with parallel_config(backend="dask"):
            sharded.fit(X, y)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "n_shards": [_NumberInterval(Integral, 2, None, closed="left")],
        "split": [StrOptions({"iid", "stratified", "class_skewed", "contiguous"})],
        "skew": [_NumberInterval(Real, 0, 1, closed="neither")],
        "aligner": [StrOptions(set(ALIGNER_SHORTCUTS)), ModelAligner],
        "merge_weights": [StrOptions({"size", "uniform"})],
        "n_rounds": [_NumberInterval(Integral, 1, None, closed="left")],
        "keep_optimizer_state": ["boolean"],
        "server_momentum": [_NumberInterval(Real, 0, 1, closed="left")],
        "server_learning_rate": [
            _NumberInterval(Real, 0, _MAX_SERVER_LEARNING_RATE, closed="right")
        ],
        "local_epochs": [StrOptions({"auto"}), _NumberInterval(Integral, 1, None, closed="left"),
                         None],
        "shard_fraction": [_NumberInterval(Real, 0, 1, closed="right")],
        "first_round_epochs": [_NumberInterval(Integral, 1, None, closed="left"), None],
        "shard_init": [StrOptions({"independent", "shared"})],
        "checkpoint": [str, os.PathLike, callable, None],
        "worker_timeout": [_NumberInterval(Real, 0, None, closed="neither")],
        "shard_batch_size": [StrOptions({"auto"}),
                             _NumberInterval(Integral, 1, None, closed="left"), None],
        "refit_leaves": ["boolean"],
        "teacher": [StrOptions({"auto", "averaged", "shared", "local"})],
        "round_speedup": ["boolean"],
        "n_jobs": [
            _NumberInterval(Integral, 1, None, closed="left"),
            _NumberInterval(Integral, None, -1, closed="right"),
            None,
        ],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator=None, *, n_shards=4, split="iid", skew=0.8, aligner="wm",
                 merge_weights="size", n_rounds=1, local_epochs="auto", shard_fraction=1.0,
                 keep_optimizer_state=True, server_momentum=0.0, server_learning_rate=1.0,
                 first_round_epochs=None, shard_init="independent", shard_batch_size="auto",
                 refit_leaves=False, teacher="auto", round_speedup=True,
                 checkpoint=None, worker_timeout=60.0, n_jobs=None, random_state=None,
                 verbose=0):
        self.estimator = estimator
        self.n_shards = n_shards
        self.split = split
        self.skew = skew
        self.aligner = aligner
        self.merge_weights = merge_weights
        self.n_rounds = n_rounds
        self.local_epochs = local_epochs
        self.shard_fraction = shard_fraction
        self.keep_optimizer_state = keep_optimizer_state
        self.server_momentum = server_momentum
        self.server_learning_rate = server_learning_rate
        self.first_round_epochs = first_round_epochs
        self.shard_init = shard_init
        self.shard_batch_size = shard_batch_size
        self.refit_leaves = refit_leaves
        self.teacher = teacher
        self.round_speedup = round_speedup
        self.checkpoint = checkpoint
        self.worker_timeout = worker_timeout
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _checkpoint_writer(self):
        """A callable for ``run_rounds`` from ``checkpoint`` (None, a callable,
        or a path written atomically, with a checksum, after every round; a
        directory is a ValueError)."""
        if self.checkpoint is None or callable(self.checkpoint):
            return self.checkpoint
        path = os.fspath(self.checkpoint)
        check_checkpoint_path(path)
        return lambda state: write_checkpoint(state, path, checkpoint_types())

    def _config(self, X, y, sample_weight, resume_from):
        """The configuration checkpoints are written under and checked
        against (:func:`config_of`), with the fingerprint of the training
        rows in their order when this fit writes or resumes a checkpoint."""
        config = config_of(self)
        if self.checkpoint is not None or resume_from is not None:
            config["rows"] = rows_fingerprint(X, y, sample_weight)
        return config

    def _resume_state(self, resume_from, config):
        """The :class:`RoundState` of ``resume_from`` (a path or a dict),
        checked against this fit's settings (``config``: :meth:`_config`)."""
        if resume_from is None:
            return None
        state = read_checkpoint(resume_from, checkpoint_types())
        if len(state.shards) != self.n_shards:
            raise ValueError(
                f"resume_from holds {len(state.shards)} shard models but n_shards="
                f"{self.n_shards}."
            )
        state.check_resumable(config, self.n_rounds)
        return state

    def _shard_batch_sizes(self, base):
        """Minibatch size of every shard's fit (None: the estimator's).

        ``"auto"``: the estimator's ``batch_size`` times the shard's share of
        the rows, so that every shard takes as many optimizer steps per epoch
        as a fit of the estimator on all rows would.
        """
        if self.shard_batch_size is None or "batch_size" not in base.get_params():
            return [None] * self.n_shards
        if self.shard_batch_size != "auto":
            return [int(self.shard_batch_size)] * self.n_shards
        sizes = np.asarray(self.shard_sizes_, dtype=np.float64)
        share = sizes / sizes.sum()
        return [max(1, int(round(base.batch_size * f))) for f in share]

    def _round_epochs(self, base):
        """Local epochs of every round (``local_epochs``, ``first_round_epochs``)."""
        if self.local_epochs is None:
            per_round = base.max_epochs
        elif self.local_epochs == "auto":
            per_round = _auto_round_epochs(base.max_epochs, self.n_rounds)
        else:
            per_round = int(self.local_epochs)
        first = per_round if self.first_round_epochs is None else int(self.first_round_epochs)
        return [first] + [per_round] * (self.n_rounds - 1)

    def _base_estimator(self):
        return self.estimator if self.estimator is not None else SoftTreeEnsembleClassifier()

    def _is_classifier(self):
        return get_tags(self._base_estimator()).estimator_type == "classifier"

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None, sample_weight_val=None,
            resume_from=None):
        """Split the data into shards, fit one clone per shard, merge; ``n_rounds`` times.

        Parameters
        ----------
        X : array-like, dask array or dask DataFrame of shape (n_samples, n_features)
            Training data, as the estimator takes it (a DataFrame may hold
            string, ``category`` and missing values). The input encoder
            (``encoder_``) is fitted once, before the shards train, and
            every shard encodes with it. A dask collection (``distributed``
            extra, with a running ``dask.distributed.Client``) is never
            gathered to the client: its partitions are the shards (groups of
            consecutive partitions when there are more partitions than
            ``n_shards``), the encoder is fitted from summaries of the shards
            computed on the workers (quantile sketches of the numeric
            columns, category counts), the shard fits run on the workers, and
            only parameters and summaries travel.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets; a dask collection partitioned like ``X`` when ``X`` is one.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights, passed to each shard's fit with its rows
            (partitioned like ``X`` for dask input).
        X_val : array-like or DataFrame of shape (n_val, n_features), default=None
            Validation rows of your own (in memory, where ``fit`` runs), as
            in the estimator's ``fit``: with ``n_rounds > 1`` the rounds stop
            on the merged model's loss on them (computed here; no shard holds
            out rows), with one round every shard's fit early-stops on them
            (they are sent to the shards), and the shared teacher's trees are
            chosen on them. Needs ``early_stopping`` ``"auto"`` or True.
        y_val : array-like of shape (n_val,) or (n_val, n_targets), default=None
            Labels or targets of ``X_val``.
        sample_weight_val : array-like of shape (n_val,), default=None
            Weights of the validation rows.
        resume_from : str, path-like or dict, default=None
            A checkpoint written by ``checkpoint`` (the file, or the state
            given to a callable): the rounds continue after the checkpoint's
            round, with its merged model, shard models and Adam states, as if
            they had not been interrupted (same data, same settings; the
            result equals an uninterrupted fit's).

        Returns
        -------
        self : ShardedSoftTreeEnsemble
            The fitted meta-estimator.
        """
        clock = Stopwatch()  # the steps before the first round, for verbose
        base, validation = self._checked_estimator(X_val, y_val, sample_weight_val)
        config = self._config(X, y, sample_weight, resume_from)
        resume = self._resume_state(resume_from, config)  # before any work: a clear error first
        self._checkpoint_writer()  # a checkpoint path that is a directory: an error first
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=self.n_shards)
        data = self._shard_data(X, y, sample_weight, rng, base)
        self._set_encoder(data.encoder, resume)
        self.shard_sizes_ = data.sizes
        clock.lap(f"encoded {int(np.sum(data.sizes))} rows in {self.n_shards} shards into "
                  f"{data.encoder.n_features_out_} features")
        rounds_es = self._rounds_early_stopping(base, validation, data.n_classes)
        if rounds_es and validation is None:
            data.shards.hold_out(base.validation_fraction, seeds)
        shared_trees = self._trees_for_shards(data, base, validation, clock)
        epochs = self._round_epochs(base)
        clones = self._clones(base, seeds, epochs[0], rounds_es)
        first_plan = self._first_plan(clones[0], data.encoder, shared_trees,
                                      None if rounds_es else validation, seeds[0])
        rounds_validation = self._rounds_validation(base, epochs, validation) if rounds_es else None
        settings = self._round_settings(epochs, seeds, first_plan, rounds_validation, config)
        merge = self._merge_step(base, rng, data.X_site)
        progress = ProgressLog(type(self).__name__, self.n_rounds, self.verbose, unit="round",
                               clock=clock)
        result = run_rounds(data.shards, clones, self._merge_weights(data), merge, settings,
                            progress=progress, checkpoint=self._checkpoint_writer(),
                            resume=resume)
        self._set_rounds_result(result, data)
        progress.close(f"merged {self.n_shards} shards in {self.n_rounds_} rounds")
        return self

    # -- the steps of fit ---------------------------------------------------------------
    def _checked_estimator(self, X_val, y_val, sample_weight_val):
        """The estimator to clone (a soft tree ensemble, else a TypeError) and
        the user's :class:`Validation` rows (None without them; a ValueError
        when the estimator's ``early_stopping`` is False)."""
        base = self._base_estimator()
        if not isinstance(base, _BaseSoftTreeEnsemble):
            raise TypeError(
                "estimator must be a SoftTreeEnsembleClassifier or SoftTreeEnsembleRegressor, "
                f"got {type(base).__name__}."
            )
        validation = Validation.from_fit_params(X_val, y_val, sample_weight_val)
        if validation is not None and base.early_stopping is False:
            raise ValueError(
                "X_val and y_val are passed to fit while the estimator's early_stopping is "
                "False. When passing X_val and y_val to fit, set early_stopping to 'auto' or "
                "True."
            )
        return base, validation

    def _shard_data(self, X, y, sample_weight, rng, base):
        """The shards (:meth:`_local_shards` or, for dask input,
        :meth:`_dask_shards`) with the encoder they share: a
        :class:`_ShardedData`."""
        if is_dask_collection(X):
            return self._dask_shards(X, y, sample_weight, self._is_classifier(), base)
        return self._local_shards(X, y, sample_weight, self._is_classifier(), rng, base)

    def _set_encoder(self, encoder, resume):
        """``encoder_``: one encoder for every shard (fitted on all rows, or from
        the partitions' summaries), so that the shard models see the same
        features and merge; a ValueError when it differs from the encoder of
        the checkpoint ``resume`` (a :class:`RoundState`, or None)."""
        self.encoder_ = encoder
        differ = None if resume is None else encoders_differ(resume.merged.encoder_, encoder)
        if differ:
            raise ValueError(
                "resume_from was written by a fit on other data: the input encoding fitted "
                f"now differs from the checkpoint's ({differ}). Resume with the data of the "
                "interrupted fit."
            )

    def _merge_weights(self, data):
        """The merge weight of every shard (``merge_weights``): 1, its rows, or
        the sum of its sample weights."""
        if self.merge_weights == "uniform":
            return np.ones(self.n_shards)
        if data.weight_sums is None:
            return np.asarray(data.sizes).astype(np.float64)
        return np.asarray(data.weight_sums, dtype=np.float64)

    def _rounds_early_stopping(self, base, validation, n_classes=0):
        """Whether the rounds early-stop (several rounds; ``"auto"``: on all
        shards' rows of ``n_classes`` classes, as one fit of the estimator
        decides). One round: each shard's fit decides for itself."""
        if self.n_rounds <= 1:
            return False
        if base.early_stopping == "auto":
            return auto_early_stopping(int(np.sum(self.shard_sizes_)), validation is not None,
                                       n_classes)
        return base.early_stopping

    def _trees_for_shards(self, data, base, validation, clock):
        """The teacher / boosted start of every shard of ``data`` (a
        :class:`_ShardedData`), grown over all shards
        (:meth:`_grow_shared_trees`): ``(trees, gains)``, ``(None, None)``
        without them; ``clock`` laps with what was grown."""
        trees, gains, averaged = self._grow_shared_trees(
            data.shards, base, data.encoder, _validation_rows(validation),
            n_classes=data.n_classes)
        if trees is not None:
            sent = f"{self.boosting_bytes_ / 1e3:,.0f} kB"
            if averaged:
                clock.lap(f"the teacher: the average of the {self.n_shards} shards' own "
                          f"({len(trees[1])} boosted trees, {sent} of trees received)")
            else:
                clock.lap(f"the shared teacher: {len(trees[1])} boosted trees grown over "
                          f"{self.n_shards} shards ({sent} of histograms received)")
        return trees, gains

    def _clones(self, base, seeds, max_epochs, rounds_es):
        """One unfitted clone of ``base`` per shard, for round 1: its batch size
        (:meth:`_shard_batch_sizes`), its seed, ``max_epochs``, and no early
        stopping of its own when the rounds early-stop."""
        clones = []
        # "shared": one seed, the first shard's, starts every shard model; the
        # per-shard seeds still draw the shards' validation rows (of the rounds), and
        # a shard fit's own validation split comes from a generator apart, so that
        # shards of different sizes draw the same start after it
        model_seeds = [seeds[0]] * len(seeds) if self.shard_init == "shared" else seeds
        for seed, batch_size in zip(model_seeds, self._shard_batch_sizes(base)):
            est = clone(base)
            if batch_size is not None and "batch_size" in est.get_params():
                est.set_params(batch_size=batch_size)
            if "random_state" in est.get_params():
                est.set_params(random_state=int(seed))
            if rounds_es:
                est.set_params(early_stopping=False)
            est.set_params(max_epochs=max_epochs)
            clones.append(est)
        return clones

    def _first_plan(self, first_clone, encoder, shared_trees, validation, seed):
        """The :class:`FitPlan` of round 1's fits: every shard encodes with the
        shared ``encoder``, learns from the ``shared_trees`` (``(trees,
        gains)``), early-stops on the user's ``validation`` rows (None: its
        own, or none), and (several rounds) keeps Adam's state; with
        ``shard_init="shared"`` every shard draws its splits from ``seed``."""
        trees, gains = shared_trees
        return FitPlan(
            encoder=encoder, boosting_trees=trees, feature_gains=gains, validation=validation,
            split_seed=(_torch_seed(int(seed), offset=1) if self.shard_init == "shared"
                        else None),
            recipe=Recipe.from_estimator(first_clone, keep_optimizer_state=(
                (self.n_rounds > 1 and self.keep_optimizer_state) or first_clone.warm_start)))

    def _rounds_validation(self, base, epochs, validation):
        """The round-level early stopping: the estimator's ``tol``, its patience
        in epochs as rounds of local ``epochs`` (at least two rounds, so that
        one noisy merge does not end the run: the estimator checks every
        epoch, the rounds only every ``local_epochs`` epochs), on the user's
        ``validation`` rows or, without them, on the shards' held-out rows."""
        patience = max(2, -(-base.n_iter_no_change // max(1, epochs[-1])))
        return RoundsValidation(base.tol, patience, _validation_rows(validation))

    def _round_settings(self, epochs, seeds, first_plan, validation, config):
        """The :class:`RoundSettings` of :func:`run_rounds`. The rounds are one
        run: round ``r``'s local fit takes the epochs ``[before, before +
        epochs[r])`` of a schedule over ``sum(epochs)`` epochs."""
        windows = [(sum(epochs[:r]), sum(epochs)) for r in range(self.n_rounds)]
        return RoundSettings(
            n_rounds=self.n_rounds, keep_optimizer=self.keep_optimizer_state,
            server_momentum=self.server_momentum,
            server_learning_rate=self.server_learning_rate, validation=validation,
            first_plan=first_plan, later_recipe={"max_epochs": epochs[-1]},
            schedule_windows=windows if self.n_rounds > 1 else None,
            shard_fraction=self.shard_fraction, sample_seed=seeds, config=config,
            speedup=self._speedup(validation))

    def _speedup(self, validation):
        """The :class:`RoundsSpeedup` of ``round_speedup`` (None without it,
        with one round, or without round-level early stopping: ``validation``
        None): :data:`_AUTO_ROUND_BUDGET` times the local epochs, at the
        estimator's learning rate times ``sqrt(batch_size / shard batch
        size)`` (at least 1; Adam's steps on a batch ``1 / K`` the size make
        ``sqrt(K)`` times less progress where the gradient noise dominates)."""
        if not self.round_speedup or validation is None or self.n_rounds < 2:
            return None
        base = self._base_estimator()
        sizes = [b for b in self._shard_batch_sizes(base) if b is not None]
        ratio = base.batch_size / np.mean(sizes) if sizes else 1.0
        rate = float(base.learning_rate)
        return RoundsSpeedup(rate * max(1.0, float(np.sqrt(ratio))), rate, _AUTO_ROUND_BUDGET)

    def _merge_step(self, base, rng, X_site):
        """``merge(models, weights, same_start) -> (merged model, aligner)``
        of :func:`run_rounds`: the fitted ``aligner`` (its rows, for
        activation matching: ``X_site``; its seed, when it has none: ``rng``),
        then the weighted average, under the estimator's thread policy."""
        aligner = check_aligner(self.aligner)
        if aligner.random_state is None:
            aligner.set_params(random_state=rng)
        classifier = self._is_classifier()

        def merge(models, w, same_start=False):
            # same_start: the shard models all continued from the last merged model,
            # so the alignment first tries them as they are (one checking sweep)
            with torch_threads(base.n_threads):  # the estimator's thread policy for the merge
                aligner._fit(models, X_site, weights=w,
                             start="identity" if same_start else None)
                merged = combine(models, aligner.aligned_params(models), aligner.weights_,
                                 classifier=classifier)
            return merged, copy.copy(aligner)  # a snapshot of this round's fitted aligner

        return merge

    def _set_rounds_result(self, result, data):
        """The fitted attributes from the rounds' :class:`RoundsResult`, the
        merged model's leaves refitted on all training rows first
        (``refit_leaves``)."""
        self.estimators_ = result.estimators
        self.merged_, self.aligner_ = result.merged, result.aligner
        if self.refit_leaves:
            # dask input: the federated refit (the rows stay on the workers; only
            # the leaf values and gradient sums travel per evaluation)
            self.merged_ = refit_leaves(self.merged_, *data.rows,
                                        worker_timeout=self.worker_timeout)
        if has_mean_loss(self.merged_):
            # averaging the shards' outputs moves the mean (the log link's geometric
            # mean: 20-28 % low on counts after one round); one sum per partition sets it
            sums = distributed_prediction_sums(self.merged_, *data.rows,
                                               worker_timeout=self.worker_timeout)
            self.merged_ = calibrate_mean(self.merged_, sums)
        self.history_, self.n_rounds_ = result.history, result.n_rounds
        self.weights_ = self.aligner_.weights_
        self.n_iter_ = self.n_rounds_
        self.n_alignment_sweeps_ = self.aligner_.n_iter_
        if self._is_classifier():
            self.classes_ = self.merged_.classes_

    def _grow_shared_trees(self, shards, base, encoder, validation=None, *, n_classes=0):
        """The gradient-boosted trees of ``teacher_weight > 0`` and
        ``split_init="boosting"`` that every shard shares, the gains of their
        splits per encoded feature, and whether they are the average of the
        shards' own (:meth:`_averaged_teacher`) rather than grown over all
        shards from their histograms (:meth:`_shared_teacher`); ``(None,
        None, False)`` when the shards share none. The prefix of the trees is
        chosen on the user's ``validation`` rows ``(X, y, sample_weight)``,
        or on those held out at the shards (round-level early stopping), if
        any. A teacher grows as many trees as one fit's teacher of ``n_classes``
        classes (:func:`~sktree_lmc.training._plan.teacher_trees`); a boosted
        start, ``n_estimators``."""
        self.boosting_bytes_ = None
        boosted = base.split_init == "boosting"
        n_trees = base.n_estimators if boosted else teacher_trees(base.n_estimators, n_classes)
        teacher = self._teacher_kind()
        # the boosted start's trees are grown over all shards, and are the teacher
        self.teacher_kind_ = None if not base.teacher_weight > 0 else (
            "shared" if boosted else teacher)
        if not boosted and teacher == "averaged" and base.teacher_weight > 0:
            trees, gains, averaged = self._averaged_teacher(shards, base, encoder, validation,
                                                            n_trees=n_trees)
            self.teacher_kind_ = "averaged" if averaged else "shared"
            return trees, gains, averaged
        if not (boosted or (base.teacher_weight > 0 and teacher == "shared")):
            return None, None, False  # teacher="local": every shard grows its own
        if boosted and base.max_features not in (None, 1.0):
            raise ValueError(
                "split_init='boosting' in ShardedSoftTreeEnsemble grows one boosted start for "
                "every shard, on every feature, but the shard models draw their own feature "
                f"subsets (max_features={base.max_features!r}): set max_features=None."
            )
        return (*self._shared_teacher(shards, base, encoder, validation, n_trees=n_trees), False)

    def _teacher_kind(self):
        """``teacher`` with ``"auto"`` decided: ``"shared"`` for federated
        rounds, ``"averaged"`` for a one-shot merge. The rounds take the
        merged model to the full-data model's level, and the student of an
        average of teachers grown on ``1 / n_shards`` of the rows each stays
        behind it there (``docs/sharded.md``, "The teacher of federated
        rounds"); a one-shot merge is as accurate with either."""
        if self.teacher != "auto":
            return self.teacher
        return "shared" if self.n_rounds > 1 else "averaged"

    def _shared_teacher(self, shards, base, encoder, validation=None, *, n_trees):
        """The ``n_trees`` trees grown over all shards from their histograms,
        and their gains per encoded feature (``boosting_bytes_``: the
        histograms' bytes)."""
        sites = shards.boosting_sites(clone(base), encoder, validation)
        # verbose: about ten lines while the trees grow, with the bytes and the time left
        log = ProgressLog(f"{type(self).__name__} teacher", n_trees,
                          min(self.verbose, 2), unit="tree")
        every = max(1, n_trees // 10)

        def on_tree(m):
            if (m + 1) % every == 0 or m + 1 == n_trees:
                log.step(m, MB_received=sites.bytes_received / 1e6)
        n_outputs = sites.call(("shape", ()))[0][0][2]
        gains = np.zeros((n_trees, base.depth))
        with torch_threads(base.n_threads):
            trees = grow_shared_trees(sites, loss=objective_from_params(
                                          base.get_params(deep=False),
                                          classifier=is_classifier(base)).loss,
                                      n_trees=n_trees, depth=base.depth,
                                      n_outputs=n_outputs, on_tree=on_tree, gains=gains)
        log.close()
        self.boosting_bytes_ = sites.bytes_received
        return trees, feature_gains(trees[1], gains, encoder.n_features_out_)

    def _averaged_teacher(self, shards, base, encoder, validation=None, *, n_trees):
        """``teacher="averaged"``: every shard grows the teacher's trees on its
        own rows (the prefix chosen on its held-out rows, or on the user's
        ``validation`` rows, which every shard then gets) and sends them,
        never a histogram; the teacher of every shard is their average,
        weighted by the shards' weight sums, and its feature gains are the
        sum of theirs (:func:`averaged_site_trees`: a shard whose training
        rows lack a class is left out). When every shard lacks a class, the
        teacher is grown over all shards, as ``teacher="shared"`` does.
        Returns the trees, their gains and whether they are the average."""
        sites = shards.boosting_sites(clone(base), encoder, validation, every_site=True)
        with torch_threads(base.n_threads):
            out = sites.call(("base_sums", ()), ("grow", (n_trees, base.depth)))
        self.boosting_bytes_ = sites.bytes_received
        averaged = averaged_site_trees(out, objective_from_params(
            base.get_params(deep=False), classifier=is_classifier(base)).loss, encoder.n_features_out_)
        if averaged is not None:
            return (*averaged, True)
        bytes_sent = self.boosting_bytes_
        shared = self._shared_teacher(shards, base, encoder, validation, n_trees=n_trees)
        self.boosting_bytes_ += bytes_sent
        return (*shared, False)

    def _local_shards(self, X, y, sample_weight, is_clf, rng, base):
        # X as the estimators take it (DataFrames with strings, categories and
        # missing values too): checked here for its features, encoded by the
        # shared encoder fitted once on all rows, and shared out by rows.
        X, columns, by_dtype = rows_and_columns(X)
        validate_data(self, X, y, skip_check_array=True)
        y = _check_y(y, multi_output=not is_clf, y_numeric=not is_clf, estimator=self)
        check_consistent_length(X, y)
        if is_clf:
            check_classification_targets(y)
        if sample_weight is not None:
            # checked as the estimators check theirs: in float64, rescaled by a
            # power of two when subnormal or huge (only the ratios matter), then
            # float32 (the shards' copies)
            sample_weight = rescaled_weights(_check_sample_weight(
                sample_weight, X, dtype=np.float64, ensure_non_negative=True))
            if not sample_weight.sum() > 0:
                raise ValueError("sample_weight sums to zero: there is nothing to fit.")
            sample_weight = sample_weight.astype(np.float32)
        n = _num_samples(X)
        if n < 2 * self.n_shards:
            raise ValueError(
                f"n_shards={self.n_shards} needs at least {2 * self.n_shards} samples, got "
                f"n_samples={n}."
            )
        encoder = self._make_encoder(base, columns, by_dtype, sample_weight)
        shards = make_shards(y, self.n_shards, self.split, skew=self.skew,
                             is_classifier=is_clf, random_state=rng)
        if is_clf:
            classes = np.unique(y)
            for k, idx in enumerate(shards):
                _check_shard_classes(k, len(idx), classes, np.unique(y[idx]))
        self.shard_indices_ = shards
        if hasattr(self, "shard_partitions_"):  # from an earlier fit on dask input
            del self.shard_partitions_
        sizes = np.array([len(idx) for idx in shards])
        weight_sums = None if sample_weight is None else [
            sample_weight[i].sum(dtype=np.float64) for i in shards]
        # joblib's own progress (verbose >= 3) only where stderr takes it
        local = _LocalShards(X, y, sample_weight, shards, n_jobs=self.n_jobs,
                             verbose=10 if self.verbose >= 3 and writable(sys.stderr) else 0)
        return _ShardedData(local, sizes, weight_sums, encoder, rows=(X, y, sample_weight),
                            X_site=X, n_classes=len(classes) if is_clf else 0)

    def _make_encoder(self, base, columns, by_dtype, sample_weight=None):
        """The encoder of all shards, fitted once on all training columns by the
        estimator's own rule (its ``categorical_features`` and encoding settings,
        this estimator's feature names; rows of zero weight left out), or the
        estimator's ``encoder`` (checked against the columns), as
        :meth:`_dask_shards` does from the shards' summaries."""
        names = getattr(self, "feature_names_in_", None)
        if base.encoder is not None:
            return _check_given_encoder(base.encoder, columns, names)
        return fit_encoding(columns, by_dtype, names, settings=base.get_params(deep=False),
                            sample_weight=sample_weight)

    def _dask_shards(self, X, y, sample_weight, is_clf, base):
        if check_aligner(self.aligner).method == "am":
            raise ValueError("Activation matching (aligner='am') needs rows at the merging "
                             "site; with dask input use aligner='wm' (parameters only) or "
                             "'naive'.")
        shards = _DaskShards(X, y, sample_weight, self.n_shards, is_clf,
                             worker_timeout=self.worker_timeout)
        info = shards.summaries
        n_features = {s["n_features"] for s in info}
        if len(n_features) != 1:
            raise ValueError(f"The partitions of X have different numbers of columns: "
                             f"{sorted(n_features)}.")
        self.n_features_in_ = n_features.pop()
        if hasattr(X, "columns"):
            names = np.asarray(X.columns, dtype=object)
            if all(isinstance(c, str) for c in names):
                self.feature_names_in_ = names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        if is_clf:
            classes = np.unique(np.concatenate([s["classes"] for s in info]))
            if len(classes) < 2:
                raise ValueError("Classifier can't train when only one class is present.")
            for k, s in enumerate(info):
                _check_shard_classes(k, s["n_rows"], classes, s["classes"])
        for k, s in enumerate(info):
            if s["n_rows"] < 2:
                raise ValueError(f"Shard {k} has {s['n_rows']} rows; every shard needs at "
                                 "least 2.")
        # The encoder, from summaries computed where the rows are (the category
        # counts, moments and quantile sketches of every shard's columns).
        names = getattr(self, "feature_names_in_", None)
        by_dtype = np.any([s["categorical"] for s in info], axis=0)
        categorical = check_categorical_features(
            base.categorical_features, self.n_features_in_, names, by_dtype)
        settings = dict(numeric_encoding=base.numeric_encoding, n_bins=base.n_bins,
                        additive_bins=base.additive_bins)
        if base.encoder is not None:  # the user's encoder: no summary travels
            encoder = _check_given_encoder(base.encoder, range(self.n_features_in_), names)
        else:
            summaries = shards.summarize(categorical, dict(settings, sketch_size=SKETCH_SIZE,
                                                           names=names))
            encoder = TabularEncoder.from_summaries(
                summaries, categorical, names, max_categories=base.max_categories, **settings)
        self.shard_indices_ = None
        self.shard_partitions_ = shards.partition_groups
        sizes = np.array([s["n_rows"] for s in info])
        weight_sums = None if sample_weight is None else [s["weight_sum"] for s in info]
        return _ShardedData(shards, sizes, weight_sums, encoder, rows=(X, y, sample_weight),
                            X_site=None, n_classes=len(classes) if is_clf else 0)

    def _check_X(self, X):
        """Check the features of ``X`` against the fit; the merged model encodes
        (and validates) the values itself, as the estimators do."""
        check_is_fitted(self, "merged_")
        X = as_rows(X)
        validate_data(self, X, reset=False, skip_check_array=True)
        return X

    def _with_merged(self, merged):
        """A deep copy of this fitted meta-estimator whose ``merged_`` is
        ``merged`` (not copied): what :func:`refit_leaves` returns."""
        return copy.deepcopy(self, memo={id(self.merged_): merged})

    def _prediction_model(self):
        """The merged model, which predicts (also lazily, on dask input)."""
        check_is_fitted(self, "merged_")
        return self.merged_

    @property
    def feature_importances_(self):
        """Importance of every input column in the merged model.

        See :attr:`SoftTreeEnsembleClassifier.feature_importances_`.

        Returns
        -------
        importances : ndarray of shape (`n_features_in_`,)
            Non-negative, summing to 1.
        """
        return self._prediction_model().feature_importances_

    @_lazy_on_dask
    def predict(self, X):
        """Predict with the merged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array or DataFrame
            Input samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs), or dask array
            Class labels or regression targets. For a dask array or
            DataFrame ``X`` (after a dask fit, or any fit), a lazy dask array
            that the merged model computes partition by partition on the
            workers that hold them (``map_blocks`` / ``map_partitions``, as
            dask-ml's ``ParallelPostFit``): the rows never reach the client.
        """
        X = self._check_X(X)
        return self.merged_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    @_lazy_on_dask
    def predict_proba(self, X):
        """Class probabilities of the merged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array or DataFrame
            Input samples (a dask collection gives a lazy dask array, see
            :meth:`predict`).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities, columns ordered as ``classes_``.
        """
        X = self._check_X(X)
        return self.merged_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    @_lazy_on_dask
    def predict_log_proba(self, X):
        """Log class probabilities of the merged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array or DataFrame
            Input samples (a dask collection gives a lazy dask array, see
            :meth:`predict`).

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Log-probabilities, columns ordered as ``classes_``.
        """
        X = self._check_X(X)
        return self.merged_.predict_log_proba(X)

    @available_if(_estimator_has("decision_function"))
    @_lazy_on_dask
    def decision_function(self, X):
        """Raw scores of the merged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array or DataFrame
            Input samples (a dask collection gives a lazy dask array, see
            :meth:`predict`).

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            See :meth:`SoftTreeEnsembleClassifier.decision_function`.
        """
        X = self._check_X(X)
        return self.merged_.decision_function(X)

    def score(self, X, y, sample_weight=None):
        """Accuracy (classifier) or R^2 (regressor) of the merged model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test samples.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            True targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
        """
        y_pred = self.predict(X)
        if get_tags(self).estimator_type == "classifier":
            return float(accuracy_score(y, y_pred, sample_weight=sample_weight))
        return float(r2_score(y, y_pred, sample_weight=sample_weight))

    # -- persistence --------------------------------------------------------------
    #: Key of the plain-dict form of the fitted ``aligner_`` in a pickled state.
    _ALIGNER_STATE = "ModelAligner.__dict__"

    def __getstate__(self):
        """The state to pickle, with the fitted ``aligner_`` and ``encoder_`` as plain types.

        The fitted :class:`ModelAligner` holds :class:`Alignment` objects
        that hold :class:`SymmetryOps`: stored as they are, loading with
        :mod:`skops.io` would need these three types trusted besides the
        estimators. They are stored as a dict (the aligner's attributes, each
        alignment as a dict of its arrays and score) that
        :meth:`__setstate__` rebuilds, so that a fitted meta-estimator needs
        only its own class and the soft tree estimator's class trusted (the
        shard models and ``merged_`` store themselves in plain types).
        """
        state = dict(super().__getstate__())  # a copy: object's is self.__dict__ itself
        aligner = state.get("aligner_")
        if isinstance(aligner, ModelAligner):
            attrs = dict(vars(aligner))
            if "alignments_" in attrs:
                attrs["alignments_"] = [
                    {"tree_perm": a.tree_perm, "perm": a.ops.perm, "sign": a.ops.sign,
                     "leaf_perm": a.ops.leaf_perm, "score": a.score}
                    for a in attrs["alignments_"]
                ]
            state["aligner_"] = {self._ALIGNER_STATE: attrs}
        encoder = state.get("encoder_")
        if isinstance(encoder, TabularEncoder):  # as the estimators store theirs
            state["encoder_"] = encoder_as_dict(encoder)
        return stamp(state)

    def __setstate__(self, state):
        """Restore a pickled state, rebuilding the fitted ``aligner_`` of
        :meth:`__getstate__`; a state pickled by another version of the
        package (another pickle format) is a ValueError."""
        from ..model._architectures import SymmetryOps
        from ..merging._matching import Alignment

        state = check_format(state, type(self))
        check_complete_state(state, type(self), ("estimators_", "merged_", "encoder_",
                                                 "n_features_in_"))
        aligner = state.get("aligner_")
        if isinstance(aligner, dict) and self._ALIGNER_STATE in aligner:
            attrs = dict(aligner[self._ALIGNER_STATE])
            if "alignments_" in attrs:
                attrs["alignments_"] = [
                    Alignment(a["tree_perm"], SymmetryOps(a["perm"], a["sign"], a["leaf_perm"]),
                              a["score"])
                    for a in attrs["alignments_"]
                ]
            rebuilt = ModelAligner.__new__(ModelAligner)
            rebuilt.__dict__.update(attrs)
            state["aligner_"] = rebuilt
        if "encoder_" in state:
            state["encoder_"] = encoder_from_dict(state["encoder_"])
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self._base_estimator())
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = sub.classifier_tags
        tags.regressor_tags = sub.regressor_tags
        tags.target_tags = sub.target_tags
        tags.input_tags = sub.input_tags
        tags.non_deterministic = sub.non_deterministic
        return tags

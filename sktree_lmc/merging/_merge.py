"""Aligning fitted ensembles modulo tree symmetries, and merging them (two or ``K``).

:class:`ModelAligner` owns the alignment settings (method, invariances,
weighting, rows of activation matching, N-way refinement, device), validated
once by its ``_parameter_constraints``. Everything that aligns models
(:func:`merge_estimators`, :func:`~sktree_lmc.interpolation_curve`,
:class:`~sktree_lmc.ShardedSoftTreeEnsemble`) takes ``aligner=``: a
:class:`ModelAligner`, or one of the shortcuts of :data:`ALIGNER_SHORTCUTS`,
and turns it into an aligner with :func:`check_aligner`.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import InvalidParameterError, StrOptions, validate_params
from sklearn.utils.validation import check_is_fitted

from ._bridge import (
    check_compatible,
    combine,
    fingerprint,
    link_correction,
    own_models,
    rewrap,
    sample_rows,
    scale_leaves,
    split_pipelines,
    target_scale,
    transform_rows,
    with_params,
)
from ..encoding._common_encoding import function_view, matching_view
from ..utils._device import DEVICE_CONSTRAINT, resolve_device
from ._matching import INVARIANCES, _align_optimizer_state, dp_cost
from ._nway import _check_weights, align_many
from ..utils._progress import ProgressLog
from ._report import (
    MergeQualityWarning,
    _predictions,
    ensemble_predictions,
    members_probe_rows,
    merge_report,
)
from .._validation import _NumberInterval

__all__ = ["ALIGNER_SHORTCUTS", "ModelAligner", "check_aligner", "fit_aligner",
           "merge_estimators"]

#: String shortcuts accepted wherever an ``aligner`` is: the settings they stand for.
ALIGNER_SHORTCUTS = {
    "wm": dict(method="wm"),
    "am": dict(method="am"),
    "naive": dict(invariances="none"),
}


class ModelAligner(BaseEstimator):
    """Align fitted soft tree ensembles into one basis, modulo tree symmetries.

    For every model the aligner learns one tree permutation (a linear
    assignment) and one symmetry op per tree (subtree flips, splitting
    orders) that express it in a common basis: the aligned copies compute
    exactly the same functions as the originals. With two models this is
    the pairwise matching of the paper (Algorithms 1 and 2): the other model
    is aligned to the reference. With ``K > 2`` every model is first aligned
    to the reference, then refinement sweeps re-align each model (the
    reference too) to the weighted sum of the others, maximizing the total
    pairwise similarity (N-way matching; the user guide's merging page
    gives the objective).

    The aligner owns the alignment settings of the package: pass it (or a
    string shortcut, ``"wm"``, ``"am"`` or ``"naive"``) as ``aligner=`` to
    :func:`merge_estimators`, :func:`~sktree_lmc.interpolation_curve` and
    :class:`~sktree_lmc.ShardedSoftTreeEnsemble`.

    Protocol: ``fit(estimators, X=None, weights=None)`` learns ``alignments_``
    (one :class:`~sktree_lmc.Alignment` per estimator);
    ``align(estimators)`` returns new fitted estimators with permuted and
    transformed parameters. It is not a data transformer.

    Parameters
    ----------
    method : {"wm", "am"}, default="wm"
        Weight matching (parameters only) or activation matching (per-tree
        outputs on ``n_samples`` rows of ``X``).
    invariances : {"none", "perm", "all"}, default="all"
        Symmetries taken into account: none (naive interpolation), tree
        permutation only, or permutation plus every architecture-specific op.
    weighting : bool, default=True
        Scale split parameters by the square root of the number of leaves
        they affect when comparing trees (Section 3.2 of the paper).
    scale_features : bool, default=True
        Weight matching only: compare the splits' weights as the functions
        the splits compute, on probe rows drawn from the distribution the
        input encoder summarizes
        (:func:`~sktree_lmc.encoding._common_encoding.function_view`: each
        column's features through their Gram matrix there), instead of the
        raw coefficients. For a column of one feature this is its weight times
        the feature's size (root mean square); it matters where features
        differ in size (a quantile-normal column that is one value on most
        rows, counts or codes, sits near the clip of the normal scores) and
        where the models' weights sit on different features of one column
        (models fitted apart, on their own quantile transforms side by side
        in a common encoding). ``False`` is the paper's weight matching (with
        a common encoding's side-by-side features of a column summed).
        Features whose distribution the encoder does not know
        (``numeric_encoding="none"``, missing indicators) keep a scale of 1.
    n_samples : int, default=512
        Rows of ``X`` sampled for activation matching.
    reference : int, default=0
        Index of the reference estimator, whose basis is kept (with ``K > 2``
        models and ``max_iter > 0`` the sweeps may move it as well).
    max_iter : int, default=20
        ``K > 2`` models only: maximum refinement sweeps; ``0`` aligns every
        model to the reference only. With two models the pairwise matching
        already maximizes the objective, so no sweep runs.
    tol : float, default=1e-3
        ``K > 2`` models only: a sweep whose relative objective gain is at
        most ``tol`` ends the refinement; ``0`` runs until no alignment
        changes (or ``max_iter``).
    random_state : int, RandomState instance or None, default=None
        Seed of the row sampling of activation matching.
    device : str or torch.device, default="cpu"
        Torch device for the similarity computations (``"auto"`` uses CUDA
        when available).
    verbose : int, default=0
        ``1``: a line when alignment starts (models, architecture, method),
        the refinement sweeps of N-way alignment (a bar with the time left on
        a terminal, else one line each, with the objective) and a closing
        line with the elapsed time; ``2``: sweep lines even on a terminal.

    Attributes
    ----------
    alignments_ : list of Alignment
        ``alignments_[i].apply(params_i)`` expresses model ``i`` in the
        common basis (the identity for the reference, unless refinement
        sweeps moved it).
    reference_ : int
        Index of the reference.
    weights_ : ndarray of shape (K,)
        Model weights of the objective, normalized to sum to one.
    n_iter_ : int
        Refinement sweeps run.
    converged_ : bool
        Whether the refinement stopped before ``max_iter``.
    objective_ : list of float
        N-way objective (squared norm of the weighted sum of the aligned
        models) after the initialization and every sweep; empty for
        ``invariances="none"``.
    n_matchings_ : int
        Pairwise matchings (linear assignments) computed.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import ModelAligner, SoftTreeEnsembleClassifier
    >>> X, y = make_classification(n_samples=200, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=5, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> aligner = ModelAligner(method="wm").fit([a, b])
    >>> a2, b2 = aligner.align([a, b])
    >>> bool((b2.predict_proba(X) - b.predict_proba(X)).max() < 1e-5)
    True
    """

    _parameter_constraints: dict = {
        "method": [StrOptions({"wm", "am"})],
        "invariances": [StrOptions(set(INVARIANCES))],
        "weighting": ["boolean"],
        "scale_features": ["boolean"],
        "n_samples": [_NumberInterval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
        "reference": [_NumberInterval(Integral, 0, None, closed="left")],
        "max_iter": [_NumberInterval(Integral, 0, None, closed="left")],
        "tol": [_NumberInterval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "device": DEVICE_CONSTRAINT,
    }

    def __init__(self, method="wm", invariances="all", weighting=True, scale_features=True,
                 n_samples=512, reference=0, max_iter=20, tol=1e-3, random_state=None,
                 device="cpu", verbose=0):
        self.method = method
        self.invariances = invariances
        self.weighting = weighting
        self.scale_features = scale_features
        self.n_samples = n_samples
        self.reference = reference
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _validate_params(self):
        """Validate the settings; the errors name ModelAligner.

        scikit-learn's ``validate_params`` (around :func:`merge_estimators`,
        :func:`~sktree_lmc.interpolation_curve`, ...) renames the owner in an
        error phrased "The 'tol' parameter of ModelAligner must be", as if
        ``tol`` were a parameter of the function; the errors are therefore
        phrased "ModelAligner's 'tol' parameter must be", which it leaves
        alone.
        """
        try:
            super()._validate_params()
        except InvalidParameterError as exc:
            message = re.sub(r"^The ('\w+') parameter of ModelAligner must be",
                             r"ModelAligner's \1 parameter must be", str(exc))
            raise InvalidParameterError(message) from None

    def _check_fitted_on(self, estimators, method):
        """``estimators`` as a list, checked to be those of :meth:`fit`, in order."""
        check_is_fitted(self, "alignments_")
        estimators, _ = split_pipelines(estimators)
        if len(estimators) != len(self.alignments_):
            raise ValueError(
                f"The aligner was fitted on {len(self.alignments_)} estimators, "
                f"got {len(estimators)}: {method}() must be given the estimators passed to "
                "fit(), in the same order."
            )
        check_compatible(estimators)
        for i, est in enumerate(estimators):
            if fingerprint(est.tree_params_) != self._fingerprints[i]:
                raise ValueError(
                    f"Estimator {i} is not the one the aligner was fitted on: {method}() must "
                    "be given the estimators passed to fit(), in the same order."
                )
        return estimators

    def fit(self, estimators, X=None, weights=None):
        """Learn the alignment of every estimator into the reference's basis.

        Parameters
        ----------
        estimators : sequence of fitted soft tree ensembles
            ``K >= 2`` models of the same class, architecture, depth, size and
            classes.
        X : array-like of shape (n_samples, n_features), default=None
            Data for activation matching (required when ``method="am"``).
        weights : array-like of shape (K,), default=None
            Non-negative model weights of the N-way objective (normalized);
            uniform when None. Regressors are compared with their leaves in
            the weighted merged target scale.

        Returns
        -------
        self : ModelAligner
            The fitted aligner.
        """
        return self._fit(estimators, X, weights)

    def _fit(self, estimators, X=None, weights=None, start=None):
        """:meth:`fit`; ``start="identity"`` first tries the models as they
        are (see :func:`~sktree_lmc.merging._nway.align_many`): the rounds of
        :class:`~sktree_lmc.ShardedSoftTreeEnsemble` after the first, whose
        shard models all continued from one merged model."""
        self._validate_params()
        device = resolve_device(self.device)
        estimators, head = split_pipelines(estimators)
        X = transform_rows(head, X)
        classifier = check_compatible(estimators)
        K = len(estimators)
        if self.reference >= K:
            raise ValueError(
                f"ModelAligner(reference={self.reference}) but only {K} estimators were given."
            )
        w = _check_weights(weights, K)
        ref = estimators[self.reference]
        # the models share their encoder (check_compatible): its view, once
        view = _matching_basis(ref.encoder_, self.scale_features and self.method == "wm")
        params = [_matching_params(est, view) for est in estimators]
        scale = target_scale(estimators, w, classifier)
        if scale is not None:  # compare regressors in one target standardization
            params = [scale_leaves(p, f) for p, f in zip(params, scale[2])]
        outputs = None
        if self.method == "am" and self.invariances != "none":
            Xs = sample_rows(X, self.n_samples, self.random_state, ref.n_features_in_)
            outputs = [est.tree_outputs(Xs) for est in estimators]
            if scale is not None:
                outputs = [o * f[None, None, :] for o, f in zip(outputs, scale[2])]
        max_iter = self.max_iter if K > 2 else 0
        arch = ref.architecture_
        # one line (or a bar) per refinement sweep, and a closing line
        log = ProgressLog(type(self).__name__, max_iter, self.verbose, unit="sweep")
        if self.verbose:
            print(f"{type(self).__name__}: aligning {K} models ({arch.name}, depth "
                  f"{arch.depth}, {ref.tree_params_.n_trees} trees; {self.method}, "
                  f"invariances={self.invariances!r}){_search_estimate(self, arch, ref)}",
                  file=sys.stderr, flush=True)
        result = align_many(
            params, arch, w, method=self.method, invariances=self.invariances,
            outputs=outputs, max_iter=max_iter, reference=self.reference,
            weighting=self.weighting, tol=self.tol, device=device,
            progress=lambda i, obj: i and log.step(i - 1, objective=obj),
            start=start,
        )
        log.close(f"aligned {K} models, {result.n_matchings} matchings, "
                  f"{result.n_iter} refinement sweeps")
        self.alignments_ = result.alignments
        self.reference_ = self.reference
        self.weights_ = result.weights
        self.n_iter_, self.converged_ = result.n_iter, result.converged
        self.objective_ = result.objective
        self.n_matchings_ = result.n_matchings
        self._fingerprints = [fingerprint(est.tree_params_) for est in estimators]
        return self

    def align(self, estimators):
        """Return aligned copies of the estimators given to :meth:`fit`.

        Parameters
        ----------
        estimators : sequence of fitted soft tree ensembles
            The same estimators, in the same order, as in :meth:`fit`.

        Returns
        -------
        aligned : list of estimators
            New fitted estimators, functionally identical to the inputs, with
            parameters expressed in the reference's basis (and Adam's state
            ``optimizer_state_``, if any, mapped into it).

        Raises
        ------
        ValueError
            If ``estimators`` are not the estimators of :meth:`fit`.
        """
        templates = list(estimators)
        estimators = self._check_fitted_on(estimators, "align")
        return [
            rewrap(template,
                   with_params(est, al.apply(est.tree_params_), **_aligned_state(est, al)))
            for template, est, al in zip(templates, estimators, self.alignments_)
        ]

    def fit_align(self, estimators, X=None, weights=None):
        """Fit the aligner and return the aligned estimators.

        Parameters
        ----------
        estimators : sequence of fitted soft tree ensembles
            Models to align; see :meth:`fit`.
        X : array-like of shape (n_samples, n_features), default=None
            Data for activation matching.
        weights : array-like of shape (K,), default=None
            Model weights, see :meth:`fit`.

        Returns
        -------
        aligned : list of estimators
            See :meth:`align`.
        """
        return self.fit(estimators, X, weights).align(estimators)

    def _is_fitted_on(self, estimators, weights=None):
        """Whether this aligner was fitted on ``estimators`` (same parameters,
        same order) with ``weights``."""
        estimators, _ = split_pipelines(estimators)
        if not hasattr(self, "alignments_") or len(estimators) != len(self.alignments_):
            return False
        same = [fingerprint(est.tree_params_) for est in estimators] == self._fingerprints
        return same and np.array_equal(_check_weights(weights, len(estimators)), self.weights_)

    def aligned_params(self, estimators):
        """Parameters of the fitted estimators in the reference's basis.

        Parameters
        ----------
        estimators : sequence of fitted soft tree ensembles
            The estimators given to :meth:`fit`, in the same order.

        Returns
        -------
        params : list of TreeParams
            ``alignments_[i].apply(estimators[i].tree_params_)``: every
            parameter array, the additive table included (the symmetry ops
            leave it as it is). Models whose additive bins alone differ
            have their tables on the union of their bins, as in
            :func:`merge_estimators` (the same functions). The merge of
            classifiers is the weighted average of these parameters
            (``TreeParams.weighted_average(params, weights)``);
            regressors' leaves and tables are first expressed in the merged
            target scale.

        Raises
        ------
        ValueError
            If ``estimators`` are not the estimators of :meth:`fit` (another
            number of them, or other parameters, the additive table
            included, or another order), or one has NaN or infinite
            parameters.
        """
        estimators = self._check_fitted_on(estimators, "aligned_params")
        return [al.apply(est.tree_params_) for al, est in zip(self.alignments_, estimators)]


def _aligned_state(est, alignment):
    """``{"optimizer_state_": ...}``: ``est``'s Adam state mapped by
    ``alignment``, so that an aligned copy continues as the original would;
    empty when it has none."""
    state = getattr(est, "optimizer_state_", None)
    if state is None:
        return {}
    return {"optimizer_state_": _align_optimizer_state(state, alignment)}


def _matching_basis(encoder, scale_features=False):
    """The view through which weight matching compares the split weights of
    models that share ``encoder``, or None for the raw weights.

    With ``scale_features`` (and an encoding that does not return its
    inputs): :func:`~sktree_lmc.encoding._common_encoding.function_view`,
    under which the weights' inner products are those of what the splits
    compute on the encoder's probe rows, each feature's size included (for
    columns of one feature, the features' root mean squares,
    :func:`~sktree_lmc.encoding._common_encoding.feature_scales`). Otherwise,
    the raw coefficients, with the side-by-side sub-blocks of a common
    encoding's stacked columns (the models' own quantile-normal features of
    one column) summed
    (:func:`~sktree_lmc.encoding._common_encoding.matching_view`). None where
    the view is the identity."""
    if scale_features and not encoder.is_identity:
        view = function_view(encoder)
    elif encoder.column_kinds_ is not None:
        view = matching_view(encoder)
    else:
        return None
    if view.shape[0] == view.shape[1] and np.array_equal(view, np.eye(len(view))):
        return None
    return view


def _matching_params(est, view=None):
    """The parameters weight matching compares: ``tree_params_``, with the
    split weights times ``view`` (see :func:`_matching_basis`), so that the
    models' weights are compared as the functions their splits compute (or,
    raw, with their weights on their own features of a column summed). The
    alignment found applies to the full parameters (it permutes trees,
    nodes and leaves, never features)."""
    params = est.tree_params_
    if view is None:
        return params
    weight = params.split_weight @ view.astype(params.split_weight.dtype)
    return dataclasses.replace(params, split_weight=np.ascontiguousarray(weight))


def _search_estimate(aligner, arch, ref):
    """``"; exact search about N s per matching"`` for the architectures whose
    symmetry group is searched exactly (the estimate of :func:`dp_cost`, one
    core, for the M x M table), else ``""``: the time left of a pairwise
    alignment, which is one search."""
    exact = arch.flip_recursive or (arch.level_search and arch.depth <= 6)
    if aligner.invariances != "all" or not exact:
        return ""
    seconds, _ = dp_cost(arch, ref.tree_params_.n_trees ** 2)
    return f"; exact search about {seconds:.2g} s per matching on one core"


def check_aligner(aligner):
    """Turn an ``aligner`` argument into an unfitted :class:`ModelAligner`.

    Parameters
    ----------
    aligner : {"wm", "am", "naive"} or ModelAligner
        A string shortcut (weight matching, activation matching, or naive
        interpolation without alignment, all with the defaults of
        :class:`ModelAligner`) or an aligner, which is cloned (never modified).

    Returns
    -------
    ModelAligner
        A new unfitted aligner.

    Raises
    ------
    ValueError
        If ``aligner`` is an unknown string.
    TypeError
        If ``aligner`` is neither a string nor a :class:`ModelAligner`.
    """
    if isinstance(aligner, ModelAligner):
        return clone(aligner)
    if isinstance(aligner, str):
        if aligner not in ALIGNER_SHORTCUTS:
            raise ValueError(
                f"aligner must be one of {sorted(ALIGNER_SHORTCUTS)} or a ModelAligner, "
                f"got {aligner!r}."
            )
        return ModelAligner(**ALIGNER_SHORTCUTS[aligner])
    raise TypeError(
        f"aligner must be one of {sorted(ALIGNER_SHORTCUTS)} or a ModelAligner, "
        f"got a {type(aligner).__name__}."
    )


def fit_aligner(aligner, estimators, X=None, weights=None):
    """An aligner fitted on ``estimators``.

    A :class:`ModelAligner` already fitted on these estimators (in this
    order, with these weights; for instance ``curve.aligner`` of an earlier
    :func:`~sktree_lmc.interpolation_curve`) is returned as is, so that one
    alignment serves several evaluations; otherwise :func:`check_aligner`
    gives a new aligner, fitted here.

    Parameters
    ----------
    aligner : {"wm", "am", "naive"} or ModelAligner
        See :func:`check_aligner`.
    estimators : sequence of fitted soft tree ensembles
        The models to align.
    X : array-like of shape (n_samples, n_features), default=None
        Data for activation matching.
    weights : array-like of shape (K,), default=None
        Model weights (uniform when None).

    Returns
    -------
    ModelAligner
        A fitted aligner.
    """
    estimators = list(estimators)
    if isinstance(aligner, ModelAligner):
        check_compatible(split_pipelines(estimators)[0])
        if aligner._is_fitted_on(estimators, weights):
            return aligner
    return check_aligner(aligner).fit(estimators, X, weights=weights)


@validate_params(
    {
        "lam": [_NumberInterval(Real, 0, 1, closed="both")],
        "aligner": [StrOptions(set(ALIGNER_SHORTCUTS) | {"auto"}), ModelAligner],
        "X": ["array-like", None],
        "weights": ["array-like", None],
        "distill": ["boolean", StrOptions({"auto"})],
    },
    prefer_skip_nested_validation=True,
)
def merge_estimators(a, b=None, lam=0.5, *, aligner="auto", X=None, weights=None,
                     distill="auto"):
    """Align ``b`` to ``a`` and interpolate their parameters.

    Returns a new fitted estimator of the same class whose parameters are
    ``(1 - lam) * a + lam * aligned(b)``: ``lam=0`` reproduces ``a`` and
    ``lam=1`` reproduces ``b`` (up to symmetry, so the same predictions).

    Parameters
    ----------
    a, b : fitted SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor or Pipeline
        Two models of the same class, architecture, depth, number of trees,
        features, classes and input encoding (``encoder_``: as for models
        fitted on the same rows). Pipelines whose last step is a soft tree
        ensemble are merged too, when their preprocessing steps are equal
        (same fitted state, e.g. one preprocessing fitted once); the result
        is then a Pipeline with that preprocessing and the merged model.
    lam : float in [0, 1], default=0.5
        Interpolation weight of ``b``.
    aligner : {"auto", "wm", "am", "naive"} or ModelAligner, default="auto"
        How ``b`` is aligned to ``a``. ``"auto"`` merges with weight matching
        and with activation matching (on ``X``, else on probe rows drawn from
        the models' input encoding) and keeps the merge closer to the
        models' ensemble (see ``merge_report_`` below); ``"wm"``: weight
        matching; ``"am"``: activation matching (on ``X``); ``"naive"``: no
        alignment (naive interpolation); or a :class:`ModelAligner` carrying
        any other settings (invariances, weighting, rows, seed, device, N-way
        refinement). An aligner already fitted on these models (in this
        order, with these weights) is used as is, without aligning again.
    X : array-like of shape (n_samples, n_features), default=None
        Rows for activation matching (required by ``aligner="am"``) and for
        the merge report; without them the report (and ``"auto"``'s
        activation matching) uses 2,048 probe rows drawn from the models'
        input encoders, each model's share (by ``weights``) from its own:
        every column's quantiles, knots and categories, the columns joined
        by the encoder's Gaussian copula (its ``dependence_``), so no data
        is needed.
    weights : array-like of shape (K,), default=None
        N-way form only: weights of the K models (uniform when None).
    distill : bool or "auto", default="auto"
        After the merge, re-solve its leaf values (splits frozen, a convex
        problem, as :func:`~sktree_lmc.refit_leaves`) to the models'
        ensemble predictions on ``X``, else on 4,096 probe rows drawn from the
        input encoders as above (not the rows of the report, which compares the
        refitted model). No labels are needed: the ensemble's probabilities (or
        predictions) are the targets. The merged model keeps its
        hyperparameters. ``"auto"`` distills the merges of ``aligner="auto"``
        between models that all carry weight (never at ``lam=0`` or ``lam=1``),
        except regressors given ``X`` (their scale is then set on ``X``
        itself): each alignment tried is refitted, and the merge kept is the
        one closest to the ensemble on the report's rows, refitted or not
        (the user guide, "How good is the merge?"); ``True`` keeps the
        closest refit.

    Returns
    -------
    merged : estimator or Pipeline
        A new fitted estimator (a Pipeline for Pipelines) (``check_is_fitted`` passes; it predicts,
        pickles and works in a Pipeline). Regressors interpolate their target
        standardization ``y_mean_`` and ``y_scale_`` and first express both
        models' leaf values in the interpolated scale, so that ``lam=0`` and
        ``lam=1`` reproduce ``a`` and ``b`` exactly. The hyperparameters are
        ``a``'s (model 0's), ``warm_start`` included, except the objective
        of :func:`~sktree_lmc.refit_leaves` of classifiers that differ in
        it (see Notes); Adam's state is not kept (``optimizer_state_`` is
        None: the models' moments belong to their own parameters), so a
        warm-started ``fit`` of the merged model continues from the merged
        parameters with a fresh Adam.

        The merged model has ``merge_report_``, a
        :class:`~sktree_lmc.MergeReport`: how far its predictions are from
        the models' ensemble (their predictions averaged with the merge's
        weights, the function a merge approximates) relative to the models'
        own distance from it. A merge farther from the ensemble than the
        models are issues a :class:`~sktree_lmc.MergeQualityWarning`.

        Regressors with the log link (``loss="poisson"`` or ``"gamma"``):
        averaging their raw outputs averages their predictions
        geometrically, below their mean; the merged model's scale
        ``y_scale_`` is multiplied by the ratio of the ensemble's mean
        prediction over ``X`` to the merged model's, so that the merge keeps
        the ensemble's mean over the data (without ``X``, by the geometric
        mean of that ratio over the probe rows, and ``distill="auto"`` then
        refits the leaves to the ensemble); at ``lam=0`` and ``lam=1`` the
        factor is 1 up to rounding.

    Raises
    ------
    ValueError
        If the models cannot be merged (see the parameters), or one has NaN
        or infinite parameters in any array, the additive table included
        (the message names the model and the array).

    See Also
    --------
    ModelAligner : The alignment settings, and the N-way procedure.

    Notes
    -----
    N-way form: ``merge_estimators([m1, ..., mK], weights=None, aligner=...)``
    aligns all K models into model 0's basis (alignment to model 0, then
    sweeps that re-align each model to the weighted sum of the others until
    no alignment changes, see :class:`ModelAligner`) and returns their
    weighted average.

    Refit objective of the merged model: :func:`~sktree_lmc.refit_leaves`
    fits a classifier's leaves to the labels mixed with its teachers'
    probabilities (``teacher_`` at ``teacher_weight``) under cross-entropy
    with ``label_smoothing``. When the models agree on it (the same
    ``teacher_weight``, each with a teacher, or none with one, and the same
    ``label_smoothing``) the merged model keeps model 0's hyperparameters
    and the distinct teachers of the models. When they differ (a model
    trained with a teacher and one without, say), the merged model gets the
    weighted mean of their objectives (cross-entropy is linear in its
    target), whatever the order of the models: with ``w_i`` the model
    weights (``1 - lam`` and ``lam``), ``t_i`` the teacher weight of model
    ``i`` (0 without a teacher) and ``s_i`` its label smoothing,
    ``label_smoothing = sum_i w_i s_i`` and ``teacher_weight = sum_i w_i
    (1 - s_i) t_i / (1 - label_smoothing)``, with the distinct teachers of
    the models that have one (exact when they share one teacher or only
    one has a teacher; with several distinct teachers the refit mixes in
    their mean probabilities). So ``lam=0`` refits as ``a`` does and
    ``lam=1`` as ``b``, and ``refit_leaves(merge_estimators(a, b))`` does
    not depend on which model comes first. A warm-started ``fit`` of the
    merged model trains with these values too. Regressors refit on their
    targets alone.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import ModelAligner, SoftTreeEnsembleClassifier, merge_estimators
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> merged = merge_estimators(a, b, lam=0.5)
    >>> merged.predict(X[:4]).shape
    (4,)
    >>> merge_estimators(a, b, aligner="am", X=X).predict(X[:4]).shape
    (4,)
    >>> perm_only = ModelAligner(invariances="perm")
    >>> merge_estimators([a, b, merged], weights=[1, 1, 2], aligner=perm_only).predict(X[:4]).shape
    (4,)
    """
    if isinstance(a, (list, tuple)):
        if b is not None or lam != 0.5:
            raise TypeError("Pass b and lam for two models only; use weights= with a list.")
        models = list(a)
    else:
        if b is None:
            raise TypeError("merge_estimators(a, b) needs a second model, or a list of models.")
        if weights is not None:
            raise TypeError("weights= is for a list of models; use lam= with two models.")
        models = [a, b]
    estimators, head = split_pipelines(models)
    # the errors of models that cannot merge come first; the task, decided once
    classifier = check_compatible(estimators)
    weights_of = (_check_weights(weights, len(models)) if isinstance(a, (list, tuple))
                  else np.array([1 - lam, lam]))
    # probe rows: each model's share from its own encoder (before the common encoding,
    # whose columns and copula average the models')
    own = own_models(models)
    if X is not None:
        rows, rows_kind = transform_rows(head, X), "X"
    else:
        rows, rows_kind = members_probe_rows(own, weights_of), "probe"
    members, ensemble = ensemble_predictions(estimators, weights_of, rows, classifier=classifier)
    if isinstance(aligner, str) and aligner == "auto":
        # AM on X when given, else on the probe rows (in the final step's input space)
        # (a Pipeline's probe rows cannot be taken back through its preprocessing: without X,
        # Pipelines are merged by weight matching alone)
        am_rows = X if X is not None else (rows if head is None else None)
        candidates = [("wm", ModelAligner(), X)]
        if am_rows is not None:
            candidates.append(("am", ModelAligner(method="am", random_state=0), am_rows))
    else:
        candidates = [(_aligner_name(aligner), aligner, X)]
    chosen = distill == "auto"
    if chosen:  # the default: distill the auto merges of models that all carry weight
        distill = (isinstance(aligner, str) and aligner == "auto"
                   and float(np.max(weights_of)) < 1.0 - 1e-12
                   and (classifier or X is None))
    if distill:
        if X is not None:  # the report's rows and their ensemble predictions
            fit_rows, targets = rows, ensemble
        else:
            fit_rows = members_probe_rows(own, weights_of, 4096, random_state=1)
            targets = ensemble_predictions(estimators, weights_of, fit_rows,
                                           classifier=classifier)[1]
    best, tried = None, {}
    for name, candidate, candidate_X in candidates:
        fitted = fit_aligner(candidate, models, candidate_X, weights)
        merged = combine(estimators, fitted.aligned_params(estimators), weights_of,
                         classifier=classifier)
        predictions = _predictions(merged, rows, classifier)
        factor = link_correction(merged, ensemble, predictions, data=rows_kind == "X",
                                 classifier=classifier)
        if factor is not None:  # the log link: y_mean_ is 0, predictions scale with y_scale_
            merged.y_scale_ = np.asarray(merged.y_scale_, dtype=np.float64) * factor
            predictions = predictions * factor
        report = merge_report(predictions, members, ensemble, weights_of, aligner=name,
                              rows=rows_kind, classifier=classifier)
        tried[name] = report.disagreement
        options = [(merged, report)]
        if distill:
            distilled = _distilled(merged, fit_rows, targets, classifier)
            distilled_report = merge_report(
                _predictions(distilled, rows, classifier), members, ensemble, weights_of,
                aligner=f"{name}+distill", rows=rows_kind, classifier=classifier)
            tried[distilled_report.aligner] = distilled_report.disagreement
            # "auto" keeps a refit only where it comes closer to the ensemble on the
            # report's rows (drawn apart from the refit's when no X is given); every
            # alignment is refitted, as the best one before the refit need not be after
            refit = [(distilled, distilled_report)]
            options = options + refit if chosen else refit
        for option in options:
            if best is None or option[1].distance < best[1].distance:
                best = option
    merged, report = best
    merged.merge_report_ = dataclasses.replace(report, candidates=tried)
    if report.flagged:
        warnings.warn(
            f"The merged model is farther from the models' ensemble than the models are "
            f"(disagreement {report.disagreement:.2f}, {100 * report.signal_loss:.0f} % of "
            f"the ensemble's spread, on {report.n_rows} "
            f"{'probe rows' if rows_kind == 'probe' else 'rows of X'}, aligner "
            f"{report.aligner!r}): the merge lost what the models know. Try aligner='auto', "
            "aligner='am' with rows X, or refit_leaves on the merged model; merge_report_ "
            "has the figures.", MergeQualityWarning, stacklevel=2)
    return rewrap(models[0], merged)


def _distilled(merged, rows, ensemble, classifier):
    """``merged`` with its leaves refitted to ``ensemble``, its models'
    averaged predictions on ``rows`` (2-D): soft targets for classifiers
    (``classifier``: the cross-entropy to the ensemble's probabilities), the
    predictions themselves for regressors. The refit fits the ensemble alone:
    the fitted objective's teacher and label smoothing are set aside for it
    and given back. The rows are in memory (the report's rows or probe rows):
    the refit's in-memory form (:func:`~._refit.refit_in_memory`)."""
    from ._refit import refit_in_memory

    objective = merged.objective_
    student = copy.deepcopy(merged)
    plain = {"teacher_weight": 0.0}
    if hasattr(objective, "label_smoothing"):
        plain["label_smoothing"] = 0.0
    student.objective_ = objective.replace(**plain)
    if classifier:
        refitted, _ = refit_in_memory(student, rows, None, probabilities=ensemble, max_iter=100)
    else:
        targets = ensemble if ensemble.shape[1] > 1 else ensemble[:, 0]
        refitted, _ = refit_in_memory(student, rows, targets, max_iter=100)
    refitted.objective_ = objective
    if "merge_report_" in vars(refitted):
        del refitted.merge_report_
    return refitted


def _aligner_name(aligner):
    """The report's name of an ``aligner`` argument."""
    if isinstance(aligner, str):
        return aligner
    if aligner.invariances == "none":
        return "naive"
    return aligner.method

"""Aligning fitted ensembles modulo tree symmetries, and merging them (two or ``K``)."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.validation import check_is_fitted

from ._bridge import (
    check_compatible,
    combine,
    fingerprint,
    sample_rows,
    scale_leaves,
    target_scale,
    with_params,
)
from ._matching import INVARIANCES, activation_matching, weight_matching
from ._nway import _check_weights, align_many

__all__ = ["ModelAligner", "merge_estimators", "merge_many"]


class ModelAligner(BaseEstimator):
    """Align fitted soft tree ensembles to a reference, modulo tree symmetries.

    For every model but the reference, the aligner learns one tree
    permutation (a single linear assignment) and one symmetry op per tree
    (subtree flips, splitting orders) such that the model, expressed in the
    reference's basis, is as close as possible to it. The aligned copies
    compute exactly the same function as the originals.

    Protocol: ``fit(estimators, X=None)`` learns ``alignments_`` (one
    :class:`~sktree_lmc._matching.Alignment` per estimator, the identity for
    the reference); ``align(estimators)`` returns new fitted estimators with
    permuted and transformed parameters. It is not a data transformer.

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
    n_samples : int, default=512
        Rows of ``X`` sampled for activation matching.
    reference : int, default=0
        Index of the reference estimator.
    random_state : int, RandomState instance or None, default=None
        Seed of the row sampling of activation matching.
    device : str, default="cpu"
        Torch device for the similarity computations.

    Attributes
    ----------
    alignments_ : list of Alignment
        ``alignments_[i].apply(params_i)`` expresses model ``i`` in the
        reference's basis.
    reference_ : int
        Index of the reference.

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
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "reference": [Interval(Integral, 0, None, closed="left")],
        "random_state": ["random_state"],
        "device": [str],
    }

    def __init__(self, method="wm", invariances="all", weighting=True, n_samples=512,
                 reference=0, random_state=None, device="cpu"):
        self.method = method
        self.invariances = invariances
        self.weighting = weighting
        self.n_samples = n_samples
        self.reference = reference
        self.random_state = random_state
        self.device = device

    def fit(self, estimators, X=None):
        """Learn the alignment of every estimator to the reference.

        Parameters
        ----------
        estimators : sequence of fitted soft tree ensembles
            Models of the same class, architecture, depth, size and classes.
        X : array-like of shape (n_samples, n_features), default=None
            Data for activation matching (required when ``method="am"``).

        Returns
        -------
        self : ModelAligner
            The fitted aligner.
        """
        self._validate_params()
        estimators = list(estimators)
        check_compatible(estimators)
        if self.reference >= len(estimators):
            raise ValueError(
                f"reference={self.reference} but only {len(estimators)} estimators were given."
            )
        ref = estimators[self.reference]
        arch = ref.architecture_
        outputs = None
        if self.method == "am" and self.invariances != "none":
            Xs = sample_rows(X, self.n_samples, self.random_state, ref.n_features_in_)
            outputs = [est.tree_outputs(Xs) for est in estimators]
        self.alignments_ = []
        for i, est in enumerate(estimators):
            kwargs = dict(invariances=self.invariances if i != self.reference else "none",
                          weighting=self.weighting, device=self.device)
            if self.method == "wm" or kwargs["invariances"] == "none":
                al = weight_matching(ref.tree_params_, est.tree_params_, arch, **kwargs)
            else:
                al = activation_matching(
                    outputs[self.reference], outputs[i], ref.tree_params_, est.tree_params_,
                    arch, **kwargs,
                )
            self.alignments_.append(al)
        self.reference_ = self.reference
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
            parameters expressed in the reference's basis.
        """
        check_is_fitted(self, "alignments_")
        estimators = list(estimators)
        if len(estimators) != len(self.alignments_):
            raise ValueError(
                f"The aligner was fitted on {len(self.alignments_)} estimators, "
                f"got {len(estimators)}."
            )
        check_compatible(estimators)
        for i, est in enumerate(estimators):
            if fingerprint(est.tree_params_) != self._fingerprints[i]:
                raise ValueError(
                    f"Estimator {i} is not the one the aligner was fitted on: align() must be "
                    "given the estimators passed to fit(), in the same order."
                )
        return [
            with_params(est, al.apply(est.tree_params_))
            for est, al in zip(estimators, self.alignments_)
        ]

    def fit_align(self, estimators, X=None):
        """Fit the aligner and return the aligned estimators.

        Parameters
        ----------
        estimators : sequence of fitted soft tree ensembles
            Models to align; see :meth:`fit`.
        X : array-like of shape (n_samples, n_features), default=None
            Data for activation matching.

        Returns
        -------
        aligned : list of estimators
            See :meth:`align`.
        """
        return self.fit(estimators, X).align(estimators)


@validate_params(
    {
        "lam": [Interval(Real, 0, 1, closed="both")],
        "method": [StrOptions({"wm", "am"})],
        "invariances": [StrOptions(set(INVARIANCES))],
        "X": ["array-like", None],
        "weighting": ["boolean"],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "device": [str],
        "weights": ["array-like", None],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def merge_estimators(a, b=None, lam=0.5, *, method="wm", invariances="all", X=None,
                     weighting=True, n_samples=512, random_state=None, device="cpu",
                     weights=None, max_iter=20):
    """Align ``b`` to ``a`` and interpolate their parameters.

    Returns a new fitted estimator of the same class whose parameters are
    ``(1 - lam) * a + lam * aligned(b)``: ``lam=0`` reproduces ``a`` and
    ``lam=1`` reproduces ``b`` (up to symmetry, so the same predictions).

    Parameters
    ----------
    a, b : fitted SoftTreeEnsembleClassifier or SoftTreeEnsembleRegressor
        Two models of the same class, architecture, depth, number of trees,
        features and classes.
    lam : float in [0, 1], default=0.5
        Interpolation weight of ``b``.
    method : {"wm", "am"}, default="wm"
        Weight or activation matching.
    invariances : {"none", "perm", "all"}, default="all"
        Symmetries used to align ``b``; ``"none"`` gives naive interpolation.
    X : array-like of shape (n_samples, n_features), default=None
        Data for activation matching; required when ``method="am"``.
    weighting : bool, default=True
        Node weighting of the matching objective.
    n_samples : int, default=512
        Rows of ``X`` used by activation matching.
    random_state : int, RandomState instance or None, default=None
        Seed of the row sampling of activation matching.
    device : str, default="cpu"
        Torch device for the similarity computations.
    weights : array-like of shape (K,), default=None
        N-way form only: weights of the K models (uniform when None).
    max_iter : int, default=20
        N-way form only: refinement sweeps of the alignment (``0`` aligns
        every model to model 0 only).

    Returns
    -------
    merged : estimator
        A new fitted estimator (``check_is_fitted`` passes; it predicts,
        pickles and works in a Pipeline). Regressors interpolate their target
        standardization ``y_mean_`` and ``y_scale_`` and first express both
        models' leaf values in the interpolated scale, so that ``lam=0`` and
        ``lam=1`` reproduce ``a`` and ``b`` exactly.

    Notes
    -----
    N-way form: ``merge_estimators([m1, ..., mK], weights=None, ...)`` aligns
    all K models into one basis (alignment to model 0, then sweeps that
    re-align each model to the weighted sum of the others until no alignment
    changes) and returns their weighted average; see
    :func:`merge_many` for the procedure and its cost.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> merged = merge_estimators(a, b, lam=0.5)
    >>> merged.predict(X[:4]).shape
    (4,)
    >>> merge_estimators([a, b, merged], weights=[1, 1, 2]).predict(X[:4]).shape
    (4,)
    """
    # -- N-way form: a list of K estimators ------------------------------------
    if isinstance(a, (list, tuple)):
        if b is not None or lam != 0.5:
            raise TypeError("Pass b and lam for two models only; use weights= with a list.")
        return merge_many(a, weights, method=method, invariances=invariances, X=X,
                          max_iter=max_iter, weighting=weighting, n_samples=n_samples,
                          random_state=random_state, device=device)
    if b is None:
        raise TypeError("merge_estimators(a, b) needs a second model, or a list of models.")
    if weights is not None:
        raise TypeError("weights= is for a list of models; use lam= with two models.")
    # -- two-model form -----------------------------------------------------------
    check_compatible([a, b])
    aligner = ModelAligner(method=method, invariances=invariances, weighting=weighting,
                           n_samples=n_samples, random_state=random_state, device=device)
    aligner.fit([a, b], X)
    aligned_b = aligner.alignments_[1].apply(b.tree_params_)
    return combine([a, b], [a.tree_params_, aligned_b], [1 - lam, lam])


def merge_many(estimators, weights=None, *, method="wm", invariances="all", X=None,
               max_iter=20, tol=1e-3, weighting=True, n_samples=512, random_state=None,
               device="cpu", return_alignment=False):
    """Align ``K`` fitted ensembles into one basis and average them.

    This is what ``merge_estimators([m1, ..., mK], weights=...)`` runs; see
    :func:`align_many` for the procedure (reference alignment, then
    coordinate-ascent sweeps that re-align each model to the weighted sum of
    the others until no alignment changes) and its cost.

    Parameters
    ----------
    estimators : sequence of fitted soft tree ensembles
        ``K >= 2`` models of the same class, architecture, depth, number of
        trees, features and classes.
    weights : array-like of shape (K,), default=None
        Non-negative weights of the models (e.g. their training-set sizes);
        normalized to sum to one. Uniform when None.
    method : {"wm", "am"}, default="wm"
        Weight matching (parameters only) or activation matching (per-tree
        outputs on ``n_samples`` rows of ``X``).
    invariances : {"none", "perm", "all"}, default="all"
        Symmetries used; ``"none"`` is naive averaging without alignment.
    X : array-like of shape (n_samples, n_features), default=None
        Data for activation matching; required when ``method="am"``.
    max_iter : int, default=20
        Maximum refinement sweeps; ``0`` aligns every model to model 0 only.
    tol : float, default=1e-3
        Relative objective gain under which the sweeps stop (see
        :func:`align_many`); ``0`` runs until no alignment changes.
    weighting : bool, default=True
        Node weighting of the matching objective.
    n_samples : int, default=512
        Rows of ``X`` used by activation matching.
    random_state : int, RandomState instance or None, default=None
        Seed of the row sampling of activation matching.
    device : str, default="cpu"
        Torch device of the similarity computations.
    return_alignment : bool, default=False
        Also return the :class:`MultiAlignment`.

    Returns
    -------
    merged : estimator
        A new fitted estimator of the class of the inputs, with the
        hyperparameters and metadata of model 0 and the averaged parameters.
        Regressors first express every model's leaves in the merged target
        scale (``y_scale_`` and ``y_mean_`` are the weighted means), so that
        aligned identical models merge into the same function.
    alignment : MultiAlignment
        Only when ``return_alignment=True``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> models = [SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, device="cpu",
    ...                                      random_state=s).fit(X, y) for s in range(3)]
    >>> merged = merge_estimators(models, weights=[1, 1, 2])
    >>> merged.predict(X[:4]).shape
    (4,)
    """
    estimators = list(estimators)
    check_compatible(estimators)
    K = len(estimators)
    w = _check_weights(weights, K)
    ref = estimators[0]
    arch = ref.architecture_
    params = [est.tree_params_ for est in estimators]
    factors = None
    scale = target_scale(estimators, w)
    if scale is not None:
        # align regressors in one target standardization (as they are merged)
        factors = scale[2]
        params = [scale_leaves(p, f) for p, f in zip(params, factors)]
    outputs = None
    if method == "am" and invariances != "none":
        Xs = sample_rows(X, n_samples, random_state, ref.n_features_in_)
        outputs = [est.tree_outputs(Xs) for est in estimators]
        if factors is not None:
            outputs = [o * f[None, None, :] for o, f in zip(outputs, factors)]
    result = align_many(params, arch, w, method=method, invariances=invariances,
                        outputs=outputs, max_iter=max_iter, tol=tol, weighting=weighting,
                        device=device)
    aligned = [al.apply(est.tree_params_) for al, est in zip(result.alignments, estimators)]
    merged = combine(estimators, aligned, w)
    return (merged, result) if return_alignment else merged

"""Aligning fitted ensembles modulo tree symmetries, and merging them."""

from __future__ import annotations

import copy
import hashlib
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.validation import check_array, check_is_fitted

from ._estimators import _BaseSoftTreeEnsemble
from ._matching import INVARIANCES, activation_matching, weight_matching
from ._params import TreeParams

__all__ = ["ModelAligner", "merge_estimators"]


def _check_compatible(estimators):
    """Raise a clear error unless all estimators can be aligned with each other."""
    if len(estimators) < 2:
        raise ValueError(f"Need at least two estimators, got {len(estimators)}.")
    ref = estimators[0]
    for i, est in enumerate(estimators):
        if not isinstance(est, _BaseSoftTreeEnsemble):
            raise TypeError(
                f"Estimator {i} is a {type(est).__name__}, not a soft tree ensemble."
            )
        check_is_fitted(est, "tree_params_")
        if type(est) is not type(ref):
            raise ValueError(
                f"Cannot merge a {type(ref).__name__} with a {type(est).__name__}."
            )
        checks = [
            ("architecture", ref.architecture_.name, est.architecture_.name),
            ("depth", ref.architecture_.depth, est.architecture_.depth),
            ("number of trees", ref.tree_params_.n_trees, est.tree_params_.n_trees),
            ("number of features", ref.n_features_in_, est.n_features_in_),
            ("number of outputs", ref.n_outputs_, est.n_outputs_),
        ]
        for what, x, y in checks:
            if x != y:
                raise ValueError(f"Models differ in {what}: {x!r} (model 0) vs {y!r} (model {i}).")
        if hasattr(ref, "classes_") and not np.array_equal(ref.classes_, est.classes_):
            raise ValueError(
                f"Models differ in classes: {ref.classes_!r} (model 0) vs {est.classes_!r} "
                f"(model {i})."
            )


def _fingerprint(params):
    """A digest of an ensemble's parameters, to recognize the models of a fit."""
    digest = hashlib.sha1()
    for array in (params.split_weight, params.split_bias, params.leaf_value):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _sample_rows(X, n_samples, random_state, n_features):
    if X is None:
        raise ValueError("Activation matching (method='am') needs data: pass X.")
    X = check_array(X, dtype=[np.float32, np.float64])
    if X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the models expect {n_features}.")
    rng = check_random_state(random_state)
    if X.shape[0] > n_samples:
        X = X[np.sort(rng.choice(X.shape[0], n_samples, replace=False))]
    return X


def _with_params(template, params, **overrides):
    """A new fitted estimator: hyperparameters and fitted metadata of
    ``template``, parameters ``params``."""
    new = clone(template)
    for key, value in vars(template).items():
        if key.endswith("_") or key.startswith("_"):
            if key not in vars(new):
                setattr(new, key, copy.deepcopy(value))
    new.tree_params_ = params.copy()
    for key, value in overrides.items():
        setattr(new, key, value)
    return new


def _target_scale(estimators, weights):
    """Merged target standardization of regressors, and each model's leaf factor.

    Returns ``(y_mean, y_scale, factors)``: the weighted means of ``y_mean_``
    and ``y_scale_``, and ``y_scale_ / y_scale`` per model, the factor that
    expresses a model's leaf values in the merged scale (the raw output of a
    regressor is multiplied by ``y_scale_``). ``None`` for classifiers.
    """
    if not hasattr(estimators[0], "y_scale_"):
        return None
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    y_scale = sum(wi * np.asarray(est.y_scale_, dtype=np.float64) for wi, est in zip(w, estimators))
    y_mean = sum(wi * np.asarray(est.y_mean_, dtype=np.float64) for wi, est in zip(w, estimators))
    factors = [np.asarray(est.y_scale_, dtype=np.float64) / y_scale for est in estimators]
    return y_mean, y_scale, factors


def _combine(estimators, aligned_params, weights):
    """The fitted estimator whose parameters are the weighted average of
    ``aligned_params`` (one per estimator, all in one basis).

    Regressors' leaves are first expressed in the merged target scale (see
    :func:`_target_scale`), so that weights ``(1, 0, ...)`` reproduce model 0
    exactly and identical functions merge into the same function.
    """
    overrides = {}
    scale = _target_scale(estimators, weights)
    if scale is not None:
        y_mean, y_scale, factors = scale
        aligned_params = [
            TreeParams(p.split_weight, p.split_bias, p.leaf_value * f[None, None, :])
            for p, f in zip(aligned_params, factors)
        ]
        overrides = {"y_mean_": y_mean, "y_scale_": y_scale}
    merged = TreeParams.weighted_average(aligned_params, weights)
    return _with_params(estimators[0], merged, **overrides)


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
        _check_compatible(estimators)
        if self.reference >= len(estimators):
            raise ValueError(
                f"reference={self.reference} but only {len(estimators)} estimators were given."
            )
        ref = estimators[self.reference]
        arch = ref.architecture_
        outputs = None
        if self.method == "am" and self.invariances != "none":
            Xs = _sample_rows(X, self.n_samples, self.random_state, ref.n_features_in_)
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
        self._fingerprints = [_fingerprint(est.tree_params_) for est in estimators]
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
        _check_compatible(estimators)
        for i, est in enumerate(estimators):
            if _fingerprint(est.tree_params_) != self._fingerprints[i]:
                raise ValueError(
                    f"Estimator {i} is not the one the aligner was fitted on: align() must be "
                    "given the estimators passed to fit(), in the same order."
                )
        return [
            _with_params(est, al.apply(est.tree_params_))
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
    :func:`sktree_lmc._multi.merge_many` for the procedure and its cost.

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
    # -- N-way form: a list of K estimators (implemented in _multi.py) --------
    if isinstance(a, (list, tuple)):
        if b is not None or lam != 0.5:
            raise TypeError("Pass b and lam for two models only; use weights= with a list.")
        from ._multi import merge_many

        return merge_many(a, weights, method=method, invariances=invariances, X=X,
                          max_iter=max_iter, weighting=weighting, n_samples=n_samples,
                          random_state=random_state, device=device)
    if b is None:
        raise TypeError("merge_estimators(a, b) needs a second model, or a list of models.")
    if weights is not None:
        raise TypeError("weights= is for a list of models; use lam= with two models.")
    # -- two-model form -----------------------------------------------------------
    _check_compatible([a, b])
    aligner = ModelAligner(method=method, invariances=invariances, weighting=weighting,
                           n_samples=n_samples, random_state=random_state, device=device)
    aligner.fit([a, b], X)
    aligned_b = aligner.alignments_[1].apply(b.tree_params_)
    return _combine([a, b], [a.tree_params_, aligned_b], [1 - lam, lam])

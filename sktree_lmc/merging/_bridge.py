"""The bridge between fitted estimators and their parameters.

Everything the merge layer (:mod:`._merge`, :mod:`._metrics`, :mod:`._sharded`)
needs to know about the estimators lives here, in one low module that only
imports the estimator module: checking that models can be aligned with each
other, building a new fitted estimator from parameters, and the target
standardization of regressors. Classifier versus regressor is decided by
:func:`sklearn.base.is_classifier`, not by probing fitted attributes: once,
by :func:`check_compatible`, and passed on to what depends on it.
"""

from __future__ import annotations

import copy
import hashlib
import math

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils.validation import _num_features, _num_samples, check_is_fitted

from ..encoding._common_encoding import common_encoder
from ..encoding._encoding import encoders_differ
from .._estimators import _BaseSoftTreeEnsemble
from ..model._params import TreeParams, check_finite_params
from ..training._objective import RegressionObjective

__all__ = ["check_compatible", "combine", "common_encoding", "fingerprint",
           "own_models", "rewrap", "sample_rows", "scale_leaves", "split_pipelines",
           "target_scale", "with_params"]


def _same_value(a, b):
    """Equality of two elements of an object array, a missing value (NaN,
    None, ``pd.NA``) equal to the same kind of missing value."""
    if a is b:
        return True
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # pd.NA == x is ambiguous
        return False


def _same_state(x, y):
    """Whether two fitted objects hold the same state: same types, equal
    arrays (NaN equal to NaN), and recursively equal attributes, containers
    and numbers. Used to check that Pipelines preprocess identically."""
    if type(x) is not type(y):
        return False
    if isinstance(x, np.ndarray):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.kind in "fc":
            return bool(np.array_equal(x, y, equal_nan=True))
        if x.dtype.kind == "O":  # e.g. a OneHotEncoder's categories, NaN among them
            return all(_same_value(a, b) for a, b in zip(x.ravel().tolist(), y.ravel().tolist()))
        return bool(np.array_equal(x, y))
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same_state(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same_state(a, b) for a, b in zip(x, y))
    if isinstance(x, float):
        return x == y or (math.isnan(x) and math.isnan(y))
    if isinstance(x, BaseEstimator) or hasattr(x, "__dict__"):
        if isinstance(x, np.random.RandomState):
            return True  # a seed generator, not part of what a fitted step computes
        return _same_state(vars(x), vars(y))
    try:
        return bool(x == y)
    except Exception:  # pragma: no cover - objects without a usable ==
        return x is y


def _merged_model(est):
    """A fitted :class:`~sktree_lmc.ShardedSoftTreeEnsemble`'s merged model
    (``merged_``, a soft tree ensemble), or ``est`` itself."""
    merged = getattr(est, "merged_", None)
    if not isinstance(est, (_BaseSoftTreeEnsemble, Pipeline)) and isinstance(
            merged, _BaseSoftTreeEnsemble):
        return merged
    return est


def own_models(estimators):
    """The soft tree ensembles of ``estimators`` (checked by
    :func:`split_pipelines`) as they were fitted, each on its own input
    encoding: a Pipeline's last step, a fitted ``ShardedSoftTreeEnsemble``'s
    merged model, the others as they are. What each model knows of its rows
    (its encoder's columns and their Gaussian copula), which the common
    encoding of :func:`split_pipelines` averages away: the probe rows of a
    merge are drawn from these (:func:`._report.members_probe_rows`)."""
    out = []
    for est in estimators:
        est = _merged_model(est)
        out.append(est.steps[-1][1] if isinstance(est, Pipeline) else est)
    return out


def split_pipelines(estimators):
    """The soft tree ensembles of ``estimators`` and their shared preprocessing.

    Plain estimators are returned as they are, with ``None`` (a fitted
    ``ShardedSoftTreeEnsemble`` as its merged model ``merged_``), except that
    models whose additive bins alone differ come back on common bins
    (:func:`common_encoding`: the same functions). Pipelines must
    all end with a soft tree ensemble and have equal preprocessing steps
    (same names, types, parameters and fitted state, as for the same
    preprocessing fitted on the same rows): then the final steps are returned
    with the first Pipeline's preprocessing (``pipeline[:-1]``), which
    transforms data for all of them.

    Raises
    ------
    TypeError
        If Pipelines and other estimators are mixed, or a Pipeline does not
        end with a soft tree ensemble.
    ValueError
        If the preprocessing steps differ (the message names the first step
        that differs).
    """
    estimators = [_merged_model(est) for est in estimators]
    if not any(isinstance(est, Pipeline) for est in estimators):
        return common_encoding(estimators), None
    ref = estimators[0]
    finals = []
    for i, est in enumerate(estimators):
        if not isinstance(est, Pipeline):
            raise TypeError(
                f"Estimator {i} is a {type(est).__name__} but others are Pipelines: merge "
                "Pipelines with Pipelines."
            )
        final = est.steps[-1][1]
        if not isinstance(final, _BaseSoftTreeEnsemble):
            raise TypeError(
                f"The last step of Pipeline {i} is a {type(final).__name__}, not a soft tree "
                "ensemble."
            )
        if len(est.steps) != len(ref.steps):
            raise ValueError(
                f"Pipelines 0 and {i} have different steps: {[n for n, _ in ref.steps]} vs "
                f"{[n for n, _ in est.steps]}."
            )
        for (name_a, step_a), (name_b, step_b) in zip(ref.steps[:-1], est.steps[:-1]):
            if name_a != name_b or not _same_state(step_a, step_b):
                raise ValueError(
                    f"Pipelines 0 and {i} differ in their preprocessing step {name_a!r}: the "
                    "models see different features, so their trees cannot be aligned or "
                    "averaged. Fit the preprocessing once (e.g. on the same rows) and share it, "
                    "or let the estimator encode raw inputs itself."
                )
        finals.append(final)
    return common_encoding(finals), ref[:-1]


def common_encoding(estimators):
    """``estimators`` re-expressed on one input encoding, when only their encodings differ.

    Models fitted on different rows (other shards, sites, days) fit
    different encoders: other quantiles, knots, categories, missing-value
    indicators and additive bins. Such models are returned as new fitted
    estimators that compute exactly the same functions, on one encoder on
    which every model's features are exact linear functions of the common
    ones (:func:`~sktree_lmc.encoding._common_encoding.common_encoder`: the union of
    the knots, categories, indicators and bins; the quantile-normal columns
    of the models side by side), so that they align, merge and interpolate as
    models with equal encoders do. Anything else (equal encoders, encoders
    that no common encoding expresses, objects that are not fitted soft tree
    ensembles) is returned unchanged, and :func:`check_compatible` names what
    differs.
    """
    if len(estimators) < 2 or not all(
        isinstance(est, _BaseSoftTreeEnsemble) and hasattr(est, "tree_params_")
        and getattr(est, "encoder_", None) is not None for est in estimators
    ):
        return estimators
    encoders = [est.encoder_ for est in estimators]
    if all(encoders_differ(encoders[0], enc) is None for enc in encoders[1:]):
        return estimators
    try:
        union, translations = common_encoder(encoders)
    except ValueError:
        return estimators  # check_compatible names the difference
    out = []
    for est, translation in zip(estimators, translations):
        p = est.tree_params_
        W, b = translation.weights(p.split_weight, p.split_bias)
        rows = translation.additive_rows
        additive = p.additive if rows is None or p.additive is None else p.additive[rows]
        params = TreeParams(np.asarray(W, dtype=np.float32), np.asarray(b, dtype=np.float32),
                            p.leaf_value, additive)
        # a teacher's trees split on the model's own encoded features, which the common
        # encoding does not keep: the re-expressed model has none, and the refit of a
        # merge of such models fits the labels (see Objective.merged)
        out.append(with_params(est, params, encoder_=copy.deepcopy(union), teacher_=None))
    return out


def rewrap(template, final):
    """``final`` in place of the last step of a copy of the Pipeline
    ``template`` (its preprocessing deep-copied); ``final`` itself when
    ``template`` is not a Pipeline."""
    if not isinstance(template, Pipeline):
        return final
    new = copy.copy(template)
    new.steps = copy.deepcopy(template.steps[:-1]) + [(template.steps[-1][0], final)]
    return new


def transform_rows(head, X):
    """``X`` through the shared preprocessing ``head`` (None: unchanged)."""
    if head is None or X is None:
        return X
    return head.transform(X)


def check_compatible(estimators):
    """Raise a clear error unless all estimators can be aligned with each other.

    Parameters
    ----------
    estimators : sequence
        At least two fitted soft tree ensembles of one class, architecture,
        depth, size, number of features and outputs, and classes.

    Returns
    -------
    classifier : bool
        Whether they are classifiers (:func:`sklearn.base.is_classifier`):
        the task of the merge, decided once here and passed on.

    Raises
    ------
    TypeError
        If one is not a soft tree ensemble.
    ValueError
        If fewer than two are given, they differ in one of the above or in
        the shape of their targets (regressors fitted on 1-D and 2-D ``y``),
        or one has NaN or infinite parameters (in any array, the additive
        table included).
    """
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
    classifier = is_classifier(ref)
    differences = []
    for i, est in enumerate(estimators[1:], start=1):
        differences += [f"{what}: {x!r} (model 0) vs {y!r} (model {i})"
                        for what, x, y in _compared(ref, est, classifier) if not _equal(x, y)]
        differ = encoders_differ(ref.encoder_, est.encoder_)
        if differ is not None:
            differences.append(f"input encoding of models 0 and {i}: {differ}")
    if differences:
        raise ValueError(
            "The models cannot be aligned or merged; they differ in "
            + "; ".join(differences) + ". Merged models need one architecture, depth and "
            "number of trees, the same input columns, classes and outputs."
        )
    for i, est in enumerate(estimators):
        check_finite_params(est.tree_params_, f"Estimator {i}")
    return classifier


def _compared(a, b, classifier):
    """What two models (``classifier``: of that task) must share to be aligned:
    (what, a's, b's); the classes and the loss are their fitted objectives'."""
    what = {True: "1-D y", False: "2-D y", None: "unknown targets"}
    out = [
        ("architecture", a.architecture_.name, b.architecture_.name),
        ("depth", a.architecture_.depth, b.architecture_.depth),
        ("number of trees", a.tree_params_.n_trees, b.tree_params_.n_trees),
        ("number of features", a.n_features_in_, b.n_features_in_),
        ("feature names", getattr(a, "feature_names_in_", None),
         getattr(b, "feature_names_in_", None)),
        ("number of outputs", a.n_outputs_, b.n_outputs_),
        ("the shape of their targets", what[_one_dimensional(a)], what[_one_dimensional(b)]),
    ]
    if classifier:
        out.append(("classes", a.objective_.classes, b.objective_.classes))
    else:  # the raw outputs of other losses mean other things
        out.append(("loss", a.objective_.loss, b.objective_.loss))
    return out


def _one_dimensional(est):
    """Whether a regressor was fitted on 1-D targets (None: a classifier)."""
    return getattr(est.objective_, "one_dimensional", None)


def _equal(x, y):
    if x is None or y is None:
        return x is y
    return bool(np.array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object)))


def fingerprint(params):
    """A digest of an ensemble's parameters, to recognize the models of a fit.

    Every parameter array counts, the additive table included (its presence
    and shape too): a model whose table alone differs is another model.
    """
    digest = hashlib.sha1()
    for array in (params.split_weight, params.split_bias, params.leaf_value):
        digest.update(np.ascontiguousarray(array).tobytes())
    if params.additive is not None:
        digest.update(f"additive{params.additive.shape}".encode())
        digest.update(np.ascontiguousarray(params.additive).tobytes())
    return digest.hexdigest()


def sample_rows(X, n_samples, random_state, n_features):
    """At most ``n_samples`` rows of ``X`` (in their order), for activation
    matching; ``X`` may be any input the models take (arrays, DataFrames)."""
    if X is None:
        raise ValueError("Activation matching (method='am') needs data: pass X.")
    if not hasattr(X, "shape") or isinstance(X, np.ndarray) and X.dtype.kind in "biuf":
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}.")
    if _num_features(X) != n_features:
        raise ValueError(f"X has {_num_features(X)} features, but the models expect {n_features}.")
    rng = check_random_state(random_state)
    n_rows = _num_samples(X)
    if n_rows > n_samples:
        X = _safe_indexing(X, np.sort(rng.choice(n_rows, n_samples, replace=False)))
    return X


def with_params(template, params, **overrides):
    """A new fitted estimator with the hyperparameters and fitted metadata of
    ``template``, the parameters ``params`` and the attributes ``overrides``.

    The fitted state copied is the estimator's public fitted attributes
    (names ending in ``_``: its objective ``objective_`` among them), except
    Adam's state: ``optimizer_state_`` is None (unless given in
    ``overrides``), because the template's moments belong to its own
    parameters, not to ``params`` (a merged model's, or an aligned copy's,
    are in another basis). The hyperparameters are the template's,
    ``warm_start`` included: a warm-started ``fit`` of the new estimator
    continues from ``params`` with a fresh Adam.
    """
    new = clone(template)
    for key, value in vars(template).items():
        fitted = key.endswith("_") and not key.startswith("_")
        if fitted and key not in ("tree_params_", "optimizer_state_"):
            setattr(new, key, copy.deepcopy(value))
    new.tree_params_ = params.copy()
    if "optimizer_state_" in vars(template):
        new.optimizer_state_ = None
    for key, value in overrides.items():
        setattr(new, key, value)
    return new


def target_scale(estimators, weights, classifier):
    """Merged target standardization of regressors, and each model's leaf factor.

    Returns ``(y_mean, y_scale, factors)``: the weighted means of ``y_mean_``
    and ``y_scale_``, and ``y_scale_ / y_scale`` per model, the factor that
    expresses a model's leaf values in the merged scale (the raw output of a
    regressor is multiplied by ``y_scale_``); with the log link of the
    Poisson and Gamma losses, the geometric mean scale and unit factors (see
    :meth:`~sktree_lmc.training._losses.LogLink.merged_scale`). ``None`` for
    classifiers (``classifier``: the task of the estimators, see :func:`check_compatible`).
    """
    if classifier:
        return None
    return RegressionObjective.merged_scale([est.objective_ for est in estimators], weights)


def link_correction(estimator, ensemble, predictions, *, data=False, classifier):
    """The factor of a merged regressor's ``y_scale_`` that undoes its link's
    averaging (see ``merge_correction`` of the links in :mod:`._losses`),
    given its predictions and its models' averaged ones on the same rows
    (2-D; ``data``: rows of the data rather than probe rows); None for
    classifiers (``classifier``) and the identity link."""
    if classifier:
        return None
    return estimator.objective_.loss.link.merge_correction(ensemble, predictions, data=data)


def scale_leaves(params, factors):
    """``params`` with leaf values (and the additive table, in the same units)
    multiplied by ``factors`` (one per output)."""
    return TreeParams(params.split_weight, params.split_bias,
                      params.leaf_value * factors[None, None, :],
                      None if params.additive is None else params.additive * factors[None, :])


def combine(estimators, aligned_params, weights, *, classifier):
    """The fitted estimator whose parameters are the weighted average of
    ``aligned_params`` (one per estimator, all in one basis).

    Regressors' leaves are first expressed in the merged target scale (see
    :func:`target_scale`), so that weights ``(1, 0, ...)`` reproduce model 0
    exactly and identical functions merge into the same function. The
    hyperparameters are model 0's; the merged model's objective
    (``objective_``) is the merge of the models' (:meth:`Objective.merged`:
    the refit objective of classifiers that differ in it is the weighted
    mean of theirs). ``classifier``: their task (see :func:`check_compatible`).
    """
    scale = target_scale(estimators, weights, classifier)
    if scale is not None:
        factors = scale[2]
        aligned_params = [scale_leaves(p, f) for p, f in zip(aligned_params, factors)]
    merged = TreeParams.weighted_average(aligned_params, weights)
    objectives = [est.objective_ for est in estimators]
    return with_params(estimators[0], merged,
                       objective_=type(objectives[0]).merged(objectives, weights))

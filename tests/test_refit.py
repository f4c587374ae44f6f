"""refit_leaves: same splits, convex re-solve of the leaves, never a higher objective."""

import pickle

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import softmax
from sklearn.datasets import make_classification, make_regression
from sklearn.utils._param_validation import InvalidParameterError

import sktree_lmc.merging._refit as refit_module
from sktree_lmc import (
    ARCHITECTURES,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    merge_estimators,
    refit_leaves,
)
from sktree_lmc.training._boosting import oblivious_output

X, Y = make_classification(n_samples=300, n_features=5, n_informative=3, n_classes=3,
                           n_clusters_per_class=1, random_state=0)


def _clf(arch="oblivious", seed=0, **kw):
    params = dict(arch=arch, n_estimators=8, max_epochs=3, batch_size=64, device="cpu",
                  random_state=seed)
    params.update(kw)
    return SoftTreeEnsembleClassifier(**params).fit(X, Y)


def _objective(est, X, y, sample_weight=None, alpha=1e-4):
    """The objective of refit_leaves, computed independently in NumPy (float64)."""
    mu = est.tree_params_
    out = est._raw_output(X)  # float64 forward pass
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if hasattr(est, "classes_"):
        idx = np.searchsorted(est.classes_, y)
        shifted = out - out.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        target = np.eye(len(est.classes_))[idx]
        objective = est.objective_
        if est.teacher_ and objective.teacher_weight > 0:
            # the labels mixed with the mean probabilities of the model's teachers
            Xe = est._encoded_input(X).X[:, :est.encoder_.n_features_out_].astype(np.float64)
            probs = np.mean([softmax(oblivious_output(Xe, *t), axis=1) for t in est.teacher_],
                            axis=0)
            target = (1 - objective.teacher_weight) * target + objective.teacher_weight * probs
        # label smoothing (torch's): the target mixed with the uniform distribution
        s = objective.label_smoothing
        target = (1 - s) * target + s / len(est.classes_)
        loss = -(target * logp).sum(axis=1)
    else:
        t = (np.asarray(y, dtype=np.float64).reshape(len(y), -1) - est.y_mean_) / est.y_scale_
        loss = ((out - t) ** 2).mean(axis=1)
    return float((w * loss).sum() / w.sum() + 0.5 * alpha * np.sum(
        mu.leaf_value.astype(np.float64) ** 2))


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_refit_after_merge_keeps_splits_and_lowers_the_objective(arch):
    a, b = _clf(arch, 0), _clf(arch, 1)
    merged = merge_estimators(a, b)
    X_in, Y_in = X.copy(), Y.copy()
    before = pickle.dumps(merged)
    refitted, info = refit_leaves(merged, X_in, Y_in, return_info=True)
    # inputs untouched
    np.testing.assert_array_equal(X_in, X)
    np.testing.assert_array_equal(Y_in, Y)
    assert pickle.dumps(merged) == before
    # same splits, new leaves, same class and metadata
    p, q = merged.tree_params_, refitted.tree_params_
    np.testing.assert_array_equal(p.split_weight, q.split_weight)
    np.testing.assert_array_equal(p.split_bias, q.split_bias)
    assert q.leaf_value.shape == p.leaf_value.shape and q.leaf_value.dtype == np.float32
    assert not np.array_equal(p.leaf_value, q.leaf_value)
    assert type(refitted) is type(merged)
    np.testing.assert_array_equal(refitted.classes_, merged.classes_)
    # the objective it optimizes went down, checked by an independent computation
    start, end = _objective(merged, X, Y), _objective(refitted, X, Y)
    assert info["objective_start"] == pytest.approx(start, rel=1e-6)
    assert info["objective"] == pytest.approx(end, rel=1e-6)
    assert end < start - 1e-3
    # and the refitted leaves are (near) the optimum: the gradient is small
    # (the objective takes the trees' input: X encoded, as refit_leaves passes it)
    X_enc = refitted._encoded_input(X)
    _, grad = refit_module._LeafObjective(
        refitted, X_enc, torch.as_tensor(refitted.objective_.refit_targets(
            X_enc.X, Y, refitted.encoder_.n_features_out_)),
        np.ones(len(X)), 1e-4, "cpu", cache_bytes=256 * 2**20
    )(refitted.tree_params_.leaf_value.astype(np.float64).ravel())
    assert np.abs(grad).max() < 1e-3


def test_regressor_and_sample_weight():
    Xr, yr = make_regression(n_samples=300, n_features=4, noise=5.0, random_state=0)
    yr = 100 + 50 * yr  # a target scale far from 1
    reg = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=2, device="cpu",
                                    random_state=0).fit(Xr, yr)
    w = np.random.RandomState(0).uniform(0.5, 2.0, len(yr))
    refitted, info = refit_leaves(reg, Xr, yr, sample_weight=w, return_info=True)
    assert info["objective"] < info["objective_start"]
    assert _objective(refitted, Xr, yr, w) == pytest.approx(info["objective"], rel=1e-6)
    assert refitted.score(Xr, yr, sample_weight=w) > reg.score(Xr, yr, sample_weight=w)
    # two targets
    Y2 = np.c_[yr, -yr]
    reg2 = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=2, device="cpu",
                                     random_state=0).fit(Xr, Y2)
    assert refit_leaves(reg2, Xr, Y2).predict(Xr).shape == (len(Xr), 2)


def test_zero_weight_rows_do_not_matter():
    est = _clf()
    w = np.ones(len(Y))
    w[::3] = 0
    keep = w > 0
    a = refit_leaves(est, X, Y, sample_weight=w)
    b = refit_leaves(est, X[keep], Y[keep])
    np.testing.assert_allclose(a.tree_params_.leaf_value, b.tree_params_.leaf_value, atol=1e-5)


def test_chunked_matrix_free_path_gives_the_cached_result(monkeypatch):
    est = _clf(depth=3)
    cached = refit_leaves(est, X, Y, max_iter=30)
    monkeypatch.setattr(refit_module, "_CHUNK_BYTES", {"cpu": 8 * 8 * 8 * 7})  # 7 rows a chunk
    streamed = refit_leaves(est, X, Y, max_iter=30, cache_size=0)
    np.testing.assert_allclose(streamed.tree_params_.leaf_value, cached.tree_params_.leaf_value,
                               atol=1e-5)


def test_partial_float32_cache_gives_the_float64_result(monkeypatch):
    """Features that do not fit in float64 are kept in float32 as far as
    ``cache_size`` goes, the other chunks recomputed: the leaves stay those of
    the all-float64 cache to the solver's tolerance."""
    est = _clf(depth=3)
    cached, info = refit_leaves(est, X, Y, max_iter=30, return_info=True)
    M, L = est.tree_params_.leaf_value.shape[:2]
    rows = 7
    monkeypatch.setattr(refit_module, "_CHUNK_BYTES", {"cpu": 8 * M * L * rows})
    budget = 3 * rows * M * L * 4  # three chunks in float32
    site = refit_module._local_objective(est, X, Y, None, 1e-4, budget).rows
    assert site.cache_dtype == torch.float32 and site.n_cached == 3
    site.terms(est.tree_params_.leaf_value.astype(np.float64).ravel())
    assert len(site.cached) == 3 and all(c.dtype == torch.float32 for c in site.cached)
    partial, info_partial = refit_leaves(est, X, Y, max_iter=30, return_info=True,
                                         cache_size=budget / 2**20)
    np.testing.assert_allclose(partial.tree_params_.leaf_value, cached.tree_params_.leaf_value,
                               atol=1e-4)
    assert info_partial["objective"] == pytest.approx(info["objective"], rel=1e-6)
    whole = refit_module._local_objective(est, X, Y, None, 1e-4, 2**30).rows
    assert whole.cache_dtype == torch.float64


def test_cache_size_is_validated():
    with pytest.raises(InvalidParameterError, match="cache_size"):
        refit_leaves(_clf(), X, Y, cache_size=-1)


def test_never_raises_the_objective_at_the_optimum():
    """Starting at the optimum, the result is not worse (the guard keeps the leaves)."""
    once = refit_leaves(_clf(), X, Y)
    twice, info = refit_leaves(once, X, Y, return_info=True)
    assert info["objective"] <= info["objective_start"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), arch=st.sampled_from(sorted(ARCHITECTURES)),
       alpha=st.sampled_from([0.0, 1e-4, 1e-1]), max_iter=st.integers(1, 20))
def test_property_objective_never_rises(seed, arch, alpha, max_iter):
    rng = np.random.RandomState(seed)
    rows = rng.choice(len(X), 120, replace=False)
    est = SoftTreeEnsembleClassifier(arch=arch, n_estimators=4, max_epochs=1, device="cpu",
                                     random_state=seed).fit(X[rows], Y[rows])
    w = rng.uniform(0, 1, len(rows))
    _, info = refit_leaves(est, X[rows], Y[rows], sample_weight=w, alpha=alpha,
                           max_iter=max_iter, return_info=True)
    assert info["objective"] <= info["objective_start"]


def test_errors():
    est = _clf()
    with pytest.raises(ValueError, match="not fitted on"):
        refit_leaves(est, X, np.where(Y == 0, 7, Y))
    with pytest.raises(ValueError, match="features"):
        refit_leaves(est, X[:, :3], Y)
    with pytest.raises(ValueError, match="rows"):
        refit_leaves(est, X, Y[:-1])
    with pytest.raises(ValueError, match="non-zero|sums to zero"):
        refit_leaves(est, X, Y, sample_weight=np.zeros(len(Y)))
    with pytest.raises(InvalidParameterError, match="alpha"):
        refit_leaves(est, X, Y, alpha=-1.0)
    with pytest.raises(InvalidParameterError, match="estimator"):
        refit_leaves(object(), X, Y)
    with pytest.raises(Exception, match="not fitted"):
        refit_leaves(SoftTreeEnsembleClassifier(), X, Y)


def test_does_not_touch_global_torch_state():
    state = torch.random.get_rng_state()
    refit_leaves(_clf(), X, Y, max_iter=5)
    assert torch.equal(state, torch.random.get_rng_state())


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (np.nan, ValueError, "y contains NaN"),
        (np.inf, ValueError, "y contains infinity"),
        (1e39, ValueError, "y contains values beyond the float32 range"),
        ("complex", ValueError, "y must be real regression targets, got complex"),
        ("text", ValueError, "y must be real regression targets"),
    ],
)
def test_regressor_targets_are_validated_as_in_fit(bad, error, match):
    """Issue 20: NaN, inf, 1e39 and complex targets were accepted and returned a model
    with a NaN objective."""
    Xr, yr = make_regression(n_samples=80, n_features=4, random_state=0)
    reg = SoftTreeEnsembleRegressor(n_estimators=2, max_epochs=1, device="cpu",
                                    random_state=0).fit(Xr, yr)
    if bad == "complex":
        y = yr + 1j
    elif bad == "text":
        y = np.array(["a"] * len(yr))
    else:
        y = yr.copy()
        y[3] = bad
    with pytest.raises(error, match=match):
        refit_leaves(reg, Xr, y)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_iter=True), "'max_iter' parameter"),
        (dict(max_iter=0), "'max_iter' parameter"),
        (dict(tol=True), "'tol' parameter"),
        (dict(tol=np.nan), "'tol' parameter"),
        (dict(tol=2.0), "'tol' parameter"),
        (dict(alpha=True), "'alpha' parameter"),
        (dict(alpha=1e300), "'alpha' parameter"),
        (dict(alpha=np.inf), "'alpha' parameter"),
    ],
)
def test_solver_settings_reject_bools_and_out_of_range_values(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        refit_leaves(_clf(), X, Y, **kwargs)


def test_huge_sample_weights_give_a_finite_objective():
    est = _clf()
    _, info = refit_leaves(est, X, Y, sample_weight=np.full(len(Y), 1e307), max_iter=5,
                           return_info=True)
    _, ref = refit_leaves(est, X, Y, max_iter=5, return_info=True)
    assert np.isfinite(info["objective"])
    assert info["objective_start"] == pytest.approx(ref["objective_start"])


def test_verbose_refit_logs_iterations_when_redirected(capsys):
    from sklearn.datasets import make_classification

    from sktree_lmc import SoftTreeEnsembleClassifier, refit_leaves

    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    est = SoftTreeEnsembleClassifier(n_estimators=8, depth=2, max_epochs=2, device="cpu",
                                     random_state=0).fit(X, y)
    _, info = refit_leaves(est, X, y, max_iter=5, verbose=1, return_info=True)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == info["n_iter"] + 1
    assert lines[0].startswith("refit_leaves iteration 1/5: objective ")
    assert lines[-1].startswith("refit_leaves: objective ") and " iterations (" in lines[-1]
    refit_leaves(est, X, y, max_iter=5)
    assert capsys.readouterr().err == ""


def test_refit_of_a_model_with_a_teacher_solves_its_training_objective():
    """A model trained on labels mixed with a teacher's probabilities keeps its
    teacher (``teacher_``), and refit_leaves solves that objective, not the
    labels' alone: its leaves fit the soft targets better, and the labels
    less, than a refit of the same model without the teacher."""
    import copy

    est = _clf(n_estimators=16, max_epochs=10, teacher_weight=0.75)
    assert len(est.teacher_) == 1
    labels_only = copy.deepcopy(est)
    labels_only.teacher_ = None
    soft, _ = refit_leaves(est, X, Y, return_info=True)
    hard, _ = refit_leaves(labels_only, X, Y, return_info=True)
    X_enc = est._encoded_input(X)
    targets = est.objective_.refit_targets(X_enc.X, Y, est.encoder_.n_features_out_)
    assert targets.shape == (len(Y), 3) and np.allclose(targets.sum(axis=1), 1, atol=1e-6)
    assert not np.array_equal(targets, np.eye(3)[Y])

    def cross_entropy(model, target):
        logp = torch.log_softmax(torch.as_tensor(model._raw_output(X)), dim=1).numpy()
        return -(target * logp).sum(axis=1).mean()

    assert cross_entropy(soft, targets) < cross_entropy(hard, targets)
    assert cross_entropy(hard, np.eye(3)[Y]) < cross_entropy(soft, np.eye(3)[Y])
    # without the teacher in the fit, there is none to refit with
    assert _clf(teacher_weight=0.0).teacher_ is None


def test_refit_accepts_a_teacher_whose_boosting_stopped_early():
    """The boosting marks the levels (and trees) it did not grow with feature -1, as on
    datasets where the teacher's early stopping ends before its last tree; refit_leaves
    (and so a merge's refit) takes such a teacher, and its output treats them as no split."""
    from sktree_lmc.training._objective import Teacher

    est = _clf(n_estimators=16, max_epochs=5, teacher_weight=0.75)
    base, features, thresholds, leaves = est.objective_.teachers[0]
    features, thresholds, leaves = features.copy(), thresholds.copy(), leaves.copy()
    half = len(features) // 2
    features[half:], thresholds[half:], leaves[half:] = -1, 0.0, 0.0
    stopped = Teacher(base, features, thresholds, leaves)
    est.objective_ = est.objective_.replace(teachers=[stopped])
    refitted = refit_leaves(est, X, Y, max_iter=5)
    assert np.isfinite(refitted.predict_proba(X)).all()
    X_enc = est._encoded_input(X).X
    first_half = Teacher(base, features[:half], thresholds[:half], leaves[:half])
    np.testing.assert_allclose(stopped.output(X_enc), first_half.output(X_enc))


def test_a_merge_keeps_the_distinct_teachers_of_its_models():
    kw = dict(teacher_weight=0.75, early_stopping=True)  # other validation splits
    a, b = _clf(seed=0, **kw), _clf(seed=1, **kw)
    assert len(merge_estimators(a, b).teacher_) == 2  # their teachers differ (other splits)
    assert len(merge_estimators(a, a).teacher_) == 1
    assert len(merge_estimators([a, a, b]).teacher_) == 2
    assert merge_estimators(_clf(teacher_weight=0.0), _clf(seed=1, teacher_weight=0.0)
                            ).teacher_ is None

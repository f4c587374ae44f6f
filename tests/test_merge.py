"""merge_estimators and ModelAligner on real (small, quickly trained) models."""

import copy
import pickle

import numpy as np
import pytest
from conftest import FAST
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    merge_estimators,
    random_ops,
)


@pytest.fixture(scope="module")
def small_data():
    return make_classification(n_samples=120, n_features=6, n_informative=4, random_state=0)


def fit_clf(X, y, seed=0, **kw):
    return SoftTreeEnsembleClassifier(**{**FAST, "random_state": seed, **kw}).fit(X, y)


# ----------------------------------------------------------------------------
# The merged estimator is a real fitted estimator
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["wm", "am"])
def test_merged_estimator_is_fitted_predicts_pickles(clf_pair, magic, method):
    X, y = magic
    a, b = clf_pair
    merged = merge_estimators(a, b, 0.5, aligner=ModelAligner(method=method, random_state=0), X=X)
    assert type(merged) is SoftTreeEnsembleClassifier
    assert merged is not a and merged is not b
    assert merged.tree_params_ is not a.tree_params_
    check_is_fitted(merged)
    assert merged.get_params() == a.get_params()
    assert_array_equal(merged.classes_, a.classes_)
    proba = merged.predict_proba(X)
    assert proba.shape == (len(X), 2) and np.allclose(proba.sum(axis=1), 1)
    assert merged.predict(X).shape == (len(X),)
    assert 0 <= merged.score(X, y) <= 1
    # not an endpoint
    assert np.abs(proba - a.predict_proba(X)).max() > 1e-4
    back = pickle.loads(pickle.dumps(merged))
    assert_allclose(back.predict_proba(X), proba, rtol=0, atol=0)
    # the inputs are untouched
    assert_array_equal(a.get_tree_params().split_weight, clf_pair[0].tree_params_.split_weight)


def test_merged_estimator_in_a_pipeline(clf_pair, magic):
    X, y = magic
    merged = merge_estimators(*clf_pair, 0.5)
    # as a fitted step after a fitted transformer (identity scaling here)
    scaler = StandardScaler(with_mean=False, with_std=False).fit(X)
    pipe = make_pipeline(scaler, merged)
    assert_allclose(pipe.predict_proba(X), merged.predict_proba(X))
    assert_array_equal(pipe.predict(X), merged.predict(X))
    # and as a template that the pipeline clones and refits
    scores = cross_val_score(make_pipeline(StandardScaler(), clone(merged)), X[:200], y[:200],
                             cv=2)
    assert scores.shape == (2,) and np.isfinite(scores).all()


@pytest.mark.parametrize("method", ["wm", "am"])
@pytest.mark.parametrize("invariances", ["none", "perm", "all"])
def test_endpoints_reproduce_the_models(clf_pair, magic, method, invariances):
    X, _ = magic
    a, b = clf_pair
    aligner = ModelAligner(method=method, invariances=invariances)
    m0 = merge_estimators(a, b, 0.0, aligner=aligner, X=X)
    m1 = merge_estimators(a, b, 1.0, aligner=aligner, X=X)
    assert_allclose(m0.predict_proba(X), a.predict_proba(X), atol=1e-5)
    assert_allclose(m1.predict_proba(X), b.predict_proba(X), atol=1e-5)
    assert_array_equal(m0.tree_params_.split_weight, a.tree_params_.split_weight)


@pytest.mark.parametrize("arch", ["non_oblivious", "decision_list", "decision_list_modified"])
def test_endpoints_other_architectures(small_data, arch):
    X, y = small_data
    a, b = fit_clf(X, y, 1, arch=arch, depth=3), fit_clf(X, y, 2, arch=arch, depth=3)
    for method in ("wm", "am"):
        m1 = merge_estimators(a, b, 1.0, aligner=method, X=X)
        assert_allclose(m1.predict_proba(X), b.predict_proba(X), atol=1e-5)
        mid = merge_estimators(a, b, 0.5, aligner=method, X=X)
        assert_allclose(mid.tree_params_.leaf_value.shape, a.tree_params_.leaf_value.shape)


def test_merge_aligns_b(clf_pair):
    """With invariances the midpoint is closer to a than the naive midpoint is."""
    a, b = clf_pair
    naive = merge_estimators(a, b, 1.0, aligner="naive").tree_params_
    aligned = merge_estimators(a, b, 1.0, aligner=ModelAligner(invariances="all")).tree_params_

    def dist(p):
        return sum(np.sum((getattr(p, f) - getattr(a.tree_params_, f)) ** 2)
                   for f in ("split_weight", "split_bias", "leaf_value"))

    assert dist(aligned) < dist(naive)


def test_regressor_merging(magic):
    X, _ = magic
    rng = np.random.RandomState(0)
    y = X[:, 0] * 3 + rng.standard_normal(len(X))
    a = SoftTreeEnsembleRegressor(random_state=1, **FAST).fit(X, y)
    b = SoftTreeEnsembleRegressor(random_state=2, **FAST).fit(X, 2 * y + 5)
    assert not np.allclose(a.y_mean_, b.y_mean_)
    for method in ("wm", "am"):
        m0 = merge_estimators(a, b, 0.0, aligner=method, X=X)
        m1 = merge_estimators(a, b, 1.0, aligner=method, X=X)
        assert type(m0) is SoftTreeEnsembleRegressor
        assert_allclose(m0.predict(X), a.predict(X), rtol=1e-5, atol=1e-5)
        assert_allclose(m1.predict(X), b.predict(X), rtol=1e-5, atol=1e-4)
        assert m0.predict(X).ndim == 1
    mid = merge_estimators(a, b, 0.25)
    assert_allclose(mid.y_mean_, 0.75 * a.y_mean_ + 0.25 * b.y_mean_)
    assert_allclose(mid.y_scale_, 0.75 * a.y_scale_ + 0.25 * b.y_scale_)
    check_is_fitted(mid)
    pickle.loads(pickle.dumps(mid)).predict(X[:3])


def test_multioutput_regressor_merging():
    X, Y = make_regression(n_samples=100, n_features=4, n_targets=2, random_state=0)
    a = SoftTreeEnsembleRegressor(random_state=1, **FAST).fit(X, Y)
    b = SoftTreeEnsembleRegressor(random_state=2, **FAST).fit(X, Y)
    m1 = merge_estimators(a, b, 1.0)
    assert m1.predict(X).shape == (100, 2)
    assert_allclose(m1.predict(X), b.predict(X), rtol=1e-5, atol=1e-4)


# ----------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------


def test_incompatible_models_raise(small_data):
    X, y = small_data
    a = fit_clf(X, y, 1)
    cases = {
        "classes": fit_clf(X, np.where(y == 1, 5, 0), 2),
        "architecture": fit_clf(X, y, 2, arch="non_oblivious"),
        "depth": fit_clf(X, y, 2, depth=3),
        "number of trees": fit_clf(X, y, 2, n_estimators=9),
        "number of features": fit_clf(X[:, :5], y, 2),
        "number of outputs": fit_clf(X, np.arange(len(y)) % 3, 2),
    }
    for what, b in cases.items():
        with pytest.raises(ValueError, match=what):
            merge_estimators(a, b)
        with pytest.raises(ValueError, match=what):
            ModelAligner().fit([a, b])


def test_regressor_output_size_mismatch():
    X, Y = make_regression(n_samples=60, n_features=4, n_targets=2, random_state=0)
    a = SoftTreeEnsembleRegressor(random_state=1, **FAST).fit(X, Y[:, 0])
    b = SoftTreeEnsembleRegressor(random_state=2, **FAST).fit(X, Y)
    with pytest.raises(ValueError, match="outputs"):
        merge_estimators(a, b)


def test_other_errors(small_data):
    X, y = small_data
    a, b = fit_clf(X, y, 1), fit_clf(X, y, 2)
    with pytest.raises(NotFittedError):
        merge_estimators(a, SoftTreeEnsembleClassifier(**FAST))
    with pytest.raises(NotFittedError):
        merge_estimators(SoftTreeEnsembleClassifier(**FAST), b)
    for lam in (-0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match="lam"):
            merge_estimators(a, b, lam)
    with pytest.raises(ValueError, match="X"):
        merge_estimators(a, b, aligner="am")
    with pytest.raises(ValueError, match="features"):
        merge_estimators(a, b, aligner="am", X=X[:, :3])
    with pytest.raises(ValueError, match="aligner"):
        merge_estimators(a, b, aligner="gradient")
    with pytest.raises(ValueError, match="invariances"):
        merge_estimators(a, b, aligner=ModelAligner(invariances="flips"))
    with pytest.raises(TypeError, match="method"):
        merge_estimators(a, b, method="wm")
    with pytest.raises(TypeError, match="soft tree ensemble"):
        merge_estimators(a, LogisticRegression().fit(X, y))
    reg = SoftTreeEnsembleRegressor(random_state=1, **FAST).fit(X, y.astype(float))
    with pytest.raises(ValueError, match="Cannot merge"):
        merge_estimators(a, reg)
    # AM without X is fine when there is nothing to match on
    merge_estimators(a, b, aligner=ModelAligner(method="am", invariances="none"))


# ----------------------------------------------------------------------------
# ModelAligner
# ----------------------------------------------------------------------------


def test_aligner_params_and_clone():
    al = ModelAligner(method="am", invariances="perm", weighting=False, n_samples=7,
                      reference=1, random_state=3)
    params = al.get_params()
    assert params == dict(method="am", invariances="perm", weighting=False, scale_features=True,
                          n_samples=7,
                          reference=1, max_iter=20, tol=1e-3, random_state=3, device="cpu",
                          verbose=0)
    c = clone(al)
    assert c is not al and c.get_params() == params
    al.set_params(method="wm", n_samples=9)
    assert al.method == "wm" and al.n_samples == 9
    with pytest.raises(ValueError):
        al.set_params(bogus=1)
    assert "ModelAligner" in repr(al)


def test_aligner_invalid_params(clf_pair):
    with pytest.raises(ValueError, match="method"):
        ModelAligner(method="xx").fit(clf_pair)
    with pytest.raises(ValueError, match="n_samples"):
        ModelAligner(n_samples=0).fit(clf_pair)
    with pytest.raises(ValueError, match="reference"):
        ModelAligner(reference=2).fit(clf_pair)
    with pytest.raises(ValueError, match="two"):
        ModelAligner().fit(clf_pair[:1])
    with pytest.raises(NotFittedError):
        ModelAligner().align(clf_pair)


@pytest.mark.parametrize("method", ["wm", "am"])
def test_aligner_gives_functionally_identical_models(clf_pair, magic, method):
    X, _ = magic
    a, b = clf_pair
    # a third, less trained model; on the same rows, so that its input encoder (fitted
    # on them) is the one of a and b, as alignment requires
    c = fit_clf(X, magic[1], 3, max_epochs=1)
    aligner = ModelAligner(method=method, n_samples=100, random_state=0).fit([a, b, c], X)
    assert len(aligner.alignments_) == 3 and aligner.reference_ == 0
    aligned = aligner.align([a, b, c])
    for orig, new in zip((a, b, c), aligned):
        assert new is not orig
        check_is_fitted(new)
        assert_allclose(new.predict_proba(X), orig.predict_proba(X), atol=1e-6)
    assert not np.array_equal(aligned[1].tree_params_.split_weight, b.tree_params_.split_weight)
    # without refinement sweeps the reference is unchanged (the sweeps may move it too)
    star = clone(aligner).set_params(max_iter=0).fit_align([a, b, c], X)
    assert_array_equal(star[0].tree_params_.split_weight, a.tree_params_.split_weight)
    # fit_align is fit + align
    again = clone(aligner).fit_align([a, b, c], X)
    assert_array_equal(again[2].tree_params_.split_weight, aligned[2].tree_params_.split_weight)
    with pytest.raises(ValueError, match="fitted on 3"):
        aligner.align([a, b])


def test_aligner_reference_index(small_data):
    """Reference 1: model 1 stays put, and a transformed copy of model 0 maps back onto it."""
    X, y = small_data
    a = fit_clf(X, y, 1)
    rng = np.random.RandomState(0)
    params = a.get_tree_params()
    moved = params.permute_trees(rng.permutation(params.n_trees)).apply_ops(
        random_ops(a.architecture_, params.n_trees, random_state=rng)
    )
    b = copy.deepcopy(a).set_tree_params(moved)
    aligner = ModelAligner(reference=1).fit([a, b])
    assert aligner.reference_ == 1
    assert_array_equal(aligner.alignments_[1].tree_perm, np.arange(params.n_trees))
    a2, b2 = aligner.align([a, b])
    assert_array_equal(b2.tree_params_.split_weight, moved.split_weight)
    assert_array_equal(a2.tree_params_.split_weight, moved.split_weight)
    assert_array_equal(a2.tree_params_.leaf_value, moved.leaf_value)
    # and with the default reference, b maps onto a
    b3 = ModelAligner().fit_align([a, b])[1]
    assert_array_equal(b3.tree_params_.split_bias, params.split_bias)


def test_align_rejects_other_estimators_than_fitted():
    from sklearn.datasets import make_classification

    from sktree_lmc import ModelAligner, SoftTreeEnsembleClassifier

    X, y = make_classification(n_samples=120, n_features=5, random_state=0)
    a, b, c = (
        SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=1, device="cpu",
                                   random_state=s).fit(X, y)
        for s in (1, 2, 3)
    )
    aligner = ModelAligner().fit([a, b])
    assert len(aligner.align([a, b])) == 2
    with pytest.raises(ValueError, match="not the one the aligner was fitted on"):
        aligner.align([a, c])


def test_regressor_merge_of_different_target_scales_is_exact_at_endpoints():
    from sklearn.datasets import make_regression

    from sktree_lmc import SoftTreeEnsembleRegressor, interpolation_curve

    X, y = make_regression(n_samples=150, n_features=4, random_state=0)
    a = SoftTreeEnsembleRegressor(n_estimators=4, max_epochs=2, device="cpu",
                                  random_state=0).fit(X, y)
    b = SoftTreeEnsembleRegressor(n_estimators=4, max_epochs=2, device="cpu",
                                  random_state=1).fit(X, 10 * y + 3)
    assert not np.allclose(a.y_scale_, b.y_scale_)
    np.testing.assert_allclose(merge_estimators(a, b, lam=0.0).predict(X), a.predict(X),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(merge_estimators(a, b, lam=1.0).predict(X), b.predict(X),
                               rtol=1e-5, atol=1e-3)
    # the pairwise and the list form agree for regressors too
    np.testing.assert_allclose(
        merge_estimators(a, b, lam=0.5, aligner="naive").predict(X),
        merge_estimators([a, b], aligner="naive").predict(X),
        rtol=1e-4, atol=1e-3,
    )
    curve = interpolation_curve(a, b, X, 10 * y + 3, lambdas=3)
    np.testing.assert_allclose(curve.scores["r2"][-1], b.score(X, 10 * y + 3), rtol=1e-5)


def test_aligner_verbose_logs_start_sweeps_and_end(capsys):
    from sklearn.datasets import make_classification

    from sktree_lmc import ModelAligner, SoftTreeEnsembleClassifier

    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    models = [SoftTreeEnsembleClassifier(n_estimators=8, depth=2, max_epochs=2, device="cpu",
                                         random_state=s).fit(X, y) for s in range(3)]
    ModelAligner(verbose=1).fit(models[:2])
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("ModelAligner: aligning 2 models (oblivious, depth 2, 8 trees")
    assert lines[-1].startswith("ModelAligner: aligned 2 models, 1 matchings, 0 refinement")
    assert len(lines) == 2
    aligner = ModelAligner(verbose=1, tol=0.0).fit(models)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == aligner.n_iter_ + 2
    assert all(line.startswith(f"ModelAligner sweep {i + 1}/20: objective ")
               for i, line in enumerate(lines[1:-1]))
    ModelAligner().fit(models)
    assert capsys.readouterr().err == ""

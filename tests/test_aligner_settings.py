"""One owner of the alignment settings: aligner= on merge_estimators, interpolation_curve and
ShardedSoftTreeEnsemble; the TreeParams algebra and Alignment equality behind align_many."""

import copy

import numpy as np
import pytest
from _helpers import random_params
from conftest import FAST
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import (
    ARCHITECTURES,
    ModelAligner,
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    TreeParams,
    get_architecture,
    interpolation_curve,
    merge_estimators,
    random_ops,
    weight_matching,
)
from sktree_lmc.merging._merge import check_aligner, fit_aligner

# ----------------------------------------------------------------------------
# aligner= and its shortcuts
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("shortcut, settings_", [
    ("wm", dict(method="wm", invariances="all")),
    ("am", dict(method="am", invariances="all")),
    ("naive", dict(method="wm", invariances="none")),
])
def test_shortcuts_are_default_aligners(shortcut, settings_):
    aligner = check_aligner(shortcut)
    assert isinstance(aligner, ModelAligner)
    assert {k: aligner.get_params()[k] for k in settings_} == settings_


def test_check_aligner_clones_and_rejects():
    mine = ModelAligner(method="am", n_samples=7)
    got = check_aligner(mine)
    assert got is not mine and got.get_params() == mine.get_params()
    with pytest.raises(ValueError, match="aligner must be one of"):
        check_aligner("gradient")
    with pytest.raises(TypeError, match="aligner must be one of"):
        check_aligner(3)


def test_interpolation_curve_rejects_a_bad_aligner(clf_data):
    a, b, X, y = clf_data
    with pytest.raises(ValueError, match="aligner"):
        interpolation_curve(a, b, X, y, aligner="bogus")
    with pytest.raises(TypeError, match="aligner"):
        interpolation_curve(a, b, X, y, aligner=None)


def test_the_same_aligner_gives_the_same_merge_and_curve(clf_data):
    a, b, X, y = clf_data
    aligner = ModelAligner(method="am", invariances="perm", weighting=False, n_samples=50,
                           random_state=0)
    merged = merge_estimators(a, b, lam=0.5, aligner=aligner, X=X)
    curve = interpolation_curve(a, b, X, y, lambdas=3, aligner=aligner)
    assert curve.method == "am" and curve.invariances == "perm"
    assert curve.scores["accuracy"][1] == pytest.approx(100 * merged.score(X, y))
    assert not hasattr(aligner, "alignments_")  # the caller's aligner is never fitted


def test_a_fitted_aligner_is_reused_and_never_refitted(clf_data, monkeypatch):
    a, b, X, y = clf_data
    fitted = ModelAligner().fit([a, b])
    calls = []
    monkeypatch.setattr(ModelAligner, "fit",
                        lambda self, *args, **kw: calls.append(1) or pytest.fail("refit"))
    assert fit_aligner(fitted, [a, b]) is fitted
    curve = interpolation_curve(a, b, X, y, lambdas=3, aligner=fitted)
    assert curve.aligner is fitted
    merged = merge_estimators(a, b, lam=0.0, aligner=fitted)
    assert_allclose(merged.predict_proba(X), a.predict_proba(X), atol=1e-6)
    assert not calls


def test_an_aligner_fitted_on_other_models_is_refitted_as_a_clone(clf_data):
    a, b, X, y = clf_data
    fitted = ModelAligner().fit([b, a])  # other order
    before = copy.deepcopy(fitted.alignments_)
    new = fit_aligner(fitted, [a, b])
    assert new is not fitted and fitted.alignments_ == before
    other_weights = fit_aligner(ModelAligner().fit([a, b], weights=[1, 3]), [a, b])
    assert_allclose(other_weights.weights_, [0.5, 0.5])


def test_sharded_passes_every_setting_through_its_aligner():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=240, n_features=5, random_state=0)
    aligner = ModelAligner(method="am", weighting=False, n_samples=30, max_iter=0)
    est = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**FAST), n_shards=3,
                                  aligner=aligner, random_state=0).fit(X, y)
    assert est.aligner_ is not aligner and not hasattr(aligner, "alignments_")
    assert est.aligner_.get_params()["weighting"] is False
    assert est.aligner_.n_iter_ == 0 and est.aligner_.n_matchings_ == 2
    # an unseeded aligner samples its rows from the sharded random_state: reproducible
    again = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**FAST), n_shards=3,
                                    aligner=aligner, random_state=0).fit(X, y)
    assert_array_equal(est.merged_.tree_params_.split_weight,
                       again.merged_.tree_params_.split_weight)


# ----------------------------------------------------------------------------
# TreeParams algebra and Alignment equality
# ----------------------------------------------------------------------------

ARCH_NAMES = list(ARCHITECTURES)


def _pair(name, depth, seed, M=5, F=3, C=2):
    arch = get_architecture(name, depth)
    rng = np.random.RandomState(seed)
    return arch, random_params(arch, M, F, C, rng), random_params(arch, M, F, C, rng)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(ARCH_NAMES), depth=st.integers(1, 3), seed=st.integers(0, 10**6),
       c=st.floats(-3, 3))
def test_algebra_is_a_vector_space_with_the_weighted_inner_product(name, depth, seed, c):
    arch, p, q = _pair(name, depth, seed)
    p64, q64 = p.astype(np.float64), q.astype(np.float64)
    w = arch.node_weights
    s = p64 + q64
    assert s.split_weight.dtype == np.float64
    assert_allclose(s.leaf_value, p64.leaf_value + q64.leaf_value)
    assert_allclose((s - q64).split_bias, p64.split_bias, atol=1e-12)
    assert_allclose((c * p64).split_weight, c * p64.split_weight)
    # symmetric, bilinear, positive
    assert p64.inner(q64, w) == pytest.approx(q64.inner(p64, w))
    assert (c * p64).inner(q64, w) == pytest.approx(c * p64.inner(q64, w), abs=1e-9)
    assert (p64 + q64).inner(q64, w) == pytest.approx(p64.inner(q64, w) + q64.inner(q64, w))
    assert p64.inner(p64, w) > 0
    # the symmetries are isometries of the weighted inner product
    rng = np.random.RandomState(seed)
    moved = p64.permute_trees(rng.permutation(5)).apply_ops(random_ops(arch, 5, rng))
    assert moved.inner(moved, w) == pytest.approx(p64.inner(p64, w))
    # the algebra agrees with weighted_average
    avg = TreeParams.weighted_average([p, q], [0.25, 0.75])
    assert_allclose((0.25 * p64 + 0.75 * q64).leaf_value, avg.leaf_value, rtol=1e-6, atol=1e-6)


def test_algebra_errors_and_float32_default():
    arch, p, q = _pair("oblivious", 2, 0)
    assert (p + q).split_weight.dtype == np.float32
    other = TreeParams(np.zeros((4, arch.n_nodes, 3)), np.zeros((4, arch.n_nodes)),
                       np.zeros((4, arch.n_free_leaves, 2)))
    with pytest.raises(ValueError, match="do not match"):
        p + other
    with pytest.raises(TypeError, match="TreeParams"):
        p.inner(np.ones(3))
    with pytest.raises(TypeError):
        p * q


def test_alignment_equality():
    arch, p, q = _pair("oblivious", 2, 1)
    al = weight_matching(p, q, arch)
    same = copy.deepcopy(al)
    same.score = -1.0
    assert al == same  # the mapping, not the score
    moved = copy.deepcopy(al)
    moved.tree_perm = moved.tree_perm[::-1].copy()
    assert al != moved
    flipped = copy.deepcopy(al)
    flipped.ops.sign[0, 0] *= -1
    assert al != flipped
    assert al != "alignment"
    with pytest.raises(TypeError):
        hash(al)

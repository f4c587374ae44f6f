"""feature_importances_: of the trees, of the additive term, of sharded models; they sum to 1,
except for a constant model, whose importances are all zeros."""

import numpy as np
import pytest
from _helpers import clf
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)


def _noise_data(n=600, seed=0):
    rng = np.random.RandomState(seed)
    Xn = rng.normal(size=(n, 4))  # column 3 is pure noise
    logit = 2 * Xn[:, 0] + Xn[:, 1] - 1.5 * (Xn[:, 2] > 0.5)
    return Xn, (logit + rng.logistic(size=n) > 0).astype(int), logit


@pytest.mark.parametrize("arch", ["oblivious", "non_oblivious", "decision_list_modified"])
def test_feature_importances_rank_the_noise_column_last(arch):
    Xn, yn, logit = _noise_data()
    est = SoftTreeEnsembleClassifier(arch=arch, n_estimators=32, max_epochs=30, random_state=0,
                                     device="cpu").fit(Xn, yn)
    importances = est.feature_importances_
    assert importances.shape == (4,) and np.all(importances >= 0)
    assert importances.sum() == pytest.approx(1.0)
    assert np.argmin(importances) == 3 and np.argmax(importances) == 0
    r = SoftTreeEnsembleRegressor(arch=arch, n_estimators=32, max_epochs=30, random_state=0,
                                  device="cpu").fit(Xn, logit)
    assert np.argmin(r.feature_importances_) == 3
    assert r.feature_importances_.sum() == pytest.approx(1.0)


def test_feature_importances_of_the_additive_term_and_sharded_models():
    from sktree_lmc import TreeParams

    Xn, yn, _ = _noise_data()
    est = clf(n_estimators=8, max_epochs=5).fit(Xn, yn)
    p = est.get_tree_params()
    # trees that do nothing, an additive table that varies with column 1 only
    table = np.zeros_like(p.additive)
    sources, offsets = est.encoder_.additive_sources_, est.encoder_.additive_offsets_
    for c in np.flatnonzero(sources == 1):
        rows = offsets[c + 1] - offsets[c]
        table[offsets[c]:offsets[c + 1], 1] = np.linspace(-1, 1, rows)
    est.set_tree_params(TreeParams(p.split_weight, p.split_bias,
                                   np.zeros_like(p.leaf_value), table))
    assert_allclose(est.feature_importances_, [0, 1, 0, 0])
    est.set_tree_params(TreeParams(p.split_weight, p.split_bias, np.zeros_like(p.leaf_value),
                                   np.zeros_like(table)))
    assert_array_equal(est.feature_importances_, np.zeros(4))  # a constant model
    assert not hasattr(clf(), "feature_importances_")
    sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(Xn, yn)
    assert_array_equal(sharded.feature_importances_, sharded.merged_.feature_importances_)


TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)
_X = np.random.default_rng(0).normal(size=(80, 3))


def test_importances_sum_to_one():
    reg = SoftTreeEnsembleRegressor(**TINY).fit(_X, _X[:, 0])
    np.testing.assert_allclose(reg.feature_importances_.sum(), 1.0)


def test_a_constant_model_has_all_zero_importances():
    """No column moves a constant output: all zeros, as scikit-learn's forests of single-leaf
    trees (not shares of nothing)."""
    clf = SoftTreeEnsembleClassifier(**TINY).fit(_X, (_X[:, 0] > 0).astype(int))
    params = clf.get_tree_params()
    params.leaf_value[...] = 0.25  # every leaf alike: the output is constant
    if params.additive is not None:
        params.additive[...] = 0.0
    clf.set_tree_params(params)
    proba = clf.predict_proba(_X)
    assert np.allclose(proba, proba[0])
    np.testing.assert_array_equal(clf.feature_importances_, np.zeros(3))

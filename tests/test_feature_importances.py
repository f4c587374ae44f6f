"""``feature_importances_`` sum to 1, except for a constant model, whose importances are all
zeros (as those of scikit-learn's forests of single-leaf trees): no column moves its output."""

import numpy as np

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)
X = np.random.default_rng(0).normal(size=(80, 3))


def test_importances_sum_to_one():
    reg = SoftTreeEnsembleRegressor(**TINY).fit(X, X[:, 0])
    np.testing.assert_allclose(reg.feature_importances_.sum(), 1.0)


def test_a_constant_model_has_all_zero_importances():
    clf = SoftTreeEnsembleClassifier(**TINY).fit(X, (X[:, 0] > 0).astype(int))
    params = clf.get_tree_params()
    params.leaf_value[...] = 0.25  # every leaf alike: the output is constant
    if params.additive is not None:
        params.additive[...] = 0.0
    clf.set_tree_params(params)
    proba = clf.predict_proba(X)
    assert np.allclose(proba, proba[0])
    np.testing.assert_array_equal(clf.feature_importances_, np.zeros(3))

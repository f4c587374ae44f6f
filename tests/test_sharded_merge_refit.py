"""refit_leaves, interpolation_curve, merge_estimators and ModelAligner take fitted
ShardedSoftTreeEnsembles (their merged models)."""

import re

import pytest
from _helpers import X_TR, X_VA, Y_TR, Y_VA, X, Y, clf
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

from sktree_lmc import ShardedSoftTreeEnsemble, refit_leaves


def test_refit_leaves_of_a_sharded_model():
    sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(X, Y)
    before = sharded.merged_.tree_params_.leaf_value.copy()
    refitted, info = refit_leaves(sharded, X, Y, max_iter=30, return_info=True)
    assert type(refitted) is ShardedSoftTreeEnsemble and refitted is not sharded
    assert_array_equal(sharded.merged_.tree_params_.leaf_value, before)  # not modified
    alone = refit_leaves(sharded.merged_, X, Y, max_iter=30)
    assert_array_equal(refitted.merged_.tree_params_.leaf_value, alone.tree_params_.leaf_value)
    assert_array_equal(refitted.predict_proba(X), alone.predict_proba(X))
    assert info["objective"] <= info["objective_start"]
    assert refitted.estimators_[0] is not sharded.estimators_[0]
    with pytest.raises(NotFittedError):
        refit_leaves(ShardedSoftTreeEnsemble(clf()), X, Y)


def test_curves_and_merges_take_sharded_models():
    """interpolation_curve, merge_estimators and ModelAligner take fitted
    ShardedSoftTreeEnsembles: their merged models."""
    from sktree_lmc import ModelAligner, interpolation_curve, merge_estimators

    a = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(X_TR, Y_TR)
    b = ShardedSoftTreeEnsemble(clf(random_state=1), n_shards=2, random_state=1).fit(X_TR, Y_TR)
    curve = interpolation_curve(a, b, X_VA, Y_VA, lambdas=3)
    assert len(curve.lambdas) == 3
    assert_allclose(merge_estimators(a, b, lam=0.0).predict_proba(X_VA),
                    a.predict_proba(X_VA), atol=1e-5)
    assert ModelAligner().fit([a, b]).weights_ is not None


def test_refit_leaves_error_names_only_public_classes():
    with pytest.raises(InvalidParameterError, match="estimator") as error:
        refit_leaves(object(), X, Y)
    message = str(error.value)
    assert "ShardedSoftTreeEnsemble" in message and "SoftTreeEnsembleClassifier" in message
    assert not re.search(r"\b_[A-Za-z]", message.replace("<object object", ""))

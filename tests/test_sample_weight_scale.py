"""Sample weights of any scale: only their ratios matter.

Equal weights that are subnormal (``1e-310``), tiny in float32 (``1e-44``) or huge (``1e300``)
give the model of unit weights, for both estimators and for ``ShardedSoftTreeEnsemble`` (whose
shards keep float32 copies): the weights are checked in float64 and rescaled by a power of two
by one shared function, instead of underflowing to "no non-zero weight" or overflowing.
"""

import numpy as np
import pytest

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)

rng = np.random.default_rng(0)
X = rng.normal(size=(120, 3))
Y_REG = X[:, 0] + 0.1 * rng.normal(size=120)
Y_CLF = (Y_REG > 0).astype(int)


def _target(Est):
    return Y_CLF if Est is SoftTreeEnsembleClassifier else Y_REG


@pytest.mark.parametrize("scale", [1e-310, 1e-44, 1e300])
@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_sharded_fit_with_equal_weights_of_any_scale_fits_as_unit_weights(Est, scale):
    y = _target(Est)
    sharded = dict(n_shards=2, random_state=0)
    ones = ShardedSoftTreeEnsemble(Est(**TINY), **sharded).fit(X, y)
    scaled = ShardedSoftTreeEnsemble(Est(**TINY), **sharded).fit(
        X, y, sample_weight=np.full(len(y), scale))
    np.testing.assert_allclose(scaled.predict(X), ones.predict(X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_zero_weights_are_refused_alike_by_the_estimators_and_the_sharded_fit(Est):
    y = _target(Est)
    zeros = np.zeros(len(y))
    with pytest.raises(ValueError, match="non-zero|sums to zero"):
        Est(**TINY).fit(X, y, sample_weight=zeros)
    with pytest.raises(ValueError, match="non-zero|sums to zero"):
        ShardedSoftTreeEnsemble(Est(**TINY), n_shards=2).fit(X, y, sample_weight=zeros)


@pytest.mark.parametrize("scale", [5e-324, 1e-44])
def test_subnormal_regressor_weights_fit_as_unit_weights(scale):
    kw = dict(TINY, teacher_weight=0.5)
    ones = SoftTreeEnsembleRegressor(**kw).fit(X, Y_REG)
    tiny = SoftTreeEnsembleRegressor(**kw).fit(X, Y_REG, sample_weight=np.full(len(X), scale))
    np.testing.assert_allclose(tiny.predict(X), ones.predict(X), rtol=1e-9, atol=1e-12)

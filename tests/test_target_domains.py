"""The targets' domain of the regression losses, checked alike everywhere.

``fit``, ``refit_leaves`` and the validation targets (``y_val``) refuse targets outside the
loss's domain (Poisson: ``y >= 0``, Gamma: ``y > 0``) with the same message, naming the array;
a Gamma target too small for the training precision (float32) is refused up front instead of
ending the fit in "diverged".
"""

import numpy as np
import pytest

from sktree_lmc import SoftTreeEnsembleRegressor, refit_leaves

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)


@pytest.fixture(scope="module")
def counts_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    counts = rng.poisson(np.exp(X[:, 0])).astype(float)
    return X, counts


@pytest.fixture(scope="module")
def poisson_model(counts_data):
    X, counts = counts_data
    return SoftTreeEnsembleRegressor(loss="poisson", **TINY).fit(X, counts)


@pytest.fixture(scope="module")
def gamma_model(counts_data):
    X, counts = counts_data
    return SoftTreeEnsembleRegressor(loss="gamma", **TINY).fit(X, counts + 1.0)


def _fit_message(loss, X, y):
    with pytest.raises(ValueError) as info:
        SoftTreeEnsembleRegressor(loss=loss, **TINY).fit(X, y)
    return str(info.value)


def test_refit_leaves_refuses_negative_poisson_targets_as_fit_does(counts_data, poisson_model):
    X, counts = counts_data
    expected = _fit_message("poisson", X, -1 - counts)
    assert "non-negative" in expected
    with pytest.raises(ValueError) as info:
        refit_leaves(poisson_model, X, -1 - counts)
    assert str(info.value) == expected
    assert "overflow" not in str(info.value)


def test_refit_leaves_refuses_non_positive_gamma_targets_as_fit_does(counts_data, gamma_model):
    X, counts = counts_data
    expected = _fit_message("gamma", X, counts)  # some counts are 0
    with pytest.raises(ValueError) as info:
        refit_leaves(gamma_model, X, counts)
    assert str(info.value) == expected


def test_refit_leaves_accepts_all_zero_poisson_targets(counts_data, poisson_model):
    """The domain only: the rows of a refit need not sum to a positive count."""
    X, counts = counts_data
    refitted = refit_leaves(poisson_model, X, np.zeros_like(counts))
    assert np.all(refitted.predict(X) < poisson_model.predict(X))


@pytest.mark.parametrize("tiny", [5e-324, 1e-40])
def test_gamma_targets_below_float32_are_refused(counts_data, tiny):
    X, counts = counts_data
    y = counts + 1.0
    y[0] = tiny
    with pytest.raises(ValueError, match=r"loss='gamma'.*float32.*Rescale y"):
        SoftTreeEnsembleRegressor(loss="gamma", **TINY).fit(X, y)


def test_gamma_targets_spanning_beyond_float32_are_refused(counts_data):
    X, counts = counts_data
    y = counts + 1.0
    y[0], y[1] = 1e-30, 1e30
    with pytest.raises(ValueError, match=r"loss='gamma'.*smallest value.*largest"):
        SoftTreeEnsembleRegressor(loss="gamma", **TINY).fit(X, y)


def test_small_but_representable_gamma_targets_fit(counts_data):
    X, counts = counts_data
    y = (counts + 1.0) * 1e-30
    model = SoftTreeEnsembleRegressor(loss="gamma", **TINY).fit(X, y)
    pred = model.predict(X)
    assert np.all(np.isfinite(pred)) and np.all(pred > 0)

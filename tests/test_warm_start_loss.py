"""A warm-started fit or a ``partial_fit`` call keeps the training loss of the fitted model.

The fitted leaves and target scale are in the units of the loss they were fitted with: a
changed ``loss`` is a clear ``ValueError`` naming ``loss`` and both values (as a changed encoder
is), instead of a fit that ends in "Training diverged". The loss fitted is kept through
pickling and merges.
"""

import pickle
import warnings

import numpy as np
import pytest

from sktree_lmc import SoftTreeEnsembleRegressor, merge_estimators

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)

rng = np.random.default_rng(0)
X = rng.normal(size=(100, 3))
Y = np.abs(X[:, 0]) + 0.1  # in the domain of every regression loss


@pytest.mark.parametrize("new_loss", ["poisson", "gamma", "absolute_error"])
def test_warm_start_with_another_loss_is_refused(new_loss):
    model = SoftTreeEnsembleRegressor(warm_start=True, **TINY).fit(X, Y)
    model.set_params(loss=new_loss)
    with pytest.raises(ValueError, match=rf"loss changed from 'squared_error' to '{new_loss}'"):
        model.fit(X, Y)


def test_partial_fit_with_another_loss_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the first chunk's encoder
        model = SoftTreeEnsembleRegressor(loss="poisson", **TINY).partial_fit(X, Y)
    model.set_params(loss="gamma")
    with pytest.raises(ValueError, match=r"loss changed from 'poisson' to 'gamma'"):
        model.partial_fit(X, Y)


def test_warm_start_with_the_same_loss_and_a_new_fit_with_another_still_work():
    model = SoftTreeEnsembleRegressor(warm_start=True, loss="poisson", **TINY).fit(X, Y)
    model.fit(X, Y)  # same loss: continues
    assert model.n_epochs_ == 2 * TINY["max_epochs"]
    model.set_params(loss="gamma", warm_start=False)
    model.fit(X, Y)  # a new model
    model.set_params(warm_start=True)
    model.fit(X, Y)
    assert np.all(np.isfinite(model.predict(X)))


def test_the_fitted_loss_survives_pickling_and_merging():
    a = SoftTreeEnsembleRegressor(warm_start=True, **TINY).fit(X, Y)
    b = SoftTreeEnsembleRegressor(warm_start=True, **{**TINY, "random_state": 1}).fit(X, Y)
    for model in (pickle.loads(pickle.dumps(a)), merge_estimators(a, b)):
        model.set_params(loss="poisson")
        with pytest.raises(ValueError, match="loss changed"):
            model.fit(X, Y)

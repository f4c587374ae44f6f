"""The mean calibration of regressors from sums at their sites: ``prediction_sums`` and
``calibrate_mean``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktree_lmc import (
    PredictionSums,
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    calibrate_mean,
    merge_estimators,
    prediction_sums,
)

SMALL = dict(n_estimators=8, max_epochs=4, device="cpu")


def _data(n=300, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 4))
    return X, np.exp(0.7 * X[:, 0] - 0.3 * X[:, 1])


@pytest.fixture(scope="module")
def poisson_merge():
    X, mean = _data()
    y = np.random.RandomState(1).poisson(mean).astype(float)
    sites = [slice(0, 150), slice(150, 300)]
    models = [SoftTreeEnsembleRegressor(loss="poisson", random_state=k, **SMALL).fit(X[s], y[s])
              for k, s in enumerate(sites)]
    return X, y, sites, merge_estimators(models)


def test_a_calibrated_poisson_merge_predicts_the_targets_mean_by_one_factor(poisson_merge):
    X, y, sites, merged = poisson_merge
    before = merged.predict(X)
    sums = [prediction_sums(merged, X[s], y[s]) for s in sites]
    calibrated = calibrate_mean(merged, sums)
    after = calibrated.predict(X)
    np.testing.assert_allclose(after.mean(), y.mean(), rtol=1e-6)
    ratio = after / before
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-6)  # one factor: the ranking kept
    assert abs(ratio[0] - 1) > 1e-4  # it moved something
    np.testing.assert_array_equal(merged.predict(X), before)  # the merge itself unchanged


def test_the_sites_sums_add_up_to_one_sites_sums(poisson_merge):
    X, y, sites, merged = poisson_merge
    parts = [prediction_sums(merged, X[s], y[s]) for s in sites]
    whole = prediction_sums(merged, X, y)
    total = PredictionSums.total(parts)
    assert total.weight == whole.weight == len(y)
    np.testing.assert_allclose(total.target, whole.target)
    np.testing.assert_allclose(total.prediction, whole.prediction, rtol=1e-12)
    np.testing.assert_allclose((parts[0] + parts[1]).prediction, total.prediction)


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_any_partition_and_weights_calibrate_to_the_weighted_mean(poisson_merge, data):
    X, y, _, merged = poisson_merge
    n_sites = data.draw(st.integers(1, 5))
    site = np.array(data.draw(st.lists(st.integers(0, n_sites - 1), min_size=len(y),
                                       max_size=len(y))))
    w = np.array(data.draw(st.lists(st.floats(0.1, 10.0), min_size=len(y), max_size=len(y))))
    sums = [prediction_sums(merged, X[site == k], y[site == k], sample_weight=w[site == k])
            for k in np.unique(site)]
    calibrated = calibrate_mean(merged, sums)
    np.testing.assert_allclose(np.average(calibrated.predict(X), weights=w),
                               np.average(y, weights=w), rtol=1e-6)


@pytest.mark.parametrize("loss", ["squared_error", "gamma"])
def test_squared_error_shifts_and_gamma_scales_to_the_mean(loss):
    X, mean = _data(200, seed=2)
    y = mean + 3.0 if loss == "squared_error" else np.random.RandomState(3).gamma(2.0, mean / 2)
    model = SoftTreeEnsembleRegressor(loss=loss, random_state=0, **SMALL).fit(X[:100], y[:100])
    before = model.predict(X[100:])
    calibrated = calibrate_mean(model, prediction_sums(model, X[100:], y[100:]))
    after = calibrated.predict(X[100:])
    np.testing.assert_allclose(after.mean(), y[100:].mean(), rtol=1e-6)
    if loss == "squared_error":
        np.testing.assert_allclose(after - before, (after - before)[0], atol=1e-5)
    else:
        np.testing.assert_allclose(after / before, (after / before)[0], rtol=1e-6)


def test_multi_output_and_pipelines_calibrate_every_output():
    X, mean = _data(200, seed=4)
    Y = np.column_stack([mean, 2 * mean + 1])
    pipe = make_pipeline(StandardScaler(), SoftTreeEnsembleRegressor(random_state=0, **SMALL))
    pipe.fit(X[:100], Y[:100])
    calibrated = calibrate_mean(pipe, [prediction_sums(pipe, X[100:150], Y[100:150]),
                                       prediction_sums(pipe, X[150:], Y[150:])])
    assert type(calibrated).__name__ == "Pipeline"
    np.testing.assert_allclose(calibrated.predict(X[100:]).mean(axis=0), Y[100:].mean(axis=0),
                               rtol=1e-6)


def test_sums_of_another_model_are_refused(poisson_merge):
    X, y, sites, merged = poisson_merge
    other = calibrate_mean(merged, prediction_sums(merged, X, y))
    stale = prediction_sums(merged, X[sites[0]], y[sites[0]])
    with pytest.raises(ValueError, match="another model"):
        calibrate_mean(other, stale)
    with pytest.raises(ValueError, match="different models"):
        stale + prediction_sums(other, X[sites[1]], y[sites[1]])


def test_models_without_a_mean_prediction_are_refused(poisson_merge):
    X, y, _, merged = poisson_merge
    clf = SoftTreeEnsembleClassifier(random_state=0, **SMALL).fit(X, (y > 1).astype(int))
    with pytest.raises(TypeError, match="SoftTreeEnsembleRegressor"):
        prediction_sums(clf, X, y)
    quantile = SoftTreeEnsembleRegressor(loss="quantile", quantile=0.9, random_state=0,
                                         **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="loss='quantile'"):
        prediction_sums(quantile, X, y)
    with pytest.raises(TypeError, match="PredictionSums"):
        calibrate_mean(merged, [])
    sharded = ShardedSoftTreeEnsemble(SoftTreeEnsembleRegressor(**SMALL), n_shards=2,
                                      random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="merged_"):
        prediction_sums(sharded, X, y)


def test_bad_sums_and_inputs_are_named(poisson_merge):
    X, y, _, merged = poisson_merge
    zero = prediction_sums(merged, X[:5], np.zeros(5))
    with pytest.raises(ValueError, match="must be positive"):
        calibrate_mean(merged, zero)
    with pytest.raises(ValueError, match="total weight"):
        calibrate_mean(merged, prediction_sums(merged, X[:5], y[:5], sample_weight=np.zeros(5)))
    with pytest.raises(ValueError, match="sample_weight"):
        prediction_sums(merged, X[:5], y[:5], sample_weight=-np.ones(5))
    with pytest.raises(ValueError, match="NaN"):
        prediction_sums(merged, X[:2], [1.0, np.nan])
    with pytest.raises(ValueError, match="outputs"):
        prediction_sums(merged, X[:2], np.ones((2, 2)))

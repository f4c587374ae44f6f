"""Predictions on dask collections (arrays, dataframes) are lazy and equal the in-memory
ones, for the estimators and the sharded meta-estimator."""

import numpy as np
import pytest
from _helpers import X, Y, clf, reg
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError

from sktree_lmc import ShardedSoftTreeEnsemble


@pytest.fixture
def synchronous_dask():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


def test_predictions_on_dask_arrays_are_lazy(synchronous_dask):
    import dask.array as da

    X3, y3 = make_classification(n_samples=300, n_features=5, n_informative=3, n_classes=3,
                                 random_state=0)
    labels = np.array(["a", "b", "c"])[y3]
    dX = da.from_array(X3, chunks=(70, 2))  # column chunks too: rows are made whole
    for est in (clf().fit(X3, labels), clf().fit(X3, y3 % 2)):
        for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
            lazy = getattr(est, method)(dX)
            assert isinstance(lazy, da.Array)
            expected = getattr(est, method)(X3)
            assert lazy.shape[1:] == expected.shape[1:]
            result = lazy.compute()
            assert result.dtype == expected.dtype
            assert_array_equal(result, expected)
    multi = reg().fit(X3, np.c_[X3[:, 0], X3[:, 1]])
    assert_array_equal(multi.predict(dX).compute(), multi.predict(X3))
    with pytest.raises(ValueError, match="4 features"):
        multi.predict(dX[:, :4])
    with pytest.raises(NotFittedError):
        clf().predict(dX)
    with pytest.raises(TypeError, match="compute"):
        multi.predict(dX[:, 0])


def test_predictions_on_dask_dataframes_and_sharded_models(synchronous_dask):
    import dask.dataframe as dd
    import pandas as pd

    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["kind"] = np.where(X[:, 0] > 0, "up", "down")
    est = clf().fit(frame, Y)
    lazy = est.predict_proba(dd.from_pandas(frame, npartitions=3))
    assert_array_equal(lazy.compute(), est.predict_proba(frame))
    sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(frame, Y)
    dframe = dd.from_pandas(frame, npartitions=4)
    assert_array_equal(sharded.predict(dframe).compute(), sharded.predict(frame))
    assert_array_equal(sharded.decision_function(dframe).compute(),
                       sharded.decision_function(frame))


def test_dask_fit_then_dask_predict():
    """After a fit on dask partitions (a client in this process), predictions on the
    same collection are lazy and equal the in-memory ones."""
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None):
        dX, dY = da.from_array(X, chunks=(200, 5)), da.from_array(Y, chunks=200)
        sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(dX, dY)
        lazy = sharded.predict_proba(dX)
        assert isinstance(lazy, da.Array)
        assert_allclose(lazy.compute(), sharded.predict_proba(X))

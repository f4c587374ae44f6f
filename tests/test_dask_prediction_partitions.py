"""Prediction on dask collections with empty partitions (a filter that keeps none of a
partition's rows): every empty partition gives an empty block of the output's width, so the
result is the prediction of the rows kept, for both estimators and every prediction method."""

import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")

from sktree_lmc import (  # noqa: E402
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)

rng = np.random.default_rng(0)
DF = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
SORTED = DF.sort_values("a").reset_index(drop=True)


def _models():
    binary = SoftTreeEnsembleClassifier(**TINY).fit(DF, (DF.a > 0).astype(int))
    three = SoftTreeEnsembleClassifier(**TINY).fit(DF, np.digitize(DF.a, [-0.5, 0.5]))
    reg = SoftTreeEnsembleRegressor(**TINY).fit(DF, DF.a)
    multi = SoftTreeEnsembleRegressor(**TINY).fit(DF, np.c_[DF.a, DF.b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sharded = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), n_shards=2,
                                          random_state=0).fit(DF, (DF.a > 0).astype(int))
    return [binary, three, reg, multi, sharded]


MODELS = _models()
CASES = [(m, method) for m in MODELS
         for method in ("predict", "predict_proba", "decision_function") if hasattr(m, method)]


def _filtered_frame():
    ddf = dd.from_pandas(SORTED, npartitions=4)
    kept = ddf[ddf.a > 1.0]
    sizes = [len(part.compute()) for part in kept.to_delayed()]
    assert 0 in sizes and sum(sizes) > 0  # some partitions are empty
    return kept


@pytest.mark.parametrize("model, method", CASES,
                         ids=[f"{type(m).__name__}-{i}-{meth}" for i, (m, meth) in enumerate(CASES)])
def test_empty_dataframe_partitions_give_empty_blocks(model, method):
    kept = _filtered_frame()
    out = getattr(model, method)(kept).compute()
    expected = getattr(model, method)(SORTED[SORTED.a > 1.0])
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decision_function"])
def test_empty_array_blocks_give_empty_blocks(method):
    model = MODELS[1]
    arr = da.from_array(SORTED.to_numpy(), chunks=(20, 2))
    kept = arr[arr[:, 0] > 1.0]
    out = getattr(model, method)(kept).compute()
    np.testing.assert_array_equal(out, getattr(model, method)(SORTED.to_numpy()[SORTED.a > 1.0]))


def test_all_rows_filtered_out_gives_an_empty_result_of_the_right_width():
    ddf = dd.from_pandas(SORTED, npartitions=4)
    out = MODELS[1].predict_proba(ddf[ddf.a > 100.0]).compute()
    assert out.shape == (0, 3)

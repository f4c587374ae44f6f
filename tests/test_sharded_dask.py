"""ShardedSoftTreeEnsemble on dask collections: shards are partitions, fits run on the
workers (processes), only parameters travel."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier

distributed = pytest.importorskip("distributed", reason="needs the [distributed] extra")
da = pytest.importorskip("dask.array")

X, Y = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=0)
X = X.astype(np.float32)


def _base(**kw):
    params = dict(n_estimators=8, max_epochs=2, batch_size=64, device="cpu")
    params.update(kw)
    return SoftTreeEnsembleClassifier(**params)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _assert_same_params(a, b):
    for name in ("split_weight", "split_bias", "leaf_value"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_dask_array_gives_the_numpy_result(client):
    est = ShardedSoftTreeEnsemble(_base(), n_shards=3, split="contiguous", n_rounds=2,
                                  random_state=0)
    local = clone(est).fit(X, Y)
    Xd = da.from_array(X, chunks=(100, 5))  # 3 partitions = the 3 contiguous shards
    Yd = da.from_array(Y, chunks=100)
    remote = clone(est).fit(Xd, Yd)
    _assert_same_params(local.merged_.tree_params_, remote.merged_.tree_params_)
    for a, b in zip(local.estimators_, remote.estimators_):
        _assert_same_params(a.tree_params_, b.tree_params_)
    assert remote.shard_partitions_ == [[0], [1], [2]]
    assert [h["bytes_received"] for h in remote.history_] == [
        h["bytes_received"] for h in local.history_]
    assert remote.history_[-1]["train_loss"] == pytest.approx(local.history_[-1]["train_loss"])
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    assert remote.n_features_in_ == 5 and remote.shard_sizes_.tolist() == [100, 100, 100]


@pytest.mark.parametrize("params, teacher", [
    (dict(teacher_weight=0.5), "shared"), (dict(teacher_weight=0.5), "averaged"),
    (dict(split_init="boosting", max_features=None), "shared")])
def test_dask_shards_grow_the_shared_trees_of_the_numpy_shards(client, params, teacher):
    """The gradient-boosted trees shared by the shards (the teacher, the boosted start,
    the average of the shards' own teachers) are grown on the workers from the same
    rows and sums as in memory: the same models."""
    est = ShardedSoftTreeEnsemble(_base(early_stopping=True, n_iter_no_change=2, **params),
                                  n_shards=3, split="contiguous", n_rounds=2, teacher=teacher,
                                  random_state=0)
    local = clone(est).fit(X, Y)
    remote = clone(est).fit(da.from_array(X, chunks=(100, 5)), da.from_array(Y, chunks=100))
    _assert_same_params(local.merged_.tree_params_, remote.merged_.tree_params_)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    assert remote.boosting_bytes_ == local.boosting_bytes_ > 0


def test_dask_dataframe_and_partition_groups(client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    Xd = dd.from_pandas(frame, npartitions=6, sort=False)
    Yd = dd.from_pandas(pd.Series(Y), npartitions=6, sort=False)
    est = ShardedSoftTreeEnsemble(_base(), n_shards=2, random_state=0).fit(Xd, Yd)
    assert est.shard_partitions_ == [[0, 1, 2], [3, 4, 5]]
    assert est.shard_sizes_.sum() == len(Y)
    np.testing.assert_array_equal(est.feature_names_in_, frame.columns)
    assert est.predict(frame).shape == (len(Y),)


def test_failing_shard_is_named_and_bad_inputs(client):
    Xbad = X.copy()
    # in partition 1; infinity, since missing values (NaN) are accepted now
    Xbad[150, 0] = np.inf
    est = ShardedSoftTreeEnsemble(_base(), n_shards=3, random_state=0)
    with pytest.raises(ValueError, match=r"Shard 1 \(100 rows\) failed while summarizing.*"
                                         r"infinity in column 0"):
        est.fit(da.from_array(Xbad, chunks=(100, 5)), da.from_array(Y, chunks=100))
    with pytest.raises(ValueError, match="only 3 partitions"):
        clone(est).set_params(n_shards=4).fit(da.from_array(X, chunks=(100, 5)),
                                              da.from_array(Y, chunks=100))
    with pytest.raises(ValueError, match="partitioned alike"):
        est.fit(da.from_array(X, chunks=(100, 5)), da.from_array(Y, chunks=150))


def test_dask_regressor_with_sample_weight(client):
    from sklearn.datasets import make_regression

    from sktree_lmc import SoftTreeEnsembleRegressor

    Xr, yr = make_regression(n_samples=240, n_features=4, noise=1.0, random_state=0)
    w = np.random.RandomState(0).uniform(0.5, 2.0, len(yr))
    est = ShardedSoftTreeEnsemble(
        SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=2, batch_size=32, device="cpu"),
        n_shards=2, split="contiguous", n_rounds=2, random_state=0)
    local = clone(est).fit(Xr, yr, sample_weight=w)
    remote = clone(est).fit(da.from_array(Xr, chunks=(120, 4)), da.from_array(yr, chunks=120),
                            sample_weight=da.from_array(w, chunks=120))
    _assert_same_params(local.merged_.tree_params_, remote.merged_.tree_params_)
    np.testing.assert_allclose(remote.weights_, local.weights_)
    np.testing.assert_allclose(remote.merged_.y_scale_, local.merged_.y_scale_)
    # the merged mean is calibrated from one sum per partition, as from all rows in memory
    np.testing.assert_allclose(remote.merged_.y_mean_, local.merged_.y_mean_, rtol=1e-6)
    np.testing.assert_allclose(np.average(remote.predict(Xr), weights=w), np.average(yr, weights=w),
                               rtol=1e-6, atol=1e-6)


def test_dask_encoder_from_the_workers_summaries(client):
    """Partitions of more than SKETCH_SIZE rows: the encoder comes from the shards'
    sketches and counts, computed on the workers. Categories, infrequent and missing
    flags and the knots of a discrete column equal those of the encoder fitted on all
    rows; the other knots are within 1e-3 of the column's range."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from sktree_lmc.encoding._encoding import SKETCH_SIZE, encoders_differ

    rng = np.random.RandomState(0)
    n = 4500
    frame = pd.DataFrame({
        "normal": rng.randn(n),
        "lognormal": rng.lognormal(0.0, 1.0, n),
        "discrete": rng.randint(0, 5, n).astype(float),
        "color": rng.choice(["red", "green", "blue", "cyan", "gold"], n,
                            p=[0.4, 0.3, 0.15, 0.1, 0.05]),
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
    })
    frame.loc[3100:3200, "normal"] = np.nan  # missing in the last partition only
    frame.loc[rng.rand(n) < 0.05, "color"] = None
    y = pd.Series(((frame["lognormal"] > 1) ^ (frame["color"] == "red")).astype(int))
    Xd = dd.from_pandas(frame, npartitions=3, sort=False)
    Yd = dd.from_pandas(y, npartitions=3, sort=False)
    base = _base(n_estimators=4, max_epochs=1, max_categories=3,
                 numeric_encoding="piecewise_linear")
    est = ShardedSoftTreeEnsemble(base, n_shards=3, random_state=0).fit(Xd, Yd)
    assert min(est.shard_sizes_) > SKETCH_SIZE
    exact = clone(base).fit(frame, y).encoder_
    enc = est.encoder_
    for attr in ("categorical_", "has_missing_", "has_infrequent_", "widths_"):
        np.testing.assert_array_equal(getattr(enc, attr), getattr(exact, attr))
    np.testing.assert_array_equal(enc.has_missing_, [True, False, False, True, False])
    for a, b in zip(enc.categories_, exact.categories_):
        assert (a is None and b is None) or list(a) == list(b)
    np.testing.assert_array_equal(enc.knots_[2], exact.knots_[2])
    for j in (0, 1):
        x = frame.iloc[:, j].dropna()
        err = np.max(np.abs(enc.knots_[j] - exact.knots_[j])) / (x.max() - x.min())
        assert 0 < err < 1e-3
    for model in [*est.estimators_, est.merged_]:
        assert encoders_differ(model.encoder_, enc) is None
    assert est.predict(frame).shape == (n,)
    # the quantile transform too, from the shards' sketches
    qn = clone(est).set_params(estimator__numeric_encoding="quantile_normal").fit(Xd, Yd)
    assert qn.encoder_.numeric_encoding == "quantile_normal"
    assert qn.predict(frame).shape == (n,)


def test_dask_checkpoint_and_resume(client, tmp_path):
    """A checkpoint of dask rounds holds the shard models gathered from the
    workers (parameters only); resuming from it gives the uninterrupted result."""
    est = ShardedSoftTreeEnsemble(_base(), n_shards=3, split="contiguous", n_rounds=3,
                                  random_state=0)
    Xd = da.from_array(X, chunks=(100, 5))
    Yd = da.from_array(Y, chunks=100)
    whole = clone(est).fit(Xd, Yd)
    states = []
    clone(est).set_params(checkpoint=states.append).fit(Xd, Yd)
    assert [s["round"] for s in states] == [1, 2, 3]
    second = {**states[1], "history": list(states[1]["history"])}
    resumed = clone(est).fit(Xd, Yd, resume_from=second)
    _assert_same_params(resumed.merged_.tree_params_, whole.merged_.tree_params_)
    assert resumed.n_rounds_ == 3

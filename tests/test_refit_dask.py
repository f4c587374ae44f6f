"""refit_leaves on dask collections: the federated objective equals the centralized one,
and the rows never reach the client (only leaf values and gradient sums travel)."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    refit_leaves,
)

distributed = pytest.importorskip("distributed", reason="needs the [distributed] extra")
da = pytest.importorskip("dask.array")

X, Y = make_classification(n_samples=300, n_features=5, n_informative=3, n_classes=3,
                           n_clusters_per_class=1, random_state=0)
XR, YR = make_regression(n_samples=300, n_features=4, noise=5.0, random_state=0)
YR = 100 + 50 * YR  # a target scale far from 1
W = np.random.RandomState(0).uniform(0.2, 2.0, 300)


@pytest.fixture(scope="module")
def client():
    # threads in this process: small and quick; the objective's tasks are the same
    # functions a process worker runs
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1,
                            dashboard_address=None) as c:
        yield c


# The leaf problem of these models is strictly convex but ill-conditioned (Hessian
# eigenvalues from alpha = 1e-4 to about 1): at the default tol, L-BFGS-B stops when the
# objective decreases by less than tol, and two solves whose sums differ only in their order
# stop a few iterations apart, with leaves up to 0.05 apart along the flat directions (objective
# 3e-6 apart). Equality "to solver tolerance" is tested with the solver run to convergence
# (tol=0: machine precision), where both reach the unique optimum.
SOLVE = {"tol": 0.0, "max_iter": 5000}


def _clf(**kw):
    # no teacher: how the model was trained is beside the point of these tests (with the
    # teacher's model, SOLVE's tol=0 ended one federated solve at the same objective with
    # L-BFGS-B's "ABNORMAL" line-search stop instead of its convergence message)
    params = dict(n_estimators=8, max_epochs=2, batch_size=64, device="cpu", random_state=0,
                  teacher_weight=0.0)
    params.update(kw)
    return SoftTreeEnsembleClassifier(**params).fit(X, Y)


def _solved(info):
    """Whether L-BFGS-B stopped at the optimum, not at ``max_iter``.

    With ``tol=0`` (``ftol = gtol = 0``) a run ends either when an iteration
    reduces the objective by exactly nothing (``converged``) or when its line
    search can no longer decrease it at machine precision, which L-BFGS-B
    reports as ``ABNORMAL``. Which of the two comes first is floating-point
    luck: the centralized refit of the teacher case ended ABNORMAL after 208
    iterations with scipy 1.17.1, at the federated refit's objective to 1e-15.
    The assertions that follow compare the objectives and the leaves.
    """
    stopped_early = info["n_iter"] < SOLVE["max_iter"]
    return info["converged"] or (stopped_early and info["message"].startswith("ABNORMAL"))


def _reg():
    return SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=2, device="cpu",
                                     random_state=0).fit(XR, YR)


def _dask(a, rows_per_part):
    chunks = (rows_per_part, a.shape[1]) if a.ndim == 2 else rows_per_part
    return da.from_array(a, chunks=chunks)


def test_cache_size_applies_per_partition(client, monkeypatch):
    """With a budget that keeps three float32 chunks per partition (the rest
    recomputed at every evaluation), the federated refit still equals the
    centralized float64 one. The workers are threads of this process, so the
    chunk size patched here is theirs."""
    import sktree_lmc.merging._refit as refit_module

    est = _clf()
    local, info_local = refit_leaves(est, X, Y, return_info=True, **SOLVE)
    M, L, _ = est.tree_params_.leaf_value.shape
    monkeypatch.setattr(refit_module, "_CHUNK_BYTES", {"cpu": 8 * M * L * 7})  # 7 rows a chunk
    budget = 3 * 7 * M * L * 4
    remote, info_remote = refit_leaves(est, _dask(X, 80), _dask(Y, 80), return_info=True,
                                       cache_size=budget / 2**20, **SOLVE)
    assert info_remote["objective"] == pytest.approx(info_local["objective"], rel=1e-6)
    assert np.abs(local.tree_params_.leaf_value - remote.tree_params_.leaf_value).max() < 1e-4


@pytest.mark.parametrize("kind", ["classifier", "regressor", "additive", "teacher"])
@pytest.mark.parametrize("weighted", [False, True])
def test_federated_refit_equals_the_centralized_refit(client, kind, weighted):
    # "additive": a classifier with the additive term, which the refit holds as an
    # offset of every row (computed on the workers); "teacher": a classifier trained
    # with a teacher, whose soft targets the workers compute from the model's teacher_
    est, Xk, yk = {"classifier": lambda: (_clf(), X, Y), "regressor": lambda: (_reg(), XR, YR),
                   "additive": lambda: (_clf(additive_bins=8, max_epochs=5), X, Y),
                   "teacher": lambda: (_clf(teacher_weight=0.75, max_epochs=5), X, Y)}[kind]()
    w = W if weighted else None
    local, info_local = refit_leaves(est, Xk, yk, sample_weight=w, return_info=True, **SOLVE)
    # 4 partitions (the last one shorter)
    remote, info_remote = refit_leaves(
        est, _dask(Xk, 80), _dask(yk, 80), sample_weight=None if w is None else _dask(w, 80),
        return_info=True, **SOLVE)
    assert _solved(info_local) and _solved(info_remote)
    assert _dask(Xk, 80).numblocks[0] == 4
    assert info_remote["objective_start"] == pytest.approx(info_local["objective_start"],
                                                           rel=1e-12)
    assert info_remote["objective"] == pytest.approx(info_local["objective"], rel=1e-6)
    assert info_remote["objective"] < info_remote["objective_start"]
    p, q = local.tree_params_, remote.tree_params_
    assert np.abs(p.leaf_value - q.leaf_value).max() < 1e-4
    np.testing.assert_array_equal(p.split_weight, q.split_weight)
    np.testing.assert_array_equal(p.split_bias, q.split_bias)
    assert type(remote) is type(est)
    if kind == "additive":
        assert np.abs(p.additive).max() > 0
        np.testing.assert_array_equal(p.additive, est.tree_params_.additive)
        np.testing.assert_array_equal(q.additive, est.tree_params_.additive)


def test_sharded_dask_fit_with_the_additive_term(client):
    """The bins come from the partitions' summaries (exact here: every partition sends
    its values), so the encoder equals the in-memory one; the rounds and the federated
    refit run on the workers."""
    est = SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=6, batch_size=64,
                                     device="cpu", random_state=0, additive_bins=8)
    sharded = ShardedSoftTreeEnsemble(est, n_shards=3, n_rounds=2, refit_leaves=True,
                                      random_state=0).fit(_dask(X, 100), _dask(Y, 100))
    local = clone(est).fit(X, Y)
    for a, b in zip(sharded.encoder_.additive_edges_, local.encoder_.additive_edges_):
        np.testing.assert_array_equal(a, b)
    assert sharded.merged_.tree_params_.additive.shape == local.tree_params_.additive.shape
    assert sharded.score(X, Y) > 0.6


def test_dask_dataframe_and_pipeline(client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    est = SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=2, device="cpu",
                                     random_state=0).fit(frame, Y)
    Xd = dd.from_pandas(frame, npartitions=3, sort=False)
    Yd = dd.from_pandas(pd.Series(Y), npartitions=3, sort=False)
    local = refit_leaves(est, frame, Y)
    remote = refit_leaves(est, Xd, Yd)
    assert np.abs(local.tree_params_.leaf_value - remote.tree_params_.leaf_value).max() < 1e-4
    # a Pipeline: its preprocessing runs on every partition's worker
    pipe = make_pipeline(StandardScaler(), SoftTreeEnsembleClassifier(
        n_estimators=8, max_epochs=2, device="cpu", numeric_encoding="none",
        random_state=0)).fit(X, Y)
    local = refit_leaves(pipe, X, Y)
    remote = refit_leaves(pipe, _dask(X, 100), _dask(Y, 100))
    assert type(remote) is type(pipe)
    assert np.abs(local[-1].tree_params_.leaf_value
                  - remote[-1].tree_params_.leaf_value).max() < 1e-4


def _received(monkeypatch, est, n_rows):
    """Pickled bytes of every result the client gathers during a federated refit on
    ``n_rows`` rows in 4 partitions; computing a dask collection on the client
    (``Client.get``, which ``.compute()`` uses) fails the test."""
    Xn, yn = make_classification(n_samples=n_rows, n_features=5, n_informative=3, n_classes=3,
                                 n_clusters_per_class=1, random_state=1)
    sizes = []
    gather = distributed.Client.gather

    def recording_gather(self, futures, *args, **kwargs):
        out = gather(self, futures, *args, **kwargs)
        sizes.append(len(pickle.dumps(out)))
        return out

    def no_get(self, *args, **kwargs):
        raise AssertionError("a dask collection was computed on the client")

    monkeypatch.setattr(distributed.Client, "gather", recording_gather)
    monkeypatch.setattr(distributed.Client, "get", no_get)
    _, info = refit_leaves(est, _dask(Xn, n_rows // 4), _dask(yn, n_rows // 4), max_iter=5,
                           return_info=True)
    monkeypatch.undo()
    return sizes, info


def test_no_rows_reach_the_client(client, monkeypatch):
    # 4 trees of depth 2 and 3 classes: 4 * 4 * 3 leaf values (384 bytes) per partition
    est = _clf(n_estimators=4, depth=2)
    small, _ = _received(monkeypatch, est, 400)
    large, info = _received(monkeypatch, est, 4000)
    assert info["n_iter"] >= 1
    # one gather per evaluation (plus one of the weights' maxima at the start): what the
    # client receives does not depend on the number of rows ...
    assert len(set(large)) <= 2 and set(large) == set(small)
    # ... and every gather is far below one partition's rows (1000 rows * 5 features)
    partition_bytes = 1000 * 5 * 8
    assert max(large) < partition_bytes / 4
    n_values = 4 * 4 * 3
    assert max(large) < 4 * (8 * n_values + 200)  # 4 partitions: gradient sums + 2 floats


def test_bad_dask_inputs(client):
    est = _clf()
    with pytest.raises(TypeError, match="y must be one too"):
        refit_leaves(est, _dask(X, 100), Y)
    with pytest.raises(ValueError, match="partitioned alike"):
        refit_leaves(est, _dask(X, 100), _dask(Y, 150))
    with pytest.raises(ValueError, match="sums to zero"):
        refit_leaves(est, _dask(X, 100), _dask(Y, 100), _dask(np.zeros(len(Y)), 100))
    bad = Y.copy()
    bad[150] = 7  # a label the model was not fitted on, in partition 1
    with pytest.raises(ValueError, match=r"Partition 1 failed in refit_leaves.*not fitted on"):
        refit_leaves(est, _dask(X, 100), _dask(bad, 100))


def test_sharded_fit_with_dask_input_refits_the_leaves(client):
    base = SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=2, batch_size=64,
                                      device="cpu")
    est = ShardedSoftTreeEnsemble(base, n_shards=3, split="contiguous", n_rounds=2,
                                  refit_leaves=True, random_state=0)
    local = clone(est).fit(X, Y)
    remote = clone(est).fit(_dask(X, 100), _dask(Y, 100))
    plain = clone(est).set_params(refit_leaves=False).fit(_dask(X, 100), _dask(Y, 100))
    p, q = local.merged_.tree_params_, remote.merged_.tree_params_
    np.testing.assert_array_equal(p.split_weight, q.split_weight)
    assert np.abs(p.leaf_value - q.leaf_value).max() < 1e-4
    assert not np.array_equal(plain.merged_.tree_params_.leaf_value, q.leaf_value)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))


def test_a_partition_of_zero_weights_is_left_out(client):
    est = _clf()
    w = np.ones(len(Y))
    w[:100] = 0  # all of partition 0
    remote = refit_leaves(est, _dask(X, 100), _dask(Y, 100), _dask(w, 100))
    local = refit_leaves(est, X[100:], Y[100:])
    assert np.abs(local.tree_params_.leaf_value - remote.tree_params_.leaf_value).max() < 1e-4

"""ShardedSoftTreeEnsemble on dask when things go wrong, and what reaches the client.

- Workers killed in the middle of a round: with none left, ``fit`` stops within
  ``worker_timeout`` (plus a poll) with a :class:`WorkerLostError` naming the round,
  what was running and the unfinished shards; with one killed and restarted by its
  nanny, dask recomputes the lost results and ``fit`` completes, with the result of a
  fit without the kill.
- No task returns rows and no partition is gathered to the client during a whole
  sharded fit (setup, rounds, losses, checkpoints, federated leaf refit).
"""

import os
import pickle
import re
import signal
import threading
import time

import numpy as np
import pytest
from sklearn.datasets import make_classification

from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier
from sktree_lmc import WorkerLostError

distributed = pytest.importorskip("distributed", reason="needs the [distributed] extra")
da = pytest.importorskip("dask.array")

X, Y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0)
X = X.astype(np.float32)


def _faulty_fit_estimator(**kw):
    # round 1 is short (first_round_epochs=1); round 2 runs 20 epochs, long enough
    # for the watcher thread to see the shard fits running and kill the workers
    base = SoftTreeEnsembleClassifier(n_estimators=8, depth=2, max_epochs=20, batch_size=32,
                                      device="cpu")
    params = dict(n_shards=2, split="contiguous", n_rounds=3, first_round_epochs=1,
                  local_epochs=20, random_state=0)
    params.update(kw)
    return ShardedSoftTreeEnsemble(base, **params)


@pytest.fixture
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield cluster, client


def _kill_during_round_2(cluster, client, kill):
    """A ``checkpoint`` callable: after round 1 it starts a thread that waits until a
    shard fit of round 2 is running on a worker and calls ``kill(nannies)`` with the
    nannies of the workers running one. Returns the callable, the checkpoints
    received and a dict where the thread puts the time of the kill."""
    states, killed = [], {}

    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "at" not in killed:
            busy = {w for w, keys in client.processing().items()
                    if any(str(k).startswith("_shard_fit") for k in keys)}
            if busy:
                nannies = [n for n in cluster.workers.values() if n.worker_address in busy]
                kill(nannies)
                killed["at"] = time.monotonic()
                killed["workers"] = len(nannies)
                return
            time.sleep(0.005)

    def checkpoint(state):
        states.append(state["round"])
        if state["round"] == 1:
            threading.Thread(target=watch, daemon=True).start()

    return checkpoint, states, killed


def _sigkill(nanny):
    os.kill(nanny.process.pid, signal.SIGKILL)


def test_all_workers_lost_mid_round_stops_within_worker_timeout(cluster):
    cluster, client = cluster

    def kill_all(_busy):
        for nanny in list(cluster.workers.values()):
            nanny.close_gracefully()  # the nanny does not restart its worker ...
            _sigkill(nanny)  # ... killed in the middle of its task

    checkpoint, states, killed = _kill_during_round_2(cluster, client, kill_all)
    est = _faulty_fit_estimator(worker_timeout=3.0, checkpoint=checkpoint)
    Xd, Yd = da.from_array(X, chunks=(200, 5)), da.from_array(Y, chunks=200)
    with pytest.raises(WorkerLostError) as info:
        est.fit(Xd, Yd)
    stopped = time.monotonic()
    assert "at" in killed, "the watcher never saw a shard fit of round 2 running"
    # worker_timeout, one poll of 0.5 s and the scheduler's notice of the deaths;
    # generous slack for two busy cores
    assert stopped - killed["at"] < 3.0 + 6.0
    message = str(info.value)
    assert message.startswith("Round 2 of 3 stopped while fitting the shards")
    assert "no worker for" in message and "worker_timeout=3" in message
    assert "shard(s) [0, 1] of 2 did not finish" in message
    assert "resume_from=" in message and "(round 1)" in message
    assert states == [1]
    assert isinstance(info.value, RuntimeError)


def test_a_task_killed_with_its_worker_names_the_round_and_shard():
    """With ``allowed-failures=0`` the scheduler gives up on a task at the first
    death of a worker running it (``KilledWorker``): the error names the round and
    the shard, without waiting for the other shard's fit."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        checkpoint, states, killed = _kill_during_round_2(
            cluster, client, lambda busy: _sigkill(busy[0]))
        est = _faulty_fit_estimator(checkpoint=checkpoint)
        with pytest.raises(WorkerLostError) as info:
            est.fit(da.from_array(X, chunks=(200, 5)), da.from_array(Y, chunks=200))
    message = str(info.value)
    assert message.startswith("Round 2 of 3 stopped while fitting the shards")
    assert re.search(r"the tasks of shard\(s\) \[[01]\] were lost with their workers "
                     r"\(KilledWorker: Attempted to run task '_shard_fit-", message)
    assert re.search(r"shard\(s\) \[[01](, 1)?\] of 2 did not finish", message)
    assert "resumes from the last completed round (round 1)" in message


def test_one_worker_killed_mid_round_the_fit_completes(cluster):
    """The nanny restarts the killed worker; the scheduler reruns its running shard
    fit and recomputes the results it held (the shard's partitions and the earlier
    rounds' shard models, from their tasks) on either worker. Every task is seeded
    and runs torch on one thread, so the result is the uninterrupted fit's, bit for
    bit."""
    cluster, client = cluster
    Xd, Yd = da.from_array(X, chunks=(200, 5)), da.from_array(Y, chunks=200)
    reference = _faulty_fit_estimator(checkpoint=lambda state: None).fit(Xd, Yd)

    def kill_one(busy):
        _sigkill(busy[0])

    checkpoint, states, killed = _kill_during_round_2(cluster, client, kill_one)
    est = _faulty_fit_estimator(checkpoint=checkpoint).fit(Xd, Yd)
    assert killed.get("workers", 0) >= 1, "the watcher never saw a shard fit of round 2"
    assert states == [1, 2, 3]
    for name in ("split_weight", "split_bias", "leaf_value"):
        np.testing.assert_array_equal(getattr(est.merged_.tree_params_, name),
                                      getattr(reference.merged_.tree_params_, name))
    np.testing.assert_array_equal(est.predict(X), reference.predict(X))


# ----------------------------------------------------------------------------
# what reaches the client
# ----------------------------------------------------------------------------


def _row_blocks(obj, min_rows, path="result", seen=None):
    """Paths of the arrays, tensors, DataFrames, Series and lists of at least
    ``min_rows`` entries in ``obj`` (a gathered result: lists, dicts, estimators,
    encoders and their attributes, walked to the end)."""
    import pandas as pd
    import torch

    seen = set() if seen is None else seen
    if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return []
    seen.add(id(obj))
    if isinstance(obj, (np.ndarray, torch.Tensor)):
        return [f"{path} {tuple(obj.shape)}"] if obj.ndim and obj.shape[0] >= min_rows else []
    if isinstance(obj, (pd.DataFrame, pd.Series, pd.Index)):
        return [f"{path} ({len(obj)} rows)"] if len(obj) >= min_rows else []
    if isinstance(obj, (list, tuple, set, frozenset)):
        if len(obj) >= min_rows:
            return [f"{path} ({len(obj)} items)"]
        return [b for i, v in enumerate(obj) for b in _row_blocks(v, min_rows, f"{path}[{i}]",
                                                                   seen)]
    if isinstance(obj, dict):
        if len(obj) >= min_rows:
            return [f"{path} ({len(obj)} keys)"]
        return [b for k, v in obj.items() for b in _row_blocks(v, min_rows, f"{path}[{k!r}]",
                                                                 seen)]
    if hasattr(obj, "__dict__"):
        return [b for k, v in vars(obj).items()
                for b in _row_blocks(v, min_rows, f"{path}.{k}", seen)]
    return []


@pytest.fixture
def received(monkeypatch):
    """Everything the client receives from the workers, recorded.

    ``Client._gather`` is where every result reaches the client: ``Client.gather``
    and ``Future.result`` both await it. Computing a dask collection on the
    client (``.compute()``, ``dask.compute``: ``dask.base.compute``, which goes to
    ``Client.get`` with a distributed client) fails the test at once."""
    import dask.base

    out = []
    gather = distributed.Client._gather

    async def recording_gather(self, futures, *args, **kwargs):
        result = await gather(self, futures, *args, **kwargs)
        out.append(result)
        return result

    def no_compute(*args, **kwargs):
        raise AssertionError("a dask collection was computed on the client")

    monkeypatch.setattr(distributed.Client, "_gather", recording_gather)
    monkeypatch.setattr(distributed.Client, "get", no_compute)
    monkeypatch.setattr(dask.base, "compute", no_compute)
    return out


@pytest.fixture
def local_client():
    # workers in threads of this process: quick; what reaches the client goes
    # through Client._gather all the same
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1,
                            dashboard_address=None) as client:
        yield client


def _mixed_frame(n, seed=0):
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame({
        "a": rng.randn(n), "b": rng.lognormal(size=n), "c": rng.randint(0, 4, n) * 1.0,
        "color": rng.choice(["red", "green", "blue", "gold"], n),
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
    })
    y = ((frame["a"] > 0) ^ (frame["color"] == "red")).astype(int)
    return frame, y


def _sharded_fit(kind, n_rows, received, **params):
    """A whole sharded fit on ``n_rows`` rows in 4 partitions (more rows each than
    the encoder's sketch size, so that the column summaries are sketches),
    federated early stopping, a checkpoint and the federated leaf refit; returns the
    pickled size of everything gathered and the paths of the row-sized blocks in
    it."""
    dd = pytest.importorskip("dask.dataframe")
    frame, y = _mixed_frame(n_rows)
    if kind == "array":
        values = frame[["a", "b", "c"]].to_numpy(np.float32)
        Xd = da.from_array(values, chunks=(n_rows // 4, 3))
        Yd = da.from_array(y.to_numpy(), chunks=n_rows // 4)
    else:
        Xd = dd.from_pandas(frame, npartitions=4, sort=False)
        Yd = dd.from_pandas(y, npartitions=4, sort=False)
    # additive_bins=(16, 64, 256), not the default's 4,096 bins: the additive table (the
    # bins of all columns and resolutions in one array) and its edges are bounded by the
    # bins, whatever the rows, and must stay shorter than the row blocks the detector looks
    # for (half a partition: 1,250 rows of the small fit). The client computes the edges
    # from the shards' sketches by the same code at any number of bins (_additive_edges,
    # tested at small bins in test_additive.py).
    params = {"additive_bins": (16, 64, 256), **params}
    base = SoftTreeEnsembleClassifier(n_estimators=8, depth=2, max_epochs=1, batch_size=1024,
                                      early_stopping=True, n_iter_no_change=5, device="cpu",
                                      **params)
    states = []
    del received[:]
    est = ShardedSoftTreeEnsemble(base, n_shards=4, n_rounds=2, refit_leaves=True,
                                  checkpoint=states.append, random_state=0).fit(Xd, Yd)
    assert [s["round"] for s in states] == [1, 2]
    assert est.history_[-1]["validation_loss"] is not None  # validation losses travelled
    assert est.shard_sizes_.tolist() == [n_rows // 4] * 4
    sizes = [len(pickle.dumps(r)) for r in received]
    blocks = [b for r in received for b in _row_blocks(r, n_rows // 8)]
    return sizes, blocks


@pytest.mark.parametrize("kind, params", [
    ("array", {}), ("dataframe", {}),
    # the teacher, grown over the shards from histograms and loss sums
    ("dataframe", {"teacher_weight": 0.5}),
])
def test_no_task_returns_rows_to_the_client(local_client, received, kind, params):
    from sktree_lmc.encoding._encoding import SKETCH_SIZE

    small, small_blocks = _sharded_fit(kind, 4 * 2500, received, **params)
    large, large_blocks = _sharded_fit(kind, 4 * 10000, received, **params)
    assert 2500 // 2 > SKETCH_SIZE  # a sketch is no row block
    # nothing of half a partition's length or more reached the client ...
    assert small_blocks == [] and large_blocks == []
    # ... and what it received does not grow with the rows (4x here): gather by
    # gather the same bytes (summaries, parameters, loss sums, checkpoints), except
    # that the leaf refit's solver may take more evaluations on other data (one
    # gather of gradient sums each, of the same size as the others)
    assert len(small) > 10
    n = min(len(small), len(large))
    # equal up to the additive table, whose rows are the distinct quantile edges of each
    # column (at most additive_bins per column and resolution, whatever the number of rows:
    # fewer when ties merge quantiles, as on the smaller data here)
    np.testing.assert_allclose(large[:n], small[:n], rtol=0.01)
    assert max(large[n:] + small[n:], default=0) <= 1.01 * small[-1]


def test_the_detector_sees_a_gathered_partition(local_client, received):
    """The recording and the detector of the test above catch a partition gathered
    to the client (by Client.gather or Future.result), and a collection computed on
    it."""
    Xd = da.from_array(X, chunks=(100, 5))
    partition = local_client.compute(Xd.to_delayed().ravel()[1])
    local_client.gather(partition)
    assert _row_blocks(received[-1], 100) == ["result (100, 5)"]
    partition.result()  # gathers [partition]
    assert len(received) == 2 and _row_blocks(received[-1], 100) == ["result[0] (100, 5)"]
    # a DataFrame partition, and rows held by a returned object (a fitted estimator
    # keeping its training rows would be caught the same way)
    dd = pytest.importorskip("dask.dataframe")
    frame, _ = _mixed_frame(400)
    part = local_client.compute(dd.from_pandas(frame, npartitions=4).to_delayed()[0])
    holder = local_client.submit(lambda p: {"model": SoftTreeEnsembleClassifier(),
                                            "rows": p.to_numpy()[::2]}, part)
    local_client.gather([part, holder])
    assert _row_blocks(received[-1], 50) == ["result[0] (100 rows)",
                                             "result[1]['rows'] (50, 5)"]
    with pytest.raises(AssertionError, match="computed on the client"):
        Xd.compute()
    with pytest.raises(AssertionError, match="computed on the client"):
        Xd.sum().compute()

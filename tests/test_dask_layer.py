"""The dask layer (``sktree_lmc.federation._dask``) that the federated rounds and the federated
leaf refit share.

- :func:`gather_with_timeout` on fake futures and a fake client: the workers are
  counted between waits, a cluster without workers ends in a :class:`WorkerLostError`
  after ``worker_timeout`` (workers that come back reset the clock; long tasks on live
  workers are never timed out), a task lost with its workers (``KilledWorker``,
  cancelled) raises it at once, and the message names what the caller says.
- :class:`DaskSession` on fakes: a lost cluster cancels everything the session
  submitted (and still references), with the caller's message.
- The federated ``refit_leaves`` on a real cluster: with all workers lost during its
  evaluations, or none at all, it raises a :class:`WorkerLostError` naming
  ``refit_leaves`` within its ``worker_timeout`` instead of hanging; with one worker
  lost, dask recomputes and the refit completes with the uninterrupted result.
"""

import os
import signal
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.datasets import make_classification

import sktree_lmc
from sktree_lmc import SoftTreeEnsembleClassifier, refit_leaves
from sktree_lmc.federation._dask import (
    WorkerLostError,
    aligned_partitions,
    gather_with_timeout,
    running_client,
)

distributed = pytest.importorskip("distributed", reason="needs the [distributed] extra")
da = pytest.importorskip("dask.array")

X, Y = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=0)
X = X.astype(np.float32)


def test_worker_lost_error_is_the_rounds_error():
    # ShardedSoftTreeEnsemble and refit_leaves document sktree_lmc.WorkerLostError
    assert sktree_lmc.WorkerLostError is WorkerLostError
    assert issubclass(WorkerLostError, RuntimeError)
    assert not issubclass(WorkerLostError, TimeoutError)


# ----------------------------------------------------------------------------
# gather_with_timeout on fakes
# ----------------------------------------------------------------------------


class _Future:
    """A future of the fields :func:`gather_with_timeout` reads."""

    def __init__(self, value=None, status="pending", exception=None):
        self.value, self.status, self._exception = value, status, exception

    def done(self):
        return self.status != "pending"

    def cancelled(self):
        return self.status == "cancelled"

    def exception(self):
        return self._exception


class _Client:
    """``nthreads()`` from ``workers`` (a list of worker counts, one per poll; the
    last one repeats), ``cancel`` recorded, ``gather`` the values."""

    def __init__(self, workers):
        self.workers, self.polls, self.cancelled = list(workers), 0, []

    def nthreads(self):
        n = self.workers[min(self.polls, len(self.workers) - 1)]
        self.polls += 1
        return {f"tcp://w{i}": 1 for i in range(n)}

    def cancel(self, futures):
        self.cancelled.extend(futures)

    def gather(self, futures):
        return [f.value for f in futures]


@pytest.fixture
def fake_wait(monkeypatch):
    """``distributed.wait`` replaced: each call waits ``timeout`` seconds (or
    less when ``finish`` says so) and times out unless every future is done;
    ``finish(n, futures)`` is called at the n-th wait (0-based) to change them."""
    state = {"calls": 0, "finish": lambda n, futures: None}

    def wait(futures, timeout=None):
        state["finish"](state["calls"], futures)
        state["calls"] += 1
        if all(f.done() for f in futures):
            return
        time.sleep(timeout)
        raise TimeoutError

    monkeypatch.setattr(distributed, "wait", wait)
    return state


def _recording_message(calls):
    def message(unfinished, why):
        calls.append((unfinished, why))
        return f"testing stopped: {why}; {unfinished} did not finish"

    return message


def test_gather_gives_up_after_worker_timeout_without_workers(fake_wait):
    client, calls = _Client([0]), []
    futures = [_Future(1, "finished"), _Future(), _Future()]
    start = time.monotonic()
    with pytest.raises(WorkerLostError, match="^testing stopped: the scheduler has had no "
                                              r"worker for 0\.[2-9] s \(worker_timeout=0\.2\)"):
        gather_with_timeout(client, futures, _recording_message(calls), worker_timeout=0.2,
                            names=["a", "b", "c"], poll=0.05)
    # the clock starts at the first poll without workers: timeout plus a poll or two
    assert time.monotonic() - start < 0.2 + 0.5
    assert [u for u, _ in calls] == [["b", "c"]]  # the unfinished units, named
    assert client.cancelled == futures


def test_gather_never_times_out_long_tasks_on_live_workers(fake_wait):
    # no worker for 0.1 s (below the timeout), workers back, then none again for 0.1 s,
    # then workers: never 0.2 s in a row without any, so the wait goes on to the end
    client = _Client([0, 0, 1, 1, 0, 0, 1, 1, 1, 1])
    futures = [_Future(10), _Future(20)]

    def finish(n, futures):
        if n == 10:  # about 0.5 s, well beyond worker_timeout
            for f in futures:
                f.status = "finished"

    fake_wait["finish"] = finish
    out = gather_with_timeout(client, futures, _recording_message([]), worker_timeout=0.2,
                              poll=0.05)
    assert out == [10, 20] and client.cancelled == []


@pytest.mark.parametrize("lost, reason", [
    (_Future(status="error", exception=distributed.KilledWorker(
        "_rows_terms-1", SimpleNamespace(address="tcp://w0"), 0)),
     "KilledWorker: Attempted to run task '_rows_terms-1'"),
    (_Future(status="cancelled"), "cancelled"),
])
def test_a_task_lost_with_its_workers_is_worker_lost_at_once(fake_wait, lost, reason):
    # the workers are alive and the other task still runs: no waiting for it
    client, calls = _Client([2]), []
    futures = [_Future(1, "finished"), lost, _Future()]
    with pytest.raises(WorkerLostError) as info:
        gather_with_timeout(client, futures, _recording_message(calls), worker_timeout=60,
                            unit="partition", poll=0.01)
    (unfinished, why), = calls
    assert unfinished == [1, 2]  # the lost one and the unfinished one
    assert why.startswith(f"the tasks of partition(s) [1] were lost with their workers "
                          f"({reason}")
    assert str(info.value).startswith("testing stopped: the tasks of partition(s) [1]")
    assert client.cancelled == futures
    assert fake_wait["calls"] == 1


def test_a_task_error_is_raised_as_it_is():
    def fails(x):
        raise ValueError(f"bad partition {x}")

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None) as client:
        assert gather_with_timeout(client, client.map(lambda x: x * 2, [1, 2, 3]),
                                   _recording_message([]), worker_timeout=1) == [2, 4, 6]
        calls = []
        with pytest.raises(ValueError, match="bad partition 7"):
            gather_with_timeout(client, [client.submit(fails, 7)], _recording_message(calls),
                                worker_timeout=1)
        assert calls == []


def test_partitions_and_client_errors():
    with pytest.raises(ValueError, match="X has 3 partitions but y has 2; they must be "
                                         "partitioned alike"):
        aligned_partitions(da.from_array(X, chunks=(100, 5)), da.from_array(Y, chunks=150))
    with pytest.raises(TypeError, match="sample_weight must be a dask array or DataFrame"):
        aligned_partitions(da.from_array(X, chunks=(100, 5)), da.from_array(Y, chunks=100),
                           np.ones(300))
    with pytest.raises(ValueError, match="no dask.distributed Client is running: create one "
                                         r"\(e.g. Client\(LocalCluster\(\)\)\) before calling "
                                         "refit_leaves"):
        running_client("refit_leaves")


# ----------------------------------------------------------------------------
# DaskSession: the one choreography of the rounds and the federated refit
# ----------------------------------------------------------------------------


class _SubmittingClient(_Client):
    """A fake client whose ``submit`` gives pending futures (recorded)."""

    def __init__(self, workers):
        super().__init__(workers)
        self.submitted = []

    def submit(self, fn, *args, pure=True):
        assert pure is False  # every task of a fit is its own (no shared keys)
        future = _Future()
        self.submitted.append((fn, args))  # not the future: the session keeps it weakly
        return future


@pytest.fixture
def fake_session(monkeypatch, fake_wait):
    from sktree_lmc.federation import _dask

    client, described = _SubmittingClient([0]), []
    monkeypatch.setattr(_dask, "running_client", lambda call, subject=None: client)

    def describe(what, unfinished, why):
        described.append((what, unfinished, why))
        return f"{what} stopped: {why}; {unfinished} did not finish"

    session = _dask.DaskSession("fit", describe, worker_timeout=0.2, unit="partition")
    session.poll = 0.05
    return session, client, described


def test_session_lost_workers_cancel_everything_submitted(fake_session):
    """A gather that finds no worker raises the caller's message (what was running,
    the unfinished units, why) and cancels every task the session submitted that is
    still referenced, not only the ones waited for."""
    session, client, described = fake_session
    kept = session.submit(len, [1, 2])  # e.g. a shard's data, not waited for here
    waited = [session.submit(len, [k]) for k in range(2)]
    with pytest.raises(WorkerLostError, match=r"^fitting stopped: the scheduler has had no "
                                              r"worker for .*; \[3, 5\] did not finish"):
        session.gather(waited, "fitting", names=[3, 5])
    assert described[0][:2] == ("fitting", [3, 5])
    assert kept in client.cancelled and all(f in client.cancelled for f in waited)


def test_session_cancel_all_forgets_released_futures(fake_session):
    import gc

    session, client, _ = fake_session
    kept = session.submit(len, [1])
    session.submit(len, [2])  # released at once
    gc.collect()
    session.cancel_all()
    assert client.cancelled == [kept]


# ----------------------------------------------------------------------------
# the federated refit when the workers are lost
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    return SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=1, batch_size=64,
                                      device="cpu", random_state=0).fit(X, Y)


def _dask_xy():
    return da.from_array(X, chunks=(100, 5)), da.from_array(Y, chunks=100)


def _lose_workers_at_evaluation(monkeypatch, n, lose):
    """Call ``lose()`` (which loses workers) at the ``n``-th evaluation of the federated
    objective (1-based), before its tasks are submitted; returns a dict where the time
    of the loss is put."""
    from sktree_lmc.merging import _refit

    terms, lost = _refit._FederatedLeafObjective._terms, {"evaluations": 0}

    def losing_terms(self, theta_flat):
        lost["evaluations"] += 1
        if lost["evaluations"] == n:
            lose()
            lost["at"] = time.monotonic()
        return terms(self, theta_flat)

    monkeypatch.setattr(_refit._FederatedLeafObjective, "_terms", losing_terms)
    return lost


def _until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


@pytest.fixture
def local_cluster():
    # workers in threads of this process: quick to start; closing one loses its data
    # as a dead worker process does
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield cluster, client


def test_refit_with_all_workers_lost_raises_worker_lost(local_cluster, model, monkeypatch):
    cluster, client = local_cluster

    def lose_all():
        cluster.scale(0)  # the workers close: their data (the model, the rows) is gone
        _until(lambda: not client.nthreads())

    lost = _lose_workers_at_evaluation(monkeypatch, 2, lose_all)
    with pytest.raises(WorkerLostError) as info:
        refit_leaves(model, *_dask_xy(), worker_timeout=2.0)
    assert time.monotonic() - lost["at"] < 2.0 + 3.0
    message = str(info.value)
    assert message.startswith("refit_leaves stopped while computing the loss and gradient "
                              "sums of the partitions: ")
    # the model was on the lost workers only (scattered data, no task to recompute it
    # from): the scheduler cancels what needs it at once, without waiting for workers
    assert ("the tasks of partition(s) [0, 1, 2] were lost with their workers (cancelled); "
            "partition(s) [0, 1, 2] of 3 did not finish") in message
    assert "call refit_leaves again when the cluster has workers" in message


def test_refit_without_workers_raises_worker_lost_within_worker_timeout(model):
    with distributed.LocalCluster(n_workers=0, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        start = time.monotonic()
        with pytest.raises(WorkerLostError) as info:
            refit_leaves(model, *_dask_xy(), worker_timeout=1.0)
    assert time.monotonic() - start < 1.0 + 3.0
    message = str(info.value)
    assert message.startswith("refit_leaves stopped while sending the model to the workers: "
                              "the scheduler has had no worker for 1.0 s (worker_timeout=1")
    assert "partition(s) [0, 1, 2] of 3 did not finish" in message


def test_refit_with_one_worker_lost_completes(local_cluster, model, monkeypatch):
    """The model was sent to every worker and the partitions have their tasks: the
    rows the lost worker held are recomputed on the other one, and the result is the
    uninterrupted refit's (the sums are added up in partition order)."""
    cluster, client = local_cluster
    reference, info_ref = refit_leaves(model, *_dask_xy(), return_info=True)

    def lose_one():
        cluster.scale(1)
        _until(lambda: len(client.nthreads()) == 1)

    lost = _lose_workers_at_evaluation(monkeypatch, 3, lose_one)
    refitted, info = refit_leaves(model, *_dask_xy(), return_info=True, worker_timeout=2.0)
    assert "at" in lost
    assert info == info_ref
    np.testing.assert_array_equal(refitted.tree_params_.leaf_value,
                                  reference.tree_params_.leaf_value)


@pytest.mark.slow  # starts two worker processes that import torch
def test_refit_with_worker_processes_killed_raises_worker_lost(model, monkeypatch):
    """Worker processes killed (SIGKILL, their nannies told not to restart them)
    during the refit's evaluations: a WorkerLostError naming refit_leaves within the
    timeout, not a hang."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:

        def kill_all():
            for nanny in list(cluster.workers.values()):
                nanny.close_gracefully()  # the nanny does not restart its worker ...
                os.kill(nanny.process.pid, signal.SIGKILL)  # ... killed
            _until(lambda: not client.nthreads())

        lost = _lose_workers_at_evaluation(monkeypatch, 2, kill_all)
        result = {}

        def run():
            try:
                refit_leaves(model, *_dask_xy(), worker_timeout=2.0)
            except Exception as exc:  # checked below
                result["error"], result["at"] = exc, time.monotonic()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(timeout=25)
        assert not thread.is_alive(), "refit_leaves hangs after its workers were lost"
    assert isinstance(result.get("error"), WorkerLostError), result
    # worker_timeout, a poll and the scheduler's notice of the deaths, with slack
    assert result["at"] - lost["at"] < 2.0 + 6.0
    assert str(result["error"]).startswith("refit_leaves stopped while computing the loss")

"""The thread policy: ``n_threads`` is applied inside fit and prediction, and only there."""

import threading

import numpy as np
import pytest
import torch
from joblib import parallel_config
from sklearn.datasets import make_classification
from sklearn.utils._param_validation import InvalidParameterError

import sktree_lmc.model._forward as forward
from sktree_lmc.model import _kernel
from sktree_lmc import (
    ModelAligner,
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)
from sktree_lmc.utils._threads import _available_cpus, effective_n_threads, torch_threads

X, Y = make_classification(n_samples=120, n_features=5, random_state=0)


def clf(**kw):
    params = dict(n_estimators=4, max_epochs=2, batch_size=32, device="cpu", random_state=0)
    params.update(kw)
    return SoftTreeEnsembleClassifier(**params)


@pytest.fixture
def caller_threads():
    """Torch set to 3 threads by the 'caller' (not the test session's 1), restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(previous)


@pytest.fixture
def recorded(monkeypatch):
    """Torch's thread count seen by every routing call of the kernel (fit and predict)."""
    seen = []
    route = forward._route_forward

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return route(*args, **kwargs)

    monkeypatch.setattr(forward, "_route_forward", recording)
    return seen


PREDICT_METHODS = ["predict", "predict_proba", "predict_log_proba", "decision_function",
                   "tree_outputs", "score"]


@pytest.mark.parametrize("n_threads", [1, 2])
def test_fit_and_prediction_apply_n_threads_and_restore_the_callers(
    n_threads, caller_threads, recorded
):
    est = clf(n_threads=n_threads).fit(X, Y)
    assert recorded and set(recorded) == {n_threads}
    assert torch.get_num_threads() == caller_threads
    for method in PREDICT_METHODS:
        recorded.clear()
        args = (X, Y) if method == "score" else (X,)
        getattr(est, method)(*args)
        assert recorded and set(recorded) == {n_threads}, method
        assert torch.get_num_threads() == caller_threads, method


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_fit_inside_training_engine_runs_the_kernel_on_its_own_n_threads(
        caller_threads, monkeypatch, n_threads):
    """``training_engine`` chooses the engine and leaves the threads to the caller: a fit
    inside it runs the fused kernel on its ``n_threads`` (the block once handed the
    caller's 3 torch threads to every kernel call, whatever the fit's setting)."""
    pytest.importorskip("numba")
    from sktree_lmc import training_engine

    seen = []
    count = _kernel._n_threads
    monkeypatch.setattr(_kernel, "_n_threads", lambda: (seen.append(count()), seen[-1])[1])
    with training_engine("numba"):
        clf(n_threads=n_threads).fit(X, Y)
        assert torch.get_num_threads() == caller_threads  # the block keeps the caller's
    assert seen and set(seen) == {n_threads}


def test_none_keeps_the_callers_setting(caller_threads, recorded):
    est = clf(n_threads=None).fit(X, Y)
    est.predict(X)
    assert set(recorded) == {caller_threads}
    assert torch.get_num_threads() == caller_threads


def test_negative_counts_back_from_the_available_cpus(caller_threads, recorded):
    clf(n_threads=-1).fit(X, Y)
    assert set(recorded) == {_available_cpus()}
    assert effective_n_threads(-1) == _available_cpus()
    assert effective_n_threads(-(_available_cpus() + 5)) == 1


def test_default_is_one_thread(caller_threads, recorded):
    assert SoftTreeEnsembleClassifier().n_threads == 1
    assert SoftTreeEnsembleRegressor().n_threads == 1
    clf().fit(X, Y)
    assert set(recorded) == {1}


def test_callers_setting_is_restored_when_fit_raises(caller_threads, monkeypatch):
    # an error in validation, inside the thread context
    with pytest.raises(ValueError, match="only one class"):
        clf(n_threads=1).fit(X, np.zeros(len(X)))
    assert torch.get_num_threads() == caller_threads

    # an error in the middle of training
    def boom(*args, **kwargs):
        assert torch.get_num_threads() == 1
        raise RuntimeError("boom")

    monkeypatch.setattr(forward, "_route_forward", boom)
    with pytest.raises(RuntimeError, match="boom"):
        clf(n_threads=1).fit(X, Y)
    assert torch.get_num_threads() == caller_threads


def test_callers_setting_is_restored_when_prediction_raises(caller_threads):
    est = clf(n_threads=1).fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :3])
    assert torch.get_num_threads() == caller_threads


@pytest.mark.parametrize("bad", [0, 1.5, "2"])
def test_invalid_n_threads_is_rejected_naming_the_parameter(bad):
    with pytest.raises(InvalidParameterError, match="n_threads"):
        clf(n_threads=bad).fit(X, Y)


def test_bool_n_threads_is_rejected():
    with pytest.raises(TypeError, match="n_threads"):
        effective_n_threads(True)
    with pytest.raises(ValueError, match="n_threads"):
        effective_n_threads(0)


def test_context_manager_restores_and_nests(caller_threads):
    with torch_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
        with torch_threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == caller_threads
    with pytest.raises(KeyError):
        with torch_threads(1):
            raise KeyError("x")
    assert torch.get_num_threads() == caller_threads


def test_concurrent_fits_in_threads_keep_their_own_setting(caller_threads):
    """Fits in two threads of one process (dask workers, joblib threads) each run with their
    own n_threads and leave the main thread's setting alone (torch's OpenMP backend keeps one
    count per thread)."""
    seen, errors = {}, []
    barrier = threading.Barrier(2)

    def work(n):
        try:
            barrier.wait()
            class Recording(type(clf())):  # its loss records the thread count it runs at
                def _build_objective(self):
                    objective = super()._build_objective()

                    class Recorded(type(objective)):
                        def _make_loss(self):
                            original = super()._make_loss()

                            def loss(output, target):
                                seen.setdefault(n, set()).add(torch.get_num_threads())
                                return original(output, target)

                            return loss

                    objective.__class__ = Recorded
                    objective.loss = objective._make_loss()
                    return objective

            # the torch engine: the fused kernel's training loop runs torch's operations
            # on one thread and gives the threads to the kernel (test_fused_kernel.py)
            with _kernel.engine("torch"):
                Recording(**clf(n_threads=n, max_epochs=3, teacher_weight=0.0).get_params()
                          ).fit(X, Y)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert seen == {1: {1}, 2: {2}}
    assert torch.get_num_threads() == caller_threads


def test_shard_workers_and_the_merge_use_the_estimators_n_threads(
    caller_threads, recorded, monkeypatch
):
    merge_threads = []
    fit = ModelAligner._fit  # what fit() and the sharded merge call

    def recording_fit(self, *args, **kwargs):
        merge_threads.append(torch.get_num_threads())
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(ModelAligner, "_fit", recording_fit)
    sharded = ShardedSoftTreeEnsemble(clf(n_threads=1), n_shards=2, n_jobs=2, random_state=0)
    with parallel_config(backend="threading"):
        sharded.fit(X, Y)
    assert recorded and set(recorded) == {1}
    assert merge_threads == [1]
    assert torch.get_num_threads() == caller_threads


def test_n_threads_beyond_the_machine_is_capped_with_a_warning(caller_threads, recorded):
    """Issue 20: ``n_threads=10**6`` made torch's OpenMP runtime segfault after
    spawning threads; it is capped at the machine's CPU count, with a warning."""
    import os

    cap = max(os.cpu_count() or 1, _available_cpus())
    with pytest.warns(UserWarning, match=r"n_threads=1000000 exceeds .* using n_threads="):
        assert effective_n_threads(10**6) == cap
    with pytest.warns(UserWarning, match="n_threads"):
        est = clf(n_threads=10**6).fit(X, Y)
    assert recorded and set(recorded) == {cap}
    assert torch.get_num_threads() == caller_threads
    with pytest.warns(UserWarning, match="n_threads"):
        assert np.isfinite(est.predict_proba(X)).all()


def test_the_count_is_set_through_torch_even_when_openmp_already_reads_it(
    caller_threads, monkeypatch
):
    """threadpoolctl's ``threadpool_limits(1)`` (as scikit-learn and the benchmarks use it)
    sets OpenMP's count, so that ``torch.get_num_threads()`` reads 1, but not the count of
    the BLAS inside torch, which ``torch.set_num_threads`` sets. Skipping the call when the
    count read already matched left torch's matmuls on two threads after any earlier
    ``set_num_threads(2)``: an OpenMP worker spun beside every later fit (issue 18's
    timings: process CPU twice the main thread's)."""
    calls = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (calls.append(n), real(n))[1])
    real(1)  # what threadpool_limits(1) leaves torch reading
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert calls == [1, 1]
    calls.clear()
    with torch_threads(None):  # None leaves the caller's setting alone: no call
        pass
    assert calls == []


@pytest.mark.skipif(not hasattr(threading, "get_native_id") or not __import__("os").path.isdir(
    "/proc/self/task"), reason="per-thread CPU times are read from Linux's /proc")
def test_no_other_thread_burns_cpu_during_a_fit_under_threadpool_limits(caller_threads):
    import os

    from threadpoolctl import threadpool_limits

    def cpu_ticks():
        main_id, main, other = threading.get_native_id(), 0, 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended
                continue
            ticks = int(fields[11]) + int(fields[12])  # utime + stime
            main, other = (main + ticks, other) if int(tid) == main_id else (main, other + ticks)
        return main, other

    Xb, yb = make_classification(n_samples=3000, n_features=20, random_state=0)
    est = clf(n_estimators=64, max_epochs=6, batch_size=256, early_stopping=False,
              teacher_weight=0.0)
    est.fit(Xb[:200], yb[:200]).predict(Xb)  # at the caller's 3 threads, set and restored
    m0, o0 = cpu_ticks()
    with threadpool_limits(1):
        est.fit(Xb, yb)
    m1, o1 = cpu_ticks()
    assert m1 - m0 > 0
    assert (o1 - o0) <= 0.1 * (m1 - m0) + 2, (m1 - m0, o1 - o0)

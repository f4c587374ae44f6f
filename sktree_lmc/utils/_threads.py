"""Thread policy: how many torch intra-op threads ``fit`` and prediction use.

The estimators' ``n_threads`` hyperparameter is applied only while their own
code runs (:func:`torch_threads`, used by :func:`limit_threads`): torch's
thread setting is set on entry and the caller's setting is restored on exit,
also when an exception is raised. It is never changed for the caller.

Why the default is one thread
-----------------------------
The per-minibatch kernels of a soft tree ensemble are small (a few hundred
microseconds at batch 512). With several OpenMP threads every kernel ends at a
barrier where all threads wait for the slowest; when another process occupies
a core, the thread that shares it is descheduled for whole time slices and
every kernel waits for it. Measured on a 2-core machine with one core kept busy
(``benchmarks/bench_throughput.py --busy``): a fit with torch's default two
threads took 10-30x as long as the same fit with one thread, while on an idle
machine two threads were at most about 1.6x faster than one. One thread is
therefore the default; ``n_threads=None`` keeps whatever the caller configured
(``torch.set_num_threads``), and a positive (or joblib-style negative) number
asks for that many threads.

With torch's OpenMP backend the setting belongs to the calling thread (OpenMP
keeps one thread count per thread), so fits running concurrently in threads of
one process (dask workers, joblib's threading backend) each get their own
count and restore their own.

The cap
-------
A positive ``n_threads`` larger than the machine's CPU count
(:func:`os.cpu_count`, or the CPUs of the process's affinity mask if that is
larger) is capped at that count with a ``UserWarning``: more threads than CPUs
cannot run at once, and torch's OpenMP runtime crashes (segmentation fault)
after trying to spawn, say, ``10**6`` threads.
"""

from __future__ import annotations

import functools
import os
import warnings
from contextlib import contextmanager
from numbers import Integral

import torch

__all__ = ["effective_n_threads", "limit_threads", "torch_threads"]


def _available_cpus():
    """Number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _machine_cpus():
    """Number of CPUs of the machine: the cap of ``n_threads``."""
    return max(os.cpu_count() or 1, _available_cpus())


def effective_n_threads(n_threads):
    """Resolve the ``n_threads`` hyperparameter to a positive thread count.

    Parameters
    ----------
    n_threads : int or None
        ``None``: torch's current setting (``torch.get_num_threads()``); a
        positive int: that many threads, capped at the machine's CPU count
        (with a ``UserWarning``); a negative int: joblib's convention,
        ``n_cpus + 1 + n_threads`` (``-1`` is all CPUs available to the
        process), at least 1.

    Returns
    -------
    n : int
        The number of threads.

    Raises
    ------
    ValueError
        If ``n_threads`` is 0.
    TypeError
        If ``n_threads`` is not an int or None (bool is rejected).
    """
    if n_threads is None:
        return torch.get_num_threads()
    if isinstance(n_threads, bool) or not isinstance(n_threads, Integral):
        raise TypeError(f"n_threads must be an int or None, got {type(n_threads).__name__}.")
    n_threads = int(n_threads)
    if n_threads == 0:
        raise ValueError("n_threads must be a positive or negative int or None, got 0.")
    if n_threads < 0:
        return max(1, _available_cpus() + 1 + n_threads)
    cap = _machine_cpus()
    if n_threads > cap:
        warnings.warn(
            f"n_threads={n_threads} exceeds the {cap} CPU(s) of this machine; using "
            f"n_threads={cap}.",
            UserWarning,
            stacklevel=3,
        )
        return cap
    return n_threads


@contextmanager
def torch_threads(n_threads):
    """Run the block with ``n_threads`` torch intra-op threads, then restore.

    Parameters
    ----------
    n_threads : int or None
        See :func:`effective_n_threads`; ``None`` leaves the setting alone.

    Yields
    ------
    n : int
        The number of threads in effect inside the block.
    """
    previous = torch.get_num_threads()
    n = effective_n_threads(n_threads)
    if n_threads is None:
        yield n
        return
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(previous)


def limit_threads(method):
    """Decorate an estimator method to run inside ``torch_threads(self.n_threads)``."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with torch_threads(self.n_threads):
            return method(self, *args, **kwargs)

    return wrapper

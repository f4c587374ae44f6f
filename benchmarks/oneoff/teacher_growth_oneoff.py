"""The gradient-boosted teacher's growth: the compiled levels against the NumPy path, and
against HGB's whole fit (issue 59).

1. **Growth.** ``grow_oblivious_trees`` as the default classifier grows its teacher (256
   oblivious trees of depth 4, the softmax loss, a tenth of the rows choosing the prefix) on
   10,000 rows of each dataset, with the numba engine (a tree's levels in one compiled call,
   ``sktree_lmc/training/_boosting_numba.py``) and with the torch engine (the NumPy and SciPy
   reference), and ``HistGradientBoostingClassifier``'s whole fit on the same rows (one
   OpenMP thread): thread CPU seconds, medians over ``--rounds`` rounds that alternate the
   order. The two growths' trees are compared bit for bit.
2. **Fits** (``--fits``): the default classifier's fit on the first dataset with the
   compiled growth and with the reference one (switched off in
   ``sktree_lmc.training._boosting._compiled_growth``), ``n_threads=1`` and ``2``,
   alternating in one process: wall seconds and the 2-thread speed-up of each, the load
   average beside them (two threads only pay on an idle machine).

Run from the repository root::

    python benchmarks/oneoff/teacher_growth_oneoff.py --datasets electricity california --rounds 7
    python benchmarks/oneoff/teacher_growth_oneoff.py --datasets electricity --skip-growth --fits --rounds 5
    python benchmarks/oneoff/teacher_growth_oneoff.py --smoke --fits    # seconds
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root


def _rows(name, n_train):
    from benchmarks.bench_accuracy import load, split

    X_tr, _, y_tr, _ = split(*load("raw", name), n_train, n_train, 0, True)
    return np.asarray(X_tr, dtype=np.float64), np.asarray(y_tr)


def measure_growth(name, rounds=5, n_train=10_000, n_trees=256, depth=4):
    """Median thread CPU seconds ``{"reference", "compiled", "hgb"}`` and whether the
    two growths gave the same trees."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from sktree_lmc.model import _kernel
    from sktree_lmc.training._boosting import grow_oblivious_trees

    X, y = _rows(name, n_train)
    classes, y = np.unique(y, return_inverse=True)
    val = np.arange(len(y)) % 10 == 0  # a tenth of the rows choose the prefix
    w = np.ones(len(y))

    def grow(engine):
        gains = np.zeros((n_trees, depth))
        with _kernel.engine(engine):
            return grow_oblivious_trees(
                X[~val], y[~val], w[~val], loss="softmax", n_trees=n_trees, depth=depth,
                n_outputs=len(classes), generator=torch.Generator().manual_seed(0),
                validation=(X[val], y[val], w[val]), gains=gains) + (gains,)

    def hgb():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            HistGradientBoostingClassifier(random_state=0).fit(X, y)

    same = all(np.array_equal(a, b) for a, b in zip(grow("torch"), grow("numba")))
    runs = {"reference": lambda: grow("torch"), "compiled": lambda: grow("numba"), "hgb": hgb}
    hgb()
    seconds = {k: [] for k in runs}
    for r in range(rounds):
        for k in runs if r % 2 == 0 else list(runs)[::-1]:
            start = time.thread_time()
            runs[k]()
            seconds[k].append(time.thread_time() - start)
    return {k: float(np.median(v)) for k, v in seconds.items()}, same


def measure_fits(name, rounds=3, n_train=10_000, params=None):
    """Median wall seconds ``{(teacher, threads): s}`` of the default classifier's fit,
    ``teacher`` "compiled" or "reference", and whether their predictions are the same."""
    from sktree_lmc import SoftTreeEnsembleClassifier, training_engine
    from sktree_lmc.training import _boosting

    from benchmarks.bench_accuracy import load, split

    X_tr, X_te, y_tr, _ = split(*load("raw", name), n_train, n_train, 0, True)
    compiled = _boosting._compiled_growth
    switch = {"compiled": compiled, "reference": lambda sites: None}
    wall = {(t, n): [] for t in switch for n in (1, 2)}
    preds = {}
    try:
        with training_engine("numba"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for threads in (1, 2):  # warm up: load the compiled kernels, start the threads
                SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=1,
                                           n_threads=threads).fit(X_tr[:300], y_tr[:300])
            for r in range(rounds):
                order = list(wall) if r % 2 == 0 else list(wall)[::-1]
                for teacher, threads in order:
                    _boosting._compiled_growth = switch[teacher]
                    model = SoftTreeEnsembleClassifier(random_state=0, device="cpu",
                                                       n_threads=threads, **(params or {}))
                    start = time.perf_counter()
                    model.fit(X_tr, y_tr)
                    wall[teacher, threads].append(time.perf_counter() - start)
                    preds[teacher] = model.decision_function(X_te)
    finally:
        _boosting._compiled_growth = compiled
    same = np.array_equal(preds["compiled"], preds["reference"])
    return {k: float(np.median(v)) for k, v in wall.items()}, same


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["electricity", "california"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fits", action="store_true", help="also the fits (first dataset)")
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="seconds: 300 rows, tiny models")
    args = parser.parse_args(argv)
    n_train, n_trees, params = 10_000, 256, None
    if args.smoke:
        n_train, n_trees, args.rounds = 300, 8, 1
        params = {"n_estimators": 8, "max_epochs": 1}
        args.datasets = args.datasets[:1]
    torch.set_num_threads(1)
    from threadpoolctl import threadpool_limits

    results = {"load_before": os.getloadavg()}
    with threadpool_limits(limits=1):  # HGB's OpenMP and the BLAS: one thread
        for name in [] if args.skip_growth else args.datasets:
            seconds, same = measure_growth(name, args.rounds, n_train, n_trees)
            results[name] = dict(seconds, same=same)
            print(f"{name}: teacher growth thread-CPU s, reference {seconds['reference']:.3f}, "
                  f"compiled {seconds['compiled']:.3f}, HGB fit {seconds['hgb']:.3f} | "
                  f"reference / compiled {seconds['reference'] / seconds['compiled']:.2f}, "
                  f"compiled / HGB {seconds['compiled'] / seconds['hgb']:.2f} | same trees "
                  f"{same} | load {os.getloadavg()[0]:.2f}", flush=True)
    if args.fits:
        name = args.datasets[0]
        wall, same = measure_fits(name, args.rounds, n_train, params)
        results["fits"] = dict(wall=wall, same=same)
        for teacher in ("reference", "compiled"):
            one, two = wall[teacher, 1], wall[teacher, 2]
            print(f"{name} fit wall, {teacher} teacher: 1 thread {one:.2f} s, 2 threads "
                  f"{two:.2f} s, speed-up {one / two:.2f}")
        print(f"same predictions: {same} | load average after: {os.getloadavg()}")
    return results


if __name__ == "__main__":  # pragma: no cover
    main()

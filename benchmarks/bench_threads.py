"""Speed-up of ``n_threads=2`` over 1 (issue 43).

The default classifier (30 epochs) is fitted on 10,000 training rows of a shared dataset with
``n_threads=1`` and ``n_threads=2``, alternating the two settings in one process, and then
predicts 10,000 test rows; medians of wall time over ``--rounds`` rounds. The machine's load
average is printed beside them: run it once on an idle machine and once beside a busy
process (docs/benchmarks.md, "Threads").

Run from the repository root::

    python -m benchmarks.bench_threads --datasets electricity california
    python -m benchmarks.bench_threads --smoke    # seconds, for the tests
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def measure(name, rounds=3, n_train=10_000, params=None):
    """``{threads: (median fit seconds, median predict rows/s)}`` for 1 and 2 threads."""
    from sktree_lmc import SoftTreeEnsembleClassifier

    from .bench_accuracy import load, split

    X_tr, X_te, y_tr, _ = split(*load("raw", name), n_train, n_train, 0, True)
    fit, rate = {1: [], 2: []}, {1: [], 2: []}
    for r in range(rounds):
        for threads in (1, 2) if r % 2 == 0 else (2, 1):  # alternate which goes first
            model = SoftTreeEnsembleClassifier(random_state=0, n_threads=threads,
                                               **{"max_epochs": 30, **(params or {})})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                model.fit(X_tr, y_tr)
                fit[threads].append(time.perf_counter() - start)
            start = time.perf_counter()
            model.predict_proba(X_te)
            rate[threads].append(len(X_te) / (time.perf_counter() - start))
    return {t: (float(np.median(fit[t])), float(np.median(rate[t]))) for t in (1, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["electricity"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="seconds: 300 rows, tiny models")
    args = parser.parse_args(argv)
    n_train, params = 10_000, None
    if args.smoke:
        n_train, params, args.rounds = 300, {"n_estimators": 8, "max_epochs": 2}, 1
        args.datasets = args.datasets[:1]
    results = {}
    for name in args.datasets:
        res = results[name] = measure(name, args.rounds, n_train, params)
        (f1, p1), (f2, p2) = res[1], res[2]
        print(f"{name} (load {os.getloadavg()[0]:.1f}): fit {f1:.2f} s with 1 thread, "
              f"{f2:.2f} s with 2 ({f1 / f2:.2f}x); predict {p1:,.0f} / {p2:,.0f} rows/s",
              flush=True)
    return results


if __name__ == "__main__":
    main()

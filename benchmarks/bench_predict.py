"""Prediction speed of the default classifier against HistGradientBoosting (issue 43).

The goal: ``predict_proba`` on 10,000 rows at least as fast as HGB's, at 20 and at 400
columns, one thread. For every dataset (``--datasets``):

* ``electricity``: the Tabular-Benchmark dataset (``--data-home``), 20,000 rows drawn
  with seed 0, the first 10,000 to fit, the other 10,000 to predict;
* ``mc20``: ``make_classification(20000, n_features=20, n_informative=15,
  n_redundant=3, random_state=0)``, 10,000 / 10,000;
* ``mc400``: ``make_classification(20000, n_features=400, n_informative=15,
  n_redundant=10, random_state=0)``, 10,000 / 10,000;

the default ``SoftTreeEnsembleClassifier(random_state=0)`` (oblivious trees of depth
4, 256 trees, additive table) and ``HistGradientBoostingClassifier(random_state=0)``
are fitted once and cached with pickle in ``--cache`` (default
``benchmarks/results/predict/``, git-ignored; ``--refit`` refits). Then, with one
thread (``torch.set_num_threads(1)``, ``threadpoolctl.threadpool_limits(1)``),
``--repeats`` rounds time both ``predict_proba`` alternately, in an order that
alternates from round to round, and the medians are reported as rows/s, of the wall
clock and of this process's CPU time (on a shared machine, CPU time is what one
thread achieves while it runs), with their ratio.

``--stages`` adds where ``predict_proba`` spends its time (medians of CPU time over
``--repeats`` calls): the fitted encoder's transform and additive codes timed alone
(of every column), the rest of the call (trees, table lookup, validation, softmax),
and, under ``cProfile``, the trees' kernel, the table lookup and the encoding inside
the call (of the columns the model uses; by function name; the profiler adds its
overhead to them).

The script imports only public names, so it also runs against an earlier checkout of
the package: ``PYTHONPATH=<checkout> python benchmarks/bench_predict.py --label
before`` times that checkout's ``predict_proba`` beside HGB in the same way (the
cached models load in both). Tables are printed as Markdown and written as CSV to
``--out`` (``predict_<label>.csv``).

Usage::

    python -m benchmarks.bench_predict                          # the three datasets
    python -m benchmarks.bench_predict --stages --repeats 9
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before python benchmarks/bench_predict.py --label before
    python -m benchmarks.bench_predict --smoke                  # a tiny run, for the tests
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import os
import pickle
import pstats
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

import sktree_lmc
from sktree_lmc import SoftTreeEnsembleClassifier

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "predict"
DEFAULT_DATA_HOME = Path(__file__).resolve().parents[2] / "shared" / "data" / "tabular_benchmark"
DATASETS = ("electricity", "mc20", "mc400")
MODELS = ("ours", "hgb")
#: Functions of ``predict_proba`` timed under the profiler (the first one found, by
#: name): the trees' kernel (less the table lookup where the kernel calls it) and
#: the table lookup.
PROFILED = {
    "trees (kernel)": ("predict_chunked",),
    "table lookup": ("additive_chunked", "additive_term"),
}
#: The encoding inside ``predict_proba`` under the profiler (features and codes of the
#: columns the model uses): the first group of functions found, summed (``encode`` since
#: the quantile columns search once for both; the two calls before).
PROFILED_ENCODING = (("encode",), ("transform_columns", "additive_codes"))


def load(name, data_home=None, n_rows=20_000):
    """``(X_train, y_train, X_test, y_test)``: halves of ``n_rows`` rows."""
    if name == "electricity":
        from sktree_lmc.datasets import load_tabular_benchmark

        X, y = load_tabular_benchmark("electricity", data_home=data_home, return_X_y=True)
        X, y = np.asarray(X), np.asarray(y)
        idx = np.random.default_rng(0).permutation(len(X))[:n_rows]
        X, y = X[idx], y[idx]
    elif name == "mc20":
        X, y = make_classification(n_rows, n_features=20, n_informative=15, n_redundant=3,
                                   random_state=0)
    elif name == "mc400":
        X, y = make_classification(n_rows, n_features=400, n_informative=15, n_redundant=10,
                                   random_state=0)
    elif name == "smoke":
        X, y = make_classification(n_rows, n_features=6, random_state=0)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    half = n_rows // 2
    return X[:half], y[:half], X[half:], y[half:]


def fitted_models(name, data, cache, refit=False, smoke=False):
    """The default classifier and HGB fitted on ``data``'s training half, cached."""
    path = Path(cache) / f"{name}.pkl"
    if path.exists() and not refit and not smoke:
        with open(path, "rb") as f:
            return pickle.load(f)
    X, y = data[0], data[1]
    params = dict(n_estimators=8, max_epochs=1, teacher_weight=0.0) if smoke else {}
    with threadpool_limits(1):
        ours = SoftTreeEnsembleClassifier(random_state=0, **params).fit(X, y)
        hgb = HistGradientBoostingClassifier(random_state=0, max_iter=10 if smoke else 100)
        hgb.fit(X, y)
    if not smoke:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump((ours, hgb), f)
    return ours, hgb


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_models(ours, hgb, X, repeats):
    """Seconds ``{model: ([wall], [cpu])}`` of ``predict_proba`` on ``X``, alternately."""
    calls = {"ours": lambda: ours.predict_proba(X), "hgb": lambda: hgb.predict_proba(X)}
    for fn in calls.values():  # warm-up
        fn()
    times = {k: ([], []) for k in calls}
    for r in range(repeats):
        for k in (MODELS if r % 2 == 0 else MODELS[::-1]):
            wall, cpu = _timed(calls[k])
            times[k][0].append(wall)
            times[k][1].append(cpu)
    return times


def _profiled(ours, X):
    """Cumulative CPU seconds of the :data:`PROFILED` functions in one profiled
    ``ours.predict_proba(X)``."""
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    ours.predict_proba(X)
    profile.disable()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    by_name = {}
    for (_, _, name), (_, _, _, cumulative, _) in stats.items():
        by_name[name] = by_name.get(name, 0.0) + cumulative
    out = {}
    for stage, names in PROFILED.items():
        found = [by_name[n] for n in names if n in by_name]
        out[stage] = found[0] if found else float("nan")
    groups = [g for g in PROFILED_ENCODING if all(n in by_name for n in g)]
    out["encoding in the call"] = (sum(by_name[n] for n in groups[0]) if groups
                                   else float("nan"))
    # the lookup runs inside the kernel's function since issue 43
    out["trees (kernel)"] -= by_name.get("additive_chunked", 0.0)
    return out


def time_stages(ours, X, total, repeats):
    """Median CPU seconds of the stages of ``ours.predict_proba(X)``: the encoder's
    transform and the additive codes timed alone (public methods of the fitted
    encoder), the rest of ``total`` (the median of the whole call), and the trees'
    kernel and the table lookup under ``cProfile``."""
    X = np.asarray(X, dtype=np.float64)
    columns = [X[:, j] for j in range(X.shape[1])]  # as the estimators split X
    encoder = ours.encoder_
    calls = {"encoder transform": lambda: encoder.transform_columns(columns)}
    if encoder.n_additive_:
        calls["additive codes"] = lambda: encoder.additive_codes(columns)
    out = {}
    for stage, fn in calls.items():
        fn()
        out[stage] = statistics.median(_timed(fn)[1] for _ in range(repeats))
    out["rest (trees, lookup, validation, softmax)"] = total - sum(out.values())
    ours.predict_proba(X)
    runs = [_profiled(ours, X) for _ in range(repeats)]
    for stage in (*PROFILED, "encoding in the call"):
        out[f"{stage}, profiled"] = statistics.median(r[stage] for r in runs)
    return out


def _package_commit():
    """The commit of the checkout whose package runs (``+`` when it has uncommitted
    changes), or ``"unknown"``: which version was timed, without this machine's paths."""
    import subprocess

    folder = Path(sktree_lmc.__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+" if dirty else "")


def _load_average():
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - not POSIX
        return float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--data-home", type=Path, default=DEFAULT_DATA_HOME)
    parser.add_argument("--cache", type=Path, default=DEFAULT_OUT,
                        help="folder of the pickled fitted models")
    parser.add_argument("--refit", action="store_true", help="refit the cached models")
    parser.add_argument("--repeats", type=int, default=7, help="alternating rounds")
    parser.add_argument("--stages", action="store_true", help="add the stages' timings")
    parser.add_argument("--label", default="current",
                        help="name of the package version timed, in the table and CSV")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny data and models, to check that the script runs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the CSV")
    args = parser.parse_args(argv)
    datasets = ["smoke"] if args.smoke else args.datasets
    n_rows = 400 if args.smoke else 20_000
    repeats = 1 if args.smoke else args.repeats
    torch.set_num_threads(1)
    records = []
    with threadpool_limits(1):
        for name in datasets:
            data = load(name, args.data_home, n_rows)
            ours, hgb = fitted_models(name, data, args.cache, args.refit, args.smoke)
            X = data[2]
            times = time_models(ours, hgb, X, repeats)
            record = dict(label=args.label, dataset=name, n_rows=len(X), n_features=X.shape[1],
                          repeats=repeats, load_average=round(_load_average(), 2),
                          package=_package_commit())
            for model, (wall, cpu) in times.items():
                record[f"{model}_wall_rows_s"] = len(X) / statistics.median(wall)
                record[f"{model}_cpu_rows_s"] = len(X) / statistics.median(cpu)
            if args.stages:
                total = statistics.median(times["ours"][1])
                for stage, t in time_stages(ours, X, total, repeats).items():
                    record[f"{stage} ms"] = 1e3 * t
            records.append(record)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"predict_{'smoke' if args.smoke else args.label}.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in records for k in r)))
        writer.writeheader()
        writer.writerows(records)
    print(f"package at {records[0]['package']}, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs, load average {records[0]['load_average']}\n")
    print(markdown(records))
    print(f"\nwrote {path}")
    return records


def markdown(records):
    """The records as Markdown tables."""
    lines = ["| version | dataset | F | clock | ours rows/s | HGB rows/s | ours / HGB |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        for clock in ("wall", "cpu"):
            ours, hgb = (r[f"{m}_{clock}_rows_s"] for m in MODELS)
            lines.append(f"| {r['label']} | {r['dataset']} | {r['n_features']} | {clock} | "
                         f"{ours:,.0f} | {hgb:,.0f} | {ours / hgb:.2f} |")
    stages = [k for k in records[0] if k.endswith(" ms")] if records else []
    if stages:
        lines += ["", "| version | dataset | " + " | ".join(s[:-3] for s in stages) + " |",
                  "|---|---|" + "---|" * len(stages)]
        for r in records:
            lines.append(f"| {r['label']} | {r['dataset']} | " + " | ".join(
                f"{r[s]:.1f} ms" for s in stages) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""Where the sharded teacher grows: over all shards, averaged over the shards, or at each shard.

Issue 43 asks that the federated teacher send at most 10 times the bytes of the rows it
replaces, or be off by default in ``ShardedSoftTreeEnsemble`` with its accuracy cost stated.
``teacher="shared"`` grows it over all shards from their histograms;
``teacher="averaged"`` has every shard grow one on its rows and send its trees, and every
shard distills their average; ``teacher="local"`` sends nothing: every shard grows its own
teacher on its rows and distills it alone, as a lone estimator does. This script measures
what each costs the merged model and sends, for every dataset (``--datasets``), seed
(``--seeds``) and teacher (``--teachers``): the 10,000 / 10,000
rows of ``benchmarks.bench_accuracy``'s raw split, the default
``SoftTreeEnsembleClassifier(random_state=seed)`` fitted on all training rows (``full``) and
in a ``ShardedSoftTreeEnsemble(n_shards=--shards, split=--split, random_state=seed)`` with
each teacher (one round: a one-shot merge with weight matching; ``--split`` ``"iid"`` or
``"class_skewed"``). Columns of the CSV (``<out>/sharded_teacher.csv``, or
``sharded_teacher_<split>.csv`` for skewed shards; one row per run, appended, so that an
interrupted run resumes):

- ``full``, ``shard_mean``, ``merged``: test accuracy (%) of the full model, the mean of the
  shard models and the merged model;
- ``recovery``: ``(merged - shard_mean) / (full - shard_mean)`` where ``full`` is at least
  half a point above ``shard_mean`` (else empty);
- ``teacher_bytes``: what the shards sent for the teacher (``boosting_bytes_``:
  histograms, or their trees for ``"averaged"``, whose average then goes back to every
  shard; 0 for ``"local"``), ``row_bytes``: the raw training rows' float64
  bytes (features, target and weight), which the teacher's histograms replace;
- ``fit_s``: CPU seconds of the sharded fit (this process; the shards fit in turn).

Run from the repository root::

    SKTREE_LMC_DATA=../shared/data/tabular_benchmark python -m benchmarks.bench_sharded_teacher
    python -m benchmarks.bench_sharded_teacher --report
    python -m benchmarks.bench_sharded_teacher --smoke     # tiny models, seconds
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks._common import append_csv as _append
from benchmarks._common import read_csv as _read
from benchmarks._common import recovery as _recovery
from benchmarks.bench_accuracy import load, split
from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier
from sktree_lmc.datasets import TABULAR_BENCHMARK

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "sharded_teacher"
TEACHERS = ("shared", "averaged", "local")
FIELDS = ("dataset", "seed", "K", "teacher", "full", "shard_mean", "merged", "recovery",
          "teacher_bytes", "row_bytes", "fit_s")
SMOKE_PARAMS = dict(n_estimators=8, max_epochs=3)


def csv_path(out, shard_split="iid"):
    """``<out>/sharded_teacher.csv`` for IID shards, ``sharded_teacher_<split>.csv`` else."""
    return Path(out) / ("sharded_teacher.csv" if shard_split == "iid"
                        else f"sharded_teacher_{shard_split}.csv")


def run(out, datasets, seeds, K, *, n_train=10_000, n_test=10_000, smoke=False,
        teachers=TEACHERS, shard_split="iid"):
    """Measure every run of ``teachers`` not yet in :func:`csv_path`; returns the path."""
    path = csv_path(out, shard_split)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["dataset"], r["seed"], r["K"], r["teacher"]) for r in _read(path)}
    params = dict(device="cpu", **(SMOKE_PARAMS if smoke else {}))
    torch.set_num_threads(1)
    for name in datasets:
        X_all, y_all = load("raw", name)
        for seed in seeds:
            todo = [t for t in teachers if (name, str(seed), str(K), t) not in done]
            if not todo:
                continue
            X, X_test, y, y_test = split(X_all, y_all, n_train, n_test, seed, False)
            full = SoftTreeEnsembleClassifier(random_state=seed, **params).fit(X, y)
            full_acc = 100 * full.score(X_test, y_test)
            row_bytes = int(np.asarray(X, dtype=np.float64).nbytes + 16 * len(y))
            for teacher in todo:
                t0 = time.process_time()
                sharded = ShardedSoftTreeEnsemble(
                    SoftTreeEnsembleClassifier(random_state=seed, **params), n_shards=K,
                    split=shard_split, teacher=teacher, random_state=seed).fit(X, y)
                fit_s = time.process_time() - t0
                shard_mean = float(np.mean([100 * e.score(X_test, y_test)
                                            for e in sharded.estimators_]))
                merged = 100 * sharded.score(X_test, y_test)
                row = dict(dataset=name, seed=seed, K=K, teacher=teacher,
                           full=round(full_acc, 4), shard_mean=round(shard_mean, 4),
                           merged=round(merged, 4),
                           recovery=_recovery(merged, shard_mean, full_acc),
                           teacher_bytes=sharded.boosting_bytes_ or 0, row_bytes=row_bytes,
                           fit_s=round(fit_s, 1))
                _append(path, FIELDS, [row])
                print(f"{name} seed {seed} K={K} {teacher}: full {full_acc:.2f} shards "
                      f"{shard_mean:.2f} merged {merged:.2f} teacher bytes "
                      f"{row['teacher_bytes'] / 1e6:.1f} MB (rows {row_bytes / 1e6:.2f} MB)",
                      flush=True)
    return path


def report(path):
    """Markdown: the runs per dataset, then the means over them per teacher."""
    rows = _read(path)
    if not rows:
        return "No rows."
    lines = ["| dataset | seed | K | teacher | full | shard mean | merged | recovery | "
             "teacher MB | teacher bytes / row bytes |", "|" + "---|" * 10]
    for r in rows:
        ratio = float(r["teacher_bytes"]) / float(r["row_bytes"])
        lines.append(f"| {r['dataset']} | {r['seed']} | {r['K']} | {r['teacher']} | "
                     f"{float(r['full']):.2f} | {float(r['shard_mean']):.2f} | "
                     f"{float(r['merged']):.2f} | {r['recovery'] or '-'} | "
                     f"{float(r['teacher_bytes']) / 1e6:.1f} | {ratio:.0f} |")
    lines += ["", "| teacher | runs | full | shard mean | merged |", "|---|---|---|---|---|"]
    for teacher in TEACHERS:
        rs = [r for r in rows if r["teacher"] == teacher]
        if rs:
            means = [np.mean([float(r[c]) for r in rs]) for c in ("full", "shard_mean",
                                                                  "merged")]
            lines.append(f"| {teacher} | {len(rs)} | " + " | ".join(f"{m:.2f}" for m in means)
                         + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=sorted(TABULAR_BENCHMARK))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--shards", type=int, default=4, help="K, IID shards")
    parser.add_argument("--teachers", nargs="+", choices=TEACHERS, default=list(TEACHERS))
    parser.add_argument("--split", default="iid", choices=["iid", "class_skewed"],
                        help="how the rows are shared out (ShardedSoftTreeEnsemble's split)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true",
                        help="MagicTelescope, 400 rows, tiny models: seconds")
    parser.add_argument("--report", action="store_true", help="print the tables and exit")
    args = parser.parse_args(argv)
    path = csv_path(args.out, args.split)
    if not args.report:
        if args.smoke:
            path = run(args.out, ["MagicTelescope"], [0], 2, n_train=400, n_test=200,
                       smoke=True)
        else:
            path = run(args.out, args.datasets, args.seeds, args.shards,
                       teachers=args.teachers, shard_split=args.split)
    print(report(path))
    return path


if __name__ == "__main__":
    main()

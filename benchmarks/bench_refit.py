"""``refit_leaves`` on the pairwise merge at lambda = 0.5 (paper protocol).

For every dataset and seed pair (the paper's pairs (1, 2), (3, 4), ...), two oblivious
ensembles (depth 2, M = 256 trees, learning rate 1e-2, 50 epochs, batch 512) are trained on
the same 10,000 training rows (``paper_split`` + ``make_paper_preprocessor``, split seed 0),
merged at lambda = 0.5 with weight matching (all invariances), and the merged model's leaves
are re-solved on the training rows with ``refit_leaves``. One CSV row per (dataset, pair):
training and test accuracy of both endpoints, the merged and the refitted model, and the
refit objective before and after.

Run from the repository root (results are appended, so a rerun resumes)::

    SKTREE_LMC_DATA=../shared/data/tabular_benchmark python -m benchmarks.bench_refit --pairs 3
    python -m benchmarks.bench_refit --smoke

``--cache-timing`` times the feature cache of ``refit_leaves`` instead: the default model
(``SoftTreeEnsembleClassifier()``, depth 4, 256 trees, ``--epochs`` epochs) on
``--n-train`` rows of each dataset, refitted with a fixed number of L-BFGS iterations
(``--refit-iter``) under each cache policy in turn, alternately, ``--repeats`` times:
``recompute`` (``cache_size=0``: every evaluation recomputes the features), ``default``
(``cache_size=256`` MiB: float64 when all fit, else float32 chunks as far as the budget goes)
and ``float64`` (an unbounded ``cache_size``: everything kept in float64).
CPU seconds of one thread (``time.process_time``), medians over the repeats::

    python -m benchmarks.bench_refit --cache-timing --datasets california --n-train 10000 20000
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators, refit_leaves

from .lmc.cli import DATASETS
from .lmc.core import PAPER_TRAINING, SEED_PAIRS, SMALL, load_split

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "refit"
FIELDS = ["dataset", "pair", "seed_a", "seed_b", "train_a", "train_b", "train_merged",
          "train_refit", "test_a", "test_b", "test_merged", "test_refit", "objective_merged",
          "objective_refit", "refit_iter", "refit_s"]


def _pct(model, X, y):
    return round(100.0 * float(np.mean(model.predict(X) == y)), 3)


def run(args, out_csv):
    done = set()
    if out_csv.exists():
        with open(out_csv) as fh:
            done = {(r["dataset"], int(r["pair"])) for r in csv.DictReader(fh)}
    else:
        with open(out_csv, "w", newline="") as fh:
            csv.DictWriter(fh, FIELDS).writeheader()
    for name in args.datasets:
        if all((name, p) in done for p in range(args.pairs)):
            continue
        X_tr, X_te, y_tr, y_te = load_split(name, n_train=args.n_train[0], n_test=args.n_train[0])
        for p, (sa, sb) in enumerate(SEED_PAIRS[: args.pairs]):
            if (name, p) in done:
                continue
            a, b = (SoftTreeEnsembleClassifier(
                arch="oblivious", depth=2, n_estimators=args.n_estimators,
                learning_rate=1e-2, max_epochs=args.epochs, device="cpu", random_state=s,
                **PAPER_TRAINING,
            ).fit(X_tr, y_tr) for s in (sa, sb))
            merged = merge_estimators(a, b, lam=0.5)
            start = time.perf_counter()
            refitted, info = refit_leaves(merged, X_tr, y_tr, return_info=True)
            seconds = time.perf_counter() - start
            row = dict(dataset=name, pair=p, seed_a=sa, seed_b=sb,
                       objective_merged=round(info["objective_start"], 6),
                       objective_refit=round(info["objective"], 6), refit_iter=info["n_iter"],
                       refit_s=round(seconds, 2))
            for tag, model in (("a", a), ("b", b), ("merged", merged), ("refit", refitted)):
                row[f"train_{tag}"] = _pct(model, X_tr, y_tr)
                row[f"test_{tag}"] = _pct(model, X_te, y_te)
            with open(out_csv, "a", newline="") as fh:
                csv.DictWriter(fh, FIELDS).writerow(row)
            print(f"{name} pair {p}: test a {row['test_a']:.2f} b {row['test_b']:.2f} "
                  f"merged {row['test_merged']:.2f} refit {row['test_refit']:.2f} "
                  f"(objective {info['objective_start']:.4f} -> {info['objective']:.4f}, "
                  f"{seconds:.1f}s)", flush=True)


CACHE_POLICIES = ("recompute", "default", "float64")


def cache_timing(args):
    """CPU seconds of ``refit_leaves`` per cache policy (see the module docstring)."""
    sizes = {"recompute": {"cache_size": 0}, "default": {}, "float64": {"cache_size": 2**40}}
    lines = ["| dataset | rows | features (MB, float64) | "
             + " | ".join(f"{p} (s)" for p in CACHE_POLICIES)
             + " | recompute / default | objective (default - float64) |",
             "|" + "---|" * (len(CACHE_POLICIES) + 5)]
    for name in args.datasets:
        for n in args.n_train:
            X_tr, _, y_tr, _ = load_split(name, n_train=n, n_test=min(n, 1000))
            model = SoftTreeEnsembleClassifier(
                n_estimators=args.n_estimators, max_epochs=args.epochs, random_state=0,
                **({"depth": 2} if args.smoke else {})).fit(X_tr, y_tr)
            M, L, _ = model.tree_params_.leaf_value.shape
            times = {p: [] for p in CACHE_POLICIES}
            objective = {}
            for _ in range(args.repeats):
                for policy in CACHE_POLICIES:
                    start = time.process_time()
                    _, info = refit_leaves(model, X_tr, y_tr, max_iter=args.refit_iter,
                                           return_info=True, **sizes[policy])
                    times[policy].append(time.process_time() - start)
                    objective[policy] = info["objective"]
            med = {p: float(np.median(times[p])) for p in CACHE_POLICIES}
            lines.append(
                f"| {name} | {len(y_tr)} | {len(y_tr) * M * L * 8 / 1e6:.0f} | "
                + " | ".join(f"{med[p]:.1f}" for p in CACHE_POLICIES)
                + f" | {med['recompute'] / med['default']:.1f}x | "
                f"{objective['default'] - objective['float64']:+.1e} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def summarize(csv_path):
    """Markdown table of means over pairs, per dataset."""
    with open(csv_path) as fh:
        rows = list(csv.DictReader(fh))
    groups = {}
    for r in rows:
        groups.setdefault(r["dataset"], []).append(r)
    cols = ["test_a", "test_b", "test_merged", "test_refit", "train_merged", "train_refit"]
    head = ["dataset", "pairs", "test A", "test B", "test merged", "test merged + refit",
            "refit - better endpoint", "train merged", "train merged + refit",
            "objective merged -> refit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rs in groups.items():
        m = {c: np.mean([float(r[c]) for r in rs]) for c in cols}
        best = np.mean([max(float(r["test_a"]), float(r["test_b"])) for r in rs])
        obj = [np.mean([float(r[c]) for r in rs]) for c in ("objective_merged", "objective_refit")]
        cells = [name, str(len(rs))] + [f"{m[c]:.2f}" for c in cols[:4]]
        cells += [f"{m['test_refit'] - best:+.2f}", f"{m['train_merged']:.2f}",
                  f"{m['train_refit']:.2f}", f"{obj[0]:.4f} -> {obj[1]:.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--n-estimators", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--n-train", type=int, nargs="+", default=[10_000])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--smoke", action="store_true", help="bundled data, tiny models")
    parser.add_argument("--cache-timing", action="store_true",
                        help="time the feature cache of refit_leaves (see the docstring)")
    parser.add_argument("--refit-iter", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if len(args.n_train) > 1 and not args.cache_timing:
        parser.error("several --n-train values are for --cache-timing only")
    if args.smoke:
        args.datasets, args.pairs, args.n_estimators, args.epochs = [SMALL], 1, 8, 2
        if args.cache_timing:
            args.n_train, args.refit_iter, args.repeats = [200], 3, 1
    elif not os.environ.get("SKTREE_LMC_DATA"):
        default = Path(__file__).resolve().parents[2] / "shared" / "data" / "tabular_benchmark"
        if default.is_dir():
            os.environ["SKTREE_LMC_DATA"] = str(default)
    torch.set_num_threads(args.threads)
    if args.cache_timing:
        print(cache_timing(args))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out_csv = out / ("smoke_refit.csv" if args.smoke else "refit_pairwise.csv")
    if args.smoke and out_csv.exists():
        out_csv.unlink()
    run(args, out_csv)
    print(summarize(out_csv))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line of the LMC benchmark: ``python -m benchmarks.lmc``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sktree_lmc import ARCHITECTURES
from sktree_lmc.datasets import TABULAR_BENCHMARK

from .core import LR_GRID, SMALL, ModelStore, load_split, log, run_hgb, run_lmc, run_split

DATASETS = sorted(TABULAR_BENCHMARK)
ARCHS = list(ARCHITECTURES)


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.lmc",
        description="Reproduce the LMC experiments of the paper on the Tabular-Benchmark data: "
                    "barriers (Tables 3, 4, 6-11), accuracies (Table 12), split-data merging "
                    "(Figure 8), MLP baseline (Table 2). Results are appended per configuration "
                    "to CSV files under OUT/raw/<dataset>/ and fitted models are cached under "
                    "OUT/models/, so a rerun resumes. Tables and figures go to OUT/report/.",
    )
    p.add_argument("--datasets", nargs="+", default=DATASETS)
    p.add_argument("--archs", nargs="+", default=ARCHS, choices=ARCHS)
    p.add_argument("--depths", nargs="+", type=int, default=[2])
    p.add_argument("--n-estimators", nargs="+", type=int, default=[256])
    p.add_argument("--methods", nargs="+", default=["wm", "am"], choices=["wm", "am"])
    p.add_argument("--pairs", type=int, default=3, help="number of seed pairs (1..5)")
    p.add_argument("--lrs", nargs="+", type=float, default=list(LR_GRID),
                   help="learning-rate grid; chosen by the training accuracy of the seed-1 model")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--leaf-init", default="ensemble", choices=["tree", "ensemble"],
                   help="leaf_init of the soft tree models (use a separate --out per value)")
    p.add_argument("--split-init", default="fan_in", type=_split_init,
                   help="split_init of the soft tree models: 'fan_in' or a positive float "
                        "(use a separate --out per value)")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--lambdas", type=int, default=25)
    p.add_argument("--n-train", type=int, default=10_000)
    p.add_argument("--n-test", type=int, default=10_000)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--out", default=None, help="default benchmarks/results/lmc")
    p.add_argument("--no-lmc", action="store_true", help="skip the barrier experiment")
    p.add_argument("--no-hgb", action="store_true", help="skip HistGradientBoosting")
    p.add_argument("--split-data", action="store_true", help="run the split-data experiment")
    p.add_argument("--split-archs", nargs="+", default=["oblivious"], choices=ARCHS)
    p.add_argument("--mlp", action="store_true", help="run the MLP baseline (Table 2)")
    p.add_argument("--mlp-depths", nargs="+", type=int, default=[1])
    p.add_argument("--report-only", action="store_true",
                   help="only regenerate tables and figures from OUT")
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--figures-dir", default=None, help="where PNGs go (default OUT/report)")
    p.add_argument("--docs", default=None,
                   help="also rewrite the generated block of this Markdown file (e.g. "
                        "docs/benchmarks.md), with figures and CSVs in --figures-dir")
    p.add_argument("--report-pairs", type=int, default=None,
                   help="report only the first N seed pairs (default: all that ran)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny run on the bundled magic_small data into a temporary folder")
    p.add_argument("--verbose", type=int, default=0)
    return p


def _split_init(value):
    if value == "fan_in":
        return value
    try:
        bound = float(value)
    except ValueError:
        bound = float("nan")
    if not bound > 0:
        raise argparse.ArgumentTypeError(f"expected 'fan_in' or a positive float, got {value!r}")
    return bound


def apply_smoke(args):
    args.datasets = [SMALL]
    args.archs = ["oblivious", "decision_list_modified"]
    args.depths, args.n_estimators = [2], [8]
    args.pairs, args.epochs, args.lambdas = 1, 2, 5
    args.lrs = [1e-2, 1e-3]
    args.n_train, args.n_test = 300, 300
    args.split_data, args.mlp = True, True
    args.device = "cpu"
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="lmc_smoke_")


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.smoke:
        apply_smoke(args)
    if args.out is None:
        args.out = "benchmarks/results/lmc"
    out = Path(args.out)
    import torch

    torch.set_num_threads(args.threads)
    if not args.report_only:
        if not 1 <= args.pairs <= 5:
            raise SystemExit("--pairs must be between 1 and 5")
        store = ModelStore(out, device=args.device, batch_size=args.batch_size,
                           leaf_init=args.leaf_init, split_init=args.split_init,
                           verbose=args.verbose)
        total = 0
        if not args.no_lmc:
            total += len(args.datasets) * len(args.archs) * len(args.depths) * len(
                args.n_estimators) * args.pairs
        if args.split_data:
            total += len(args.datasets) * len(args.split_archs) * args.pairs
        try:
            from tqdm.auto import tqdm

            progress = tqdm(total=total, desc="configurations", file=sys.stderr, mininterval=5)
        except ImportError:  # pragma: no cover
            progress = None
        t_start = time.perf_counter()
        for ds in args.datasets:
            data = load_split(ds, n_train=args.n_train, n_test=args.n_test)
            log(f"{ds}: {len(data[2])} train / {len(data[3])} test rows, "
                f"{data[0].shape[1]} features")
            if not args.no_hgb:
                run_hgb(out, ds, data)
            if not args.no_lmc:
                for depth in args.depths:
                    for M in args.n_estimators:
                        for arch in args.archs:
                            run_lmc(store, out, ds, arch, depth, M, args.epochs, args.pairs,
                                    args.lrs, data, methods=args.methods,
                                    n_lambdas=args.lambdas, progress=progress)
            if args.split_data:
                for arch in args.split_archs:
                    run_split(store, out, ds, arch, args.depths[0], args.n_estimators[0],
                              args.epochs, args.pairs, args.lrs, data, methods=args.methods,
                              n_lambdas=args.lambdas, progress=progress)
            if args.mlp:
                from .mlp import run_mlp

                for depth in args.mlp_depths:
                    run_mlp(out, ds, depth, args.n_estimators[0], args.epochs, args.pairs,
                            args.lrs, data, n_lambdas=args.lambdas)
        if progress is not None:
            progress.close()
        log(f"done in {time.perf_counter() - t_start:.1f}s; results under {out}")
    if not args.no_report:
        from .report import write_docs, write_report

        if args.docs:
            path = write_docs(out, args.docs, args.figures_dir or "docs/_static/benchmarks",
                              max_pairs=args.report_pairs)
        else:
            path = write_report(out, figures_dir=args.figures_dir, max_pairs=args.report_pairs)
        log(f"report: {path}")
    print(out)
    return 0

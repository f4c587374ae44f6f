"""Depth sweep of the LMC barriers (the paper's Figures 6 and 9), public API only.

For every (dataset, architecture, depth, seed pair) two classifiers of ``M`` trees
are fitted with the paper's protocol (:func:`~sktree_lmc.datasets.paper_split`,
:func:`~sktree_lmc.datasets.make_paper_preprocessor`, Adam, batch 512, 50 epochs;
the learning rate is the one the paper protocol selected at depth 2 for that dataset
and architecture, read from ``docs/_static/benchmarks/lmc_models.csv``, instead of a
new 3-point grid search per depth). The second model is aligned to the first with
:class:`~sktree_lmc.ModelAligner` on the training rows (timed), and
:func:`~sktree_lmc.interpolation_curve` (given that fitted aligner) measures the
accuracy barrier along 25 interpolation points, for

* ``naive`` (no alignment), and for weight matching (WM) and activation matching (AM)
  with ``perm`` (tree permutation only) and ``all`` (every invariance of the
  architecture) -- five curves,
* on train and test rows (fixed random subsamples of ``--n-eval`` rows of each, the
  same for every model of a dataset; the paper's full 10,000 rows cost too much CPU at
  depth here).

One CSV row is appended per (pair, curve) as soon as it is measured, and fitted models
are cached (``joblib``) under ``--out``, so an interrupted run resumes where it stopped.

Run from the repository root (``SKTREE_LMC_DATA`` pointing to the Tabular-Benchmark
folder)::

    python -m benchmarks.bench_depth --smoke              # seconds, bundled data
    python -m benchmarks.bench_depth --archs oblivious --depths 1 2 3 4 --pairs 3
    python -m benchmarks.bench_depth --report docs/_static/benchmarks/depth

``--report DIR`` only reads the CSV and writes the summary table (Markdown, printed)
and the figure ``DIR/depth_sweep.png``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    interpolation_curve,
    merge_estimators,
    refit_leaves,
)
from sktree_lmc.datasets import (
    PAPER_TRAINING,
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "depth"
LR_TABLE = ROOT / "docs" / "_static" / "benchmarks" / "lmc_models.csv"
DATASETS = ("MagicTelescope", "bank-marketing", "eye_movements", "california")
ARCHS = ("oblivious", "non_oblivious", "decision_list", "decision_list_modified")
CURVES = (("naive", "wm", "none"), ("wm_perm", "wm", "perm"), ("wm_all", "wm", "all"),
          ("am_perm", "am", "perm"), ("am_all", "am", "all"))
COLUMNS = ("dataset", "arch", "depth", "M", "pair", "seed_a", "seed_b", "lr", "curve",
           "method", "invariances", "align_s", "train_barrier", "test_barrier",
           "train_acc_a", "train_acc_b", "test_acc_a", "test_acc_b", "fit_a_s", "fit_b_s")
SMALL = "magic_small"


def load(name, n_eval, seed=0):
    """Paper split, preprocessing, and the fixed evaluation subsamples of ``name``."""
    if name == SMALL:
        X, y = load_magic_small(return_X_y=True)
    else:
        X, y = load_tabular_benchmark(name, return_X_y=True)
    X_tr, X_te, y_tr, y_te = paper_split(X, y)
    pre = make_paper_preprocessor(n_quantiles=min(1000, len(X_tr))).fit(X_tr)
    X_tr, X_te = pre.transform(X_tr).astype(np.float32), pre.transform(X_te).astype(np.float32)
    rng = np.random.RandomState(seed)
    i_tr = rng.permutation(len(X_tr))[:n_eval]
    i_te = rng.permutation(len(X_te))[:n_eval]
    y_tr, y_te = np.asarray(y_tr), np.asarray(y_te)
    return X_tr, y_tr, (X_tr[i_tr], y_tr[i_tr]), (X_te[i_te], y_te[i_te])


def paper_lr(dataset, arch):
    """Learning rate the paper protocol selected at depth 2 (1e-2 when unknown)."""
    if LR_TABLE.exists():
        with open(LR_TABLE) as fh:
            for r in csv.DictReader(fh):
                if (r["dataset"], r["arch"], r["role"], r["depth"]) == (dataset, arch, "pair",
                                                                        "2"):
                    return float(r["lr"])
    return 1e-2


def fitted(out, dataset, arch, depth, M, lr, seed, epochs, X, y):
    """Fit (or load from the cache) one classifier; returns it and its fit time."""
    import joblib

    path = out / "models" / dataset / f"{arch}_D{depth}_M{M}_lr{lr:g}_s{seed}_e{epochs}.joblib"
    if path.exists():
        model, fit_s = joblib.load(path)  # older pickles get newer hyperparameters' defaults
        return model, fit_s
    t0 = time.perf_counter()
    model = SoftTreeEnsembleClassifier(arch=arch, depth=depth, n_estimators=M,
                                       learning_rate=lr, max_epochs=epochs, device="cpu",
                                       random_state=seed, **PAPER_TRAINING).fit(X, y)
    fit_s = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump((model, fit_s), path)
    return model, fit_s


def append_row(path, columns, row):
    """Append one row to the CSV at ``path`` (header first when it is new)."""
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        if new:
            writer.writeheader()
        writer.writerow(row)


def done_keys(path):
    if not path.exists():
        return set()
    with open(path) as fh:
        return {(r["dataset"], r["arch"], r["depth"], r["M"], r["pair"], r["curve"])
                for r in csv.DictReader(fh)}


def run_pair(out, csv_path, dataset, arch, depth, M, pair, epochs, data, done):
    X_tr, y_tr, (Xe_tr, ye_tr), (Xe_te, ye_te) = data
    lr = paper_lr(dataset, arch)
    seed_a, seed_b = 2 * pair + 1, 2 * pair + 2
    todo = [c for c in CURVES
            if (dataset, arch, str(depth), str(M), str(pair), c[0]) not in done]
    if not todo:
        return
    a, fit_a = fitted(out, dataset, arch, depth, M, lr, seed_a, epochs, X_tr, y_tr)
    b, fit_b = fitted(out, dataset, arch, depth, M, lr, seed_b, epochs, X_tr, y_tr)
    for name, method, inv in todo:
        t0 = time.perf_counter()
        aligner = ModelAligner(method=method, invariances=inv, random_state=0).fit([a, b], X_tr)
        align_s = time.perf_counter() - t0
        # one alignment (on training rows), two evaluation sets
        curves = [interpolation_curve(a, b, Xe, ye, aligner=aligner)
                  for Xe, ye in ((Xe_tr, ye_tr), (Xe_te, ye_te))]
        acc = [c.scores["accuracy"] for c in curves]
        row = dict(dataset=dataset, arch=arch, depth=depth, M=M, pair=pair, seed_a=seed_a,
                   seed_b=seed_b, lr=lr, curve=name, method=method, invariances=inv,
                   align_s=round(align_s, 4),
                   train_barrier=round(curves[0].barrier("accuracy"), 4),
                   test_barrier=round(curves[1].barrier("accuracy"), 4),
                   train_acc_a=round(acc[0][0], 3), train_acc_b=round(acc[0][-1], 3),
                   test_acc_a=round(acc[1][0], 3), test_acc_b=round(acc[1][-1], 3),
                   fit_a_s=round(fit_a, 2), fit_b_s=round(fit_b, 2))
        append_row(csv_path, COLUMNS, row)
        print(f"{dataset} {arch} D={depth} pair {pair} {name}: align {align_s:.2f} s, "
              f"barrier train {row['train_barrier']:.2f} test {row['test_barrier']:.2f}",
              flush=True)


def report(csv_path, fig_dir):
    """Mean (std over datasets x pairs) barriers per arch, depth and curve; figure."""
    import pandas as pd

    df = pd.read_csv(csv_path)
    g = df.groupby(["arch", "depth", "curve"])
    summary = g[["train_barrier", "test_barrier", "align_s"]].mean()
    summary["n"] = g.size()
    summary["datasets"] = g["dataset"].nunique()
    table = summary.reset_index().pivot_table(
        index=["arch", "depth"], columns="curve", values="test_barrier")
    lines = ["| arch | D | runs | " + " | ".join(f"{c} test" for c, _, _ in CURVES)
             + " | WM all train | align WM all (s) | align AM all (s) |",
             "|" + "---|" * (6 + len(CURVES))]
    for (arch, depth), r in table.iterrows():
        s = summary.loc[(arch, depth)]
        vals = [f"{r.get(c, np.nan):.2f}" for c, _, _ in CURVES]
        lines.append(
            f"| {arch} | {depth} | {int(s['n'].max())} ({int(s['datasets'].max())} ds) | "
            + " | ".join(vals)
            + f" | {s['train_barrier'].get('wm_all', np.nan):.2f}"
            f" | {s['align_s'].get('wm_all', np.nan):.3f}"
            f" | {s['align_s'].get('am_all', np.nan):.3f} |")
    print("\n".join(lines))
    if fig_dir is None:
        return summary
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    archs = [a for a in ARCHS if a in set(df.arch)]
    fig, axes = plt.subplots(2, len(archs), figsize=(3.6 * len(archs), 6.4), squeeze=False)
    for j, arch in enumerate(archs):
        for i, split in enumerate(("train", "test")):
            ax = axes[i, j]
            for name, _, _ in CURVES:
                sub = df[(df.arch == arch) & (df.curve == name)]
                if sub.empty:
                    continue
                m = sub.groupby("depth")[f"{split}_barrier"].agg(["mean", "std"])
                ax.errorbar(m.index, m["mean"], yerr=m["std"].fillna(0), marker="o",
                            capsize=2, label=name)
            ax.set_title(f"{arch} ({split})", fontsize=9)
            ax.set_xlabel("depth D")
            ax.set_ylabel("accuracy barrier (points)")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(fig_dir / "depth_sweep.png", dpi=110)
    return summary


REFIT_COLUMNS = ("dataset", "arch", "depth", "pair", "split", "acc_a", "acc_b", "merged",
                 "refit", "barrier_merged", "barrier_refit", "refit_s")


def run_refit(out, csv_path, dataset, arch, depth, M, pair, epochs, data):
    """Midpoint barrier (lam = 0.5, WM all) with and without ``refit_leaves`` on the
    training rows, for a pair whose models are cached."""
    X_tr, y_tr, (Xe_tr, ye_tr), (Xe_te, ye_te) = data
    lr = paper_lr(dataset, arch)
    a, _ = fitted(out, dataset, arch, depth, M, lr, 2 * pair + 1, epochs, X_tr, y_tr)
    b, _ = fitted(out, dataset, arch, depth, M, lr, 2 * pair + 2, epochs, X_tr, y_tr)
    merged = merge_estimators(a, b, aligner="wm")
    t0 = time.perf_counter()
    refit = refit_leaves(merged, X_tr, y_tr)
    refit_s = time.perf_counter() - t0
    for split, (Xe, ye) in (("train", (Xe_tr, ye_tr)), ("test", (Xe_te, ye_te))):
        acc = [100.0 * m.score(Xe, ye) for m in (a, b, merged, refit)]
        line = (acc[0] + acc[1]) / 2
        row = dict(dataset=dataset, arch=arch, depth=depth, pair=pair, split=split,
                   acc_a=round(acc[0], 3), acc_b=round(acc[1], 3), merged=round(acc[2], 3),
                   refit=round(acc[3], 3), barrier_merged=round(max(line - acc[2], 0), 3),
                   barrier_refit=round(max(line - acc[3], 0), 3), refit_s=round(refit_s, 2))
        append_row(csv_path, REFIT_COLUMNS, row)
        print(row, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--archs", nargs="+", default=list(ARCHS), choices=ARCHS)
    parser.add_argument("--depths", nargs="+", type=int, default=[1, 2, 3, 4])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--n-estimators", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--n-eval", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=None, metavar="FIG_DIR",
                        help="only summarize the CSV and write the figure to FIG_DIR")
    parser.add_argument("--smoke", action="store_true", help="tiny run on bundled data")
    parser.add_argument("--refit", action="store_true",
                        help="midpoint barrier with and without refit_leaves (cached models, "
                             "pair 0) instead of the curves; CSV depth_refit.csv")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    if args.smoke:
        args.datasets, args.archs, args.depths = [SMALL], ["oblivious"], [1, 7]
        args.pairs, args.n_estimators, args.epochs, args.n_eval = 1, 4, 1, 200
    csv_path = args.out / "depth_sweep.csv"
    if args.report is not None:
        return report(csv_path, args.report)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.refit:
        for depth in args.depths:
            for arch in args.archs:
                for dataset in args.datasets:
                    run_refit(args.out, args.out / "depth_refit.csv", dataset, arch, depth,
                              args.n_estimators, 0, args.epochs, load(dataset, args.n_eval))
        return None
    done = done_keys(csv_path)
    cache = {}
    for pair in range(args.pairs):
        for depth in args.depths:
            for arch in args.archs:
                for dataset in args.datasets:
                    if dataset not in cache:
                        cache[dataset] = load(dataset, args.n_eval)
                    run_pair(args.out, csv_path, dataset, arch, depth, args.n_estimators,
                             pair, args.epochs, cache[dataset], done)
    return report(csv_path, None)


if __name__ == "__main__":
    main()

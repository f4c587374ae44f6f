"""Leaf initialization ablation: ``leaf_init="tree"`` versus ``"ensemble"``.

For each dataset and architecture (paper protocol, M=256, D=2, lr 1e-2, 50
epochs, one seed pair), fits both models of the pair with both leaf
initializations and reports train/test accuracy and the test barriers of WM
perm, WM all and AM all.

Run ``python -m benchmarks.bench_leaf_init`` (``--smoke`` for a tiny run);
results go to ``benchmarks/results/leaf_init.csv`` (git-ignored) and a Markdown
table is printed.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.lmc.core import PAPER_TRAINING, default_data_home
from sktree_lmc import ARCHITECTURES, ModelAligner, SoftTreeEnsembleClassifier, interpolation_curve
from sktree_lmc.datasets import (
    TABULAR_BENCHMARK,
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

ALIGNMENTS = [("wm", "perm"), ("wm", "all"), ("am", "all")]


def _data(name):
    if name == "magic_small":
        X, y = load_magic_small(return_X_y=True)
    else:
        X, y = load_tabular_benchmark(name, data_home=default_data_home(), return_X_y=True)
    X_train, X_test, y_train, y_test = paper_split(X, y, random_state=0)
    pre = make_paper_preprocessor().fit(X_train)
    return pre.transform(X_train), pre.transform(X_test), y_train, y_test


def run(datasets, archs, seeds, n_estimators, epochs, out):
    rows = []
    for name in datasets:
        X_train, X_test, y_train, y_test = _data(name)
        for arch in archs:
            for init in ("tree", "ensemble"):
                t0 = time.perf_counter()
                models = [
                    SoftTreeEnsembleClassifier(
                        arch=arch, n_estimators=n_estimators, depth=2, max_epochs=epochs,
                        learning_rate=1e-2, leaf_init=init, device="cpu", random_state=s,
                        **PAPER_TRAINING,
                    ).fit(X_train, y_train)
                    for s in seeds
                ]
                row = {
                    "dataset": name, "arch": arch, "leaf_init": init,
                    "train_acc": np.mean([100 * m.score(X_train, y_train) for m in models]),
                    "test_acc": np.mean([100 * m.score(X_test, y_test) for m in models]),
                    "fit_s": (time.perf_counter() - t0) / len(models),
                }
                for method, inv in ALIGNMENTS:
                    aligner = ModelAligner(method=method, invariances=inv, random_state=seeds[0])
                    curve = interpolation_curve(*models, X_test, y_test, aligner=aligner,
                                                X_align=X_train)
                    row[f"{method}_{inv}"] = curve.barrier("accuracy")
                rows.append(row)
                print(f"{name:>32} {arch:>22} {init:>8} train {row['train_acc']:6.2f} "
                      f"test {row['test_acc']:6.2f} "
                      + " ".join(f"{m}-{i} {row[f'{m}_{i}']:.2f}" for m, i in ALIGNMENTS),
                      flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print("\n| dataset | arch | leaf_init | train acc | test acc | WM perm | WM all | AM all |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['arch']} | {r['leaf_init']} | {r['train_acc']:.2f} | "
              f"{r['test_acc']:.2f} | {r['wm_perm']:.2f} | {r['wm_all']:.2f} | "
              f"{r['am_all']:.2f} |")
    return rows


def main(argv=None):
    """Command-line entry point; returns the result rows."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=sorted(TABULAR_BENCHMARK))
    p.add_argument("--archs", nargs="+", default=sorted(ARCHITECTURES))
    p.add_argument("--seeds", nargs=2, type=int, default=[1, 2])
    p.add_argument("--n-estimators", type=int, default=256)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/leaf_init.csv"))
    p.add_argument("--smoke", action="store_true", help="tiny run on the bundled data")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.smoke:
        args.datasets, args.archs, args.n_estimators, args.epochs = (
            ["magic_small"], ["oblivious"], 8, 2)
    return run(args.datasets, args.archs, args.seeds, args.n_estimators, args.epochs, args.out)


if __name__ == "__main__":
    main()

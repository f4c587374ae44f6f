"""LMC barriers of the package's default model on raw features, and refit_leaves after the merge.

The paper's barriers (``python -m benchmarks.lmc``) are measured under the paper's protocol
(depth 2, constant learning rate, the last weights, external quantile preprocessing). This
script asks the same question of the model a user gets today,
``SoftTreeEnsembleClassifier(random_state=s)`` fitted on RAW features (input encoding,
cosine schedule, weight averaging, early stopping and per-tree feature subsets, all by
default):

* for each of the seven Tabular-Benchmark datasets and each of ``--pairs`` seed pairs
  ``(2p + 1, 2p + 2)``, two default models are fitted on the same 10,000 training rows (the
  split of ``benchmarks.bench_accuracy``, seed 0; halves for smaller datasets), so that their
  encoders are equal and they can be merged;
* the second is aligned to the first on the training rows, and
  :func:`~sktree_lmc.interpolation_curve` measures the accuracy barrier (25 points) on train
  and test rows (``--n-eval`` rows of each, the same for every pair) for naive averaging, and
  weight matching (WM) and activation matching (AM) with ``perm`` (tree permutation only) and
  ``all`` (every invariance) -- the five curves of the paper (``benchmarks.lmc.core``);
* the WM-``all`` merge at lambda = 0.5 is re-solved with :func:`~sktree_lmc.refit_leaves` on
  the training rows (``--refit-iter`` L-BFGS iterations, 100 by default), and the naive merge
  too (does refitting make alignment unnecessary?); their accuracies go to ``refit.csv``.

Fitted models are cached with joblib under ``--out``; CSV rows are appended as they are
measured, so an interrupted run resumes.

Run from the repository root (``SKTREE_LMC_DATA`` pointing to the Tabular-Benchmark folder)::

    python -m benchmarks.bench_barriers --pairs 3
    python -m benchmarks.bench_barriers --report docs/_static/benchmarks/default_barriers
    python -m benchmarks.bench_barriers --smoke     # seconds, for the tests
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import joblib
import numpy as np
import torch

from benchmarks._common import append_csv as _append
from benchmarks._common import read_csv as _read
from benchmarks.bench_accuracy import (
    PREVIOUS_LEARNING_RATE,
    additive_bins_arg,
    bins_tag,
    load,
    split,
)
from benchmarks.lmc.core import interpolate_pair
from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators, refit_leaves
from sktree_lmc.datasets import TABULAR_BENCHMARK

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "default_barriers"
BARRIER_FIELDS = ("dataset", "pair", "seed_a", "seed_b", "method", "invariances", "split",
                  "n_rows", "barrier", "acc_a", "acc_b", "acc_mid", "align_time_s")
REFIT_FIELDS = ("dataset", "pair", "merge", "split", "acc_a", "acc_b", "acc_merged",
                "acc_refit", "refit_time_s")
SMOKE_PARAMS = dict(n_estimators=8, max_epochs=3)


def _model(out, dataset, seed, X, y, smoke, split_init=None, additive_bins="default",
           teacher_weight=None, learning_rate=None, feature_selection=None):
    """The default model of ``seed`` on the training rows (cached); ``split_init``,
    ``additive_bins`` (an int or None), ``teacher_weight``, ``learning_rate``,
    ``feature_selection``: those
    parameters instead of their defaults. The cache's file name names the additive term,
    the teacher and the learning rate the model has (``-additive64``, ``-teacher0.75``,
    ``-lr0.03``; none, or the rate ``PREVIOUS_LEARNING_RATE``: no suffix, as before they
    existed), so models of another default are never reused."""
    params = dict(random_state=seed, device="cpu")
    if split_init:
        params["split_init"] = split_init
    if additive_bins != "default":
        params["additive_bins"] = additive_bins
    if teacher_weight is not None:
        params["teacher_weight"] = teacher_weight
    if learning_rate is not None:
        params["learning_rate"] = learning_rate
    if feature_selection is not None:
        params["feature_selection"] = feature_selection
    probe = SoftTreeEnsembleClassifier(**params)
    bins, teacher, lr = probe.additive_bins, probe.teacher_weight, probe.learning_rate
    tag = (("-smoke" if smoke else "") + (f"-{split_init}" if split_init else "")
           + (f"-additive{bins_tag(bins)}" if bins else "")
           + (f"-teacher{teacher:g}" if teacher else "")
           + (f"-lr{lr:g}" if lr != PREVIOUS_LEARNING_RATE else "")
           + (f"-fs{feature_selection}" if feature_selection else ""))
    path = out / "models" / f"{dataset}-seed{seed}{tag}.joblib"
    if path.exists():
        return joblib.load(path)
    if smoke:
        params.update(SMOKE_PARAMS)
    model = SoftTreeEnsembleClassifier(**params).fit(X, y)
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, path)
    return model


def _acc(model, X, y):
    return 100.0 * model.score(X, y)


def run(out, datasets, pairs, n_eval, *, n_train=10_000, smoke=False, refit_iter=100,
        split_init=None, additive_bins="default", teacher_weight=None, learning_rate=None,
        feature_selection=None):
    out = Path(out)
    barriers, refits = out / "barriers.csv", out / "refit.csv"
    done_b = {(r["dataset"], r["pair"]) for r in _read(barriers)}
    done_r = {(r["dataset"], r["pair"]) for r in _read(refits)}
    for dataset in datasets:
        X, y = load("raw", dataset)
        X_tr, X_te, y_tr, y_te = split(X, y, n_train, n_train, 0, True)
        rng = np.random.RandomState(0)
        ev_tr = rng.choice(len(y_tr), min(n_eval, len(y_tr)), replace=False)
        ev_te = rng.choice(len(y_te), min(n_eval, len(y_te)), replace=False)
        splits = {"train": (X_tr[ev_tr], y_tr[ev_tr]), "test": (X_te[ev_te], y_te[ev_te])}
        for p in range(pairs):
            seed_a, seed_b = 2 * p + 1, 2 * p + 2
            if (dataset, str(p)) in done_b and (dataset, str(p)) in done_r:
                continue
            a = _model(out, dataset, seed_a, X_tr, y_tr, smoke, split_init, additive_bins,
                       teacher_weight, learning_rate, feature_selection)
            b = _model(out, dataset, seed_b, X_tr, y_tr, smoke, split_init, additive_bins,
                       teacher_weight, learning_rate, feature_selection)
            if (dataset, str(p)) not in done_b:
                rows = interpolate_pair(a, b, splits, X_align=X_tr, align_seed=seed_a,
                                        n_lambdas=5 if smoke else 25)
                base = dict(dataset=dataset, pair=p, seed_a=seed_a, seed_b=seed_b)
                _append(barriers, BARRIER_FIELDS, [dict(base, **r) for r in rows])
                test = {(r["method"], r["invariances"]): r["barrier"] for r in rows
                        if r["split"] == "test"}
                print(f"{dataset} pair {p}: test barriers " + " ".join(
                    f"{m}/{i}={v}" for (m, i), v in sorted(test.items())), flush=True)
            if (dataset, str(p)) not in done_r:
                rows = []
                for name, aligner in (("wm_all", "wm"), ("naive", "naive")):
                    merged = merge_estimators(a, b, lam=0.5, aligner=aligner)
                    t0 = time.perf_counter()
                    refitted = refit_leaves(merged, X_tr, y_tr,
                                            max_iter=20 if smoke else refit_iter)
                    refit_time = time.perf_counter() - t0
                    for split_name, (Xs, ys) in (("train", (X_tr, y_tr)), ("test", (X_te, y_te))):
                        rows.append(dict(
                            dataset=dataset, pair=p, merge=name, split=split_name,
                            acc_a=f"{_acc(a, Xs, ys):.3f}", acc_b=f"{_acc(b, Xs, ys):.3f}",
                            acc_merged=f"{_acc(merged, Xs, ys):.3f}",
                            acc_refit=f"{_acc(refitted, Xs, ys):.3f}",
                            refit_time_s=f"{refit_time:.2f}"))
                _append(refits, REFIT_FIELDS, rows)
                print(f"{dataset} pair {p}: refit " + " ".join(
                    f"{r['merge']}/{r['split']} {r['acc_merged']}->{r['acc_refit']}"
                    for r in rows), flush=True)


def _mean_std(values):
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.2f} ± {values.std():.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def report(out, report_dir=None):
    """Markdown tables of the barriers and refits (mean ± std over pairs)."""
    out = Path(out)
    rows, refits = _read(out / "barriers.csv"), _read(out / "refit.csv")
    configs = [("wm", "none", "naive"), ("wm", "perm", "WM perm"), ("wm", "all", "WM all"),
               ("am", "perm", "AM perm"), ("am", "all", "AM all")]
    lines = []
    for split_name in ("test", "train"):
        lines += [f"**Accuracy barrier, {split_name} rows (points), mean ± std over pairs**", "",
                  "| dataset | acc a, b | " + " | ".join(c[2] for c in configs) + " |",
                  "|---|---|" + "---|" * len(configs)]
        datasets = sorted({r["dataset"] for r in rows})
        per_config = {c: [] for c in configs}
        for dataset in datasets:
            sel = [r for r in rows if r["dataset"] == dataset and r["split"] == split_name]
            accs = [float(r["acc_a"]) for r in sel if r["invariances"] == "none"] + [
                float(r["acc_b"]) for r in sel if r["invariances"] == "none"]
            cells = []
            for method, inv, _ in configs:
                vals = [float(r["barrier"]) for r in sel
                        if r["method"] == method and r["invariances"] == inv]
                per_config[(method, inv, _)].append(np.mean(vals) if vals else np.nan)
                cells.append(_mean_std(vals) if vals else "")
            lines.append(f"| {dataset} | {np.mean(accs):.2f} | " + " | ".join(cells) + " |")
        lines.append("| mean | | " + " | ".join(
            f"{np.nanmean(per_config[c]):.2f}" for c in configs) + " |")
        lines.append("")
    lines += ["**Merging at lambda = 0.5 and refit_leaves on the training rows: test accuracy "
              "(%), mean over pairs**", "",
              "| dataset | mean of a, b | naive merge | naive + refit | WM all merge | "
              "WM all + refit | refit time (s) |", "|---|---|---|---|---|---|---|"]
    for dataset in sorted({r["dataset"] for r in refits}):
        sel = [r for r in refits if r["dataset"] == dataset and r["split"] == "test"]

        def mean(merge, col):
            return np.mean([float(r[col]) for r in sel if r["merge"] == merge])

        ab = np.mean([(float(r["acc_a"]) + float(r["acc_b"])) / 2 for r in sel])
        lines.append(f"| {dataset} | {ab:.2f} | {mean('naive', 'acc_merged'):.2f} | "
                     f"{mean('naive', 'acc_refit'):.2f} | {mean('wm_all', 'acc_merged'):.2f} | "
                     f"{mean('wm_all', 'acc_refit'):.2f} | "
                     f"{mean('wm_all', 'refit_time_s'):.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if report_dir is not None:
        report_dir = Path(report_dir)
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "default_barriers.md").write_text(text)
        for name in ("barriers.csv", "refit.csv"):
            if (out / name).exists():
                shutil.copy(out / name, report_dir / name)
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(TABULAR_BENCHMARK))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--n-eval", type=int, default=2000,
                        help="train and test rows the curves are evaluated on")
    parser.add_argument("--refit-iter", type=int, default=100,
                        help="L-BFGS iterations of refit_leaves (its default is 500)")
    parser.add_argument("--split-init", default=None, choices=["fan_in", "data"],
                        help="the models' split_init (default: the estimator's default)")
    parser.add_argument("--additive-bins", type=additive_bins_arg, default="default",
                        help="the models' additive_bins, an int or 'none' (default: the "
                             "estimator's default)")
    parser.add_argument("--teacher-weight", type=float, default=None,
                        help="the models' teacher_weight (default: the estimator's default)")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="the models' learning_rate (default: the estimator's default)")
    parser.add_argument("--feature-selection", default=None, choices=["auto", "uniform"],
                        help="the models' feature_selection (default: the estimator's "
                             "default)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=None, metavar="DIR")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.report is not None:
        return report(args.out, args.report)
    if args.smoke:
        run(args.out, ["MagicTelescope"], 1, 200, n_train=300, smoke=True)
        return report(args.out)
    run(args.out, args.datasets, args.pairs, args.n_eval, refit_iter=args.refit_iter,
        split_init=args.split_init, additive_bins=args.additive_bins,
        teacher_weight=args.teacher_weight, learning_rate=args.learning_rate,
        feature_selection=args.feature_selection)
    return report(args.out)


if __name__ == "__main__":
    main()

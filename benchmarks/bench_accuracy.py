"""Accuracy of the soft tree ensemble against HistGradientBoosting on raw tabular data.

Three tables, one CSV each under ``--out`` (default ``benchmarks/results/accuracy/``), one
row per (dataset, seed, model), appended as soon as it is measured; a rerun skips the rows
already there, so an interrupted run resumes.

**Raw classification** (default; ``accuracy_raw.csv``). The seven Tabular-Benchmark datasets
(``sktree_lmc.datasets.TABULAR_BENCHMARK``, binary, numeric features), 10,000 train and 10,000
test rows (halves of a dataset with fewer than 20,000 rows), split stratified by class with
``train_test_split(random_state=s)``; seeds s = 0, 1, 2 (seed s: split seed s and
``random_state=s``). Every model sees the RAW features (no preprocessing) except ``paper``,
which gets the paper's preprocessing (``make_paper_preprocessor``: normal quantile transform +
standardization, fitted on the training rows inside a pipeline, so its fit time counts).
Models (``CLASSIFIERS``; ``--models`` selects):

* ``hgb``: ``HistGradientBoostingClassifier(random_state=s)``, scikit-learn's defaults (at
  most 100 iterations, learning rate 0.1, 31 leaves, 255 bins; ``early_stopping="auto"``
  stops early only above 10,000 training rows, so never here);
* ``mlp``: ``make_pipeline(StandardScaler(), MLPClassifier(random_state=s,
  early_stopping=True))``: one hidden layer of 100 ReLU units, Adam at 1e-3, batch 200, L2
  1e-4, at most 200 epochs, stopping when the accuracy on a 10 % validation split has not
  improved by 1e-4 for 10 epochs;
* ``paper``: ``SoftTreeEnsembleClassifier(arch="oblivious", depth=2, max_epochs=50,
  early_stopping=False, numeric_encoding="none", lr_schedule="constant", averaging=None,
  max_features=None)`` on the paper preprocessing (the paper's protocol, M = 256, lr 1e-2,
  batch 512);
* ``default``: ``SoftTreeEnsembleClassifier(random_state=s, device="cpu")``, the package's
  defaults, with ``additive_bins=(16, 64, 256, 1024, 4096)`` (measured at commit 3af2e90);
* ``ab256``: the default before, ``additive_bins=(16, 64, 256)`` (``PREVIOUS_ADDITIVE_BINS``);
  its rows were measured as ``default`` then. ``no_teacher``, ``members8``, ``lr1e-2``,
  ``lr2e-2``, ``lr5e-2`` and the configurations below keep these bins. ``teacher0.5``: the
  default with ``teacher_weight=0.5``, screened with the finer bins and not kept;
* ``no_teacher``: the default without the teacher (``teacher_weight=0``), the default before
  it; its rows were measured as ``default`` then (and, before ``additive_bins=(16, 64, 256)``
  was the default, as ``additive_multi``). The variants below that were measured before the
  teacher pass ``teacher_weight=0`` explicitly;
* ``additive64``: the no-teacher default with one resolution of the additive term,
  ``additive_bins=64``, the default before; its rows were measured as ``default`` then (and
  before that as ``additive``);
* ``no_additive``: the default without the additive term (``additive_bins=None``), the
  default before ``additive_bins=64``; rows measured then as ``default`` are labelled
  ``no_additive``;
* ablations of ``no_additive`` changing one parameter (measured when it was the default):
  ``enc_none`` (numeric_encoding="none"), ``enc_standard`` ("standard"), ``enc_ple``
  ("piecewise_linear", the default before version 0.2; rows measured then as ``default`` are
  labelled ``enc_ple``), ``lr_constant`` (lr_schedule="constant"), ``no_averaging``
  (averaging=None), ``all_features`` (max_features=None), ``depth2`` (depth=2),
  ``init_data`` (split_init="data": half of the splits start as sharp thresholds on the
  data);
* variants of ``no_teacher`` changing one parameter, tried and not kept: ``label_smoothing``
  (label_smoothing=0.1) and ``init_data_additive`` (split_init="data");
* the gradient-boosted start, an option and not the default (its models merge badly;
  ``docs/benchmarks_archive.md``): ``boosting`` (split_init="boosting", max_features=None, no
  teacher) and ``boosting_depth6`` (the same at depth=6).

A config whose construction raises ``TypeError`` (a parameter the installed estimator does
not have yet) is reported as skipped, and the run goes on.

**Mixed data** (``--mixed``; ``accuracy_mixed.csv``). The same datasets, splits and seeds,
made mixed before splitting: the first two columns, in file order, with at least 50 distinct
values become categorical -- the first quantile-binned into 10 categories, the second into
30 (``pd.qcut`` on all rows; fewer when ties merge quantiles), labelled ``"c0"``, ``"c1"``, ...
with pandas dtype ``category`` -- then 10 % of all feature cells (numeric and categorical,
exactly ``round(0.1 * rows * columns)`` cells drawn without replacement with
``numpy.random.default_rng(0)``) are set missing. A pandas DataFrame goes to the models
unchanged: ``hgb_cat`` = ``HistGradientBoostingClassifier(categorical_features="from_dtype",
random_state=s)``, ``default`` (the soft tree ensemble, no preprocessing), ``additive64``,
``no_teacher``, ``no_additive``, ``enc_ple`` and ``init_data`` (as above).

**Regression** (``--regression``; ``regression.csv``), R^2 on the test rows, seeds 0, 1, 2
(random, unstratified splits, 10,000/10,000 rows or halves):

* ``diabetes``: scikit-learn's ``load_diabetes`` (442 rows, 10 features), split in halves;
* ``california/MedInc``: median income from the other 7 columns of ``california``;
* ``electricity/nswdemand``: NSW demand from the other 6 columns of ``electricity``;
* ``Diabetes130US/num_medications``: number of medications from the other 6 columns.

(the classification column ``target`` is dropped). Models: ``hgb`` =
``HistGradientBoostingRegressor(random_state=s)``, ``default`` =
``SoftTreeEnsembleRegressor(random_state=s, device="cpu")`` on raw features, ``paper`` = the
regressor with the ``paper`` settings above on the paper preprocessing, ``teacher`` = the
default regressor with ``teacher_weight=0.75`` (the regressor's default stays 0: the teacher
did not gain in regression).

Per row: test and train score (accuracy in %, or R^2), fit CPU seconds (``time.process_time``
around ``fit``, torch at 1 thread, BLAS/OpenMP limited to 1 thread with
``threadpoolctl.threadpool_limits(1)``; run with ``OMP_NUM_THREADS=1``), fit wall seconds,
prediction rows/s (``predict_proba``, or ``predict`` for regression, on the test rows, wall
clock), the epochs run (``n_epochs_``) or iterations (``n_iter_``) where the model has them,
and the git commit of the checkout.

Run from the repository root::

    python -m benchmarks.bench_accuracy --models hgb mlp
    python -m benchmarks.bench_accuracy --mixed --models hgb_cat
    python -m benchmarks.bench_accuracy --regression --models hgb
    python -m benchmarks.bench_accuracy --report benchmarks/results/accuracy/report
    python -m benchmarks.bench_accuracy --smoke     # seconds, for the tests

``--report DIR`` only reads the CSVs and writes Markdown tables (mean ± std over seeds per
dataset, a mean and a median-dataset row, the gap of ``default`` to HGB, fit CPU seconds and a
per-model summary) to stdout and ``DIR/bench_accuracy.md``, and copies the CSVs to ``DIR``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from sktree_lmc.datasets import PAPER_TRAINING

from ._common import frame as _frame
from ._common import hgb as _hgb
from ._common import hgb_cat as _hgb_cat
from ._common import hgb_reg as _hgb_reg
from ._common import mlp as _mlp
from ._common import soft_classifier as _soft_classifier
from ._common import soft_regressor as _soft_regressor

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "accuracy"
SEEDS = (0, 1, 2)
#: Settings given, where the estimator has them, to every model in ``--smoke``.
SMOKE_PARAMS = {"n_estimators": 8, "max_epochs": 2, "max_iter": 10}
#: The paper protocol's settings of the soft tree ensemble (besides ``random_state``).
PAPER_PARAMS = dict(PAPER_TRAINING, arch="oblivious", depth=2, max_epochs=50, learning_rate=1e-2)


class Config(NamedTuple):
    """A model: ``make(seed)`` returns an unfitted estimator; ``paper`` adds the paper's
    preprocessing in front of it; ``requires`` names parameters the estimator must have (the
    config is skipped otherwise, as when its construction raises TypeError)."""

    make: Callable
    paper: bool = False
    requires: tuple = ()


#: The classifier's default learning rate before 3e-2: the runs measured at it keep their
#: labels and file names (``bench_barriers``' model cache, ``bench_federated``'s CSV), and any
#: other rate is named in them, so runs at different rates never mix.
PREVIOUS_LEARNING_RATE = 1e-2
#: The default ``additive_bins`` before ``(16, 64, 256, 1024, 4096)``: the configurations
#: measured when it was the default keep it explicitly, so that a rerun reproduces their rows.
PREVIOUS_ADDITIVE_BINS = (16, 64, 256)


def bins_tag(bins):
    """``additive_bins`` for file names: ``64``, or ``16-64-256`` for several resolutions."""
    return "-".join(str(b) for b in bins) if isinstance(bins, (tuple, list)) else str(bins)


def additive_bins_arg(text):
    """The ``--additive-bins`` option of the benchmarks: an int, ints separated by commas (one
    table per resolution, e.g. ``16,64,256``), or ``none`` for no additive term; ``default``
    (the option's default, which argparse passes here too) stands for the estimator's."""
    if text in ("default", "none"):
        return None if text == "none" else text
    bins = tuple(int(b) for b in text.split(","))
    return bins[0] if len(bins) == 1 else bins


#: The default before the two finest resolutions (``additive_bins=(16, 64, 256)``); the
#: variants measured when it was the default keep it explicitly.
AB256 = {"additive_bins": PREVIOUS_ADDITIVE_BINS}
#: The default without the teacher (at the learning rate and bins of then), the default before
#: ``teacher_weight=0.75``: the variants measured when it was the default keep it explicitly.
NO_TEACHER = {**AB256, "teacher_weight": 0.0, "learning_rate": PREVIOUS_LEARNING_RATE}
#: The model without the additive term (and the teacher), the default before
#: ``additive_bins=64``: the ablations below change it by one parameter (they were measured
#: when it was the default).
NO_ADDITIVE = {**NO_TEACHER, "additive_bins": None}

#: Models of the raw classification table; add a line to add a column.
CLASSIFIERS = {
    "hgb": Config(_hgb),
    "mlp": Config(_mlp),
    "paper": Config(_soft_classifier(**PAPER_PARAMS), paper=True),
    "default": Config(_soft_classifier()),
    # the default before the additive term's 1024 and 4096 bins (docs/benchmarks_archive.md, "Finer
    # bins"), and the default with the teacher's weight at 0.5, tried with them, not kept
    "ab256": Config(_soft_classifier(**AB256)),
    "teacher0.5": Config(_soft_classifier(teacher_weight=0.5)),
    "no_teacher": Config(_soft_classifier(**NO_TEACHER)),
    # the default without the teacher, all else the default's (small data, issue 42)
    "teacher_off": Config(_soft_classifier(teacher_weight=0.0)),
    # the trees trained as 8 members, each on its own loss (an option, not the default:
    # docs/benchmarks_archive.md, "Members")
    "members8": Config(_soft_classifier(**AB256, n_members=8)),
    # the learning rate with the teacher: 1e-2 was the default until 3e-2 became it
    "lr1e-2": Config(_soft_classifier(**AB256, learning_rate=PREVIOUS_LEARNING_RATE)),
    "lr2e-2": Config(_soft_classifier(**AB256, learning_rate=2e-2)),
    "lr5e-2": Config(_soft_classifier(**AB256, learning_rate=5e-2)),
    "additive64": Config(_soft_classifier(**{**NO_TEACHER, "additive_bins": 64})),
    "no_additive": Config(_soft_classifier(**NO_ADDITIVE)),
    "enc_none": Config(_soft_classifier(**NO_ADDITIVE, numeric_encoding="none")),
    "enc_standard": Config(_soft_classifier(**NO_ADDITIVE, numeric_encoding="standard")),
    "enc_ple": Config(_soft_classifier(**NO_ADDITIVE, numeric_encoding="piecewise_linear")),
    "lr_constant": Config(_soft_classifier(**NO_ADDITIVE, lr_schedule="constant")),
    "no_averaging": Config(_soft_classifier(**NO_ADDITIVE, averaging=None)),
    "all_features": Config(_soft_classifier(**NO_ADDITIVE, max_features=None)),
    "depth2": Config(_soft_classifier(**NO_ADDITIVE, depth=2)),
    "init_data": Config(_soft_classifier(**NO_ADDITIVE, split_init="data")),
    # variants of the three-resolution default without the teacher, tried and not kept
    # (docs/benchmarks_archive.md)
    "label_smoothing": Config(_soft_classifier(**NO_TEACHER, label_smoothing=0.1)),
    "init_data_additive": Config(_soft_classifier(**NO_TEACHER, split_init="data")),
    # early stopping on and off, whatever the default (the size above which
    # early_stopping="auto" turns it on was chosen with these; docs/benchmarks_archive.md, "Early
    # stopping on small data")
    "es_on": Config(_soft_classifier(early_stopping=True)),
    "es_off": Config(_soft_classifier(early_stopping=False)),
    # a linear warm-up of the learning rate over this fraction of the steps (the first
    # epochs overshot without one; docs/benchmarks_archive.md, "Warm-up")
    "warmup0.005": Config(_soft_classifier(warmup_fraction=0.005)),
    "warmup0.01": Config(_soft_classifier(warmup_fraction=0.01)),
    "warmup0.02": Config(_soft_classifier(warmup_fraction=0.02)),
    "warmup0.05": Config(_soft_classifier(warmup_fraction=0.05)),
    # every tree's columns drawn alike, and the additive term on every column: the default
    # before the teacher-guided draws (docs/benchmarks_archive.md, "Feature selection by the
    # teacher")
    "fs_uniform": Config(_soft_classifier(feature_selection="uniform")),
    # the default with piecewise-linear features for the splits (issue 42: irregular targets)
    "ple": Config(_soft_classifier(numeric_encoding="piecewise_linear")),
    # the default with label smoothing (issue 42: digits' student overfits its 1,347 rows)
    "ls0.05": Config(_soft_classifier(label_smoothing=0.05)),
    # the gradient-boosted start (an option, not the default: its models merge badly)
    "boosting": Config(_soft_classifier(**NO_TEACHER, split_init="boosting",
                                        max_features=None)),
    "boosting_depth6": Config(_soft_classifier(**NO_TEACHER, split_init="boosting",
                                               max_features=None, depth=6)),
}
#: Models of the mixed-data table (they get the DataFrame with categories and missing values).
MIXED = {
    "hgb_cat": Config(_hgb_cat),
    "default": Config(_soft_classifier(), requires=("categorical_features",)),
    "ab256": Config(_soft_classifier(**AB256)),
    "no_teacher": Config(_soft_classifier(**NO_TEACHER)),
    "lr1e-2": Config(_soft_classifier(**AB256, learning_rate=PREVIOUS_LEARNING_RATE),
                     requires=("categorical_features",)),
    "no_additive": Config(_soft_classifier(**NO_ADDITIVE)),
    "enc_ple": Config(_soft_classifier(**NO_ADDITIVE, numeric_encoding="piecewise_linear")),
    "init_data": Config(_soft_classifier(**NO_ADDITIVE, split_init="data")),
    "additive64": Config(_soft_classifier(**{**NO_TEACHER, "additive_bins": 64})),
}
#: Models of the regression table.
REGRESSORS = {
    "hgb": Config(_hgb_reg),
    "default": Config(_soft_regressor()),
    "ab256": Config(_soft_regressor(**AB256)),
    # the classifier's learning rate (3e-2) on the regressor, which keeps 1e-2
    "lr3e-2": Config(_soft_regressor(**AB256, learning_rate=3e-2)),
    "no_additive": Config(_soft_regressor(**NO_ADDITIVE)),
    "enc_ple": Config(_soft_regressor(**NO_ADDITIVE, numeric_encoding="piecewise_linear")),
    "init_data": Config(_soft_regressor(**NO_ADDITIVE, split_init="data")),
    "additive64": Config(_soft_regressor(additive_bins=64)),
    "paper": Config(_soft_regressor(**PAPER_PARAMS), paper=True),
    "teacher": Config(_soft_regressor(**AB256, teacher_weight=0.75),
                      requires=("teacher_weight",)),
    "es_on": Config(_soft_regressor(early_stopping=True)),
    "es_off": Config(_soft_regressor(early_stopping=False)),
}
#: Regression datasets: ``diabetes`` (scikit-learn) and ``<Tabular-Benchmark name>/<column>``.
REGRESSION_DATASETS = ("diabetes", "california/MedInc", "electricity/nswdemand",
                       "Diabetes130US/num_medications")


class Task(NamedTuple):
    name: str
    csv: str
    configs: dict
    reference: str
    metric: str  # "acc" (percent) or "r2"
    title: str


TASKS = {
    "raw": Task("raw", "accuracy_raw.csv", CLASSIFIERS, "hgb", "acc",
                "Raw features: test accuracy (%)"),
    "mixed": Task("mixed", "accuracy_mixed.csv", MIXED, "hgb_cat", "acc",
                  "Mixed data (2 categorical columns, 10 % missing): test accuracy (%)"),
    "regression": Task("regression", "regression.csv", REGRESSORS, "hgb", "r2",
                       "Regression: test R^2"),
}
COLUMNS = ("dataset", "seed", "model", "n_train", "n_test", "n_features", "test_score",
           "train_score", "fit_cpu_s", "fit_wall_s", "predict_rows_per_s", "epochs", "n_iter",
           "commit", "test_log_loss")


# -- data --------------------------------------------------------------------------------------
def default_data_home():
    from .lmc.core import default_data_home as home

    return home()


def make_mixed(X, *, min_distinct=50, bins=(10, 30), missing=0.1, seed=0):
    """``X`` (DataFrame) with two columns made categorical and ``missing`` of its cells NaN."""
    import pandas as pd

    X = X.copy()
    chosen = [c for c in X.columns if X[c].nunique() >= min_distinct][: len(bins)]
    for col, q in zip(chosen, bins):
        codes = pd.qcut(X[col], q, labels=False, duplicates="drop").astype(int).to_numpy()
        X[col] = pd.Categorical.from_codes(codes, [f"c{i}" for i in range(codes.max() + 1)])
    rng = np.random.default_rng(seed)
    n, p = X.shape
    cells = rng.choice(n * p, size=int(round(missing * n * p)), replace=False)
    rows, cols = np.divmod(cells, p)
    for j in range(p):
        X.iloc[rows[cols == j], j] = np.nan
    return X


def load(task, name):
    """Features and target of dataset ``name`` for ``task`` (before splitting)."""
    if task == "regression":
        if name == "diabetes":
            from sklearn.datasets import load_diabetes

            return load_diabetes(return_X_y=True)
        dataset, column = name.split("/")
        frame = _frame(dataset)
        X = frame.drop(columns=[column, "target"]).to_numpy(dtype=np.float64)
        return X, frame[column].to_numpy(dtype=np.float64)
    frame = _frame(name)
    X, y = frame.drop(columns=["target"]), frame["target"].to_numpy()
    if task == "mixed":
        return make_mixed(X), y
    return X.to_numpy(dtype=np.float64), y


def split(X, y, n_train, n_test, seed, stratify):
    """``n_train``/``n_test`` rows, stratified if asked. With fewer rows: halves when
    ``n_train`` is more than half of them, else ``n_train`` rows and the rest for testing
    (a small-data run keeps its size on every dataset)."""
    from sklearn.model_selection import train_test_split

    n = len(y)
    if n < n_train + n_test:
        n_train, n_test = (n // 2, n - n // 2) if n_train > n // 2 else (n_train, n - n_train)
    return train_test_split(X, y, train_size=n_train, test_size=n_test, random_state=seed,
                            stratify=y if stratify else None)


# -- running -------------------------------------------------------------------------------------
def git_commit():
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def build(config, seed, n_train, smoke):
    """The unfitted estimator of ``config`` (raises TypeError for unknown parameters)."""
    est = config.make(seed)
    own = est.get_params(deep=False)
    missing = [p for p in config.requires if p not in own]
    if missing:
        raise TypeError(f"{type(est).__name__} has no parameter {', '.join(missing)}")
    if smoke:
        est.set_params(**{k: v for k, v in SMOKE_PARAMS.items() if k in own})
    if config.paper:
        from sklearn.pipeline import make_pipeline

        from sktree_lmc.datasets import make_paper_preprocessor

        est = make_pipeline(make_paper_preprocessor(n_quantiles=min(1000, n_train)), est)
    return est


def read_rows(path):
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def append_row(path, row, columns=COLUMNS):
    """Append ``row`` to the CSV ``path``, written with the header ``columns`` when new. An
    existing file keeps its own header: the fields it lacks (columns added since, such as
    ``test_log_loss``) are left out of its rows rather than shifting them."""
    from .lmc.core import append_rows

    header = None
    if path.exists():
        with open(path, newline="") as fh:
            header = next(csv.reader(fh), None)
    append_rows(path, [row], header or columns)


def append_json_line(path, record):
    """Print ``record`` as one JSON line and append it to ``path`` (the JSON-lines results of
    ``bench_stream``, ``bench_merge_axis`` and ``bench_refit_tol``)."""
    line = json.dumps(record)
    print(line, flush=True)
    with open(path, "a") as fh:
        fh.write(line + "\n")


def measure(est, X_tr, X_te, y_tr, y_te, metric):
    """Fit ``est`` and return the measured fields of one row."""
    from sklearn.metrics import log_loss, r2_score

    t_cpu, t_wall = time.process_time(), time.perf_counter()
    est.fit(X_tr, y_tr)
    fit_cpu, fit_wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    t0 = time.perf_counter()
    if metric == "acc":
        proba = est.predict_proba(X_te)
        seconds = time.perf_counter() - t0
        pred = np.asarray(est.classes_)[np.argmax(proba, axis=1)]
        test = 100.0 * float(np.mean(pred == y_te))
        train = 100.0 * float(np.mean(est.predict(X_tr) == y_tr))
        loss = round(float(log_loss(y_te, proba, labels=est.classes_)), 5)
    else:
        pred = est.predict(X_te)
        seconds = time.perf_counter() - t0
        test, train = r2_score(y_te, pred), r2_score(y_tr, est.predict(X_tr))
        loss = ""
    final = est[-1] if hasattr(est, "steps") else est
    digits = 3 if metric == "acc" else 5
    return dict(test_score=round(test, digits), train_score=round(train, digits),
                test_log_loss=loss,
                fit_cpu_s=round(fit_cpu, 3), fit_wall_s=round(fit_wall, 3),
                predict_rows_per_s=round(len(y_te) / max(seconds, 1e-9)),
                epochs=getattr(final, "n_epochs_", ""), n_iter=getattr(final, "n_iter_", ""))


def run(task, csv_path, datasets, models, seeds, n_train, n_test, smoke=False):
    """Measure every missing (dataset, seed, model) row; returns ``{model: reason}`` of the
    configs skipped because their construction raised TypeError."""
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    configs = TASKS[task].configs
    skipped = {}
    for name in models:
        try:
            build(configs[name], 0, n_train, smoke)
        except TypeError as exc:
            skipped[name] = f"TypeError: {exc}"
            print(f"skipped {task} {name}: {skipped[name]}", file=sys.stderr, flush=True)
    models = [m for m in models if m not in skipped]
    done = {(r["dataset"], r["seed"], r["model"]) for r in read_rows(csv_path)}
    commit = git_commit()
    warm = False
    for dataset in datasets:
        todo = [(s, m) for s in seeds for m in models if (dataset, str(s), m) not in done]
        if not todo:
            continue
        X, y = load(task, dataset)
        for seed in sorted({s for s, _ in todo}):
            X_tr, X_te, y_tr, y_te = split(X, y, n_train, n_test, seed, task != "regression")
            if not warm:  # one untimed fit per model first (imports, torch's first call)
                for model in models:
                    with threadpool_limits(1), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        build(configs[model], 0, 200, smoke).fit(X_tr[:200], y_tr[:200])
                warm = True
            for model in [m for s, m in todo if s == seed]:
                est = build(configs[model], seed, len(y_tr), smoke)
                with threadpool_limits(1), warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    row = measure(est, X_tr, X_te, y_tr, y_te, TASKS[task].metric)
                row.update(dataset=dataset, seed=seed, model=model, n_train=len(y_tr),
                           n_test=len(y_te), n_features=X_tr.shape[1], commit=commit)
                append_row(csv_path, row)
                print(f"{task} {dataset} seed {seed} {model}: test {row['test_score']} "
                      f"train {row['train_score']} fit {row['fit_cpu_s']:.2f} CPU s "
                      f"predict {row['predict_rows_per_s']:,} rows/s epochs {row['epochs']} "
                      f"n_iter {row['n_iter']}", flush=True)
    return skipped


# -- report ----------------------------------------------------------------------------------------
def _fmt(value, metric):
    return f"{value:.2f}" if metric == "acc" else f"{value:.3f}"


def _pm(values, metric):
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return _fmt(values.mean(), metric)
    return f"{_fmt(values.mean(), metric)} ± {_fmt(values.std(ddof=1), metric)}"


def report_task(task, rows):
    """Markdown tables of one task's CSV rows."""
    spec = TASKS[task]
    metric, ref = spec.metric, spec.reference
    order = {m: i for i, m in enumerate(spec.configs)}
    models = sorted({r["model"] for r in rows}, key=lambda m: (order.get(m, len(order)), m))
    datasets = sorted({r["dataset"] for r in rows})
    # score[model][dataset][seed]
    table = {m: {d: {} for d in datasets} for m in models}
    for r in rows:
        table[r["model"]][r["dataset"]][r["seed"]] = r
    gap_models = [m for m in models if m == "default" and ref in models]

    def values(m, d, field):
        return [float(r[field]) for r in table[m][d].values()]

    def gaps(m, d):
        both = sorted(set(table[m][d]) & set(table[ref][d]))
        return [float(table[m][d][s]["test_score"]) - float(table[ref][d][s]["test_score"])
                for s in both]

    out = [f"### {spec.title}", ""]
    head = ["dataset"] + models + [f"{m} - {ref}" for m in gap_models]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in datasets:
        cells = [d] + [_pm(values(m, d, "test_score"), metric) if table[m][d] else "-"
                       for m in models]
        cells += [_pm(gaps(m, d), metric) if gaps(m, d) else "-" for m in gap_models]
        out.append("| " + " | ".join(cells) + " |")
    # mean over datasets (± std over seeds of the per-seed dataset average), median dataset
    mean_cells, median_cells = ["mean"], ["median dataset"]
    for m in models:
        per_d = [np.mean(values(m, d, "test_score")) for d in datasets if table[m][d]]
        seeds = sorted({s for d in datasets for s in table[m][d]})
        per_seed = [np.mean([float(table[m][d][s]["test_score"]) for d in datasets])
                    for s in seeds if all(s in table[m][d] for d in datasets)]
        partial = "" if len(per_d) == len(datasets) else f" ({len(per_d)}/{len(datasets)} ds)"
        mean_cells.append((_pm(per_seed, metric) if per_seed else _fmt(np.mean(per_d), metric))
                          + partial)
        median_cells.append(_fmt(np.median(per_d), metric) + partial)
    for m in gap_models:
        per_d = [np.mean(gaps(m, d)) for d in datasets if gaps(m, d)]
        mean_cells.append(_fmt(np.mean(per_d), metric) if per_d else "-")
        median_cells.append(_fmt(np.median(per_d), metric) if per_d else "-")
    out += ["| " + " | ".join(mean_cells) + " |", "| " + " | ".join(median_cells) + " |", ""]

    out += [f"Fit CPU seconds (1 thread), mean over seeds ({spec.name}):", ""]
    out += ["| dataset | " + " | ".join(models) + " |", "|" + "---|" * (len(models) + 1)]
    for d in datasets:
        out.append(f"| {d} | " + " | ".join(
            f"{np.mean(values(m, d, 'fit_cpu_s')):.2f}" if table[m][d] else "-"
            for m in models) + " |")
    out.append("")

    score = "acc (%)" if metric == "acc" else "R^2"
    head = ["model", "runs", f"mean test {score}", f"median test {score}",
            f"mean train {score}", f"mean gap to {ref}", f"datasets better/worse than {ref}",
            "mean fit CPU s", "median predict rows/s", "mean epochs", "mean n_iter"]
    out += [f"Summary per model ({spec.name}):", ""]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in models:
        ds = [d for d in datasets if table[m][d]]
        runs = [r for d in ds for r in table[m][d].values()]
        per_d = [np.mean(values(m, d, "test_score")) for d in ds]
        gap_d = [np.mean(gaps(m, d)) for d in ds if ref in table and gaps(m, d)]
        epochs = [float(r["epochs"]) for r in runs if r["epochs"] != ""]
        n_iter = [float(r["n_iter"]) for r in runs if r["n_iter"] != ""]
        cells = [m, str(len(runs)), _fmt(np.mean(per_d), metric), _fmt(np.median(per_d), metric),
                 _fmt(np.mean([np.mean(values(m, d, "train_score")) for d in ds]), metric),
                 _fmt(np.mean(gap_d), metric) if gap_d and m != ref else "-",
                 f"{sum(g > 0 for g in gap_d)}/{sum(g < 0 for g in gap_d)}"
                 if gap_d and m != ref else "-",
                 f"{np.mean([float(r['fit_cpu_s']) for r in runs]):.2f}",
                 f"{np.median([float(r['predict_rows_per_s']) for r in runs]):,.0f}",
                 f"{np.mean(epochs):.1f}" if epochs else "-",
                 f"{np.mean(n_iter):.1f}" if n_iter else "-"]
        out.append("| " + " | ".join(cells) + " |")
    commits = sorted({r["commit"] for r in rows})
    out += ["", f"Rows from commit(s): {', '.join(commits)}.", ""]
    return "\n".join(out)


def report(out, report_dir, smoke=False):
    """Write the tables of every task with a CSV to stdout and ``report_dir``; copy the CSVs."""
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    parts = ["## bench_accuracy", "",
             "Mean ± std over seeds (sample std); `-`: not run. Generated by "
             "`python -m benchmarks.bench_accuracy --report`.", ""]
    for task in TASKS:
        path = Path(out) / csv_name(task, smoke)
        rows = read_rows(path)
        if rows:
            parts.append(report_task(task, rows))
            if path.resolve() != (report_dir / path.name).resolve():
                shutil.copy(path, report_dir / path.name)
    text = "\n".join(parts)
    (report_dir / "bench_accuracy.md").write_text(text)
    print(text)
    return text


def csv_name(task, smoke=False):
    return ("smoke_" if smoke else "") + TASKS[task].csv


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--mixed", action="store_true", help="mixed-data table")
    kind.add_argument("--regression", action="store_true", help="regression table (R^2)")
    parser.add_argument("--models", nargs="+", default=None,
                        help="configs to run (default: all of the table)")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--n-train", type=int, default=10_000)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=None, metavar="DIR",
                        help="only write the Markdown tables (and copies of the CSVs) to DIR")
    parser.add_argument("--smoke", action="store_true",
                        help="seconds: 300/300 rows, one dataset (two for regression), seeds "
                             "0 and 1, tiny models")
    args = parser.parse_args(argv)
    if args.report is not None:
        return report(args.out, args.report, args.smoke)

    import torch

    from sktree_lmc.datasets import TABULAR_BENCHMARK

    torch.set_num_threads(1)
    task = "mixed" if args.mixed else "regression" if args.regression else "raw"
    configs = TASKS[task].configs
    models = args.models or list(configs)
    unknown = [m for m in models if m not in configs]
    if unknown:
        parser.error(f"unknown models for the {task} table: {unknown}; known: {list(configs)}")
    datasets = args.datasets or (list(REGRESSION_DATASETS) if task == "regression"
                                 else sorted(TABULAR_BENCHMARK))
    if args.smoke:
        datasets = args.datasets or (["diabetes", "california/MedInc"] if task == "regression"
                                     else ["MagicTelescope"])
        args.seeds, args.n_train, args.n_test = [0, 1], 300, 300
    args.out.mkdir(parents=True, exist_ok=True)
    return run(task, args.out / csv_name(task, args.smoke), datasets, models, args.seeds,
               args.n_train, args.n_test, smoke=args.smoke)


if __name__ == "__main__":
    main()

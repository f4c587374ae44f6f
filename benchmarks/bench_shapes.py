"""Accuracy of the soft tree ensemble against HistGradientBoosting across data shapes.

``bench_accuracy``'s measurement (issue 42) on data of other shapes: added uninformative
columns, width, more than two classes, and few training rows. One CSV, ``shapes.csv`` under
``--out`` (default ``benchmarks/results/shapes/``), with ``bench_accuracy``'s columns plus
``shape``; one row per (shape, dataset, seed, model), appended as soon as it is measured; a
rerun skips the rows already there, so an interrupted run resumes.

The shapes (``SHAPES``, a table of :class:`Shape`; ``--shapes`` takes kinds or shape names).
"The seven datasets" are the Tabular-Benchmark datasets ``sktree_lmc.datasets.TABULAR_BENCHMARK``
(binary, numeric features). Unless said otherwise a split is ``bench_accuracy.split``: 10,000
train and 10,000 test rows (halves of a dataset with fewer than 20,000 rows), stratified by
class, ``random_state=s``.

* kind ``noise`` (the seven datasets; Grinsztajn et al. 2022, section 5.3): k uninformative
  columns appended to the p real ones BEFORE the split, drawn with
  ``numpy.random.default_rng(0)`` (the same columns for every seed and model):

  - ``noise_0``: the raw data (k = 0; the reference of both kinds below);
  - ``noise_gauss_50``, ``noise_gauss_200``: k columns of i.i.d. standard normal values;
  - ``noise_shuffled_50``, ``noise_shuffled_200``: column ``p + i`` (i = 0 .. k-1) is a copy of
    real column ``i mod p`` (file order) with its rows permuted by its own
    ``rng.permutation(n)``: the marginal distribution of a real column, no link to the target.

* kind ``width`` (dataset ``make_classification``): ``make_classification(20_000,
  n_features=F, n_informative=15, n_redundant=min(10, F - 15), random_state=0)``, split
  10,000/10,000: ``width_20``, ``width_100``, ``width_400``. (F = 20 cannot hold 15 + 10
  informative and redundant columns: it has 15 informative and 5 redundant ones.)

* kind ``classes``:

  - ``digits``: scikit-learn's ``load_digits`` (1,797 rows, 64 features, 10 classes), split
    75/25 stratified (``train_test_split(test_size=0.25, stratify=y, random_state=s)``: 1,347
    train and 450 test rows);
  - ``classes_3``, ``classes_5``, ``classes_10``: a numeric column of a shared dataset binned
    into K quantile classes (``pandas.qcut(column, K, labels=False)`` on all rows) as the
    target, the features being the dataset's other columns (that column and the binary
    ``target`` dropped). The columns (``CLASS_TARGETS``, named ``<dataset>/<column>`` in the
    CSV): ``MagicTelescope/fLength:`` (9 features), ``california/MedInc`` (7 features) and
    ``electricity/nswdemand`` (6 features); each has thousands of distinct values, so every
    K gives exactly K classes of (nearly) equal size.
  - ``classes_discrete``: a discrete column of ``default-of-credit-card-clients`` as the
    target, the features being the other columns (that column and ``target`` dropped), the
    rows of a class with fewer than ``MIN_CLASS_ROWS`` rows dropped (``DISCRETE_TARGETS``:
    the repayment statuses ``x6``, ``x7`` and ``x8``, 5 or 6 classes of very unequal size).
    Unlike the binned columns, the classes are the data's own values.

* kind ``small`` (the seven datasets): ``rows_100``, ``rows_300``, ``rows_1000``: that many
  training rows, the test rows 10,000 (the rest of a dataset with fewer than
  ``n_train + 10,000`` rows: ``split`` keeps ``n_train``).

* kind ``uci`` (real data of other shapes, from files this repository does not ship): copies of
  UCI datasets as CSV files (no header, numeric, the class label last) in the folder named by
  the environment variable ``SKTREE_LMC_UCI_DATA`` (``UCI_FILES``: their names, where they come
  from and their SHA-256, checked on load); split 75/25 stratified as ``digits``. A shape whose
  files are absent has no datasets and is skipped.

  - ``uci_wide``: real data with 165 to 278 columns and 315 to 1,500 training rows
    (``UCI_WIDE``): arrhythmia (binary), musk (v1, binary), semeion (10 classes), mfeat-fac
    and mfeat-pix (10 classes);
  - ``uci_classes``: real multiclass data with 18 to 64 columns (``UCI_CLASSES``): texture
    (11 classes), optdigits (10), segment (7), steel (7), cardio (10) and waveform (3).

Seeds 0, 1, 2 (seed s: split seed s and ``random_state=s``). Models (``MODELS``): ``hgb`` =
``HistGradientBoostingClassifier(random_state=s)``, ``default`` =
``SoftTreeEnsembleClassifier(random_state=s, device="cpu")``, ``mlp`` = ``bench_accuracy``'s
``make_pipeline(StandardScaler(), MLPClassifier(random_state=s, early_stopping=True))``. Every
model sees the raw features.

Per row (``bench_accuracy.measure``): test and train accuracy (%), fit CPU seconds
(``time.process_time`` around ``fit``, torch at 1 thread, BLAS/OpenMP at 1 thread; run with
``OMP_NUM_THREADS=1``), fit wall seconds, prediction rows/s (``predict_proba`` on the test rows),
``n_epochs_``/``n_iter_`` where the model has them, and the git commit.

Run from the repository root::

    python -m benchmarks.bench_shapes --shapes noise width classes small
    python -m benchmarks.bench_shapes --shapes noise_gauss_200 --datasets california --seeds 0
    python -m benchmarks.bench_shapes --report benchmarks/results/shapes/report
    python -m benchmarks.bench_shapes --smoke      # seconds, for the tests

``--datasets`` restricts the Tabular-Benchmark datasets (of ``noise``, ``small`` and, by the
dataset of its column, ``classes_K``); ``make_classification`` and ``digits`` run whenever
their shape is chosen. ``--smoke``: ``MagicTelescope`` only, 300/300 rows (100 training rows
for the small-data shape), seed 0, the tiny models of ``bench_accuracy.SMOKE_PARAMS`` (the MLP
too, at ``max_iter=10``), and the shapes ``SMOKE_SHAPES`` (``noise_gauss_5``,
``noise_shuffled_5``, ``width_20`` on 600 rows, ``digits``, ``classes_3``, ``rows_100``; not
``classes_discrete``, whose dataset is not MagicTelescope); its
CSV is ``smoke_shapes.csv``.

``--report DIR`` only reads the CSV and writes a Markdown table of the mean test accuracy per
(shape, model) (mean over datasets of the mean over seeds), the mean gap of ``default`` to
``hgb`` (over the (dataset, seed) pairs both have) and the mean fit CPU seconds, to stdout and
``DIR/bench_shapes.md``, and copies the CSV to ``DIR``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from ._common import frame as _frame
from ._common import hgb as _hgb
from ._common import mlp as _mlp
from ._common import soft_classifier as _soft_classifier
from ._common import synthetic as _synthetic
from .bench_accuracy import (
    CLASSIFIERS,
    SMOKE_PARAMS,
    Config,
    append_row,
    git_commit,
    measure,
    read_rows,
    split,
)
from .bench_accuracy import (
    COLUMNS as ACCURACY_COLUMNS,
)
from .bench_accuracy import (
    build as _build_config,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "shapes"
SEEDS = (0, 1, 2)
COLUMNS = ("shape",) + tuple(ACCURACY_COLUMNS)
NOISE_SEED = 0
#: Numeric columns made multiclass targets by quantile bins (``classes_K``).
CLASS_TARGETS = ("MagicTelescope/fLength:", "california/MedInc", "electricity/nswdemand")
#: Discrete columns made multiclass targets as they are (``classes_discrete``).
DISCRETE_TARGETS = ("default-of-credit-card-clients/x6", "default-of-credit-card-clients/x7",
                    "default-of-credit-card-clients/x8")
#: Fewest rows a class of ``classes_discrete`` keeps (rarer classes' rows are dropped).
MIN_CLASS_ROWS = 100
KINDS = ("noise", "width", "classes", "small", "uci")
#: The folder of the ``uci`` shapes' files.
UCI_ENV = "SKTREE_LMC_UCI_DATA"
#: The ``uci`` datasets: name -> (file, the first 16 hex digits of its SHA-256). The files are
#: those of the GitHub repository ``Shihab-Shahriar/UCI_Dataset`` at commit ``82bf791a``
#: (copies of UCI Machine Learning Repository datasets; ``mfeat.csv`` there is mfeat-pix).
UCI_FILES = {
    "arrhythmia": ("arrhythmia.csv", "d827e15b743a31db"),
    "musk": ("musk.csv", "27cfd277231dfe29"),
    "semeion": ("semeion.csv", "7ae898aeb35b0c2f"),
    "mfeat-fac": ("mfeat-fac.csv", "9d59f7a50c3f315d"),
    "mfeat-pix": ("mfeat.csv", "2693719ffc06a2cd"),
    "texture": ("texture.csv", "887efdc535cd684a"),
    "optdigits": ("optdigits.csv", "b645dfc0c676759f"),
    "segment": ("segment.csv", "e9c90b4bce5d1ad5"),
    "steel": ("steel.csv", "42c4824012dfd453"),
    "cardio": ("Cardio.csv", "421db6c5735c59d1"),
    "waveform": ("waveform.csv", "8e423d3c0f7693ab"),
}
#: The wide ones (hundreds of columns) and the multiclass ones of fewer columns.
UCI_WIDE = ("arrhythmia", "musk", "semeion", "mfeat-fac", "mfeat-pix")
UCI_CLASSES = ("texture", "optdigits", "segment", "steel", "cardio", "waveform")

MODELS = {
    "hgb": Config(_hgb),
    "default": Config(_soft_classifier()),
    "mlp": Config(_mlp),
    # variants of the default, as bench_accuracy defines them: every tree's columns drawn
    # alike (the default before feature_selection="auto"), piecewise-linear features for the
    # splits, label smoothing, no teacher (issue 42)
    **{name: CLASSIFIERS[name] for name in ("fs_uniform", "ple", "ls0.05", "teacher_off")},
}
#: The models of the table (the others are variants run on demand).
TABLE_MODELS = ("hgb", "default", "mlp")


def _tabular():
    from sktree_lmc.datasets import TABULAR_BENCHMARK

    return tuple(sorted(TABULAR_BENCHMARK))


# -- data builders -------------------------------------------------------------------------------
def _raw(name):
    frame = _frame(name)
    return frame.drop(columns=["target"]).to_numpy(dtype=np.float64), frame["target"].to_numpy()


def add_gaussian_columns(X, k, seed=NOISE_SEED):
    """``X`` with ``k`` columns of i.i.d. standard normal values appended."""
    rng = np.random.default_rng(seed)
    return np.hstack([X, rng.standard_normal((X.shape[0], k))])


def add_shuffled_columns(X, k, seed=NOISE_SEED):
    """``X`` with ``k`` columns appended: column ``p + i`` is real column ``i mod p`` with its
    rows permuted (each by its own permutation)."""
    rng = np.random.default_rng(seed)
    n, p = X.shape
    extra = np.empty((n, k))
    for i in range(k):
        extra[:, i] = X[rng.permutation(n), i % p]
    return np.hstack([X, extra])


def quantile_target(name, n_classes):
    """Dataset ``<dataset>/<column>``: the other columns (no ``target``) and ``column`` binned
    into ``n_classes`` quantile classes."""
    import pandas as pd

    dataset, column = name.split("/")
    frame = _frame(dataset)
    y = pd.qcut(frame[column], n_classes, labels=False).to_numpy()
    return frame.drop(columns=[column, "target"]).to_numpy(dtype=np.float64), y


def discrete_target(name, min_rows=MIN_CLASS_ROWS):
    """Dataset ``<dataset>/<column>``: the other columns (no ``target``) and ``column`` as the
    target, the rows of its values held by fewer than ``min_rows`` rows dropped."""
    dataset, column = name.split("/")
    frame = _frame(dataset)
    y = frame[column].to_numpy()
    values, counts = np.unique(y, return_counts=True)
    keep = np.isin(y, values[counts >= min_rows])
    X = frame.drop(columns=[column, "target"]).to_numpy(dtype=np.float64)
    return X[keep], y[keep]


def _digits():
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def _uci_folder():
    folder = os.environ.get(UCI_ENV)
    return Path(folder) if folder else None


def uci_available(names):
    """The datasets of ``names`` whose file is in the ``SKTREE_LMC_UCI_DATA`` folder."""
    folder = _uci_folder()
    return tuple(n for n in names if folder is not None and (folder / UCI_FILES[n][0]).is_file())


def uci_dataset(name):
    """``(X, y)`` of the ``uci`` dataset ``name``: its file's columns, the last one (the
    class) as integers. Raises ValueError when the file's SHA-256 is not the one the
    benchmark's numbers were measured on."""
    folder = _uci_folder()
    if folder is None:
        raise ValueError(f"the uci shapes read their files from ${UCI_ENV}, which is not set")
    file, digest = UCI_FILES[name]
    data = (folder / file).read_bytes()
    found = hashlib.sha256(data).hexdigest()[:16]
    if found != digest:
        raise ValueError(f"{folder / file} is not the file the benchmark expects: SHA-256 "
                         f"{found}..., expected {digest}...")
    table = np.loadtxt(io.BytesIO(data), delimiter=",", ndmin=2)
    return table[:, :-1], table[:, -1].astype(np.int64)


class Shape(NamedTuple):
    """One shape: ``load(dataset)`` returns ``(X, y)`` before the split; ``datasets()`` names
    the datasets; the split is ``split(X, y, n_train, n_test, ...)``, or a stratified
    ``test_fraction`` of the rows when it is set; ``tabular``: ``--datasets`` filters them."""

    kind: str
    load: Callable
    datasets: Callable
    n_train: int = 10_000
    n_test: int = 10_000
    test_fraction: float | None = None
    tabular: bool = True


def _noise_shape(adder, k):
    def load(dataset):
        X, y = _raw(dataset)
        return adder(X, k), y
    return Shape("noise", load, _tabular)


def _shapes(noise=(50, 200), widths=(20, 100, 400), n_classes=(3, 5, 10),
            rows=(100, 300, 1000), width_samples=20_000, n_test=10_000, discrete=True,
            uci=True):
    shapes = {}
    if 0 in noise or not noise:
        shapes["noise_0"] = Shape("noise", _raw, _tabular)
    for k in [k for k in noise if k]:
        shapes[f"noise_gauss_{k}"] = _noise_shape(add_gaussian_columns, k)
    for k in [k for k in noise if k]:
        shapes[f"noise_shuffled_{k}"] = _noise_shape(add_shuffled_columns, k)
    for f in widths:
        shapes[f"width_{f}"] = Shape(
            "width", lambda d, f=f: _synthetic(f, width_samples),
            lambda: ("make_classification",), width_samples // 2, width_samples // 2,
            tabular=False)
    shapes["digits"] = Shape("classes", lambda d: _digits(), lambda: ("digits",),
                             test_fraction=0.25, tabular=False)
    for c in n_classes:
        shapes[f"classes_{c}"] = Shape("classes", lambda d, c=c: quantile_target(d, c),
                                       lambda: CLASS_TARGETS)
    if discrete:
        shapes["classes_discrete"] = Shape("classes", discrete_target,
                                           lambda: DISCRETE_TARGETS)
    for r in rows:
        shapes[f"rows_{r}"] = Shape("small", _raw, _tabular, r, n_test)
    if uci:
        for name, names in (("uci_wide", UCI_WIDE), ("uci_classes", UCI_CLASSES)):
            shapes[name] = Shape("uci", uci_dataset, lambda names=names: uci_available(names),
                                 test_fraction=0.25, tabular=False)
    return shapes


#: The shapes of the benchmark, in report order.
SHAPES = _shapes(noise=(0, 50, 200))
#: The shapes of ``--smoke``: small sizes, one or two of each kind (split 300/300 there).
SMOKE_SHAPES = _shapes(noise=(5,), widths=(20,), n_classes=(3,), rows=(100,),
                       width_samples=600, n_test=300, discrete=False, uci=False)


def _split(shape, X, y, seed, smoke):
    from sklearn.model_selection import train_test_split

    if smoke and shape.kind != "small":
        return split(X, y, 300, 300, seed, True)
    if shape.test_fraction is not None:
        return train_test_split(X, y, test_size=shape.test_fraction, random_state=seed,
                                stratify=y)
    return split(X, y, shape.n_train, shape.n_test, seed, True)


def _selected_datasets(shape, datasets):
    names = shape.datasets()
    if datasets is None or not shape.tabular:
        return list(names)
    return [d for d in names if d in datasets or d.split("/")[0] in datasets]


# -- running -------------------------------------------------------------------------------------
def build(model, seed, n_train, smoke):
    """The unfitted estimator of ``model``; in smoke mode ``SMOKE_PARAMS`` reach the last step
    of a pipeline too."""
    est = _build_config(MODELS[model], seed, n_train, smoke)
    if smoke and hasattr(est, "steps"):
        own = est[-1].get_params(deep=False)
        est[-1].set_params(**{k: v for k, v in SMOKE_PARAMS.items() if k in own})
    return est


def run(csv_path, shapes, models, seeds, datasets=None, smoke=False):
    """Measure every missing (shape, dataset, seed, model) row of ``shapes`` (a dict of
    :class:`Shape`); returns the number of rows appended."""
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    done = {(r["shape"], r["dataset"], r["seed"], r["model"]) for r in read_rows(csv_path)}
    commit = git_commit()
    warm, appended = False, 0
    for shape_name, shape in shapes.items():
        names = _selected_datasets(shape, datasets)
        if not names:
            print(f"{shape_name}: no datasets" + (f" (no files in ${UCI_ENV})"
                  if shape.kind == "uci" else "") + "; skipped", file=sys.stderr)
        for dataset in names:
            todo = [(s, m) for s in seeds for m in models
                    if (shape_name, dataset, str(s), m) not in done]
            if not todo:
                continue
            X, y = shape.load(dataset)
            for seed in sorted({s for s, _ in todo}):
                X_tr, X_te, y_tr, y_te = _split(shape, X, y, seed, smoke)
                if not warm:  # one untimed fit per model first (imports, torch's first call)
                    for model in models:
                        with threadpool_limits(1), warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            build(model, 0, 100, smoke).fit(X_tr[:100], y_tr[:100])
                    warm = True
                for model in [m for s, m in todo if s == seed]:
                    est = build(model, seed, len(y_tr), smoke)
                    with threadpool_limits(1), warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        row = measure(est, X_tr, X_te, y_tr, y_te, "acc")
                    row.update(shape=shape_name, dataset=dataset, seed=seed, model=model,
                               n_train=len(y_tr), n_test=len(y_te), n_features=X_tr.shape[1],
                               commit=commit)
                    append_row(csv_path, row, COLUMNS)
                    appended += 1
                    print(f"{shape_name} {dataset} seed {seed} {model}: test "
                          f"{row['test_score']} train {row['train_score']} fit "
                          f"{row['fit_cpu_s']:.2f} CPU s predict "
                          f"{row['predict_rows_per_s']:,} rows/s epochs {row['epochs']} "
                          f"n_iter {row['n_iter']}", flush=True)
    return appended


# -- report ----------------------------------------------------------------------------------------
def report_rows(rows, order=()):
    """The Markdown table of the CSV rows ``rows``."""
    rank = {s: i for i, s in enumerate(order)}
    shapes = sorted({r["shape"] for r in rows}, key=lambda s: (rank.get(s, len(rank)), s))
    known = list(MODELS)
    models = sorted({r["model"] for r in rows},
                    key=lambda m: (known.index(m) if m in known else len(known), m))
    # acc[shape][model][(dataset, seed)]
    acc = {s: {m: {} for m in models} for s in shapes}
    fit = {s: {m: [] for m in models} for s in shapes}
    for r in rows:
        acc[r["shape"]][r["model"]][(r["dataset"], r["seed"])] = float(r["test_score"])
        fit[r["shape"]][r["model"]].append(float(r["fit_cpu_s"]))

    def mean_acc(s, m):
        by_d = {}
        for (d, _), v in acc[s][m].items():
            by_d.setdefault(d, []).append(v)
        return np.mean([np.mean(v) for v in by_d.values()]) if by_d else None

    gap = "default" in models and "hgb" in models
    head = ["shape", "datasets"] + models + (["default - hgb"] if gap else [])
    head += [f"fit CPU s {m}" for m in models]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in shapes:
        n_d = len({d for m in models for d, _ in acc[s][m]})
        cells = [s, str(n_d)]
        cells += [f"{mean_acc(s, m):.2f}" if acc[s][m] else "-" for m in models]
        if gap:
            both = set(acc[s]["default"]) & set(acc[s]["hgb"])
            diffs = [acc[s]["default"][k] - acc[s]["hgb"][k] for k in both]
            cells.append(f"{np.mean(diffs):+.2f}" if diffs else "-")
        cells += [f"{np.mean(fit[s][m]):.2f}" if fit[s][m] else "-" for m in models]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def report(out, report_dir, smoke=False):
    """Write the table to stdout and ``report_dir/bench_shapes.md``; copy the CSV there."""
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    path = Path(out) / csv_name(smoke)
    rows = read_rows(path)
    parts = ["## bench_shapes", "",
             "Mean test accuracy (%) per shape and model: mean over datasets of the mean over "
             "seeds; `default - hgb`: mean over the (dataset, seed) pairs both ran; fit CPU "
             "seconds at 1 thread, mean over rows; `-`: not run. Generated by "
             "`python -m benchmarks.bench_shapes --report`.", ""]
    if rows:
        parts.append(report_rows(rows, SMOKE_SHAPES if smoke else SHAPES))
        commits = sorted({r["commit"] for r in rows})
        parts += ["", f"Rows from commit(s): {', '.join(commits)}.", ""]
        if path.resolve() != (report_dir / path.name).resolve():
            shutil.copy(path, report_dir / path.name)
    else:
        parts.append(f"No rows in {path}.")
    text = "\n".join(parts)
    (report_dir / "bench_shapes.md").write_text(text)
    print(text)
    return text


def csv_name(smoke=False):
    return ("smoke_" if smoke else "") + "shapes.csv"


def select_shapes(names, table):
    """The shapes of ``table`` named in ``names`` (kinds or shape names), in table order."""
    unknown = [n for n in names if n not in KINDS and n not in table]
    if unknown:
        raise ValueError(f"unknown shapes {unknown}; kinds: {list(KINDS)}, "
                         f"shapes: {list(table)}")
    return {k: s for k, s in table.items() if k in names or s.kind in names}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(KINDS),
                        help=f"kinds ({', '.join(KINDS)}) or shape names (default: all)")
    parser.add_argument("--models", nargs="+", default=list(TABLE_MODELS), choices=list(MODELS),
                        help="default: the table's (HGB, the default, the MLP)")
    parser.add_argument("--datasets", nargs="+", default=None,
                        help="Tabular-Benchmark datasets (default: all seven)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=None, metavar="DIR",
                        help="only write the Markdown table (and a copy of the CSV) to DIR")
    parser.add_argument("--smoke", action="store_true",
                        help="seconds: MagicTelescope, 300/300 rows, seed 0, tiny models, "
                             "small shapes")
    args = parser.parse_args(argv)
    if args.report is not None:
        return report(args.out, args.report, args.smoke)

    import torch

    torch.set_num_threads(1)
    table = SMOKE_SHAPES if args.smoke else SHAPES
    try:
        shapes = select_shapes(args.shapes, table)
    except ValueError as exc:
        parser.error(str(exc))
    datasets = args.datasets
    if args.smoke:
        datasets = args.datasets or ["MagicTelescope"]
        if args.seeds == list(SEEDS):
            args.seeds = [0]
    args.out.mkdir(parents=True, exist_ok=True)
    n = run(args.out / csv_name(args.smoke), shapes, args.models, args.seeds, datasets,
            smoke=args.smoke)
    print(f"{n} rows appended to {args.out / csv_name(args.smoke)}", file=sys.stderr)
    return n


if __name__ == "__main__":
    main()

"""Loaders for the Tabular-Benchmark data, the bundled default dataset and the paper's protocol.

The paper ("Linear Mode Connectivity in Differentiable Tree Ensembles", Section 4.1) evaluates on
classification datasets of the Tabular-Benchmark (Grinsztajn et al., 2022): 10,000 rows are sampled
for training and 10,000 for testing (a dataset with fewer than 20,000 rows is split into
halves), and every feature is quantile-transformed to a normal distribution and standardized.
"""

import csv
import difflib
import gzip
import numbers
import os
from importlib import resources
from pathlib import Path
from types import MappingProxyType

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import QuantileTransformer, StandardScaler
from sklearn.utils import Bunch

__all__ = [
    "DATA_ENV_VAR",
    "TABULAR_BENCHMARK",
    "fetch_tabular_benchmark_openml",
    "get_data_home",
    "load_magic_small",
    "load_tabular_benchmark",
    "make_paper_preprocessor",
    "paper_split",
]

#: Environment variable naming the folder that holds ``<name>.csv.gz`` Tabular-Benchmark files.
DATA_ENV_VAR = "SKTREE_LMC_DATA"

#: The Tabular-Benchmark classification datasets (numerical features) this package knows, with
#: their published sizes, OpenML ids and the original class labels of targets 0, 1, ...
TABULAR_BENCHMARK = {
    "Diabetes130US": {
        "n_rows": 71090, "n_features": 7, "openml_id": 45022, "target_names": ("0", "1"),
    },
    "MagicTelescope": {
        "n_rows": 13376, "n_features": 10, "openml_id": 44125, "target_names": ("g", "h"),
    },
    "bank-marketing": {
        "n_rows": 10578, "n_features": 7, "openml_id": 44126, "target_names": ("1", "2"),
    },
    "california": {
        "n_rows": 20634, "n_features": 8, "openml_id": 45028, "target_names": ("0", "1"),
    },
    "default-of-credit-card-clients": {
        "n_rows": 13272, "n_features": 20, "openml_id": 45020, "target_names": ("0", "1"),
    },
    "electricity": {
        "n_rows": 38474, "n_features": 7, "openml_id": 44120, "target_names": ("DOWN", "UP"),
    },
    "eye_movements": {
        "n_rows": 7608, "n_features": 20, "openml_id": 44130, "target_names": ("0", "1"),
    },
}

_MAGIC_SMALL_DESCR = """\
MagicTelescope, small (bundled with sktree_lmc)
----------------------------------------------

A 3,000-row stratified random subsample of the Tabular-Benchmark version of the MAGIC gamma
telescope data (OpenML id 44125, 13,376 rows): 10 numeric features, binary target
(0 = gamma "g", 1 = hadron "h"), 1,500 rows per class. Rows were drawn per class without
replacement with ``numpy.random.default_rng(0)`` and kept in the source's order; the script is in
``sktree_lmc/datasets/data/README.md``.
"""


def _check_name(name):
    if name not in TABULAR_BENCHMARK:
        close = difflib.get_close_matches(str(name), TABULAR_BENCHMARK, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"Unknown Tabular-Benchmark dataset {name!r}.{hint} "
            f"Known datasets: {', '.join(sorted(TABULAR_BENCHMARK))}."
        )
    return TABULAR_BENCHMARK[name]


def _import_pandas():
    try:
        import pandas
    except ImportError as exc:  # pandas is not a runtime dependency
        raise ImportError(
            "as_frame=True needs pandas, which sktree_lmc does not install; "
            "run `pip install pandas` or pass as_frame=False."
        ) from exc
    return pandas


def get_data_home(data_home=None):
    """Return the folder that holds the Tabular-Benchmark ``<name>.csv.gz`` files.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The folder. When None, the environment variable ``SKTREE_LMC_DATA`` names it.

    Returns
    -------
    data_home : pathlib.Path
        The folder, with ``~`` expanded.

    Raises
    ------
    FileNotFoundError
        If neither ``data_home`` nor ``SKTREE_LMC_DATA`` is set, or the folder does not exist.

    Examples
    --------
    >>> import os, tempfile
    >>> from sktree_lmc.datasets import get_data_home
    >>> folder = tempfile.gettempdir()
    >>> get_data_home(folder) == get_data_home(os.path.join(folder, "."))
    True
    """
    if data_home is None:
        data_home = os.environ.get(DATA_ENV_VAR) or None
        if data_home is None:
            raise FileNotFoundError(
                "No folder for the Tabular-Benchmark data: pass data_home=... or set the "
                f"environment variable {DATA_ENV_VAR} to a folder holding <name>.csv.gz files "
                f"(e.g. `export {DATA_ENV_VAR}=../shared/data/tabular_benchmark`). Without the "
                "data, use sktree_lmc.datasets.load_magic_small() (bundled) or "
                "fetch_tabular_benchmark_openml(name) (downloads from OpenML)."
            )
    path = Path(data_home).expanduser().resolve()
    if not path.is_dir():
        raise FileNotFoundError(
            f"The Tabular-Benchmark data folder {str(path)!r} does not exist (from data_home or "
            f"{DATA_ENV_VAR})."
        )
    return path


def _read_csv_gz(source):
    """Read a gzip CSV whose last column is ``target``: (X float64, y int64, feature names)."""
    with gzip.open(source, "rt", newline="") as f:
        header = next(csv.reader(f))
        values = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    if not header or header[-1] != "target":
        raise ValueError(f"{source}: the last column must be 'target', got header {header}.")
    if values.shape[1] != len(header):
        raise ValueError(
            f"{source}: {values.shape[1]} columns of values for {len(header)} names in the header."
        )
    target = values[:, -1]
    if not np.all(np.isfinite(target) & (target == np.round(target)) & (target >= 0)):
        raise ValueError(f"{source}: 'target' must hold integer class labels 0..C-1.")
    return values[:, :-1], target.astype(np.int64), header[:-1]


def _make_bunch(X, y, feature_names, target_names, descr, *, as_frame, return_X_y, **extra):
    frame = None
    if as_frame:
        pd = _import_pandas()
        frame = pd.DataFrame(X, columns=list(feature_names))
        frame["target"] = pd.Series(y, dtype=np.int64)
        X, y = frame[list(feature_names)], frame["target"]
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        feature_names=list(feature_names),
        target_names=np.asarray(target_names),
        DESCR=descr,
        frame=frame,
        **extra,
    )


def load_tabular_benchmark(name, data_home=None, return_X_y=False, as_frame=False):
    """Load a Tabular-Benchmark classification dataset from a local folder.

    Reads ``<data_home>/<name>.csv.gz``: a gzip CSV whose columns are numeric features followed
    by ``target``, integer class labels 0..C-1, as exported by the Tabular-Benchmark.

    Parameters
    ----------
    name : str
        One of the keys of ``TABULAR_BENCHMARK``: ``"Diabetes130US"``, ``"MagicTelescope"``,
        ``"bank-marketing"``, ``"california"``, ``"default-of-credit-card-clients"``,
        ``"electricity"``, ``"eye_movements"``.
    data_home : str or path-like, default=None
        Folder holding the files. When None, the environment variable ``SKTREE_LMC_DATA``
        names it (see :func:`get_data_home`).
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame, ``target`` a Series and ``frame`` a DataFrame
        with both. Needs pandas, which is not a dependency of sktree_lmc.

    Returns
    -------
    data : sklearn.utils.Bunch
        Dictionary-like object with ``data`` (n_samples, n_features) float64, ``target``
        (n_samples,) int64, ``feature_names``, ``target_names`` (the original class labels),
        ``DESCR``, ``frame`` (None unless ``as_frame``) and ``filename``.
    (data, target) : tuple if ``return_X_y`` is True
        ``X`` and ``y``, the arrays (or pandas objects) above.

    Raises
    ------
    ValueError
        If ``name`` is not a known dataset, or the file is not in the expected format.
    FileNotFoundError
        If no data folder is given or set, or the file is missing from it.

    See Also
    --------
    fetch_tabular_benchmark_openml : The same datasets, downloaded from OpenML.
    load_magic_small : A small dataset bundled with the package.

    Examples
    --------
    With ``SKTREE_LMC_DATA`` pointing at the folder of the benchmark files:

    >>> from sktree_lmc.datasets import load_tabular_benchmark
    >>> bunch = load_tabular_benchmark("eye_movements")
    >>> bunch.data.shape, bunch.target.shape
    ((7608, 20), (7608,))
    >>> bunch.target_names.tolist()
    ['0', '1']
    """
    info = _check_name(name)
    if as_frame:
        _import_pandas()
    path = get_data_home(data_home) / f"{name}.csv.gz"
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} not found: the folder given by data_home or {DATA_ENV_VAR} must hold "
            f"{name}.csv.gz."
        )
    X, y, feature_names = _read_csv_gz(path)
    descr = (
        f"{name} (Tabular-Benchmark, Grinsztajn et al. 2022, classification on numerical "
        f"features)\n\nPublished size: {info['n_rows']} rows, {info['n_features']} features; "
        f"OpenML id {info['openml_id']}. Target 0..{len(info['target_names']) - 1} stands for "
        f"the original labels {list(info['target_names'])}.\nRead from {path}.\n"
    )
    return _make_bunch(
        X, y, feature_names, info["target_names"], descr,
        as_frame=as_frame, return_X_y=return_X_y, filename=str(path),
    )


def load_magic_small(return_X_y=False, as_frame=False):
    """Load the small MagicTelescope subsample bundled with the package.

    3,000 rows (1,500 per class) drawn without replacement, per class, from the 13,376 rows of the
    Tabular-Benchmark MagicTelescope data (OpenML id 44125) with ``numpy.random.default_rng(0)``,
    kept in the source's order and byte for byte; ``sktree_lmc/datasets/data/README.md`` holds
    the script. It needs no download and no ``SKTREE_LMC_DATA``, so examples, the
    ``sktree-lmc`` demo and tests can always use it.

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        If True, return pandas objects (see :func:`load_tabular_benchmark`). Needs pandas.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``data`` (3000, 10) float64, ``target`` (3000,) int64 with 0 = gamma ("g") and
        1 = hadron ("h"), ``feature_names``, ``target_names``, ``DESCR``, ``frame`` and
        ``filename`` (the file inside the package).
    (data, target) : tuple if ``return_X_y`` is True
        ``X`` and ``y``, the arrays (or pandas objects) above.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc.datasets import load_magic_small
    >>> X, y = load_magic_small(return_X_y=True)
    >>> X.shape, np.bincount(y)
    ((3000, 10), array([1500, 1500]))
    """
    if as_frame:
        _import_pandas()
    resource = resources.files(__package__) / "data" / "magic_small.csv.gz"
    with resources.as_file(resource) as path:
        X, y, feature_names = _read_csv_gz(path)
    return _make_bunch(
        X, y, feature_names, TABULAR_BENCHMARK["MagicTelescope"]["target_names"],
        _MAGIC_SMALL_DESCR, as_frame=as_frame, return_X_y=return_X_y, filename=str(resource),
    )


def fetch_tabular_benchmark_openml(name, data_home=None, return_X_y=False, as_frame=False):
    """Download a Tabular-Benchmark dataset from OpenML (needs network access).

    Calls :func:`sklearn.datasets.fetch_openml` with the dataset's OpenML id and encodes the
    target as integers 0..C-1 in the sorted order of the original labels (for these datasets the
    same encoding as the Tabular-Benchmark CSV files read by :func:`load_tabular_benchmark`).

    Parameters
    ----------
    name : str
        One of the keys of ``TABULAR_BENCHMARK``.
    data_home : str or path-like, default=None
        Cache folder for the download, as in :func:`sklearn.datasets.fetch_openml` (by default
        scikit-learn's own data folder). This is not the folder of ``SKTREE_LMC_DATA``.
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        If True, return pandas objects. Needs pandas.

    Returns
    -------
    data : sklearn.utils.Bunch
        As for :func:`load_tabular_benchmark`, with ``openml_id`` instead of ``filename`` and
        ``target_names`` the original labels as OpenML gives them.
    (data, target) : tuple if ``return_X_y`` is True
        ``X`` and ``y``, the arrays (or pandas objects) above.

    Examples
    --------
    >>> from sktree_lmc.datasets import fetch_tabular_benchmark_openml
    >>> X, y = fetch_tabular_benchmark_openml("electricity", return_X_y=True)  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (38474, 7)
    """
    from sklearn.datasets import fetch_openml

    info = _check_name(name)
    if as_frame:
        _import_pandas()
    try:
        import pandas  # noqa: F401

        parser = "pandas"
    except ImportError:
        parser = "liac-arff"
    openml = fetch_openml(
        data_id=info["openml_id"], data_home=data_home, as_frame=False, parser=parser
    )
    X = np.asarray(openml.data, dtype=np.float64)
    labels = np.asarray(openml.target)
    if labels.dtype.kind not in "biuf":
        labels = labels.astype(str)
    target_names, y = np.unique(labels, return_inverse=True)
    feature_names = list(openml.feature_names)
    descr = (
        f"{name} (Tabular-Benchmark, Grinsztajn et al. 2022), fetched from OpenML, "
        f"id {info['openml_id']}.\n\n{openml.get('DESCR') or ''}"
    )
    return _make_bunch(
        X, y.astype(np.int64), feature_names, target_names.astype(str), descr,
        as_frame=as_frame, return_X_y=return_X_y, openml_id=info["openml_id"],
    )


def _check_size(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def paper_split(X, y, n_train=10_000, n_test=10_000, random_state=0):
    """Split data into train and test sets as in the paper (Section 4.1).

    Samples ``n_train`` rows for training and ``n_test`` other rows for testing, uniformly at
    random without replacement. A dataset with fewer than ``n_train + n_test`` rows is instead
    shuffled and split into halves (the test half gets the extra row of an odd count). No
    preprocessing is applied: see :func:`make_paper_preprocessor`.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Features (NumPy arrays, pandas objects and lists are accepted, as by
        :func:`sklearn.model_selection.train_test_split`).
    y : array-like of shape (n_samples,)
        Targets.
    n_train : int, default=10_000
        Number of training rows.
    n_test : int, default=10_000
        Number of test rows.
    random_state : int, RandomState instance or None, default=0
        Seed of the sampling.

    Returns
    -------
    X_train, X_test, y_train, y_test : array-like
        The split data, of the input types.

    Examples
    --------
    >>> from sktree_lmc.datasets import load_magic_small, paper_split
    >>> X, y = load_magic_small(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = paper_split(X, y)  # 3,000 < 20,000 rows: halves
    >>> X_train.shape, X_test.shape
    ((1500, 10), (1500, 10))
    >>> X_train, X_test, y_train, y_test = paper_split(X, y, n_train=1000, n_test=500)
    >>> len(y_train), len(y_test)
    (1000, 500)
    """
    n_train = _check_size(n_train, "n_train")
    n_test = _check_size(n_test, "n_test")
    n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
    if n_samples < n_train + n_test:
        if n_samples < 2:
            raise ValueError(f"Cannot split {n_samples} sample(s) into train and test halves.")
        n_train = n_samples // 2
        n_test = n_samples - n_train
    return train_test_split(
        X, y, train_size=n_train, test_size=n_test, random_state=random_state
    )


#: Estimator parameters of the paper's training protocol, besides ``arch``, ``depth``,
#: ``n_estimators``, ``max_epochs`` and ``learning_rate``, which each experiment sets: inputs
#: used as given (the paper preprocesses them outside the estimator, see
#: :func:`make_paper_preprocessor`), uniform initialization of the splits, a constant learning
#: rate, the last weights as the model (no averaging), every feature in every tree and every
#: epoch (no early stopping), no additive term, no teacher. Read-only; pass it as
#: ``SoftTreeEnsembleClassifier(**PAPER_TRAINING, depth=2, max_epochs=50)`` so that a
#: reproduction does not move with the package's defaults.
PAPER_TRAINING = MappingProxyType({
    "numeric_encoding": "none",
    "split_init": "fan_in",
    "lr_schedule": "constant",
    "warmup_fraction": 0.0,
    "averaging": None,
    "max_features": None,
    "early_stopping": False,
    "additive_bins": None,
    "teacher_weight": 0.0,
})


def make_paper_preprocessor(n_quantiles=1000, subsample=10_000, random_state=0):
    """Build the paper's feature preprocessing: normal quantile transform, then standardization.

    The paper "applied quantile transformation to each feature and standardized it to follow a
    normal distribution". This returns an unfitted
    ``Pipeline([("quantile", QuantileTransformer(output_distribution="normal", ...)),
    ("standardize", StandardScaler())])``; fit it on the training data only.

    Parameters
    ----------
    n_quantiles : int, default=1000
        Number of quantiles; scikit-learn lowers it to the number of samples (with a warning)
        when fitted on fewer rows.
    subsample : int, default=10_000
        Maximum number of rows used to estimate the quantiles (the paper's 10,000 training rows
        are all used).
    random_state : int, RandomState instance or None, default=0
        Seed of the subsampling (and of the noise scikit-learn may add).

    Returns
    -------
    preprocessor : sklearn.pipeline.Pipeline
        Unfitted transformer.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc.datasets import load_magic_small, make_paper_preprocessor, paper_split
    >>> X, y = load_magic_small(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = paper_split(X, y)
    >>> pre = make_paper_preprocessor().fit(X_train)
    >>> Z = pre.transform(X_train)
    >>> bool(np.allclose(Z.mean(axis=0), 0) and np.allclose(Z.std(axis=0), 1))
    True
    >>> pre.transform(X_test).shape
    (1500, 10)
    """
    return Pipeline(
        [
            (
                "quantile",
                QuantileTransformer(
                    n_quantiles=n_quantiles,
                    output_distribution="normal",
                    subsample=subsample,
                    random_state=random_state,
                ),
            ),
            ("standardize", StandardScaler()),
        ]
    )

import doctest
import gzip
import re
import sys

import numpy as np
import pytest
import sklearn.datasets
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import QuantileTransformer, StandardScaler
from sklearn.utils import Bunch

import sktree_lmc.datasets as datasets
from sktree_lmc.datasets import (
    DATA_ENV_VAR,
    PAPER_TRAINING,
    TABULAR_BENCHMARK,
    fetch_tabular_benchmark_openml,
    get_data_home,
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

NAMES = sorted(TABULAR_BENCHMARK)


def write_csv_gz(path, header, rows):
    text = "\n".join([",".join(header)] + [",".join(map(str, row)) for row in rows]) + "\n"
    with gzip.open(path, "wt") as f:
        f.write(text)


def read_manifest(folder):
    """{name: (rows, features)} from the data folder's MANIFEST.md table."""
    table = {}
    for line in (folder / "MANIFEST.md").read_text().splitlines():
        m = re.match(r"\|\s*([\w-]+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", line)
        if m:
            table[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return table


# --- the shared Tabular-Benchmark files --------------------------------------------------


def test_table_lists_the_seven_datasets():
    assert NAMES == sorted([
        "Diabetes130US", "MagicTelescope", "bank-marketing", "california",
        "default-of-credit-card-clients", "electricity", "eye_movements",
    ])
    for info in TABULAR_BENCHMARK.values():
        assert set(info) >= {"n_rows", "n_features", "openml_id"}
        assert len(info["target_names"]) == 2


def test_table_matches_manifest(tabular_data_home):
    if not (tabular_data_home / "MANIFEST.md").is_file():
        pytest.skip(f"no MANIFEST.md in {tabular_data_home}")
    manifest = read_manifest(tabular_data_home)
    assert set(manifest) == set(NAMES)
    for name, (rows, feats) in manifest.items():
        assert (TABULAR_BENCHMARK[name]["n_rows"], TABULAR_BENCHMARK[name]["n_features"]) == (
            rows, feats
        )
    text = (tabular_data_home / "MANIFEST.md").read_text()
    for name, info in TABULAR_BENCHMARK.items():
        assert f"{name} {info['openml_id']}" in text


@pytest.mark.parametrize("name", NAMES)
def test_load_tabular_benchmark_shapes(tabular_data_home, name):
    info = TABULAR_BENCHMARK[name]
    bunch = load_tabular_benchmark(name)  # folder from SKTREE_LMC_DATA
    assert isinstance(bunch, Bunch)
    assert bunch.data.shape == (info["n_rows"], info["n_features"])
    assert bunch.data.dtype == np.float64 and np.isfinite(bunch.data).all()
    assert bunch.target.shape == (info["n_rows"],) and bunch.target.dtype == np.int64
    # the published versions are balanced 50/50
    assert np.bincount(bunch.target).tolist() == [info["n_rows"] // 2] * 2
    assert len(bunch.feature_names) == info["n_features"]
    assert list(bunch.target_names) == list(info["target_names"])
    assert bunch.frame is None
    assert name in bunch.DESCR and str(info["openml_id"]) in bunch.DESCR
    assert bunch.filename.endswith(f"{name}.csv.gz")


def test_load_tabular_benchmark_explicit_data_home_and_return_X_y(
    tabular_data_home, monkeypatch
):
    monkeypatch.delenv(DATA_ENV_VAR)
    X, y = load_tabular_benchmark("eye_movements", data_home=tabular_data_home, return_X_y=True)
    bunch = load_tabular_benchmark("eye_movements", data_home=str(tabular_data_home))
    np.testing.assert_array_equal(X, bunch.data)
    np.testing.assert_array_equal(y, bunch.target)


def test_load_tabular_benchmark_as_frame(tabular_data_home):
    pd = pytest.importorskip("pandas")
    bunch = load_tabular_benchmark("bank-marketing", as_frame=True)
    assert isinstance(bunch.data, pd.DataFrame) and isinstance(bunch.target, pd.Series)
    assert list(bunch.frame.columns) == bunch.feature_names + ["target"]
    X, y = load_tabular_benchmark("bank-marketing", return_X_y=True)
    np.testing.assert_array_equal(bunch.data.to_numpy(), X)
    np.testing.assert_array_equal(bunch.target.to_numpy(), y)


def test_magic_small_is_the_documented_subsample(tabular_data_home):
    """Redo the recipe of data/README.md on the full MagicTelescope file."""
    X_full, y_full = load_tabular_benchmark("MagicTelescope", return_X_y=True)
    rng = np.random.default_rng(0)
    take = [
        rng.choice(np.flatnonzero(y_full == c), size=round(3000 * n / len(y_full)), replace=False)
        for c, n in zip(*np.unique(y_full, return_counts=True))
    ]
    rows = np.sort(np.concatenate(take))
    X, y = load_magic_small(return_X_y=True)
    np.testing.assert_array_equal(X, X_full[rows])
    np.testing.assert_array_equal(y, y_full[rows])


@pytest.mark.parametrize(
    "name, expected", [("Diabetes130US", (10_000, 10_000)), ("eye_movements", (3804, 3804))]
)
def test_paper_split_on_benchmark(tabular_data_home, name, expected):
    X, y = load_tabular_benchmark(name, return_X_y=True)
    X_train, X_test, y_train, y_test = paper_split(X, y)
    assert (len(X_train), len(X_test)) == expected
    assert (len(y_train), len(y_test)) == expected


# --- loader behaviour on files made here ----------------------------------------------------


def test_loader_reads_a_folder_of_files(tmp_path, monkeypatch):
    rows = [[0.5, -1, 0], [1.25, 2, 1], [3, 4.5, 1]]
    write_csv_gz(tmp_path / "electricity.csv.gz", ["a", "b", "target"], rows)
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    bunch = load_tabular_benchmark("electricity")
    np.testing.assert_array_equal(bunch.data, [[0.5, -1], [1.25, 2], [3, 4.5]])
    np.testing.assert_array_equal(bunch.target, [0, 1, 1])
    assert bunch.feature_names == ["a", "b"]
    assert list(bunch.target_names) == ["DOWN", "UP"]
    assert get_data_home() == tmp_path.resolve()


def test_unknown_name_raises_with_suggestion(tmp_path):
    with pytest.raises(ValueError, match="Unknown Tabular-Benchmark dataset 'magictelescope'"):
        load_tabular_benchmark("magictelescope", data_home=tmp_path)
    with pytest.raises(ValueError, match="Did you mean 'eye_movements'"):
        load_tabular_benchmark("eye-movements", data_home=tmp_path)
    with pytest.raises(ValueError, match="Known datasets: .*california"):
        load_tabular_benchmark("higgs", data_home=tmp_path)
    with pytest.raises(ValueError, match="Unknown"):
        fetch_tabular_benchmark_openml("higgs")


@pytest.mark.parametrize("value", [None, ""])
def test_missing_data_home_raises(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(DATA_ENV_VAR, value)
    with pytest.raises(FileNotFoundError, match=f"pass data_home=.*{DATA_ENV_VAR}"):
        load_tabular_benchmark("california")
    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR):
        get_data_home()


def test_nonexistent_data_home_raises(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tabular_benchmark("california", data_home=tmp_path / "nowhere")
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tabular_benchmark("california")


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"must hold california\.csv\.gz"):
        load_tabular_benchmark("california", data_home=tmp_path)


@pytest.mark.parametrize(
    "header, rows, match",
    [
        (["a", "label"], [[1, 0]], "last column must be 'target'"),
        (["a", "target"], [[1, 0.5]], "integer class labels"),
        (["a", "target"], [[1, -1]], "integer class labels"),
        (["a", "b", "target"], [[1, 0]], "columns of values"),
    ],
)
def test_malformed_file_raises(tmp_path, header, rows, match):
    write_csv_gz(tmp_path / "california.csv.gz", header, rows)
    with pytest.raises(ValueError, match=match):
        load_tabular_benchmark("california", data_home=tmp_path)


def test_as_frame_without_pandas_raises_clearly(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` fail
    with pytest.raises(ImportError, match="as_frame=True needs pandas"):
        load_magic_small(as_frame=True)
    with pytest.raises(ImportError, match="as_frame=True needs pandas"):
        load_tabular_benchmark("california", data_home=tmp_path, as_frame=True)
    X, y = load_magic_small(return_X_y=True)  # numpy path still works
    assert X.shape == (3000, 10)


def test_fetch_openml_is_called_with_the_id_and_target_is_encoded(monkeypatch):
    calls = []

    def fake_fetch_openml(**kwargs):
        calls.append(kwargs)
        return Bunch(
            data=np.arange(8.0).reshape(4, 2),
            target=np.array(["h", "g", "g", "h"], dtype=object),
            feature_names=["f0", "f1"],
            DESCR="fake",
        )

    monkeypatch.setattr(sklearn.datasets, "fetch_openml", fake_fetch_openml)
    bunch = fetch_tabular_benchmark_openml("MagicTelescope")
    assert calls[0]["data_id"] == 44125
    np.testing.assert_array_equal(bunch.target, [1, 0, 0, 1])
    assert bunch.target.dtype == np.int64 and bunch.data.dtype == np.float64
    assert list(bunch.target_names) == ["g", "h"] and bunch.feature_names == ["f0", "f1"]
    assert bunch.openml_id == 44125
    X, y = fetch_tabular_benchmark_openml("MagicTelescope", return_X_y=True)
    np.testing.assert_array_equal(X, bunch.data)


# --- the bundled dataset ---------------------------------------------------------------------


def test_load_magic_small():
    bunch = load_magic_small()
    assert bunch.data.shape == (3000, 10) and bunch.data.dtype == np.float64
    assert np.isfinite(bunch.data).all()
    assert bunch.target.shape == (3000,) and bunch.target.dtype == np.int64
    assert np.bincount(bunch.target).tolist() == [1500, 1500]
    assert bunch.feature_names[0] == "fLength:" and len(bunch.feature_names) == 10
    assert list(bunch.target_names) == ["g", "h"]
    assert "3,000" in bunch.DESCR and bunch.frame is None
    X, y = load_magic_small(return_X_y=True)
    np.testing.assert_array_equal(X, bunch.data)
    np.testing.assert_array_equal(y, bunch.target)


def test_load_magic_small_as_frame():
    pd = pytest.importorskip("pandas")
    bunch = load_magic_small(as_frame=True)
    assert isinstance(bunch.frame, pd.DataFrame) and bunch.frame.shape == (3000, 11)
    X, y = load_magic_small(return_X_y=True, as_frame=True)
    assert isinstance(X, pd.DataFrame) and isinstance(y, pd.Series) and y.name == "target"


# --- the paper's protocol ---------------------------------------------------------------------


def index_data(n):
    """X holds each row's index, so that splits can be checked for overlap."""
    return np.arange(n).reshape(-1, 1), np.arange(n) % 2


def test_paper_split_large_dataset_samples_train_and_test():
    X, y = index_data(25_000)
    X_train, X_test, y_train, y_test = paper_split(X, y)
    assert X_train.shape == (10_000, 1) and X_test.shape == (10_000, 1)
    assert y_train.shape == (10_000,) and y_test.shape == (10_000,)
    assert not set(X_train[:, 0]) & set(X_test[:, 0])
    np.testing.assert_array_equal(y_train, X_train[:, 0] % 2)  # rows stay aligned
    # deterministic for a seed, different for another
    again = paper_split(X, y)
    np.testing.assert_array_equal(again[0], X_train)
    other = paper_split(X, y, random_state=1)
    assert not np.array_equal(other[0], X_train)


def test_paper_split_exactly_enough_rows_uses_all():
    X, y = index_data(20_000)
    X_train, X_test, _, _ = paper_split(X, y)
    assert len(X_train) == len(X_test) == 10_000
    assert sorted(np.concatenate([X_train[:, 0], X_test[:, 0]])) == list(range(20_000))


@pytest.mark.parametrize(
    "n, expected", [(3000, (1500, 1500)), (19_999, (9999, 10_000)), (7, (3, 4))]
)
def test_paper_split_small_dataset_halves(n, expected):
    X, y = index_data(n)
    X_train, X_test, y_train, y_test = paper_split(X, y)
    assert (len(X_train), len(X_test)) == expected
    assert (len(y_train), len(y_test)) == expected
    assert sorted(np.concatenate([X_train[:, 0], X_test[:, 0]])) == list(range(n))


def test_paper_split_custom_sizes_and_bundled_data():
    X, y = load_magic_small(return_X_y=True)
    assert [len(a) for a in paper_split(X, y, n_train=1000, n_test=500)] == [1000, 500, 1000, 500]
    assert [len(a) for a in paper_split(X, y)] == [1500, 1500, 1500, 1500]


def test_paper_split_keeps_pandas_objects():
    pd = pytest.importorskip("pandas")
    X, y = load_magic_small(return_X_y=True, as_frame=True)
    X_train, X_test, y_train, y_test = paper_split(X, y)
    assert isinstance(X_train, pd.DataFrame) and isinstance(y_test, pd.Series)
    assert (X_train.index == y_train.index).all()


@pytest.mark.parametrize(
    "kwargs", [{"n_train": 0}, {"n_test": -1}, {"n_train": 1.5}, {"n_test": True}]
)
def test_paper_split_rejects_bad_sizes(kwargs):
    X, y = index_data(10)
    with pytest.raises(ValueError, match="must be a positive integer"):
        paper_split(X, y, **kwargs)


def test_paper_split_rejects_one_sample():
    with pytest.raises(ValueError, match="Cannot split 1 sample"):
        paper_split([[0.0]], [0])


def test_make_paper_preprocessor():
    pre = make_paper_preprocessor()
    assert isinstance(pre, Pipeline)
    quantile, scaler = (step for _, step in pre.steps)
    assert isinstance(quantile, QuantileTransformer) and isinstance(scaler, StandardScaler)
    assert quantile.output_distribution == "normal" and quantile.random_state == 0
    assert make_paper_preprocessor(random_state=3).steps[0][1].random_state == 3

    X, y = load_magic_small(return_X_y=True)
    X_train, X_test, _, _ = paper_split(X, y)
    Z = pre.fit(X_train).transform(X_train)
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(Z.std(axis=0), 1, rtol=1e-10)
    # each feature is mapped monotonically
    for j in range(X.shape[1]):
        order = np.argsort(X_train[:, j], kind="stable")
        assert np.all(np.diff(Z[order, j]) >= -1e-12)
    assert pre.transform(X_test).shape == X_test.shape


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_paper_training_trains_as_the_paper(kind):
    """PAPER_TRAINING is read-only, and an estimator given it trains the paper's way: raw
    inputs (identity encoder), every feature in every tree (no zero split weight), every
    epoch (no early stopping), the last weights (no averaging), whatever the defaults."""
    from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor

    with pytest.raises(TypeError):
        PAPER_TRAINING["averaging"] = "ema"
    X, y = load_magic_small(return_X_y=True)
    X, y = X[::10], y[::10]
    est = (SoftTreeEnsembleClassifier if kind == "classifier" else SoftTreeEnsembleRegressor)(
        **PAPER_TRAINING, depth=2, n_estimators=4, max_epochs=3, random_state=0, device="cpu"
    )
    est.fit(X, y if kind == "classifier" else X[:, 0])
    for name, value in PAPER_TRAINING.items():
        assert est.get_params()[name] == value
    assert est.encoder_.is_identity
    assert np.all(est.tree_params_.split_weight != 0)
    assert est.n_epochs_ == 3 and est.validation_loss_curve_ is None


# --- the docstring examples ---------------------------------------------------------------


@pytest.mark.parametrize("name", datasets.__all__)
def test_docstring_examples_run(name, request):
    obj = getattr(datasets, name)
    if not callable(obj):
        return
    assert "Examples\n    --------" in obj.__doc__, f"{name} has no Examples section"
    if name == "load_tabular_benchmark":
        request.getfixturevalue("tabular_data_home")  # its example reads the shared data
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(obj, name, globs={}):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0 and results.attempted > 0

"""``benchmarks/bench_shapes.py`` (accuracy across data shapes) runs end to end on tiny splits,
resumes, reports, and builds its noise columns as documented."""

import csv
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    pytest.importorskip("pandas")
    if not (ROOT / "benchmarks" / "bench_shapes.py").is_file():
        pytest.skip("benchmarks/ is not part of this checkout")
    if str(ROOT) not in sys.path:  # imported as benchmarks.bench_shapes (relative imports)
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.bench_shapes")


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_shapes_smoke_runs_resumes_and_reports(tmp_path, tabular_data_home):
    bench = _module()
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 18
    path = tmp_path / "smoke_shapes.csv"
    rows = _rows(path)
    assert list(rows[0]) == list(bench.COLUMNS) and bench.COLUMNS[0] == "shape"
    # every smoke shape, one dataset each, seed 0, the three models
    assert [r["shape"] for r in rows[::3]] == list(bench.SMOKE_SHAPES)
    assert {r["model"] for r in rows} == {"hgb", "default", "mlp"}
    assert {r["seed"] for r in rows} == {"0"}
    by_shape = {r["shape"]: r for r in rows if r["model"] == "hgb"}
    assert by_shape["noise_gauss_5"]["n_features"] == by_shape["noise_shuffled_5"]["n_features"] \
        == "15"  # MagicTelescope's 10 columns + 5
    assert by_shape["width_20"]["dataset"] == "make_classification"
    assert by_shape["width_20"]["n_features"] == "20"
    assert by_shape["digits"]["n_features"] == "64"
    assert by_shape["classes_3"]["dataset"] == "MagicTelescope/fLength:"
    assert by_shape["classes_3"]["n_features"] == "9"
    assert (by_shape["rows_100"]["n_train"], by_shape["rows_100"]["n_test"]) == ("100", "300")
    assert all((r["n_train"], r["n_test"]) == ("300", "300") for r in rows
               if r["shape"] != "rows_100")
    assert all(0 <= float(r["test_score"]) <= 100 and float(r["predict_rows_per_s"]) > 0
               and float(r["test_log_loss"]) > 0 for r in rows)
    assert all(int(r["epochs"]) <= 2 for r in rows if r["model"] == "default")
    assert all(int(r["n_iter"]) <= 10 for r in rows if r["model"] in ("hgb", "mlp"))
    # a second run finds every row done: nothing is appended
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 0
    assert len(_rows(path)) == len(rows)

    text = bench.main(["--smoke", "--out", str(tmp_path), "--report", str(tmp_path / "rep")])
    assert (tmp_path / "rep" / "bench_shapes.md").read_text() == text
    assert (tmp_path / "rep" / "smoke_shapes.csv").is_file()
    assert "default - hgb" in text
    for shape in bench.SMOKE_SHAPES:
        assert f"| {shape} | " in text


def test_noise_builders_add_exactly_the_requested_columns():
    bench = _module()
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 4)) * [1, 10, 100, 1000]
    X2 = rng.normal(size=(500, 4))
    for k in (0, 3, 9):
        G = bench.add_gaussian_columns(X, k)
        assert G.shape == (500, 4 + k) and np.array_equal(G[:, :4], X)
        # the Gaussian columns depend on the seed only, not on the data (nor on a target)
        assert np.array_equal(G[:, 4:], bench.add_gaussian_columns(X2, k)[:, 4:])
        S = bench.add_shuffled_columns(X, k)
        assert S.shape == (500, 4 + k) and np.array_equal(S[:, :4], X)
        for i in range(k):  # a copy of real column i mod 4, rows permuted
            assert np.array_equal(np.sort(S[:, 4 + i]), np.sort(X[:, i % 4]))
            assert not np.array_equal(S[:, 4 + i], X[:, i % 4])
        # a fixed RNG: the same columns on every call
        assert np.array_equal(S, bench.add_shuffled_columns(X, k))
    G = bench.add_gaussian_columns(X, 2000)[:, 4:]
    assert abs(G.mean()) < 0.01 and abs(G.std() - 1) < 0.01


def test_shape_table_and_data(tabular_data_home):
    bench = _module()
    assert list(bench.SHAPES) == [
        "noise_0", "noise_gauss_50", "noise_gauss_200", "noise_shuffled_50",
        "noise_shuffled_200", "width_20", "width_100", "width_400", "digits", "classes_3",
        "classes_5", "classes_10", "classes_discrete", "rows_100", "rows_300", "rows_1000",
        "uci_wide", "uci_classes"]
    assert list(bench.select_shapes(["small", "digits"], bench.SHAPES)) == [
        "digits", "rows_100", "rows_300", "rows_1000"]
    with pytest.raises(ValueError):
        bench.select_shapes(["nope"], bench.SHAPES)
    X, y = bench.SHAPES["noise_shuffled_200"].load("MagicTelescope")
    assert X.shape == (13376, 210) and len(y) == 13376
    X, y = bench.SHAPES["classes_5"].load("california/MedInc")
    assert X.shape[1] == 7 and np.array_equal(np.unique(y), np.arange(5))
    assert np.bincount(y).min() >= 0.19 * len(y)  # quantile bins: near-equal classes
    # a discrete column as it is: its own values, the classes of fewer than 100 rows dropped
    X, y = bench.SHAPES["classes_discrete"].load("default-of-credit-card-clients/x6")
    values, counts = np.unique(y, return_counts=True)
    assert X.shape == (len(y), 19) and len(values) == 6 and counts.min() >= 100
    assert len(y) < 13272  # rows of the rare values left out


def test_uci_shapes_read_checked_files_and_skip_without_them(tmp_path, monkeypatch):
    bench = _module()
    monkeypatch.delenv(bench.UCI_ENV, raising=False)
    assert bench.SHAPES["uci_wide"].datasets() == ()
    with pytest.raises(ValueError, match=bench.UCI_ENV):
        bench.uci_dataset("musk")
    monkeypatch.setenv(bench.UCI_ENV, str(tmp_path))
    (tmp_path / "musk.csv").write_text("1,2.5,0\n3,4,1\n")
    assert bench.SHAPES["uci_wide"].datasets() == ("musk",)
    with pytest.raises(ValueError, match="not the file the benchmark expects"):
        bench.uci_dataset("musk")
    # a file with the expected digest loads as its columns, the last the class
    import hashlib
    digest = hashlib.sha256(b"1,2.5,0\n3,4,1\n").hexdigest()[:16]
    monkeypatch.setitem(bench.UCI_FILES, "musk", ("musk.csv", digest))
    X, y = bench.uci_dataset("musk")
    assert np.array_equal(X, [[1, 2.5], [3, 4]]) and np.array_equal(y, [0, 1])
    assert y.dtype == np.int64

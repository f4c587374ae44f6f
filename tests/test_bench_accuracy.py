"""``benchmarks/bench_accuracy.py`` (soft trees vs HGB) runs end to end on a tiny split."""

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    pytest.importorskip("pandas")
    path = ROOT / "benchmarks" / "bench_accuracy.py"
    if not path.is_file():
        pytest.skip("benchmarks/ is not part of this checkout")
    if str(ROOT) not in sys.path:  # the script imports benchmarks.lmc.core lazily
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("benchmarks.bench_accuracy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not (mod.default_data_home() / "MagicTelescope.csv.gz").is_file():
        pytest.skip("the Tabular-Benchmark data (SKTREE_LMC_DATA) is not available")
    return mod


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _models(rows):
    return sorted({r["model"] for r in rows})


def test_accuracy_smoke_runs_skips_resumes_and_reports(tmp_path):
    bench = _module()
    models = ["hgb", "default", "enc_none"]  # enc_none: a parameter that may not exist yet
    skipped = bench.main(["--smoke", "--out", str(tmp_path), "--models", *models])
    path = tmp_path / "smoke_accuracy_raw.csv"
    rows = _rows(path)
    # every config either ran on both seeds or was skipped for a missing parameter
    for model in models:
        ran = [r for r in rows if r["model"] == model]
        if model in skipped:
            assert not ran and skipped[model].startswith("TypeError")
        else:
            assert sorted(r["seed"] for r in ran) == ["0", "1"]
    assert "hgb" not in skipped
    hgb = [r for r in rows if r["model"] == "hgb"]
    assert all(50 <= float(r["test_score"]) <= 100 and float(r["fit_cpu_s"]) >= 0
               and float(r["predict_rows_per_s"]) > 0 for r in hgb)
    assert all(0 < float(r["test_log_loss"]) < 5 for r in hgb)
    assert {(r["dataset"], r["n_train"], r["n_test"]) for r in rows} == {
        ("MagicTelescope", "300", "300")}
    if "default" not in skipped:
        assert all(int(r["epochs"]) <= 2 for r in rows if r["model"] == "default")
    # a second run finds every row done: nothing is appended
    bench.main(["--smoke", "--out", str(tmp_path), "--models", *models])
    assert len(_rows(path)) == len(rows)

    bench.main(["--smoke", "--mixed", "--out", str(tmp_path), "--models", "hgb_cat"])
    mixed = _rows(tmp_path / "smoke_accuracy_mixed.csv")
    assert _models(mixed) == ["hgb_cat"] and len(mixed) == 2
    reg_skipped = bench.main(["--smoke", "--regression", "--out", str(tmp_path), "--models",
                              "hgb", "paper"])
    reg = _rows(tmp_path / "smoke_regression.csv")
    assert {r["dataset"] for r in reg} == {"diabetes", "california/MedInc"}
    assert _models(reg) == (["hgb"] if "paper" in reg_skipped else ["hgb", "paper"])
    assert all(float(r["test_score"]) <= 1 and r["test_log_loss"] == "" for r in reg)

    text = bench.main(["--smoke", "--out", str(tmp_path), "--report", str(tmp_path / "rep")])
    assert (tmp_path / "rep" / "bench_accuracy.md").read_text() == text
    assert "| MagicTelescope | " in text and "| median dataset |" in text
    assert "default - hgb" in text or "default" in skipped
    for name in ("smoke_accuracy_raw.csv", "smoke_accuracy_mixed.csv", "smoke_regression.csv"):
        assert (tmp_path / "rep" / name).is_file()


def test_mixed_data_has_two_categorical_columns_and_ten_percent_missing():
    bench = _module()
    X, y = bench.load("mixed", "bank-marketing")
    cats = [c for c in X.columns if str(X[c].dtype) == "category"]
    assert cats == ["V1", "V6"]  # the first two columns with >= 50 distinct values
    assert len(X[cats[0]].cat.categories) == 10 and len(X[cats[1]].cat.categories) <= 30
    assert all(str(c).startswith("c") for c in X[cats[1]].cat.categories)
    assert abs(float(X.isna().to_numpy().mean()) - 0.1) < 1e-4
    X2, _ = bench.load("mixed", "bank-marketing")
    assert X2.isna().equals(X.isna())  # fixed seed


def test_append_row_keeps_an_existing_files_header(tmp_path):
    """A CSV written before a column was added keeps its header and its rows' alignment."""
    bench = _module()
    path = tmp_path / "old.csv"
    old = [c for c in bench.COLUMNS if c != "test_log_loss"]
    path.write_text(",".join(old) + "\n")
    row = {c: str(i) for i, c in enumerate(bench.COLUMNS)}
    bench.append_row(path, row)
    (written,) = _rows(path)
    assert list(written) == old and all(written[c] == row[c] for c in old)
    fresh = tmp_path / "new.csv"
    bench.append_row(fresh, row)
    assert _rows(fresh) == [row]

"""``benchmarks/bench_additive.py`` (the additive-term screen) runs end to end on bundled data."""

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    if not (ROOT / "benchmarks" / "bench_additive.py").is_file():
        pytest.skip("benchmarks/ is not part of this checkout")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks import bench_additive

    return bench_additive


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_smoke_table_and_barriers_resume(tmp_path):
    bench = _module()
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "additive_smoke.csv")
    assert [r["model"] for r in rows] == list(bench.MODELS)
    assert all(0 <= float(r["test"]) <= 100 for r in rows)
    bench.main(["--smoke", "--out", str(tmp_path)])  # resumes: nothing appended
    assert len(_rows(tmp_path / "additive_smoke.csv")) == len(bench.MODELS)
    assert "additive - base" in bench.report(tmp_path / "additive_smoke.csv")
    bench.main(["--smoke", "--barriers", "--models", "base", "additive", "--out", str(tmp_path)])
    rows = _rows(tmp_path / "additive_barriers_smoke.csv")
    assert [r["model"] for r in rows] == ["base", "additive"]
    assert all(r["naive"] and r["wm"] for r in rows)


def test_bin_codes_index_one_table():
    import numpy as np

    bench = _module()
    X = np.column_stack([np.arange(10.0), np.repeat([0.0, 1.0], 5)])
    codes, n = bench.bin_codes(X, X, 4)
    # column 0: 3 inner edges -> 4 bins (0..3); column 1: edges 0, 0.5, 1 -> bins 4..7
    assert n == 8 and codes[:, 0].tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    assert codes[:, 1].tolist() == [5] * 5 + [7] * 5

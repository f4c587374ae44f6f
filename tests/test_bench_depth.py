"""``benchmarks/bench_depth.py`` (the depth sweep) runs end to end on the bundled data."""

import csv
import importlib.util
from pathlib import Path

import pytest


def _module():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_depth.py"
    if not path.is_file():
        pytest.skip("benchmarks/ is not part of this checkout")
    spec = importlib.util.spec_from_file_location("bench_depth", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_depth_sweep_smoke_resumes_and_refits(tmp_path):
    bench = _module()
    bench.main(["--smoke", "--out", str(tmp_path)])
    with open(tmp_path / "depth_sweep.csv") as fh:
        rows = list(csv.DictReader(fh))
    # depths 1 and 7, five curves each; barriers are non-negative
    assert sorted({r["depth"] for r in rows}) == ["1", "7"]
    assert len(rows) == 10 and {r["curve"] for r in rows} == {c for c, _, _ in bench.CURVES}
    assert all(float(r["train_barrier"]) >= 0 and float(r["test_barrier"]) >= 0 for r in rows)
    # a second run finds every row done and the cached models: nothing is appended
    bench.main(["--smoke", "--out", str(tmp_path)])
    with open(tmp_path / "depth_sweep.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 10
    bench.main(["--smoke", "--refit", "--out", str(tmp_path)])
    with open(tmp_path / "depth_refit.csv") as fh:
        refit = list(csv.DictReader(fh))
    assert [(r["depth"], r["split"]) for r in refit] == [("1", "train"), ("1", "test"),
                                                         ("7", "train"), ("7", "test")]
    assert all(float(r["barrier_refit"]) >= 0 for r in refit)

"""Smoke test of benchmarks/bench_barriers.py (barriers of the default model)."""

import pytest


def test_default_barriers_smoke_resumes(tmp_path, tabular_data_home):
    from benchmarks import bench_barriers

    out = tmp_path / "bb"
    bench_barriers.run(out, ["MagicTelescope"], 1, 100, n_train=200, smoke=True)
    rows = bench_barriers._read(out / "barriers.csv")
    # naive once per method, perm and all per method: 5 curves on 2 splits, as 6 x 2 rows
    assert {(r["method"], r["invariances"]) for r in rows} == {
        ("wm", "none"), ("am", "none"), ("wm", "perm"), ("wm", "all"), ("am", "perm"),
        ("am", "all")}
    assert {r["split"] for r in rows} == {"train", "test"}
    refits = bench_barriers._read(out / "refit.csv")
    assert {(r["merge"], r["split"]) for r in refits} == {
        ("wm_all", "train"), ("wm_all", "test"), ("naive", "train"), ("naive", "test")}
    n = len(rows), len(refits)
    bench_barriers.run(out, ["MagicTelescope"], 1, 100, n_train=200, smoke=True)
    assert (len(bench_barriers._read(out / "barriers.csv")),
            len(bench_barriers._read(out / "refit.csv"))) == n  # resumed: nothing new
    text = bench_barriers.report(out, tmp_path / "report")
    assert "WM all + refit" in text and (tmp_path / "report" / "default_barriers.md").exists()
    with pytest.raises(SystemExit):
        bench_barriers.main(["--help"])

"""Smoke test of benchmarks/bench_device.py (the prepared GPU run of issue 43)."""

import json


def test_device_smoke(tmp_path, capsys):
    """A second CPU device name stands in for the GPU: its rows carry the agreement columns
    (one fitted model predicted on both: identical here), and every row reaches the file."""
    from benchmarks import bench_device

    out = tmp_path / "device.jsonl"
    records = bench_device.main(["--smoke", "--devices", "cpu", "cpu:0", "--out", str(out)])
    assert [(r["rows"], r["device"]) for r in records] == [
        (300, "cpu"), (300, "cpu:0"), (600, "cpu:0"), (600, "cpu")]
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    for r in records:
        assert r["fit_s"] > 0 and r["predict_rows_per_s"] > 0 and r["epochs"] == 2
        assert 0 <= r["accuracy"] <= 100
    same = records[1]
    assert same["max_abs_diff_same_model"] == 0.0
    assert same["accuracy_cpu_fit"] == records[0]["accuracy"]
    assert "x the CPU's speed" in capsys.readouterr().out


def test_jobs_put_the_slowest_fit_last():
    from benchmarks.bench_device import _jobs

    assert _jobs([100_000, 10_000], ["cpu", "cuda"]) == [
        (10_000, ["cpu", "cuda"]), (100_000, ["cuda"]), (100_000, ["cpu"])]
    assert _jobs([10_000], ["cuda"]) == [(10_000, ["cuda"])]

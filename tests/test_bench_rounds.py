"""Smoke test of benchmarks/bench_rounds.py (8 IID shards x 10 rounds against the full-data
model; here 2 x 2 on the bundled rows)."""

import argparse
import json


def test_rounds_benchmark_smoke_writes_both_fits_and_resumes(tmp_path, capsys):
    from benchmarks import bench_rounds

    out = tmp_path / "rounds.jsonl"
    bench_rounds.main(["--smoke", "--out", str(out)])
    rows = [json.loads(line) for line in open(out)]
    assert [r["kind"] for r in rows] == ["full", "rounds"]
    full, rounds = rows
    assert rounds["rounds"] == 2 and rounds["teacher"] == "shared"  # teacher="auto" in rounds
    assert all(0 <= r["test"] <= 100 for r in rows)
    assert "| magic_small |" in capsys.readouterr().out
    # a second run resumes: nothing left to measure
    bench_rounds.main(["--smoke", "--out", str(out)])
    assert len(open(out).readlines()) == 2
    config = bench_rounds.config_name(argparse.Namespace(max_epochs=2, teacher=None, teacher_weight=None))
    table = bench_rounds.report(out, config, ["magic_small", "credit"], [0])
    assert f"{rounds['test'] - full['test']:+.2f}" in table
    assert "Not run: credit seed 0." in table

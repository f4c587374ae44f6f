"""Smoke test of benchmarks/bench_sharded_teacher.py (the shared or local sharded teacher)."""

import csv


def test_sharded_teacher_smoke(tabular_data_home, tmp_path, capsys):
    from benchmarks import bench_sharded_teacher

    path = bench_sharded_teacher.main(["--smoke", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(path)))
    assert [r["teacher"] for r in rows] == ["shared", "local"]
    shared, local = rows
    assert int(shared["teacher_bytes"]) > 0 and int(local["teacher_bytes"]) == 0
    assert all(0 <= float(r["merged"]) <= 100 for r in rows)
    # a second run resumes: nothing left to measure
    bench_sharded_teacher.main(["--smoke", "--out", str(tmp_path)])
    assert len(list(csv.DictReader(open(path)))) == 2
    assert "| local |" in capsys.readouterr().out

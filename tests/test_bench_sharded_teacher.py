"""Smoke test of benchmarks/bench_sharded_teacher.py (the shared, averaged or local sharded
teacher)."""

import csv


def test_sharded_teacher_smoke(tabular_data_home, tmp_path, capsys):
    from benchmarks import bench_sharded_teacher

    path = bench_sharded_teacher.main(["--smoke", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(path)))
    assert [r["teacher"] for r in rows] == ["shared", "averaged", "local"]
    shared, averaged, local = rows
    assert int(shared["teacher_bytes"]) > int(averaged["teacher_bytes"]) > 0
    assert int(local["teacher_bytes"]) == 0
    assert all(0 <= float(r["merged"]) <= 100 for r in rows)
    # a second run resumes: nothing left to measure
    bench_sharded_teacher.main(["--smoke", "--out", str(tmp_path)])
    assert len(list(csv.DictReader(open(path)))) == 3
    assert "| local |" in capsys.readouterr().out

"""Smoke test of benchmarks/bench_teacher.py (the compiled teacher against the reference)."""


def test_teacher_smoke(tabular_data_home, capsys):
    from benchmarks import bench_teacher

    results = bench_teacher.main(["--smoke", "--fits"])
    (name,) = [k for k in results if k not in ("load_before", "fits")]
    assert results[name]["same"]  # the same trees, bit for bit
    assert all(results[name][k] > 0 for k in ("reference", "compiled", "hgb"))
    assert results["fits"]["same"]  # the same fits
    assert set(results["fits"]["wall"]) == {(t, n) for t in ("reference", "compiled")
                                            for n in (1, 2)}
    out = capsys.readouterr().out
    assert "teacher growth" in out and "speed-up" in out

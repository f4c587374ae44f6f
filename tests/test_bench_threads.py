"""Smoke test of benchmarks/bench_threads.py (the speed-up of a second thread)."""


def test_threads_smoke(tabular_data_home, capsys):
    from benchmarks import bench_threads

    results = bench_threads.main(["--smoke"])
    (name, res), = results.items()
    assert set(res) == {1, 2}
    for fit_s, rows_per_s in res.values():
        assert fit_s > 0 and rows_per_s > 0
    assert "with 2 (" in capsys.readouterr().out

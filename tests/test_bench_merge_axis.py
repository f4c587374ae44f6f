"""Smoke test of benchmarks/bench_merge_axis.py (the merge axis of a recipe change)."""


def test_merge_axis_smoke(tmp_path, tabular_data_home):
    from benchmarks import bench_merge_axis

    records = bench_merge_axis.main(["--smoke", "--out", str(tmp_path / "m.jsonl")])
    assert [r["variant"] for r in records] == ["prev", "auto_w0"]
    for r in records:
        assert 40 <= r["wm2"] <= 100 and 40 <= r["merge4"] <= 100
        assert len(r["site_epochs"]) == 4 and len(r["full"]) == 2
    # 150 training rows per site: "auto" trains without early stopping, all epochs
    assert records[1]["site_epochs"] == [2, 2, 2, 2]

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


def test_merge_axis_seed_moves_the_split_and_the_models(tabular_data_home):
    from benchmarks import bench_merge_axis

    extra = {"n_estimators": 4, "max_epochs": 1}
    zero = bench_merge_axis.measure("MagicTelescope", "auto_w0", 300, extra)
    again = bench_merge_axis.measure("MagicTelescope", "auto_w0", 300, extra, seed=0)
    one = bench_merge_axis.measure("MagicTelescope", "auto_w0", 300, extra, seed=1)
    assert zero == again and "seed" not in zero  # seed 0: the records as they always were
    assert one["seed"] == 1 and one["full"] != zero["full"]

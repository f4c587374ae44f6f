"""Smoke test of benchmarks/bench_stream.py (partial_fit on a stream against one fit)."""


def test_stream_smoke(tmp_path, tabular_data_home):
    from benchmarks import bench_stream

    records = bench_stream.main(["--smoke", "--out", str(tmp_path / "stream.jsonl")])
    assert [r["policy"] for r in records] == ["one fit", "partial_fit learning_rate=0.03"]
    stream = records[1]
    assert len(stream["accuracy"]) == 2 and stream["epochs"] == 2 * 10
    assert all(40 <= a <= 100 for r in records for a in r["accuracy"])
    assert (tmp_path / "stream.jsonl").read_text().count("\n") == 2

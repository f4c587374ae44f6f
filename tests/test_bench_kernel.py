"""Smoke test of benchmarks/bench_kernel.py (the fused kernel against the torch path)."""

import pytest

pytest.importorskip("numba")


def test_kernel_bench_smoke(tabular_data_home, capsys):
    from benchmarks import bench_kernel

    results = bench_kernel.main(["--smoke"])
    step = results["step"]
    assert set(step["seconds"]) == {"torch", "numba", "numba_2_threads"}
    assert step["flops"] > 0 and step["matmul_gflops"] > 0
    (name, fits), = results["fits"].items()
    for engine in ("torch", "numba"):
        assert fits[engine]["fit_cpu_s"] > 0 and fits[engine]["ratio_to_hgb"] > 0
        assert 0 <= fits[engine]["accuracy"] <= 100
    assert set(results["threads"]) == {1, 2}
    out = capsys.readouterr().out
    assert "of the matmul rate" in out and "speed-up" in out


def test_step_flops_count_the_kept_features():
    from benchmarks.bench_kernel import step_flops

    from sktree_lmc import get_architecture

    arch = get_architecture("oblivious", 2)  # 2 nodes, 4 leaves, 6 positions (4 with a parent)
    # forward per tree and row: 2*2*3 (splits) + 2 (sigmoids) + 4 (products) + 2*4*1 (leaves)
    assert step_flops(arch, n_trees=1, kept_features=3, n_outputs=1, rows=1) == 3 * 26

"""Smoke test of benchmarks/bench_layers.py (how often an argument climbs back up the layers)."""

import numpy as np


def test_layers_bench_smoke(capsys):
    from benchmarks import bench_layers

    results = bench_layers.main(["--smoke"])
    assert set(results) == {"SoftTreeEnsembleClassifier.fit (X)", "merge_estimators (first model)",
                            "ShardedSoftTreeEnsemble.fit (X)"}
    assert all(isinstance(n, int) and n > 0 for n in results.values())
    assert "climbs" in capsys.readouterr().out


def test_arguments_climb_between_subpackages_at_most_the_layouts_targets(capsys):
    """The layout's targets, counted between subpackages: the estimator's fit hands X to at
    most 8 collaborators' calls that return to it, merge_estimators its first model to 6,
    the sharded fit X to 12 (a new call that hands the argument back and forth fails here)."""
    from benchmarks import bench_layers

    results = bench_layers.main(["--smoke", "--by", "subpackage"])
    assert results["SoftTreeEnsembleClassifier.fit (X)"] <= 8
    assert results["merge_estimators (first model)"] <= 6
    assert results["ShardedSoftTreeEnsemble.fit (X)"] <= 12


def test_layer_order_follows_the_package_docstring():
    from benchmarks.bench_layers import LAYERS, layer_of

    import sktree_lmc

    doc = sktree_lmc.__doc__
    positions = [doc.index(f"``sktree_lmc.{name}``") for name in LAYERS if name != "front"]
    assert positions == sorted(positions)
    assert layer_of("sktree_lmc._estimators") == LAYERS.index("front")
    assert layer_of("sktree_lmc.model._forward") < layer_of("sktree_lmc.training._training")
    assert layer_of("numpy") is None


def test_follow_counts_a_call_that_carries_the_argument_across_modules():
    from benchmarks.bench_layers import follow

    from sktree_lmc.encoding._encoding import TabularEncoder

    X = np.arange(12.0).reshape(6, 2)
    climbs, _ = follow(lambda: TabularEncoder().fit(X), X)
    assert climbs and all(" -> " in site for site in climbs)
    other = np.zeros((6, 2))
    assert follow(lambda: TabularEncoder().fit(other), X)[0] == []  # X never passed


def test_follow_skips_a_decorators_wrapper_as_callee():
    """``tree_outputs`` calls the estimator's own ``_predict_in_chunks`` through the wrapper of
    ``limit_threads`` (in ``utils``): that is no climb into ``utils``, the wrapped call is one."""
    from benchmarks.bench_layers import follow

    from sktree_lmc import SoftTreeEnsembleClassifier

    X = np.random.default_rng(0).normal(size=(40, 3))
    est = SoftTreeEnsembleClassifier(n_estimators=2, max_epochs=1, random_state=0)
    est.fit(X, (X[:, 0] > 0).astype(int))
    climbs, _ = follow(lambda: est.tree_outputs(X), est)
    assert not any(site.endswith(".wrapper") for site in climbs)
    assert climbs  # the model's rows still climb (validated in _validation)

"""Model sizes: depths and tree counts given as NumPy integers fit and initialize as the Python
ints, and trees too deep to train (too many leaves, routing tables or buffers) are refused at
once with the sizes named."""

import time
import warnings

import numpy as np
import pytest
import torch
from _helpers import three_feature_binary_data
from numpy.testing import assert_array_equal

from sktree_lmc import (
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleModule,
    get_architecture,
)
from sktree_lmc.model._architectures import (
    MAX_LEAVES_PER_TREE,
    _build_oblivious,
    check_model_size,
    model_size,
)
from sktree_lmc.training._boosting import grow_oblivious_trees
from sktree_lmc.model._forward import _routing_elements_per_row, check_routing_memory, routing_plan

TINY = dict(n_estimators=4, max_epochs=2, device="cpu", random_state=0)


# -- NumPy integers as depths and tree counts ---------------------------------------------
@pytest.mark.parametrize("params", [dict(depth=np.uint8(2)), dict(n_estimators=np.int8(4)),
                                    dict(n_estimators=np.uint16(4)),
                                    dict(depth=np.int8(3), n_estimators=np.uint8(4))],
                         ids=["depth_uint8", "trees_int8", "trees_uint16", "both"])
def test_numpy_integer_depth_and_trees_fit_like_ints(params):
    """The classifier's default trains a teacher: ``depth=np.uint8(2)`` overflowed in
    ``1 << depth`` (OverflowError), ``n_estimators=np.int8(4)`` in the routing memory
    estimate (a RuntimeWarning, and a wrong estimate). Both fit as the Python ints."""
    X, y = three_feature_binary_data()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*overflow", category=RuntimeWarning)
        got = SoftTreeEnsembleClassifier(**{**TINY, **params}).fit(X, y)
    as_int = {k: int(v) for k, v in params.items()}
    expected = SoftTreeEnsembleClassifier(**{**TINY, **as_int}).fit(X, y)
    assert_array_equal(got.predict_proba(X), expected.predict_proba(X))
    for a, b in zip(got.teacher_, expected.teacher_):
        for u, v in zip(a, b):
            assert_array_equal(u, v)


def test_boosting_converts_numpy_integers_and_refuses_other_types():
    X, y = three_feature_binary_data()
    w = np.ones(len(X))
    kw = dict(loss="softmax", n_outputs=2)
    ref = grow_oblivious_trees(X, y, w, n_trees=3, depth=2, max_bins=255, **kw)
    # np.uint8(255) + 2 wrapped around to 1 in the thresholds' quantile levels
    got = grow_oblivious_trees(X, y, w, n_trees=np.uint8(3), depth=np.uint8(2),
                               max_bins=np.uint8(255), **{**kw, "n_outputs": np.uint8(2)})
    for a, b in zip(got, ref):
        assert_array_equal(a, b)
    for bad, err in [(dict(depth=2.0), TypeError), (dict(depth=True), TypeError),
                     (dict(n_trees=np.float32(3)), TypeError), (dict(depth=-1), ValueError),
                     (dict(n_outputs=0), ValueError), (dict(depth=17), ValueError)]:
        args = {**dict(n_trees=3, depth=2), **kw, **bad}
        with pytest.raises(err, match=next(iter(bad))):
            grow_oblivious_trees(X, y, w, **args)


def test_module_initialization_in_python_ints():
    """``L * n_trees`` (the leaves' fan-in) overflowed in uint8 for 200 trees of 16
    leaves, which changed the leaves' initialization."""
    arch = get_architecture("oblivious", 4)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*overflow", category=RuntimeWarning)
        got = SoftTreeEnsembleModule(arch, np.uint8(200), np.uint8(3), np.uint8(2),
                                     generator=torch.Generator().manual_seed(0))
    expected = SoftTreeEnsembleModule(arch, 200, 3, 2, generator=torch.Generator().manual_seed(0))
    for a, b in zip(got.parameters(), expected.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(TypeError):
        SoftTreeEnsembleModule(arch, 4.0, 3, 2)


def test_routing_memory_estimate_in_python_ints():
    arch = get_architecture("oblivious", 6)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=RuntimeWarning)
        check_routing_memory(arch, np.int8(100), np.int16(512), itemsize=np.uint8(4),
                             training=True)
    with pytest.raises(TypeError):
        check_routing_memory(arch, 8.0, 64)


# -- trees too deep to train ---------------------------------------------------------------
def test_model_size_matches_the_tables():
    for name in ("non_oblivious", "oblivious", "decision_list", "decision_list_modified"):
        for depth in (1, 2, 3, 5, 7):
            arch = get_architecture(name, depth)
            sizes = model_size(name, depth, 3, 5, 2)
            assert sizes["n_nodes"] == arch.n_nodes
            assert sizes["n_leaves"] == arch.n_leaves
            assert sizes["n_free_leaves"] == arch.n_free_leaves
            assert sizes["n_positions"] == len(routing_plan(arch))
            assert sizes["table_entries"] == arch.code.size
            assert sizes["n_parameters"] == 3 * arch.n_params_per_tree(5, 2)
            assert sizes["routing_bytes_per_row"] == 4 * 3 * _routing_elements_per_row(
                arch, training=True)


def test_check_model_size_accepts_every_existing_usage():
    """The largest models of the tests, benchmarks and docs pass (the depth-16 forest of
    a million trees is refused later, by the memory check)."""
    assert MAX_LEAVES_PER_TREE == 2**16
    for name, depth, trees in [("oblivious", 16, 10**6), ("oblivious", 10, 256),
                               ("non_oblivious", 14, 1), ("non_oblivious", 12, 64),
                               ("decision_list", 48, 4), ("decision_list_modified", 48, 4)]:
        assert check_model_size(name, np.int64(depth), trees, 3, 2)["n_leaves"] <= 2**16


@pytest.mark.parametrize("name, depth, match", [
    ("oblivious", 17, r"131,072 leaves each, more than the limit of 65,536"),
    ("oblivious", 20, r"2,097,150 per tree.* 2,097,232 parameters and need about 16 MiB of "
                      r"routing buffers per training row"),
    ("non_oblivious", 15, r"routing table would have 1,073,709,056 int8 entries.*"
                          r"arch='oblivious' goes to depth 16"),
    ("decision_list", 20000, "routing table would have 400,020,000"),
    ("oblivious", 10**9, r"2\*\*1000000000 leaves"),
])
def test_check_model_size_refuses_trees_too_deep(name, depth, match):
    with pytest.raises(ValueError, match=rf"arch='{name}' with depth={depth} is not "
                                         rf"supported: .*{match}"):
        check_model_size(name, depth, 1, 3, 2)


def test_check_model_size_argument_errors():
    with pytest.raises(ValueError, match="Unknown arch"):
        check_model_size("forest", 2, 1, 3, 2)
    with pytest.raises(TypeError, match="depth must be an integer"):
        check_model_size("oblivious", 2.0, 1, 3, 2)
    with pytest.raises(ValueError, match="n_estimators must be an integer >= 1"):
        check_model_size("oblivious", 2, 0, 3, 2)


def test_deep_fit_is_refused_quickly():
    """An oblivious depth-20 fit of one tree on 60 rows ran for 76-245 s (the routing
    schedule of 2**21 positions built and run in Python); now a ValueError at once,
    with the teacher (the default) and without."""
    X, y = three_feature_binary_data(60)
    for extra in ({}, dict(teacher_weight=0.0, additive_bins=None)):
        est = SoftTreeEnsembleClassifier(arch="oblivious", depth=20, n_estimators=1,
                                         max_epochs=1, device="cpu", **extra)
        start = time.perf_counter()
        with pytest.raises(ValueError, match="depth=20 is not supported: .*1,048,576 leaves"):
            est.fit(X, y)
        assert time.perf_counter() - start < 10
    with pytest.raises(ValueError, match="131,072 leaves"):
        SoftTreeEnsembleModule(get_architecture("oblivious", 17), 1, 3, 2)


def test_oblivious_table_unchanged_and_huge_tables_refused():
    for depth in range(1, 11):
        code = np.zeros((1 << depth, depth), dtype=np.int8)
        for leaf in range(1 << depth):
            for d in range(depth):
                code[leaf, d] = -1 if (leaf >> (depth - 1 - d)) & 1 else 1
        built = _build_oblivious(depth).code
        assert built.dtype == np.int8 and built.flags.c_contiguous
        assert_array_equal(built, code)
    for name, depth in [("oblivious", 24), ("decision_list", 16384),
                        ("decision_list_modified", 10**9)]:
        with pytest.raises(ValueError, match=f"depth={depth} is not supported: its routing "
                                             "table"):
            get_architecture(name, depth)
    with pytest.raises(ValueError, match="depth=1000 has 2\\*\\*1000 leaves .*2\\*\\*1970 GiB"):
        get_architecture("non_oblivious", 1000)  # was an OverflowError in the message

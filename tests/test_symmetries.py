"""Symmetry groups of the tree architectures, and the invariance of models under them.

The checks here are written against the routing table ``code`` only (not against the
group builders): an op ``(perm, sign, leaf_perm)`` preserves a tree's function iff
``code[leaf_perm[l], perm[n]] == sign[n] * code[l, n]`` for every leaf and node.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from _helpers import N_CLASSES, N_FEATURES, N_TREES, model_with_params, random_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import (
    SymmetryOps,
    get_architecture,
    is_valid_op,
    random_ops,
)
from sktree_lmc.model._forward import SoftTreeEnsembleModule, reference_forward
from sktree_lmc.model._params import compose_ops

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]
DEPTHS = [1, 2, 3, 4]


def expected_group_order(name, depth):
    """Sizes from Section 3.3 of the paper."""
    return {
        "non_oblivious": 2 ** (2**depth - 1),
        "oblivious": 2**depth * math.factorial(depth),
        "decision_list": 2,
        "decision_list_modified": 1,
    }[name]


def independent_leaf_perm(arch, perm, sign):
    """Leaf permutation induced by node op ``(perm, sign)``, or None if it is no symmetry.

    Written with plain loops over the routing table, independently of the package.
    """
    code = arch.code.astype(int)
    L, N = code.shape
    free = list(arch.free_leaves)
    rows = {tuple(code[k]): k for k in range(L)}
    full = []
    for leaf in range(L):
        target = [0] * N
        for n in range(N):
            target[perm[n]] = sign[n] * code[leaf, n]
        k = rows.get(tuple(target))
        if k is None:
            return None
        full.append(k)
    if sorted(full) != list(range(L)):
        return None
    for leaf in range(L):
        if (leaf in free) != (full[leaf] in free):
            return None
    return np.array([free.index(full[leaf]) for leaf in free])


# ----------------------------------------------------------------------------
# The groups as tables
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ARCHS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_group_order_validity_distinctness(name, depth):
    arch = get_architecture(name, depth)
    assert arch.n_ops == expected_group_order(name, depth)
    ops = arch.ops
    assert ops is not None and len(ops) == arch.n_ops
    assert ops.perm.shape == (arch.n_ops, arch.n_nodes)
    assert ops.sign.shape == (arch.n_ops, arch.n_nodes)
    assert ops.leaf_perm.shape == (arch.n_ops, arch.n_free_leaves)
    # identity first
    assert_array_equal(ops.perm[0], np.arange(arch.n_nodes))
    assert_array_equal(ops.sign[0], np.ones(arch.n_nodes))
    assert_array_equal(ops.leaf_perm[0], np.arange(arch.n_free_leaves))
    # all ops distinct (as node ops; the leaf part is determined by them)
    keys = np.concatenate([ops.perm, ops.sign.astype(np.int64)], axis=1)
    assert len(np.unique(keys, axis=0)) == arch.n_ops
    # every op valid: by the package's check, and by the independent one
    n_check = min(arch.n_ops, 2048)
    idx = np.random.RandomState(0).choice(arch.n_ops, n_check, replace=False)
    for u in idx:
        p, s, lp = ops.perm[u], ops.sign[u].astype(int), ops.leaf_perm[u]
        assert is_valid_op(arch, p, s, lp)
        assert_array_equal(independent_leaf_perm(arch, p, s), lp)
    # the package's check rejects non-symmetries
    bad_leaf = np.roll(np.arange(arch.n_free_leaves), 1)
    if arch.n_free_leaves > 1:
        assert not is_valid_op(arch, np.arange(arch.n_nodes), np.ones(arch.n_nodes), bad_leaf)


def _n_candidate_ops(name, depth):
    n_nodes = 2**depth - 1 if name == "non_oblivious" else depth
    return math.factorial(n_nodes) * 2**n_nodes


@pytest.mark.parametrize(
    "name, depth",
    [(n, d) for n in ARCHS for d in DEPTHS if _n_candidate_ops(n, d) <= 400],
)
def test_group_is_complete(name, depth):
    """Exhaustively, every (node perm, node signs) that is a symmetry is in the table."""
    arch = get_architecture(name, depth)
    N = arch.n_nodes
    found = set()
    for perm in itertools.permutations(range(N)):
        for sign in itertools.product([1, -1], repeat=N):
            lp = independent_leaf_perm(arch, perm, sign)
            assert is_valid_op(arch, np.array(perm), np.array(sign), lp if lp is not None
                               else np.arange(arch.n_free_leaves)) == (lp is not None)
            if lp is not None:
                found.add(perm + sign)
    table = {tuple(p) + tuple(int(x) for x in s) for p, s in zip(arch.ops.perm, arch.ops.sign)}
    assert found == table
    assert len(found) == expected_group_order(name, depth)


def test_complete_group_check_covers_every_architecture():
    covered = {
        n for n in ARCHS for d in DEPTHS
        if math.factorial(d if n != "non_oblivious" else 2**d - 1)
        * 2 ** (d if n != "non_oblivious" else 2**d - 1) <= 400
    }
    assert covered == set(ARCHS)


@pytest.mark.parametrize("name", ARCHS)
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_group_closure(name, depth):
    arch = get_architecture(name, depth)
    ops = arch.ops
    U = len(ops)
    table = {
        tuple(p) + tuple(s) + tuple(lp)
        for p, s, lp in zip(ops.perm, ops.sign.astype(int), ops.leaf_perm)
    }
    rng = np.random.RandomState(1)
    pairs = (
        list(itertools.product(range(U), repeat=2))
        if U * U <= 4096
        else [tuple(x) for x in rng.randint(0, U, size=(2000, 2))]
    )
    i, j = np.array(pairs).T
    comp = compose_ops(ops[i], ops[j])
    for p, s, lp in zip(comp.perm, comp.sign.astype(int), comp.leaf_perm):
        assert tuple(p) + tuple(s) + tuple(lp) in table
    # compose_ops really is "first, then second"
    params = random_params(arch, len(i), 3, 2, rng)
    two_step = params.apply_ops(ops[i]).apply_ops(ops[j])
    one_step = params.apply_ops(comp)
    for f in ("split_weight", "split_bias", "leaf_value"):
        assert_array_equal(getattr(two_step, f), getattr(one_step, f))


def test_node_weights():
    assert get_architecture("non_oblivious", 3).node_weights.tolist() == (
        [8.0] + [4.0] * 2 + [2.0] * 4
    )
    assert get_architecture("decision_list", 3).node_weights.tolist() == [4.0, 3.0, 2.0]
    # the fixed-zero leaf of the modified list still counts
    assert get_architecture("decision_list_modified", 3).node_weights.tolist() == [4.0, 3.0, 2.0]
    for d in DEPTHS:
        assert get_architecture("oblivious", d).node_weights.tolist() == [2.0**d] * d
        w = get_architecture("non_oblivious", d).node_weights
        assert w.tolist() == [2.0 ** (d - k) for k in range(d) for _ in range(2**k)]


def test_structure_and_errors():
    assert get_architecture("decision_list_modified", 3).n_free_leaves == 3
    assert get_architecture("decision_list", 3).n_free_leaves == 4
    assert get_architecture("oblivious", 3).n_nodes == 3
    assert get_architecture("non_oblivious", 3).n_nodes == 7
    assert get_architecture("oblivious", 2) is get_architecture("oblivious", 2)
    with pytest.raises(ValueError, match="arch"):
        get_architecture("bogus", 2)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="depth"):
            get_architecture("oblivious", bad)


def test_non_oblivious_deep_random_ops_are_valid():
    """Beyond the enumerated sizes (D=5, 6) ops are drawn bit by bit and still valid."""
    for depth in (5, 6):
        arch = get_architecture("non_oblivious", depth)
        assert arch.n_ops == 2 ** (2**depth - 1)
        assert arch.ops is None
        ops = random_ops(arch, 5, random_state=0)
        for u in range(5):
            assert is_valid_op(arch, ops.perm[u], ops.sign[u], ops.leaf_perm[u])
            assert_array_equal(
                independent_leaf_perm(arch, ops.perm[u], ops.sign[u].astype(int)), ops.leaf_perm[u]
            )
        rng = np.random.RandomState(depth)
        p = random_params(arch, 5, 4, 2, rng)
        X = rng.standard_normal((20, 4))
        assert_allclose(
            reference_forward(arch, p.apply_ops(ops), X), reference_forward(arch, p, X),
            rtol=1e-9, atol=1e-9,
        )


def test_identity_ops_and_apply_errors():
    ops = SymmetryOps.identity(3, 4, 5)
    assert len(ops) == 3 and ops.perm.shape == (3, 4) and ops.leaf_perm.shape == (3, 5)
    arch = get_architecture("oblivious", 2)
    p = random_params(arch, 3, 2, 1, np.random.RandomState(0))
    with pytest.raises(ValueError, match="Expected 3 ops"):
        p.apply_ops(SymmetryOps.identity(2, 2, 4))


# ----------------------------------------------------------------------------
# Invariance of the model's function (hypothesis)
# ----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(ARCHS),
    depth=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_random_permutation_and_ops_preserve_predictions(name, depth, seed):
    arch = get_architecture(name, depth)
    rng = np.random.RandomState(seed)
    params = random_params(arch, N_TREES, N_FEATURES, N_CLASSES, rng)
    ops = random_ops(arch, N_TREES, random_state=rng)
    moved = params.permute_trees(rng.permutation(N_TREES)).apply_ops(ops)
    X = rng.standard_normal((40, N_FEATURES))

    a = model_with_params(name, depth, params)
    b = model_with_params(name, depth, moved)
    assert_allclose(b.predict_proba(X), a.predict_proba(X), atol=1e-6, rtol=0)
    top2 = np.sort(a.predict_proba(X), axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-5
    assert_array_equal(b.predict(X)[clear], a.predict(X)[clear])

    # the module output, and the obviously-correct reference loop, agree too
    Xt = torch.as_tensor(X, dtype=torch.float32)
    out_a = SoftTreeEnsembleModule.from_params(arch, params)(Xt).detach().numpy()
    out_b = SoftTreeEnsembleModule.from_params(arch, moved)(Xt).detach().numpy()
    assert_allclose(out_b, out_a, atol=1e-5, rtol=1e-6)
    ref_a = reference_forward(arch, params, X).sum(axis=1)
    ref_b = reference_forward(arch, moved, X).sum(axis=1)
    assert_allclose(ref_b, ref_a, atol=1e-9, rtol=1e-9)
    assert_allclose(out_a, ref_a, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ARCHS)
@pytest.mark.parametrize("depth", [2, 3])
def test_every_enumerated_op_preserves_tree_outputs(name, depth):
    """Not only random draws: each op of the group, one per tree, on the reference forward."""
    arch = get_architecture(name, depth)
    ops = arch.ops
    rng = np.random.RandomState(depth)
    params = random_params(arch, len(ops), 3, 2, rng)
    X = rng.standard_normal((15, 3))
    assert_allclose(
        reference_forward(arch, params.apply_ops(ops), X), reference_forward(arch, params, X),
        atol=1e-10, rtol=1e-10,
    )


def test_a_non_symmetry_changes_predictions():
    """The invariance test above can fail: swapping two leaves alone is not a symmetry."""
    arch = get_architecture("oblivious", 2)
    rng = np.random.RandomState(0)
    params = random_params(arch, 4, 3, 2, rng)
    bad = SymmetryOps(
        np.tile(np.arange(2), (4, 1)), np.ones((4, 2), np.float32),
        np.tile(np.array([1, 0, 2, 3]), (4, 1)),
    )
    X = rng.standard_normal((10, 3))
    diff = reference_forward(arch, params.apply_ops(bad), X) - reference_forward(arch, params, X)
    assert np.abs(diff).max() > 1e-3

"""Matching at any depth: the oblivious level search, ops past the enumerable groups.

The exhaustive references here score every op of the group with plain array code
(independently of the search), so they stay usable at depth 7 for a few pairs.
"""

import itertools

import numpy as np
import pytest
import torch
from _helpers import model_with_params, random_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from sktree_lmc import (
    activation_matching,
    best_ops_for_pairs,
    get_architecture,
    is_valid_op,
    merge_estimators,
    pairwise_tree_similarity,
    random_ops,
    weight_matching,
)
from sktree_lmc.model._forward import reference_forward
from sktree_lmc.merging._matching import _tensors
from sktree_lmc.model._oblivious import exhaustive_search, leaf_perm, oblivious_search

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]


def exhaustive_oblivious(theta_a, leaves_a, theta_b, leaves_b):
    """Max over all ``2**D * D!`` ops of every aligned pair, by brute force (float64)."""
    M, D, _ = theta_a.shape
    G = torch.bmm(theta_a, theta_b.transpose(1, 2))
    signs = 1.0 - 2.0 * ((torch.arange(1 << D)[:, None] >> torch.arange(D)) & 1).double()
    best = torch.full((M,), -np.inf, dtype=torch.float64)
    for order in itertools.permutations(range(D)):
        perm = torch.tensor(order).repeat(len(signs), 1)
        lp = leaf_perm(perm, signs, D)  # (U, L)
        node = (G[:, torch.arange(D), torch.tensor(order)][:, None, :] * signs).sum(2)
        leaf = torch.einsum("mlc,mulc->mu", leaves_a, leaves_b[:, lp])
        best = torch.maximum(best, (node + leaf).max(dim=1).values)
    return best


def fitted_pair(name, depth, n_trees=6, seeds=(1, 2)):
    from sktree_lmc import SoftTreeEnsembleClassifier
    from sktree_lmc.datasets import load_magic_small

    X, y = load_magic_small(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    return [SoftTreeEnsembleClassifier(arch=name, depth=depth, n_estimators=n_trees,
                                       max_epochs=2, device="cpu", random_state=s)
            .fit(X[::6], y[::6]).tree_params_ for s in seeds]


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("kind", ["random", "fitted"])
def test_level_search_equals_exhaustive(depth, kind):
    arch = get_architecture("oblivious", depth)
    if kind == "random":
        rng = np.random.RandomState(depth)
        pa, pb = (random_params(arch, 6, 4, 2, rng) for _ in range(2))
    else:
        pa, pb = fitted_pair("oblivious", depth)
    ta, la = _tensors(pa, arch, True, "cpu")
    tb, lb = _tensors(pb, arch, True, "cpu")
    ref = exhaustive_oblivious(ta, la, tb, lb)
    G = torch.bmm(ta, tb.transpose(1, 2))
    perm, sign, score, certified = oblivious_search(G, la, lb)
    assert certified.all()
    assert_allclose(score.numpy(), ref.numpy(), rtol=1e-10, atol=1e-10)
    # the returned op reaches that score
    ops, scores = best_ops_for_pairs(pa, pb, arch)
    assert_allclose(scores, ref.numpy(), rtol=1e-10, atol=1e-10)
    moved = pb.apply_ops(ops)
    tm, lm = _tensors(moved, arch, True, "cpu")
    direct = (ta * tm).sum((1, 2)) + (la * lm).sum((1, 2))
    assert_allclose(direct.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    # the whole table: exact at this size, so it equals the enumerated group's maximum
    S = pairwise_tree_similarity(pa, pb, arch)
    assert_allclose(np.diag(S), ref.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "depth, kind",
    # random pairs at depth 7: test_level_search_at_depth_7_matches_brute_force
    [(d, k) for d in range(1, 7) for k in ("random", "fitted", "tied")]
    + [(7, "fitted"), (7, "tied")],
)
def test_exhaustive_search_equals_brute_force(depth, kind):
    """The Walsh-Hadamard form scores every op: its maximum and op equal brute force."""
    arch = get_architecture("oblivious", depth)
    rng = np.random.RandomState(depth)
    if kind == "fitted":
        pa, pb = fitted_pair("oblivious", depth, n_trees=3)
    else:
        pa, pb = (random_params(arch, 3, 4, 2, rng) for _ in range(2))
    if kind == "tied":  # b is a transformed copy of a: the maximum is |a|^2, reached by the inverse
        pb = pa.apply_ops(random_ops(arch, 3, random_state=depth))
    ta, la = _tensors(pa, arch, True, "cpu")
    tb, lb = _tensors(pb, arch, True, "cpu")
    ref = exhaustive_oblivious(ta, la, tb, lb)
    G = torch.bmm(ta, tb.transpose(1, 2))
    perm, sign, score = exhaustive_search(G, la, lb)
    assert_allclose(score.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)
    lp = leaf_perm(perm, sign, depth)
    node = (torch.gather(G, 2, perm[..., None])[..., 0] * sign).sum(1)
    leaf = (la * torch.gather(lb, 1, lp[..., None].expand_as(lb))).sum((1, 2))
    assert_allclose((node + leaf).numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)
    if kind == "tied":
        assert_allclose(score.numpy(), ((ta * ta).sum((1, 2)) + (la * la).sum((1, 2))).numpy(),
                        rtol=1e-12)
    _, none_sign, score_only = exhaustive_search(G, la, lb, with_ops=False)
    assert none_sign is None and torch.equal(score_only, score)


@pytest.mark.parametrize("depth", [5, 6])
def test_large_tables_exact_through_depth_6(depth):
    """Every entry of a table too large for the branch and bound (the old 2**24
    rule) equals the brute-force maximum of its pair, off the diagonal too."""
    from sktree_lmc.merging import _matching

    arch = get_architecture("oblivious", depth)
    rng = np.random.RandomState(depth)
    pa, pb = (random_params(arch, 5, 3, 2, rng) for _ in range(2))
    old_budget = _matching._EXACT_TABLE_BUDGET
    try:
        _matching._EXACT_TABLE_BUDGET = 0  # this table counts as large
        S = pairwise_tree_similarity(pa, pb, arch)
    finally:
        _matching._EXACT_TABLE_BUDGET = old_budget
    ta, la = _tensors(pa, arch, True, "cpu")
    tb, lb = _tensors(pb, arch, True, "cpu")
    ia, ib = np.divmod(np.arange(25), 5)
    ref = exhaustive_oblivious(ta[ia], la[ia], tb[ib], lb[ib]).reshape(5, 5)
    assert_allclose(S, ref.numpy(), rtol=1e-12, atol=1e-12)


def test_oblivious_exhaustive_table_beyond_reach_raises_with_estimate():
    from sktree_lmc.merging._matching import MAX_DP_SECONDS, dp_cost

    arch = get_architecture("oblivious", 6)
    assert dp_cost(arch, 256 * 256)[0] < 60 < MAX_DP_SECONDS < dp_cost(arch, 2000 * 2000)[0]
    rng = np.random.RandomState(0)
    pa, pb = (random_params(arch, 2000, 1, 1, rng) for _ in range(2))
    with pytest.raises(ValueError, match=r"Exhaustive matching of 4000000 pairs of oblivious "
                                         r"trees of depth 6 would take about \d+ min"):
        pairwise_tree_similarity(pa, pb, arch)


def test_level_search_at_depth_7_matches_brute_force():
    arch = get_architecture("oblivious", 7)
    rng = np.random.RandomState(7)
    pa, pb = (random_params(arch, 2, 4, 2, rng) for _ in range(2))
    ta, la = _tensors(pa, arch, True, "cpu")
    tb, lb = _tensors(pb, arch, True, "cpu")
    ref = exhaustive_oblivious(ta, la, tb, lb)
    _, scores = best_ops_for_pairs(pa, pb, arch)
    assert_allclose(scores, ref.numpy(), rtol=1e-10)
    # the fast table entries (seed only) are lower bounds, within 1% here
    G = torch.bmm(ta, tb.transpose(1, 2))
    _, _, seed, certified = oblivious_search(G, la, lb, exact=False, max_iter=0)
    assert not certified.any()
    assert (seed.numpy() <= ref.numpy() + 1e-9).all()
    assert (seed.numpy() >= 0.99 * ref.numpy()).all()


@pytest.mark.parametrize("depth", [7, 8, 10])
@pytest.mark.parametrize("noise", [0.0, 1e-3])
def test_planted_alignment_recovered_at_depth(depth, noise):
    arch = get_architecture("oblivious", depth)
    rng = np.random.RandomState(depth)
    M = 6
    pa = random_params(arch, M, 5, 2, rng)
    noisy = pa.__class__(pa.split_weight + noise * rng.standard_normal(pa.split_weight.shape),
                         pa.split_bias + noise * rng.standard_normal(pa.split_bias.shape),
                         pa.leaf_value + noise * rng.standard_normal(pa.leaf_value.shape))
    pb = noisy.permute_trees(rng.permutation(M)).apply_ops(random_ops(arch, M, random_state=1))
    aligned = weight_matching(pa, pb, arch).apply(pb)
    # the recovery error equals the noise: the aligned copy is the noisy original
    for f in ("split_weight", "split_bias", "leaf_value"):
        assert_allclose(getattr(aligned, f), getattr(noisy, f), atol=1e-12)


@pytest.mark.parametrize("depth", [7, 9])
def test_random_ops_without_group_table(depth):
    arch = get_architecture("oblivious", depth)
    assert arch.ops is None and arch.n_ops == 2**depth * np.prod(np.arange(1, depth + 1))
    ops = random_ops(arch, 5, random_state=0)
    assert ops.perm.shape == (5, depth) and ops.leaf_perm.shape == (5, 2**depth)
    for i in range(5):
        assert is_valid_op(arch, ops.perm[i], ops.sign[i], ops.leaf_perm[i])
    assert len({tuple(p) for p in ops.perm}) > 1  # not all the identity


def test_merge_estimators_depth_7_oblivious():
    """The issue's reproduction: two depth-7 oblivious classifiers, merged."""
    arch = get_architecture("oblivious", 7)
    rng = np.random.RandomState(0)
    params = random_params(arch, 8, 5, 3, rng)
    moved = params.permute_trees(rng.permutation(8)).apply_ops(random_ops(arch, 8, 3))
    a, b = model_with_params("oblivious", 7, params), model_with_params("oblivious", 7, moved)
    X = rng.standard_normal((40, 5))
    for method in ("wm", "am"):
        merged = merge_estimators(a, b, aligner=method, X=X)
        assert_allclose(merged.predict_proba(X), a.predict_proba(X), atol=1e-6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(ARCHS), depth=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_ops_preserve_function_and_planted_recovery_any_depth(name, depth, seed):
    arch = get_architecture(name, depth)
    rng = np.random.RandomState(seed)
    M = 3
    params = random_params(arch, M, 3, 2, rng)
    ops = random_ops(arch, M, random_state=rng)
    X = rng.standard_normal((16, 3))
    assert_allclose(reference_forward(arch, params.apply_ops(ops), X),
                    reference_forward(arch, params, X), rtol=1e-6, atol=1e-6)
    moved = params.permute_trees(rng.permutation(M)).apply_ops(ops)
    for al in (
        weight_matching(params, moved, arch),
        activation_matching(reference_forward(arch, params, X), reference_forward(arch, moved, X),
                            params, moved, arch),
    ):
        back = al.apply(moved)
        for f in ("split_weight", "split_bias", "leaf_value"):
            assert_allclose(getattr(back, f), getattr(params, f), atol=1e-12)


def test_non_oblivious_dp_beyond_reach_raises_with_estimate():
    arch = get_architecture("non_oblivious", 12)
    rng = np.random.RandomState(0)
    pa, pb = (random_params(arch, 256, 1, 1, rng) for _ in range(2))
    with pytest.raises(ValueError, match=r"would take about \d+ min on one core"):
        weight_matching(pa, pb, arch)
    # the estimate is the same one the message quotes, and smaller requests run
    from sktree_lmc.merging._matching import MAX_DP_SECONDS, dp_cost

    assert dp_cost(arch, 256 * 256)[0] > MAX_DP_SECONDS > dp_cost(arch, 64 * 64)[0]
    small = get_architecture("non_oblivious", 9)
    qa, qb = (random_params(small, 2, 1, 1, rng) for _ in range(2))
    ops, scores = best_ops_for_pairs(qa, qb, small)
    assert ops.perm.shape == (2, small.n_nodes) and np.isfinite(scores).all()


@pytest.mark.parametrize("name", ["decision_list", "decision_list_modified"])
def test_long_decision_lists(name):
    """Past 40 nodes, where base-3 row keys would overflow int64: ops and matching exact."""
    arch = get_architecture(name, 48)
    rng = np.random.RandomState(0)
    params = random_params(arch, 4, 3, 2, rng)
    ops = random_ops(arch, 4, random_state=0)
    for i in range(4):
        assert is_valid_op(arch, ops.perm[i], ops.sign[i], ops.leaf_perm[i])
    assert not is_valid_op(arch, np.arange(48), np.ones(48), np.roll(np.arange(arch.n_free_leaves),
                                                                     1))
    X = rng.standard_normal((8, 3))
    assert_allclose(reference_forward(arch, params.apply_ops(ops), X),
                    reference_forward(arch, params, X), rtol=1e-6, atol=1e-9)
    moved = params.permute_trees(rng.permutation(4)).apply_ops(ops)
    back = weight_matching(params, moved, arch).apply(moved)
    assert_allclose(back.leaf_value, params.leaf_value, atol=1e-12)


def test_align_many_at_depth_7():
    from sktree_lmc.merging._nway import align_many

    arch = get_architecture("oblivious", 7)
    rng = np.random.RandomState(1)
    p = random_params(arch, 6, 3, 2, rng)
    p = p.__class__(p.split_weight, p.split_bias, 0.1 * p.leaf_value)  # as fitted: small leaves
    copies = [p] + [p.permute_trees(rng.permutation(6)).apply_ops(random_ops(arch, 6, s))
                    for s in (1, 2)]
    result = align_many(copies, arch)
    for al, q in zip(result.alignments, copies):
        assert_allclose(al.apply(q).leaf_value, p.leaf_value, atol=1e-12)


def test_non_oblivious_beyond_reach_is_a_clear_error():
    """A non-oblivious depth whose routing table alone would not fit is refused
    with a message that names the cost, at the table and at fit."""
    import numpy as np
    import pytest

    from sktree_lmc import SoftTreeEnsembleClassifier, get_architecture

    assert get_architecture("non_oblivious", 12).n_leaves == 2**12
    with pytest.raises(ValueError, match="depth=15.*GiB"):
        get_architecture("non_oblivious", 15)
    assert get_architecture("oblivious", 15).n_leaves == 2**15  # D nodes: small table
    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2
    with pytest.raises(ValueError, match="not supported"):
        SoftTreeEnsembleClassifier(arch="non_oblivious", depth=20, n_estimators=1).fit(X, y)

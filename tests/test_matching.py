"""Weight and activation matching: exactness against brute force, and self-recovery.

The brute forces here score every op of the (enumerated) symmetry group by
transforming tree parameters with plain NumPy indexing, flattening them with the
node weighting, and taking dot products; they share nothing with
``sktree_lmc.merging._matching`` but the op tables (whose correctness
``test_symmetries.py`` checks against the routing table).
"""

import itertools

import numpy as np
import pytest
from _helpers import N_CLASSES, N_FEATURES, N_TREES, model_with_params, random_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

import sktree_lmc.merging._matching as matching
from sktree_lmc import (
    ModelAligner,
    SymmetryOps,
    TreeParams,
    activation_matching,
    best_ops_for_pairs,
    get_architecture,
    merge_estimators,
    pairwise_tree_similarity,
    random_ops,
    weight_matching,
)

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]


def flat_tree(params, t, arch, weighting, op=None):
    """Weighted flat parameter vector of tree ``t``, transformed by ``op=(perm, sign, lp)``."""
    w = params.split_weight[t].astype(np.float64)
    b = params.split_bias[t].astype(np.float64)
    pi = params.leaf_value[t].astype(np.float64)
    if op is not None:
        perm, sign, lp = op
        w = sign[:, None] * w[perm]
        b = sign * b[perm]
        pi = pi[lp]
    theta = np.concatenate([w, b[:, None]], axis=1)
    if weighting:
        theta = theta * np.sqrt((arch.code != 0).sum(axis=0))[:, None]
    return np.concatenate([theta.ravel(), pi.ravel()])


def brute_force_pair(pa, ta, pb, tb, arch, weighting):
    """Scores of every enumerated op for the pair (tree ta of a, tree tb of b)."""
    ops = arch.ops
    fa = flat_tree(pa, ta, arch, weighting)
    # all ops at once, still plain indexing
    w = pb.split_weight[tb].astype(np.float64)[ops.perm] * ops.sign[:, :, None]
    b = pb.split_bias[tb].astype(np.float64)[ops.perm] * ops.sign
    pi = pb.leaf_value[tb].astype(np.float64)[ops.leaf_perm]
    theta = np.concatenate([w, b[:, :, None]], axis=2)
    if weighting:
        theta = theta * np.sqrt((arch.code != 0).sum(axis=0))[None, :, None]
    flat = np.concatenate([theta.reshape(len(ops), -1), pi.reshape(len(ops), -1)], axis=1)
    return flat @ fa


def brute_force_similarity(pa, pb, arch, weighting):
    S = np.empty((pa.n_trees, pb.n_trees))
    best = np.empty((pa.n_trees, pb.n_trees), dtype=np.int64)
    for i in range(pa.n_trees):
        for j in range(pb.n_trees):
            scores = brute_force_pair(pa, i, pb, j, arch, weighting)
            S[i, j], best[i, j] = scores.max(), scores.argmax()
    return S, best


def assert_ops_equal(ops, other):
    assert_array_equal(ops.perm, other.perm)
    assert_array_equal(ops.sign, other.sign)
    assert_array_equal(ops.leaf_perm, other.leaf_perm)


# ----------------------------------------------------------------------------
# Exactness
# ----------------------------------------------------------------------------

CASES = [("non_oblivious", d, 5) for d in (1, 2, 3)] + [("non_oblivious", 4, 3)] + [
    (name, d, 5) for name in ARCHS[1:] for d in (1, 2, 3, 4)
]


@pytest.mark.parametrize("weighting", [True, False])
@pytest.mark.parametrize("name, depth, M", CASES)
def test_similarity_and_ops_equal_brute_force(name, depth, M, weighting):
    arch = get_architecture(name, depth)
    rng = np.random.RandomState(depth + 10 * M)
    pa = random_params(arch, M, 4, 2, rng)
    pb = random_params(arch, M + 1, 4, 2, rng)  # rectangular on purpose
    S_bf, best_bf = brute_force_similarity(pa, pb, arch, weighting)
    S = pairwise_tree_similarity(pa, pb, arch, invariances="all", weighting=weighting)
    assert S.shape == (M, M + 1)
    assert_allclose(S, S_bf, rtol=1e-10, atol=1e-10)

    pb_pairs = pb.permute_trees(np.arange(M))
    ops, scores = best_ops_for_pairs(pa, pb_pairs, arch, weighting=weighting)
    assert_allclose(scores, np.diag(S_bf), rtol=1e-10, atol=1e-10)
    assert_ops_equal(ops, arch.ops[best_bf[np.arange(M), np.arange(M)]])


def test_dp_equals_brute_force_against_transformed_copies():
    """Pairs whose optimum is far from the identity (b is a flipped, noisy a)."""
    arch = get_architecture("non_oblivious", 3)
    rng = np.random.RandomState(3)
    pa = random_params(arch, 16, 4, 2, rng)
    noise = random_params(arch, 16, 4, 2, rng, scale=0.3)
    moved = pa.interpolate(noise, 0.3).apply_ops(random_ops(arch, 16, random_state=rng))
    S_bf, best_bf = brute_force_similarity(pa, moved, arch, True)
    ops, scores = best_ops_for_pairs(pa, moved, arch)
    assert_allclose(scores, np.diag(S_bf), rtol=1e-10)
    assert_ops_equal(ops, arch.ops[np.diag(best_bf)])
    assert (np.diag(best_bf) != 0).sum() >= 12  # the identity is rarely the answer here


@pytest.mark.parametrize("name, depth", [("non_oblivious", 3), ("oblivious", 3)])
def test_chunking_gives_the_same_table(name, depth, monkeypatch):
    arch = get_architecture(name, depth)
    rng = np.random.RandomState(0)
    pa, pb = random_params(arch, 9, 3, 2, rng), random_params(arch, 7, 3, 2, rng)
    full = pairwise_tree_similarity(pa, pb, arch)
    monkeypatch.setattr(matching, "_CHUNK_BYTES", 1)  # one row of trees per chunk
    assert_allclose(pairwise_tree_similarity(pa, pb, arch), full, rtol=1e-12)


@pytest.mark.parametrize("name", ARCHS)
def test_weight_matching_is_the_joint_optimum(name):
    """Over all tree permutations and all ops of every tree, by exhaustion (M=5)."""
    arch = get_architecture(name, 2)
    rng = np.random.RandomState(5)
    M = 5
    pa, pb = random_params(arch, M, 3, 2, rng), random_params(arch, M, 3, 2, rng)
    S_bf, best_bf = brute_force_similarity(pa, pb, arch, True)
    best_perm = max(itertools.permutations(range(M)),
                    key=lambda p: sum(S_bf[i, p[i]] for i in range(M)))
    al = weight_matching(pa, pb, arch)
    assert_array_equal(al.tree_perm, best_perm)
    assert al.score == pytest.approx(sum(S_bf[i, best_perm[i]] for i in range(M)), rel=1e-10)
    expected_ops = arch.ops[best_bf[np.arange(M), list(best_perm)]]
    if arch.n_ops > 1:
        assert_ops_equal(al.ops, expected_ops)
    # the alignment realizes its score
    aligned = al.apply(pb)
    realized = sum(flat_tree(pa, m, arch, True) @ flat_tree(aligned, m, arch, True)
                   for m in range(M))
    assert realized == pytest.approx(al.score, rel=1e-5)


def test_activation_matching_is_the_output_optimum():
    arch = get_architecture("oblivious", 2)
    rng = np.random.RandomState(6)
    M = 5
    pa, pb = random_params(arch, M, 3, 2, rng), random_params(arch, M, 3, 2, rng)
    oa, ob = rng.standard_normal((20, M, 2)), rng.standard_normal((20, M, 2))
    S = np.einsum("imc,inc->mn", oa, ob)
    best_perm = max(itertools.permutations(range(M)),
                    key=lambda p: sum(S[i, p[i]] for i in range(M)))
    al = activation_matching(oa, ob, pa, pb, arch)
    assert_array_equal(al.tree_perm, best_perm)
    assert al.score == pytest.approx(sum(S[i, best_perm[i]] for i in range(M)), rel=1e-10)
    # ops chosen by weighted parameter similarity of the matched pairs
    _, best_bf = brute_force_similarity(pa, pb.permute_trees(al.tree_perm), arch, True)
    assert_ops_equal(al.ops, arch.ops[np.diag(best_bf)])


# ----------------------------------------------------------------------------
# invariances and weighting switches
# ----------------------------------------------------------------------------


def _is_identity(ops, arch):
    ident = SymmetryOps.identity(len(ops), arch.n_nodes, arch.n_free_leaves)
    return (np.array_equal(ops.perm, ident.perm) and np.array_equal(ops.sign, ident.sign)
            and np.array_equal(ops.leaf_perm, ident.leaf_perm))


@pytest.mark.parametrize("name", ARCHS)
def test_invariances_none_and_perm(name):
    arch = get_architecture(name, 3)
    rng = np.random.RandomState(7)
    M = 6
    pa = random_params(arch, M, 4, 2, rng)
    perm = rng.permutation(M)
    moved = pa.permute_trees(perm).apply_ops(random_ops(arch, M, random_state=rng))
    oa = rng.standard_normal((10, M, 2))
    ob = oa[:, perm]
    for al in (weight_matching(pa, moved, arch, invariances="none"),
               activation_matching(oa, ob, pa, moved, arch, invariances="none")):
        assert_array_equal(al.tree_perm, np.arange(M))
        assert _is_identity(al.ops, arch)
    # perm only: identity ops; a purely permuted copy is recovered exactly
    only_perm = pa.permute_trees(perm)
    for al in (weight_matching(pa, only_perm, arch, invariances="perm"),
               activation_matching(oa, ob, pa, only_perm, arch, invariances="perm")):
        assert _is_identity(al.ops, arch)
        assert_array_equal(al.apply(only_perm).split_weight, pa.split_weight)
    # "perm" scores trees as they are: plain weighted dot products
    S = pairwise_tree_similarity(pa, moved, arch, invariances="perm")
    S_bf = np.array([[flat_tree(pa, i, arch, True) @ flat_tree(moved, j, arch, True)
                      for j in range(M)] for i in range(M)])
    assert_allclose(S, S_bf, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="invariances"):
        weight_matching(pa, moved, arch, invariances="everything")
    with pytest.raises(ValueError, match="invariances"):
        activation_matching(oa, ob, pa, moved, arch, invariances="flips")
    with pytest.raises(ValueError, match="invariances"):
        pairwise_tree_similarity(pa, moved, arch, invariances="none")


def test_weighting_changes_the_chosen_op():
    """Depth-2 perfect trees: the root weighs 4, its children 2.

    Tree b matches tree a's root exactly (identity: +1 at the root, -1 flipped),
    but after a root flip b's children match a's with inner product 3:
    weighted, identity 4 vs flip -4 + 2*3 = 2; unweighted, identity 1 vs flip -1 + 3 = 2.
    """
    arch = get_architecture("non_oblivious", 2)
    F = 3
    wa, wb = np.zeros((1, 3, F)), np.zeros((1, 3, F))
    wa[0, 0, 0] = wb[0, 0, 0] = 1.0
    wa[0, 1, 1] = wb[0, 2, 1] = np.sqrt(3.0)  # a's left child == b's right child
    zeros_b, zeros_l = np.zeros((1, 3)), np.zeros((1, 4, 2))
    pa, pb = TreeParams(wa, zeros_b, zeros_l), TreeParams(wb, zeros_b, zeros_l)

    ops_w, score_w = best_ops_for_pairs(pa, pb, arch, weighting=True)
    ops_u, score_u = best_ops_for_pairs(pa, pb, arch, weighting=False)
    assert _is_identity(ops_w, arch)
    assert score_w[0] == pytest.approx(4.0)
    assert ops_u.sign[0].tolist() == [-1.0, 1.0, 1.0] and ops_u.perm[0].tolist() == [0, 2, 1]
    assert score_u[0] == pytest.approx(2.0)
    # the same through weight matching and the full similarity table
    assert _is_identity(weight_matching(pa, pb, arch, weighting=True).ops, arch)
    assert not _is_identity(weight_matching(pa, pb, arch, weighting=False).ops, arch)
    assert pairwise_tree_similarity(pa, pb, arch, weighting=False)[0, 0] == pytest.approx(2.0)


def test_deep_non_oblivious_self_alignment():
    """D=6 (2**63 flip patterns, beyond any enumeration): exact self-recovery by the DP."""
    arch = get_architecture("non_oblivious", 6)
    rng = np.random.RandomState(11)
    M = 12
    pa = random_params(arch, M, 5, 2, rng)
    perm = rng.permutation(M)
    moved = pa.permute_trees(perm).apply_ops(random_ops(arch, M, random_state=rng))
    al = weight_matching(pa, moved, arch)
    back = al.apply(moved)
    assert_array_equal(back.split_weight, pa.split_weight)
    assert_array_equal(back.split_bias, pa.split_bias)
    assert_array_equal(back.leaf_value, pa.leaf_value)


# ----------------------------------------------------------------------------
# Self-recovery (hypothesis): WM and AM undo any tree permutation plus ops
# ----------------------------------------------------------------------------


def assert_params_equal(p, q, exact=True):
    for f in ("split_weight", "split_bias", "leaf_value"):
        if exact:
            assert_array_equal(getattr(p, f), getattr(q, f))
        else:
            assert_allclose(getattr(p, f), getattr(q, f), rtol=1e-6, atol=1e-6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(ARCHS),
    depth=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    lam=st.floats(0.0, 1.0),
    weighting=st.booleans(),
)
def test_alignment_recovers_a_transformed_copy(name, depth, seed, lam, weighting):
    arch = get_architecture(name, depth)
    rng = np.random.RandomState(seed)
    params = random_params(arch, N_TREES, N_FEATURES, N_CLASSES, rng)
    perm = rng.permutation(N_TREES)
    moved = params.permute_trees(perm).apply_ops(random_ops(arch, N_TREES, random_state=rng))
    a = model_with_params(name, depth, params)
    b = model_with_params(name, depth, moved)
    X = rng.standard_normal((64, N_FEATURES))

    # WM on arrays
    al = weight_matching(params, moved, arch, weighting=weighting)
    assert_params_equal(al.apply(moved), params)
    # AM on per-tree outputs
    al = activation_matching(a.tree_outputs(X), b.tree_outputs(X), params, moved, arch,
                             weighting=weighting)
    assert_params_equal(al.apply(moved), params)
    # merged models, any lam, both methods: the original again
    for method in ("wm", "am"):
        merged = merge_estimators(a, b, lam, X=X,
                                  aligner=ModelAligner(method=method, weighting=weighting))
        assert_params_equal(merged.tree_params_, params, exact=False)
        assert_allclose(merged.predict_proba(X), a.predict_proba(X), atol=1e-6)


def test_alignment_benchmark_smoke(tmp_path, capsys):
    """``python -m benchmarks.bench_alignment --smoke`` runs and writes its CSV (in-process)."""
    import csv
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_alignment.py"
    if not path.is_file():
        pytest.skip("benchmarks/ is not part of this checkout")
    spec = importlib.util.spec_from_file_location("bench_alignment", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.csv"
    rows = bench.main(["--smoke", "--out", str(out)])
    assert "| WM | non_oblivious | 6 |" in capsys.readouterr().out
    with open(out) as fh:
        saved = list(csv.DictReader(fh))
    assert len(saved) == len(rows) == 9
    assert {r["method"] for r in saved} == {"wm", "am"}
    for r in saved:
        assert float(r["total_s"]) == pytest.approx(
            float(r["similarity_s"]) + float(r["assignment_s"]), rel=1e-6, abs=1e-9
        )

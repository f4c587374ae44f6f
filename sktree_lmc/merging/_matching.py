"""Weight matching and activation matching of two soft tree ensembles.

Both algorithms of the paper solve **one** linear assignment problem over trees
(:func:`scipy.optimize.linear_sum_assignment`) and pick, for every matched pair
of trees, the symmetry op of the architecture that makes them most similar.

Similarity of two trees under an op
-----------------------------------
Split parameters ``theta[n] = (w[n], b[n])`` are scaled by ``sqrt(node_weight[n])``
(the number of leaves a node affects, Section 3.2) when ``weighting=True``; leaf
values have weight 1. Transforming tree ``b`` by op ``u`` and taking the inner
product with tree ``a`` gives::

    sim(a, b, u) = sum_n sign_u[n] * G[a, b, n, perm_u[n]] + sum_l H[a, b, l, leaf_perm_u[l]]

with the node-pair table ``G[a, b, n, k] = sqrt(w_n w_k) <theta_a[n], theta_b[k]>``
and the leaf-pair table ``H[a, b, l, k] = <pi_a[l], pi_b[k]>``. The op enters
only through constant selection matrices, so all ops of a group are scored by
two matrix products from the tables (no re-flattening of parameters per op).

For non-oblivious perfect trees the flip group has ``2**(2**D - 1)`` elements,
but the objective is a sum over nodes and a flip only swaps subtrees, so the
exact optimum follows from a dynamic program from the leaves up (for each pair
of nodes at the same depth: keep or swap the children)::

    V(i, j) = max(+G[i, j] + V(2i, 2j) + V(2i+1, 2j+1),
                  -G[i, j] + V(2i, 2j+1) + V(2i+1, 2j))

in ``O(4**D)`` per pair of trees, vectorized over all pairs of trees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from ..model._architectures import SymmetryOps, _ops_from_node_ops
from ..utils._device import resolve_device
from ..model._oblivious import exhaustive_cost, exhaustive_search, oblivious_search
from ..model._params import TreeParams, check_finite_params

__all__ = [
    "Alignment",
    "activation_matching",
    "best_ops_for_pairs",
    "pairwise_tree_similarity",
    "weight_matching",
]

INVARIANCES = ("none", "perm", "all")

#: Bytes budget of one chunk of the (M_a, M_b, ...) similarity tables.
_CHUNK_BYTES = 1 << 27


@dataclass
class Alignment:
    """How to map model ``b`` onto the basis of a reference model ``a``.

    ``aligned_b = b.permute_trees(tree_perm).apply_ops(ops)``: tree ``m`` of
    the aligned model is tree ``tree_perm[m]`` of ``b`` transformed by op ``m``.

    Parameters
    ----------
    tree_perm : ndarray of shape (M,)
        Tree of ``b`` matched with tree ``m`` of ``a``.
    ops : SymmetryOps
        One op per (new) tree position.
    score : float
        Value of the matching objective (sum of matched similarities).

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TreeParams, get_architecture, random_ops
    >>> arch = get_architecture("oblivious", 2)
    >>> rng = np.random.RandomState(0)
    >>> a = TreeParams(rng.randn(8, arch.n_nodes, 5), rng.randn(8, arch.n_nodes),
    ...                rng.randn(8, arch.n_free_leaves, 2))
    >>> from sktree_lmc import weight_matching
    >>> b = a.permute_trees(rng.permutation(8)).apply_ops(random_ops(arch, 8, random_state=0))
    >>> alignment = weight_matching(a, b, arch)
    >>> alignment.tree_perm.shape, len(alignment.ops)
    ((8,), 8)
    >>> bool(np.allclose(alignment.apply(b).split_weight, a.split_weight, atol=1e-6))
    True
    """

    tree_perm: np.ndarray
    ops: SymmetryOps
    score: float

    def __eq__(self, other):
        """Alignments are equal when they map parameters the same way (same
        tree permutation and ops; the ``score`` is not compared)."""
        if not isinstance(other, Alignment):
            return NotImplemented
        return (
            np.array_equal(self.tree_perm, other.tree_perm)
            and np.array_equal(self.ops.perm, other.ops.perm)
            and np.array_equal(self.ops.sign, other.ops.sign)
            and np.array_equal(self.ops.leaf_perm, other.ops.leaf_perm)
        )

    __hash__ = None

    def apply(self, params):
        """Return ``params`` (of model ``b``) expressed in the basis of ``a``.

        Parameters
        ----------
        params : TreeParams
            Parameters of model ``b``.

        Returns
        -------
        TreeParams
            The same function, with trees permuted and transformed to match ``a``.
        """
        return params.permute_trees(self.tree_perm).apply_ops(self.ops)


def _align_optimizer_state(state, alignment):
    """Adam moments of a model expressed in the basis given by ``alignment``.

    First moments transform like the parameters (tree permutation, node
    permutation and sign, leaf permutation); second moments are permuted the
    same way but are invariant under sign flips.

    Parameters
    ----------
    state : dict
        An ``optimizer_state_``: ``step``, ``exp_avg`` and ``exp_avg_sq``
        (:class:`TreeParams`).
    alignment : Alignment
        Or anything with its ``apply(params)`` (a chain of alignments).

    Returns
    -------
    dict
        The same keys, the moments in the aligned basis.
    """
    exp_avg = alignment.apply(state["exp_avg"])
    sq = alignment.apply(state["exp_avg_sq"])
    exp_avg_sq = TreeParams(np.abs(sq.split_weight), np.abs(sq.split_bias), sq.leaf_value,
                            sq.additive)
    return {"step": state["step"], "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}


def _check_invariances(invariances):
    if invariances not in INVARIANCES:
        raise ValueError(f"invariances must be one of {INVARIANCES}, got {invariances!r}.")


# ----------------------------------------------------------------------------
# Similarity tables
# ----------------------------------------------------------------------------


def _tensors(params, arch, weighting, device):
    """Scaled node parameters (M, N, F+1) and leaves (M, L, C) as float64 tensors."""
    theta = np.concatenate([params.split_weight, params.split_bias[:, :, None]], axis=2)
    theta = torch.as_tensor(theta, dtype=torch.float64, device=device)
    if weighting:
        w = torch.as_tensor(np.sqrt(arch.node_weights), dtype=torch.float64, device=device)
        theta = theta * w[None, :, None]
    leaves = torch.as_tensor(params.leaf_value, dtype=torch.float64, device=device)
    return theta, leaves


def _node_table(theta_a, theta_b, diagonal):
    """Node-pair inner products: (Ma, Mb, Na * Nb), or (M, Na * Nb) for aligned pairs."""
    if diagonal:
        return torch.bmm(theta_a, theta_b.transpose(1, 2)).reshape(len(theta_a), -1)
    (Ma, Na, P), (Mb, Nb, _) = theta_a.shape, theta_b.shape
    G = (theta_a.reshape(Ma * Na, P) @ theta_b.reshape(Mb * Nb, P).T).reshape(Ma, Na, Mb, Nb)
    return G.permute(0, 2, 1, 3).reshape(Ma, Mb, Na * Nb)


def _node_selection(ops, n_nodes, device):
    """Constant (N * N, U) matrix turning the node table into per-op node scores."""
    U = len(ops)
    Cn = torch.zeros((n_nodes * n_nodes, U), dtype=torch.float64)
    rows = (np.arange(n_nodes)[None, :] * n_nodes + ops.perm).ravel()
    cols = np.repeat(np.arange(U), n_nodes)
    Cn[rows, cols] = torch.as_tensor(ops.sign.ravel(), dtype=torch.float64)
    return Cn.to(device)


def _leaf_scores(leaves_a, leaves_b, ops, diagonal, cache):
    """Leaf part of every op's score: (Ma, Mb, U), or (M, U) for aligned pairs.

    Two equivalent contractions, the cheaper one is used: the leaf-pair table
    ``H[l, k] = <pi_a[l], pi_b[k]>`` (``L*L*C`` per pair of trees) followed by a
    dense selection (``L*L*U``), or one product with the op-transformed leaves of
    ``b`` (``L*C*U``), which wins for few outputs. ``cache`` keeps what depends
    on ``b`` only across chunks of ``a``.
    """
    (Ma, L, C), Mb, U = leaves_a.shape, len(leaves_b), len(ops)
    if L * C * U <= L * L * (C + U):
        if "moved" not in cache:
            lp = torch.as_tensor(ops.leaf_perm, device=leaves_b.device)
            cache["moved"] = leaves_b[:, lp].reshape(Mb, U, L * C)
        moved = cache["moved"]
        if diagonal:
            return torch.bmm(moved, leaves_a.reshape(Ma, L * C, 1))[..., 0]
        return (leaves_a.reshape(Ma, L * C) @ moved.reshape(Mb * U, L * C).T).reshape(Ma, Mb, U)
    if "Cl" not in cache:
        Cl = torch.zeros((L * L, U), dtype=torch.float64)
        rows = (np.arange(L)[None, :] * L + ops.leaf_perm).ravel()
        Cl[rows, np.repeat(np.arange(U), L)] = 1.0
        cache["Cl"] = Cl.to(leaves_a.device)
    if diagonal:
        H = torch.bmm(leaves_a, leaves_b.transpose(1, 2)).reshape(Ma, L * L)
    else:
        H = (leaves_a.reshape(Ma * L, C) @ leaves_b.reshape(Mb * L, C).T).reshape(Ma, L, Mb, L)
        H = H.permute(0, 2, 1, 3).reshape(Ma, Mb, L * L)
    return H @ cache["Cl"]


def _enumerated_scores(theta_a, leaves_a, theta_b, leaves_b, ops, *, diagonal, cache=None):
    """Scores of all ops: (Ma, Mb, U), or (M, U) for aligned pairs.

    ``sim(a, b, u) = sum_n sign_u[n] G[n, perm_u[n]] + sum_l H[l, leaf_perm_u[l]]``;
    the node part goes through the node-pair table ``G`` (``N*N*(F+1)`` per pair,
    then a constant selection), the leaf part through :func:`_leaf_scores`.
    Pass the same dict as ``cache`` for every chunk of ``a`` against one ``b``.
    """
    cache = {} if cache is None else cache
    N, U = theta_a.shape[1], len(ops)
    if "Cn" not in cache:
        cache["Cn"] = _node_selection(ops, N, theta_a.device)
    scores = _leaf_scores(leaves_a, leaves_b, ops, diagonal, cache)
    G = _node_table(theta_a, theta_b, diagonal)
    shape = scores.shape
    return scores.reshape(-1, U).addmm_(G.reshape(-1, N * N), cache["Cn"]).reshape(shape)


def _depth_nodes(depth):
    return [np.arange((1 << d) - 1, (1 << (d + 1)) - 1) for d in range(depth)]


def _pair_products(xa, xb, diagonal):
    """``<xa[., i], xb[., j]>`` laid out (M, Ka, Kb) when diagonal, else (Ma, Ka, Mb, Kb)."""
    if diagonal:
        return torch.bmm(xa, xb.transpose(1, 2))
    (Ma, Ka, P), (Mb, Kb, _) = xa.shape, xb.shape
    return (xa.reshape(Ma * Ka, P) @ xb.reshape(Mb * Kb, P).T).reshape(Ma, Ka, Mb, Kb)


def _dp_scores(theta_a, leaves_a, theta_b, leaves_b, depth, *, diagonal, keep_choices=False):
    """Exact best flip score by dynamic programming over subtree pairs.

    ``V[i, j]`` is the best score of the subtree of node ``i`` of tree ``a``
    against the subtree of node ``j`` of tree ``b`` (same depth). The bottom
    level, whose children are leaves, is two matrix products of concatenated
    ``[theta_i, pi_{2i}, pi_{2i+1}]`` vectors (children of ``b`` in order, or
    swapped with ``-theta``); every level above combines the four child-pair
    blocks of the level below. Tables are laid out ``(Ma, K, Mb, K)`` (or
    ``(M, K, K)`` for aligned pairs) so that no product needs a transpose.

    Returns the score (Ma, Mb) — or (M,) when ``diagonal`` — and, when
    ``keep_choices``, the per-depth boolean flip decisions (diagonal only),
    each of shape (M, K, K), root first.
    """
    levels = _depth_nodes(depth)
    bottom = levels[-1]
    K = len(bottom)
    Ma, Mb, C = len(leaves_a), len(leaves_b), leaves_a.shape[2]
    children_b = leaves_b.reshape(Mb, K, 2, C)
    xa = torch.cat([theta_a[:, bottom], leaves_a.reshape(Ma, K, 2 * C)], dim=2)
    xb_keep = torch.cat([theta_b[:, bottom], children_b.reshape(Mb, K, 2 * C)], dim=2)
    xb_swap = torch.cat([-theta_b[:, bottom], children_b.flip(2).reshape(Mb, K, 2 * C)], dim=2)
    keep = _pair_products(xa, xb_keep, diagonal)
    swap = _pair_products(xa, xb_swap, diagonal)
    choices = []
    if keep_choices:
        flip = swap > keep  # ties keep the identity
        choices.append(flip)
        V = torch.where(flip, swap, keep)
    else:
        V = torch.maximum(keep, swap, out=keep)
    del keep, swap
    for nodes in reversed(levels[:-1]):
        K = len(nodes)
        G = _pair_products(theta_a[:, nodes], theta_b[:, nodes], diagonal)
        # Children blocks: V[..., 2i + x, ..., 2j + y]
        if diagonal:
            V6 = V.reshape(Ma, K, 2, K, 2)
            keep = torch.add(V6[:, :, 0, :, 0], V6[:, :, 1, :, 1]).add_(G)
            swap = torch.add(V6[:, :, 0, :, 1], V6[:, :, 1, :, 0]).sub_(G)
        else:
            V6 = V.reshape(Ma, K, 2, Mb, K, 2)
            keep = torch.add(V6[:, :, 0, :, :, 0], V6[:, :, 1, :, :, 1]).add_(G)
            swap = torch.add(V6[:, :, 0, :, :, 1], V6[:, :, 1, :, :, 0]).sub_(G)
        del V, V6
        if keep_choices:
            flip = swap > keep
            choices.append(flip)
            V = torch.where(flip, swap, keep)
        else:
            V = torch.maximum(keep, swap, out=keep)
        del swap
    score = V[:, 0, 0] if diagonal else V[:, 0, :, 0]
    return score, choices[::-1]


def _dp_traceback(choices, depth):
    """Turn per-depth flip decisions (M, K, K) into SymmetryOps."""
    M = choices[0].shape[0]
    rows = np.arange(M)
    n_nodes = (1 << depth) - 1
    perm = np.zeros((M, n_nodes), dtype=np.int64)
    sign = np.ones((M, n_nodes), dtype=np.float32)
    # local index (within its depth) of the B node at each local A position
    local = np.zeros((M, 1), dtype=np.int64)
    for d in range(depth):
        base = (1 << d) - 1
        flip = choices[d].cpu().numpy()  # (M, K, K)
        K = 1 << d
        f = flip[rows[:, None], np.arange(K)[None, :], local]  # (M, K)
        perm[:, base : base + K] = base + local
        sign[:, base : base + K] = np.where(f, -1.0, 1.0)
        child = np.empty((M, 2 * K), dtype=np.int64)
        child[:, 0::2] = 2 * local + f
        child[:, 1::2] = 2 * local + 1 - f
        local = child
    return SymmetryOps(perm, sign, local)


#: Seconds per bottom-level node pair of the flip dynamic program (one core,
#: measured at depth 10, F=16: 13.5 s CPU for 64 x 64 tree pairs of 2**18 node pairs).
_DP_SECONDS_PER_ENTRY = 1.3e-8
#: Seconds per work unit (``D! * 4**D`` per tree pair) of the exhaustive search of
#: oblivious trees, rounded up from one core under load: 1.9e-11 at depth 5,
#: 5.3e-11 at depth 6, 3.0e-11 at depth 7 (F=16, C=2).
_EXHAUSTIVE_SECONDS_PER_UNIT = 1e-10
#: Estimated single-core running time beyond which an exact search refuses to start.
MAX_DP_SECONDS = 900.0


def dp_cost(arch, n_pairs):
    """Estimated single-core seconds and peak bytes of an exact search over the group.

    The flip dynamic program of non-oblivious trees, or the exhaustive search of
    oblivious trees (:func:`sktree_lmc.model._oblivious.exhaustive_search`).

    Parameters
    ----------
    arch : TreeArchitecture
        A non-oblivious or oblivious architecture.
    n_pairs : int
        Tree pairs to score (``Ma * Mb`` for a table, ``M`` for matched pairs).

    Returns
    -------
    seconds : float
    peak_bytes : int
        Work arrays of one chunk (the computation is chunked over tree pairs).
    """
    if arch.level_search:
        return exhaustive_cost(arch.depth, n_pairs) * _EXHAUSTIVE_SECONDS_PER_UNIT, _CHUNK_BYTES
    entries = 4 ** (arch.depth - 1)  # bottom-level node pairs per tree pair
    per_pair = entries * 8 * 5  # keep, swap, V, a temporary and the flip choices
    return n_pairs * entries * _DP_SECONDS_PER_ENTRY, max(per_pair, _CHUNK_BYTES)


def check_dp_cost(arch, n_pairs):
    """Raise ValueError with the estimate when an exact search is beyond reach."""
    seconds, peak = dp_cost(arch, n_pairs)
    if seconds > MAX_DP_SECONDS:
        if arch.level_search:
            what = (f"Exhaustive matching of {n_pairs} pairs of oblivious trees of depth "
                    f"{arch.depth}")
            work = f"{exhaustive_cost(arch.depth, n_pairs):.2e} work units"
        else:
            what = (f"Exact flip matching of {n_pairs} pairs of non_oblivious trees of depth "
                    f"{arch.depth}")
            work = f"{4 ** (arch.depth - 1) * n_pairs:.2e} node pairs"
        raise ValueError(
            f"{what} would take about {seconds / 60:.0f} min on one core "
            f"({work}, {peak / 2**20:.0f} MiB of work arrays); the limit is "
            f"{MAX_DP_SECONDS / 60:.0f} min (sktree_lmc.merging._matching.MAX_DP_SECONDS). Use fewer "
            "trees, a smaller depth, or invariances='perm'."
        )


def _dp_table(theta_a, leaves_a, theta_b, leaves_b, depth):
    """(Ma, Mb) table of exact best flip scores, chunked over both ensembles."""
    Ma, Mb = len(theta_a), len(theta_b)
    per_pair = 4 ** (depth - 1) * 8 * 4  # bottom-level keep, swap, V and a temporary
    cols = min(Mb, max(1, _CHUNK_BYTES // per_pair))
    rows = max(1, _CHUNK_BYTES // (per_pair * cols))
    out = np.empty((Ma, Mb))
    for i in range(0, Ma, rows):
        for j in range(0, Mb, cols):
            score, _ = _dp_scores(theta_a[i:i + rows], leaves_a[i:i + rows],
                                  theta_b[j:j + cols], leaves_b[j:j + cols], depth,
                                  diagonal=False)
            out[i:i + rows, j:j + cols] = score.cpu().numpy()
    return out


#: Oblivious trees at least this deep are searched level by level
#: (:mod:`sktree_lmc.model._oblivious`) instead of scoring the enumerated group.
_LEVEL_SEARCH_FROM_DEPTH = 5
#: Tree-pair tables of oblivious trees are exhaustive (exact) through this depth.
_EXHAUSTIVE_TABLE_DEPTH = 6
#: Matched pairs of oblivious trees are searched exhaustively through this depth
#: (0.6 s for 256 pairs at depth 7), by branch and bound beyond.
_EXHAUSTIVE_PAIRS_DEPTH = 7
#: Deeper tables are exact (searched as matched pairs) when ``Ma * Mb * 4**D`` is at most this.
_EXACT_TABLE_BUDGET = 1 << 24


def _uses_level_search(arch):
    return arch.level_search and (arch.ops is None or arch.depth >= _LEVEL_SEARCH_FROM_DEPTH)


def _level_search(theta_a, leaves_a, theta_b, leaves_b, arch, exact=True):
    """Best level order and signs for aligned pairs of oblivious trees.

    Exhaustive through depth 7 (:func:`~sktree_lmc.model._oblivious.exhaustive_search`);
    deeper, the branch and bound's optimum for every pair whose search fits its
    budget, else the local-search optimum. ``exact=False``: the seed (an
    assignment over levels, a lower bound). Returns (perm, sign, score).
    """
    G = torch.bmm(theta_a, theta_b.transpose(1, 2))
    if exact and arch.depth <= _EXHAUSTIVE_PAIRS_DEPTH:
        check_dp_cost(arch, len(G))
        return exhaustive_search(G, leaves_a, leaves_b)
    perm, sign, score, _ = oblivious_search(G, leaves_a, leaves_b, exact=exact, max_iter=0)
    return perm, sign, score


def _level_search_table(theta_a, leaves_a, theta_b, leaves_b, arch):
    """(Ma, Mb) table of the best similarities of oblivious trees, chunked over pairs.

    Exact through depth 6 (exhaustive: about 10 s on one core for 256 x 256
    trees of depth 6; ValueError with the estimate beyond 15 min), and deeper
    when ``Ma * Mb * 4**D <= 2**24``; else the seed of every pair, the
    assignment over levels (a lower bound of the exact maximum, measured within
    1% of it per pair and 0.06% on average at depths 6 to 8)."""
    Ma, Mb = len(theta_a), len(theta_b)
    D = arch.depth
    exhaustive = D <= _EXHAUSTIVE_TABLE_DEPTH
    if exhaustive:
        check_dp_cost(arch, Ma * Mb)
    exact = exhaustive or Ma * Mb * 4 ** D <= _EXACT_TABLE_BUDGET
    L, C = leaves_a.shape[1:]
    pairs = max(1, _CHUNK_BYTES // (8 * (2 * L * C + 8 * D ** 2)) // 4)
    out = torch.empty(Ma * Mb, dtype=torch.float64, device=theta_a.device)
    for s in range(0, Ma * Mb, pairs):
        idx = torch.arange(s, min(s + pairs, Ma * Mb), device=theta_a.device)
        ia, ib = idx // Mb, idx % Mb
        if exhaustive:
            G = torch.bmm(theta_a[ia], theta_b[ib].transpose(1, 2))
            out[idx] = exhaustive_search(G, leaves_a[ia], leaves_b[ib], with_ops=False)[2]
        else:
            out[idx] = _level_search(theta_a[ia], leaves_a[ia], theta_b[ib], leaves_b[ib],
                                     arch, exact=exact)[2]
    return out.reshape(Ma, Mb).cpu().numpy()


def pairwise_tree_similarity(params_a, params_b, arch, *, invariances="all", weighting=True,
                             device="cpu"):
    """Best similarity of every pair of trees over the symmetry group.

    Parameters
    ----------
    params_a, params_b : TreeParams
        Two ensembles of the same shape.
    arch : TreeArchitecture
        Their architecture.
    invariances : {"perm", "all"}, default="all"
        ``"perm"`` scores trees as they are (identity op); ``"all"`` takes the
        maximum over the architecture's symmetry group. Exact for decision
        lists, for non-oblivious trees (dynamic program; a request estimated
        above 15 min on one core raises ValueError with the estimate) and for
        oblivious trees through depth 6 (every op scored; from depth 5
        through a Walsh-Hadamard form of the similarity, and a ValueError
        with the estimate beyond 15 min). Deeper oblivious trees are searched
        without enumerating the group: exact when
        ``M_a * M_b * 4**depth <= 2**24``, else each entry is the seed of the
        search (the assignment over levels), a lower bound of the maximum
        (how close: :ref:`matching`, "Deep trees").
    weighting : bool, default=True
        Scale split parameters by the square root of their node weight.
    device : str or torch.device, default="cpu"
        Where to compute.

    Returns
    -------
    S : ndarray of shape (M_a, M_b)
        ``S[a, b]`` is the best inner product of tree ``a`` with a transformed tree ``b``.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TreeParams, get_architecture, random_ops
    >>> arch = get_architecture("oblivious", 2)
    >>> rng = np.random.RandomState(0)
    >>> a = TreeParams(rng.randn(8, arch.n_nodes, 5), rng.randn(8, arch.n_nodes),
    ...                rng.randn(8, arch.n_free_leaves, 2))
    >>> from sktree_lmc import pairwise_tree_similarity
    >>> perm = rng.permutation(8)
    >>> b = a.permute_trees(perm).apply_ops(random_ops(arch, 8, random_state=0))
    >>> S = pairwise_tree_similarity(a, b, arch)
    >>> S.shape
    (8, 8)
    >>> from scipy.optimize import linear_sum_assignment
    >>> rows, cols = linear_sum_assignment(S, maximize=True)  # as weight_matching does
    >>> bool((perm[cols] == rows).all())  # every tree of a is paired with its copy in b
    True
    """
    device = resolve_device(device)
    if invariances not in ("perm", "all"):
        raise ValueError(f"invariances must be 'perm' or 'all', got {invariances!r}.")
    theta_a, leaves_a = _tensors(params_a, arch, weighting, device)
    theta_b, leaves_b = _tensors(params_b, arch, weighting, device)
    Ma, Mb = len(theta_a), len(theta_b)
    if invariances == "perm" or arch.n_ops == 1:
        fa = torch.cat([theta_a.reshape(Ma, -1), leaves_a.reshape(Ma, -1)], dim=1)
        fb = torch.cat([theta_b.reshape(Mb, -1), leaves_b.reshape(Mb, -1)], dim=1)
        return (fa @ fb.T).cpu().numpy()
    if _uses_level_search(arch):
        return _level_search_table(theta_a, leaves_a, theta_b, leaves_b, arch)
    L, N = arch.n_free_leaves, arch.n_nodes
    if arch.flip_recursive:
        check_dp_cost(arch, Ma * Mb)
        return _dp_table(theta_a, leaves_a, theta_b, leaves_b, arch.depth)
    else:
        per_row = Mb * (N * N + L * L + 4 * len(arch.ops)) * 8
    chunk = max(1, _CHUNK_BYTES // per_row)
    out = np.empty((Ma, Mb))
    cache = {}
    for s in range(0, Ma, chunk):
        sl = slice(s, s + chunk)
        score = _enumerated_scores(
            theta_a[sl], leaves_a[sl], theta_b, leaves_b, arch.ops, diagonal=False, cache=cache
        ).amax(dim=-1)
        out[sl] = score.cpu().numpy()
    return out


def best_ops_for_pairs(params_a, params_b, arch, *, weighting=True, device="cpu"):
    """Best op for each aligned pair of trees ``(a[m], b[m])``.

    Exact for every architecture, with two caveats at depth: non-oblivious
    requests estimated above 15 min on one core raise ValueError with the
    estimate, and for oblivious trees of depth 8 or more the op of a pair is
    the branch-and-bound optimum when the search fits its budget, else the
    local-search optimum (how often each is reached: :ref:`matching`,
    "Deep trees"). Through depth 7 every op of the group is scored.

    Parameters
    ----------
    params_a, params_b : TreeParams
        Ensembles whose trees are already paired by position.
    arch : TreeArchitecture
        Their architecture.
    weighting : bool, default=True
        Node weighting of the similarity.
    device : str or torch.device, default="cpu"
        Where to compute.

    Returns
    -------
    ops : SymmetryOps
        Op ``m`` maximizes the similarity of ``a[m]`` with transformed ``b[m]``.
    scores : ndarray of shape (M,)
        The maximal similarities.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TreeParams, get_architecture, random_ops
    >>> arch = get_architecture("oblivious", 2)
    >>> rng = np.random.RandomState(0)
    >>> a = TreeParams(rng.randn(8, arch.n_nodes, 5), rng.randn(8, arch.n_nodes),
    ...                rng.randn(8, arch.n_free_leaves, 2))
    >>> from sktree_lmc import best_ops_for_pairs
    >>> b = a.apply_ops(random_ops(arch, 8, random_state=0))  # same order, flipped/reordered
    >>> ops, scores = best_ops_for_pairs(a, b, arch)
    >>> bool(np.allclose(b.apply_ops(ops).leaf_value, a.leaf_value, atol=1e-6))
    True
    """
    device = resolve_device(device)
    theta_a, leaves_a = _tensors(params_a, arch, weighting, device)
    theta_b, leaves_b = _tensors(params_b, arch, weighting, device)
    if arch.flip_recursive:
        M = len(theta_a)
        check_dp_cost(arch, M)
        step = max(1, _CHUNK_BYTES // (4 ** (arch.depth - 1) * 8 * 5))
        parts = []
        for s in range(0, M, step):
            sl = slice(s, s + step)
            score, choices = _dp_scores(theta_a[sl], leaves_a[sl], theta_b[sl], leaves_b[sl],
                                        arch.depth, diagonal=True, keep_choices=True)
            parts.append((_dp_traceback(choices, arch.depth), score.cpu().numpy()))
        ops = SymmetryOps(*(np.concatenate([getattr(p[0], f) for p in parts])
                            for f in ("perm", "sign", "leaf_perm")))
        return ops, np.concatenate([p[1] for p in parts])
    if _uses_level_search(arch):
        perm, sign, score = _level_search(theta_a, leaves_a, theta_b, leaves_b, arch)
        ops = _ops_from_node_ops(arch.code, arch.free_leaves, perm.cpu().numpy(),
                                 sign.cpu().numpy())
        return ops, score.cpu().numpy()
    scores = _enumerated_scores(theta_a, leaves_a, theta_b, leaves_b, arch.ops, diagonal=True)
    best = scores.argmax(dim=1).cpu().numpy()  # first maximum: identity wins ties
    return arch.ops[best], scores.max(dim=1).values.cpu().numpy()


def _identity_ops(arch, M):
    return SymmetryOps.identity(M, arch.n_nodes, arch.n_free_leaves)


def _complete_alignment(perm, score, params_a, params_b, arch, *, invariances, weighting,
                        device):
    """Alignment for the tree permutation ``perm``: the identity op per tree
    (``"perm"``, or an architecture without ops), else the best op of every
    matched pair (shared by weight and activation matching)."""
    M = params_a.n_trees
    if invariances == "perm" or arch.n_ops == 1:
        return Alignment(perm, _identity_ops(arch, M), score)
    ops, _ = best_ops_for_pairs(
        params_a, params_b.permute_trees(perm), arch, weighting=weighting, device=device
    )
    return Alignment(perm, ops, score)


def _assign(S, norms_a=None, norms_b=None):
    """Tree permutation maximizing ``sum_m S[m, perm[m]]``, and that sum.

    With the squared norms of the compared vectors, the problem is handed to the
    solver in the equivalent form ``S - |a|^2 / 2 - |b|^2 / 2 = -|a - b|^2 / 2``
    (row and column constants do not change the optimal assignment). On
    near-rank-deficient tables, such as inner products of tree outputs, the
    Jonker-Volgenant solver is several times faster on that form.
    """
    cost = S
    if norms_a is not None:
        cost = S - 0.5 * norms_a[:, None] - 0.5 * norms_b[None, :]
    rows, cols = linear_sum_assignment(cost, maximize=True)
    return cols[np.argsort(rows)], float(S[rows, cols].sum())


def weight_matching(params_a, params_b, arch, *, invariances="all", weighting=True,
                    device="cpu"):
    """Weight matching (Algorithm 2 of the paper) over the symmetry group.

    The tree pairing and the op of each matched pair are exact as described
    in :func:`pairwise_tree_similarity` and :func:`best_ops_for_pairs` (exact
    everywhere except large tables of oblivious trees of depth >= 7, whose
    entries are tight lower bounds, and budget-limited pairs at depth >= 9).

    Parameters
    ----------
    params_a, params_b : TreeParams
        Reference ensemble ``a`` and ensemble ``b`` to align to it.
    arch : TreeArchitecture
        Their architecture.
    invariances : {"none", "perm", "all"}, default="all"
        ``"none"`` returns the identity alignment (naive interpolation),
        ``"perm"`` only permutes trees, ``"all"`` also applies the best
        symmetry op (flips, level orders) to every matched tree.
    weighting : bool, default=True
        Scale split parameters by the square root of their node weight.
    device : str or torch.device, default="cpu"
        Where to compute the similarities.

    Returns
    -------
    Alignment
        Tree permutation and one op per tree that map ``params_b`` onto the
        basis of ``params_a``.

    Raises
    ------
    ValueError
        If a parameter array of ``params_a`` or ``params_b`` (the additive
        table included) holds NaN or an infinity; the message names it.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TreeParams, get_architecture, random_ops
    >>> arch = get_architecture("oblivious", 2)
    >>> rng = np.random.RandomState(0)
    >>> a = TreeParams(rng.randn(8, arch.n_nodes, 5), rng.randn(8, arch.n_nodes),
    ...                rng.randn(8, arch.n_free_leaves, 2))
    >>> from sktree_lmc import weight_matching
    >>> b = a.permute_trees(rng.permutation(8)).apply_ops(random_ops(arch, 8, random_state=0))
    >>> aligned = weight_matching(a, b, arch).apply(b)  # undoes the permutation and the ops
    >>> bool(np.allclose(aligned.split_bias, a.split_bias, atol=1e-6))
    True
    >>> naive = weight_matching(a, b, arch, invariances="none").apply(b)  # identity
    >>> bool(np.allclose(naive.split_bias, b.split_bias))
    True
    """
    device = resolve_device(device)
    _check_invariances(invariances)
    check_finite_params(params_a, "params_a")
    check_finite_params(params_b, "params_b")
    M = params_a.n_trees
    if invariances == "none":
        return Alignment(np.arange(M), _identity_ops(arch, M), float("nan"))
    S = pairwise_tree_similarity(
        params_a, params_b, arch, invariances=invariances, weighting=weighting, device=device
    )
    perm, score = _assign(S)
    return _complete_alignment(perm, score, params_a, params_b, arch,
                               invariances=invariances, weighting=weighting, device=device)


def activation_matching(outputs_a, outputs_b, params_a, params_b, arch, *, invariances="all",
                        weighting=True, device="cpu"):
    """Activation matching (Algorithm 1 of the paper).

    Trees are paired by the inner product of their flattened outputs on the
    same samples (one linear assignment); the op of each matched pair is then
    chosen by weighted parameter similarity, since a tree's output is
    invariant under its symmetry ops.

    Parameters
    ----------
    outputs_a, outputs_b : ndarray of shape (n_samples, M, C)
        Per-tree outputs of both models on the same samples.
    params_a, params_b : TreeParams
        Parameters of both models.
    arch : TreeArchitecture
        Their architecture.
    invariances : {"none", "perm", "all"}, default="all"
        As in :func:`weight_matching`.
    weighting : bool, default=True
        Node weighting of the op selection.
    device : str or torch.device, default="cpu"
        Where to compute.

    Returns
    -------
    Alignment
        Tree permutation and one op per tree that map ``params_b`` onto the
        basis of ``params_a``.

    Raises
    ------
    ValueError
        If a parameter array of ``params_a`` or ``params_b`` (the additive
        table included) holds NaN or an infinity; the message names it.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, activation_matching
    >>> X, y = make_classification(n_samples=200, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=3, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> alignment = activation_matching(a.tree_outputs(X), b.tree_outputs(X),
    ...                                 a.tree_params_, b.tree_params_, a.architecture_)
    >>> sorted(alignment.tree_perm.tolist()) == list(range(8))
    True
    """
    device = resolve_device(device)
    _check_invariances(invariances)
    check_finite_params(params_a, "params_a")
    check_finite_params(params_b, "params_b")
    M = params_a.n_trees
    if invariances == "none":
        return Alignment(np.arange(M), _identity_ops(arch, M), float("nan"))
    oa = torch.as_tensor(np.asarray(outputs_a), dtype=torch.float64, device=device)
    ob = torch.as_tensor(np.asarray(outputs_b), dtype=torch.float64, device=device)
    oa = oa.permute(1, 0, 2).reshape(M, -1)
    ob = ob.permute(1, 0, 2).reshape(M, -1)
    S = (oa @ ob.T).cpu().numpy()
    perm, score = _assign(S, (oa * oa).sum(1).cpu().numpy(), (ob * ob).sum(1).cpu().numpy())
    return _complete_alignment(perm, score, params_a, params_b, arch,
                               invariances=invariances, weighting=weighting, device=device)

"""The vectorized forward pass of a soft tree ensemble (one code path for all architectures).

The whole ensemble is a handful of tensor operations, with no Python loop over
trees or samples (in the spirit of NODE's ODST):

1. all split logits of all trees at once, one matmul, node-major:
   ``z = W @ X.T + b`` with ``W`` of shape ``(N * M, F)``, viewed as ``(N, M, B)``;
2. the two-sided sigmoids ``s = sigmoid([z, -z])``, shape ``(2N, M, B)``;
3. the leaf routing probabilities ``mu`` of shape ``(L, M, B)`` as products of
   sigmoids along each root-to-leaf path (Eq. 2), computed level by level,
   each step one elementwise product over all trees and samples. The steps are
   derived once from the architecture's ``code`` table
   (:func:`routing_plan`), so every architecture runs the same code;
4. the leaf values: ``out = (pi.T @ mu.reshape(L * M, B)).T`` (Eq. 3-4).

Steps 2-3 are one autograd function (:class:`_Routing`) whose backward pass is
closed-form and driven by the same schedule: with ``h = grad_mu * mu`` and
``H_n^left``, ``H_n^right`` the sums of ``h`` over the leaves left and right of
node ``n`` (one matmul with the schedule's sigmoid-leaf incidence matrix where
sigmoids are shared among positions, as in oblivious trees; one reverse sweep
over the schedule elsewhere),

.. math:: \\partial z_n = \\sigma(-z_n) H_n^{left} - \\sigma(z_n) H_n^{right}.

Step 4 is a second small autograd function that picks matmul layouts that are
fast on CPUs. Together they avoid autograd's bookkeeping for every product and
make training several times faster than a log-space formulation
(``logsigmoid`` and a routing matmul) on CPUs; see ``benchmarks/``.

Computing ``sigmoid(z)`` and ``sigmoid(-z)`` from the same ``z`` (rather than
``1 - sigmoid(z)``) makes a subtree flip (``w, b -> -w, -b``) exactly
symmetric: the flipped tree's leaf probabilities are bit-identical to the
original ones, permuted.

Prediction (:func:`predict_chunked`) runs steps 1-4 without autograd on
fixed-size row chunks; for the ensemble output of oblivious trees it replaces
the leaf probabilities of steps 2-3 by the monomials of the centred sigmoids
``u = sigmoid(z) - 1/2`` and the leaf values of step 4 by their Walsh-Hadamard
transform (:class:`MonomialPlan`): the same polynomial, with about half the
elementwise work. The additive table is looked up with ``embedding_bag``
(:func:`additive_chunked`).
"""

from __future__ import annotations

import copy
import functools
import math
import operator
import os
import weakref

import numpy as np
import torch
from torch import nn

from . import _kernel
from ._architectures import ARCHITECTURES, MAX_LEAVES_PER_TREE, check_model_size
from ._params import TreeParams

__all__ = [
    "SoftTreeEnsembleModule",
    "check_routing_memory",
    "inference_chunk_rows",
    "predict_chunked",
    "reference_forward",
    "routing_plan",
    "used_features",
]


#: Plans already built, per architecture object (weakly referenced, so an
#: architecture's plan lives as long as the architecture; the tables of
#: :func:`~sktree_lmc.model._architectures.get_architecture` are themselves cached).
_PLANS = weakref.WeakKeyDictionary()


def routing_plan(arch):
    """Derive the product schedule of the leaf probabilities from ``arch.code``.

    The structural tree is rebuilt from the table: the root holds all leaves;
    a position holding several leaves is split by the first node that lies on
    the path of all of them (``code[l, n] != 0``) and is not used above it;
    leaves with ``code = +1`` go left, ``-1`` right. Positions that lead to no
    free leaf (the fixed-zero leaf of the modified decision list) are pruned.

    The plan is built once per architecture object and cached. It is built
    level by level with array operations: all positions of one depth at once,
    each leaf looking only at the nodes on its own path (the nonzero entries
    of its code row), so the cost is about ``n_leaves * depth**2`` (plus one
    pass over the table), not the number of positions times the table's size.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table.

    Returns
    -------
    steps : tuple of tuple (parent, sig, leaf)
        Step ``i`` computes position ``i`` as ``pos[parent] * s[sig]``
        (``parent = -1``: the root, probability 1), where ``s`` is the
        ``(2N, ...)`` stack of ``sigmoid(z)`` (rows ``0..N-1``) and
        ``sigmoid(-z)`` (rows ``N..2N-1``). ``leaf`` is the index of the free
        leaf that position ``i`` is, or ``-1`` for an inner position. Steps
        are in depth-first order, left (``+1``) before right: a parent comes
        before its children.

    Raises
    ------
    ValueError
        If the table does not describe a binary tree.
    """
    return _cached_per_architecture(_PLANS, arch, _build_routing_plan)


def _cached_per_architecture(cache, arch, build):
    """``build(arch)``, kept in ``cache`` (a weak-key dictionary) so that it
    is built once per architecture object; an object that cannot be a weak
    key is built at every call."""
    try:
        return cache[arch]
    except (KeyError, TypeError):  # not built yet, or an object that cannot be a key
        pass
    value = build(arch)
    try:
        cache[arch] = value
    except TypeError:  # pragma: no cover - unhashable or not weakly referenceable
        pass
    return value


def _build_routing_plan(arch):
    """The plan of :func:`routing_plan`, computed level by level."""
    code = np.asarray(arch.code)
    n_leaves, n_nodes = code.shape
    free_leaves = np.asarray(arch.free_leaves, dtype=np.int64)
    free_index = np.full(n_leaves, -1, dtype=np.int64)
    free_index[free_leaves] = np.arange(len(free_leaves))

    def not_a_tree():
        return ValueError(f"code table of {arch.name!r} is not a binary tree")

    # The nodes on every leaf's path: (leaf, node) pairs, nodes ascending per leaf.
    pair_leaf, pair_node = np.nonzero(code)
    path_length = np.bincount(pair_leaf, minlength=n_leaves)
    # Positions still to split: ``group[k]`` of every active leaf ``k`` (index
    # into this level's groups), each group's step (-1: the root) and size.
    active = np.arange(n_leaves) if n_leaves > 1 else np.zeros(0, dtype=np.int64)
    group = np.zeros(n_leaves, dtype=np.int64)
    group_step = np.array([-1])
    group_size = np.array([n_leaves])
    depth_of = np.zeros(n_leaves, dtype=np.int64)  # path length at which a leaf ends
    keep = np.isin(pair_leaf, active)
    pair_leaf, pair_node = pair_leaf[keep], pair_node[keep]
    parents, sigs, leaves, left_sibling = [], [], [], []  # per level, in creation order
    n_steps, level = 0, 0
    while len(active):
        n_groups = len(group_step)
        # 1. each group's node: the smallest unused node on the path of all its leaves
        key = group[pair_leaf] * n_nodes + pair_node
        uniq, counts = np.unique(key, return_counts=True)
        g_of, node_of = np.divmod(uniq, n_nodes)
        full = counts == group_size[g_of]
        g_full, first = np.unique(g_of[full], return_index=True)
        if len(g_full) != n_groups:
            raise not_a_tree()
        node = node_of[full][first]  # (n_groups,), g_full is arange(n_groups)
        # 2. split every group by the sign of its leaves at its node
        sign = code[active, node[group[active]]]
        side = (sign < 0).astype(np.int64)  # 0: left (+1), 1: right (-1)
        child = group[active] * 2 + side  # child position of each active leaf
        size = np.bincount(child, minlength=2 * n_groups)
        if np.any(size == 0):  # a node that does not split its position
            raise not_a_tree()
        n_free = np.bincount(child, weights=free_index[active] >= 0, minlength=2 * n_groups)
        made = np.flatnonzero(n_free > 0)  # children leading to a free leaf: one step each
        ids = n_steps + np.arange(len(made))
        step_of_child = np.full(2 * n_groups, -1, dtype=np.int64)
        step_of_child[made] = ids
        made_g, made_side = np.divmod(made, 2)
        parents.append(group_step[made_g])
        sigs.append(node[made_g] + made_side * n_nodes)
        single = size[made] == 1
        leaf = np.full(len(made), -1, dtype=np.int64)
        # the one leaf of each singleton child: the last active leaf written there
        last = np.full(2 * n_groups, -1, dtype=np.int64)
        last[child] = active
        leaf[single] = free_index[last[made[single]]]
        leaves.append(leaf)
        left = step_of_child[made_g * 2]
        left_sibling.append(np.where(made_side == 1, left, -1))
        n_steps += len(made)
        level += 1
        # 3. the next level: children with several leaves, of which one is free
        used = node[group[pair_leaf]] == pair_node  # each pair's node just used
        next_child = made[~single]
        depth_of[active] = level
        new_group = np.full(2 * n_groups, -1, dtype=np.int64)
        new_group[next_child] = np.arange(len(next_child))
        g_new = new_group[child]
        still = g_new >= 0
        active, group_of_active = active[still], g_new[still]
        group = np.zeros(n_leaves, dtype=np.int64)
        group[active] = group_of_active
        group_step = step_of_child[next_child]
        group_size = size[next_child]
        keep = np.zeros(n_leaves, dtype=bool)
        keep[active] = True
        keep = keep[pair_leaf] & ~used
        pair_leaf, pair_node = pair_leaf[keep], pair_node[keep]

    # Each free leaf's path must use exactly the nodes of its code row: the path
    # uses distinct nodes of the row, with the row's signs, so it is enough that
    # the row has no other nonzero entry.
    if np.any(path_length[free_leaves] != depth_of[free_leaves]):
        raise not_a_tree()
    if not n_steps:  # one leaf: no split to compute it with
        raise not_a_tree()
    parent = np.concatenate(parents)
    sig = np.concatenate(sigs)
    leaf = np.concatenate(leaves)
    sibling = np.concatenate(left_sibling)
    # depth-first order: subtree sizes bottom-up, then positions top-down
    subtree = np.ones(n_steps, dtype=np.int64)
    bounds = np.cumsum([0] + [len(p) for p in parents])
    for lo, hi in zip(bounds[-2::-1], bounds[:0:-1]):
        below = parent[lo:hi]
        inner = below >= 0
        np.add.at(subtree, below[inner], subtree[lo:hi][inner])
    order = np.empty(n_steps, dtype=np.int64)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        p = parent[lo:hi]
        base = np.where(p >= 0, order[np.maximum(p, 0)], -1) + 1
        sib = sibling[lo:hi]
        order[lo:hi] = base + np.where(sib >= 0, subtree[np.maximum(sib, 0)], 0)
    out_parent = np.where(parent >= 0, order[np.maximum(parent, 0)], -1)
    steps = np.empty((n_steps, 3), dtype=np.int64)
    steps[order] = np.stack([out_parent, sig, leaf], axis=1)
    return tuple(map(tuple, steps.tolist()))


def _routing_elements_per_row(arch, training):
    """Routing intermediates of one row and one tree, in elements.

    Inference (:func:`predict_chunked`): split logits, two-sided sigmoids,
    leaf and inner-position probabilities, ``3N + L + inner``. Training adds
    the backward pass (:func:`_route_backward`: the gradient of the leaves,
    sums over the positions and sigmoids, the logits' gradient), about
    ``5N + 2L + 2 inner`` at its peak.
    """
    steps = routing_plan(arch)
    n_inner = sum(1 for parent, _, leaf in steps if leaf < 0 and parent >= 0)
    N, L = arch.n_nodes, arch.n_free_leaves
    return 5 * N + 2 * L + 2 * n_inner if training else 3 * N + L + n_inner


def _check_tree_size(arch, n_trees, n_features, n_outputs):
    """Refuse trees of more than :data:`MAX_LEAVES_PER_TREE` leaves before their
    routing schedule is built (which alone takes seconds past depth 17), with
    the estimates of :func:`~sktree_lmc.model._architectures.check_model_size`."""
    if arch.n_leaves <= MAX_LEAVES_PER_TREE:
        return
    name, depth = getattr(arch, "name", None), getattr(arch, "depth", None)
    if name in ARCHITECTURES and isinstance(depth, (int, np.integer)):
        check_model_size(name, depth, n_trees, n_features, n_outputs)  # raises
    raise ValueError(
        f"arch={name!r} with depth={depth} is not supported: its trees have "
        f"{arch.n_leaves:,} leaves each, more than the limit of {MAX_LEAVES_PER_TREE:,} "
        f"(MAX_LEAVES_PER_TREE). Use a smaller depth (and more trees)."
    )


@functools.lru_cache(maxsize=None)
def _memory_of(kind, index):
    """Bytes of memory of a device: the GPU's for CUDA, else the machine's
    physical memory; None when unknown."""
    if kind == "cuda":
        return int(torch.cuda.get_device_properties(index or 0).total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def _memory_bytes(device):
    device = torch.device(device)
    return _memory_of(device.type, device.index)


def check_routing_memory(arch, n_trees, rows, device="cpu", itemsize=4, training=False):
    """Raise a ValueError, with the estimate, if the routing buffers of ``rows``
    rows cannot fit in the memory of ``device``.

    The routing buffers grow with the number of leaves and inner positions
    of the architecture (``2**depth`` each for oblivious and non-oblivious
    trees), times the trees, times the rows of a chunk or minibatch; deep
    trees would otherwise exhaust memory in the middle of ``fit`` or
    ``predict``.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table.
    n_trees : int
        Number of trees ``M``.
    rows : int
        Rows computed at once (a prediction chunk or a minibatch).
    device : str or torch.device, default="cpu"
        Where they are computed.
    itemsize : int, default=4
        Bytes per element (float32: 4).
    training : bool, default=False
        Whether the backward pass's buffers count too.

    Raises
    ------
    TypeError
        If ``n_trees``, ``rows`` or ``itemsize`` is not an integer.
    ValueError
        If ``rows`` rows need more bytes than the device's memory.
    """
    # Python ints: a NumPy integer (n_estimators=np.int8(4)) would overflow
    n_trees, rows, itemsize = (operator.index(v) for v in (n_trees, rows, itemsize))
    per_row = itemsize * n_trees * _routing_elements_per_row(arch, training)
    memory = _memory_bytes(device)
    if memory is None or rows * per_row <= memory:
        return
    name = getattr(arch, "name", "?")
    depth = getattr(arch, "depth", "?")
    raise ValueError(
        f"arch={name!r} with depth={depth} and {n_trees} trees needs about "
        f"{per_row / 2**20:.4g} MiB of routing buffers per row "
        f"({'training' if training else 'prediction'}, {arch.n_free_leaves} leaves per tree), "
        f"{rows * per_row / 2**30:.4g} GiB for {rows} row(s) at once: more than the "
        f"{memory / 2**30:.4g} GiB of memory of the device ({torch.device(device).type}). "
        "Use a smaller depth or fewer trees (or a smaller batch_size)."
    )


def _route_forward(z, steps, n_leaves, buffers=None, exact_complement=True):
    """Two-sided sigmoids ``s`` (2N, ...) and leaf probabilities ``mu`` (L, ...).

    ``buffers``, when given, is ``(s, mu, inner)`` as made by
    :func:`_routing_buffers`: the results are written there instead of into
    new tensors (the inference kernel reuses one set of buffers per chunk).
    ``exact_complement=False`` computes ``sigmoid(-z)`` as ``1 - sigmoid(z)``
    (one exponential fewer; absolute error at most one float32 ulp of 1,
    6e-8), which the inference kernel uses; training keeps ``sigmoid(-z)``,
    which makes subtree flips exactly symmetric.

    With a :class:`MonomialPlan` (oblivious trees, inference only) in place of
    ``steps``, the routing products are the plan's monomials instead
    (:func:`_monomials_forward`): ``(u, mono)`` is returned, ``mono`` of shape
    ``(2**N - 1, ...)``; ``n_leaves`` and ``exact_complement`` are then unused.
    """
    if isinstance(steps, MonomialPlan):
        return _monomials_forward(z, steps, buffers)
    n_nodes = z.shape[0]
    if buffers is None:
        s = z.new_empty((2 * n_nodes,) + z.shape[1:])
        mu = z.new_empty((n_leaves,) + z.shape[1:])
        inner = [None] * len(steps)
    else:
        s, mu, inner = buffers
    torch.sigmoid(z, out=s[:n_nodes])
    if exact_complement:
        torch.neg(z, out=s[n_nodes:])
        s[n_nodes:].sigmoid_()
    else:
        torch.neg(s[:n_nodes], out=s[n_nodes:]).add_(1)
    pos = [None] * len(steps)
    for i, (parent, sig, leaf) in enumerate(steps):
        if leaf >= 0:
            if parent < 0:
                mu[leaf].copy_(s[sig])
            else:
                torch.mul(pos[parent], s[sig], out=mu[leaf])
            pos[i] = mu[leaf]
        elif parent < 0:
            pos[i] = s[sig]
        elif inner[i] is None:
            pos[i] = pos[parent] * s[sig]
        else:
            pos[i] = torch.mul(pos[parent], s[sig], out=inner[i])
    return s, mu


class MonomialPlan:
    """The inference routing of oblivious trees of depth ``D``: monomials of
    the centred sigmoids instead of leaf probabilities.

    An oblivious tree uses one split per level, ``s_d = sigmoid(z_d)``; with
    ``u_d = s_d - 1/2`` its leaf probabilities are
    ``mu_l = prod_d (1/2 + sign_ld u_d)`` (``sign_ld = +1`` where leaf ``l``
    goes left at level ``d``), so its output is a multilinear polynomial in
    ``u``:

    .. math::

        \\sum_l v_l \\mu_l = \\sum_{S \\subseteq \\{0, \\dots, D-1\\}} c_S \\prod_{d \\in S} u_d,

    whose ``2**D`` coefficients are a Walsh-Hadamard transform of the leaf
    values (:func:`monomial_coefficients`, in float64, once per call). The
    ``2**D - 1`` non-constant monomials of every tree are built level by
    level, ``D`` of them (the ``u_d``) in place of the split logits and the
    others one product each, ``2**D - 1 - D`` products per tree and row
    against about ``2**(D+1)`` for the leaf probabilities, in
    ``max(0, 2D - 3)`` elementwise products over all trees; the contraction
    with the coefficients is one matmul as for the leaf probabilities, and
    the constant monomial's coefficients add up to a bias. Every term is at
    most ``max |v_l|`` in magnitude (``|u_d| < 1/2``,
    ``|c_S| <= 2**|S| max |v_l|``), but a tree's terms cancel where its splits
    are sharp: summed tree by tree (:func:`predict_chunked` orders the
    contraction so), the float32 rounding stays at the level of the
    leaf-probability path (``tests/test_fast_predict.py``; on the default
    models of ``benchmarks/bench_predict.py``, decision values 1.4-1.6e-5 from
    a float64 forward, against 1.4-1.7e-5).

    Row ``r`` of the monomials is the product of the ``u_d`` of the bits
    ``d`` of ``order[r]``: the ``D`` singletons first (``order[d] = 2**d``),
    then, for ``d = 1 .. D-1``, the products of ``u_d`` with every monomial
    over the nodes above it (the singletons ``u_0 .. u_{d-1}``, then the
    products made so far), so that each level reads two contiguous blocks.

    Parameters
    ----------
    depth : int
        ``D``, the number of split nodes of a tree (at least 1).

    Attributes
    ----------
    depth : int
    n_monomials : int
        ``2**D - 1``, the rows of the monomials (the constant one left out).
    order : tuple of int
        The subset (bitmask over the nodes) of every row.
    products : tuple of tuple (src_start, src_stop, node, dst_start)
        The elementwise products, in order: ``mono[dst : dst + n] =
        mono[src_start:src_stop] * mono[node]`` with ``dst = dst_start`` and
        ``n = src_stop - src_start``.
    """

    __slots__ = ("depth", "n_monomials", "order", "products")

    def __init__(self, depth):
        depth = operator.index(depth)
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}.")
        order, products = [1 << d for d in range(depth)], []
        for d in range(1, depth):
            made = len(order) - depth  # products so far, in rows depth .. len(order)
            products.append((0, d, d, len(order)))
            order.extend(k | 1 << d for k in order[:d])
            if made:
                products.append((depth, depth + made, d, len(order)))
                order.extend(k | 1 << d for k in order[depth : depth + made])
        self.depth = depth
        self.n_monomials = len(order)
        self.order = tuple(order)
        self.products = tuple(products)

    def __repr__(self):
        return f"MonomialPlan(depth={self.depth})"


#: Monomial plans per architecture object (None: not an oblivious table).
_MONOMIAL_PLANS = weakref.WeakKeyDictionary()


def monomial_plan(arch):
    """The :class:`MonomialPlan` of ``arch``, or None when it is not oblivious.

    An architecture qualifies when its code table is the full oblivious table
    (checked, not assumed from the name): ``N`` nodes, ``2**N`` free leaves in
    order, leaf ``l`` going left (``+1``) at node ``d`` exactly when bit
    ``N - 1 - d`` of ``l`` is 0, as in ``get_architecture("oblivious", N)``
    (and in every architecture of depth 1, a single split).

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table.

    Returns
    -------
    MonomialPlan or None
    """
    return _cached_per_architecture(_MONOMIAL_PLANS, arch, _build_monomial_plan)


def _build_monomial_plan(arch):
    """The plan of :func:`monomial_plan`, or None."""
    code = np.asarray(arch.code)
    n_leaves, n_nodes = code.shape
    plan = None
    if (1 <= n_nodes <= MAX_MONOMIAL_DEPTH and n_leaves == 1 << n_nodes
            and np.array_equal(np.asarray(arch.free_leaves), np.arange(n_leaves))):
        shift = n_nodes - 1 - np.arange(n_nodes)
        bits = (np.arange(n_leaves)[:, None] >> shift[None, :]) & 1
        if np.array_equal(code, 1 - 2 * bits):
            plan = MonomialPlan(n_nodes)
    return plan


#: The deepest oblivious trees predicted through monomials (:class:`MonomialPlan`);
#: deeper ones keep the leaf probabilities. Measured (64 trees up to depth 8, 8
#: at depths 10 and 12, trained-like magnitudes, against a float64 forward): the
#: largest error relative to the largest output was 0.8-1.3 times the leaf
#: probabilities' (3.6e-6 against 2.9e-6 at depth 8, 7.0e-6 against 5.6e-6 at
#: depth 12), the monomials 1.4 (depth 4) to 22 (depth 12) times faster.
MAX_MONOMIAL_DEPTH = 12


def monomial_coefficients(leaf_value):
    """Coefficients of the oblivious trees' polynomials (:class:`MonomialPlan`).

    Parameters
    ----------
    leaf_value : torch.Tensor of shape (M, 2**D, C)
        Leaf values of oblivious trees of depth ``D``, leaves in the order of
        the oblivious code table.

    Returns
    -------
    torch.Tensor of shape (M, 2**D, C), float64
        ``c[m, k]``: the coefficient of the product of the ``u_d`` over the
        bits ``d`` of ``k`` in tree ``m`` (``k = 0``: the constant).
    """
    M, L, C = leaf_value.shape
    D = L.bit_length() - 1
    c = leaf_value.detach().to(torch.float64).reshape((M,) + (2,) * D + (C,))
    for d in range(D):  # axis 1 + d: node d, index 0 left (s = 1/2 + u), 1 right
        left, right = c.select(1 + d, 0), c.select(1 + d, 1)
        c = torch.stack([(left + right) * 0.5, left - right], dim=1 + d)
    # k = sum of 2**d over the nodes d of the monomial: node 0 the fastest axis
    return c.permute((0,) + tuple(range(D, 0, -1)) + (D + 1,)).reshape(M, L, C)


def _monomial_buffers(plan, mono):
    """``(u, mono, products)`` for :func:`_monomials_forward`: the monomials
    ``mono`` (n_monomials, ...) given (any strides), ``u`` its first ``D`` rows
    (where the centred sigmoids are computed), and the views of every
    product, made once."""
    products = tuple((mono[start:stop], mono[node], mono[dst : dst + stop - start])
                     for start, stop, node, dst in plan.products)
    return mono[: plan.depth], mono, products


def _monomials_forward(z, plan, buffers=None):
    """The monomials of ``u = sigmoid(z) - 1/2`` (:class:`MonomialPlan`):
    ``(u, mono)`` with ``z`` of shape (D, ...), ``mono`` (n_monomials, ...).
    ``buffers`` as made by :func:`_routing_buffers` or
    :func:`_monomial_buffers`."""
    if buffers is None:
        buffers = _routing_buffers(plan, z.shape[0], 0, tuple(z.shape[1:]), z.dtype, z.device)
    u, mono, products = buffers
    torch.sigmoid(z, out=u)
    u.sub_(0.5)
    for below, u_d, above in products:
        torch.mul(below, u_d, out=above)
    return u, mono


def _routing_buffers(steps, n_nodes, n_leaves, shape, dtype, device):
    """Preallocated ``(s, mu, inner)`` for :func:`_route_forward` on logits of ``(N,) + shape``.

    With a :class:`MonomialPlan`, the buffers of :func:`_monomial_buffers`, whose
    monomials ``(n_monomials,) + shape`` are stored tree by tree: their
    ``transpose(0, 1)`` is contiguous (see :func:`predict_chunked`)."""
    if isinstance(steps, MonomialPlan):  # (n_monomials, M, ...) views of a tree-major buffer
        mono = torch.empty((shape[0], steps.n_monomials) + tuple(shape[1:]), dtype=dtype,
                           device=device).transpose(0, 1)
        return _monomial_buffers(steps, mono)
    s = torch.empty((2 * n_nodes,) + shape, dtype=dtype, device=device)
    mu = torch.empty((n_leaves,) + shape, dtype=dtype, device=device)
    inner = [
        torch.empty(shape, dtype=dtype, device=device) if leaf < 0 and parent >= 0 else None
        for parent, _, leaf in steps
    ]
    return s, mu, inner


@functools.lru_cache(maxsize=64)
def _sigmoid_incidence(steps, n_sigs, n_leaves, dtype, device):
    """``R`` of shape ``(n_sigs, n_leaves)``: ``R[k, l] = 1`` when the path of
    free leaf ``l`` goes through the two-sided sigmoid ``s[k]`` (the schedule
    ``steps`` of :func:`routing_plan` as a matrix), made once per dtype and
    device (no host-to-device copy per backward pass on a GPU)."""
    incidence = np.zeros((n_sigs, n_leaves), dtype=np.float32)
    path = [()] * len(steps)
    for i, (parent, sig, leaf) in enumerate(steps):  # parents come first
        path[i] = (path[parent] if parent >= 0 else ()) + (sig,)
        if leaf >= 0:
            incidence[list(path[i]), leaf] = 1.0
    return torch.as_tensor(incidence, dtype=dtype, device=device)


def _accumulate(sums, owned, key, value):
    """``sums[key] += value``, in place once ``sums[key]`` is a tensor of our own."""
    if sums[key] is None:
        sums[key] = value
    elif owned[key]:
        sums[key].add_(value)
    else:
        sums[key] = sums[key] + value
        owned[key] = True


def _sweep_sums(h, steps, n_sigs):
    """``per_sig[k]``: the sum of ``h`` over the free leaves reached through
    ``s[k]`` (None: none), by a reverse sweep of elementwise sums over the
    schedule's positions."""
    # below[i]: sum of h over the free leaves under position i (children come
    # after their parent in ``steps``, so one reverse sweep suffices).
    below, owned = [None] * len(steps), [False] * len(steps)
    for i in range(len(steps) - 1, -1, -1):
        parent, _, leaf = steps[i]
        if leaf >= 0:
            below[i] = h[leaf]
        if parent >= 0:
            _accumulate(below, owned, parent, below[i])
    # per_sig[k]: sum of ``below`` over the positions reached through s[k].
    per_sig, owned = [None] * n_sigs, [False] * n_sigs
    for i, (_, sig, _) in enumerate(steps):
        _accumulate(per_sig, owned, sig, below[i])
    return per_sig


@functools.lru_cache(maxsize=64)
def _sums_by_matmul(steps):
    """Whether :func:`_route_backward` sums ``h`` per sigmoid with one matmul
    (True) or with the sweep (False): the matmul when some sigmoid is reached
    through several positions of the schedule.

    That is the case of oblivious trees, whose sigmoids are shared by all the
    positions of their depth: the sweep then adds a row per position on top
    of the sums under each position, and one matmul that reads the ``L`` rows
    of ``h`` once is cheaper. Elsewhere (non-oblivious trees, decision
    lists) every sigmoid belongs to one position, the sweep has no sums per
    sigmoid to do, and it is faster than the matmul's ``2N``-row output or
    within 13 % of it (at depth 6, where both take about 0.3 ms). Measured
    (one thread, 512 rows, 256 trees at depths 2 and 4, 64 at depth 6; time
    of the sweep / time of the matmul): oblivious 1.30, 2.51, 2.88;
    non-oblivious 0.93, 0.88, 0.66; decision lists 0.85, 0.96, 1.13;
    modified decision lists 0.54, 0.80, 1.02.
    """
    sigs = [sig for _, sig, _ in steps]
    return len(set(sigs)) < len(sigs)


def _route_backward(s, h, steps):
    """Gradient w.r.t. ``z`` given ``h = grad_mu * mu`` (closed form, see module doc).

    The sums of ``h`` over the leaves reached through every sigmoid are either
    one matmul with the schedule's incidence matrix
    (:func:`_sigmoid_incidence`, ``(2N, L) @ (L, M * B)``) or a sweep of
    elementwise sums over the schedule's positions (:func:`_sweep_sums`),
    whichever :func:`_sums_by_matmul` says is cheaper for the schedule. Both
    give the same sums up to float32 rounding (a different order of the
    additions).
    """
    n_nodes = s.shape[0] // 2
    n_leaves = h.shape[0]
    # d mu_l / d z_n = mu_l * sigmoid(-z_n) through s[n], -mu_l * sigmoid(z_n) through s[n + N]
    if _sums_by_matmul(steps):
        incidence = _sigmoid_incidence(steps, 2 * n_nodes, n_leaves, h.dtype, h.device)
        per_sig = (incidence @ h.reshape(n_leaves, -1)).view((2 * n_nodes,) + h.shape[1:])
        grad_z = per_sig[:n_nodes].mul_(s[n_nodes:])
        return grad_z.addcmul_(s[:n_nodes], per_sig[n_nodes:], value=-1)
    per_sig = _sweep_sums(h, steps, 2 * n_nodes)
    grad_z = torch.empty_like(s[:n_nodes])
    for n in range(n_nodes):
        left, right = per_sig[n], per_sig[n + n_nodes]
        if left is not None:
            torch.mul(s[n + n_nodes], left, out=grad_z[n])
        else:
            grad_z[n].zero_()
        if right is not None:
            grad_z[n].addcmul_(s[n], right, value=-1)
    return grad_z


class _Routing(torch.autograd.Function):
    """Leaf probabilities ``mu`` (L, ...) from split logits ``z`` (N, ...)."""

    @staticmethod
    def forward(ctx, z, steps, n_leaves):
        s, mu = _route_forward(z, steps, n_leaves)
        ctx.steps = steps
        ctx.save_for_backward(s, mu)
        return mu

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_mu):
        s, mu = ctx.saved_tensors
        return _route_backward(s, grad_mu * mu, ctx.steps), None, None


def _leaf_gradients(pi, grad_t):
    """``pi @ grad_t``: the gradient of every leaf probability, ``(L * M, C)
    @ (C, B)``. For two outputs, two broadcast products instead: a GEMM of
    inner dimension 2 runs far below the speed of memory on CPUs (the
    largest kernel of the default training step in a profile; measured in
    ``docs/benchmarks.md``, "The training step's profile")."""
    if pi.shape[1] != 2:
        return pi @ grad_t
    return torch.mul(pi[:, :1], grad_t[0]).addcmul_(pi[:, 1:], grad_t[1])


class _Ensemble(torch.autograd.Function):
    """Ensemble output ``(B, C)`` from split logits ``z`` (N, M, B) and leaf values.

    ``pi`` is the leaf values in leaf-major layout ``(L * M, C)``. Routing and
    leaf contraction in one function let the backward pass reuse its buffers
    and pick matmul layouts that are fast on CPUs.
    """

    @staticmethod
    def forward(ctx, z, pi, steps):
        n_leaves = pi.shape[0] // z.shape[1]
        s, mu = _route_forward(z, steps, n_leaves)
        mu = mu.view(pi.shape[0], z.shape[2])
        ctx.steps = steps
        ctx.save_for_backward(s, mu, pi)
        return (pi.T @ mu).T

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        s, mu, pi = ctx.saved_tensors
        grad_t = grad_out.T.contiguous()  # (C, B)
        grad_pi = mu @ grad_t.T if ctx.needs_input_grad[1] else None
        grad_z = None
        if ctx.needs_input_grad[0]:
            h = _leaf_gradients(pi, grad_t).mul_(mu)  # grad_mu * mu, in a buffer of our own
            grad_z = _route_backward(s, h.view((-1,) + s.shape[1:]), ctx.steps)
        return grad_z, grad_pi, None


def member_of_trees(n_trees, n_members):
    """The member of every tree: ``n_members`` consecutive groups of trees whose
    sizes differ by at most one (``member[m] = m * n_members // n_trees``).

    Parameters
    ----------
    n_trees : int
        Number of trees ``M``.
    n_members : int
        Number of members, from 1 to ``M``.

    Returns
    -------
    ndarray of shape (n_trees,)
        The member index of each tree (int64), nondecreasing.
    """
    if not 1 <= n_members <= n_trees:
        raise ValueError(
            f"n_members={n_members} must be between 1 and the number of trees ({n_trees}): "
            "every member needs a tree."
        )
    return np.arange(n_trees, dtype=np.int64) * n_members // n_trees


def split_init_bound(split_init, n_features):
    """Bound ``c`` of the ``U(-c, c)`` initialization of split weights and biases.

    Parameters
    ----------
    split_init : "fan_in" or float
        ``"fan_in"`` gives ``1/sqrt(n_features)`` (a fully connected layer with
        ``n_features`` inputs, so the initial split logits have the same scale
        for any ``F``); a positive float is used as the bound itself.
    n_features : int
        Number of input features ``F``.

    Returns
    -------
    bound : float
    """
    message = f"split_init must be 'fan_in' or a positive float, got {split_init!r}."
    if isinstance(split_init, str):
        if split_init != "fan_in":
            raise ValueError(message)
        # no feature (every input column constant, which the piecewise-linear
        # encoding drops): the splits are their biases alone, a layer of fan-in 1
        return 1.0 / math.sqrt(max(n_features, 1))
    bound = float(split_init)
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(message)
    return bound


class SoftTreeEnsembleModule(nn.Module):
    """PyTorch module computing the sum of ``M`` soft trees of one architecture.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table (routing code, free leaves).
    n_trees : int
        Number of trees ``M``.
    n_features : int
        Number of input features ``F``.
    n_outputs : int
        Output dimension ``C`` (classes, or regression targets).
    generator : torch.Generator, optional
        Generator for the initialization. Parameters are drawn on the CPU so
        that initialization does not depend on the device.
    leaf_init : {"ensemble", "tree"}, default="ensemble"
        Fan-in of the leaf-value initialization: ``L`` per tree, or ``M * L``
        for the whole ensemble (see Notes).
    split_init : "fan_in" or float, default="fan_in"
        Bound of the uniform initialization of split weights and biases:
        ``1/sqrt(F)`` for ``"fan_in"``, the float itself otherwise (see Notes).
    n_additive : int, default=0
        Rows ``K`` of an additive table (parameter ``additive``, ``(K, C)``,
        initialized at zero). With ``K > 0`` the forward takes, beside the
        ``F`` features, ``codes``: one or more columns of table rows
        (integers, as :meth:`TabularEncoder.additive_codes` gives them), and
        the output adds ``sum_j additive[codes[:, j]]`` to the trees' sum.

    Notes
    -----
    Initialization follows a fully connected layer (as in the paper):
    split weights and biases ``U(-1/sqrt(F), 1/sqrt(F))`` (or ``U(-c, c)`` for
    ``split_init=c``, independent of ``F``), leaf values
    ``U(-1/sqrt(L), 1/sqrt(L))`` with ``L`` the number of free leaves
    (``leaf_init="tree"``) or ``U(-1/sqrt(M L), 1/sqrt(M L))``
    (``leaf_init="ensemble"``: the output as one layer over all leaves).

    The parameters keep the documented layout ``(M, N, F)``, ``(M, N)``,
    ``(M, L, C)``; the forward pass works internally in node-major order
    ``(N, M, B)`` so that every routing step is one contiguous elementwise
    product.

    The estimators train this module; use it directly to put a soft tree
    ensemble into a PyTorch model of your own.

    Trees of more than :data:`~sktree_lmc.model._architectures.MAX_LEAVES_PER_TREE`
    leaves (depth 16; see :func:`~sktree_lmc.model._architectures.check_model_size`)
    and routing buffers beyond the device's memory for one row
    (:func:`check_routing_memory`) are a ValueError, before anything is
    allocated.

    Examples
    --------
    >>> import torch
    >>> from sktree_lmc import SoftTreeEnsembleModule, get_architecture
    >>> module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), n_trees=16,
    ...                                 n_features=5, n_outputs=3,
    ...                                 generator=torch.Generator().manual_seed(0))
    >>> module(torch.randn(8, 5)).shape
    torch.Size([8, 3])
    >>> module.to_params().split_weight.shape  # (M, N, F), as NumPy arrays
    (16, 2, 5)
    """

    def __init__(self, arch, n_trees, n_features, n_outputs, generator=None,
                 leaf_init="ensemble", split_init="fan_in", n_additive=0):
        super().__init__()
        # Python ints: in a NumPy integer's fixed width (n_trees=np.uint8(200)) the
        # fan-in L * n_trees would overflow and change the initialization
        n_trees, n_features, n_outputs, n_additive = (
            operator.index(v) for v in (n_trees, n_features, n_outputs, n_additive))
        N, L = arch.n_nodes, arch.n_free_leaves
        bound = split_init_bound(split_init, n_features)
        fan_in = {"tree": L, "ensemble": L * n_trees}.get(leaf_init)
        if fan_in is None:
            raise ValueError(f"leaf_init must be 'tree' or 'ensemble', got {leaf_init!r}.")
        lbound = 1.0 / math.sqrt(fan_in)

        def uniform(shape, b):
            return (torch.rand(shape, generator=generator) * 2 - 1) * b

        self._set_arch(arch, n_trees, n_features=n_features, n_outputs=n_outputs)
        self.split_weight = nn.Parameter(uniform((n_trees, N, n_features), bound))
        self.split_bias = nn.Parameter(uniform((n_trees, N), bound))
        self.leaf_value = nn.Parameter(uniform((n_trees, L, n_outputs), lbound))
        self.additive = (nn.Parameter(torch.zeros((n_additive, n_outputs)))
                         if n_additive else None)
        # a training-time reparametrization (see additive_term): None, or (K, 1)
        self.register_buffer("additive_scale", None)

    def _set_arch(self, arch, n_trees, device="cpu", n_features=0, n_outputs=1):
        # before allocating: trees small enough to route, buffers that fit in memory
        _check_tree_size(arch, n_trees, n_features, n_outputs)
        check_routing_memory(arch, n_trees, 1, device, training=True)
        self.arch = arch
        self._steps = routing_plan(arch)
        self._train_elements = _routing_elements_per_row(arch, training=True)

    def _check_batch(self, z):
        """Refuse a minibatch whose routing buffers cannot fit in memory (``z``:
        the split logits ``(N, M, B)``)."""
        M, B = z.shape[1], z.shape[2]
        memory = _memory_bytes(z.device)
        if memory is not None and z.element_size() * M * B * self._train_elements > memory:
            check_routing_memory(self.arch, M, B, z.device, z.element_size(), training=True)

    def _split_logits(self, X):
        """All split logits ``z`` in node-major layout ``(N, M, B)``, one matmul."""
        M, N, Fdim = self.split_weight.shape
        W = self.split_weight.transpose(0, 1).reshape(N * M, Fdim)
        b = self.split_bias.transpose(0, 1).reshape(N * M, 1)
        return torch.addmm(b, W, X.T).view(N, M, X.shape[0])

    def _additive_output(self, codes):
        """The additive term of rows with table rows ``codes``, or None without
        an additive table or without codes."""
        if self.additive is None or codes is None:
            return None
        return self.additive_term(codes)

    def additive_term(self, codes):
        """The additive term of rows given by their table rows alone.

        Parameters
        ----------
        codes : torch.Tensor of shape (B, J)
            Table rows per input column (whole numbers, any dtype), on the
            module's device.

        Returns
        -------
        torch.Tensor of shape (B, C)
            ``sum_j table[codes[:, j]]``, in the table's dtype: ``table`` is
            ``additive``, or ``additive * additive_scale`` when the buffer
            ``additive_scale`` (one factor per row) is set. The estimators set
            it while training a table of several resolutions, so that Adam's
            steps on the table (``additive``) move each row's value
            (``to_params().additive``) by its own factor.
        """
        fused = _kernel.fused_additive(codes, self.additive,
                                       getattr(self, "additive_scale", None))
        if fused is not None:  # the numba engine's training loop: a compiled gather
            return fused
        return self._additive_table()[codes.long()].sum(dim=1)

    def _additive_table(self):
        """The values the table adds: ``additive``, times ``additive_scale`` when set."""
        scale = getattr(self, "additive_scale", None)
        return self.additive if scale is None else self.additive * scale

    def _routing_probabilities(self, X):
        """Leaf probabilities in the internal layout ``(L, M, B)``."""
        z = self._split_logits(X)
        self._check_batch(z)
        return _Routing.apply(z, self._steps, self.leaf_value.shape[1])

    def leaf_probabilities(self, X):
        """Routing probabilities ``mu`` of every sample to every free leaf.

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.

        Returns
        -------
        torch.Tensor of shape (B, M, L)
            Probability of reaching each free leaf of each tree.
        """
        return self._routing_probabilities(X).permute(2, 1, 0)

    def tree_outputs(self, X):
        """Outputs of every single tree (Eq. 3).

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.

        Returns
        -------
        torch.Tensor of shape (B, M, C)
            Per-tree outputs; their sum over trees is :meth:`forward` (minus
            :meth:`additive_term` when the module has an additive table).
        """
        mu = self._routing_probabilities(X)
        return torch.einsum("lmb,mlc->bmc", mu, self.leaf_value)

    def forward(self, X, codes=None):
        """Ensemble output: the sum of the trees (Eq. 4), plus the additive term.

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.
        codes : torch.Tensor of int of shape (B, J), default=None
            The additive table's rows of the samples (:meth:`additive_term`);
            None: the trees alone.

        Returns
        -------
        torch.Tensor of shape (B, C)
            Raw output (logits for classification).
        """
        M, L, C = self.leaf_value.shape
        if _kernel.fused_active(X, self.split_weight):
            out = _kernel.fused_ensemble(X, self.split_weight,
                                         self.split_bias, self.leaf_value, self._steps)
        else:
            pi = self.leaf_value.transpose(0, 1).reshape(L * M, C)
            z = self._split_logits(X)
            self._check_batch(z)
            out = _Ensemble.apply(z, pi, self._steps)
        extra = self._additive_output(codes)
        return out if extra is None else out + extra

    def member_outputs(self, X, n_members, codes=None):
        """Outputs of the ensemble's members, each scaled as a whole model.

        The ``M`` trees are cut into ``n_members`` consecutive groups
        (:func:`member_of_trees`); member ``k``'s output is ``n_members``
        times the sum of its trees, plus the additive term, so that the
        members' mean is :meth:`forward`. Training on the members' mean loss
        (the estimators' ``n_members``) fits each member as a model of its
        own, as in TabM (Gorishniy et al., 2024), while the fitted model
        stays the sum of all trees.

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.
        n_members : int
            Number of members ``K``, at most ``M``.
        codes : torch.Tensor of int of shape (B, J), default=None
            The additive table's rows of the samples (see :meth:`forward`).

        Returns
        -------
        torch.Tensor of shape (B, K, C)
            The members' outputs.
        """
        M, L, C = self.leaf_value.shape
        K = int(n_members)
        # one routing pass; the leaf contraction writes K * C outputs, member k's
        # columns holding K times the leaf values of its trees and zeros elsewhere
        scale = torch.zeros((M, K), dtype=self.leaf_value.dtype, device=self.leaf_value.device)
        scale[torch.arange(M), torch.as_tensor(member_of_trees(M, K))] = float(K)
        if _kernel.fused_active(X, self.split_weight):
            pi = self.leaf_value[:, :, None, :] * scale[:, None, :, None]  # (M, L, K, C)
            out = _kernel.fused_ensemble(X, self.split_weight,
                                         self.split_bias, pi.reshape(M, L, K * C),
                                         self._steps).view(-1, K, C)
        else:
            pi = (self.leaf_value.transpose(0, 1)[:, :, None, :] * scale[None, :, :, None])
            z = self._split_logits(X)
            self._check_batch(z)
            out = _Ensemble.apply(z, pi.reshape(L * M, K * C), self._steps).view(-1, K, C)
        extra = self._additive_output(codes)
        return out if extra is None else out + extra[:, None, :]

    def compacted(self, features=None, rows=None):
        """A copy of this module on some of its features and additive table rows.

        What training moves where a feature mask keeps the rest at zero
        (:class:`~sktree_lmc.training._training.TrainingView`).

        Parameters
        ----------
        features : torch.Tensor of int or None, default=None
            Sorted indices of the encoded features kept (the split weights'
            last axis); the copy's input holds those alone. None: all.
        rows : torch.Tensor of int or None, default=None
            Sorted indices of the additive table's rows kept (with their
            ``additive_scale``); the copy's codes number them from 0. None:
            all.

        Returns
        -------
        SoftTreeEnsembleModule
            A new module with the same trees, whose parameters are copies of
            the kept entries: on inputs reduced the same way, it computes the
            same function (the splits' matmul over fewer features rounds in
            another order), and its entries are this module's, bit for bit.
        """
        module = copy.deepcopy(self)
        with torch.no_grad():
            if features is not None:
                module.split_weight = nn.Parameter(self.split_weight.index_select(2, features))
            if rows is not None and self.additive is not None:
                module.additive = nn.Parameter(self.additive.index_select(0, rows))
                if self.additive_scale is not None:
                    module.additive_scale = self.additive_scale.index_select(0, rows)
        return module

    # -- conversion to and from arrays -----------------------------------------
    def to_params(self):
        """Copy the parameters to a CPU :class:`TreeParams`.

        Returns
        -------
        TreeParams
            NumPy copies of the split weights, split biases and leaf values.
        """
        with torch.no_grad():
            additive = None if self.additive is None else self._additive_table()
            return TreeParams(*(
                None if p is None else p.detach().cpu().numpy().copy()
                for p in (self.split_weight, self.split_bias, self.leaf_value, additive)
            ))

    @classmethod
    def from_params(cls, arch, params, device="cpu"):
        """Build a module holding ``params`` on ``device``.

        Parameters
        ----------
        arch : TreeArchitecture
            Architecture of the parameters.
        params : TreeParams
            Parameters to load.
        device : str or torch.device, default="cpu"
            Device of the module.

        Returns
        -------
        SoftTreeEnsembleModule
            A module computing the ensemble of ``params``.
        """
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        M, _, F = np.shape(params.split_weight)
        module._set_arch(arch, M, device, n_features=F, n_outputs=np.shape(params.leaf_value)[2])
        module.split_weight = nn.Parameter(torch.from_numpy(np.array(params.split_weight)))
        module.split_bias = nn.Parameter(torch.from_numpy(np.array(params.split_bias)))
        module.leaf_value = nn.Parameter(torch.from_numpy(np.array(params.leaf_value)))
        additive = params.additive
        module.additive = (None if additive is None
                           else nn.Parameter(torch.from_numpy(np.array(additive))))
        module.register_buffer("additive_scale", None)
        return module.to(device)


#: Bytes of a prediction chunk's intermediates (split logits, two-sided
#: sigmoids, leaf and inner-position probabilities, float32) on the CPU: about
#: two L2 caches of a current core. Measured (``benchmarks/bench_throughput.py``,
#: 1 thread, M=256): 64-256 rows per chunk ran within 10% of the best chunk for
#: every architecture at D in {2, 4, 6}; chunks of thousands of rows, which leave
#: the cache, were up to 3x slower.
INFERENCE_CHUNK_BYTES = {"cpu": 4 * 2**20, "cuda": 256 * 2**20}
#: The same for the monomial routing of oblivious trees (:class:`MonomialPlan`),
#: whose intermediates are the monomials alone. Measured (1 thread, the default
#: models of ``benchmarks/bench_predict.py``, M=256, D=4, ``predict_chunked`` on
#: their 10,000 encoded test rows of 7, 20 and 400 features, CPU time):
#: 512 rows per chunk (7.5 MiB) was the fastest at 7 and 20 features and within
#: 2 % of the fastest at 400 (where the split logits' matmul dominates); 1024
#: rows 8-34 % slower, 64 rows up to 20 % slower.
MONOMIAL_CHUNK_BYTES = {"cpu": 8 * 2**20, "cuda": 256 * 2**20}
#: Smallest and largest chunk, in rows (powers of two).
INFERENCE_CHUNK_ROWS = {"cpu": (64, 1024), "cuda": (1024, 65536)}


def inference_chunk_rows(arch, n_trees, device="cpu", monomials=False):
    """Rows per chunk of :func:`predict_chunked` for a model (fixed per model).

    The largest power of two whose float32 intermediates fit
    :data:`INFERENCE_CHUNK_BYTES`, clipped to :data:`INFERENCE_CHUNK_ROWS`.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table.
    n_trees : int
        Number of trees ``M``.
    device : str or torch.device, default="cpu"
        ``"cuda"`` devices get larger chunks; every other device the CPU's.
    monomials : bool, default=False
        The chunk of the monomial routing of oblivious trees
        (:class:`MonomialPlan`): its intermediates are the monomials,
        ``2**N - 1`` elements per tree and row (the split logits among them),
        within :data:`MONOMIAL_CHUNK_BYTES`.

    Returns
    -------
    rows : int

    Raises
    ------
    ValueError
        If the routing buffers of one chunk cannot fit in the device's memory
        (see :func:`check_routing_memory`).
    """
    kind = "cuda" if torch.device(device).type == "cuda" else "cpu"
    if monomials:
        per_row = 4 * n_trees * (2**arch.n_nodes - 1)
        budget = MONOMIAL_CHUNK_BYTES[kind]
    else:
        per_row = 4 * n_trees * _routing_elements_per_row(arch, training=False)
        budget = INFERENCE_CHUNK_BYTES[kind]
    low, high = INFERENCE_CHUNK_ROWS[kind]
    rows = max(1, budget // per_row)
    rows = int(min(high, max(low, 2 ** int(math.log2(rows)))))
    check_routing_memory(arch, n_trees, rows, device)
    return rows


def used_features(split_weight):
    """The encoded features that some split weighs, or None when all are.

    Parameters
    ----------
    split_weight : array-like of shape (M, N, F)
        Split weights (zeros where feature selection left a feature out).

    Returns
    -------
    features : ndarray of int or None
        Sorted indices of the features with a nonzero weight in some split;
        None when every feature has one.
    """
    used = (np.asarray(split_weight) != 0).any(axis=(0, 1))
    return None if used.all() else np.flatnonzero(used)


#: Terms per block of the inference contraction (:func:`predict_chunked`): each block is
#: summed by one float32 matmul and the blocks' sums are added in float64.
CONTRACTION_BLOCK = 128


def _contraction_blocks(n_terms, block=CONTRACTION_BLOCK):
    """The number of equal contiguous blocks of ``n_terms`` terms: the fewest (a divisor of
    ``n_terms``) whose blocks hold at most ``block`` terms each."""
    return next(g for g in range(1, n_terms + 1) if n_terms % g == 0 and n_terms // g <= block)


@torch.inference_mode()
def predict_chunked(module, X, output="forward", *, chunk_rows=None, routing="auto", codes=None,
                    features=None, contrast=False):
    """Outputs of ``module`` for every row of ``X``: the one inference kernel.

    The forward pass of :class:`SoftTreeEnsembleModule` without autograd, in
    float32 (the precision the model is trained in; ``sigmoid(-z)`` as
    ``1 - sigmoid(z)``, see :func:`_route_forward`), on chunks of exactly
    ``chunk_rows`` rows: the last chunk is padded with zero rows. Every row
    therefore goes through the same kernels with the same shapes whatever the
    number of rows in ``X``, so its result does not depend on how rows are
    batched: bit-identical in our tests on the CPU at a given number of threads
    (1, 2 or 3; across numbers of threads the kernels may split their sums
    otherwise, up to float32 rounding), for chunks of a multiple of 64 rows (the default always is; with odd
    chunk sizes the vectorized loops' scalar tails moved results by one
    float32 ulp). The chunk's buffers are allocated once and
    reused, sized to stay in cache (:func:`inference_chunk_rows`), and ``X``
    is converted to float32 chunk by chunk, without a full copy.

    The ensemble output of oblivious trees (``output="forward"``) goes through
    the monomials of the centred sigmoids instead of the leaf probabilities
    (:class:`MonomialPlan`): the same function, about half the elementwise
    work and intermediates, equal to the leaf-probability path up to float32
    rounding (``routing="leaves"`` computes that path). The per-tree outputs
    and the other architectures use the leaf probabilities.

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        The model; its parameters' device is where the kernel runs.
    X : ndarray of shape (n_samples, n_features)
        Input rows (any float dtype and memory layout).
    output : {"forward", "tree_outputs"}, default="forward"
        The ensemble output ``(n_samples, C)`` or the per-tree outputs
        ``(n_samples, M, C)``.
    chunk_rows : int, default=None
        Rows per chunk (positive); ``None`` uses :func:`inference_chunk_rows`.
    routing : {"auto", "leaves", "monomials"}, default="auto"
        ``"auto"``: the monomials where they apply (oblivious trees, the
        ensemble output), else the leaf probabilities; ``"leaves"``: the leaf
        probabilities always; ``"monomials"``: the monomials, a ValueError
        where they do not apply.
    codes : ndarray of shape (n_samples, J), default=None
        The additive table's rows of every row
        (:meth:`TabularEncoder.additive_codes`): with ``output="forward"`` and
        a module with an additive table, the additive term
        (:func:`additive_chunked`) is added to the trees' output, in float64.
    features : ndarray of int or None, default=None
        The columns of ``X`` whose split weights are not all zero (see
        :func:`used_features`): the splits' matmul reads only those (on wide
        data with feature selection, a fraction of them). None: all.
    contrast : bool, default=False
        With two outputs and ``output="forward"``: the outputs less the first
        one, ``[0, out_1 - out_0]`` (what softmax, argmax and a binary
        decision function read, unchanged by that shift), from one row of
        the contraction instead of two (the leaf values' difference, taken in
        float64): 15% of the kernel's time at 20 columns.

    Returns
    -------
    out : ndarray of float64
        The outputs. The ensemble output's contraction is summed in float32 blocks of
        :data:`CONTRACTION_BLOCK` terms whose sums are added in float64; the per-tree
        outputs are float32 values, widened.
    """
    if output not in ("forward", "tree_outputs"):
        raise ValueError(f"output must be 'forward' or 'tree_outputs', got {output!r}.")
    device = module.split_weight.device
    dtype = torch.float32
    M, N, Fdim = module.split_weight.shape
    L, C = module.leaf_value.shape[1:]
    values = module.leaf_value.detach()
    if contrast:
        if C != 2 or output != "forward":
            raise ValueError("contrast=True needs two outputs and output='forward'.")
        values = values[..., 1:].double() - values[..., :1].double()
        C = 1
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != Fdim:
        raise ValueError(f"X must have shape (n_samples, {Fdim}), got {X.shape}.")
    n = X.shape[0]
    if chunk_rows is not None and not (isinstance(chunk_rows, int) and chunk_rows > 0):
        raise ValueError(f"chunk_rows must be a positive int or None, got {chunk_rows!r}.")
    if routing not in ("auto", "leaves", "monomials"):
        raise ValueError(
            f"routing must be 'auto', 'leaves' or 'monomials', got {routing!r}.")
    plan = monomial_plan(module.arch) if routing != "leaves" and output == "forward" else None
    if routing == "monomials" and plan is None:
        raise ValueError("routing='monomials' needs oblivious trees and output='forward'.")
    B = chunk_rows or inference_chunk_rows(module.arch, M, device, monomials=plan is not None)
    leaf = values.to(dtype)
    if plan is not None:
        # Tree-major: the split logits (M * N, B) and the contraction's rows, tree by
        # tree (each tree's terms, which cancel where its splits are sharp, are summed
        # next to each other: half the rounding error of monomial-major rows).
        W = module.split_weight.detach().to(dtype).reshape(M * N, Fdim)
        b = module.split_bias.detach().to(dtype).reshape(M * N, 1)
        coef = monomial_coefficients(values)  # (M, 2**N, C), float64
        lead = coef[:, list(plan.order)].reshape(-1, C).T.to(dtype).contiguous()
        bias = coef[:, 0].sum(dim=0).reshape(C, 1)  # the constant monomials, float64
        steps = plan
    else:
        W = module.split_weight.detach().to(dtype).transpose(0, 1).reshape(N * M, Fdim)
        b = module.split_bias.detach().to(dtype).transpose(0, 1).reshape(N * M, 1)
        steps = module._steps
    if output == "forward":
        if plan is None:
            lead = leaf.transpose(0, 1).reshape(L * M, C).T.contiguous()  # (C, L*M)
            bias = None
        # The contraction in float32 blocks of contiguous terms (tree by tree for the
        # monomials), the blocks' sums added in float64: one float32 matmul over all the
        # terms (3,840 for the default model) was 1.4e-5 off the float64 function; this is
        # 2-20 times closer at the same speed.
        G = _contraction_blocks(lead.shape[1])
        lead = lead.view(C, G, -1).transpose(0, 1).contiguous()  # (G, C, terms per block)
        partial = torch.empty((G, C, B), dtype=dtype, device=device)
        chunk_out = torch.empty((C, B), dtype=torch.float64, device=device)
        result = torch.empty((n, C), dtype=torch.float64, device=device)
    else:
        leaf_t = leaf.transpose(1, 2).contiguous()  # (M, C, L)
        chunk_out = torch.empty((M, C, B), dtype=dtype, device=device)
        result = torch.empty((n, M, C), dtype=dtype, device=device)
    buffers = _routing_buffers(steps, N, L, (M, B), dtype, device)
    mu = buffers[1]
    z = torch.empty((N * M, B), dtype=dtype, device=device)
    if plan is not None:  # node-major views of the tree-major buffers
        z_nodes = z.view(M, N, B).transpose(0, 1)
        mono_rows = mu.transpose(0, 1).view(M * plan.n_monomials, B)
    else:
        z_nodes = z.view(N, M, B)
    if features is not None:  # the splits read only the features they weigh
        features = np.asarray(features, dtype=np.intp)
        W = W[:, torch.as_tensor(features, device=device)].contiguous()
    xbuf = torch.zeros((B, W.shape[1]), dtype=dtype, device=device)
    if device.type == "cpu":
        xbuf_np = xbuf.numpy()
    else:
        X_dev = torch.tensor(X if features is None else X[:, features], dtype=dtype,
                             device=device)
    for start in range(0, n, B):
        rows = min(B, n - start)
        if rows < B:
            xbuf.zero_()
        if device.type == "cpu":
            if features is None:
                xbuf_np[:rows] = X[start : start + rows]
            else:
                xbuf_np[:rows] = X[start : start + rows, features]
        else:
            xbuf[:rows].copy_(X_dev[start : start + rows])
        torch.addmm(b, W, xbuf.T, out=z)
        _route_forward(z_nodes, steps, L, buffers, exact_complement=False)
        if output == "forward":
            terms = mono_rows if plan is not None else mu.view(L * M, B)
            torch.bmm(lead, terms.view(G, -1, B), out=partial)
            torch.sum(partial, dim=0, dtype=torch.float64, out=chunk_out)
            if bias is not None:
                chunk_out += bias
            result[start : start + rows] = chunk_out.T[:rows]
        else:
            torch.bmm(leaf_t, mu.transpose(0, 1), out=chunk_out)  # (M, C, L) @ (M, L, B)
            result[start : start + rows] = chunk_out.permute(2, 0, 1)[:rows]
    out = result.cpu().numpy().astype(np.float64)
    if codes is not None and output == "forward" and module.additive is not None:
        if len(codes) != n:
            raise ValueError(f"codes must have {n} rows, one per row of X, got {len(codes)}.")
        additive = additive_chunked(module, codes)
        out += additive[:, 1:] - additive[:, :1] if contrast else additive
    if contrast:
        out = np.concatenate([np.zeros_like(out), out], axis=1)
    return out


#: Rows per table lookup of :func:`additive_chunked` (the codes of one chunk,
#: converted to int32 indices, stay in cache) and code columns per partial sum.
ADDITIVE_CHUNK_ROWS = 1024
ADDITIVE_BAG = 64


@torch.inference_mode()
def additive_chunked(module, codes, chunk_rows=ADDITIVE_CHUNK_ROWS):
    """The additive term of every row, ``sum_j table[codes[:, j]]``, for inference.

    The values of :meth:`SoftTreeEnsembleModule.additive_term` up to float32
    rounding, without its ``(n, J, C)`` gather: ``chunk_rows`` rows at a time,
    each row's codes are summed in bags of :data:`ADDITIVE_BAG` consecutive
    columns by one ``embedding_bag`` (mode ``"sum"``, int32 indices), then the
    bags' partial sums are added pairwise, elementwise. The partial sums keep
    the rounding at the level of ``additive_term``'s (a single sequential sum
    over 2,000 columns was 10 times further from the float64 sum); every step
    works row by row, so a row's result does not depend on the other rows of
    the call.

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        A model with an additive table (``module.additive`` not None).
    codes : ndarray of shape (n_samples, J)
        Table rows per code column (integers, as
        :meth:`TabularEncoder.additive_codes` gives them).
    chunk_rows : int, default=ADDITIVE_CHUNK_ROWS
        Rows per lookup.

    Returns
    -------
    ndarray of shape (n_samples, C), float64
        The float32 sums, widened.
    """
    table = module._additive_table().detach().to(torch.float32)
    device = table.device
    codes = np.asarray(codes)
    n, J = codes.shape
    result = torch.zeros((n, table.shape[1]), dtype=torch.float32, device=device)
    if not (n and J):
        return result.cpu().numpy().astype(np.float64)
    n_bags = -(-J // ADDITIVE_BAG)
    rows = min(chunk_rows, n)
    starts = torch.arange(n_bags, dtype=torch.int32, device=device) * ADDITIVE_BAG
    offsets = (torch.arange(rows, dtype=torch.int32, device=device)[:, None] * J
               + starts[None, :]).reshape(-1)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        idx = torch.as_tensor(codes[start:stop]).to(device=device, dtype=torch.int32)
        bags = torch.nn.functional.embedding_bag(
            idx.reshape(-1), table, offsets[: (stop - start) * n_bags], mode="sum"
        ).view(stop - start, n_bags, -1)
        width = n_bags
        while width > 1:  # fold the upper half onto the lower one
            half = width // 2
            bags[:, :half] += bags[:, width - half : width]
            width -= half
        result[start:stop] = bags[:, 0]
    return result.cpu().numpy().astype(np.float64)


def reference_forward(arch, params, X):
    """Slow, obviously-correct NumPy forward (loop over trees and leaves).

    Used by the tests as the ground truth of the vectorized kernel. Returns
    per-tree outputs of shape ``(n_samples, M, C)``.
    """
    X = np.asarray(X, dtype=np.float64)
    M = params.n_trees
    out = np.zeros((X.shape[0], M, params.n_outputs))
    for m in range(M):
        z = X @ params.split_weight[m].T.astype(np.float64) + params.split_bias[m]
        s = 1.0 / (1.0 + np.exp(-z))
        for j, leaf in enumerate(arch.free_leaves):
            mu = np.ones(X.shape[0])
            for n in range(arch.n_nodes):
                c = arch.code[leaf, n]
                if c == 1:
                    mu = mu * s[:, n]
                elif c == -1:
                    mu = mu * (1.0 - s[:, n])
            out[:, m] += mu[:, None] * params.leaf_value[m, j][None, :]
    return out

"""Tree architectures as data.

An architecture is fully described by a small table, :class:`TreeArchitecture`:

* ``code``: an integer array of shape ``(n_leaves, n_nodes)`` with entries in
  ``{+1, -1, 0}``. ``code[l, n] = +1`` means that leaf ``l`` lies to the *left*
  of splitting node ``n`` (the data fraction ``sigmoid(w_n . x + b_n)`` flows
  there), ``-1`` that it lies to the *right* (fraction ``sigmoid(-(w_n . x +
  b_n))``), and ``0`` that node ``n`` is not on the path to leaf ``l``. The
  routing probability of leaf ``l`` is therefore (Eq. 2 of the paper)

  .. math:: \\mu_l(x) = \\prod_{n:\\,code[l,n]\\neq 0} \\sigma(code[l,n]\\,(w_n^\\top x + b_n)).

* ``free_leaves``: the leaves that carry a trainable value. The modified decision
  list fixes its last leaf to zero, so that leaf is *structural* (it appears in
  ``code`` and counts for node weights) but has no parameter.

* a symmetry group: the function-preserving operations on one tree, each one
  expressed in the same form for every architecture (:class:`SymmetryOps`):
  a node permutation ``perm``, node signs ``sign`` and a leaf permutation
  ``leaf_perm``, acting as ``w'[n] = sign[n] * w[perm[n]]``,
  ``b'[n] = sign[n] * b[perm[n]]`` and ``pi'[l] = pi[leaf_perm[l]]``.
  An op is valid exactly when ``code[leaf_perm[l], perm[n]] == sign[n] * code[l, n]``
  for all ``l, n`` (see :func:`is_valid_op`), which the tests check for every
  op of every architecture.

Everything else in the package (the forward pass, node weighting, matching,
merging) is written once against this table. Adding an architecture means
adding one builder function to :data:`ARCHITECTURES`.

Parameter layout of an ensemble of ``M`` trees over ``F`` features with ``C``
outputs (see :class:`sktree_lmc.TreeParams`):

* ``split_weight``: ``(M, n_nodes, F)``
* ``split_bias``: ``(M, n_nodes)``
* ``leaf_value``: ``(M, n_free_leaves, C)``

Nodes of perfect binary trees are numbered in breadth-first order (root 0,
children of ``n`` are ``2n+1`` (left) and ``2n+2`` (right)); leaves from left to
right. Oblivious trees have one node per level (node ``d`` is the split shared
by all nodes of depth ``d``); leaf ``l`` goes right at level ``d`` iff bit
``D-1-d`` of ``l`` is set. Decision lists have node ``i`` sending
``sigmoid(z_i)`` to leaf ``i`` and the rest on to node ``i+1``; leaf ``D``
collects what is left.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "ARCHITECTURES",
    "MAX_LEAVES_PER_TREE",
    "SymmetryOps",
    "TreeArchitecture",
    "check_model_size",
    "get_architecture",
    "is_valid_op",
    "model_size",
    "random_ops",
]

#: Largest symmetry group that is materialized as a table of ops.
MAX_ENUMERATED_OPS = 1 << 16


@dataclass(frozen=True)
class SymmetryOps:
    """A batch of function-preserving operations on single trees.

    Each row ``u`` is one operation; ``perm[u]`` and ``sign[u]`` act on the
    splitting nodes, ``leaf_perm[u]`` on the free (parameterized) leaves::

        w'[n]  = sign[n] * w[perm[n]]
        b'[n]  = sign[n] * b[perm[n]]
        pi'[l] = pi[leaf_perm[l]]

    Parameters
    ----------
    perm : ndarray of shape (U, n_nodes), dtype int64
        Node permutation of each op.
    sign : ndarray of shape (U, n_nodes), dtype float32
        Node signs (+1 keeps, -1 negates the split) of each op.
    leaf_perm : ndarray of shape (U, n_free_leaves), dtype int64
        Leaf permutation of each op.

    Examples
    --------
    >>> from sktree_lmc import SymmetryOps, get_architecture
    >>> ops = get_architecture("oblivious", 2).ops  # the whole group of a depth-2 oblivious tree
    >>> len(ops), ops.perm.shape, ops.leaf_perm.shape
    (8, (8, 2), (8, 4))
    >>> swap = ops[4]  # exchange the two levels; leaves 1 and 2 trade places
    >>> swap.perm.tolist(), swap.sign.tolist(), swap.leaf_perm.tolist()
    ([1, 0], [1.0, 1.0], [0, 2, 1, 3])
    >>> len(SymmetryOps.identity(5, n_nodes=2, n_leaves=4))
    5
    """

    perm: np.ndarray
    sign: np.ndarray
    leaf_perm: np.ndarray

    def __len__(self):
        return self.perm.shape[0]

    def __getitem__(self, idx):
        return SymmetryOps(self.perm[idx], self.sign[idx], self.leaf_perm[idx])

    @classmethod
    def identity(cls, n_ops, n_nodes, n_leaves):
        """Return ``n_ops`` copies of the identity operation.

        Parameters
        ----------
        n_ops : int
            Number of ops (rows).
        n_nodes : int
            Splitting nodes per tree.
        n_leaves : int
            Free leaves per tree.

        Returns
        -------
        SymmetryOps
            ``perm`` and ``leaf_perm`` the identity, ``sign`` all ones.
        """
        return cls(
            np.tile(np.arange(n_nodes, dtype=np.int64), (n_ops, 1)),
            np.ones((n_ops, n_nodes), dtype=np.float32),
            np.tile(np.arange(n_leaves, dtype=np.int64), (n_ops, 1)),
        )


@dataclass(frozen=True, eq=False)
class TreeArchitecture:
    """The table that defines one tree architecture at one depth.

    Parameters
    ----------
    name : str
        Registry name, e.g. ``"oblivious"``.
    depth : int
        Tree depth ``D``.
    code : ndarray of shape (n_leaves, n_nodes), dtype int8
        Routing table, see the module docstring.
    free_leaves : ndarray of shape (n_free_leaves,), dtype int64
        Structural leaves that carry a parameter (the others are fixed to 0).
    ops : SymmetryOps or None
        The full symmetry group (identity first) when it is small enough to be
        enumerated, else ``None``.
    n_ops : int
        Order of the symmetry group (beyond tree permutation).
    flip_recursive : bool
        True for perfect binary trees without sharing, whose flip group is a
        product over nodes; matching then uses an exact dynamic program
        instead of enumeration.
    level_search : bool
        True for oblivious trees, whose group is every level order with a sign
        per level; matching can then search it level by level (the user
        guide's "Deep trees" section) instead of enumerating it.

    Examples
    --------
    >>> from sktree_lmc import get_architecture
    >>> arch = get_architecture("oblivious", 2)
    >>> arch.code  # leaf rows, node columns: +1 left of the node, -1 right
    array([[ 1,  1],
           [ 1, -1],
           [-1,  1],
           [-1, -1]], dtype=int8)
    >>> arch.n_nodes, arch.n_leaves, arch.n_ops, arch.node_weights.tolist()
    (2, 4, 8, [4.0, 4.0])
    >>> arch.n_params_per_tree(n_features=10, n_outputs=2)
    30
    """

    name: str
    depth: int
    code: np.ndarray
    free_leaves: np.ndarray
    ops: SymmetryOps | None
    n_ops: int
    flip_recursive: bool = False
    level_search: bool = False
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_nodes(self):
        """Number of splitting nodes (parameter rows) per tree."""
        return self.code.shape[1]

    @property
    def n_leaves(self):
        """Number of structural leaves (including fixed-zero ones)."""
        return self.code.shape[0]

    @property
    def n_free_leaves(self):
        """Number of leaves that carry a value."""
        return self.free_leaves.shape[0]

    @property
    def node_weights(self):
        """Number of leaves each split parameter affects, shape (n_nodes,).

        This is the weighting of Section 3.2 of the paper: the root of a
        depth-3 perfect tree affects 8 leaves, the nodes of a depth-3
        decision list affect 4, 3 and 2. Shared oblivious splits affect all
        ``2**D`` leaves. Structural (fixed-zero) leaves count.
        """
        return (self.code != 0).sum(axis=0).astype(np.float64)

    def routing_matrix(self):
        """Constant matrix mapping log-sigmoids to log leaf probabilities.

        Returns
        -------
        R : ndarray of shape (2 * n_nodes, n_free_leaves), dtype float32
            ``log mu = [logsigmoid(z), logsigmoid(-z)] @ R``.
        """
        code = self.code[self.free_leaves]
        pos = (code == 1).T
        neg = (code == -1).T
        return np.concatenate([pos, neg], axis=0).astype(np.float32)

    def n_params_per_tree(self, n_features, n_outputs):
        """Number of trainable parameters of one tree.

        Parameters
        ----------
        n_features : int
            Number of input features ``F``.
        n_outputs : int
            Number of outputs per leaf ``C``.

        Returns
        -------
        int
            ``n_nodes * (F + 1) + n_free_leaves * C``.
        """
        return self.n_nodes * (n_features + 1) + self.n_free_leaves * n_outputs


# ----------------------------------------------------------------------------
# Validity of an op (used by the tests and by the group builders' assertions)
# ----------------------------------------------------------------------------


def is_valid_op(arch, perm, sign, leaf_perm):
    """Whether ``(perm, sign, leaf_perm)`` preserves the function of a tree.

    The op maps new leaf ``l`` to old leaf ``leaf_perm[l]``; it preserves the
    function iff ``code[leaf_perm[l], perm[n]] == sign[n] * code[l, n]`` for
    every leaf ``l`` and node ``n``, where fixed-zero leaves must map onto
    fixed-zero leaves.

    Parameters
    ----------
    arch : TreeArchitecture
        The architecture table.
    perm, sign : array-like of shape (n_nodes,)
        Node permutation and node signs.
    leaf_perm : array-like of shape (n_free_leaves,)
        Permutation of the free leaves.

    Returns
    -------
    bool
        True iff the op leaves the tree's function unchanged.

    Examples
    --------
    >>> from sktree_lmc import get_architecture, is_valid_op
    >>> arch = get_architecture("oblivious", 2)
    >>> is_valid_op(arch, perm=[1, 0], sign=[1, 1], leaf_perm=[0, 2, 1, 3])  # swap the levels
    True
    >>> is_valid_op(arch, perm=[1, 0], sign=[1, 1], leaf_perm=[0, 1, 2, 3])  # leaves not moved
    False
    """
    try:
        ops = _ops_from_node_ops(
            arch.code, arch.free_leaves, np.asarray(perm)[None, :], np.asarray(sign)[None, :]
        )
    except ValueError:
        return False
    return np.array_equal(ops.leaf_perm[0], np.asarray(leaf_perm))


def _ops_from_node_ops(code, free_leaves, perms, signs):
    """Complete node ops ``(perm, sign)`` with the leaf permutation they induce.

    Vectorized over ops. New leaf ``l`` corresponds to the old leaf ``k`` whose
    row satisfies ``code[k, perm[n]] == sign[n] * code[l, n]``; rows are
    identified by byte-string keys (exact at any number of nodes).

    Raises
    ------
    ValueError
        If some op does not map leaves onto leaves (it is not a symmetry).
    """
    code = code.astype(np.int64)
    perms = np.asarray(perms, dtype=np.int64)
    signs = np.asarray(signs, dtype=np.int64)
    L, N = code.shape
    if perms.shape[1] != N or not (np.sort(perms, axis=1) == np.arange(N)).all():
        raise ValueError("perm is not a permutation of the nodes")
    def row_keys(rows):  # entries -1, 0, 1 -> bytes 1, 2, 3 (no NUL, which 'S' strips)
        return np.ascontiguousarray(rows + 2, dtype=np.uint8).view(f"S{N}")[..., 0]

    keys = row_keys(code)  # (L,)
    order = np.argsort(keys)
    inv = np.argsort(perms, axis=1)  # (U, N)
    # Row of old leaf k in original node coordinates m:
    #   code[k, m] = sign[inv[m]] * code[l, inv[m]]
    tgt = np.take_along_axis(signs, inv, axis=1)[:, None, :] * code[:, inv].transpose(1, 0, 2)
    tkeys = row_keys(tgt)  # (U, L)
    pos = np.clip(np.searchsorted(keys[order], tkeys), 0, L - 1)
    full = order[pos]
    if not (keys[full] == tkeys).all():
        raise ValueError("op does not map leaves onto leaves")
    free_pos = -np.ones(L, dtype=np.int64)
    free_pos[free_leaves] = np.arange(len(free_leaves))
    fixed = free_pos < 0
    if (fixed[full] != fixed[None, :]).any():
        raise ValueError("op maps a free leaf onto a fixed-zero leaf")
    leaf_perm = free_pos[full[:, free_leaves]]
    return SymmetryOps(perms, signs.astype(np.float32), leaf_perm)


# ----------------------------------------------------------------------------
# Builders: one table per architecture
# ----------------------------------------------------------------------------


def _perfect_code(depth):
    """Routing table of a perfect binary tree (BFS nodes)."""
    L, N = 1 << depth, (1 << depth) - 1
    code = np.zeros((L, N), dtype=np.int8)
    for leaf in range(L):
        for d in range(depth):
            node = (1 << d) - 1 + (leaf >> (depth - d))
            right = (leaf >> (depth - 1 - d)) & 1
            code[leaf, node] = -1 if right else 1
    return code


def _non_oblivious_flip_ops(depth, flips=None):
    """Node ops ``(perm, sign)`` of subtree-flip patterns of a perfect tree.

    Flip bit ``flips[u, p]`` refers to position ``p`` of the *new* tree: that
    node is the negated split of the old node it maps to, with its children
    swapped. ``flips=None`` enumerates all ``2**(2**D - 1)`` patterns.
    """
    N = (1 << depth) - 1
    if flips is None:
        flips = (np.arange(1 << N)[:, None] >> np.arange(N)[None, :]) & 1
    flips = np.asarray(flips).astype(bool)
    perm = np.zeros(flips.shape, dtype=np.int64)
    for p in range(1, N):
        parent = (p - 1) // 2
        is_right = p == 2 * parent + 2
        # old child of old node perm[parent]: swapped iff flips[:, parent]
        take_right = is_right ^ flips[:, parent]
        perm[:, p] = 2 * perm[:, parent] + 1 + take_right
    sign = np.where(flips, -1.0, 1.0)
    return perm, sign


def random_ops(arch, n_ops, random_state=None):
    """Draw ``n_ops`` uniformly random symmetry ops of ``arch``.

    Works at any depth without materializing the group: non-oblivious flip
    patterns are drawn bit by bit, oblivious level orders and signs level by
    level; only the small groups of decision lists are sampled from their table.

    Parameters
    ----------
    arch : TreeArchitecture
        The architecture.
    n_ops : int
        Number of ops to draw (typically one per tree).
    random_state : int, RandomState instance or None
        Seed of the draw.

    Returns
    -------
    SymmetryOps
        ``n_ops`` ops, one row each.

    Examples
    --------
    >>> from sktree_lmc import get_architecture, is_valid_op, random_ops
    >>> arch = get_architecture("non_oblivious", 3)
    >>> ops = random_ops(arch, 4, random_state=0)
    >>> len(ops), ops.perm.shape, ops.sign.shape, ops.leaf_perm.shape
    (4, (4, 7), (4, 7), (4, 8))
    >>> all(is_valid_op(arch, *ops[i].perm[None], ops[i].sign, ops[i].leaf_perm) for i in range(4))
    True
    """
    from sklearn.utils import check_random_state

    rng = check_random_state(random_state)
    if arch.flip_recursive:
        flips = rng.randint(0, 2, size=(n_ops, arch.n_nodes))
        perm, sign = _non_oblivious_flip_ops(arch.depth, flips)
        return _ops_from_node_ops(arch.code, arch.free_leaves, perm, sign)
    if arch.level_search:
        perm = np.argsort(rng.random_sample((n_ops, arch.depth)), axis=1)
        sign = np.where(rng.randint(0, 2, size=(n_ops, arch.depth)) == 1, -1.0, 1.0)
        return _ops_from_node_ops(arch.code, arch.free_leaves, perm, sign)
    return arch.ops[rng.randint(0, len(arch.ops), size=n_ops)]


def _build_non_oblivious(depth):
    code = _perfect_code(depth)
    N = code.shape[1]
    n_ops = 1 << N
    ops = None
    if n_ops <= MAX_ENUMERATED_OPS:
        perm, sign = _non_oblivious_flip_ops(depth)
        ops = _ops_from_node_ops(code, np.arange(code.shape[0]), perm, sign)
    return TreeArchitecture(
        "non_oblivious", depth, code, np.arange(code.shape[0]), ops, n_ops, flip_recursive=True
    )


def _build_oblivious(depth):
    L = 1 << depth
    # leaf l goes right (-1) at level d iff bit D-1-d of l is set (one array
    # operation: a Python loop over the L * D entries took seconds at depth 20)
    right = (np.arange(L, dtype=np.int64)[:, None] >> np.arange(depth - 1, -1, -1)) & 1
    code = np.where(right == 1, -1, 1).astype(np.int8).reshape(L, depth)
    n_ops = (1 << depth) * math.factorial(depth)
    ops = None
    if n_ops <= MAX_ENUMERATED_OPS:
        orders = np.array(list(itertools.permutations(range(depth))), dtype=np.int64)
        flips = ((np.arange(1 << depth)[:, None] >> np.arange(depth)[None, :]) & 1).astype(bool)
        perm = np.repeat(orders, len(flips), axis=0)
        sign = np.tile(np.where(flips, -1.0, 1.0), (len(orders), 1))
        ops = _ops_from_node_ops(code, np.arange(L), perm, sign)
    return TreeArchitecture("oblivious", depth, code, np.arange(L), ops, n_ops,
                            level_search=True)


def _decision_list_code(depth):
    code = np.zeros((depth + 1, depth), dtype=np.int8)
    for leaf in range(depth + 1):
        code[leaf, :leaf] = -1
        if leaf < depth:
            code[leaf, leaf] = 1
    return code


def _build_decision_list(depth):
    code = _decision_list_code(depth)
    ident = np.arange(depth)
    flip = np.ones(depth)
    flip[-1] = -1.0
    ops = _ops_from_node_ops(
        code, np.arange(depth + 1), np.stack([ident, ident]), np.stack([np.ones(depth), flip])
    )
    return TreeArchitecture("decision_list", depth, code, np.arange(depth + 1), ops, 2)


def _build_decision_list_modified(depth):
    code = _decision_list_code(depth)
    free = np.arange(depth)  # the last leaf is fixed to zero
    ops = _ops_from_node_ops(code, free, np.arange(depth)[None, :], np.ones((1, depth)))
    return TreeArchitecture("decision_list_modified", depth, code, free, ops, 1)


#: Registry: architecture name -> builder ``depth -> TreeArchitecture``.
ARCHITECTURES = {
    "non_oblivious": _build_non_oblivious,
    "oblivious": _build_oblivious,
    "decision_list": _build_decision_list,
    "decision_list_modified": _build_decision_list_modified,
}

_ARCH_CACHE: dict = {}

#: Largest routing table (``4**depth`` int8 entries for a perfect binary tree)
#: that :func:`get_architecture` builds: depth 14 (256 MiB) for non-oblivious trees,
#: 23 for oblivious trees (``depth * 2**depth`` entries), 16383 for decision lists.
_MAX_ROUTING_TABLE_BYTES = 2**28
_MAX_NON_OBLIVIOUS_DEPTH = 14

#: Most structural leaves per tree that a model may have (:func:`check_model_size`):
#: depth 16 for oblivious and non-oblivious trees. The forward and backward
#: passes run one tensor operation per position of the routing schedule (about
#: two per leaf; see :func:`~sktree_lmc.model._forward.routing_plan`), the schedule
#: itself is built and kept as Python tuples, and the teacher's histograms grow
#: with the leaves too: one tree of depth 16 fits 60 rows in a few seconds,
#: of depth 20 in minutes. Far above the depths of the paper (at most 10) and
#: of the tests and benchmarks (at most 16).
MAX_LEAVES_PER_TREE = 2**16


def _check_count(name, value, minimum):
    """``value`` as a Python int >= ``minimum`` (NumPy integers accepted)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}: {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def model_size(arch_name, depth, n_estimators, n_features, n_outputs):
    """Sizes of a model, from the architecture's formulas (no table is built).

    Parameters
    ----------
    arch_name : {"non_oblivious", "oblivious", "decision_list", \
            "decision_list_modified"}
        Architecture name.
    depth : int
        Tree depth, at least 1.
    n_estimators : int
        Number of trees ``M``.
    n_features : int
        Input features of the trees ``F`` (the encoded features).
    n_outputs : int
        Outputs per leaf ``C``.

    Returns
    -------
    sizes : dict
        ``n_nodes``, ``n_leaves`` (structural), ``n_free_leaves``,
        ``n_positions`` (steps of the routing schedule of one tree: tensor
        operations per forward pass), ``table_entries`` (of the routing
        table ``code``, int8), ``n_parameters`` (of the whole model, additive
        table excluded) and ``routing_bytes_per_row`` (float32 routing
        buffers of one training row, all trees:
        ``4 * M * (5 N + 2 L + 2 inner)``, the estimate of
        :func:`~sktree_lmc.model._forward.check_routing_memory`), all Python ints.

    Raises
    ------
    TypeError
        If a count is not an integer.
    ValueError
        If ``arch_name`` is unknown or a count is out of range.

    Examples
    --------
    >>> from sktree_lmc.model._architectures import model_size
    >>> sizes = model_size("oblivious", 3, n_estimators=2, n_features=5, n_outputs=1)
    >>> sizes["n_leaves"], sizes["n_positions"], sizes["n_parameters"]
    (8, 14, 52)
    """
    if arch_name not in ARCHITECTURES:
        raise ValueError(
            f"Unknown arch={arch_name!r}; expected one of {sorted(ARCHITECTURES)}."
        )
    D = _check_count("depth", depth, 1)
    M = _check_count("n_estimators", n_estimators, 1)
    F = _check_count("n_features", n_features, 0)
    C = _check_count("n_outputs", n_outputs, 1)
    if arch_name in ("non_oblivious", "oblivious"):
        L = 1 << D
        N = L - 1 if arch_name == "non_oblivious" else D
        free, positions, inner = L, 2 * L - 2, max(0, L - 4)
    else:
        L, N = D + 1, D
        modified = arch_name == "decision_list_modified"
        free, positions, inner = L - modified, 2 * D - modified, max(0, D - 2)
    return {
        "n_nodes": N,
        "n_leaves": L,
        "n_free_leaves": free,
        "n_positions": positions,
        "table_entries": L * N,
        "n_parameters": M * (N * (F + 1) + free * C),
        "routing_bytes_per_row": 4 * M * (5 * N + 2 * free + 2 * inner),
    }


def check_model_size(arch_name, depth, n_estimators, n_features, n_outputs):
    """Refuse, with its estimated cost, a model whose trees are too large to train.

    A tree of depth ``D`` has ``2**D`` leaves (oblivious and non-oblivious
    trees), and training and prediction cost about two tensor operations per
    leaf and tree structure (the routing schedule), whatever the number of
    rows: a depth-20 tree fits 60 rows in minutes. Trees of more than
    :data:`MAX_LEAVES_PER_TREE` leaves (depth 16), or whose routing table
    would exceed 256 MiB (non-oblivious trees deeper than 14), are refused
    here, in microseconds, before anything is built. The memory of the
    routing buffers of a batch is checked separately, against the device's
    memory, when the model is built (it also depends on the batch size).

    Parameters
    ----------
    arch_name : str
        Architecture name (see :data:`ARCHITECTURES`).
    depth : int
        Tree depth.
    n_estimators : int
        Number of trees.
    n_features : int
        Input features of the trees (the encoded features).
    n_outputs : int
        Outputs per leaf (classes, or regression targets).

    Returns
    -------
    sizes : dict
        The estimates of :func:`model_size`.

    Raises
    ------
    TypeError
        If a count is not an integer.
    ValueError
        If ``arch_name`` is unknown, a count is out of range, or the trees
        are beyond the limits; the message gives the leaves per tree, the
        routing schedule's length, the parameters and the routing bytes per
        training row.

    Examples
    --------
    >>> from sktree_lmc.model._architectures import check_model_size
    >>> check_model_size("oblivious", 16, 1, 3, 2)["n_leaves"]
    65536
    >>> check_model_size("oblivious", 20, 1, 3, 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: arch='oblivious' with depth=20 is not supported: ...
    """
    if (arch_name in ("non_oblivious", "oblivious")
            and isinstance(depth, (int, np.integer)) and not isinstance(depth, (bool, np.bool_))
            and depth > 64):  # do not compute 2**depth of an absurd depth
        model_size(arch_name, 1, n_estimators, n_features, n_outputs)  # the other checks
        raise ValueError(
            f"arch={arch_name!r} with depth={int(depth)} is not supported: its trees would "
            f"have 2**{int(depth)} leaves each, more than the limit of "
            f"{MAX_LEAVES_PER_TREE:,} (MAX_LEAVES_PER_TREE; depth 16). Use a smaller depth."
        )
    sizes = model_size(arch_name, depth, n_estimators, n_features, n_outputs)
    too_many = sizes["n_leaves"] > MAX_LEAVES_PER_TREE
    too_wide = sizes["table_entries"] > _MAX_ROUTING_TABLE_BYTES
    if not (too_many or too_wide):
        return sizes
    if too_many:
        why = (f"its trees have {sizes['n_leaves']:,} leaves each, more than the limit of "
               f"{MAX_LEAVES_PER_TREE:,} (MAX_LEAVES_PER_TREE; depth 16 for oblivious and "
               f"non-oblivious trees). Training and prediction run one tensor operation per "
               f"step of the routing schedule ({sizes['n_positions']:,} per tree here) "
               f"whatever the number of rows: a fit would run for minutes at least")
    else:
        why = (f"its routing table would have {sizes['table_entries']:,} int8 entries, more "
               f"than {_MAX_ROUTING_TABLE_BYTES:,} (256 MiB)")
        if arch_name == "non_oblivious" and int(depth) <= 16:
            why += "; arch='oblivious' goes to depth 16"
    raise ValueError(
        f"arch={arch_name!r} with depth={int(depth)} is not supported: {why}. This model "
        f"({int(n_estimators)} tree(s), {int(n_features)} feature(s), {int(n_outputs)} "
        f"output(s)) would have {sizes['n_parameters']:,} parameters and need about "
        f"{sizes['routing_bytes_per_row'] / 2**20:.4g} MiB of routing buffers per training "
        f"row. Use a smaller depth (and more trees)."
    )


def _gib_of_4_to(depth):
    """``4**depth`` bytes in GiB, as text (a power of two past float's range)."""
    return f"{4.0 ** depth / 2**30:.3g}" if depth <= 256 else f"2**{2 * depth - 30}"


def get_architecture(name, depth):
    """Return the :class:`TreeArchitecture` table for ``name`` at ``depth``.

    Parameters
    ----------
    name : {"non_oblivious", "oblivious", "decision_list", "decision_list_modified"}
        Architecture name.
    depth : int
        Tree depth, at least 1.

    Returns
    -------
    TreeArchitecture
        The (cached) table of the architecture.

    Examples
    --------
    >>> from sktree_lmc import get_architecture
    >>> arch = get_architecture("decision_list", 3)
    >>> arch.n_nodes, arch.n_leaves, arch.node_weights.tolist(), arch.n_ops
    (3, 4, [4.0, 3.0, 2.0], 2)
    """
    if name not in ARCHITECTURES:
        raise ValueError(
            f"Unknown arch={name!r}; expected one of {sorted(ARCHITECTURES)}."
        )
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}.")
    key = (name, int(depth))
    if name == "non_oblivious" and int(depth) > _MAX_NON_OBLIVIOUS_DEPTH:
        raise ValueError(
            f"arch='non_oblivious' with depth={depth} has 2**{depth} leaves per tree: its "
            f"routing table alone would take {_gib_of_4_to(int(depth))} GiB (4**depth "
            f"bytes) and one minibatch's leaf probabilities far more. Depths above "
            f"{_MAX_NON_OBLIVIOUS_DEPTH} are not supported; use arch='oblivious' for deep trees."
        )
    if name != "non_oblivious":
        entries = ((1 << int(depth)) * int(depth) if name == "oblivious" and int(depth) <= 64
                   else (int(depth) + 1) * int(depth) if name != "oblivious" else None)
        if entries is None or entries > _MAX_ROUTING_TABLE_BYTES:
            raise ValueError(
                f"arch={name!r} with depth={depth} is not supported: its routing table "
                f"would have more than {_MAX_ROUTING_TABLE_BYTES:,} int8 entries (256 MiB; "
                f"{'depth * 2**depth' if name == 'oblivious' else '(depth + 1) * depth'} "
                f"entries). Use a smaller depth."
            )
    if key not in _ARCH_CACHE:
        _ARCH_CACHE[key] = ARCHITECTURES[name](int(depth))
    return _ARCH_CACHE[key]

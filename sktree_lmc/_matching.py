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

from ._architectures import SymmetryOps
from ._params import TreeParams

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
    """

    tree_perm: np.ndarray
    ops: SymmetryOps
    score: float

    def apply(self, params):
        """Return ``params`` (of model ``b``) expressed in the basis of ``a``."""
        return params.permute_trees(self.tree_perm).apply_ops(self.ops)


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


def _pair_tables(theta_a, leaves_a, theta_b, leaves_b, nodes_a=None, nodes_b=None):
    """G (Ma, Mb, Na, Nb) and H (Ma, Mb, L, L) for chunks of trees."""
    if nodes_a is not None:
        theta_a, theta_b = theta_a[:, nodes_a], theta_b[:, nodes_b]
    G = torch.einsum("anp,bkp->abnk", theta_a, theta_b)
    H = torch.einsum("alc,bkc->ablk", leaves_a, leaves_b)
    return G, H


def _selection_matrices(ops, n_nodes, n_leaves, device):
    """Constant matrices turning flattened G and H into per-op scores."""
    U = len(ops)
    rows = np.repeat(np.arange(U), n_nodes)
    cols = (np.arange(n_nodes)[None, :] * n_nodes + ops.perm).ravel()
    Cn = torch.zeros((U, n_nodes * n_nodes), dtype=torch.float64)
    Cn[rows, cols] = torch.as_tensor(ops.sign.ravel(), dtype=torch.float64)
    rows = np.repeat(np.arange(U), n_leaves)
    cols = (np.arange(n_leaves)[None, :] * n_leaves + ops.leaf_perm).ravel()
    Cl = torch.zeros((U, n_leaves * n_leaves), dtype=torch.float64)
    Cl[rows, cols] = 1.0
    return Cn.to(device), Cl.to(device)


def _enumerated_scores(theta_a, leaves_a, theta_b, leaves_b, ops, diagonal):
    """Scores of all ops: (Ma, Mb, U), or (M, U) for aligned pairs."""
    N, L = theta_a.shape[1], leaves_a.shape[1]
    Cn, Cl = _selection_matrices(ops, N, L, theta_a.device)
    if diagonal:
        G = torch.einsum("mnp,mkp->mnk", theta_a, theta_b).reshape(len(theta_a), N * N)
        H = torch.einsum("mlc,mkc->mlk", leaves_a, leaves_b).reshape(len(theta_a), L * L)
    else:
        G, H = _pair_tables(theta_a, leaves_a, theta_b, leaves_b)
        G = G.reshape(*G.shape[:2], N * N)
        H = H.reshape(*H.shape[:2], L * L)
    return G @ Cn.T + H @ Cl.T


def _depth_nodes(depth):
    return [np.arange((1 << d) - 1, (1 << (d + 1)) - 1) for d in range(depth)]


def _dp_scores(theta_a, leaves_a, theta_b, leaves_b, depth, diagonal, keep_choices=False):
    """Exact best flip score by dynamic programming over subtree pairs.

    Returns the score (Ma, Mb) — or (M,) when ``diagonal`` — and, when
    ``keep_choices``, the per-depth boolean flip decisions (diagonal only).
    """
    if diagonal:
        V = torch.einsum("mlc,mkc->mlk", leaves_a, leaves_b)  # (M, L, L)
    else:
        V = torch.einsum("alc,bkc->ablk", leaves_a, leaves_b)
    choices = []
    for nodes in reversed(_depth_nodes(depth)):
        ta, tb = theta_a[:, nodes], theta_b[:, nodes]
        if diagonal:
            G = torch.einsum("mip,mjp->mij", ta, tb)
        else:
            G = torch.einsum("aip,bjp->abij", ta, tb)
        # Children blocks of V: V[..., 2i + x, 2j + y]
        K = len(nodes)
        V4 = V.reshape(*V.shape[:-2], K, 2, K, 2)
        keep = G + V4[..., :, 0, :, 0] + V4[..., :, 1, :, 1]
        swap = -G + V4[..., :, 0, :, 1] + V4[..., :, 1, :, 0]
        flip = swap > keep
        V = torch.where(flip, swap, keep)
        if keep_choices:
            choices.append(flip)
    score = V[..., 0, 0]
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
        maximum over the architecture's symmetry group (exact dynamic program
        for non-oblivious trees).
    weighting : bool, default=True
        Scale split parameters by the square root of their node weight.
    device : str or torch.device, default="cpu"
        Where to compute.

    Returns
    -------
    S : ndarray of shape (M_a, M_b)
        ``S[a, b]`` is the best inner product of tree ``a`` with a transformed tree ``b``.
    """
    theta_a, leaves_a = _tensors(params_a, arch, weighting, device)
    theta_b, leaves_b = _tensors(params_b, arch, weighting, device)
    Ma, Mb = len(theta_a), len(theta_b)
    if invariances == "perm" or arch.n_ops == 1:
        fa = torch.cat([theta_a.reshape(Ma, -1), leaves_a.reshape(Ma, -1)], dim=1)
        fb = torch.cat([theta_b.reshape(Mb, -1), leaves_b.reshape(Mb, -1)], dim=1)
        return (fa @ fb.T).cpu().numpy()
    L, N = arch.n_free_leaves, arch.n_nodes
    if arch.flip_recursive:
        per_row = Mb * L * L * 8 * 4
    else:
        per_row = Mb * (N * N + L * L + len(arch.ops)) * 8 * 2
    chunk = max(1, _CHUNK_BYTES // per_row)
    out = np.empty((Ma, Mb))
    for s in range(0, Ma, chunk):
        sl = slice(s, s + chunk)
        if arch.flip_recursive:
            score, _ = _dp_scores(theta_a[sl], leaves_a[sl], theta_b, leaves_b, arch.depth, False)
        else:
            score = _enumerated_scores(
                theta_a[sl], leaves_a[sl], theta_b, leaves_b, arch.ops, False
            ).amax(dim=-1)
        out[sl] = score.cpu().numpy()
    return out


def best_ops_for_pairs(params_a, params_b, arch, *, weighting=True, device="cpu"):
    """Best op for each aligned pair of trees ``(a[m], b[m])``.

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
    """
    theta_a, leaves_a = _tensors(params_a, arch, weighting, device)
    theta_b, leaves_b = _tensors(params_b, arch, weighting, device)
    M = len(theta_a)
    if arch.flip_recursive:
        score, choices = _dp_scores(
            theta_a, leaves_a, theta_b, leaves_b, arch.depth, True, keep_choices=True
        )
        return _dp_traceback(choices, arch.depth), score.cpu().numpy()
    scores = _enumerated_scores(theta_a, leaves_a, theta_b, leaves_b, arch.ops, True)
    best = scores.argmax(dim=1).cpu().numpy()  # first maximum: identity wins ties
    return arch.ops[best], scores.max(dim=1).values.cpu().numpy()


def _identity_ops(arch, M):
    return SymmetryOps.identity(M, arch.n_nodes, arch.n_free_leaves)


def _assign(S):
    rows, cols = linear_sum_assignment(S, maximize=True)
    return cols[np.argsort(rows)], float(S[rows, cols].sum())


def weight_matching(params_a, params_b, arch, *, invariances="all", weighting=True,
                    device="cpu"):
    """Weight matching (Algorithm 2 of the paper), exact over the symmetry group.

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
    """
    _check_invariances(invariances)
    M = params_a.n_trees
    if invariances == "none":
        return Alignment(np.arange(M), _identity_ops(arch, M), float("nan"))
    S = pairwise_tree_similarity(
        params_a, params_b, arch, invariances=invariances, weighting=weighting, device=device
    )
    perm, score = _assign(S)
    if invariances == "perm" or arch.n_ops == 1:
        return Alignment(perm, _identity_ops(arch, M), score)
    ops, _ = best_ops_for_pairs(
        params_a, params_b.permute_trees(perm), arch, weighting=weighting, device=device
    )
    return Alignment(perm, ops, score)


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
    """
    _check_invariances(invariances)
    M = params_a.n_trees
    if invariances == "none":
        return Alignment(np.arange(M), _identity_ops(arch, M), float("nan"))
    oa = torch.as_tensor(np.asarray(outputs_a), dtype=torch.float64, device=device)
    ob = torch.as_tensor(np.asarray(outputs_b), dtype=torch.float64, device=device)
    oa = oa.permute(1, 0, 2).reshape(M, -1)
    ob = ob.permute(1, 0, 2).reshape(M, -1)
    S = (oa @ ob.T).cpu().numpy()
    perm, score = _assign(S)
    if invariances == "perm" or arch.n_ops == 1:
        return Alignment(perm, _identity_ops(arch, M), score)
    ops, _ = best_ops_for_pairs(
        params_a, params_b.permute_trees(perm), arch, weighting=weighting, device=device
    )
    return Alignment(perm, ops, score)


def check_alignment_inputs(params_a, params_b):
    """Raise a ValueError when two parameter sets cannot be aligned."""
    if not isinstance(params_a, TreeParams) or not isinstance(params_b, TreeParams):
        raise TypeError("Expected TreeParams.")
    if params_a.shape_signature != params_b.shape_signature:
        raise ValueError(
            "Models differ in shape (trees, nodes, features, leaves, outputs): "
            f"{params_a.shape_signature} vs {params_b.shape_signature}."
        )

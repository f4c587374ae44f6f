"""The compiled growth of one oblivious tree of the gradient-boosted teacher
(:mod:`._boosting`) on the rows of one site: every level's histograms of
gradients and Hessians, its split search and the rows' descent, then the
leaves' sums, in one call without the GIL.

Imported only where numba imports (:func:`._boosting.grow_oblivious_trees`
takes it when the training engine is numba's,
:func:`sktree_lmc.model._kernel.resolve_engine`; the NumPy and SciPy path of
:class:`._boosting.BoostingSite` stays the reference). The trees are the
reference's bit for bit: every sum adds the same float64 numbers in the same
order (compiled without ``fastmath``, so without reassociation or fused
multiply-adds):

- a histogram cell sums its rows' values from zero in row order, as
  :func:`._boosting._cell_sums` (SciPy's sparse product) does; below the root
  only the left children's cells are summed and a right child's is its
  parent's minus its sibling's (:func:`._boosting._with_right_children`);
- a split's gain is :func:`._boosting._block_gain`'s: per node and output the
  cumulative sums from zero bin after bin, ``GL**2 / (HL + l2) + GR**2 / (HR
  + l2)``, the outputs' terms added from zero in their order (doubled for
  the second of two classes), then the nodes' gains added in node order;
- the split is the first maximum over (feature, bin) in row-major order of
  the allowed cells (``np.argmax``: a NaN first), none where no gain is
  finite.

The histograms of a level are laid out feature first (``(F, n_nodes, n_bins,
S)``) and filled in one pass over the rows for all features (a row's features
are independent sums that the core overlaps; a pass per feature chained the
rows of a bin and was slower); then each feature's right children and gains.
On electricity (9,000 rows, 7 features, 256 trees of depth 4) the growth took
half the NumPy path's time, about HGB's whole fit
(``benchmarks/oneoff/teacher_growth_oneoff.py``).
Tree levels are too short (0.1-0.2 ms) to pay for a hand-over between
threads: the growth runs on one.
"""

from __future__ import annotations

import numba
import numpy as np

#: IEEE arithmetic (no ``fastmath``): the reference's sums, bit for bit.
_OPTS = dict(nogil=True, cache=True, error_model="numpy", boundscheck=False)


@numba.njit(**_OPTS)
def grow_tree(codes, stats, allowed, hist, options, out):
    """Grow the levels of one oblivious tree and sum its leaves.

    ``codes`` (F, n): every row's bin of every feature (uint8 or int32);
    ``stats`` (n, 2 C) float64: the gradient and Hessian of every output, row
    after row; ``allowed``: ``(valid, mask)``, the bins after which a split
    exists (F, n_bins) and the features the tree may split on (F,), bool;
    ``hist``: two float64 buffers of at least ``F * 2**(depth - 1) * n_bins
    * S`` elements (the histograms of a level and of the level before);
    ``options``: ``(depth, n_sent, n_outputs, l2)``, the histograms summing
    the first ``n_sent`` outputs (``S = 2 n_sent`` columns of ``stats``);
    ``out``: ``(node, features, bins, gains, leaf_sums)``, written: every
    row's leaf (n,) int64, each level's feature (-1: no split) and bin (the
    split sends a row right when its bin is above it) and the gain of its
    split over the feature's unsplit score (depth,), and the leaves' sums
    of ``stats`` (2**depth, 2 C)."""
    valid, mask = allowed
    depth, n_sent, n_outputs, l2 = options
    node, features, bins, gains, leaf_sums = out
    F, n = codes.shape
    n_bins = valid.shape[1]
    S = 2 * n_sent
    double = n_sent < n_outputs
    for j in range(n):
        node[j] = 0
    left = np.empty(n, dtype=np.int64)
    gain = np.empty((F, n_bins))
    acc = np.empty(n_bins)
    cums = np.empty((2, n_bins))
    parent = hist[0]
    child = hist[1]
    for d in range(depth):
        n_nodes = 1 << d
        cur = child[: F * n_nodes * n_bins * S].reshape((F, n_nodes, n_bins, S))
        prev = parent[: F * max(n_nodes // 2, 1) * n_bins * S].reshape(
            (F, max(n_nodes // 2, 1), n_bins, S))
        n_left = 0
        for j in range(n):  # the rows of the left children (all rows at the root), in order
            left[n_left] = j
            n_left += 1 if d == 0 else 1 - (node[j] & 1)  # no branch: sides are random
        _left_histograms(codes, stats, left[:n_left], node, cur)
        for f in range(F):
            if d > 0:
                _right_children(prev[f], cur[f])
            _feature_gains(cur[f], (l2, double), acc, gain[f], cums)
        f_best, k_best = _best_split(gain, valid, mask)
        features[d] = f_best
        bins[d] = k_best
        gains[d] = gain[f_best, k_best] - gain[f_best, n_bins - 1] if f_best >= 0 else 0.0
        for j in range(n):
            node[j] = node[j] * 2 + (1 if f_best >= 0 and codes[f_best, j] > k_best else 0)
        parent, child = child, parent
    for i in range(leaf_sums.shape[0]):
        for s in range(leaf_sums.shape[1]):
            leaf_sums[i, s] = 0.0
    for j in range(n):
        for s in range(leaf_sums.shape[1]):
            leaf_sums[node[j], s] += stats[j, s]


@numba.njit(inline="always", **_OPTS)
def _left_histograms(codes, stats, rows, node, cur):
    """The histograms ``cur`` (F, n_nodes, n_bins, S) of the nodes that
    ``rows`` reach (the left children below the root, node ``2 i``), zeroed
    first, then every row's values added to its cell of every feature, row
    after row (a row's features are independent sums, which the core
    overlaps; a feature after another would chain the rows of a bin)."""
    F, n_nodes, n_bins, S = cur.shape
    step = 2 if n_nodes > 1 else 1
    for f in range(F):
        for i in range(0, n_nodes, step):
            for b in range(n_bins):
                for s in range(S):
                    cur[f, i, b, s] = 0.0
    flat = cur.reshape(-1)
    stride_f = n_nodes * n_bins * S
    if S == 2:  # one output sent (two classes, or one): its two sums per cell
        for r in range(rows.shape[0]):
            j = rows[r]
            g = stats[j, 0]
            h = stats[j, 1]
            at = node[j] * (n_bins * 2)
            for f in range(F):
                cell = at + codes[f, j] * 2
                flat[cell] += g
                flat[cell + 1] += h
                at += stride_f
        return
    for r in range(rows.shape[0]):
        j = rows[r]
        at = node[j] * (n_bins * S)
        for f in range(F):
            cell = at + codes[f, j] * S
            for s in range(S):
                flat[cell + s] += stats[j, s]
            at += stride_f


@numba.njit(inline="always", **_OPTS)
def _right_children(prev, cur):
    """A feature's right children's histograms (node ``2 i + 1`` of ``cur``,
    (n_nodes, n_bins, S)): their parent's (``prev``, (n_nodes / 2, n_bins,
    S)) minus their sibling's."""
    n_nodes, n_bins, S = cur.shape
    for i in range(0, n_nodes, 2):
        p = prev[i >> 1]
        for b in range(n_bins):
            for s in range(S):
                cur[i + 1, b, s] = p[b, s] - cur[i, b, s]


@numba.njit(inline="always", **_OPTS)
def _feature_gains(h, penalty, acc, gain, cums):
    """The gain ``gain`` (n_bins,) of every split of one feature from its
    histograms ``h`` (n_nodes, n_bins, S), the operations of
    :func:`._boosting._block_gain` (``penalty``: ``(l2, double)``; ``acc``:
    a (n_bins,) buffer, a node's gain over the outputs; ``cums``: (2,
    n_bins), the cumulative sums from zero bin after bin of the gradients
    and Hessians, whose last are the totals)."""
    l2, double = penalty
    n_nodes, n_bins, S = h.shape
    left = cums[0]
    left_h = cums[1]
    for i in range(n_nodes):
        hn = h[i]
        for b in range(n_bins):
            acc[b] = 0.0
        for c in range(S // 2):
            g = 0.0
            w = 0.0
            for b in range(n_bins):
                g += hn[b, 2 * c]
                w += hn[b, 2 * c + 1]
                left[b] = g
                left_h[b] = w
            for b in range(n_bins):  # elementwise: vectorized
                gl = left[b]
                gr = g - gl
                hr = (w - left_h[b]) + l2
                acc[b] += (gl * gl) / (left_h[b] + l2) + (gr * gr) / hr
        if double:
            for b in range(n_bins):
                acc[b] += acc[b]
        if i == 0:
            for b in range(n_bins):
                gain[b] = acc[b]
        else:
            for b in range(n_bins):
                gain[b] += acc[b]


@numba.njit(inline="always", **_OPTS)
def _best_split(gain, valid, mask):
    """``(f, k)``: the first maximum of ``gain`` (F, n_bins) in row-major
    order over the cells ``valid`` allows of the features ``mask`` allows
    (a NaN first, as ``np.argmax`` takes it); ``(-1, 0)`` where no allowed
    gain is finite."""
    F, n_bins = gain.shape
    best = -np.inf
    f_best = -1
    k_best = 0
    f_nan = -1
    k_nan = 0
    finite = False
    for f in range(F):
        if not mask[f]:
            continue
        for k in range(n_bins):
            if not valid[f, k]:
                continue
            v = gain[f, k]
            if np.isnan(v):
                if f_nan < 0:
                    f_nan = f
                    k_nan = k
                continue
            if np.isfinite(v):
                finite = True
            if f_best < 0 or v > best:
                best = v
                f_best = f
                k_best = k
    if not finite:
        return -1, 0
    if f_nan >= 0:
        return f_nan, k_nan
    return f_best, k_best

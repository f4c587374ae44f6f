"""Search over the symmetry group of oblivious trees without enumerating it.

An op of an oblivious tree of depth ``D`` is a level order ``perm`` (new level
``d`` uses the split of old level ``perm[d]``) and a sign per level (``-1``
negates the split and mirrors the leaves along that level): ``2**D * D!`` ops,
645,120 at ``D = 7`` and 3.7e9 at ``D = 10``. The weight-matching similarity of
tree ``a`` with tree ``b`` transformed by ``(perm, sign)`` is::

    sim = sum_d sign[d] * G[d, perm[d]]  +  sum_l <A[l], B[k(l)]>

with ``G[d, k]`` the (weighted) inner product of split ``d`` of ``a`` with split
``k`` of ``b``, ``A``/``B`` the leaf values and ``k(l)`` the old leaf that the op
puts at new leaf ``l``. The node term decomposes over (level of ``a``, level of
``b``, sign); only the leaf term couples the levels. Three pieces use that:

1. **Seed** (:func:`_seed`): the linear assignment over levels of the
   decomposable part, the node term plus the first-order (Walsh) part of the leaf
   term, ``W[d, k] = G[d, k] + <a_d, b_k> / L`` with ``a_d = sum_l code[l, d] A[l]``;
   the sign of each matched level is the sign of ``W``.
2. **Local search** (:func:`_local_search`): from the better of the seed and the
   identity, repeatedly take the best of all single-level flips and all level
   swaps with any signs on the two swapped levels (``2 D**2 - D`` moves scored
   exactly), until no move improves.
3. **Branch and bound** (:func:`_branch_and_bound`), exact: levels are assigned
   in order, keeping every partial assignment whose upper bound reaches the
   incumbent of step 2. The bound of a partial assignment of the first ``t``
   levels is its exact node term, plus for each unassigned level the largest
   ``|G|`` over unused levels of ``b``, plus a bound on the leaf term: the first
   ``t`` levels split both trees into ``2**t`` matched sub-cubes of ``2**(D-t)``
   leaves, the rest of the op permutes leaves inside each sub-cube, so by the
   rearrangement inequality the leaf term is at most the sum, over sub-cubes and
   outputs, of the products of the sorted leaf values. At ``t = D`` the bound is
   the exact score, so the survivors contain every optimum.

A pair whose branch and bound frontier would exceed ``max_rows`` keeps the
local-search result and is reported as not certified.

Where the group is small enough (``D! * 4**D`` work per pair: depth 7 and
below), :func:`exhaustive_search` scores every op instead, through the
Walsh-Hadamard form of the similarity (one dense product per level order).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import torch

#: Frontier rows (partial assignments) of one branch and bound chunk.
_MAX_ROWS = 1 << 15
#: Leaf values a single pair's frontier may hold (rows * 2**D) before the pair
#: keeps its local-search result: bounds the time spent on one pair.
_PAIR_BUDGET = 1 << 16
#: Leaf values (children * 2**D * C) one call may bound in all: pairs left when
#: it is spent keep their local-search result (about 15 s on one core).
_WORK_BUDGET = 1 << 30
#: Pairs searched together by the branch and bound.
_BB_PAIRS = 8
#: Bytes budget of the per-chunk work arrays.
_CHUNK_BYTES = 1 << 26
#: Bytes of one cross-spectrum chunk of :func:`exhaustive_search` (4 MiB was the
#: fastest of 2 to 64 MiB at depths 5 to 7 on one core: it stays in cache).
_SPECTRAL_BYTES = 1 << 22


def leaf_bits(depth, device="cpu"):
    """``bits[l, d] = 1`` iff leaf ``l`` goes right at level ``d``: shape (2**D, D)."""
    leaves = torch.arange(1 << depth, device=device)
    shifts = torch.arange(depth - 1, -1, -1, device=device)
    return (leaves[:, None] >> shifts[None, :]) & 1


def leaf_perm(perm, sign, depth):
    """Old leaf placed at each new leaf by the ops ``(perm, sign)``.

    Parameters
    ----------
    perm : LongTensor of shape (R, D)
        Old level used at each new level.
    sign : Tensor of shape (R, D)
        ``-1`` where the level is negated.
    depth : int
        ``D``.

    Returns
    -------
    LongTensor of shape (R, 2**D)
    """
    bits = leaf_bits(depth, perm.device)  # (L, D)
    flip = (sign < 0).long()  # (R, D)
    old_bits = bits[None, :, :] ^ flip[:, None, :]  # bit of old level perm[d]
    shifts = (depth - 1 - perm)[:, None, :]  # position of old level perm[d] in the index
    return (old_bits << shifts).sum(dim=2)


def _score(G, A, B, perm, sign):
    """Exact similarity of ``A`` with ``B`` under ``(perm, sign)``, one op per pair.

    ``G``: (P, D, D); ``A``, ``B``: (P, L, C); ``perm``, ``sign``: (P, Q, D).
    Returns (P, Q).
    """
    P, Q, D = perm.shape
    node = (torch.gather(G[:, None].expand(P, Q, D, D), 3, perm[..., None])[..., 0]
            * sign).sum(dim=2)
    lp = leaf_perm(perm.reshape(P * Q, D), sign.reshape(P * Q, D), D).reshape(P, Q, -1)
    moved = torch.gather(B[:, None].expand(P, Q, *B.shape[1:]), 2,
                         lp[..., None].expand(*lp.shape, B.shape[2]))
    return node + (moved * A[:, None]).sum(dim=(2, 3))


def _assign_levels(S):
    """Exact linear assignment ``max sum_d S[p, d, perm[p, d]]`` for a batch of pairs.

    Dynamic program over the subsets of levels of ``b`` already used
    (``D * 2**D`` states), vectorized over pairs: for ``D <= 12`` or so this is
    cheaper than one solver call per pair.
    """
    P, D, _ = S.shape
    n = 1 << D
    masks = torch.arange(n, device=S.device)
    dp = torch.full((P, n), -np.inf, dtype=S.dtype, device=S.device)
    dp[:, 0] = 0.0
    choice = []
    for t in range(D):  # row t of a takes one unused level k of b
        new = torch.full_like(dp, -np.inf)
        arg = torch.zeros((P, n), dtype=torch.long, device=S.device)
        for k in range(D):
            src = masks[(masks >> k) & 1 == 0]
            cand = dp[:, src] + S[:, t, k][:, None]
            dst = src | (1 << k)
            better = cand > new[:, dst]
            new[:, dst] = torch.where(better, cand, new[:, dst])
            arg[:, dst] = torch.where(better, k, arg[:, dst])
        dp = new
        choice.append(arg)
    perm = torch.empty((P, D), dtype=torch.long, device=S.device)
    mask = torch.full((P,), n - 1, dtype=torch.long, device=S.device)
    rows = torch.arange(P, device=S.device)
    for t in reversed(range(D)):
        k = choice[t][rows, mask]
        perm[:, t] = k
        mask = mask ^ (1 << k)
    return perm


def _seed(G, A, B):
    """Assignment over levels of the decomposable part of the score."""
    P, D, _ = G.shape
    code = 1.0 - 2.0 * leaf_bits(D, A.device).to(A.dtype)  # +1 left, -1 right
    a1 = torch.einsum("ld,plc->pdc", code, A)
    b1 = torch.einsum("ld,plc->pdc", code, B)
    W = G + torch.einsum("pdc,pkc->pdk", a1, b1) / A.shape[1]
    perm = _assign_levels(W.abs())
    sign = torch.where(torch.gather(W, 2, perm[..., None])[..., 0] < 0, -1.0, 1.0).to(G.dtype)
    return perm, sign


def _moves(D):
    """All single-level flips and level swaps with any signs on the swapped levels.

    Returns ``(idx, flipmask)``: new ``perm = perm[:, idx[q]]`` and new ``sign =
    sign[:, idx[q]] * flipmask[q]``, shapes (Q, D).
    """
    idx, flips = [], []
    ident = np.arange(D)
    for i in range(D):
        f = np.ones(D)
        f[i] = -1.0
        idx.append(ident)
        flips.append(f)
    for i in range(D):
        for j in range(i + 1, D):
            sw = ident.copy()
            sw[i], sw[j] = j, i
            for si in (1.0, -1.0):
                for sj in (1.0, -1.0):
                    f = np.ones(D)
                    f[i], f[j] = si, sj
                    idx.append(sw)
                    flips.append(f)
    return np.array(idx), np.array(flips)


def _local_search(G, A, B, perm, sign, max_iter=None):
    """Best-improvement local search over level flips and swaps (vectorized over pairs)."""
    P, D, _ = G.shape
    if D == 1:
        return perm, sign, _score(G, A, B, perm[:, None], sign[:, None])[:, 0]
    idx, flips = _moves(D)
    idx = torch.as_tensor(idx, device=G.device)
    flips = torch.as_tensor(flips, dtype=G.dtype, device=G.device)
    score = _score(G, A, B, perm[:, None], sign[:, None])[:, 0]
    active = torch.ones(P, dtype=torch.bool, device=G.device)
    for _ in range(4 * D if max_iter is None else max_iter):
        rows = active.nonzero()[:, 0]
        if len(rows) == 0:
            break
        cand_p = perm[rows][:, idx]  # (R, Q, D)
        cand_s = sign[rows][:, idx] * flips
        cand = _score(G[rows], A[rows], B[rows], cand_p, cand_s)
        best, q = cand.max(dim=1)
        better = best > score[rows] + 1e-12 * (1.0 + score[rows].abs())
        take = rows[better]
        ar = torch.arange(len(rows), device=G.device)[better]
        perm[take] = cand_p[ar, q[better]]
        sign[take] = cand_s[ar, q[better]]
        score[take] = best[better]
        active[rows[~better]] = False
    return perm, sign, score


def _sorted_blocks(X, t):
    """``X`` (R, L, C) split into ``2**t`` blocks of leaves, each sorted per output."""
    R, L, C = X.shape
    return X.reshape(R, 1 << t, L >> t, C).sort(dim=2).values


def _branch_and_bound(G, A, B, incumbent, max_rows=_MAX_ROWS):
    """Exact maximum for each pair, or ``None`` for pairs beyond ``max_rows``.

    Returns ``(perm, sign, score, certified, work)``; rows that are not
    certified hold garbage and must be taken from the incumbent; ``work`` counts
    the leaf values bounded.
    """
    P, D, _ = G.shape
    dev, dt = G.device, G.dtype
    absG = G.abs()
    out_perm = torch.zeros((P, D), dtype=torch.long, device=dev)
    out_sign = torch.ones((P, D), dtype=dt, device=dev)
    out_score = torch.full((P,), -np.inf, dtype=dt, device=dev)
    certified = torch.ones(P, dtype=torch.bool, device=dev)
    tol = 1e-9 * (1.0 + incumbent.abs())
    # frontier: pair index, assigned perm prefix, sign prefix, exact node part
    pair = torch.arange(P, device=dev)
    fperm = torch.zeros((P, 0), dtype=torch.long, device=dev)
    fsign = torch.zeros((P, 0), dtype=dt, device=dev)
    fnode = torch.zeros(P, dtype=dt, device=dev)
    ks = torch.arange(D, device=dev)
    work = 0
    for t in range(D):
        R = len(pair)
        # children: every unused old level k with both signs
        used = torch.zeros((R, D), dtype=torch.bool, device=dev)
        if t:
            used.scatter_(1, fperm, True)
        k = ks.repeat(R, 2)  # (R, 2D)
        s = torch.cat([torch.ones(D, dtype=dt, device=dev),
                       -torch.ones(D, dtype=dt, device=dev)]).repeat(R, 1)
        ok = ~used.repeat(1, 2)
        parent = torch.arange(R, device=dev)[:, None].expand(R, 2 * D)[ok]
        k, s = k[ok], s[ok]
        cp = pair[parent]
        cperm = torch.cat([fperm[parent], k[:, None]], dim=1)
        csign = torch.cat([fsign[parent], s[:, None]], dim=1)
        cnode = fnode[parent] + s * G[cp, t, k]
        # node bound of the unassigned levels: best |G| over unused old levels
        cused = used[parent].clone()
        cused[torch.arange(len(k), device=dev), k] = True
        rest = 0.0
        if t + 1 < D:
            rest = (absG[cp, t + 1:] * (~cused)[:, None, :]).amax(dim=2).sum(dim=1)
        # leaf bound: complete the prefix with the unused levels in order, sign +1
        tail = ks.repeat(len(k), 1)[~cused].reshape(len(k), D - t - 1)
        full_p = torch.cat([cperm, tail], dim=1)
        full_s = torch.cat([csign, torch.ones((len(k), D - t - 1), dtype=dt, device=dev)], 1)
        ub = torch.empty(len(k), dtype=dt, device=dev)
        work += len(k) * A.shape[1] * A.shape[2]
        step = max(1, _CHUNK_BYTES // (8 * A.shape[1] * A.shape[2] * 3))
        for c0 in range(0, len(k), step):
            sl = slice(c0, c0 + step)
            lp = leaf_perm(full_p[sl], full_s[sl], D)
            Bm = torch.gather(B[cp[sl]], 1, lp[..., None].expand(*lp.shape, B.shape[2]))
            if t + 1 < D:
                leaf = (_sorted_blocks(A[cp[sl]], t + 1)
                        * _sorted_blocks(Bm, t + 1)).sum(dim=(1, 2, 3))
            else:
                leaf = (A[cp[sl]] * Bm).sum(dim=(1, 2))
            ub[sl] = cnode[sl] + leaf
        ub = ub + rest
        keep = ub >= incumbent[cp] - tol[cp]
        pair, fperm, fsign, fnode = cp[keep], cperm[keep], csign[keep], cnode[keep]
        if t + 1 == D:
            score = ub[keep]
            out_score.scatter_reduce_(0, pair, score, reduce="amax")
            is_best = score == out_score[pair]
            # one row per pair: the first that reaches the maximum
            first = torch.full((P,), len(pair), dtype=torch.long, device=dev)
            first.scatter_reduce_(0, pair[is_best], torch.arange(len(pair), device=dev)[is_best],
                                  reduce="amin")
            has = first < len(pair)
            out_perm[has] = fperm[first[has]]
            out_sign[has] = fsign[first[has]]
            break
        counts = torch.bincount(pair, minlength=P)
        over = counts * A.shape[1] > _PAIR_BUDGET
        if over.any():
            certified[over] = False
            alive = certified[pair]
            pair, fperm, fsign, fnode = pair[alive], fperm[alive], fsign[alive], fnode[alive]
            counts[over] = 0
        if len(pair) > max_rows:
            # give up on the pairs with the largest frontiers until the rest fits
            order = torch.argsort(counts, descending=True)
            cum = torch.cumsum(counts[order], 0)
            drop = order[(len(pair) - (cum - counts[order])) > max_rows]
            certified[drop] = False
            alive = certified[pair]
            pair, fperm, fsign, fnode = pair[alive], fperm[alive], fsign[alive], fnode[alive]
    return out_perm, out_sign, out_score, certified, work


def _parity(x):
    """Parity of the set bits of each entry of an int64 tensor."""
    p = torch.zeros_like(x)
    while bool(x.any()):
        p ^= x & 1
        x = x >> 1
    return p


def hadamard(depth):
    """``H[w, l] = (-1)**|w & l|`` over ``depth`` levels: float64, (2**D, 2**D)."""
    i = torch.arange(1 << depth)
    return (1 - 2 * _parity(i[:, None] & i[None, :])).double()


@functools.lru_cache(maxsize=None)
def _walsh_tables(D):
    """Constant tables of :func:`exhaustive_search` at depth ``D`` (CPU, cached).

    Returns ``(full, half, perms, rows, node_rows, node_cols)``: the Hadamard
    matrices of ``D`` and ``D - 1`` levels; every level order (``D!`` rows,
    identity first); for each order ``q`` and spectral index ``w`` (even ``w``
    first, then odd) the flat index ``w * L + pi_q(w)`` of the cross spectrum;
    the positions of the single-level indices ``w = {d}`` in that order; and the
    index ``d * D + pi_q(d)`` of the node term they receive.
    """
    L = 1 << D
    w = torch.arange(L)
    order = torch.cat([w[0::2], w[1::2]])
    perms = torch.tensor(list(itertools.permutations(range(D))), dtype=torch.long)
    wbits = leaf_bits(D)  # wbits[w, d] = 1 iff level d is in the index set w
    pw = (wbits[None, :, :] << (D - 1 - perms)[:, None, :]).sum(dim=2)  # (Q, L): pi_q(w)
    rows = order[:, None] * L + pw[:, order].T  # (L, Q)
    node_rows = torch.argsort(order)[1 << (D - 1 - torch.arange(D))]
    node_cols = torch.arange(D)[:, None] * D + perms.T  # (D, Q)
    return hadamard(D), hadamard(D - 1), perms, rows, node_rows, node_cols


def exhaustive_cost(depth, n_pairs):
    """Work units (``D! * 4**D`` per pair) of :func:`exhaustive_search`."""
    return n_pairs * math.factorial(depth) * (1 << (2 * depth))


def exhaustive_search(G, A, B, *, with_ops=True):
    """Exact best op ``(perm, sign)`` of each pair of oblivious trees, over the whole group.

    Every one of the ``2**D * D!`` ops is scored, at the cost of ``D!`` dense
    products instead of ``2**D * D!`` leaf gathers, through the Walsh-Hadamard
    form of the similarity. With ``chi_w(f) = (-1)**|w & f|`` (``w``, ``f``
    subsets of levels), ``A^[w] = sum_l chi_w(l) A[l]`` and a level order ``pi``
    acting on subsets, the similarity of op ``(pi, f)`` (``f``: the negated levels) is::

        sim(pi, f) = sum_w chi_w(f) Y_pi[w],
        Y_pi[w] = <A^[w], B^[pi(w)]> / 2**D  +  [w = {d}] G[d, pi(d)]

    -- one Hadamard transform of ``Y_pi`` gives all ``2**D`` sign patterns of
    ``pi`` at once. The last level's two signs are folded in one product
    (``max(u + v, u - v) = u + |v|``), halving the work.

    Parameters
    ----------
    G : Tensor of shape (P, D, D)
        Weighted inner products of the splits of ``a`` (rows) and ``b`` (columns).
    A, B : Tensor of shape (P, 2**D, C)
        Leaf values of ``a`` and ``b``.
    with_ops : bool, default=True
        Also return the maximizing op (else ``perm`` and ``sign`` are None).

    Returns
    -------
    perm : LongTensor of shape (P, D) or None
    sign : Tensor of shape (P, D) or None
    score : Tensor of shape (P,)
        The maximum (ties: the first op in (sign pattern, level order) order,
        the identity first).
    """
    P, D, _ = G.shape
    L, dev, dt = 1 << D, G.device, G.dtype
    full, half, perms, rows, node_rows, node_cols = (t.to(dev) for t in _walsh_tables(D))
    full, half, Q = full.to(dt), half.to(dt), len(perms)
    Ah = torch.einsum("wl,plc->pwc", full, A)
    Bh = torch.einsum("wl,plc->pwc", full, B)
    score = torch.empty(P, dtype=dt, device=dev)
    arg_q = torch.zeros(P, dtype=torch.long, device=dev)
    arg_f = torch.zeros(P, dtype=torch.long, device=dev)
    pairs = max(1, min(P, _SPECTRAL_BYTES // (8 * L * L)))
    q_step = max(1, min(Q, _SPECTRAL_BYTES // (8 * 4 * L * pairs)))
    for p0 in range(0, P, pairs):
        ps = slice(p0, p0 + pairs)
        n = len(Ah[ps])
        XT = torch.bmm(Ah[ps], Bh[ps].transpose(1, 2)).reshape(n, L * L).T.contiguous() / L
        GT = G[ps].reshape(n, D * D).T.contiguous()
        best = torch.full((n,), -np.inf, dtype=dt, device=dev)
        bq = torch.zeros(n, dtype=torch.long, device=dev)
        bf = torch.zeros(n, dtype=torch.long, device=dev)
        for q0 in range(0, Q, q_step):
            k = min(q_step, Q - q0)
            Y = XT.index_select(0, rows[:, q0:q0 + k].reshape(-1)).view(L, k, n)
            Y.index_add_(0, node_rows,
                         GT.index_select(0, node_cols[:, q0:q0 + k].reshape(-1)).view(D, k, n))
            Z = torch.matmul(half, Y.view(2, L // 2, k * n))  # (2, L/2, k*n)
            S = (Z[0] + Z[1].abs()).view(L // 2 * k, n)
            m, a = S.max(dim=0)
            up = m > best
            if bool(up.any()):
                best = torch.where(up, m, best)
                neg = Z[1].view(L // 2 * k, n).gather(0, a[None])[0] < 0
                bq = torch.where(up, q0 + a % k, bq)
                bf = torch.where(up, 2 * (a // k) + neg.long(), bf)
        score[ps], arg_q[ps], arg_f[ps] = best, bq, bf
    if not with_ops:
        return None, None, score
    shifts = D - 1 - torch.arange(D, device=dev)
    sign = 1.0 - 2.0 * ((arg_f[:, None] >> shifts[None, :]) & 1).to(dt)
    return perms[arg_q], sign, score


def oblivious_search(G, A, B, *, exact=True, max_iter=None, max_rows=_MAX_ROWS):
    """Best op ``(perm, sign)`` for each pair of oblivious trees.

    Parameters
    ----------
    G : Tensor of shape (P, D, D)
        Weighted inner products of the splits of ``a`` (rows) and ``b`` (columns).
    A, B : Tensor of shape (P, 2**D, C)
        Leaf values of ``a`` and ``b``.
    exact : bool, default=True
        Run the local search and the branch and bound after the seed; False
        returns the seed improved by ``max_iter`` local-search steps.
    max_iter : int, default=None
        Local-search steps (``4 * D`` when None; 0: the seed alone).
    max_rows : int
        Frontier budget of the branch and bound.

    Returns
    -------
    perm : LongTensor of shape (P, D)
    sign : Tensor of shape (P, D)
    score : Tensor of shape (P,)
    certified : BoolTensor of shape (P,)
        True where ``score`` is proven to be the maximum over the group.
    """
    P, D, _ = G.shape
    perm, sign = _seed(G, A, B)
    ident_p = torch.arange(D, device=G.device).repeat(P, 1)
    ident_s = torch.ones((P, D), dtype=G.dtype, device=G.device)
    both = _score(G, A, B, torch.stack([ident_p, perm], 1), torch.stack([ident_s, sign], 1))
    use_seed = both[:, 1] > both[:, 0]
    perm = torch.where(use_seed[:, None], perm, ident_p)
    sign = torch.where(use_seed[:, None], sign, ident_s)
    perm, sign, score = _local_search(G, A, B, perm, sign, None if exact else max_iter)
    certified = torch.zeros(P, dtype=torch.bool, device=G.device)
    if not exact:
        return perm, sign, score, certified
    work = 0
    for s in range(0, P, _BB_PAIRS):
        if work > _WORK_BUDGET:
            break
        sl = slice(s, s + _BB_PAIRS)
        bp, bs, bscore, cert, w = _branch_and_bound(G[sl], A[sl], B[sl], score[sl], max_rows)
        work += w
        better = cert & (bscore > score[sl])
        idx = torch.arange(s, min(s + _BB_PAIRS, P), device=G.device)[better]
        perm[idx], sign[idx], score[idx] = bp[better], bs[better], bscore[better]
        certified[sl] = cert
    return perm, sign, score, certified

"""The compiled pieces of the fast training step (:mod:`._fast_step`) around the
fused kernel of the trees: the minibatch gather into the kernel's blocked
layout, the built-in losses' gradient with respect to the outputs (with the
additive table's term and its gradient), and one Adam step of every
parameter followed by the moving average of the weights.

Imported only where numba imports (the fast step runs inside the numba
engine's training loop). Arithmetic is float32 but for the sums of the loss
and of the weights (float64).
"""

from __future__ import annotations

import numba
import numpy as np

from ..model._fused_numba import (
    _ADAM_OPTS,
    _OPTS,
    RB,
    adam_span,
    add_table_rows,
    lerp_span,
)

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)



@numba.njit(**_OPTS)
def gather_blocked(X, idx, Xb):
    """``Xb[blk, f, r] = X[idx[blk * RB + r], f]`` (the rows of ``idx`` as
    :func:`sktree_lmc.model._kernel.blocked` lays them out), zero past the
    last row."""
    B = idx.shape[0]
    F = X.shape[1]
    for blk in range(Xb.shape[0]):
        Xk = Xb[blk]
        for r in range(RB):
            i = blk * RB + r
            if i < B:
                row = idx[i]
                for f in range(F):
                    Xk[f, r] = X[row, f]
            else:
                for f in range(F):
                    Xk[f, r] = _ZERO


@numba.njit(**_OPTS)
def objective_gradient(out, idx, targets, additive, loss, Gb):
    """The weighted mean loss of rows ``idx`` and its gradient.

    ``out`` (n_blocks, C, RB): the trees' output of the rows (blocked);
    ``targets``: ``(target, weight)``, float32 of shapes (n, C) and (n,),
    indexed by ``idx``; ``additive``: ``(table, scale, codes, gtable,
    rowmask)``, the additive table (T, C) (no rows: none), its factor per row
    (T, 1) (no rows: 1), the code columns of all rows (n, J), the table's
    gradient (written) and the rows that train (T,) (no rows: all);
    ``loss``: ``(softmax, label_smoothing)`` (``softmax``: the cross-entropy,
    else the squared error). Writes the gradient of the loss with respect to the
    outputs into ``Gb`` (blocked as ``out``, zero past the last row) and
    that of the table into ``gtable``; returns the loss (float64).

    The loss is the torch path's: ``sum_b w_b l_b / max(sum_b w_b, 1e-12)``
    with ``l_b`` the cross-entropy of ``softmax(z_b)`` with the targets
    smoothed as torch smooths them (``(1 - s) t + s / C``), or ``mean_c (z_bc
    - t_bc) ** 2``: :func:`objective_rows` on every block, then
    :func:`scatter_table` and :func:`loss_total` (the fast step runs them in
    tasks over blocks of rows and ranges of table rows)."""
    lb = np.empty(idx.shape[0], dtype=np.float32)
    objective_rows(out.reshape((1,) + out.shape), (idx, 0), targets, additive, loss, (Gb, lb))
    scatter_table(Gb, idx, additive, (0, 1))
    return loss_total(lb, idx, targets[1])


@numba.njit(**_ADAM_OPTS)
def add_table_rows_2(table, scale, codes, z):
    """``z + sum_j table[k_j] * scale[k_j]`` for the codes ``k_j`` of a row
    (``codes`` (J,)), in their order, with two outputs (``z``: ``(z0, z1)``):
    :func:`sktree_lmc.model._fused_numba.add_table_rows` with the sums in
    registers. Compiled without reassociation, so that the sums stay in the
    codes' order (a vectorized reduction would change their rounding)."""
    T = table.shape[0]
    scaled = scale.shape[0] > 0
    z0, z1 = z
    for j in range(codes.shape[0]):
        k = codes[j]
        if k < 0:
            k += T
        f = scale[k, 0] if scaled else _ONE
        z0 += table[k, 0] * f
        z1 += table[k, 1] * f
    return z0, z1


@numba.njit(**_OPTS)
def weight_sum(weight, idx):
    """``sum_b weight[idx[b]]`` (float64, in row order)."""
    wsum = 0.0
    for b in range(idx.shape[0]):
        wsum += weight[idx[b]]
    return wsum


@numba.njit(**_OPTS)
def loss_total(lb, idx, weight):
    """The weighted mean ``sum_b w_b l_b / max(sum_b w_b, 1e-12)`` (float64,
    in row order) of the rows' losses ``lb`` (float32, of :func:`objective_rows`)."""
    total = 0.0
    for b in range(idx.shape[0]):
        total += np.float64(lb[b]) * weight[idx[b]]
    return total / max(weight_sum(weight, idx), 1e-12)


@numba.njit(**_OPTS)
def objective_rows(parts, batch, targets, additive, loss, sink):
    """The loss's gradient with respect to the outputs on some blocks of the
    minibatch's rows: the part of :func:`objective_gradient` that goes row
    by row (all but the table's gradient and the sum of the losses).

    ``parts`` (n_parts, n, C, RB): partial outputs of blocks ``first ..
    first + n`` of the rows, summed in their order; ``batch``: ``(idx,
    first)``, all the minibatch's rows (their weights normalize the loss);
    ``targets``, ``additive`` and ``loss`` as :func:`objective_gradient`
    takes them (the table's gradient and row mask unused); ``sink``: ``(Gb,
    lb)``, the gradient (n_blocks, C, RB) and the loss per row (float32,
    unweighted) of all the rows, written at these blocks' rows."""
    target, weight = targets
    table, scale, codes, _, _ = additive
    softmax, smoothing = loss
    idx, first = batch
    Gb, lb_rows = sink
    B = idx.shape[0]
    C = parts.shape[2]
    T = table.shape[0]
    J = codes.shape[1] if T > 0 else 0
    inv = np.float32(1.0 / max(np.float32(weight_sum(weight, idx)), np.float32(1e-12)))
    keep = np.float32(1.0 - smoothing)
    spread = np.float32(smoothing / C)
    two_over_c = np.float32(2.0) / np.float32(C)
    z = np.empty((C, RB), dtype=np.float32)
    t = np.zeros((C, RB), dtype=np.float32)
    wb = np.zeros(RB, dtype=np.float32)
    top = np.empty(RB, dtype=np.float32)
    acc = np.empty(RB, dtype=np.float32)
    tsum = np.empty(RB, dtype=np.float32)
    lb = np.empty(RB, dtype=np.float32)
    for local in range(parts.shape[1]):
        blk = first + local
        n = min(RB, B - blk * RB)
        G = Gb[blk]
        for c in range(C):
            for r in range(RB):
                z[c, r] = parts[0, local, c, r]
        for k in range(1, parts.shape[0]):
            for c in range(C):
                for r in range(RB):
                    z[c, r] += parts[k, local, c, r]
        for r in range(n):
            row = idx[blk * RB + r]
            wb[r] = weight[row] * inv
            for c in range(C):
                t[c, r] = target[row, c]
            if J > 0 and C == 2:  # the table's rows summed in registers (two outputs)
                z[0, r], z[1, r] = add_table_rows_2(table, scale, codes[row], (z[0, r], z[1, r]))
            elif J > 0:
                add_table_rows(table, scale, codes, row, z, r)
        for r in range(n, RB):
            wb[r] = _ZERO
            for c in range(C):
                t[c, r] = _ZERO
        for r in range(RB):
            lb[r] = _ZERO
        if softmax:
            for r in range(RB):
                top[r] = z[0, r]
            for c in range(1, C):
                for r in range(RB):
                    top[r] = max(top[r], z[c, r])
            for r in range(RB):
                acc[r] = _ZERO
                tsum[r] = _ZERO
            for c in range(C):
                for r in range(RB):
                    acc[r] += np.exp(z[c, r] - top[r])
            for r in range(RB):
                top[r] += np.log(acc[r])  # log-sum-exp
            for c in range(C):
                for r in range(RB):
                    tc = t[c, r] * keep + spread
                    tsum[r] += tc
                    lb[r] += tc * (top[r] - z[c, r])
            for c in range(C):
                for r in range(RB):
                    tc = t[c, r] * keep + spread
                    G[c, r] = (np.exp(z[c, r] - top[r]) * tsum[r] - tc) * wb[r]
        else:
            for c in range(C):
                for r in range(RB):
                    d = z[c, r] - t[c, r]
                    lb[r] += d * d
                    G[c, r] = two_over_c * d * wb[r]
            for r in range(RB):
                lb[r] = lb[r] / C
        for r in range(n):
            lb_rows[blk * RB + r] = lb[r]
        for c in range(C):
            for r in range(n, RB):
                G[c, r] = _ZERO


@numba.njit(**_OPTS)
def scatter_table(Gb, idx, additive, part):
    """The additive table's gradient (``gtable`` of ``additive``, as
    :func:`objective_gradient` takes it) from the outputs' gradient ``Gb``
    of rows ``idx``, on the table's rows of part ``k`` of ``n_parts``
    (``part``: ``(k, n_parts)``; :func:`span`): zeroed, then every row's codes
    that fall in them added, rows and codes in their order (so the same sums
    whatever the parts). A row the mask leaves out gets ``+0`` (the gradient
    times its mask, 0: its sum stays exactly 0 for finite gradients) rather
    than a test per code, which mispredicts."""
    _, scale, codes, gtable, rowmask = additive
    T = gtable.shape[0]
    C = gtable.shape[1]
    J = codes.shape[1] if T > 0 else 0
    r0, r1 = span(T, part)
    flat = gtable.reshape(-1)[r0 * C : r1 * C]
    for i in range(flat.shape[0]):
        flat[i] = _ZERO
    if J == 0 or r0 == r1:
        return
    scaled = scale.shape[0] > 0
    masked = rowmask.shape[0] > 0
    for b in range(idx.shape[0]):
        row = idx[b]
        blk = b // RB
        col = b - blk * RB
        G = Gb[blk]
        if C != 2:
            for j in range(J):
                k = codes[row, j]
                if k < 0:
                    k += T
                if k >= r0 and k < r1:
                    f = scale[k, 0] if scaled else _ONE
                    f = f * np.float32(rowmask[k] != _ZERO) if masked else f
                    for c in range(C):
                        gtable[k, c] += G[c, col] * f
            continue
        g0 = G[0, col]
        g1 = G[1, col]
        for j in range(J):
            k = codes[row, j]
            if k < 0:
                k += T
            if k < r0 or k >= r1:
                continue
            f = scale[k, 0] if scaled else _ONE
            f = f * np.float32(rowmask[k] != _ZERO) if masked else f
            gtable[k, 0] += g0 * f
            gtable[k, 1] += g1 * f


@numba.njit(**_OPTS)
def span(n, part):
    """Part ``k`` of ``n_parts`` (``part``: ``(k, n_parts)``) of ``range(n)``:
    ``(n k // n_parts, n (k + 1) // n_parts)``."""
    k, n_parts = part
    return n * k // n_parts, n * (k + 1) // n_parts


@numba.njit(**_ADAM_OPTS)
def sum_blocks(blocks, n_blocks, grads, part):
    """``grads[n] = sum_k blocks[n][k]`` over the first ``n_blocks`` blocks,
    from zero in block order (the order in which the kernel's backward pass
    adds them), on part ``part`` (:func:`span`) of each flat gradient;
    ``blocks``: 2-d arrays (blocks, size of ``grads[n]``)."""
    for n in range(len(grads)):
        add_rows(blocks[n], n_blocks, grads[n], span(grads[n].shape[0], part))


@numba.njit(**_ADAM_OPTS)
def add_rows(rows, n_rows, out, bounds):
    """``out[lo:hi] = sum_k rows[k, lo:hi]`` over the first ``n_rows`` rows,
    from zero in row order (``bounds``: ``(lo, hi)``)."""
    lo, hi = bounds
    g = out[lo:hi]
    for i in range(g.shape[0]):
        g[i] = _ZERO
    for k in range(n_rows):
        r = rows[k][lo:hi]
        for i in range(g.shape[0]):
            g[i] += r[i]


@numba.njit(**_ADAM_OPTS)
def adam_part(tensors, steps, hyper, averages, ema, where):
    """One Adam step on part of every parameter, then the moving average's
    update there, without counting the step (the caller adds 1 to each
    ``steps[n]`` once every part has run).

    ``tensors``: ``(params, grads, exp_avgs, exp_avg_sqs)``, tuples of flat
    float32 arrays (updated in place as
    :func:`sktree_lmc.model._fused_numba.adam_span` updates one);
    ``steps``: the step count (1,) of each parameter, read; ``hyper``
    (n_params, 4) float64: ``(lr, beta1, beta2, eps)`` per parameter;
    ``averages``: the averaged copies of the parameters, and ``ema`` the
    weight of the new values (:func:`~sktree_lmc.model._fused_numba.lerp_span`;
    ``ema < 0``: no average); ``where`` is ``(units, part)``, parameter ``n``
    updated on the flat elements of units ``span(len // units[n], part)`` of
    ``units[n]`` elements each (:func:`span`)."""
    params, grads, exp_avgs, exp_avg_sqs = tensors
    units, part = where
    for n in range(len(params)):
        p = params[n]
        unit = units[n]
        lo, hi = span(p.shape[0] // unit, part)
        adam_span((p, grads[n], exp_avgs[n], exp_avg_sqs[n]), steps[n], hyper[n],
                  (lo * unit, hi * unit))
        if ema >= 0:
            lerp_span(p, averages[n], ema, (lo * unit, hi * unit))


@numba.njit(**_OPTS)
def finish_step(part, batch, additive, grads, adam):
    """Part ``part`` (``(k, n_parts)``) of the end of a step, once the rows'
    tasks have run: the table's gradient on its rows of the table
    (:func:`scatter_table`), the trees' gradients summed over the blocks
    (:func:`sum_blocks`) and Adam (:func:`adam_part`) on its part of each
    parameter. ``batch``: ``(Gb, idx, lb, weight)``; ``grads``: ``(blocks,
    n_blocks, flats)`` of :func:`sum_blocks`; ``adam``: ``(tensors, steps,
    hyper, averages, ema, units)``. Returns the loss (:func:`loss_total`)
    for part 0, else 0."""
    Gb, idx, lb, weight = batch
    blocks, n_blocks, flats = grads
    tensors, steps, hyper, averages, ema, units = adam
    scatter_table(Gb, idx, additive, part)
    sum_blocks(blocks, n_blocks, flats, part)
    adam_part(tensors, steps, hyper, averages, ema, (units, part))
    if part[0] == 0:
        return loss_total(lb, idx, weight)
    return 0.0


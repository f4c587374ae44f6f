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
    adam_update,
    add_table_rows,
    scatter_table_rows,
)

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)



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
    - t_bc) ** 2``. Each block of rows is computed output by output over its
    rows (vectorized), the additive table's gather and scatter row by row."""
    target, weight = targets
    table, scale, codes, gtable, rowmask = additive
    softmax, smoothing = loss
    B = idx.shape[0]
    C = out.shape[1]
    T = table.shape[0]
    J = codes.shape[1] if T > 0 else 0
    wsum = 0.0
    for b in range(B):
        wsum += weight[idx[b]]
    inv = np.float32(1.0 / max(np.float32(wsum), np.float32(1e-12)))
    keep = np.float32(1.0 - smoothing)
    spread = np.float32(smoothing / C)
    two_over_c = np.float32(2.0) / np.float32(C)
    flat = gtable.reshape(-1)
    for i in range(flat.shape[0]):
        flat[i] = _ZERO
    z = np.empty((C, RB), dtype=np.float32)
    t = np.zeros((C, RB), dtype=np.float32)
    wb = np.zeros(RB, dtype=np.float32)
    top = np.empty(RB, dtype=np.float32)
    acc = np.empty(RB, dtype=np.float32)
    tsum = np.empty(RB, dtype=np.float32)
    lb = np.empty(RB, dtype=np.float32)
    total = 0.0
    for blk in range(Gb.shape[0]):
        n = min(RB, B - blk * RB)
        G = Gb[blk]
        for c in range(C):
            for r in range(RB):
                z[c, r] = out[blk, c, r]
        for r in range(n):
            row = idx[blk * RB + r]
            wb[r] = weight[row] * inv
            for c in range(C):
                t[c, r] = target[row, c]
            if J > 0:
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
            total += np.float64(lb[r]) * weight[idx[blk * RB + r]]
        for c in range(C):
            for r in range(n, RB):
                G[c, r] = _ZERO
        for r in range(n if J > 0 else 0):
            scatter_table_rows(G, r, scale, codes, idx[blk * RB + r], (gtable, rowmask))
    return total / max(wsum, 1e-12)


@numba.njit(**_ADAM_OPTS)
def adam_average(tensors, steps, hyper, averages, ema):
    """One Adam step of every parameter, then the moving average's update.

    ``tensors``: ``(params, grads, exp_avgs, exp_avg_sqs)``, tuples of flat
    float32 arrays (the parameters and moments updated in place, as
    :func:`sktree_lmc.model._fused_numba.adam_update` updates one);
    ``steps``: the step count (1,) of each parameter, incremented;
    ``hyper`` (n_params, 4) float64: ``(lr, beta1, beta2, eps)`` per
    parameter; ``averages``: the averaged copies of the parameters, and
    ``ema`` the weight of the new values, ``avg += ema * (p - avg)`` as
    :func:`torch.lerp` computes it (``ema < 0``: no average)."""
    params, grads, exp_avgs, exp_avg_sqs = tensors
    w = np.float32(ema)
    omw = _ONE - w
    for n in range(len(params)):
        p = params[n]
        adam_update((p, grads[n], exp_avgs[n], exp_avg_sqs[n]), steps[n], hyper[n])
        if ema < 0:
            continue
        a = averages[n]
        if abs(w) < _HALF:
            for i in range(p.shape[0]):
                a[i] = a[i] + w * (p[i] - a[i])
        else:
            for i in range(p.shape[0]):
                a[i] = p[i] - (p[i] - a[i]) * omw

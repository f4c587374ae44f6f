"""The compiled functions of the fused training kernel (:mod:`sktree_lmc.model._kernel`).

Imported only where numba imports; every function is compiled on first use
and cached on disk (``cache=True``). Each chunk of trees (``bounds[ch]`` to
``bounds[ch + 1]``) is one call of :func:`forward_chunk` or
:func:`backward_chunk`; the drivers (``*_serial``) run the chunks they are
given one after the other, without the GIL (``nogil=True``), so that
:mod:`sktree_lmc.model._kernel` can run groups of chunks in several threads.

Related arrays travel together as tuples (numba compiles a function for each
tuple of array types and unpacks them at no cost):

- ``model``: ``(W, bias, pi)``, the split weights (M, N, F), split biases
  (M, N) and leaf values (M, L, C);
- ``plan``: the routing schedule ``(parent, sig, leaf, leaf_pos, child,
  sig_ptr, sig_pos)`` of :func:`sktree_lmc.model._kernel._schedule`;
- the forward's ``sink``: ``(parts, S, keep)``, the partial outputs of the
  chunks (n_chunks, n_blocks, C, RB), the kept sigmoids and whether to keep
  them; the backward's ``data``: ``(Xb, Gb, S)``, the blocked inputs, the
  output's gradient and the kept sigmoids, and ``grads``: ``(gW, gb, gpi,
  fmask)``, the gradients added to and the uint8 mask (M, F) of the split
  weights whose gradients are computed.

:func:`route` (shared by :func:`tree_products` and
:func:`products_contract`), :func:`leaf_backward` and :func:`split_backward`
are inlined into their callers by numba (``inline="always"``): as calls,
the shared routing step cost 2-5 % of a training step and the backward's
tuples about 4 %; inlined, the step is as fast as with the arrays passed
one by one, and its results are the same bits. So are :func:`sigmoids`,
:func:`tree_sigmoids`, :func:`tree_products` and :func:`products_contract`:
a call passes its arrays with reference counts (atomic increments and
decrements), about 40 per tree and block of rows, which cost the forward
pass 12 % (0.84 to 0.73 ms on the default model's step, 512 rows).

All arithmetic is float32 (the constants below are float32 scalars, so that
numba does not widen expressions to float64).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

_OPTS = dict(nogil=True, cache=True, fastmath=True, error_model="numpy", boundscheck=False)

_LOG2E = np.float32(1.4426950408889634)
_LN2 = np.float32(0.6931471805599453)
_CLAMP = np.float32(87.0)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
_ZERO = np.float32(0.0)
# exp(y) = sum y**k / k! on |y| <= ln(2) / 2, k <= 6 (relative error < 2e-7)
_C2 = np.float32(1.0 / 2.0)
_C3 = np.float32(1.0 / 6.0)
_C4 = np.float32(1.0 / 24.0)
_C5 = np.float32(1.0 / 120.0)
_C6 = np.float32(1.0 / 720.0)
#: Routing products below this are set to 0: they would otherwise become
#: float32 subnormals (products of sigmoids of sharp splits), on which every
#: operation is about a hundred times slower; a leaf reached with such a
#: probability adds nothing a float32 output can hold.
_TINY = np.float32(1e-25)

#: Rows per block: a compile-time constant, so that every row loop has a
#: known trip count (fully vectorized, no remainder; 3-4 times faster than
#: the same loops over a runtime count). Inputs are padded with zero rows to
#: a multiple of it (:mod:`sktree_lmc.model._kernel`).
RB = 128

#: LLVM function attributes that :func:`wide_vectors` gives a kernel: vectors of
#: the machine's full width. LLVM's tuning for the server x86 cores with AVX-512
#: (Skylake to Emerald Rapids) prefers 256-bit vectors, against the clock
#: slowdown of 512-bit ones on the first of them; on these kernels (arithmetic on
#: a few kilobytes in L1) 512-bit vectors were measured 20-30 % faster on an
#: Emerald Rapids core. Without AVX-512 the attribute changes nothing.
_WIDE_ATTRIBUTES = ('"prefer-vector-width"="512"',)


@intrinsic
def wide_vectors(typingctx):
    """Give the calling compiled function :data:`_WIDE_ATTRIBUTES` (a no-op
    where llvmlite's function attributes cannot take them)."""

    def codegen(context, builder, signature, args):
        attributes = builder.function.attributes
        for attribute in _WIDE_ATTRIBUTES:
            try:  # llvmlite checks names against LLVM's enum attributes: a string one bypasses it
                set.add(attributes, attribute)
            except TypeError:  # pragma: no cover - another llvmlite
                break
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def bits_as_float(typingctx, bits):
    """The float32 whose bits are the int32 ``bits`` (a bitcast; vectorizes)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@numba.njit(inline="always", **_OPTS)
def sigmoids(z, s, n, N, ibuf, fbuf):
    """``s[n] = sigmoid(z[n])`` and ``s[n + N] = sigmoid(-z[n])`` on a block,
    from ``e = exp(-z)``: ``1 / (1 + e)`` and ``e / (1 + e)``.

    ``exp`` is ``2**k * p(y)``: ``k`` the nearest integer to ``x / ln 2`` and
    ``p`` a degree-6 polynomial on ``|y| <= ln(2) / 2``; the power of two is
    built in the exponent bits of ``ibuf`` (read as float32 through its view
    ``fbuf``). Both loops vectorize. ``x`` is clamped to +-87, where
    ``exp`` stays finite in float32 (``sigmoid`` then at least 1.6e-38, not
    subnormal)."""
    for b in range(RB):
        x = -z[n, b]
        x = min(max(x, -_CLAMP), _CLAMP)
        t = x * _LOG2E
        k = np.floor(t + _HALF)
        y = (t - k) * _LN2
        p = _ONE + y * (_ONE + y * (_C2 + y * (_C3 + y * (_C4 + y * (_C5 + y * _C6)))))
        ibuf[b] = (np.int32(k) + np.int32(127)) << np.int32(23)
        s[n, b] = p
    for b in range(RB):
        e = s[n, b] * fbuf[b]
        sv = _ONE / (_ONE + e)
        s[n, b] = sv
        s[n + N, b] = e * sv


@numba.njit(inline="always", **_OPTS)
def tree_sigmoids(Xk, W, bias, m, s, scratch):
    """Logits and two-sided sigmoids ``s`` (2N, RB) of tree ``m`` on one
    block of rows ``Xk`` (F, RB); ``scratch``: ``(z, ibuf, fbuf)``, the
    logits (N, RB) and the buffers of :func:`sigmoids`."""
    z, ibuf, fbuf = scratch
    N = W.shape[1]
    F = W.shape[2]
    for n in range(N):
        bn = bias[m, n]
        for b in range(RB):
            z[n, b] = bn
        for f in range(F):
            w = W[m, n, f]
            if w != _ZERO:  # the features a mask leaves out weigh 0: skipped
                for b in range(RB):
                    z[n, b] += w * Xk[f, b]
        sigmoids(z, s, n, N, ibuf, fbuf)


@numba.njit(inline="always", **_OPTS)
def tree_exp_sigmoids(Xk, W, bias, m, s, z):
    """As :func:`tree_sigmoids`, in one pass per node over the block (``2**k``
    by :func:`bits_as_float`, no buffer), and leaving ``e = exp(-z)`` in
    ``z`` (N, RB): the oblivious kernels keep ``e`` for the backward pass,
    which recomputes ``sigmoid(z) = 1 / (1 + e)`` and ``sigmoid(-z) = e
    sigmoid(z)`` from it (the same operations, so the same values), half the
    memory of keeping both."""
    N = W.shape[1]
    F = W.shape[2]
    for n in range(N):
        bn = bias[m, n]
        for b in range(RB):
            z[n, b] = bn
        for f in range(F):
            w = W[m, n, f]
            if w != _ZERO:  # the features a mask leaves out weigh 0: skipped
                for b in range(RB):
                    z[n, b] += w * Xk[f, b]
        for b in range(RB):
            x = min(max(-z[n, b], -_CLAMP), _CLAMP)
            t = x * _LOG2E
            k = np.floor(t + _HALF)
            y = (t - k) * _LN2
            p = _ONE + y * (_ONE + y * (_C2 + y * (_C3 + y * (_C4 + y * (_C5 + y * _C6)))))
            e = p * bits_as_float((np.int32(k) + np.int32(127)) << np.int32(23))
            sv = _ONE / (_ONE + e)
            z[n, b] = e
            s[n, b] = sv
            s[n + N, b] = e * sv


@numba.njit(inline="always", **_OPTS)
def route(parent, sig, s, pos, i):
    """Routing position ``i`` (a row of ``pos``, (P, RB)): the sigmoid
    ``s[sig[i]]``, times its parent's position where it has one."""
    p = parent[i]
    k = sig[i]
    if p < 0:
        for b in range(RB):
            pos[i, b] = s[k, b]
    else:
        for b in range(RB):
            v = pos[p, b] * s[k, b]
            pos[i, b] = v if v > _TINY else _ZERO


@numba.njit(inline="always", **_OPTS)
def tree_products(plan, s, pos):
    """The routing positions ``pos`` (P, RB) of one tree from its sigmoids."""
    parent, sig = plan[0], plan[1]
    for i in range(parent.shape[0]):
        route(parent, sig, s, pos, i)


@numba.njit(inline="always", **_OPTS)
def products_contract(plan, pi, m, s, pos, acc):
    """The routing products of tree ``m`` (:func:`tree_products`) with the
    leaf contraction fused in: ``acc[c] += pi[m, l, c] * mu_l`` (C, RB);
    with two outputs (binary classification), a leaf below the root's
    children goes straight into ``acc`` without being stored, both outputs
    in one pass."""
    parent, sig, leaf = plan[0], plan[1], plan[2]
    C = pi.shape[2]
    for i in range(parent.shape[0]):
        lf = leaf[i]
        if lf >= 0 and C == 2 and parent[i] >= 0:
            p = parent[i]
            k = sig[i]
            v0 = pi[m, lf, 0]
            v1 = pi[m, lf, 1]
            for b in range(RB):
                q = pos[p, b] * s[k, b]
                q = q if q > _TINY else _ZERO
                acc[0, b] += v0 * q
                acc[1, b] += v1 * q
            continue
        route(parent, sig, s, pos, i)
        if lf < 0:
            continue
        if C == 2:  # a leaf at the root's split (depth 1, decision lists)
            v0 = pi[m, lf, 0]
            v1 = pi[m, lf, 1]
            for b in range(RB):
                q = pos[i, b]
                acc[0, b] += v0 * q
                acc[1, b] += v1 * q
        else:
            for c in range(C):
                v = pi[m, lf, c]
                for b in range(RB):
                    acc[c, b] += v * pos[i, b]


@numba.njit(**_OPTS)
def forward_chunk(Xb, model, plan, m0, m1, sink):
    """Add the output of trees ``m0 .. m1`` on the blocks of rows ``Xb``
    (n_blocks, F, RB) to ``out`` (n_blocks, C, RB), ``sink`` being ``(out,
    S, keep)``. Every array is indexed block by block, so that no row index
    is a runtime offset (numba's negative-index wraparound turns ``X[f, b0 +
    b]`` into gathers).

    With ``keep``, the sigmoids of tree ``m`` on block ``blk`` are written to
    ``S[blk, m]`` (n_blocks, M, 2N, RB) for the backward pass: ``2N`` floats
    per tree and row, where the torch path keeps those and the ``L`` leaf
    probabilities and inner positions."""
    W, bias, pi = model
    out, S, keep = sink
    N = W.shape[1]
    C = pi.shape[2]
    P = plan[0].shape[0]
    z = np.empty((N, RB), dtype=np.float32)
    s_own = np.empty((2 * N, RB), dtype=np.float32)
    pos = np.empty((P, RB), dtype=np.float32)
    acc = np.empty((C, RB), dtype=np.float32)
    ibuf = np.empty(RB, dtype=np.int32)
    fbuf = ibuf.view(np.float32)
    scratch = (z, ibuf, fbuf)
    for blk in range(Xb.shape[0]):
        Xk = Xb[blk]
        acc[:] = _ZERO
        for m in range(m0, m1):
            s = S[blk, m] if keep else s_own
            tree_sigmoids(Xk, W, bias, m, s, scratch)
            products_contract(plan, pi, m, s, pos, acc)
        ok = out[blk]
        for c in range(C):
            for b in range(RB):
                ok[c, b] += acc[c, b]


@numba.njit(inline="always", **_OPTS)
def flushed(v):
    """``v``, or 0 below :data:`_TINY` (a routing product)."""
    return v if v > _TINY else _ZERO


@numba.njit(inline="always", **_OPTS)
def leaf_gradients(mu, Gk, gpi, m):
    """Add the leaf values' gradients of tree ``m`` to ``gpi``: ``gpi[m, l, c]
    += sum_b mu[l, b] Gk[c, b]``, ``mu`` (L, RB) the leaves' routing products
    on a block; with two outputs both in one pass over a leaf's row, eight
    leaves at a time (their sums in registers)."""
    L = mu.shape[0]
    C = Gk.shape[0]
    if C != 2 or L % 8 != 0:
        for leaf in range(L):
            for c in range(C):
                acc = _ZERO
                for b in range(RB):
                    acc += mu[leaf, b] * Gk[c, b]
                gpi[m, leaf, c] += acc
        return
    for l0 in range(0, L, 8):
        p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = _ZERO
        r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = _ZERO
        for b in range(RB):
            g0 = Gk[0, b]
            g1 = Gk[1, b]
            w = mu[l0, b]
            p0 += w * g0
            r0 += w * g1
            w = mu[l0 + 1, b]
            p1 += w * g0
            r1 += w * g1
            w = mu[l0 + 2, b]
            p2 += w * g0
            r2 += w * g1
            w = mu[l0 + 3, b]
            p3 += w * g0
            r3 += w * g1
            w = mu[l0 + 4, b]
            p4 += w * g0
            r4 += w * g1
            w = mu[l0 + 5, b]
            p5 += w * g0
            r5 += w * g1
            w = mu[l0 + 6, b]
            p6 += w * g0
            r6 += w * g1
            w = mu[l0 + 7, b]
            p7 += w * g0
            r7 += w * g1
        gpi[m, l0, 0] += p0
        gpi[m, l0 + 1, 0] += p1
        gpi[m, l0 + 2, 0] += p2
        gpi[m, l0 + 3, 0] += p3
        gpi[m, l0 + 4, 0] += p4
        gpi[m, l0 + 5, 0] += p5
        gpi[m, l0 + 6, 0] += p6
        gpi[m, l0 + 7, 0] += p7
        gpi[m, l0, 1] += r0
        gpi[m, l0 + 1, 1] += r1
        gpi[m, l0 + 2, 1] += r2
        gpi[m, l0 + 3, 1] += r3
        gpi[m, l0 + 4, 1] += r4
        gpi[m, l0 + 5, 1] += r5
        gpi[m, l0 + 6, 1] += r6
        gpi[m, l0 + 7, 1] += r7


@numba.njit(inline="always", **_OPTS)
def leaf_backward(leaf_pos, leaves, m, Gk, pos, h):
    """The leaf values' gradient of tree ``m`` (``leaves``: ``(pi, gpi)``,
    the values and their gradient, added to) and ``h = mu * dL/dmu`` of its
    leaves (into their positions' rows of ``h``, (P, RB)); two outputs in
    one pass per leaf."""
    pi, gpi = leaves
    C = pi.shape[2]
    for lf in range(leaf_pos.shape[0]):
        i = leaf_pos[lf]
        if C == 2:
            v0 = pi[m, lf, 0]
            v1 = pi[m, lf, 1]
            a0 = _ZERO
            a1 = _ZERO
            for b in range(RB):
                p = pos[i, b]
                g0 = Gk[0, b]
                g1 = Gk[1, b]
                a0 += p * g0
                a1 += p * g1
                h[i, b] = (v0 * g0 + v1 * g1) * p
            gpi[m, lf, 0] += a0
            gpi[m, lf, 1] += a1
            continue
        for b in range(RB):
            h[i, b] = _ZERO
        for c in range(C):
            v = pi[m, lf, c]
            acc = _ZERO
            for b in range(RB):
                g = Gk[c, b]
                acc += pos[i, b] * g
                h[i, b] += v * g
            gpi[m, lf, c] += acc
        for b in range(RB):
            h[i, b] *= pos[i, b]


@numba.njit(inline="always", **_OPTS)
def split_backward(Xk, plan, m, s, work, grads):
    """The split weights' and biases' gradients of tree ``m`` (into
    ``grads``' ``gW`` and ``gb``, where ``fmask`` allows) from ``h`` (the
    leaves' rows of ``h``, (P, RB); ``work``: ``(z, h, per_sig)``): a
    reverse sweep fills every inner position's row with the sum of its
    children's (``child[i]``, -1 where none), ``H_k`` sums the rows of the
    positions reached through sigmoid ``k`` (``sig_pos[sig_ptr[k]:sig_ptr[k
    + 1]]``, into ``per_sig``), then ``dz_n = sigmoid(-z_n) H_n - sigmoid(z_n)
    H_{n + N}`` (into ``z``)."""
    child, sig_ptr, sig_pos = plan[4], plan[5], plan[6]
    z, h, per_sig = work
    gW, gb, _, fmask = grads
    N = gW.shape[1]
    F = gW.shape[2]
    for i in range(h.shape[0] - 1, -1, -1):
        a = child[i, 0]
        if a < 0:
            continue  # a leaf
        c = child[i, 1]
        if c < 0:
            for b in range(RB):
                h[i, b] = h[a, b]
        else:
            for b in range(RB):
                h[i, b] = h[a, b] + h[c, b]
    for k in range(2 * N):
        j0 = sig_ptr[k]
        j1 = sig_ptr[k + 1]
        if j0 == j1:  # a sigmoid on no free leaf's path
            for b in range(RB):
                per_sig[k, b] = _ZERO
            continue
        first = sig_pos[j0]
        for b in range(RB):
            per_sig[k, b] = h[first, b]
        for j in range(j0 + 1, j1):
            i = sig_pos[j]
            for b in range(RB):
                per_sig[k, b] += h[i, b]
    for n in range(N):
        acc = _ZERO
        for b in range(RB):
            gz = s[n + N, b] * per_sig[n, b] - s[n, b] * per_sig[n + N, b]
            z[n, b] = gz
            acc += gz
        gb[m, n] += acc
        for f in range(F):
            if fmask[m, f] == 0:  # a feature the tree leaves out: its gradient is masked
                continue
            acc = _ZERO
            for b in range(RB):
                acc += z[n, b] * Xk[f, b]
            gW[m, n, f] += acc


@numba.njit(**_OPTS)
def backward_chunk(data, model, plan, m0, m1, grads):
    """Add the gradients of trees ``m0 .. m1``' split weights, biases and
    leaf values to ``grads`` (``(gW, gb, gpi, fmask)``), given ``data``:
    the blocked inputs ``Xb``, the output's gradient ``Gb`` (n_blocks, C,
    RB) and the sigmoids ``S`` the forward pass kept (the routing products
    are recomputed)."""
    Xb, Gb, S = data
    W, _, pi = model
    gpi = grads[2]
    N = W.shape[1]
    P = plan[0].shape[0]
    leaf_pos = plan[3]
    leaves = (pi, gpi)
    z = np.empty((N, RB), dtype=np.float32)
    pos = np.empty((P, RB), dtype=np.float32)
    h = np.empty((P, RB), dtype=np.float32)
    per_sig = np.empty((2 * N, RB), dtype=np.float32)
    work = (z, h, per_sig)
    for blk in range(Xb.shape[0]):
        Xk = Xb[blk]
        Gk = Gb[blk]
        for m in range(m0, m1):
            s = S[blk, m]
            tree_products(plan, s, pos)
            leaf_backward(leaf_pos, leaves, m, Gk, pos, h)
            split_backward(Xk, plan, m, s, work, grads)


@numba.njit(**_OPTS)
def forward_serial(Xb, model, plan, bounds, sink):
    """:func:`forward_chunk` on every chunk of ``bounds``, chunk ``ch``
    adding to ``sink``'s ``parts[ch]``."""
    parts, S, keep = sink
    for ch in range(bounds.shape[0] - 1):
        forward_chunk(Xb, model, plan, bounds[ch], bounds[ch + 1], (parts[ch], S, keep))


@numba.njit(**_OPTS)
def backward_serial(data, model, plan, bounds, grads):
    """:func:`backward_chunk` on every chunk of ``bounds``."""
    for ch in range(bounds.shape[0] - 1):
        backward_chunk(data, model, plan, bounds[ch], bounds[ch + 1], grads)


@numba.njit(**_OPTS)
def backward_blocks(data, model, plan, bounds, grads):
    """:func:`backward_serial` on each block of rows alone, block ``k``
    writing its gradients to ``(gW[k], gb[k], gpi[k])`` of ``grads`` (``(gW,
    gb, gpi, fmask)``, the first three with a leading axis of blocks; zeroed
    first)."""
    Xb, Gb, S = data
    gW, gb, gpi, fmask = grads
    for k in range(Xb.shape[0]):
        gW[k][:] = _ZERO
        gb[k][:] = _ZERO
        gpi[k][:] = _ZERO
        one = (Xb[k : k + 1], Gb[k : k + 1], S[k : k + 1])
        backward_serial(one, model, plan, bounds, (gW[k], gb[k], gpi[k], fmask))


# ----------------------------------------------------------------------------
# Around the trees: the additive table and the optimizer's step
# ----------------------------------------------------------------------------


@numba.njit(inline="always", **_OPTS)
def add_table_rows(table, scale, codes, row, out, col):
    """``out[:, col] += table[k] * scale[k]`` for the codes ``k`` of row
    ``row`` of ``codes`` (n, J), in their order (``out`` (C, ...));
    ``scale`` (T, 1), or of no rows for a factor of 1. A negative code counts
    from the end, as torch's indexing does."""
    T = table.shape[0]
    scaled = scale.shape[0] > 0
    for j in range(codes.shape[1]):
        r = codes[row, j]
        if r < 0:
            r += T
        f = scale[r, 0] if scaled else _ONE
        for c in range(out.shape[0]):
            out[c, col] += table[r, c] * f


@numba.njit(inline="always", **_OPTS)
def scatter_table_rows(grad, col, scale, codes, row, sink):
    """The gradient of :func:`add_table_rows` for one row: ``gtable[k] +=
    grad[:, col] * scale[k]`` for the codes ``k`` of row ``row`` of
    ``codes``, in their order, but for the table rows where ``rowmask`` (T,)
    is 0 (a mask of no rows: none); ``sink``: ``(gtable, rowmask)``."""
    gtable, rowmask = sink
    T = gtable.shape[0]
    scaled = scale.shape[0] > 0
    masked = rowmask.shape[0] > 0
    for j in range(codes.shape[1]):
        r = codes[row, j]
        if r < 0:
            r += T
        if masked and rowmask[r] == _ZERO:
            continue
        f = scale[r, 0] if scaled else _ONE
        for c in range(grad.shape[0]):
            gtable[r, c] += grad[c, col] * f


_NO_MASK = np.zeros(0, dtype=np.float32)


@numba.njit(**_OPTS)
def additive_gather(table, scale, codes, out):
    """``out[b] = sum_j table[codes[b, j]] * scale[codes[b, j]]`` (out (B, C)):
    :func:`add_table_rows` of every row, from zero."""
    out[:] = _ZERO
    columns = out.T
    for b in range(codes.shape[0]):
        add_table_rows(table, scale, codes, b, columns, b)


@numba.njit(**_OPTS)
def additive_scatter(grad, scale, codes, gtable):
    """The gradient of :func:`additive_gather`'s table: ``gtable[codes[b, j]]
    += grad[b] * scale[codes[b, j]]`` (``gtable`` zeros of the table's shape)."""
    columns = grad.T
    for b in range(codes.shape[0]):
        scatter_table_rows(columns, b, scale, codes, b, (gtable, _NO_MASK))


#: Adam's update: IEEE arithmetic but for fused multiply-adds (no reciprocal
#: estimates), so that every element gets the same bits wherever it lies in
#: the array (a compact copy of the parameters steps its rows as the whole).
_ADAM_OPTS = dict(_OPTS, fastmath={"contract"})


@numba.njit(**_ADAM_OPTS)
def adam_update(tensors, step, hyper):
    """One Adam step of a flat float32 parameter in one pass over memory:
    ``tensors`` is ``(p, g, m, v)``, the parameter, its gradient and moments
    (``p``, ``m``, ``v`` updated in place); ``step`` (1,) float32, the step
    count, incremented; ``hyper`` float64 ``(lr, beta1, beta2, eps)``. The
    operations of torch's single-tensor Adam (``m.lerp_(g, 1 - beta1)``,
    ``v.mul_(beta2).addcmul_(g, g, value=1 - beta2)``, ``p.addcdiv_(m,
    sqrt(v) / sqrt(bc2) + eps, value=-lr / bc1)``, the bias corrections
    ``bc = 1 - beta ** step`` in float64), fused: :func:`adam_span` on every
    element, then the step counted."""
    adam_span(tensors, step, hyper, (0, tensors[0].shape[0]))
    step[0] += _ONE


@numba.njit(**_ADAM_OPTS)
def adam_span(tensors, step, hyper, bounds):
    """:func:`adam_update` on the elements ``bounds`` (``(lo, hi)``) of a
    parameter, the step count ``step`` (1,) read plus one and not written
    (the training step's tasks run it on parts of a parameter, and count the
    step once all have run)."""
    p, g, m, v = tensors
    lo, hi = bounds
    lr = hyper[0]
    b1 = hyper[1]
    b2 = hyper[2]
    t = np.float64(step[0] + _ONE)
    w1 = np.float32(1.0 - b1)
    beta2 = np.float32(b2)
    omb2 = np.float32(1.0 - b2)
    eps = np.float32(hyper[3])
    bc2_sqrt = np.float32((1.0 - b2**t) ** 0.5)
    neg_step = np.float32(-(lr / (1.0 - b1**t)))
    p = p[lo:hi]
    g = g[lo:hi]
    m = m[lo:hi]
    v = v[lo:hi]
    for i in range(p.shape[0]):
        gi = g[i]
        mi = m[i]
        mi = mi + w1 * (gi - mi)
        m[i] = mi
        vi = v[i] * beta2 + omb2 * gi * gi
        v[i] = vi
        p[i] = p[i] + neg_step * mi / (np.sqrt(vi) / bc2_sqrt + eps)


@numba.njit(**_ADAM_OPTS)
def lerp_span(p, a, ema, bounds):
    """The moving average's update ``a += ema * (p - a)``, as
    :func:`torch.lerp` computes it, on the elements ``bounds`` (``(lo,
    hi)``) of a parameter ``p`` and its average ``a``."""
    lo, hi = bounds
    w = np.float32(ema)
    omw = _ONE - w
    p = p[lo:hi]
    a = a[lo:hi]
    if abs(w) < _HALF:
        for i in range(p.shape[0]):
            a[i] = a[i] + w * (p[i] - a[i])
    else:
        for i in range(p.shape[0]):
            a[i] = p[i] - (p[i] - a[i]) * omw

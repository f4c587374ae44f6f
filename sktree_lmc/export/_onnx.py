"""Deployment: a fitted estimator as one self-contained ONNX file.

:func:`export_onnx` writes the whole prediction path of a fitted estimator
(the input encoding, the trees, the additive term, the link and the class
labels) as an ONNX graph built directly with :mod:`onnx.helper`, the fitted
constants embedded as initializers, in the manner of hummingbird's "GEMM"
strategy and skl2onnx's converters: no tracing, so a 256-tree model exports
in about a second.

The graph works on the transposed input (one row per input column, one
column per data row), so that per-column constants broadcast along long
contiguous spans:

- the encoding in float64. Every numeric column that needs a lookup gets
  its *slot*, the count of the sorted union of all its breakpoints (knots,
  quantiles, additive bin edges) ``<= x``, by one branchless binary search
  (``log2`` of the longest table ``Gather`` / ``LessOrEqual`` steps, all
  columns at once); a categorical column's slot is its category code. Every
  table the encoding reads is then indexed by the slot: the piecewise-linear
  interval and its knots; for scikit-learn's quantile transform, the
  interval of :func:`numpy.interp` (forwards and backwards, as
  ``QuantileTransformer`` averages them, case by case as NumPy computes it),
  then the normal quantile (Cephes ``ndtri`` in elementary operations);
  ``(x - center) / scale``; one-hot categories; missing indicators. The
  features are rounded to float32, as the encoder does;
- the trees in float32, as the estimators' inference kernel: oblivious
  trees through the monomials of their centred sigmoids
  (:class:`~sktree_lmc.model._forward.MonomialPlan`, one ``MatMul`` and ``Tanh``
  per level, one product and one ``MatMul`` per monomial), the other
  architectures through the routing products of their leaf probabilities
  level by level (``sigmoid(-z)`` as ``1 - sigmoid(z)``) and one ``MatMul``
  per level with the leaf values;
- the additive term (``additive_bins``) in float64: per input column one
  lookup, on its slot, in a table that sums the column's resolutions in
  advance;
- the outputs in float64: ``decision_function``, ``softmax`` and ``argmax``
  with the labels of ``classes_``; a regressor's link and ``y`` scale.

Two onnxruntime habits shape the graph: ``Where`` is about 20 times slower
than ``Mul``, so selections between finite values are exact products
(:meth:`_Graph.select`); and a ``MatMul`` followed by an ``Add`` is fused
into a ``Gemm`` that lost 1e-5 on the outputs, so the split biases enter the
splits' ``MatMul`` through a row of ones and the contractions are summed by
one ``Sum``.
"""

from __future__ import annotations

import os

import numpy as np
from scipy import stats

from ._export import (
    _EXPM2,
    _P0,
    _P1,
    _Q0,
    _Q1,
    _S2PI,
    BOUNDS_THRESHOLD,
    _fitted_ensemble,
)
from ..model._forward import routing_plan
from .._validation import input_columns

__all__ = ["export_onnx", "onnx_inputs"]

#: The ONNX opsets of the graph (default domain, and ``ai.onnx.ml`` for the
#: string categories' ``LabelEncoder``).
OPSET = 17
ML_OPSET = 2

#: The name of each graph output, per estimator kind.
CLASSIFIER_OUTPUTS = ("predict", "predict_proba", "decision_function")
REGRESSOR_OUTPUTS = ("predict",)


class _Graph:
    """Collects the nodes and initializers of an ONNX graph, with fresh names."""

    def __init__(self):
        from onnx import TensorProto, helper, numpy_helper

        self.helper, self.numpy_helper, self.TensorProto = helper, numpy_helper, TensorProto
        self.nodes, self.initializers, self._count = [], [], 0
        self.n_rows = {}  # the first dimension of some tensors: rows() of all is a no-op

    def name(self, hint):
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value, hint="c", dtype=None):
        """An initializer holding ``value`` (a NumPy array; dtype kept unless given)."""
        array = np.asarray(value, dtype=dtype)
        name = self.name(hint)
        if array.dtype.kind in "OU":
            array = array.astype(object)
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, *inputs, hint=None, domain=None, **attrs):
        """Add one node with one output; return the output's name."""
        out = self.name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], domain=domain,
                                                **attrs))
        return out

    def ops(self, op_type, *inputs, n_outputs, hint=None, **attrs):
        """Add one node with ``n_outputs`` outputs; return their names."""
        outs = [self.name(hint or op_type.lower()) for _ in range(n_outputs)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs

    def f64(self, value, hint="c"):
        return self.const(value, hint, np.float64)

    def i64(self, value, hint="i"):
        return self.const(value, hint, np.int64)

    def mask(self, cond, to="DOUBLE"):
        """``cond`` as 1 and 0 of type ``to``."""
        return self.op("Cast", cond, to=getattr(self.TensorProto, to))

    def select(self, cond, a, b, to="DOUBLE"):
        """``where(cond, a, b)`` for finite ``a`` and ``b``, as
        ``a * cond + b * (1 - cond)``: exact (one product is the value, the
        other zero), and onnxruntime's ``Where`` is 20 times slower than
        ``Mul``."""
        on = self.op("Mul", a, self.mask(cond, to))
        if b is None:  # zero
            return on
        return self.op("Add", on, self.op("Mul", b, self.mask(self.op("Not", cond), to)))

    def rows(self, X, index, hint="rows"):
        """``X[index]`` along the first axis (``index`` a list of int)."""
        if list(index) == list(range(self.n_rows.get(X, -1))):
            return X
        return self.op("Gather", X, self.i64(list(index)), axis=0, hint=hint)


def _col(values):
    """A column vector ``(k, 1)`` (broadcast along the rows of the data)."""
    return np.asarray(values).reshape(-1, 1)


# -- the column layout ---------------------------------------------------------------------
# The graph works on the transposed input: one row per input column, one column per
# data row, so that the per-column constants are (k, 1) vectors broadcast along long
# contiguous spans. Every input column that needs a lookup gets a *slot*: an int64
# position into a block of the column's own tables, found once per value; each table
# the encoding or the additive term reads is indexed by that slot.
#
# A numeric column's slot is ``count(U <= x)`` (0 .. |U|), ``U`` the sorted union of
# every breakpoint the column's encodings use (knots, quantiles, additive bin edges),
# found by one binary search, or the missing slot; a categorical column's is its
# category code (0 .. n_categories - 1), ``n_categories`` for an unseen category, or the
# missing slot.

class _Slots:
    """The slot blocks of the columns that need lookups, and tables on them."""

    def __init__(self):
        self.columns = []  # input column of each block, in block order
        self.sizes = []    # number of slots of each block (the missing slot last)
        self.points = {}   # numeric column -> U

    def add(self, j, size):
        if j not in self.columns:
            self.columns.append(j)
            self.sizes.append(size)

    def layout(self):
        """Place the blocks one after the other."""
        starts = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.base = {j: int(starts[k]) for k, j in enumerate(self.columns)}
        self.total = int(starts[-1])

    def table(self, g, columns, values, hint="table", dtype=np.float64):
        """A flat table holding ``values[k]`` (an array over the slots of
        ``columns[k]``) at the slots' positions; gathered by :meth:`read`."""
        trailing = np.asarray(values[0]).shape[1:]
        flat = np.zeros((self.total,) + trailing, dtype=dtype)
        for j, v in zip(columns, values):
            v = np.asarray(v, dtype=dtype)
            flat[self.base[j]: self.base[j] + len(v)] = v
        return g.const(flat, hint)

    def read(self, g, table, columns, axis=0):
        """``table`` at the slots of ``columns``: ``(len(columns), n)``."""
        return g.op("Gather", table, g.rows(self.slot, [self.columns.index(j) for j in columns]),
                    axis=axis)


def _search(g, x, tables, base):
    """Global slot ``base[k] + count(tables[k] <= x[k])`` of every value of
    ``x`` (``(K, n)`` float64; NaN gives the count 0), int64 ``(K, n)``.

    A branchless binary search: the table of column ``k`` is stored shifted by
    one in a flat array (``flat[base + i] = table[i - 1]``, ``+inf`` beyond
    its end), and ``log2(P)`` steps (``P`` a power of two above the longest
    table) each gather one entry per value and move its position up by the
    step when that entry is ``<= x``; the count is capped at the table's
    length (the pads count for ``x = +inf``).
    """
    lengths = np.array([len(t) for t in tables], dtype=np.int64)
    P = 1
    while P <= lengths.max(initial=0):
        P *= 2
    width = P + 1
    flat = np.full(len(tables) * width, np.inf)
    for k, t in enumerate(tables):
        flat[k * width + 1: k * width + 1 + len(t)] = t
    # the flat array is read at ``k * width + ...``; base is the slot blocks' origin
    flat_name = g.f64(flat, "breakpoints")
    origin = np.arange(len(tables), dtype=np.int64) * width
    pos = g.i64(_col(origin))  # then (K, n) after the first step
    step = P // 2
    while step >= 1:
        idx = g.op("Add", pos, g.i64(step))
        below = g.op("LessOrEqual", g.op("Gather", flat_name, idx), x)
        pos = g.op("Add", pos, g.op("Mul", g.mask(below, "INT64"), g.i64(step)))
        step //= 2
    if P == 1:  # empty tables: every count is 0
        pos = g.op("Add", pos, g.op("Mul", g.mask(g.op("IsNaN", x), "INT64"), g.i64(0)))
    count = g.op("Min", pos, g.i64(_col(origin + lengths)))
    return g.op("Add", count, g.i64(_col(np.asarray(base) - origin)))


# -- the encoding, on slots --------------------------------------------------------------
def _width(form, args):
    if form == "empty":
        return 0
    if form == "one_hot":
        return int(args[0]) + bool(args[1])
    if form == "hat":
        return len(args[0])
    if form == "stack":
        return sum(_width(f, a) for f, a in args)
    return 1  # quantile_normal, affine


def _encoding_plan(encoder, wanted):
    """The encoded features that ``wanted`` (sorted feature indices) needs,
    grouped by how they are computed: ``groups`` (form -> list of
    ``(column, args, first feature)``) and the missing indicators'
    ``(column, feature)``; feature indices are those of
    ``encoder.transform``'s output."""
    wanted = set(int(f) for f in wanted)
    groups = {"hat": [], "quantile_normal": [], "affine": [], "one_hot": []}
    indicators = []
    feature = 0
    for j in range(encoder.n_features_in_):
        form, args = encoder._column_export(j)
        parts = list(args[0]) if form == "stack" else [(form, args)]
        start = feature
        for part, part_args in parts:
            if part not in groups and part != "empty":  # pragma: no cover - new forms
                raise NotImplementedError(
                    f"export_onnx does not know the column encoding {part!r} (column {j}).")
            width = _width(part, part_args)
            if wanted.intersection(range(feature, feature + width)):
                groups[part].append((j, part_args, feature))
            feature += width
        if encoder.has_missing_[j]:
            if feature in wanted:
                indicators.append((j, feature))
            feature += 1
        if feature - start != int(encoder.widths_[j]):  # pragma: no cover - a safety net
            raise RuntimeError(f"export_onnx: column {j} has {feature - start} features, "
                               f"the encoder {int(encoder.widths_[j])}.")
    return groups, indicators


def _quantile_tables(transformer, points):
    """The tables of a quantile-normal part on the slots of ``points``.

    For the values of slot ``k`` (``U[k-1] <= x < U[k]``), ``j`` is the last
    quantile ``<= x`` (clipped to an interval): the interval's ends
    ``q[j], q[j+1]``, their references ``r[j], r[j+1]``, NumPy's slope, and
    the reference of the first quantile equal to ``q[j]`` (repeated
    quantiles: :func:`numpy.interp` forwards lands on the last, backwards on
    the first)."""
    q = np.asarray(transformer.quantiles_, dtype=np.float64)[:, 0]
    r = np.asarray(transformer.references_, dtype=np.float64)
    if len(q) == 1:
        q, r = np.repeat(q, 2), np.repeat(r, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (r[1:] - r[:-1]) / (q[1:] - q[:-1])  # NumPy's own formula
    slope = np.where(np.isfinite(slope), slope, 0.0)
    first = np.searchsorted(q, q, side="left")
    counts = np.searchsorted(q, np.concatenate([[-np.inf], points]), side="right")
    j = np.clip(counts - 1, 0, len(q) - 2)
    tabs = [q[j], q[j + 1], r[j], r[j + 1], slope[j], 0.5 * (r[j] + r[first[j]])]
    return [np.append(t, t[0]) for t in tabs]  # the missing slot: any finite value


def _hat_tables(knots, points):
    """The tables of a piecewise-linear part on the slots of ``points``: the
    interval ``i`` of the clipped value, and its knots ``k_i, k_{i+1}``."""
    knots = np.asarray(knots, dtype=np.float64)
    counts = np.searchsorted(knots, np.concatenate([[-np.inf], points]), side="right")
    i = np.clip(counts - 1, 0, len(knots) - 2)
    i = np.append(i, 0)  # the missing slot: any interval (its features are zeroed)
    return [i, knots[i], knots[i + 1]]


def _slot_plan(encoder, groups, additive_columns):
    """The slots of every column that needs lookups."""
    slots = _Slots()
    points = {}
    for form in ("quantile_normal", "hat"):
        for j, args, _ in groups[form]:
            pts = (np.asarray(args[0].quantiles_, dtype=np.float64)[:, 0]
                   if form == "quantile_normal" else np.asarray(args[0], dtype=np.float64))
            points.setdefault(j, []).append(pts)
    for j, edges in additive_columns.items():
        if edges is not None:
            points.setdefault(j, []).extend(edges)
    for j in sorted(points):
        union = np.unique(np.concatenate(points[j]))
        union = union[~np.isnan(union)]
        slots.points[j] = union
    categorical = sorted({j for j, _, _ in groups["one_hot"]}
                         | {j for j, e in additive_columns.items() if e is None})
    needed = sorted(set(slots.points) | set(categorical))
    for j in needed:
        if j in slots.points:
            slots.add(j, len(slots.points[j]) + 2)
        else:
            slots.add(j, len(encoder.categories_[j]) + 2)
    slots.layout()
    return slots


def _find_slots(g, X, missing, slots, encoder):
    """The slot of every value of the columns of ``slots``: int64 ``(k, n)``."""
    parts, order = [], []
    numeric = [j for j in slots.columns if j in slots.points]
    if numeric:
        x = g.rows(X, numeric, "x")
        found = _search(g, x, [slots.points[j] for j in numeric],
                        [slots.base[j] for j in numeric])
        missing_slot = g.i64(_col([slots.base[j] + len(slots.points[j]) + 1 for j in numeric]))
        miss = g.mask(g.rows(missing, numeric, "missing"), "INT64")
        parts.append(g.op("Add", found, g.op("Mul", miss, g.op("Sub", missing_slot, found))))
        order += numeric
    categorical = [j for j in slots.columns if j not in slots.points]
    if categorical:
        n_cats = _col([len(encoder.categories_[j]) for j in categorical]).astype(np.float64)
        x = g.op("Min", g.op("Max", g.rows(X, categorical, "codes"), g.f64(-1.0)), g.f64(n_cats))
        valid = g.op("And", g.op("And", g.op("GreaterOrEqual", x, g.f64(0.0)),
                                 g.op("Less", x, g.f64(n_cats))),
                     g.op("Equal", g.op("Floor", x), x))
        base = _col([slots.base[j] for j in categorical])
        n_int = n_cats.astype(np.int64)
        # code + base where valid, else the unseen slot base + n; the missing slot
        code = g.op("Cast", g.op("Mul", x, g.mask(valid)), to=g.TensorProto.INT64)
        code = g.op("Add", g.i64(base + n_int),
                    g.op("Mul", g.mask(valid, "INT64"), g.op("Sub", code, g.i64(n_int))))
        miss = g.mask(g.rows(missing, categorical, "missing"), "INT64")
        parts.append(g.op("Add", code, g.op("Mul", miss, g.op("Sub", g.i64(base + n_int + 1),
                                                               code))))
        order += categorical
    slot = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=0)
    position = [order.index(j) for j in slots.columns]
    if position != list(range(len(order))):
        slot = g.op("Gather", slot, g.i64(position), axis=0)
    slots.slot = slot
    g.n_rows[slot] = len(slots.columns)


def _encode(g, X, missing, observed, encoder, *, groups, indicators, slots, wanted):
    """The encoded features ``wanted``, float32 ``(len(wanted), n)``."""
    blocks, order = [], []  # (w, n) float64 blocks and their features

    def zero_missing(block, cols, expand=None):
        # X holds 0 at missing values: the block is finite there, times 0
        present = g.rows(observed, cols, "observed")
        if expand is not None:
            present = g.op("Gather", present, g.i64(expand), axis=0)
        return g.op("Mul", block, present)

    items = groups["affine"]
    if items:
        cols = [j for j, _, _ in items]
        center = g.f64(_col([a[0] for _, a, _ in items]))
        scale = g.f64(_col([a[1] for _, a, _ in items]))
        block = g.op("Div", g.op("Sub", g.rows(X, cols, "x"), center), scale)
        blocks.append(zero_missing(block, cols))
        order += [f for _, _, f in items]

    items = groups["quantile_normal"]
    if items:
        cols = [j for j, _, _ in items]
        tabs = [_quantile_tables(a[0], slots.points[j]) for j, a, _ in items]
        q0, q1, r0, r1, slope, phit = (
            slots.read(g, slots.table(g, cols, [t[k] for t in tabs], "quantiles"), cols)
            for k in range(6))
        lower = _col([np.asarray(a[0].quantiles_, dtype=np.float64)[0, 0] for _, a, _ in items])
        upper = _col([np.asarray(a[0].quantiles_, dtype=np.float64)[-1, 0] for _, a, _ in items])
        # x clipped well outside the quantiles (finite; the same bounds below)
        x = g.op("Min", g.op("Max", g.rows(X, cols, "x"), g.f64(lower - 1 - np.abs(lower))),
                 g.f64(upper + 1 + np.abs(upper)))
        hit = g.op("Equal", x, q0)
        # numpy.interp forwards on (q, r) and backwards on (-q[::-1], -r[::-1]) at -x,
        # negated: the same interval, evaluated from its other end; on a quantile,
        # the last and the first of its repeats (0.5 (r0 + rfirst), tabled)
        fwd = g.op("Add", g.op("Mul", slope, g.op("Sub", x, q0)), r0)
        bwd = g.op("Sub", r1, g.op("Mul", slope, g.op("Sub", q1, x)))
        p = g.select(hit, phit, g.op("Mul", g.f64(0.5), g.op("Add", fwd, bwd)))
        above = g.op("Greater", g.op("Add", x, g.f64(BOUNDS_THRESHOLD)), g.f64(upper))
        p = g.op("Add", g.select(g.op("Not", above), p, None), g.mask(above))
        below = g.op("Less", g.op("Sub", x, g.f64(BOUNDS_THRESHOLD)), g.f64(lower))
        p = g.select(g.op("Not", below), p, None)
        eps = np.spacing(1)
        lo = float(stats.norm.ppf(BOUNDS_THRESHOLD - eps))
        hi = float(stats.norm.ppf(1 - (BOUNDS_THRESHOLD - eps)))
        block = g.op("Min", g.op("Max", _ndtri(g, p), g.f64(lo)), g.f64(hi))
        blocks.append(zero_missing(block, cols))
        order += [f for _, _, f in items]

    items = groups["hat"]
    if items:
        cols = [j for j, _, _ in items]
        knots = [np.asarray(a[0], dtype=np.float64) for _, a, _ in items]
        tabs = [_hat_tables(k, slots.points[j]) for (j, _, _), k in zip(items, knots)]
        i = slots.read(g, slots.table(g, cols, [t[0] for t in tabs], "hat_i", np.int64), cols)
        k0, k1 = (slots.read(g, slots.table(g, cols, [t[k] for t in tabs], "knots"), cols)
                  for k in (1, 2))
        lo = g.f64(_col([k[0] for k in knots]))
        hi = g.f64(_col([k[-1] for k in knots]))
        xc = g.op("Min", g.op("Max", g.rows(X, cols, "x"), lo), hi)
        t = g.op("Div", g.op("Sub", xc, k0), g.op("Sub", k1, k0))
        # each column's T features: (1 - t) at position i, t at i + 1, else 0
        sizes = [len(k) for k in knots]
        expand = np.repeat(np.arange(len(items)), sizes)
        position = _col(np.concatenate([np.arange(s) for s in sizes]))
        i_f = g.op("Gather", i, g.i64(expand), axis=0)
        t_f = g.op("Gather", t, g.i64(expand), axis=0)
        left = g.select(g.op("Equal", g.i64(position), i_f), g.op("Sub", g.f64(1.0), t_f), None)
        right = g.select(g.op("Equal", g.i64(position - 1), i_f), t_f, None)
        blocks.append(zero_missing(g.op("Add", left, right), cols, expand))
        order += [f + p for (_, _, f), s in zip(items, sizes) for p in range(s)]

    items = groups["one_hot"]
    if items:
        cols = [j for j, _, _ in items]
        sizes = [_width("one_hot", a) for _, a, _ in items]
        expand = np.repeat(np.arange(len(items)), sizes)
        # the category's slot: its code, n_categories unseen (the infrequent feature)
        position = _col(np.concatenate([slots.base[j] + np.arange(s)
                                        for j, s in zip(cols, sizes)]))
        slot = g.op("Gather", g.rows(slots.slot, [slots.columns.index(j) for j in cols]),
                    g.i64(expand), axis=0)
        blocks.append(g.op("Cast", g.op("Equal", slot, g.i64(position)),
                           to=g.TensorProto.DOUBLE))
        order += [f + p for (_, _, f), s in zip(items, sizes) for p in range(s)]

    if indicators:
        blocks.append(g.op("Cast", g.rows(missing, [j for j, _ in indicators], "missing"),
                           to=g.TensorProto.DOUBLE))
        order += [f for _, f in indicators]

    # a last row of ones: the split biases enter the splits' MatMul (a MatMul followed
    # by an Add is fused by onnxruntime into a Gemm, which loses precision)
    blocks.append(g.mask(g.op("Not", g.op("IsNaN", g.rows(X, [0], "ones")))))
    order.append(-1)
    position = {f: k for k, f in enumerate(order)}
    block = g.op("Concat", *blocks, axis=0)
    select = [position[int(f)] for f in wanted] + [len(order) - 1]
    if select != list(range(len(order))):
        block = g.op("Gather", block, g.i64(select), axis=0)
    return g.op("Cast", block, to=g.TensorProto.FLOAT, hint="features")


def _polevl(g, x, coefs):
    out = g.op("Add", g.op("Mul", x, g.f64(coefs[0])), g.f64(coefs[1]))
    for c in coefs[2:]:
        out = g.op("Add", g.op("Mul", out, x), g.f64(c))
    return out


def _ndtri(g, y):
    """The standard normal quantile function (Cephes ``ndtri``, as
    :func:`sktree_lmc.export._export._ndtri_portable`) in elementary operations,
    float64, for ``y`` in [0, 1] whose result is then clipped to
    ``[ppf(1e-7 - eps), ppf(1 - 1e-7 + eps)]`` (about +-5.2): ``y`` is first
    clipped to ``[1e-13, 1 - 1e-13]`` (results beyond +-7.3, clipped alike),
    where the tails need only Cephes' approximation for ``sqrt(-2 log y) < 8``
    and every branch is finite, so that the branches are selected by exact
    products (:meth:`_Graph.select`)."""
    y = g.op("Min", g.op("Max", y, g.f64(1e-13)), g.f64(1.0 - 1e-13))
    upper = g.op("Greater", y, g.f64(1.0 - _EXPM2))
    yy = g.select(upper, g.op("Sub", g.f64(1.0), y), y)
    ym = g.op("Sub", yy, g.f64(0.5))
    y2 = g.op("Mul", ym, ym)
    ratio = g.op("Div", g.op("Mul", y2, _polevl(g, y2, _P0)), _polevl(g, y2, _Q0))
    middle = g.op("Mul", g.op("Add", ym, g.op("Mul", ym, ratio)), g.f64(_S2PI))
    xt = g.op("Sqrt", g.op("Mul", g.f64(-2.0), g.op("Log", yy)))
    x0 = g.op("Sub", xt, g.op("Div", g.op("Log", xt), xt))
    z = g.op("Div", g.f64(1.0), xt)
    x1 = g.op("Div", g.op("Mul", z, _polevl(g, z, _P1)), _polevl(g, z, _Q1))
    tail = g.op("Sub", x1, x0)  # the lower tail of yy; the upper one's sign flipped
    tail = g.op("Mul", tail, g.op("Sub", g.f64(1.0), g.op("Mul", g.f64(2.0), g.mask(upper))))
    return g.select(g.op("Greater", yy, g.f64(_EXPM2)), middle, tail)


# -- the trees ---------------------------------------------------------------------------
def _split_logits(g, features, params, wanted):
    """``z`` of every node of every tree, float32 ``(N, M, n)`` (node-major)."""
    W = np.asarray(params.split_weight, dtype=np.float32)[:, :, wanted]
    b = np.asarray(params.split_bias, dtype=np.float32)
    M, N, _ = W.shape
    weight = np.concatenate([W.transpose(1, 0, 2).reshape(N * M, -1),
                             _col(b.T.reshape(-1))], axis=1)  # the bias: the ones row
    z = g.op("MatMul", g.const(weight, "split_weight"), features)
    return g.op("Reshape", z, g.i64([N, M, -1])), M, N


def _contract(g, block, rows):
    """``rows.T @ block``, float32 ``(C, n)``: ``block`` ``(k, M, n)``, ``rows``
    ``(k * M, C)`` the coefficients of its rows."""
    flat = g.op("Reshape", block, g.i64([rows.shape[0], -1]))
    return g.op("MatMul", g.const(np.ascontiguousarray(rows.T.astype(np.float32)),
                                  "leaf_value"), flat)


#: The deepest oblivious trees exported through their monomials (one product
#: and one contraction per monomial and level: ``2**D`` nodes); deeper ones
#: take the leaf probabilities.
MAX_MONOMIAL_DEPTH = 6


def _monomial_trees(g, features, params, wanted, leaf_values):
    """The trees' output, float32 ``(C, n)``, of oblivious trees through the
    monomials of the centred sigmoids ``u_d = sigmoid(z_d) - 1/2``
    (:class:`~sktree_lmc.model._forward.MonomialPlan`), as the estimators'
    inference kernel computes them.

    ``2 u_d = tanh(z_d / 2)``: the halving is folded into the split weights
    and the coefficients (powers of two, exact). Each node's ``t_d`` comes
    from its own ``MatMul`` ``(M, n)``; every monomial over the nodes
    ``<= d`` that holds ``d`` is one product of ``t_d`` with a monomial over
    the nodes ``< d``, and each monomial is contracted with its coefficients
    by one ``MatMul`` (no concatenation, no copy)."""
    import torch

    from ..model._forward import monomial_coefficients

    W = np.asarray(params.split_weight, dtype=np.float32)[:, :, wanted] * np.float32(0.5)
    b = np.asarray(params.split_bias, dtype=np.float32) * np.float32(0.5)
    M, D, _ = W.shape
    coef = monomial_coefficients(torch.from_numpy(np.asarray(leaf_values, dtype=np.float64)))
    coef = coef.numpy()  # (M, 2**D, C): c[m, k], the monomial of the bits of k

    def contract(block, mask, parts):
        rows = coef[:, mask, :].T * 0.5 ** bin(mask).count("1")  # (C, M)
        parts.append(g.op("MatMul", g.const(rows.astype(np.float32), "monomial"), block))
        return parts

    t = []
    for d in range(D):
        weight = np.concatenate([W[:, d], _col(b[:, d])], axis=1)  # the bias: the ones row
        z = g.op("MatMul", g.const(weight, "split_weight"), features)
        t.append(g.op("Tanh", z, hint="t"))
    parts, monomials = [], []  # the monomials over the nodes < d: (mask, tensor)
    for d in range(D):
        level = [(1 << d, t[d])]
        level += [(mask | 1 << d, g.op("Mul", block, t[d])) for mask, block in monomials]
        for mask, block in level:
            contract(block, mask, parts)
        monomials += level
    bias = coef[:, 0, :].sum(axis=0).astype(np.float32)
    # one Sum: a MatMul followed by an Add would be fused by onnxruntime into a Gemm
    # (MatMulAddFusion), 1e-5 less precise on these contractions
    return g.op("Sum", *parts, g.const(_col(bias), "bias"))


def _leaf_trees(g, features, arch, params, wanted, leaf_values):
    """The trees' output, float32 ``(C, n)``, through the leaf probabilities:
    the routing products of :func:`~sktree_lmc.model._forward.routing_plan` level by
    level (``sigmoid(-z)`` as ``1 - sigmoid(z)``, as the inference kernel),
    each level's leaves contracted with their values."""
    z, M, N = _split_logits(g, features, params, wanted)
    leaf = np.asarray(leaf_values, dtype=np.float64)
    s = g.op("Sigmoid", z)
    sides = g.op("Concat", s, g.op("Sub", g.const(np.float32(1.0)), s), axis=0)  # (2N, M, n)
    steps = routing_plan(arch)
    depth = []
    for parent, _, _ in steps:
        depth.append(1 if parent < 0 else depth[parent] + 1)
    level_of, by_depth = {}, {}
    for i, d in enumerate(depth):
        level_of[i] = len(by_depth.setdefault(d, []))
        by_depth[d].append(i)
    levels, parts = {}, []
    for d in sorted(by_depth):
        members = by_depth[d]
        sig = [steps[i][1] for i in members]
        if d == 1:
            pos = g.op("Gather", sides, g.i64(sig), axis=0)
        else:
            parents = [level_of[steps[i][0]] for i in members]
            pairs = len(members) % 2 == 0 and all(
                parents[k] == parents[k + 1] for k in range(0, len(members), 2))
            if pairs:  # two children per parent, side by side: a broadcast product
                up = parents[::2]
                prev = levels[d - 1]
                if up != list(range(len(by_depth[d - 1]))):
                    prev = g.op("Gather", prev, g.i64(up), axis=0)
                sig2 = np.array(sig).reshape(-1, 2)
                if (sig2 == sig2[:1]).all():
                    sig2 = sig2[:1]
                pos = g.op("Mul", g.op("Unsqueeze", prev, g.i64([1])),
                           g.op("Gather", sides, g.i64(sig2), axis=0))
                pos = g.op("Reshape", pos, g.i64([len(members), M, -1]))
            else:
                pos = g.op("Mul", g.op("Gather", levels[d - 1], g.i64(parents), axis=0),
                           g.op("Gather", sides, g.i64(sig), axis=0))
        levels[d] = pos
        leaves = [(k, steps[i][2]) for k, i in enumerate(members) if steps[i][2] >= 0]
        if leaves:
            at = [k for k, _ in leaves]
            mu = pos if at == list(range(len(members))) else g.op(
                "Gather", pos, g.i64(at), axis=0)
            values = leaf[:, [lf for _, lf in leaves], :].transpose(1, 0, 2)
            parts.append(_contract(g, mu, values.reshape(-1, leaf.shape[2])))
    # one Sum, not Adds (see _monomial_trees)
    return parts[0] if len(parts) == 1 else g.op("Sum", *parts)


# -- the additive term -------------------------------------------------------------------
def _live_code_columns(encoder, table):
    """The additive code columns whose table rows are not all zero (those that
    ``feature_selection`` left out add nothing)."""
    offsets = np.asarray(encoder.additive_offsets_, dtype=np.int64)
    return [c for c in range(len(offsets) - 1)
            if np.any(table[offsets[c]: offsets[c + 1]] != 0)]


def _additive_columns(encoder, table):
    """``{column: additive edges per live resolution, or None (categorical)}``."""
    cols = {}
    for c in _live_code_columns(encoder, table):
        j = int(encoder.additive_sources_[c])
        if encoder.categorical_[j]:
            cols[j] = None
        else:
            cols.setdefault(j, []).append(
                np.asarray(encoder.additive_edges_[c], dtype=np.float64))
    return cols


def _additive(g, encoder, table, slots):
    """The additive term, float64 ``(C, n)``: per input column, one lookup
    on its slot of the sum of its resolutions' table rows."""
    table = np.asarray(table, dtype=np.float64)
    sources = np.asarray(encoder.additive_sources_, dtype=np.int64)
    offsets = np.asarray(encoder.additive_offsets_, dtype=np.int64)
    live = np.zeros(len(sources), dtype=bool)
    live[_live_code_columns(encoder, table)] = True
    columns, values = [], []
    for j in sorted(set(sources[live].tolist())):
        cs = np.flatnonzero((sources == j) & live)
        if encoder.categorical_[j]:
            n_cats = len(encoder.categories_[j])
            rows = np.zeros((n_cats + 2, table.shape[1]))
            for c in cs:
                first, end = offsets[c], offsets[c + 1]
                unseen = first + n_cats if encoder.has_infrequent_[j] else end - 1
                rows[:n_cats] += table[first: first + n_cats]
                rows[n_cats] += table[unseen]
                rows[n_cats + 1] += table[end - 2]
        else:
            # a value in each slot's interval of the union, then the missing slot
            probe = np.concatenate([[-np.inf], slots.points[j]])
            rows = np.zeros((len(probe) + 1, table.shape[1]))
            for c in cs:
                edges = np.asarray(encoder.additive_edges_[c], dtype=np.float64)
                rows[:-1] += table[offsets[c] + np.searchsorted(edges, probe, side="right")]
                rows[-1] += table[offsets[c + 1] - 1]
        columns.append(j)
        values.append(rows)
    flat = slots.table(g, columns, values, "additive")  # (slots, C)
    C = table.shape[1]
    if C == 1:
        flat = g.op("Reshape", flat, g.i64([-1]))
        rows = slots.read(g, flat, columns)  # (J, n)
        return g.op("ReduceSum", rows, g.i64([0]), keepdims=1)
    flat = g.op("Transpose", flat, perm=[1, 0])  # (C, slots), folded by onnxruntime
    rows = slots.read(g, flat, columns, axis=1)  # (C, J, n)
    return g.op("ReduceSum", rows, g.i64([1]), keepdims=0)


# -- inputs ------------------------------------------------------------------------------
def _category_strings(encoder, j):
    """The string keys of column ``j``'s categories (``str`` of each)."""
    keys = [str(c) for c in encoder.categories_[j].tolist()]
    name = encoder._name(j) if hasattr(encoder, "_name") else j
    if len(set(keys)) != len(keys):
        raise ValueError(
            f"The categories of column {name!r} are not distinct as strings "
            f"({encoder.categories_[j].tolist()!r}); export with categories='codes'.")
    if "" in keys:
        raise ValueError(
            f"Column {name!r} has the empty string as a category, which the ONNX graph reads "
            "as a missing value; export with categories='codes'.")
    return keys


def _inputs(g, encoder, categories):
    """The graph inputs, and the float64 ``(n_features_in_, n)`` matrix of
    values and category codes (one row per input column) that the encoding
    reads."""
    helper, T = g.helper, g.TensorProto
    K = int(encoder.n_features_in_)
    cat = [j for j in range(K) if encoder.categorical_[j]]
    num = [j for j in range(K) if not encoder.categorical_[j]]
    if categories == "codes" or not cat:
        return ([helper.make_tensor_value_info("X", T.DOUBLE, ["N", K])],
                g.op("Transpose", "X", perm=[1, 0], hint="columns"))
    inputs = [helper.make_tensor_value_info("X_categorical", T.STRING, ["N", len(cat)])]
    strings = g.op("Transpose", "X_categorical", perm=[1, 0])
    codes = []
    for i, j in enumerate(cat):
        keys = _category_strings(encoder, j)
        column = g.op("Gather", strings, g.i64([i]), axis=0)
        codes.append(g.op(
            "LabelEncoder", column, domain="ai.onnx.ml", keys_strings=keys + [""],
            values_floats=[float(k) for k in range(len(keys))] + [np.nan], default_float=-1.0))
    codes = codes[0] if len(codes) == 1 else g.op("Concat", *codes, axis=0)
    codes = g.op("Cast", codes, to=T.DOUBLE)
    if num:
        inputs.insert(0, helper.make_tensor_value_info("X", T.DOUBLE, ["N", len(num)]))
        both = g.op("Concat", g.op("Transpose", "X", perm=[1, 0]), codes, axis=0)
    else:
        both = codes
    where = {j: k for k, j in enumerate(num + cat)}
    return inputs, g.op("Gather", both, g.i64([where[j] for j in range(K)]), axis=0,
                        hint="columns")


# -- the whole model ---------------------------------------------------------------------
def _build(est, categories):
    """The ONNX model of a fitted soft tree ensemble."""
    from onnx import helper

    from ..model._forward import monomial_plan, used_features

    g = _Graph()
    T = g.TensorProto
    encoder, params = est.encoder_, est.tree_params_
    K = int(encoder.n_features_in_)
    inputs, X = _inputs(g, encoder, categories)
    g.n_rows[X] = K
    missing = g.op("IsNaN", X, hint="missing")
    g.n_rows[missing] = K
    observed = g.mask(g.op("Not", missing))  # 1.0 where a value is given
    g.n_rows[observed] = K
    X = g.op("Where", missing, g.f64(0.0), X, hint="values")  # missing values as 0
    g.n_rows[X] = K
    classifier = hasattr(est, "classes_")
    leaf = np.asarray(params.leaf_value, dtype=np.float64)
    table = None if params.additive is None else np.asarray(params.additive, dtype=np.float64)
    contrast = classifier and leaf.shape[2] == 2
    if contrast:  # the binary logit from one output (the kernel's ``contrast``)
        leaf = leaf[..., 1:] - leaf[..., :1]
        table = None if table is None else table[:, 1:] - table[:, :1]
    F = np.asarray(params.split_weight).shape[2]
    wanted = used_features(params.split_weight)
    wanted = np.arange(F) if wanted is None else np.asarray(wanted)
    if len(wanted) == 0:  # no split reads a feature: one, weighed by zeros
        wanted = np.array([0])
    groups, indicators = _encoding_plan(encoder, wanted)
    additive_columns = {} if table is None else _additive_columns(encoder, table)
    if not additive_columns:  # no table, or only zeros
        table = None
    slots = _slot_plan(encoder, groups, additive_columns)
    if slots.columns:
        _find_slots(g, X, missing, slots, encoder)
    features = _encode(g, X, missing, observed, encoder, groups=groups, indicators=indicators,
                       slots=slots, wanted=wanted)
    plan = monomial_plan(est.architecture_)
    if plan is not None and plan.depth <= MAX_MONOMIAL_DEPTH:
        trees = _monomial_trees(g, features, params, wanted, leaf)
    else:
        trees = _leaf_trees(g, features, est.architecture_, params, wanted, leaf)
    raw = g.op("Cast", trees, to=T.DOUBLE)  # (C, n)
    if table is not None:
        raw = g.op("Add", raw, _additive(g, encoder, table, slots))
    if leaf.shape[2] == 1:
        raw_rows = g.op("Reshape", raw, g.i64([-1, 1]))
    else:
        raw_rows = g.op("Transpose", raw, perm=[1, 0])  # (n, C)
    if classifier:
        classes = np.asarray(est.classes_)
        if contrast:
            decision = g.op("Reshape", raw, g.i64([-1]), hint="decision_function")
            scores = g.op("Concat", g.op("Mul", raw_rows, g.f64(0.0)), raw_rows, axis=1)
        else:
            decision = scores = raw_rows
        proba = g.op("Softmax", scores, axis=1, hint="predict_proba")
        index = g.op("ArgMax", scores, axis=1, keepdims=0)
        if classes.dtype.kind in "iub":
            labels, label_type = classes.astype(np.int64), T.INT64
        elif classes.dtype.kind == "f":
            labels, label_type = classes.astype(np.float64), T.DOUBLE
        else:
            labels, label_type = np.array([str(c) for c in classes], dtype=object), T.STRING
        label = g.op("Gather", g.const(labels, "classes"), index, axis=0, hint="predict")
        for name, value in zip(CLASSIFIER_OUTPUTS, (label, proba, decision)):
            g.nodes.append(helper.make_node("Identity", [value], [name]))
        n_classes = len(classes)
        outputs = [helper.make_tensor_value_info("predict", label_type, ["N"]),
                   helper.make_tensor_value_info("predict_proba", T.DOUBLE, ["N", n_classes]),
                   helper.make_tensor_value_info(
                       "decision_function", T.DOUBLE, ["N"] if contrast else ["N", n_classes])]
    else:
        if est.objective_.loss.link.name == "log":
            raw_rows = g.op("Exp", raw_rows)
        elif est.objective_.loss.link.name != "identity":  # pragma: no cover - a new link
            raise NotImplementedError(
                f"export_onnx does not know the link {est.objective_.loss.link.name!r}.")
        pred = g.op("Add", g.op("Mul", raw_rows, g.f64(np.asarray(est.y_scale_)[None, :])),
                    g.f64(np.asarray(est.y_mean_)[None, :]))
        if est.objective_.one_dimensional:
            pred = g.op("Reshape", pred, g.i64([-1]))
        g.nodes.append(helper.make_node("Identity", [pred], ["predict"]))
        outputs = [helper.make_tensor_value_info(
            "predict", T.DOUBLE, ["N"] if est.objective_.one_dimensional else ["N", int(est.n_outputs_)])]
    graph = helper.make_graph(g.nodes, type(est).__name__, inputs, outputs, g.initializers)
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", ML_OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="sktree_lmc")
    model.ir_version = 8  # opset 17: onnxruntime >= 1.12
    return model


def export_onnx(estimator, path, *, categories="strings"):
    """Write a fitted estimator as one self-contained ONNX file.

    The graph computes the estimator's predictions from raw inputs: the
    input encoding of ``encoder_`` (piecewise-linear, quantile-normal,
    standard or raw numeric features, one-hot categories, missing
    indicators), the trees of every architecture, the additive term
    (``additive_bins``), the link and the class labels. The fitted constants
    are embedded in the file (no external data file), and it runs in
    onnxruntime (or any ONNX runtime with the ``ai.onnx.ml`` domain) without
    Python, scikit-learn or this package. The graph is built directly, not
    traced: a 256-tree model exports in well under a second.

    Parameters
    ----------
    estimator : SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor or \
            ShardedSoftTreeEnsemble
        A fitted estimator (of a sharded meta-estimator, its merged model
        ``merged_`` is exported). A :class:`~sklearn.pipeline.Pipeline` is
        refused: export its last step and apply the preprocessing first.
    path : str or path-like
        The file to write (conventionally ``*.onnx``); overwritten.
    categories : {"strings", "codes"}, default="strings"
        How categorical columns enter the graph. ``"strings"``: as strings in
        a second input ``X_categorical`` (``str`` of the category, as listed
        in ``encoder_.categories_[j]``; any other string is a category unseen
        in ``fit``; the empty string ``""`` is a missing value).
        ``"codes"``: as float category codes in ``X``, as
        :func:`~sktree_lmc.encode_categories` computes them (the input of
        :func:`~sktree_lmc.export_module`'s module). Without categorical
        columns both give the same graph.

    Returns
    -------
    path : str
        The path written.

    Raises
    ------
    TypeError
        If ``estimator`` is not one of the estimators above.
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    ValueError
        If ``categories`` is not one of its values, or, with
        ``categories="strings"``, a column's categories are not distinct as
        strings or include ``""``.
    ImportError
        Without the ``onnx`` package (the ``export`` extra).

    See Also
    --------
    export_module : The same model as a PyTorch module.

    Notes
    -----
    **Inputs** (``N``, the number of rows, is dynamic):

    - ``X``: float64 ``(N, n_numeric)``, the numeric columns in the order of
      the estimator's input, ``NaN`` for a missing value (all
      ``n_features_in_`` columns with ``categories="codes"`` or without
      categorical columns);
    - ``X_categorical`` (``categories="strings"`` with categorical columns
      only): string ``(N, n_categorical)``, the categorical columns in
      order.

    **Outputs** of a classifier: ``predict`` ``(N,)``, the labels of
    ``classes_`` (int64 for integer or boolean labels, float64 for floats,
    else their ``str``); ``predict_proba`` float64 ``(N, n_classes)``;
    ``decision_function`` float64, ``(N,)`` for two classes, else
    ``(N, n_classes)``. Of a regressor: ``predict`` float64, ``(N,)`` or
    ``(N, n_outputs)``.

    The encoding runs in float64 (feed float64: a float32 value of large
    magnitude is rounded before the encoding) and rounds its features to
    float32; the trees run in float32, as the estimators' inference kernel;
    the additive term and the outputs are float64. The tests check the
    outputs against the estimator's to 1e-5 for every architecture and
    encoding (small models). On the default classifier (256 trees, logits
    up to about 10, ``benchmarks/bench_onnx.py``) the graph's
    ``decision_function`` is within 1.9e-6 of a float64 forward of the
    model and the estimator's within 1.3e-6 of it (its contraction of the
    3,840 monomial terms is summed in float32 blocks added in float64), so
    that the two differ by 1.8e-6 (``predict_proba`` by 3.3e-7). The
    estimators refuse infinite
    values; the graph does not check them (``+inf`` lies beyond the last
    breakpoint of every table).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import onnxruntime
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, export_onnx
    >>> X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    >>> clf = SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=2,
    ...                                  random_state=0).fit(X, y)
    >>> folder = tempfile.mkdtemp()
    >>> path = export_onnx(clf, os.path.join(folder, "model.onnx"))
    >>> os.listdir(folder)  # one file, the weights inside
    ['model.onnx']
    >>> session = onnxruntime.InferenceSession(path)
    >>> [i.name for i in session.get_inputs()], [o.name for o in session.get_outputs()]
    (['X'], ['predict', 'predict_proba', 'decision_function'])
    >>> label, proba, scores = session.run(None, {"X": X})
    >>> bool(np.allclose(proba, clf.predict_proba(X), atol=1e-5))
    True
    >>> bool((label == clf.predict(X)).all())
    True
    """
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        raise TypeError(
            "export_onnx does not export a Pipeline: export its last step "
            "(pipeline[-1]) and apply the preprocessing before the ONNX model (skl2onnx "
            "converts scikit-learn transformers).")
    if categories not in ("strings", "codes"):
        raise ValueError(f"categories must be 'strings' or 'codes', got {categories!r}.")
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - the export extra is installed in CI
        raise ImportError(
            "export_onnx needs the onnx package: pip install onnx (or the 'export' extra)."
        ) from exc
    try:
        est = _fitted_ensemble(estimator)
    except TypeError as exc:
        raise TypeError(str(exc).replace("export_module", "export_onnx")) from None
    model = _build(est, categories)
    onnx.checker.check_model(model)
    path = os.fspath(path)
    onnx.save_model(model, path)  # one file: the initializers embedded
    return path


def onnx_inputs(estimator, X, *, categories="strings"):
    """Raw rows as the inputs of the graph of :func:`export_onnx`.

    Numeric columns become the float64 array ``X`` (``NaN`` for a missing
    value); categorical columns, with ``categories="strings"``, the string
    array ``X_categorical``: ``str`` of each value, ``""`` for a missing one
    (``None``, ``NaN``, ``pd.NA``, ``pd.NaT``); with ``categories="codes"``,
    their category codes in ``X`` (:func:`~sktree_lmc.encode_categories`).
    ``X`` is checked against the fit as in ``predict``. A serving system
    builds the same arrays without this package.

    Parameters
    ----------
    estimator : SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor or \
            ShardedSoftTreeEnsemble
        The fitted estimator that was exported.
    X : array-like or pandas DataFrame of shape (n_samples, n_features)
        Raw rows, as given to ``predict``.
    categories : {"strings", "codes"}, default="strings"
        As given to :func:`export_onnx`.

    Returns
    -------
    feed : dict of str to ndarray
        ``{"X": ...}``, and ``"X_categorical"`` with ``categories="strings"``
        when the estimator has categorical columns: the ``input_feed`` of
        ``onnxruntime.InferenceSession.run``.

    See Also
    --------
    export_onnx : The graph that takes these inputs.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import onnxruntime
    >>> import pandas as pd
    >>> from sktree_lmc import SoftTreeEnsembleRegressor, export_onnx, onnx_inputs
    >>> X = pd.DataFrame({"rooms": [1.0, 2.0, np.nan, 3.0, 4.0, 2.0, 5.0, 3.0],
    ...                   "city": ["Oslo", "Rome", "Oslo", "Lima", None, "Rome", "Lima",
    ...                            "Oslo"]})
    >>> y = [100.0, 180.0, 120.0, 260.0, 300.0, 190.0, 380.0, 250.0]
    >>> reg = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=5,
    ...                                 random_state=0).fit(X, y)
    >>> path = export_onnx(reg, os.path.join(tempfile.mkdtemp(), "model.onnx"))
    >>> new = pd.DataFrame({"rooms": [2.5, np.nan], "city": ["Rome", None]})
    >>> feed = onnx_inputs(reg, new)
    >>> feed["X"], feed["X_categorical"]
    (array([[2.5],
           [nan]]), array([['Rome'],
           ['']], dtype=object))
    >>> session = onnxruntime.InferenceSession(path)
    >>> (pred,) = session.run(None, feed)
    >>> bool(np.allclose(pred, reg.predict(new), atol=1e-5))
    True
    """
    from ..encoding._column_encodings import missing_mask as _missing_mask
    from ..encoding._column_encodings import numeric_values as _numeric
    from ._export import encoder_inputs

    if categories not in ("strings", "codes"):
        raise ValueError(f"categories must be 'strings' or 'codes', got {categories!r}.")
    est = _fitted_ensemble(estimator)
    enc = est.encoder_
    columns = input_columns(est, X)
    cat = [j for j in range(enc.n_features_in_) if enc.categorical_[j]]
    if categories == "codes" or not cat:
        return {"X": encoder_inputs(enc, columns)}
    num = [j for j in range(enc.n_features_in_) if not enc.categorical_[j]]
    n = len(columns[0]) if columns else 0
    values = np.empty((n, len(num)), dtype=np.float64)
    for k, j in enumerate(num):
        values[:, k] = _numeric(np.asarray(columns[j]), enc._name(j))
    strings = np.empty((n, len(cat)), dtype=object)
    for k, j in enumerate(cat):
        col = np.asarray(columns[j], dtype=object)
        missing = _missing_mask(col)
        strings[:, k] = ["" if m else str(v) for v, m in zip(col.tolist(), missing)]
    feed = {"X_categorical": strings}
    if num:
        feed["X"] = values
    return feed

"""The encodings of one input column: one class per kind, in one table.

:class:`~sktree_lmc.encoding._encoding.TabularEncoder` turns every input column into
a contiguous block of features (its split features); how depends on the
column's kind: ``numeric_encoding`` for a numeric column
(:data:`NUMERIC_ENCODINGS`: ``"piecewise_linear"``, ``"quantile_normal"``,
``"standard"``, ``"none"``), the one-hot encoding (:data:`CATEGORICAL`) for a
categorical one. Each kind is a :class:`ColumnEncoding` subclass; an instance
is one column's fitted encoding, holding its own state (its knots, center and
scale, quantile transform or categories), and computes everything a code
path of the encoder consumes of the column:

- :meth:`~ColumnEncoding.summarize` (a class method): the column's entry of
  a summary (:func:`~sktree_lmc.encoding._encoding.summarize`);
- :meth:`~ColumnEncoding.fit` (a class method): the fitted column from the
  parts' summaries;
- :attr:`~ColumnEncoding.width`: its number of features (without the
  missing indicator);
- :meth:`~ColumnEncoding.transform`: its features, written into its block;
- :meth:`~ColumnEncoding.ramp`, :meth:`~ColumnEncoding.export_form`,
  :meth:`~ColumnEncoding.feature_names`, :meth:`~ColumnEncoding.sample` and
  :meth:`~ColumnEncoding.difference`: what the estimators' start on ramps,
  the exported torch module, the feature names, the probe rows and the
  comparison of two encoders need;
- :meth:`~ColumnEncoding.union` (a class method): the exact union of fitted
  columns of the kind, and each one's :class:`ColumnMap` into it (the
  quantile transform has no exact union: its distinct transforms side by
  side); :func:`union_column` unites one column of several encoders, of any
  kinds.

A union of encoders fitted on different rows
(:func:`~sktree_lmc.encoding._common_encoding.common_encoder`) may also hold a
:class:`StackedColumns` column: several numeric encodings of the column
side by side. Every kind is in :data:`COLUMN_KINDS`, by name.

:meth:`TabularEncoder.to_dict` lays the columns' states out as it always has
(per-column lists ``knots_``, ``center_``, ``scale_``, ``categories_``, the
array ``has_infrequent_`` and the dict ``quantile_transformers_``):
:func:`column_state_lists` and :func:`columns_from_state_lists`, so that its
layout does not depend on this code's structure.

The module also reads a raw column as numbers (:func:`numeric_values`,
missing values as NaN) and merges the parts' quantile sketches
(:func:`mixture_quantiles`), for the encodings and for the additive term's
bins (:mod:`._additive_bins`).
"""

from __future__ import annotations

import datetime
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.special import ndtri
from sklearn.preprocessing import QuantileTransformer

__all__ = ["CATEGORICAL", "COLUMN_KINDS", "NUMERIC_ENCODINGS", "STACKED", "ColumnEncoding",
           "ColumnMap", "NoneColumns", "OneHotColumns", "PiecewiseLinearColumns",
           "QuantileNormalColumns", "StackedColumns", "StandardColumns", "column_name",
           "column_state_lists", "columns_from_state_lists", "missing_mask", "mixture_quantiles",
           "numeric_values", "sketch_entries", "sketch_parts", "sorted_quantiles", "time_seconds",
           "union_column"]


#: Values of an object column that are not numbers although ``float()`` of
#: some of them succeeds (a NumPy datetime64 gives a count of its unit): a
#: numeric column holding them is an error, not a silent conversion.
_NOT_NUMBERS = (datetime.date, datetime.time, datetime.timedelta, np.datetime64,
                np.timedelta64)

#: Sub-second units of datetime64 and timedelta64 and their ticks per second.
_TICKS_PER_SECOND = {"ms": 10**3, "us": 10**6, "ns": 10**9, "ps": 10**12, "fs": 10**15,
                     "as": 10**18}


def missing_mask(values):
    """Missing entries of an object array: None, float NaN, pd.NA, pd.NaT."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        pass
    else:
        return np.asarray(pd.isna(values), dtype=bool)
    mask = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):  # pragma: no cover - without pandas
        mask[i] = v is None or (isinstance(v, float) and v != v)
    return mask



def time_seconds(values, name):
    """A datetime64 or timedelta64 array as float64 seconds, NaT as NaN.

    Datetimes become seconds since the epoch (1970-01-01T00:00:00), time
    deltas seconds. The result does not depend on the array's unit: the
    whole seconds are exact integers and the rest is ``ticks / ticks per
    second``, one correctly rounded division of the same real number in
    every unit (``[ns]`` and ``[us]`` of the same instants give equal
    floats).

    Parameters
    ----------
    values : ndarray of datetime64 or timedelta64
    name : str
        The column, for error messages.

    Returns
    -------
    seconds : ndarray of float64

    Raises
    ------
    ValueError
        For time deltas in months or years (no fixed length in seconds) or
        without a unit.
    """
    values = np.asarray(values)
    kind = values.dtype.kind
    out = np.full(len(values), np.nan)
    present = ~np.isnat(values)
    if not present.any():
        return out
    unit, count = np.datetime_data(values.dtype)
    if unit == "generic" or (kind == "m" and unit in ("Y", "M")):
        what = "no unit" if unit == "generic" else f"unit {unit!r}, which has no fixed length"
        raise ValueError(
            f"Column {name} holds timedelta64 values with {what}; convert it to a unit of "
            "days or shorter (e.g. timedelta64[s])."
        )
    v = values[present]
    per_second = _TICKS_PER_SECOND.get(unit)
    if per_second is None:  # a second or coarser: whole seconds, exactly
        out[present] = v.astype(f"{'datetime64' if kind == 'M' else 'timedelta64'}[s]").view(
            np.int64).astype(np.float64)
    elif per_second % count:  # an odd multiple of a sub-second unit
        out[present] = v.view(np.int64).astype(np.float64) * (count / per_second)
    else:
        seconds, rest = np.divmod(v.view(np.int64), per_second // count)
        out[present] = seconds.astype(np.float64) + rest / float(per_second // count)
    return out


def _first_non_number(values):
    """The first of ``values`` (a list, none missing) that is not a number, or None."""
    for v in values:
        if isinstance(v, _NOT_NUMBERS) or np.ndim(v) != 0:
            return v
        try:
            float(v)
        except (TypeError, ValueError):
            return v
    return None


def _object_numeric(values, name):
    """A numeric column held in an object array as float64, missing values as
    NaN; a value that is not a number (a string, a date, a list...) is a
    ``ValueError`` naming the column, the value and its type."""
    missing = missing_mask(values)
    out = np.full(len(values), np.nan)
    if missing.all():
        return out
    present = values[~missing].tolist()
    converted = None
    # float() of a NumPy datetime64 succeeds, in its unit: look for such values first
    if not any(issubclass(t, _NOT_NUMBERS) for t in set(map(type, present))):
        try:
            converted = np.asarray(present, dtype=np.float64)
        except (TypeError, ValueError):
            converted = None
    if converted is None or converted.shape != (len(present),):
        bad = _first_non_number(present)
        what = (f"{bad!r}, of type {type(bad).__name__}" if bad is not None
                else "a value that does not convert to one float")
        if bad is not None and np.ndim(bad) != 0:
            hint = "every value of a column must be one scalar, not a sequence."
        elif isinstance(bad, _NOT_NUMBERS) or type(bad).__name__ == "Period":
            hint = ("convert dates and times to datetime64 (pandas.to_datetime, or "
                    "Series.dt.to_timestamp() for periods), which is encoded as seconds since "
                    "the epoch, or declare the column in categorical_features.")
        else:
            hint = "declare it in categorical_features if it is categorical."
        message = f"Column {name} is numeric but holds a value that is not a number ({what})"
        try:
            float(bad)
        except TypeError as exc:  # not a string nor a number: a TypeError, as float() says
            raise TypeError(f"{message}: {exc}; {hint}") from None
        except (ValueError, OverflowError):
            pass
        raise ValueError(f"{message}; {hint}")
    out[~missing] = converted
    return out


def numeric_values(values, name):
    """A column as float64 with missing values (NaN, None, NaT...) as NaN; a
    datetime64 or timedelta64 column as seconds (:func:`time_seconds`);
    infinity and values that are not numbers are errors."""
    if values.dtype != np.float64:
        if values.dtype.kind in "Mm":
            values = time_seconds(values, name)
        elif values.dtype == object:
            values = _object_numeric(values, name)
        else:
            values = values.astype(np.float64)
    if np.isinf(values).any():
        raise ValueError(
            f"Input contains infinity in column {name}; missing values (NaN) are accepted, "
            "infinite ones are not."
        )
    return values


def _hat_features(x, knots, dtype=np.float32):
    """Degree-1 B-spline basis on ``knots`` (unique, sorted) of ``x`` (no NaN),
    shape ``(len(x), len(knots))``, of ``dtype``; a single knot gives no
    feature."""
    T = len(knots)
    if T < 2:
        return np.zeros((len(x), 0), dtype=dtype)
    xc = np.clip(x, knots[0], knots[-1])
    # the interval [k_i, k_{i+1}] that holds each value (the last one closed)
    i = np.clip(np.searchsorted(knots, xc, side="right") - 1, 0, T - 2)
    t = (xc - knots[i]) / (knots[i + 1] - knots[i])
    out = np.zeros((len(x), T), dtype=dtype)
    rows = np.arange(len(x))
    out[rows, i] = 1.0 - t
    out[rows, i + 1] += t
    return out


#: :class:`~sklearn.preprocessing.QuantileTransformer`'s ``BOUNDS_THRESHOLD``
#: and the clip of its normal output, as it computes them.
_BOUNDS_THRESHOLD = 1e-7
#: A category no encoder was fitted on: what a probe row of a column with an
#: infrequent feature holds for it (see ``OneHotColumns.sample``).
_UNSEEN_CATEGORY = "\x00sktree_lmc: a category outside the fitted ones"

_NORMAL_CLIP = (float(stats.norm.ppf(_BOUNDS_THRESHOLD - np.spacing(1))),
                float(stats.norm.ppf(1 - (_BOUNDS_THRESHOLD - np.spacing(1)))))


class SortedSearch:
    """``np.searchsorted(knots, x, side="right")`` for many values ``x``,
    exactly, through a uniform grid over the range of the knots.

    A binary search over thousands of knots is bound by its mispredicted
    branches (about 13 per value). Here every value's cell of the grid
    (``cells_per_knot`` cells per knot) gives the few knots it can fall
    between, and a branchless binary search over those, vectorized over the
    values, takes as many steps as the fullest cell needs (two or three for
    quantiles, at most ``log2`` of the number of knots).

    It is exact for any sorted knots: a value's cell and the knots' cells
    come from one monotone function, so the knots of lower cells are below
    the value and those of higher cells above it; infinite values fall in
    the end cells, and a range too wide for float64 puts every knot in one
    cell (a plain binary search).

    Parameters
    ----------
    knots : array-like of shape (n_knots,)
        Finite, sorted (ascending) knots.
    cells_per_knot : int, default=2
        Cells of the grid per knot.
    """

    def __init__(self, knots, cells_per_knot=2):
        knots = np.asarray(knots, dtype=np.float64)
        self._padded = np.concatenate([[-np.inf], knots])  # _padded[k] = knots[k - 1]
        self._n_cells = n_cells = max(1, cells_per_knot * len(knots))
        self._low = knots[0] if len(knots) else 0.0
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            scale = n_cells / (knots[-1] - knots[0]) if len(knots) else 0.0
        self._scale = float(scale) if np.isfinite(scale) else 0.0
        counts = np.bincount(self._cells(knots), minlength=n_cells)
        # _first[c]: the knots in the cells before c, so a value in cell c has between
        # _first[c] and _first[c + 1] knots at or below it
        self._first = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
        # the branchless search's strides: enough for the fullest cell
        self._strides = [1 << i for i in reversed(range(int(counts.max(initial=0)).bit_length()))]

    def _cells(self, x):
        with np.errstate(invalid="ignore", over="ignore"):
            c = (x - self._low) * self._scale
        # fmax, fmin: the NaN of an infinite value times a zero scale (one cell) goes to 0
        np.fmin(np.fmax(c, 0, out=c), self._n_cells - 1, out=c)
        return c.astype(np.intp)

    def __call__(self, x):
        """``np.searchsorted(knots, x, side="right")`` of float64 values ``x`` (no NaN)."""
        c = self._cells(x)
        k = np.take(self._first, c)
        last = np.take(self._first, c + 1)
        for stride in self._strides:
            candidate = k + stride
            ok = np.take(self._padded, np.minimum(candidate, last)) <= x
            ok &= candidate <= last
            k = np.where(ok, candidate, k)
        return k


class _QuantileNormalTable:
    """The fitted quantile transform of one column to a standard normal, as
    one search and three gathers per value.

    :meth:`QuantileTransformer.transform
    <sklearn.preprocessing.QuantileTransformer.transform>` of a column
    validates its input, interpolates twice (forwards and backwards, the
    mean of both, for repeated quantiles) and calls
    ``scipy.stats.norm.ppf``: about 1.9 ms per 10,000 values. Between two
    neighbouring distinct quantiles both interpolations use the same
    segment, so one search over the distinct quantiles finds the segment of
    each value, whose left end, reference and slope are gathered and
    interpolated as :func:`numpy.interp` does (its slopes, its formula and
    its fallbacks where a slope overflows); a value equal to a repeated
    quantile takes the mean of the references of its run, values within
    ``BOUNDS_THRESHOLD`` of the ends their bounds, as in sklearn; then
    ``ndtri`` and sklearn's clip. The
    result is sklearn's within float64 rounding (the forward interpolation
    alone instead of the mean of two; ``tests/test_encoding.py``). The
    search is a :class:`SortedSearch`.

    With the additive term's edges of the same column (``edges``), the
    search runs over the union of both, so that the same search also gives
    each value's bin, ``np.searchsorted(edges, x, side="right")``: the
    additive codes of a quantile column cost a gather instead of a second
    search.

    Parameters
    ----------
    qt : QuantileTransformer
        Fitted with ``output_distribution="normal"``, on one column.
    edges : ndarray or None, default=None
        Sorted edges whose bins :meth:`__call__` also returns.
    """

    def __init__(self, qt, edges=None):
        q = np.asarray(qt.quantiles_, dtype=np.float64)[:, 0]
        r = np.asarray(qt.references_, dtype=np.float64)
        # what the table was made from (see _quantile_table)
        self.quantiles, self.edges = qt.quantiles_, edges
        distinct = np.unique(q)
        self.knots = knots = distinct if edges is None else np.union1d(distinct, edges)
        self._search = SortedSearch(knots)
        self.bounds = (q[0], q[-1])
        # segment k: values in [knots[k - 1], knots[k]) (k = 0: below every knot), in
        # the quantiles' segment j (the last quantile at or below knots[k - 1])
        j = np.concatenate([[-1], np.searchsorted(q, knots, side="right") - 1])
        inside = (j >= 0) & (j < len(q) - 1)
        jl, jr = np.clip(j, 0, len(q) - 1), np.clip(j + 1, 0, len(q) - 1)
        self.left = np.where(inside, q[jl], 0.0)
        self.reference = np.where(j < 0, r[0], r[jl])
        self.right = np.where(inside, q[jr], 0.0)
        self.right_reference = np.where(inside, r[jr], self.reference)
        self.slope = np.zeros(len(knots) + 1)
        with np.errstate(over="ignore", invalid="ignore"):  # subnormal gaps: inf, as NumPy
            self.slope[inside] = ((r[jr] - r[jl]) / (q[jr] - q[jl]))[inside]
        #: NumPy's fallbacks where a slope is not finite (see __call__)
        self.finite = bool(np.isfinite(self.slope).all())
        # the segments that start on a quantile repeated in q: a value there takes the
        # mean of the references of its run (sklearn's two interpolations)
        first = np.searchsorted(q, knots, side="left")
        run = (j[1:] > first) & (q[np.clip(first, 0, len(q) - 1)] == knots)
        self.runs = np.flatnonzero(run) + 1
        self.at_runs = 0.5 * (r[j[1:][run]] + r[first[run]])
        self.codes = (None if edges is None else np.concatenate(
            [[0], np.searchsorted(edges, knots, side="right")]))

    def __call__(self, x):
        """The normal scores of present values ``x`` (float64, no NaN), and
        their bins in ``edges`` (None without)."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        k = self._search(x)
        with np.errstate(invalid="ignore", over="ignore"):
            p = x - np.take(self.left, k)
            p *= np.take(self.slope, k)
            p += np.take(self.reference, k)
        if not self.finite:  # numpy.interp: a knot its value, else from the right end
            bad = np.flatnonzero(np.isnan(p))
            kb, xb = k[bad], x[bad]
            with np.errstate(invalid="ignore", over="ignore"):
                alt = self.slope[kb] * (xb - self.right[kb]) + self.right_reference[kb]
            exact = (np.isnan(alt) & (self.reference[kb] == self.right_reference[kb])) | (
                xb == self.left[kb])
            alt[exact] = self.reference[kb][exact]
            p[bad] = alt
        if self.runs.size:  # a value on a repeated quantile: the mean over its run
            at = np.flatnonzero(np.isin(k, self.runs))
            hit = at[x[at] == np.take(self.left, k[at])]
            p[hit] = self.at_runs[np.searchsorted(self.runs, k[hit])]
        p[x + _BOUNDS_THRESHOLD > self.bounds[1]] = 1.0
        p[x - _BOUNDS_THRESHOLD < self.bounds[0]] = 0.0
        scores = np.clip(ndtri(p, out=p), *_NORMAL_CLIP, out=p)
        return scores, (None if self.codes is None else np.take(self.codes, k))


#: The tables of the fitted transformers met so far, made once each.
_QUANTILE_TABLES = weakref.WeakKeyDictionary()


def _quantile_table(qt, edges=None):
    """The :class:`_QuantileNormalTable` of ``qt`` (and ``edges``), cached
    while ``qt`` lives, for the same ``quantiles_`` and ``edges`` objects
    (one table without edges and one with, per transformer)."""
    tables = _QUANTILE_TABLES.setdefault(qt, {})
    key = edges is not None
    table = tables.get(key)
    if table is None or table.quantiles is not qt.quantiles_ or table.edges is not edges:
        table = tables[key] = _QuantileNormalTable(qt, edges)
    return table


def sorted_quantiles(xs, levels):
    """``np.quantile(xs, levels)`` (its default ``"linear"`` method) of sorted
    values ``xs``, bit for bit, without its partition.

    NumPy partitions around every level's two neighbours, which costs
    tens of milliseconds per call for thousands of levels (the additive
    term's 4,096 bins), against a sort's fraction of one. The indices, the
    weights and the interpolation are NumPy's own (``_get_indexes``,
    ``_lerp``); ``tests/test_encoding.py`` checks the equality."""
    xs = np.asarray(xs, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    n = len(xs)
    virtual = (n - 1) * levels
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = following[above] = -1
    below = virtual < 0
    previous[below] = following[below] = 0
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    a, b = xs[previous], xs[following]
    gamma = np.asarray(virtual - previous, dtype=virtual.dtype)
    diff = b - a
    out = np.add(a, diff * gamma)
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def _knots(x, n_bins):
    """Knots of the piecewise-linear encoding of the finite values ``x``: its
    distinct values when there are at most ``n_bins + 1`` (a discrete column
    keeps every value, however rare), else the distinct quantiles at
    ``n_bins + 1`` evenly spaced levels."""
    if x.size == 0:
        return np.zeros(0)
    distinct = np.unique(x)
    if len(distinct) <= n_bins + 1:
        return distinct
    q = np.quantile(x, np.linspace(0.0, 1.0, n_bins + 1), method="linear")
    return np.unique(q)


def column_name(names, j):
    if names is not None and j < len(names):
        return f"{str(names[j])!r}"
    return f"{j}"


def _uncomparable(name, exc):
    """The error for a categorical column whose values cannot be sorted."""
    return TypeError(
        f"Categorical column {name} mixes values that cannot be compared "
        f"({type(exc).__name__}: {exc}); give it one type of scalar (e.g. strings)."
    )


def _check_hashable(keys, name):
    """A ``TypeError`` naming the column unless every category is hashable
    (a list, an array or a dict cannot be a category)."""
    for key in keys:
        try:
            hash(key)
        except TypeError:
            raise TypeError(
                f"Categorical column {name} holds a value that cannot be a category "
                f"({key!r}, of type {type(key).__name__}, is not hashable); every value of a "
                "column must be one scalar."
            ) from None


def _category_counts(present, name):
    """Sorted distinct categories of ``present`` and their counts."""
    if present.size == 0:
        return np.empty(0, dtype=object), np.zeros(0, dtype=np.int64)
    try:
        keys, counts = np.unique(present, return_counts=True)
    except (TypeError, ValueError) as exc:  # ValueError: arrays as values, periods
        _check_hashable(present.tolist(), name)
        raise _uncomparable(name, exc) from exc
    _check_hashable(keys.tolist(), name)
    return keys.astype(object), counts.astype(np.int64)


def _merge_counts(parts, name):
    """Categories and summed counts over the parts' category counts."""
    keys = [part["keys"] for part in parts if len(part["keys"])]
    if not keys:
        return np.empty(0, dtype=object), np.zeros(0, dtype=np.int64)
    if len(keys) == 1:
        part = next(p for p in parts if len(p["keys"]))
        return part["keys"], part["counts"]
    counts = np.concatenate([part["counts"] for part in parts if len(part["keys"])])
    try:
        merged, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    except (TypeError, ValueError) as exc:
        raise _uncomparable(name, exc) from exc
    summed = np.bincount(inverse.ravel(), weights=counts, minlength=len(merged))
    return merged.astype(object), summed.astype(np.int64)


def _categories_from_counts(keys, counts, max_categories):
    """The ``max_categories`` most frequent of the sorted ``keys`` (ties by
    sorted order), sorted, and whether others were left out."""
    order = np.argsort(-counts, kind="stable")
    kept = np.sort(keys[order[:max_categories]])
    return kept.astype(object), bool(len(keys) > len(kept))


def _merged_moments(parts):
    """Mean and scale (standard deviation, 1 when 0 or not finite) of the
    union of the parts, from their counts, means and sums of squared
    deviations (Chan et al.'s pairwise update; one part: its own values)."""
    n = mean = m2 = 0
    for part in parts:
        nb = part["count"]
        if nb == 0:
            continue
        if n == 0:
            n, mean, m2 = nb, part["mean"], part["m2"]
            continue
        total = n + nb
        delta = part["mean"] - mean
        mean = mean + delta * nb / total
        m2 = m2 + part["m2"] + delta * delta * n * nb / total
        n = total
    if n == 0:
        return 0.0, 1.0
    sd = float(np.sqrt(m2 / n))
    return float(mean), (sd if sd > 0 and np.isfinite(sd) else 1.0)


def _sketch_cdf(q, p, x, right):
    """The piecewise-linear CDF through the points ``(q_i, p_i)`` (``q``
    sorted, ties are jumps) at ``x``: right-continuous values, or left limits."""
    i = np.searchsorted(q, x, side="right" if right else "left") - 1
    last = len(q) - 1
    out = np.where(i < 0, 0.0, 1.0)
    mid = (i >= 0) & (i < last)
    if mid.any():
        k = i[mid]
        t = (x[mid] - q[k]) / (q[k + 1] - q[k])
        out[mid] = p[k] + t * (p[k + 1] - p[k])
    return out


def mixture_quantiles(parts, levels):
    """Quantiles at ``levels`` of the count-weighted mixture of the parts'
    piecewise-linear quantile functions ``(count, values at evenly spaced
    levels)``: the inverse of the mixture's CDF, interpolated."""
    total = float(sum(n for n, _ in parts))
    xs = np.unique(np.concatenate([q for _, q in parts]))
    left = np.zeros(len(xs))
    right = np.zeros(len(xs))
    for n, q in parts:
        p = np.linspace(0.0, 1.0, len(q))
        left += n / total * _sketch_cdf(q, p, xs, right=False)
        right += n / total * _sketch_cdf(q, p, xs, right=True)
    # the CDF curve: at every breakpoint its left limit, then its value (a jump)
    curve_x = np.repeat(xs, 2)
    curve_p = np.maximum.accumulate(np.column_stack([left, right]).ravel())
    curve_p[-1] = 1.0
    idx = np.clip(np.searchsorted(curve_p, levels, side="left"), 1, len(curve_p) - 1)
    p0, p1 = curve_p[idx - 1], curve_p[idx]
    t = np.where(p1 > p0, (levels - p0) / np.where(p1 > p0, p1 - p0, 1.0), 1.0)
    out = curve_x[idx - 1] + np.clip(t, 0.0, 1.0) * (curve_x[idx] - curve_x[idx - 1])
    out[levels <= 0] = xs[0]
    out[levels >= 1] = xs[-1]
    return out


def sketch_parts(parts):
    """``(count, sorted sample of the quantile function)`` of every part, for
    :func:`mixture_quantiles`: its values, or its sketched quantiles."""
    return [(part["count"], np.sort(part["values"]) if part.get("values") is not None
             else part["quantiles"]) for part in parts]


def _merged_knots(parts, n_bins):
    """Knots of the piecewise-linear encoding of a numeric column from its
    parts' summaries: :func:`_knots` of the pooled values when every part
    sent them, the union of the distinct values when every part has few and
    they are at most ``n_bins + 1``, else the distinct quantiles of the
    merged sketch at ``n_bins + 1`` evenly spaced levels."""
    parts = [part for part in parts if part["count"] > 0]
    if not parts:
        return np.zeros(0)
    if all(part.get("values") is not None for part in parts):
        return _knots(np.concatenate([part["values"] for part in parts]), n_bins)
    distinct = []
    for part in parts:
        d = np.unique(part["values"]) if part.get("values") is not None else part["distinct"]
        if d is None or len(d) > n_bins + 1:
            distinct = None
            break
        distinct.append(d)
    if distinct is not None:
        union = np.unique(np.concatenate(distinct))
        if len(union) <= n_bins + 1:
            return union
    return np.unique(mixture_quantiles(sketch_parts(parts), np.linspace(0.0, 1.0, n_bins + 1)))


def _merged_quantile_points(parts):
    """The values a quantile transform of a numeric column is fitted on, from
    its parts' summaries: the pooled values when every part sent them (the
    exact fit), else the merged sketch's quantiles at ``min(1000, count)``
    evenly spaced levels, which are the quantiles the exact fit would store,
    up to the sketch's error."""
    parts = [part for part in parts if part["count"] > 0]
    if not parts:
        return np.zeros(0)
    if all(part.get("values") is not None for part in parts):
        return np.concatenate([part["values"] for part in parts])
    total = sum(part["count"] for part in parts)
    return mixture_quantiles(sketch_parts(parts), np.linspace(0.0, 1.0, min(1000, total)))




def sketch_entries(present, sketch_size):
    """The entries of a numeric column's summary that its quantiles come from.

    One sketch of a column serves every quantile-based part of the
    encoding: the quantile transform, the knots and the additive bins.

    Parameters
    ----------
    present : ndarray of float64
        The column's present values.
    sketch_size : int or None
        None: an exact summary; an int: the quantile levels of the sketch
        of a column with more present values.

    Returns
    -------
    entries : dict
        ``values`` (the present values, for an exact summary or at most
        ``sketch_size`` of them) or ``quantiles`` (the values at
        ``sketch_size`` evenly spaced quantile levels).
    """
    if sketch_size is None or present.size <= sketch_size:
        return {"values": present}
    # the quantiles come from the merged sketches
    return {"quantiles": np.quantile(present, np.linspace(0.0, 1.0, sketch_size),
                                     method="linear")}


def _arrays_differ(x, y):
    """Whether two optional arrays differ (one None, or other values)."""
    return (x is None) != (y is None) or (
        x is not None and not np.array_equal(np.asarray(x), np.asarray(y)))


class ColumnMap(NamedTuple):
    """How one encoding of a column (in one encoder) reads a union's.

    ``features = matrix @ union_sub_block + offset + indicator * missing``:
    ``sub`` is the union's sub-encoding (of the same kind) whose block it
    reads, ``matrix`` of shape ``(width, union width)``, ``offset`` and
    ``indicator`` (the coefficient of the union's missing indicator) of
    shape ``(width,)``.
    """

    sub: int
    matrix: np.ndarray
    offset: np.ndarray
    indicator: np.ndarray

    @classmethod
    def plain(cls, sub, matrix):
        """A map without offset nor indicator."""
        width = matrix.shape[0]
        return cls(sub, matrix, np.zeros(width), np.zeros(width))

    def shifted(self, first):
        """The map reading sub-encoding ``first + sub`` instead of ``sub``."""
        return self._replace(sub=first + self.sub)


class ColumnEncoding:
    """The fitted encoding of one input column: the base of the kinds.

    One subclass per kind (:data:`COLUMN_KINDS`); an instance holds one
    column's fitted state (:meth:`state`, the entries the kind owns in
    ``TabularEncoder.to_dict``, ``state_keys``) and computes everything a
    code path of :class:`~sktree_lmc.encoding._encoding.TabularEncoder` needs of
    the column. The class methods :meth:`summarize` and :meth:`fit` make the
    summary entries and the fitted object from them; :meth:`union` the
    exact union of several fitted objects of the kind.

    Attributes
    ----------
    name : str
        The kind's name (``numeric_encoding`` for the numeric kinds).
    state_keys : tuple of str
        The entries of ``TabularEncoder.to_dict`` holding a column's state
        of this kind (per-column lists, or dicts by column index).
    uses_n_bins : bool
        Whether the encoding depends on ``n_bins``.
    identity : bool
        Whether a column's feature is its value itself.
    """

    name = ""
    state_keys: tuple = ()
    uses_n_bins = False
    identity = False

    def __repr__(self):
        return f"{type(self).__name__}()"

    def state(self):
        """Return the fitted state, as plain data.

        Returns
        -------
        state : dict
            ``state_keys`` to the column's entries (None: no entry in a
            dict attribute).
        """
        return {}

    @classmethod
    def from_state(cls, state):
        """Rebuild a fitted column from :meth:`state`.

        Parameters
        ----------
        state : dict
            The output of :meth:`state`.

        Returns
        -------
        column : ColumnEncoding
        """
        return cls()

    @classmethod
    def summarize(cls, values, name, *, n_bins, sketch_size, sketch=False):
        """Return the column's entry of a summary (see ``summarize``).

        Parameters
        ----------
        values : ndarray
            The column's values (one part of the rows).
        name : str
            The column, for error messages.
        n_bins : int
            The encoder's ``n_bins``.
        sketch_size : int or None
            See :func:`sketch_entries`.
        sketch : bool, default=False
            Whether to send the values or the sketch of a numeric column
            even when the encoding does not need them (the additive term's
            bins do).

        Returns
        -------
        entry : dict
            ``kind``, ``has_missing``, ``count`` and the kind's entries.
        """
        raise NotImplementedError

    @classmethod
    def fit(cls, parts, *, name, n_bins, max_categories):
        """Return the fitted column from its parts' summary entries.

        Parameters
        ----------
        parts : list of dict
            The column's entry of every part's summary.
        name : str
            The column, for error messages.
        n_bins, max_categories : int
            The encoder's settings.

        Returns
        -------
        column : ColumnEncoding
        """
        return cls()

    @classmethod
    def union(cls, columns, name):
        """Return the union of fitted columns of this kind, and each one's map.

        Parameters
        ----------
        columns : list of ColumnEncoding
            One column's encodings of this kind (one per encoder, more for
            an encoder whose column is already stacked).
        name : str
            The column, for error messages.

        Returns
        -------
        union : list of ColumnEncoding
            The union's encodings of this kind (one when the union is exact).
        maps : list of ColumnMap
            Per given column, how it reads the union's features.
        """
        return [cls()], [ColumnMap.plain(0, np.eye(cls().width)) for _ in columns]

    @property
    def width(self):
        """int: The number of the column's features (no missing indicator)."""
        return 1

    def sub_encodings(self):
        """Return the encodings side by side in the column's block.

        Returns
        -------
        encodings : list of ColumnEncoding
            The sub-encodings of a stacked column, else ``[self]``.
        """
        return [self]

    def transform(self, values, name, out):
        """Encode rows of the column into its block of features.

        Parameters
        ----------
        values : ndarray
            The column's rows.
        name : str
            The column, for error messages.
        out : ndarray of float32 of shape (n_rows, width)
            The column's features (zeros), written in place; a missing
            value keeps zeros.

        Returns
        -------
        missing : ndarray of bool of shape (n_rows,)
            The rows whose value is missing.
        """
        raise NotImplementedError

    @classmethod
    def check(cls, values, name):
        """Raise the errors :meth:`transform` would raise on ``values``,
        without encoding them (prediction skips the encoding of a column no
        split uses, but not its checks).

        Returns
        -------
        checked : bool
            False when the kind cannot check without encoding.
        """
        return False

    def ramp(self):
        """Return the linear ramp over the column's features, or None.

        Returns
        -------
        ramp : ndarray of shape (width,) or None
            From -1 to 1 over the knots of a piecewise-linear column; None
            for the other kinds (and a column of fewer than two knots).
        """
        return None

    def export_form(self):
        """Return how the exported torch module encodes the column.

        Returns
        -------
        form : {"empty", "one_hot", "hat", "quantile_normal", "affine", "stack"}
            The exported column's kind.
        args : tuple
            Its arguments before ``has_missing``: none, the number of
            categories and whether there is an infrequent feature, the
            knots, the ``QuantileTransformer``, the center and scale, or
            the list of the ``(form, args)`` of a stacked column's
            sub-encodings (those with features).
        """
        raise NotImplementedError

    def feature_names(self, name, stacked=False):
        """Return the names of the column's features (no missing indicator).

        Parameters
        ----------
        name : str
            The input column's name.
        stacked : bool, default=False
            Whether the encoding is a sub-encoding of a stacked column (its
            one feature then carries the kind's tag).

        Returns
        -------
        names : list of str
        """
        if self.width == 1:
            return [f"{name}_{_STACKED_TAGS.get(self.name, self.name)}" if stacked else name]
        return [f"{name}_{self.name}{t}" for t in range(self.width)]  # pragma: no cover

    def difference(self, other, name):
        """Return a sentence saying how two fitted columns of this kind differ.

        Parameters
        ----------
        other : ColumnEncoding
            The column in another encoder of the same settings.
        name : str
            The column, for the sentence.

        Returns
        -------
        sentence : str or None
            None when they are equal.
        """
        return None

    def sample(self, levels):
        """Values of the column drawn from its fitted distribution.

        The fitted state is a summary of the training values (quantiles,
        knots, moments, categories), so values at the quantile ``levels``
        of that summary are a sample of the column's marginal distribution
        without the rows: the probe rows of merge diagnostics and the
        feature scales of weight matching
        (:func:`~sktree_lmc.encoding._common_encoding.probe_columns`).

        Parameters
        ----------
        levels : ndarray of float64 of shape (n,)
            Levels in ``[0, 1)``.

        Returns
        -------
        values : ndarray of shape (n,) or None
            Present values (float64 for numeric kinds, object for
            categorical ones), or None when the state says nothing of the
            distribution (``"none"``).
        """
        return None


#: Levels at which :meth:`StackedColumns.sample` reads each sub-encoding's
#: quantile function (evenly spaced, the ends included) to invert their mixture.
_STACKED_SAMPLE_LEVELS = 1025

#: Per numeric kind, the suffix of its one feature in a stacked column's names.
_STACKED_TAGS = {"quantile_normal": "q", "standard": "std", "none": "value"}


class _NumericColumns(ColumnEncoding):
    """The numeric kinds' summary and transform: missing values are NaN, the
    features of the present values come from :meth:`features`."""

    #: Whether the summary always holds the values or sketch (the quantile kinds).
    sketched = False

    @classmethod
    def summarize(cls, values, name, *, n_bins, sketch_size, sketch=False):
        x = numeric_values(np.asarray(values), name)
        missing = np.isnan(x)
        present = x[~missing] if missing.any() else x
        entry = {"kind": "numeric", "has_missing": bool(missing.any()),
                 "count": int(present.size)}
        entry.update(cls._statistics(present))
        if cls.sketched or sketch:
            entry.update(sketch_entries(present, sketch_size))
        entry.update(cls._sketch_extras(entry, present, n_bins))
        return entry

    @classmethod
    def _statistics(cls, present):
        """Summary entries of the kind computed on the present values."""
        return {}

    @classmethod
    def _sketch_extras(cls, entry, present, n_bins):
        """Summary entries of the kind that depend on the sketch."""
        return {}

    @classmethod
    def check(cls, values, name):
        numeric_values(np.asarray(values), name)
        return True

    def transform(self, values, name, out):
        return self.transform_searched(values, name, out, None)[0]

    def transform_searched(self, values, name, out, edges):
        """:meth:`transform`, and the bins of the values in ``edges`` when the
        kind finds them in the same search as its features.

        Parameters
        ----------
        values, name, out
            As for :meth:`transform`.
        edges : ndarray or None
            Sorted edges (the additive term's finest, of this column); None:
            :meth:`transform` alone.

        Returns
        -------
        missing : ndarray of bool
            As :meth:`transform`'s.
        bins : ndarray of int or None
            ``np.searchsorted(edges, x, side="right")`` of the values ``x``
            (0 where missing); None when the kind does not search, or no
            value is present (the caller then searches itself).
        """
        x = numeric_values(np.asarray(values), name)
        missing = np.isnan(x)
        if out.shape[1] == 0:
            return missing, None
        if not missing.any():  # slices, not masks
            out[:], bins = self._features_searched(x, edges)
            return missing, bins
        present = ~missing
        if not present.any():  # all missing (at predict time): zeros, as any missing value
            return missing, None
        out[present], found = self._features_searched(x[present], edges)
        if found is None:
            return missing, None
        bins = np.zeros(len(x), dtype=np.intp)
        bins[present] = found
        return missing, bins

    def _features_searched(self, xp, edges):
        """:meth:`features`, and the bins of ``xp`` in ``edges`` where the
        kind finds them in the same search (None otherwise)."""
        return self.features(xp), None

    def features(self, xp):
        """Return the features of present values.

        Parameters
        ----------
        xp : ndarray of float64 of shape (n,)
            Present values (no NaN).

        Returns
        -------
        features : ndarray of shape (n, width)
        """
        return xp[:, None]

    def export_form(self):
        if self.width == 0:
            return "empty", ()
        return self._export_form()

    def _export_form(self):
        return "affine", (0.0, 1.0)


class NoneColumns(_NumericColumns):
    """``numeric_encoding="none"``: the value itself, one feature.

    Missing values are zeros (and the missing indicator). It has no fitted
    state; the union of such columns is the identity.

    See Also
    --------
    StandardColumns : ``(x - mean) / std``.
    """

    name = "none"
    identity = True


def _common(values):
    """The parents' common value, else their mean (a union's scale)."""
    values = [float(v) for v in values]
    if all(v == values[0] for v in values):
        return values[0]
    return float(np.mean(values))


def _balanced_center(centers, scales):
    """The union's center: the parents' common value, else the point ``c``
    that minimizes the largest shift ``|c - m_i| / s_i`` of a parent.

    A parent's translation adds ``W * (c - m_i) / s_i`` to its split biases,
    which are stored in float32: a shift far larger than the parent's own
    features (a part whose mean one outlier moved) would lose their digits in
    that sum. The minimax point lies where two parents' shifts are equal,
    ``(m_i s_k + m_k s_i) / (s_i + s_k)``, for the pair that gives it.
    """
    centers = np.asarray([float(v) for v in centers])
    scales = np.asarray([float(v) for v in scales])
    if np.all(centers == centers[0]):
        return float(centers[0])
    candidates = [(centers[i] * scales[k] + centers[k] * scales[i]) / (scales[i] + scales[k])
                  for i in range(centers.size) for k in range(i + 1, centers.size)]
    worst = [np.max(np.abs(c - centers) / scales) for c in candidates]
    return float(candidates[int(np.argmin(worst))])


class StandardColumns(_NumericColumns):
    """``numeric_encoding="standard"``: ``(x - mean) / std``, one feature.

    The summary of a part holds its mean and sum of squared deviations
    (``mean``, ``m2``), merged exactly (Chan et al.'s pairwise update); the
    state is ``center_`` and ``scale_`` (a scale of 0 or not finite is 1).
    The union of such columns has one center and scale (the parents'
    common values, else the scales' mean and the center that keeps every
    parent's shift smallest), a parent's feature an affine function of it.

    Parameters
    ----------
    center, scale : float
        The column's mean and standard deviation.

    See Also
    --------
    NoneColumns : The value itself.
    """

    name = "standard"
    state_keys = ("center_", "scale_")

    def __init__(self, center, scale):
        self.center_ = center
        self.scale_ = scale

    def __repr__(self):
        return f"StandardColumns({self.center_!r}, {self.scale_!r})"

    def state(self):
        return {"center_": self.center_, "scale_": self.scale_}

    @classmethod
    def from_state(cls, state):
        return cls(state["center_"], state["scale_"])

    @classmethod
    def _statistics(cls, present):
        mean = float(present.mean()) if present.size else 0.0
        m2 = float(((present - mean) ** 2).sum()) if present.size else 0.0
        return {"mean": mean, "m2": m2}

    @classmethod
    def fit(cls, parts, *, name, n_bins, max_categories):
        return cls(*_merged_moments(parts))

    @classmethod
    def union(cls, columns, name):
        center = _balanced_center([c.center_ for c in columns], [c.scale_ for c in columns])
        scale = _common(c.scale_ for c in columns)
        maps = []
        for c in columns:
            shift = (center - c.center_) / c.scale_
            maps.append(ColumnMap(0, np.array([[scale / c.scale_]]), np.array([shift]),
                                  np.array([-shift])))
        return [cls(center, scale)], maps

    def features(self, xp):
        return ((xp - self.center_) / self.scale_)[:, None]

    def _export_form(self):
        return "affine", (self.center_, self.scale_)

    def sample(self, levels):
        return self.center_ + self.scale_ * ndtri(np.clip(levels, 1e-6, 1 - 1e-6))

    def difference(self, other, name):
        for key, what in (("center_", "mean"), ("scale_", "scale")):
            if _arrays_differ(getattr(self, key), getattr(other, key)):
                return (f"the {what} of column {name} differ (encoders fitted on different "
                        "rows)")
        return None


class QuantileNormalColumns(_NumericColumns):
    """``numeric_encoding="quantile_normal"``: the quantile transform to a
    standard normal, one feature.

    The state is the fitted
    :class:`~sklearn.preprocessing.QuantileTransformer` of the column
    (``quantile_transformers_[j]``; none, and no feature, for a column
    without present values), fitted on the pooled values of exact summaries
    only (a sketch is refused). Two transforms have no exact union
    (``Phi^-1(F_i(x))`` is no linear function of ``Phi^-1(F_k(x))``): the
    union keeps the distinct ones side by side.

    Parameters
    ----------
    transformer : QuantileTransformer or None
        Fitted on the column, with ``output_distribution="normal"``.

    See Also
    --------
    PiecewiseLinearColumns : The hat basis on quantile knots.
    """

    name = "quantile_normal"
    state_keys = ("quantile_transformers_",)
    sketched = True

    def __init__(self, transformer):
        self.transformer_ = transformer

    def state(self):
        return {"quantile_transformers_": self.transformer_}

    @classmethod
    def from_state(cls, state):
        return cls(state["quantile_transformers_"])

    @classmethod
    def fit(cls, parts, *, name, n_bins, max_categories):
        present = _merged_quantile_points(parts)
        if not present.size:
            return cls(None)
        qt = QuantileTransformer(
            output_distribution="normal", n_quantiles=min(1000, present.size),
            subsample=None,
        )
        return cls(qt.fit(present.reshape(-1, 1)))

    @classmethod
    def union(cls, columns, name):
        distinct, maps = [], []
        for c in columns:
            width = c.width
            if not width:
                maps.append(None)
                continue
            for k, d in enumerate(distinct):
                if d.difference(c, name) is None:
                    break
            else:
                k = len(distinct)
                distinct.append(c)
            maps.append(ColumnMap.plain(k, np.eye(width)))
        if not distinct:  # no encoding has features
            distinct = [columns[0]]
        width = distinct[0].width
        maps = [ColumnMap.plain(0, np.zeros((0, width))) if m is None else m for m in maps]
        return distinct, maps

    @property
    def width(self):
        return int(self.transformer_ is not None)

    def features(self, xp):
        return self._features_searched(xp, None)[0]

    def _features_searched(self, xp, edges):
        scores, bins = _quantile_table(self.transformer_, edges)(xp)
        return scores[:, None], bins

    def _export_form(self):
        return "quantile_normal", (self.transformer_,)

    def sample(self, levels):
        qt = self.transformer_
        if qt is None:
            return None
        q = np.asarray(qt.quantiles_, dtype=np.float64)[:, 0]
        return np.interp(levels, np.linspace(0.0, 1.0, q.size), q)

    def difference(self, other, name):
        qa, qb = self.transformer_, other.transformer_
        if (qa is None) != (qb is None) or (
            qa is not None and not np.array_equal(qa.quantiles_, qb.quantiles_)
        ):
            return (f"the quantiles of column {name} differ (encoders fitted on different "
                    "rows)")
        return None


class PiecewiseLinearColumns(_NumericColumns):
    """``numeric_encoding="piecewise_linear"``: the degree-1 B-spline ("hat")
    basis on the column's quantile knots, one feature per knot.

    The state is the column's distinct knots (``knots_[j]``; a column of
    fewer than two knots has no feature). A part's summary holds, besides
    its values or sketch, its distinct values when a sketch has at most
    ``n_bins + 1`` distinct quantiles and the column that many distinct
    values (``distinct``), so that the knots of a discrete column are exact.
    The union of such columns has the union of the knots: a parent's hat
    functions are piecewise linear with knots among the union's, so exactly
    their interpolants on the union's hat basis.

    Parameters
    ----------
    knots : ndarray
        The distinct knots, sorted.

    See Also
    --------
    QuantileNormalColumns : The quantile transform to a standard normal.
    """

    name = "piecewise_linear"
    state_keys = ("knots_",)
    uses_n_bins = True
    sketched = True

    def __init__(self, knots):
        self.knots_ = knots

    def __repr__(self):
        return f"PiecewiseLinearColumns(<{len(self.knots_)} knots>)"

    def state(self):
        return {"knots_": self.knots_}

    @classmethod
    def from_state(cls, state):
        return cls(state["knots_"])

    @classmethod
    def _sketch_extras(cls, entry, present, n_bins):
        if "quantiles" not in entry:
            return {}
        # more than n_bins + 1 distinct quantiles: more distinct values
        few = len(np.unique(entry["quantiles"])) <= n_bins + 1
        distinct = np.unique(present) if few else None
        return {"distinct": (distinct if distinct is not None
                             and len(distinct) <= n_bins + 1 else None)}

    @classmethod
    def fit(cls, parts, *, name, n_bins, max_categories):
        return cls(_merged_knots(parts, n_bins))

    @classmethod
    def union(cls, columns, name):
        used = [np.asarray(c.knots_) for c in columns if c.width]
        if used:
            knots = np.unique(np.concatenate(used))
        else:  # no encoder has features: the first one's knots (none or one)
            knots = columns[0].knots_
        union = cls(knots)
        maps = []
        for c in columns:
            if not c.width:
                maps.append(ColumnMap.plain(0, np.zeros((0, union.width))))
                continue
            # hat_t(x) = sum_u hat_t(k_u) hatU_u(x): row t holds hat_t at the union's knots
            maps.append(ColumnMap.plain(0, _hat_features(knots, c.knots_, np.float64).T.copy()))
        return [union], maps

    @property
    def width(self):
        k = len(self.knots_)
        return k if k >= 2 else 0

    def features(self, xp):
        return _hat_features(xp, self.knots_)

    def ramp(self):
        k = self.width
        return np.linspace(-1.0, 1.0, k) if k >= 2 else None

    def _export_form(self):
        return "hat", (self.knots_,)

    def feature_names(self, name, stacked=False):
        return [f"{name}_knot{t}" for t in range(self.width)]

    def sample(self, levels):
        # the knots are the distinct quantiles at evenly spaced levels: the quantile
        # function, approximately (a repeated quantile kept once)
        knots = np.asarray(self.knots_, dtype=np.float64)
        if not knots.size:
            return None
        return np.interp(levels, np.linspace(0.0, 1.0, knots.size), knots)

    def difference(self, other, name):
        if _arrays_differ(self.knots_, other.knots_):
            return (f"the quantile knots of column {name} differ (encoders fitted on "
                    "different rows)")
        return None


class OneHotColumns(ColumnEncoding):
    """The categorical columns' encoding: one-hot, with an "infrequent" feature.

    One feature per category among the ``max_categories`` most frequent
    ones (ties by sorted order), and one for all the others when the
    training data had more; a category unseen in ``fit`` is encoded in the
    infrequent feature when there is one, else as all zeros. A part's
    summary holds the count of every category (``keys``, ``counts``); the
    state is ``categories_[j]`` (sorted) and ``has_infrequent_[j]``. The
    union of such columns has the union of the categories, with an
    infrequent feature when a parent has one.

    Parameters
    ----------
    categories : ndarray of object
        The sorted categories with a feature.
    has_infrequent : bool
        Whether the column has the infrequent feature.

    See Also
    --------
    PiecewiseLinearColumns : An encoding of numeric columns.
    """

    name = "one_hot"
    state_keys = ("categories_", "has_infrequent_")

    def __init__(self, categories, has_infrequent):
        self.categories_ = categories
        self.has_infrequent_ = has_infrequent

    def __repr__(self):
        return (f"OneHotColumns(<{len(self.categories_)} categories>, "
                f"{bool(self.has_infrequent_)})")

    def state(self):
        return {"categories_": self.categories_, "has_infrequent_": self.has_infrequent_}

    @classmethod
    def from_state(cls, state):
        return cls(state["categories_"], state["has_infrequent_"])

    @classmethod
    def summarize(cls, values, name, *, n_bins, sketch_size, sketch=False):
        values = np.asarray(values, dtype=object)
        missing = missing_mask(values)
        present = values[~missing]
        keys, counts = _category_counts(present, name)
        return {"kind": "categorical", "has_missing": bool(missing.any()),
                "count": int(present.size), "keys": keys, "counts": counts}

    @classmethod
    def fit(cls, parts, *, name, n_bins, max_categories):
        keys, counts = _merge_counts(parts, name)
        return cls(*_categories_from_counts(keys, counts, max_categories))

    @classmethod
    def union(cls, columns, name):
        arrays = [np.asarray(c.categories_, dtype=object) for c in columns]
        try:
            categories = (np.unique(np.concatenate(arrays)).astype(object) if arrays
                          else np.empty(0, dtype=object))
        except (TypeError, ValueError) as exc:
            raise _uncomparable(name, exc) from exc
        union = cls(categories, any(bool(c.has_infrequent_) for c in columns))
        maps = []
        for c in columns:
            matrix = np.zeros((c.width, union.width))
            own = {v: i for i, v in enumerate(np.asarray(c.categories_).tolist())}
            fallback = len(own) if c.has_infrequent_ else -1
            for u, v in enumerate(categories.tolist()):
                i = own.get(v, fallback)
                if i >= 0:
                    matrix[i, u] = 1.0
            if union.has_infrequent_ and fallback >= 0:
                matrix[fallback, len(categories)] = 1.0
            maps.append(ColumnMap.plain(0, matrix))
        return [union], maps

    @property
    def width(self):
        return len(self.categories_) + int(self.has_infrequent_)

    def codes(self, values, name):
        """Return the feature of every value: its category's index.

        Parameters
        ----------
        values : ndarray of object
            Values of the column.
        name : str
            The column, for error messages.

        Returns
        -------
        codes : ndarray of int64
            The index of each value in ``categories_``; for any other value
            (a missing one included) the infrequent feature's index
            (``len(categories_)``) when the column has one, else -1.
        """
        categories = self.categories_
        fallback = len(categories) if self.has_infrequent_ else -1
        lookup = {c: i for i, c in enumerate(categories.tolist())}
        values = values.tolist()
        try:
            return np.fromiter((lookup.get(v, fallback) for v in values), dtype=np.int64,
                               count=len(values))
        except TypeError:  # an unhashable value, unseen in fit
            _check_hashable(values, name)
            raise

    def additive_rows(self, parent):
        """The additive rows of a union's categorical column: per row of this
        (the union's) block (its categories, its infrequent row, the missing
        row, the unseen row), the row of ``parent``'s block that its values
        reach there.

        Parameters
        ----------
        parent : OneHotColumns
            One of the columns this one is the union of.

        Returns
        -------
        rows : ndarray of int64
        """
        own = {c: i for i, c in enumerate(np.asarray(parent.categories_).tolist())}
        n_own = len(own)
        size = n_own + int(parent.has_infrequent_) + 2
        fallback = n_own if parent.has_infrequent_ else size - 1  # else: unseen
        rows = [own.get(c, fallback) for c in self.categories_.tolist()]
        if self.has_infrequent_:
            rows.append(fallback)
        rows += [size - 2, size - 1]  # missing, unseen
        return np.asarray(rows, dtype=np.int64)

    def transform(self, values, name, out):
        values = np.asarray(values, dtype=object)
        missing = missing_mask(values)
        present = np.flatnonzero(~missing)
        if present.size == 0 or self.width == 0:
            return missing
        idx = self.codes(values[present], name)
        hit = idx >= 0
        out[present[hit], idx[hit]] = 1.0
        return missing

    def export_form(self):
        return "one_hot", (len(self.categories_), self.has_infrequent_)

    def feature_names(self, name, stacked=False):
        names = [f"{name}={c}" for c in self.categories_]
        return names + [f"{name}=infrequent"] * int(bool(self.has_infrequent_))

    def sample(self, levels):
        # the categories (and one category that is none of them, for the infrequent
        # feature), equally often: the state keeps no counts
        values = list(self.categories_)
        if self.has_infrequent_ or not values:
            values.append(_UNSEEN_CATEGORY)
        picks = np.minimum((levels * len(values)).astype(np.int64), len(values) - 1)
        return np.asarray(values, dtype=object)[picks]

    def difference(self, other, name):
        ca, cb = self.categories_, other.categories_
        if (ca is None) != (cb is None) or (
            ca is not None and (len(ca) != len(cb) or list(ca) != list(cb))
        ):
            return f"the categories of column {name} differ"
        return None


#: The encodings of the numeric columns by ``numeric_encoding`` (the valid
#: values are its keys, in this order). Ordered, so that ``sampled_from`` and
#: parametrizations draw the names in a stable order.
NUMERIC_ENCODINGS = OrderedDict((kind.name, kind) for kind in (
    PiecewiseLinearColumns, QuantileNormalColumns, StandardColumns, NoneColumns))

#: The encoding of the categorical columns.
CATEGORICAL = OneHotColumns


class StackedColumns(_NumericColumns):
    """Several numeric encodings of one column side by side (a union encoder's).

    The column's features are the concatenation of its sub-encodings'
    features, each of another kind or fitted on other rows: e.g. the
    quantile transforms of two encoders fitted apart (no exact union of two
    quantile transforms exists, see :mod:`._common_encoding`), or the
    ``"standard"`` and ``"piecewise_linear"`` encodings of two models with
    different ``numeric_encoding``. A missing value gives zeros in every
    sub-block (and the column's one missing indicator, after them). Only
    :func:`~sktree_lmc.encoding._common_encoding.common_encoder` builds such columns:
    they are not fitted from data.

    The state is ``stacked_[j]``: the list of the sub-encodings, each a
    pair ``(kind name, state)`` of a numeric kind of :data:`COLUMN_KINDS`
    and its fitted state. The encoder has the attribute ``stacked_`` (a
    dict by column index) only when it has a stacked column.

    Parameters
    ----------
    parts : list of ColumnEncoding
        The sub-encodings, in the order of their blocks.

    See Also
    --------
    QuantileNormalColumns : The usual sub-encoding.
    """

    name = "stacked"
    state_keys = ("stacked_",)

    def __init__(self, parts):
        self.parts = list(parts)

    def __repr__(self):
        return f"StackedColumns({self.parts!r})"

    def state(self):
        return {"stacked_": [(part.name, part.state()) for part in self.parts]}

    @classmethod
    def from_state(cls, state):
        return cls([COLUMN_KINDS[str(kind)].from_state(dict(sub))
                    for kind, sub in state["stacked_"]])

    def sub_encodings(self):
        return list(self.parts)

    @classmethod
    def summarize(cls, values, name, *, n_bins, sketch_size, sketch=False):
        raise ValueError(f"Column {name} is a union of encodings; it is not fitted from data.")

    @classmethod
    def fit(cls, parts, *, name, n_bins, max_categories):
        raise ValueError(f"Column {name} is a union of encodings; it is not fitted from data.")

    @property
    def width(self):
        return sum(part.width for part in self.parts)

    def features(self, xp):
        blocks = [part.features(xp) for part in self.parts if part.width]
        return np.concatenate([np.asarray(b, dtype=np.float64) for b in blocks], axis=1)

    def _export_form(self):
        forms = [part.export_form() for part in self.parts]
        return "stack", ([form for form in forms if form[0] != "empty"],)

    def feature_names(self, name, stacked=False):
        # each sub-block's names, suffixed by its index
        return [f"{sub_name}_{i}" for i, part in enumerate(self.parts)
                for sub_name in part.feature_names(name, stacked=True)]

    def sample(self, levels):
        # the quantile function of the mixture of the sub-encodings' distributions, in
        # equal shares: increasing in the level, so that the levels of a copula
        # (probe_columns' joint draws) keep their order, as for the other kinds
        parts = [part for part in self.parts if part.width]
        if not parts:
            return None
        grid = np.linspace(0.0, 1.0, _STACKED_SAMPLE_LEVELS)
        quantiles = []
        for part in parts:
            values = part.sample(grid)
            if values is None:
                return None
            quantiles.append((1.0, np.maximum.accumulate(np.asarray(values, dtype=np.float64))))
        return mixture_quantiles(quantiles, np.asarray(levels, dtype=np.float64))

    def difference(self, other, name):
        pa, pb = self.parts, other.parts
        if [k.name for k in pa] != [k.name for k in pb] or any(
            a.difference(b, name) is not None for a, b in zip(pa, pb)
        ):
            return f"the stacked encodings of column {name} differ"
        return None


#: The encodings of a stacked column (:class:`StackedColumns`).
STACKED = StackedColumns

#: Every kind of column by name: the numeric encodings, the categorical one
#: (``"one_hot"``) and the stacked one, for an encoder's per-column kinds
#: (``TabularEncoder.column_kinds_``) and a stacked column's sub-encodings.
COLUMN_KINDS = OrderedDict(
    [*NUMERIC_ENCODINGS.items(), (CATEGORICAL.name, CATEGORICAL), (STACKED.name, STACKED)])


def union_column(columns, name):
    """The union of one column's encodings, each a parent's.

    Parameters
    ----------
    columns : list of ColumnEncoding
        The column's fitted encoding in every encoder.
    name : str
        The column, for error messages.

    Returns
    -------
    union : ColumnEncoding
        The union's encoding of the column: of one kind when every kind's
        union is one encoding, else a :class:`StackedColumns` of the kinds'
        unions (in order of first appearance).
    maps : list of list of ColumnMap
        Per parent, per sub-encoding of its column, how it reads the
        union's sub-encodings (``sub`` indexes ``union.sub_encodings()``).
    """
    subs = [column.sub_encodings() for column in columns]
    groups = {}  # kind name -> [(parent, sub-encoding)], in order of first appearance
    for i, parent in enumerate(subs):
        for p, part in enumerate(parent):
            groups.setdefault(part.name, []).append((i, p))
    union_parts, maps = [], [[None] * len(parent) for parent in subs]
    for kind, members in groups.items():
        parts, maps_of = COLUMN_KINDS[kind].union([subs[i][p] for i, p in members], name)
        for (i, p), m in zip(members, maps_of):
            maps[i][p] = m.shifted(len(union_parts))
        union_parts.extend(parts)
    union = union_parts[0] if len(union_parts) == 1 else StackedColumns(union_parts)
    return union, maps


def column_state_lists(columns):
    """The per-column state of an encoder's columns as ``TabularEncoder.to_dict``
    lays it out: one list (or dict by column index) per state key.

    Parameters
    ----------
    columns : list of ColumnEncoding
        The fitted columns.

    Returns
    -------
    state : dict
        ``has_infrequent_`` (an array of bool), ``knots_``, ``center_``,
        ``scale_`` and ``categories_`` (None for a column of another kind),
        ``quantile_transformers_`` (a column without a transformer has no
        entry) and, only with a stacked column, ``stacked_``.
    """
    n = len(columns)
    lists = {"has_infrequent_": np.zeros(n, dtype=bool), "knots_": [None] * n,
             "center_": [None] * n, "scale_": [None] * n, "categories_": [None] * n,
             "quantile_transformers_": {}}
    for j, column in enumerate(columns):
        for key, value in column.state().items():
            if key == "stacked_":
                lists.setdefault("stacked_", {})[j] = value
            elif key == "quantile_transformers_":
                if value is not None:
                    lists[key][j] = value
            else:
                lists[key][j] = value
    return lists


def columns_from_state_lists(state, kinds):
    """The fitted columns of :func:`column_state_lists`.

    Parameters
    ----------
    state : dict
        The per-column state lists (``TabularEncoder.to_dict`` entries).
    kinds : list of str
        Every column's kind, a name of :data:`COLUMN_KINDS`.

    Returns
    -------
    columns : list of ColumnEncoding
    """
    columns = []
    for j, name in enumerate(kinds):
        kind = COLUMN_KINDS[name]
        entries = {}
        for key in kind.state_keys:
            container = state.get(key, {})
            entries[key] = container.get(j) if isinstance(container, dict) else container[j]
        columns.append(kind.from_state(entries))
    return columns

"""The encodings of one input column: one small class per kind, in one table.

:class:`~sktree_lmc.encoding._encoding.TabularEncoder` turns every input column into
a contiguous block of features (its split features); how depends on the
column's kind: ``numeric_encoding`` for a numeric column
(:data:`NUMERIC_ENCODINGS`: ``"piecewise_linear"``, ``"quantile_normal"``,
``"standard"``, ``"none"``), the one-hot encoding (:data:`CATEGORICAL`) for a
categorical one. Each kind is a :class:`ColumnEncoding` object holding no
state: its methods compute, for one column, everything a code path of the
encoder consumes, from the column's fitted state (a dict of the encoder's
per-column attributes the kind owns, ``state_keys``: e.g. ``knots_[j]``):

- :meth:`~ColumnEncoding.summarize`: the column's entry of a summary
  (:func:`~sktree_lmc.encoding._encoding.summarize`);
- :meth:`~ColumnEncoding.fit`: its fitted state from the parts' summaries;
- :meth:`~ColumnEncoding.width`: its number of features (without the
  missing indicator);
- :meth:`~ColumnEncoding.transform`: its features, written into its block;
- :meth:`~ColumnEncoding.ramp`, :meth:`~ColumnEncoding.export_form` and
  :meth:`~ColumnEncoding.difference`: what the estimators' start on ramps,
  the exported torch module and the comparison of two encoders need.

A union of encoders fitted on different rows
(:func:`~sktree_lmc.encoding._common_encoding.common_encoder`) may also hold a
:class:`StackedColumns` column: several numeric encodings of the column
side by side. Every kind is in :data:`COLUMN_KINDS`, by name.

The encoder loops over its columns and calls each column's kind; the kinds
keep the fitted state where :meth:`TabularEncoder.to_dict` has always had it
(per-column lists ``knots_``, ``center_``, ``scale_``, ``categories_``, the
array ``has_infrequent_`` and the dict ``quantile_transformers_``), so that
its layout does not depend on this code's structure.

The module also reads a raw column as numbers (:func:`_numeric`, missing
values as NaN) and merges the parts' quantile sketches
(:func:`_mixture_quantiles`), for the encodings and for the additive term's
bins (:mod:`._additive_bins`).
"""

from __future__ import annotations

import datetime
import weakref
from collections import OrderedDict

import numpy as np
from scipy import stats
from scipy.special import ndtri
from sklearn.preprocessing import QuantileTransformer

__all__ = ["CATEGORICAL", "COLUMN_KINDS", "NUMERIC_ENCODINGS", "STACKED", "ColumnEncoding",
           "NoneColumns", "OneHotColumns", "PiecewiseLinearColumns", "QuantileNormalColumns",
           "StackedColumns", "StandardColumns", "empty_column_state", "sketch_entries"]


#: Values of an object column that are not numbers although ``float()`` of
#: some of them succeeds (a NumPy datetime64 gives a count of its unit): a
#: numeric column holding them is an error, not a silent conversion.
_NOT_NUMBERS = (datetime.date, datetime.time, datetime.timedelta, np.datetime64,
                np.timedelta64)

#: Sub-second units of datetime64 and timedelta64 and their ticks per second.
_TICKS_PER_SECOND = {"ms": 10**3, "us": 10**6, "ns": 10**9, "ps": 10**12, "fs": 10**15,
                     "as": 10**18}


def _missing_mask(values):
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



def _time_seconds(values, name):
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
    missing = _missing_mask(values)
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


def _numeric(values, name):
    """A column as float64 with missing values (NaN, None, NaT...) as NaN; a
    datetime64 or timedelta64 column as seconds (:func:`_time_seconds`);
    infinity and values that are not numbers are errors."""
    if values.dtype != np.float64:
        if values.dtype.kind in "Mm":
            values = _time_seconds(values, name)
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


def _column_name(names, j):
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


def _mixture_quantiles(parts, levels):
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


def _sketches(parts):
    """``(count, sorted sample of the quantile function)`` of every part, for
    :func:`_mixture_quantiles`: its values, or its sketched quantiles."""
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
    return np.unique(_mixture_quantiles(_sketches(parts), np.linspace(0.0, 1.0, n_bins + 1)))


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
    return _mixture_quantiles(_sketches(parts), np.linspace(0.0, 1.0, min(1000, total)))




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


def empty_column_state(n_columns):
    """The per-column state attributes of an encoder of ``n_columns`` columns,
    before any column is fitted: what every kind's ``state_keys`` name.

    Parameters
    ----------
    n_columns : int

    Returns
    -------
    state : dict
        ``has_infrequent_`` (all False), ``knots_``, ``center_``, ``scale_``
        and ``categories_`` (None for every column) and
        ``quantile_transformers_`` (empty: a column without a transformer
        has no entry).
    """
    return {"has_infrequent_": np.zeros(n_columns, dtype=bool),
            "knots_": [None] * n_columns, "center_": [None] * n_columns,
            "scale_": [None] * n_columns, "categories_": [None] * n_columns,
            "quantile_transformers_": {}}


def _arrays_differ(x, y):
    """Whether two optional arrays differ (one None, or other values)."""
    return (x is None) != (y is None) or (
        x is not None and not np.array_equal(np.asarray(x), np.asarray(y)))


class ColumnEncoding:
    """One kind of per-column encoding: the base of the kinds.

    A kind holds no state: the fitted state of a column is the dict of the
    encoder's attributes that the kind owns (``state_keys``), at the
    column's index, which :meth:`state` reads and :meth:`store` writes. The
    other methods are what one code path of
    :class:`~sktree_lmc.encoding._encoding.TabularEncoder` needs of a column.

    Attributes
    ----------
    name : str
        The kind's name (``numeric_encoding`` for the numeric kinds).
    state_keys : tuple of str
        The encoder attributes (entries of ``TabularEncoder.to_dict``)
        holding the state of a column of this kind, one entry per column.
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

    def state(self, encoder, j):
        """Return the fitted state of column ``j`` of ``encoder``.

        Parameters
        ----------
        encoder : TabularEncoder
            A fitted encoder.
        j : int
            The column.

        Returns
        -------
        state : dict
            ``state_keys`` to the column's entries (None for a column
            without an entry in a dict attribute).
        """
        out = {}
        for key in self.state_keys:
            container = getattr(encoder, key)
            out[key] = container.get(j) if isinstance(container, dict) else container[j]
        return out

    def store(self, encoder, j, state):
        """Write the fitted state of column ``j`` into ``encoder``'s attributes.

        Parameters
        ----------
        encoder : TabularEncoder
            The encoder being fitted (its attributes of
            :func:`empty_column_state` exist).
        j : int
            The column.
        state : dict
            :meth:`fit`'s state of the column. A None value is no entry in
            a dict attribute.
        """
        for key, value in state.items():
            container = getattr(encoder, key)
            if not isinstance(container, dict):
                container[j] = value
            elif value is not None:
                container[j] = value

    def summarize(self, values, name, *, n_bins, sketch_size, sketch=False):
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

    def fit(self, parts, *, name, n_bins, max_categories):
        """Return the fitted state of a column from its parts' summary entries.

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
        state : dict
            ``state_keys`` to the column's fitted values.
        """
        return {}

    def width(self, state):
        """Return the number of the column's features (no missing indicator).

        Parameters
        ----------
        state : dict
            The column's fitted state.

        Returns
        -------
        width : int
        """
        return 1

    def transform(self, state, values, name, out):
        """Encode rows of the column into its block of features.

        Parameters
        ----------
        state : dict
            The column's fitted state.
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

    def check(self, values, name):
        """Raise the errors :meth:`transform` would raise on ``values``,
        without encoding them (prediction skips the encoding of a column no
        split uses, but not its checks).

        Returns
        -------
        checked : bool
            False when the kind cannot check without encoding.
        """
        return False

    def ramp(self, state):
        """Return the linear ramp over the column's features, or None.

        Parameters
        ----------
        state : dict
            The column's fitted state.

        Returns
        -------
        ramp : ndarray of shape (width,) or None
            From -1 to 1 over the knots of a piecewise-linear column; None
            for the other kinds (and a column of fewer than two knots).
        """
        return None

    def export_form(self, state):
        """Return how the exported torch module encodes the column.

        Parameters
        ----------
        state : dict
            The column's fitted state.

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

    def difference(self, a, b, name):
        """Return a sentence saying how two fitted states of a column differ.

        Parameters
        ----------
        a, b : dict
            The column's fitted state in two encoders of the same settings.
        name : str
            The column, for the sentence.

        Returns
        -------
        sentence : str or None
            None when they are equal.
        """
        return None

    def sample(self, state, levels):
        """Values of the column drawn from its fitted distribution.

        The fitted state is a summary of the training values (quantiles,
        knots, moments, categories), so values at the quantile ``levels``
        of that summary are a sample of the column's marginal distribution
        without the rows: the probe rows of merge diagnostics and the
        feature scales of weight matching
        (:func:`~sktree_lmc.encoding._common_encoding.probe_columns`).

        Parameters
        ----------
        state : dict
            The column's fitted state.
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


class _NumericColumns(ColumnEncoding):
    """The numeric kinds' summary and transform: missing values are NaN, the
    features of the present values come from :meth:`features`."""

    #: Whether the summary always holds the values or sketch (the quantile kinds).
    sketched = False

    def summarize(self, values, name, *, n_bins, sketch_size, sketch=False):
        x = _numeric(np.asarray(values), name)
        missing = np.isnan(x)
        present = x[~missing] if missing.any() else x
        entry = {"kind": "numeric", "has_missing": bool(missing.any()),
                 "count": int(present.size)}
        entry.update(self._statistics(present))
        if self.sketched or sketch:
            entry.update(sketch_entries(present, sketch_size))
        entry.update(self._sketch_extras(entry, present, n_bins))
        return entry

    def _statistics(self, present):
        """Summary entries of the kind computed on the present values."""
        return {}

    def _sketch_extras(self, entry, present, n_bins):
        """Summary entries of the kind that depend on the sketch."""
        return {}

    def check(self, values, name):
        _numeric(np.asarray(values), name)
        return True

    def transform(self, state, values, name, out):
        return self.transform_searched(state, values, name, out, None)[0]

    def transform_searched(self, state, values, name, out, edges):
        """:meth:`transform`, and the bins of the values in ``edges`` when the
        kind finds them in the same search as its features.

        Parameters
        ----------
        state, values, name, out
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
        x = _numeric(np.asarray(values), name)
        missing = np.isnan(x)
        if out.shape[1] == 0:
            return missing, None
        if not missing.any():  # slices, not masks
            out[:], bins = self._features_searched(state, x, edges)
            return missing, bins
        present = ~missing
        if not present.any():  # all missing (at predict time): zeros, as any missing value
            return missing, None
        out[present], found = self._features_searched(state, x[present], edges)
        if found is None:
            return missing, None
        bins = np.zeros(len(x), dtype=np.intp)
        bins[present] = found
        return missing, bins

    def _features_searched(self, state, xp, edges):
        """:meth:`features`, and the bins of ``xp`` in ``edges`` where the
        kind finds them in the same search (None otherwise)."""
        return self.features(state, xp), None

    def features(self, state, xp):
        """Return the features of present values.

        Parameters
        ----------
        state : dict
            The column's fitted state.
        xp : ndarray of float64 of shape (n,)
            Present values (no NaN).

        Returns
        -------
        features : ndarray of shape (n, width)
        """
        return xp[:, None]

    def export_form(self, state):
        if self.width(state) == 0:
            return "empty", ()
        return self._export_form(state)

    def _export_form(self, state):
        return "affine", (0.0, 1.0)


class NoneColumns(_NumericColumns):
    """``numeric_encoding="none"``: the value itself, one feature.

    Missing values are zeros (and the missing indicator). It has no fitted
    state.

    See Also
    --------
    StandardColumns : ``(x - mean) / std``.
    """

    name = "none"
    identity = True


class StandardColumns(_NumericColumns):
    """``numeric_encoding="standard"``: ``(x - mean) / std``, one feature.

    The summary of a part holds its mean and sum of squared deviations
    (``mean``, ``m2``), merged exactly (Chan et al.'s pairwise update); the
    state is ``center_`` and ``scale_`` (a scale of 0 or not finite is 1).

    See Also
    --------
    NoneColumns : The value itself.
    """

    name = "standard"
    state_keys = ("center_", "scale_")

    def _statistics(self, present):
        mean = float(present.mean()) if present.size else 0.0
        m2 = float(((present - mean) ** 2).sum()) if present.size else 0.0
        return {"mean": mean, "m2": m2}

    def fit(self, parts, *, name, n_bins, max_categories):
        center, scale = _merged_moments(parts)
        return {"center_": center, "scale_": scale}

    def features(self, state, xp):
        return ((xp - state["center_"]) / state["scale_"])[:, None]

    def _export_form(self, state):
        return "affine", (state["center_"], state["scale_"])

    def sample(self, state, levels):
        return state["center_"] + state["scale_"] * ndtri(np.clip(levels, 1e-6, 1 - 1e-6))

    def difference(self, a, b, name):
        for key, what in (("center_", "mean"), ("scale_", "scale")):
            if _arrays_differ(a[key], b[key]):
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
    only (a sketch is refused).

    See Also
    --------
    PiecewiseLinearColumns : The hat basis on quantile knots.
    """

    name = "quantile_normal"
    state_keys = ("quantile_transformers_",)
    sketched = True

    def fit(self, parts, *, name, n_bins, max_categories):
        present = _merged_quantile_points(parts)
        if not present.size:
            return {"quantile_transformers_": None}
        qt = QuantileTransformer(
            output_distribution="normal", n_quantiles=min(1000, present.size),
            subsample=None,
        )
        return {"quantile_transformers_": qt.fit(present.reshape(-1, 1))}

    def width(self, state):
        return int(state["quantile_transformers_"] is not None)

    def features(self, state, xp):
        return self._features_searched(state, xp, None)[0]

    def _features_searched(self, state, xp, edges):
        scores, bins = _quantile_table(state["quantile_transformers_"], edges)(xp)
        return scores[:, None], bins

    def _export_form(self, state):
        return "quantile_normal", (state["quantile_transformers_"],)

    def sample(self, state, levels):
        qt = state["quantile_transformers_"]
        if qt is None:
            return None
        q = np.asarray(qt.quantiles_, dtype=np.float64)[:, 0]
        return np.interp(levels, np.linspace(0.0, 1.0, q.size), q)

    def difference(self, a, b, name):
        qa, qb = a["quantile_transformers_"], b["quantile_transformers_"]
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

    See Also
    --------
    QuantileNormalColumns : The quantile transform to a standard normal.
    """

    name = "piecewise_linear"
    state_keys = ("knots_",)
    uses_n_bins = True
    sketched = True

    def _sketch_extras(self, entry, present, n_bins):
        if "quantiles" not in entry:
            return {}
        # more than n_bins + 1 distinct quantiles: more distinct values
        few = len(np.unique(entry["quantiles"])) <= n_bins + 1
        distinct = np.unique(present) if few else None
        return {"distinct": (distinct if distinct is not None
                             and len(distinct) <= n_bins + 1 else None)}

    def fit(self, parts, *, name, n_bins, max_categories):
        return {"knots_": _merged_knots(parts, n_bins)}

    def width(self, state):
        k = len(state["knots_"])
        return k if k >= 2 else 0

    def features(self, state, xp):
        return _hat_features(xp, state["knots_"])

    def ramp(self, state):
        k = self.width(state)
        return np.linspace(-1.0, 1.0, k) if k >= 2 else None

    def _export_form(self, state):
        return "hat", (state["knots_"],)

    def sample(self, state, levels):
        # the knots are the distinct quantiles at evenly spaced levels: the quantile
        # function, approximately (a repeated quantile kept once)
        knots = np.asarray(state["knots_"], dtype=np.float64)
        if not knots.size:
            return None
        return np.interp(levels, np.linspace(0.0, 1.0, knots.size), knots)

    def difference(self, a, b, name):
        if _arrays_differ(a["knots_"], b["knots_"]):
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
    state is ``categories_[j]`` (sorted) and ``has_infrequent_[j]``.

    See Also
    --------
    PiecewiseLinearColumns : An encoding of numeric columns.
    """

    name = "one_hot"
    state_keys = ("categories_", "has_infrequent_")

    def summarize(self, values, name, *, n_bins, sketch_size, sketch=False):
        values = np.asarray(values, dtype=object)
        missing = _missing_mask(values)
        present = values[~missing]
        keys, counts = _category_counts(present, name)
        return {"kind": "categorical", "has_missing": bool(missing.any()),
                "count": int(present.size), "keys": keys, "counts": counts}

    def fit(self, parts, *, name, n_bins, max_categories):
        keys, counts = _merge_counts(parts, name)
        categories, infrequent = _categories_from_counts(keys, counts, max_categories)
        return {"categories_": categories, "has_infrequent_": infrequent}

    def width(self, state):
        return len(state["categories_"]) + int(state["has_infrequent_"])

    def codes(self, state, values, name):
        """Return the feature of every value: its category's index.

        Parameters
        ----------
        state : dict
            The column's fitted state.
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
        categories = state["categories_"]
        fallback = len(categories) if state["has_infrequent_"] else -1
        lookup = {c: i for i, c in enumerate(categories.tolist())}
        values = values.tolist()
        try:
            return np.fromiter((lookup.get(v, fallback) for v in values), dtype=np.int64,
                               count=len(values))
        except TypeError:  # an unhashable value, unseen in fit
            _check_hashable(values, name)
            raise

    def transform(self, state, values, name, out):
        values = np.asarray(values, dtype=object)
        missing = _missing_mask(values)
        present = np.flatnonzero(~missing)
        if present.size == 0 or self.width(state) == 0:
            return missing
        idx = self.codes(state, values[present], name)
        hit = idx >= 0
        out[present[hit], idx[hit]] = 1.0
        return missing

    def export_form(self, state):
        return "one_hot", (len(state["categories_"]), state["has_infrequent_"])

    def sample(self, state, levels):
        # the categories (and one category that is none of them, for the infrequent
        # feature), equally often: the state keeps no counts
        values = list(state["categories_"])
        if state["has_infrequent_"] or not values:
            values.append(_UNSEEN_CATEGORY)
        picks = np.minimum((levels * len(values)).astype(np.int64), len(values) - 1)
        return np.asarray(values, dtype=object)[picks]

    def difference(self, a, b, name):
        ca, cb = a["categories_"], b["categories_"]
        if (ca is None) != (cb is None) or (
            ca is not None and (len(ca) != len(cb) or list(ca) != list(cb))
        ):
            return f"the categories of column {name} differ"
        return None


#: The encodings of the numeric columns by ``numeric_encoding`` (the valid
#: values are its keys, in this order). Ordered, so that ``sampled_from`` and
#: parametrizations draw the names in a stable order.
NUMERIC_ENCODINGS = OrderedDict((kind.name, kind) for kind in (
    PiecewiseLinearColumns(), QuantileNormalColumns(), StandardColumns(), NoneColumns()))

#: The encoding of the categorical columns.
CATEGORICAL = OneHotColumns()


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
    and its fitted state (the dict its ``state_keys`` name). The encoder has
    the attribute ``stacked_`` (a dict by column index) only when it has a
    stacked column.

    See Also
    --------
    QuantileNormalColumns : The usual sub-encoding.
    """

    name = "stacked"
    state_keys = ("stacked_",)

    def state(self, encoder, j):
        return {"stacked_": getattr(encoder, "stacked_", {}).get(j, [])}

    def store(self, encoder, j, state):
        if "stacked_" not in vars(encoder):
            encoder.stacked_ = {}
        encoder.stacked_[j] = [(str(kind), dict(sub)) for kind, sub in state["stacked_"]]

    @staticmethod
    def parts(state):
        """Return the sub-encodings of a stacked column.

        Parameters
        ----------
        state : dict
            The column's fitted state.

        Returns
        -------
        parts : list of (ColumnEncoding, dict)
            Every sub-encoding's kind and state, in the order of its block.
        """
        return [(COLUMN_KINDS[kind], sub) for kind, sub in state["stacked_"]]

    def summarize(self, values, name, *, n_bins, sketch_size, sketch=False):
        raise ValueError(f"Column {name} is a union of encodings; it is not fitted from data.")

    def fit(self, parts, *, name, n_bins, max_categories):
        raise ValueError(f"Column {name} is a union of encodings; it is not fitted from data.")

    def width(self, state):
        return sum(kind.width(sub) for kind, sub in self.parts(state))

    def features(self, state, xp):
        blocks = [kind.features(sub, xp) for kind, sub in self.parts(state) if kind.width(sub)]
        return np.concatenate([np.asarray(b, dtype=np.float64) for b in blocks], axis=1)

    def _export_form(self, state):
        forms = [kind.export_form(sub) for kind, sub in self.parts(state)]
        return "stack", ([form for form in forms if form[0] != "empty"],)

    def sample(self, state, levels):
        # a mixture of the sub-encodings' distributions, in equal shares
        parts = [(kind, sub) for kind, sub in self.parts(state) if kind.width(sub)]
        if not parts:
            return None
        scaled = levels * len(parts)
        which = np.minimum(scaled.astype(np.int64), len(parts) - 1)
        out = np.zeros(levels.shape)
        for i, (kind, sub) in enumerate(parts):
            values = kind.sample(sub, scaled[which == i] - i)
            if values is None:
                return None
            out[which == i] = values
        return out

    def difference(self, a, b, name):
        pa, pb = self.parts(a), self.parts(b)
        if [k.name for k, _ in pa] != [k.name for k, _ in pb] or any(
            ka.difference(sa, sb, name) is not None for (ka, sa), (_, sb) in zip(pa, pb)
        ):
            return f"the stacked encodings of column {name} differ"
        return None


#: The encodings of a stacked column (:class:`StackedColumns`).
STACKED = StackedColumns()

#: Every kind of column by name: the numeric encodings, the categorical one
#: (``"one_hot"``) and the stacked one, for an encoder's per-column kinds
#: (``TabularEncoder.column_kinds_``) and a stacked column's sub-encodings.
COLUMN_KINDS = OrderedDict(
    [*NUMERIC_ENCODINGS.items(), (CATEGORICAL.name, CATEGORICAL), (STACKED.name, STACKED)])

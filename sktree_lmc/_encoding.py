"""Input encoding of the estimators: raw tabular columns in, float32 features out.

A soft split is ``sigmoid(w . x + b)``: linear in its inputs. On raw features
it therefore depends on their scale (a column in the thousands saturates every
sigmoid at initialization) and can only threshold one direction of each
feature. The encoder fitted inside ``fit`` (``encoder_``) turns every column
into features that a linear split uses well, and handles what a tabular user
passes without preparing it:

- **numeric columns**, by ``numeric_encoding``:

  - ``"piecewise_linear"``: the degree-1 B-spline ("hat") basis on quantile
    knots, the piecewise-linear encoding of Gorishniy et al. (2022, "On
    Embeddings for Numerical Features in Tabular Deep Learning"): with knots
    ``k_0 < ... < k_T`` (unique quantiles of the column), column ``t`` is the
    hat function that is 1 at ``k_t`` and 0 at its neighbours; a value is
    first clipped to ``[k_0, k_T]``. A split then thresholds any
    piecewise-linear function of the value with those knots, not just the
    value itself. It is what ``sklearn.preprocessing.SplineTransformer(degree=1,
    knots=..., extrapolation="constant")`` computes (tested), written here
    because SplineTransformer needs the same number of distinct knots in every
    column (a discrete column has fewer distinct quantiles), rejects NaN, and
    because the encoder must be plain arrays, so that two models' encoders can
    be compared before merging and exported with the model;
  - ``"quantile_normal"``: the quantile transform to a standard normal
    (:class:`~sklearn.preprocessing.QuantileTransformer`), as in the paper's
    protocol;
  - ``"standard"``: ``(x - mean) / std``;
  - ``"none"``: the value itself (the paper's protocol, with its external
    preprocessing).

- **categorical columns** (``categorical_features``, in
  :class:`~sklearn.ensemble.HistGradientBoostingClassifier`'s style): one-hot,
  one column per category among the ``max_categories`` most frequent ones
  (ties by sorted order), and one "infrequent" column for all the others when
  the training data had more. A category unseen in ``fit`` is encoded in the
  infrequent column when there is one, else as all zeros (like a category the
  model never distinguishes).
- **date and time columns** (NumPy ``datetime64`` and ``timedelta64``, pandas
  datetime columns, tz-aware ones in UTC, and time deltas) are numeric: seconds
  since the epoch (1970-01-01) or seconds, the same floats whatever the unit
  (``[ns]`` or pandas 3's ``[us]``). Objects that are not numbers in a numeric
  column (``datetime.date``, pandas ``Period``, lists...) are an error that
  names the column; convert them (e.g. ``pd.to_datetime``) or declare the
  column categorical.
- **missing values** (``NaN``, ``None``, ``pd.NA``, ``NaT``) in any column:
  the column's features are 0 and a missing-indicator feature is 1. The
  indicator exists for the columns that had missing values in ``fit``; a value
  missing at prediction time in another column is encoded as zeros only.
  Infinite values are an error.

Every input column owns a contiguous range of the output features
(``feature_groups_``), so that a per-tree feature subset (``max_features``)
selects input columns with all their features.

**Fitting from summaries.** :meth:`TabularEncoder.fit` is
:meth:`TabularEncoder.from_summaries` of one exact :func:`summarize` of the
columns; an encoder for data that is never gathered in one place (the
partitions of a dask collection) is fitted the same way from one summary per
part, each computed where its rows live (:func:`summarize` with a
``sketch_size``). A summary holds, per column: the count of present values and
whether some are missing; for a categorical column the count of every
category; for a numeric one, by ``numeric_encoding``, its mean and sum of
squared deviations (``"standard"``, merged exactly with Chan et al.'s
pairwise update), its present values (``"quantile_normal"``, exact summaries
only), or for ``"piecewise_linear"`` its distinct values when it has at most
``n_bins + 1`` of them and either its present values (at most
``sketch_size`` of them) or a quantile sketch: the values at ``sketch_size``
evenly spaced quantile levels (exact minimum and maximum included). The
merged categories, missing-value flags, means and scales and the knots of
discrete columns are exact; when every part sent its values the knots are
exact too; otherwise they are the quantiles of the count-weighted mixture of
the parts' piecewise-linear quantile functions (a few thousandths of a
quantile level off for 1,001-level sketches, see the tests). Rows of zero
``sample_weight`` are left out of the fit and of the summaries; the other rows
count once each.
"""

from __future__ import annotations

import copy
import datetime
import math

import numpy as np
from sklearn.preprocessing import QuantileTransformer
from sklearn.utils.validation import check_array

__all__ = ["NUMERIC_ENCODINGS", "SKETCH_SIZE", "TabularEncoder", "check_categorical_features",
           "encoders_differ", "summarize", "to_columns", "union_additive_bins"]

#: The values of ``numeric_encoding``.
NUMERIC_ENCODINGS = ("piecewise_linear", "quantile_normal", "standard", "none")

#: Rows encoded at once by :meth:`TabularEncoder.transform_chunks`: the encoded
#: chunk (rows x features, float32) then stays in the order of 10-100 MB.
ENCODE_CHUNK_ROWS = 16384

#: Quantile levels of the sketch of a numeric column in :func:`summarize` (a
#: part with at most this many present values sends them instead).
SKETCH_SIZE = 1001

#: The largest ``additive_bins`` (bins per numeric column and resolution), as
#: the estimators' constraint on a single int.
MAX_ADDITIVE_BINS = 2**16

#: Values of an object column that are not numbers although ``float()`` of
#: some of them succeeds (a NumPy datetime64 gives a count of its unit): a
#: numeric column holding them is an error, not a silent conversion.
_NOT_NUMBERS = (datetime.date, datetime.time, datetime.timedelta, np.datetime64,
                np.timedelta64)

#: Sub-second units of datetime64 and timedelta64 and their ticks per second.
_TICKS_PER_SECOND = {"ms": 10**3, "us": 10**6, "ns": 10**9, "ps": 10**12, "fs": 10**15,
                     "as": 10**18}


def _is_dataframe(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


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


def _is_string_like(v):
    return isinstance(v, (str, bytes, np.str_))


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
        raise ValueError(
            f"Column {name} is numeric but holds a value that is not a number ({what}); {hint}"
        )
    out[~missing] = converted
    return out


def to_columns(X):
    """Split ``X`` into a list of 1-D column arrays, with their default kinds.

    Parameters
    ----------
    X : array-like or pandas DataFrame of shape (n_samples, n_features)

    Returns
    -------
    columns : list of ndarray
        Float64 arrays (missing as NaN) for numeric columns, object arrays
        otherwise.
    categorical : ndarray of bool
        The columns that are categorical by dtype: a pandas ``category``,
        ``object``, ``string`` or ``bool``-free non-numeric column; in a NumPy
        object array, a column holding strings.
    """
    if _is_dataframe(X):
        # check_array's errors for an empty frame: with no column, the encoded
        # rows would have no length and the sample count would be lost
        if X.shape[0] < 1:
            raise ValueError(
                f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is "
                "required."
            )
        if X.shape[1] < 1:
            raise ValueError(
                f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is "
                "required."
            )
        columns, categorical = [], []
        for j in range(X.shape[1]):
            series = X.iloc[:, j]
            dtype = series.dtype
            kind = getattr(dtype, "kind", "O")
            name = str(dtype)
            if name == "category" or kind in "OSU" or name.startswith("string"):
                values = series.to_numpy(dtype=object)
                if name == "category":
                    columns.append(values)
                    categorical.append(True)
                    continue
                columns.append(values)
                categorical.append(any(_is_string_like(v) for v in values))
            elif kind == "c":
                raise ValueError("Complex data not supported.")
            elif kind in "Mm":  # datetimes (tz-aware ones in UTC) and time deltas: seconds
                if kind == "M" and getattr(series.dt, "tz", None) is not None:
                    series = series.dt.tz_convert(None)  # also pyarrow's timestamps
                values = series.to_numpy()
                label = f"{str(X.columns[j])!r}"
                if values.dtype.kind not in "Mm":  # pragma: no cover - pandas gives NumPy's
                    raise ValueError(f"Column {label} of dtype {dtype} does not convert to "
                                     "NumPy's datetime64 or timedelta64.")
                columns.append(_time_seconds(values, label))
                categorical.append(False)
            else:
                try:
                    columns.append(series.to_numpy(dtype=np.float64, na_value=np.nan))
                except (TypeError, ValueError):
                    columns.append(series.to_numpy(dtype=object))
                categorical.append(False)
        return columns, np.asarray(categorical, dtype=bool)
    X = check_array(
        X, dtype=None, ensure_all_finite=False, accept_sparse=False, ensure_2d=True
    )
    if X.dtype.kind in "biuf":
        X = X.astype(np.float64, copy=False)
        return [X[:, j] for j in range(X.shape[1])], np.zeros(X.shape[1], dtype=bool)
    if X.dtype.kind in "Mm":
        return ([_time_seconds(X[:, j], f"{j}") for j in range(X.shape[1])],
                np.zeros(X.shape[1], dtype=bool))
    if X.dtype.kind in "SU":
        X = X.astype(object)
    columns = [X[:, j] for j in range(X.shape[1])]
    categorical = np.array([any(_is_string_like(v) for v in c) for c in columns], dtype=bool)
    return columns, categorical


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


def check_categorical_features(categorical_features, n_features, feature_names, by_dtype):
    """The boolean mask of categorical columns, HistGradientBoosting-style.

    Parameters
    ----------
    categorical_features : "from_dtype", None, or array-like of int, bool or str
        ``"from_dtype"``: the columns that are categorical by dtype
        (``by_dtype``); ``None``: none; indices, a boolean mask of length
        ``n_features``, or feature names (``X`` must be a DataFrame).
    n_features : int
    feature_names : ndarray of str or None
    by_dtype : ndarray of bool

    Returns
    -------
    mask : ndarray of bool of shape (n_features,)
    """
    if categorical_features is None:
        return np.zeros(n_features, dtype=bool)
    if isinstance(categorical_features, str):
        if categorical_features != "from_dtype":
            raise ValueError(
                "categorical_features must be 'from_dtype', None, or an array-like of "
                f"indices, booleans or feature names, got {categorical_features!r}."
            )
        return np.asarray(by_dtype, dtype=bool)
    values = np.asarray(categorical_features)
    if values.ndim != 1:
        raise ValueError("categorical_features must be one-dimensional.")
    if values.size == 0:
        return np.zeros(n_features, dtype=bool)
    if values.dtype.kind == "b":
        if values.size != n_features:
            raise ValueError(
                f"categorical_features as a boolean mask must have length {n_features} (the "
                f"number of features), got {values.size}."
            )
        return values.copy()
    if values.dtype.kind in "iu":
        if values.min() < -n_features or values.max() >= n_features:
            raise ValueError(
                f"categorical_features holds indices outside [0, {n_features - 1}]: "
                f"{values.tolist()}."
            )
        mask = np.zeros(n_features, dtype=bool)
        mask[values] = True
        return mask
    if values.dtype.kind in "OU":
        if feature_names is None:
            raise ValueError(
                "categorical_features names columns, but X has no feature names (pass a "
                "pandas DataFrame)."
            )
        names = list(feature_names)
        missing = [v for v in values if v not in names]
        if missing:
            raise ValueError(
                f"categorical_features names columns that X does not have: {missing}."
            )
        mask = np.zeros(n_features, dtype=bool)
        mask[[names.index(v) for v in values]] = True
        return mask
    raise ValueError(
        "categorical_features must be 'from_dtype', None, or an array-like of indices, "
        f"booleans or feature names, got dtype {values.dtype}."
    )


def _hat_features(x, knots):
    """Degree-1 B-spline basis on ``knots`` (unique, sorted) of ``x`` (no NaN),
    shape ``(len(x), len(knots))``; a single knot gives no feature."""
    T = len(knots)
    if T < 2:
        return np.zeros((len(x), 0), dtype=np.float32)
    xc = np.clip(x, knots[0], knots[-1])
    # the interval [k_i, k_{i+1}] that holds each value (the last one closed)
    i = np.clip(np.searchsorted(knots, xc, side="right") - 1, 0, T - 2)
    t = (xc - knots[i]) / (knots[i + 1] - knots[i])
    out = np.zeros((len(x), T), dtype=np.float32)
    rows = np.arange(len(x))
    out[rows, i] = 1.0 - t
    out[rows, i + 1] += t
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


def summarize(columns, categorical, *, numeric_encoding="piecewise_linear", n_bins=16,
              sketch_size=None, names=None, additive_bins=None, sample_weight=None):
    """What :meth:`TabularEncoder.from_summaries` needs of some rows' columns.

    Run where the rows live (a dask worker, for its partitions); the summary
    is small: per column a few numbers, the counts of the categories, and for
    ``"piecewise_linear"`` at most ``sketch_size`` values.

    Parameters
    ----------
    columns : list of ndarray
        The column arrays of :func:`to_columns`.
    categorical : ndarray of bool
        Which columns are categorical (the same mask for every part).
    numeric_encoding : {"piecewise_linear", "quantile_normal", "standard", "none"}
    n_bins : int
        The encoder's ``n_bins``: a numeric column with at most ``n_bins + 1``
        distinct values sends them (its knots are then exact).
    sketch_size : int >= 2 or None, default=None
        None: an exact summary (the present values of the numeric columns,
        for :meth:`TabularEncoder.fit`). An int: a numeric column with more
        present values sends its values at ``sketch_size`` evenly spaced
        quantile levels instead (``SKETCH_SIZE`` = 1,001 levels: every 0.1%).
    names : sequence of str, default=None
        Column names, for error messages.
    additive_bins : int, sequence of int or None, default=None
        The encoder's ``additive_bins``: with it, every numeric column sends
        its ``values`` or ``quantiles`` (as for the quantile encodings), for
        the bins.
    sample_weight : array-like of shape (n_samples,), default=None
        The rows' weights: rows of zero weight are left out of the summary
        (and so of every statistic of the encoder: categories, missing-value
        flags, moments, quantiles, knots and additive bins); the others count
        once each, whatever their weight. None: every row. A part whose
        weights are all zero gives the summary of no row, which adds nothing
        to :meth:`TabularEncoder.from_summaries`.

    Returns
    -------
    summary : dict
        ``n_rows`` (the rows summarized), ``numeric_encoding``, ``n_bins``,
        ``additive_bins`` and ``columns``: one dict per column with ``kind``,
        ``has_missing`` and ``count`` (present values), and ``keys`` and
        ``counts`` (categorical), ``mean`` and ``m2`` (``"standard"``),
        ``values`` or ``quantiles`` (the quantile encodings, and with
        ``additive_bins``), ``distinct`` (``"piecewise_linear"``).

    Raises
    ------
    ValueError
        For infinite or non-numeric values in a numeric column, or an
        invalid ``additive_bins`` or ``sample_weight``.
    TypeError
        For a categorical column whose values cannot be sorted or are not
        hashable (lists, arrays).
    """
    if numeric_encoding not in NUMERIC_ENCODINGS:
        raise ValueError(f"numeric_encoding must be one of {NUMERIC_ENCODINGS}, got "
                         f"{numeric_encoding!r}.")
    if sketch_size is not None and sketch_size < 2:
        raise ValueError(f"sketch_size must be at least 2, got {sketch_size}.")
    levels = additive_levels(additive_bins)
    categorical = np.asarray(categorical, dtype=bool)
    if len(categorical) != len(columns):
        raise ValueError(f"categorical has {len(categorical)} entries for {len(columns)} "
                         "columns.")
    columns = _rows_of_positive_weight(columns, sample_weight, allow_none=True)
    out = []
    for j, col in enumerate(columns):
        name = _column_name(names, j)
        if categorical[j]:
            values = np.asarray(col, dtype=object)
            missing = _missing_mask(values)
            present = values[~missing]
            keys, counts = _category_counts(present, name)
            out.append({"kind": "categorical", "has_missing": bool(missing.any()),
                        "count": int(present.size), "keys": keys, "counts": counts})
            continue
        x = _numeric(np.asarray(col), name)
        missing = np.isnan(x)
        present = x[~missing] if missing.any() else x
        entry = {"kind": "numeric", "has_missing": bool(missing.any()),
                 "count": int(present.size)}
        if numeric_encoding == "standard":
            mean = float(present.mean()) if present.size else 0.0
            entry["mean"] = mean
            entry["m2"] = float(((present - mean) ** 2).sum()) if present.size else 0.0
        # one sketch of the column serves every quantile-based part of the
        # encoding: the quantile transform, the knots and the additive bins
        if numeric_encoding in ("quantile_normal", "piecewise_linear") or (
                additive_bins is not None):
            if sketch_size is None or present.size <= sketch_size:
                entry["values"] = present
            else:  # the quantiles come from the merged sketches
                entry["quantiles"] = np.quantile(present, np.linspace(0.0, 1.0, sketch_size),
                                                 method="linear")
        if numeric_encoding == "piecewise_linear" and "quantiles" in entry:
            # more than n_bins + 1 distinct quantiles: more distinct values
            few = len(np.unique(entry["quantiles"])) <= n_bins + 1
            distinct = np.unique(present) if few else None
            entry["distinct"] = (distinct if distinct is not None
                                 and len(distinct) <= n_bins + 1 else None)
        out.append(entry)
    return {"n_rows": len(columns[0]) if columns else 0, "numeric_encoding": numeric_encoding,
            "n_bins": n_bins, "additive_bins": additive_bins, "columns": out}


def _rows_of_positive_weight(columns, sample_weight, allow_none=False):
    """``columns`` without the rows of zero ``sample_weight`` (None: all rows).

    With ``allow_none`` (a part of the rows, for :func:`summarize`) a weight
    of zero for every row leaves no row; else it is an error.

    Raises
    ------
    ValueError
        If ``sample_weight`` is not one finite, non-negative weight per row,
        or is zero for every row without ``allow_none``.
    """
    if sample_weight is None:
        return columns
    n = len(columns[0]) if columns else 0
    try:
        weight = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight must be numbers ({exc}).") from exc
    if weight.ndim == 0:
        weight = np.full(n, float(weight))
    if weight.shape != (n,):
        raise ValueError(f"sample_weight has shape {weight.shape}; the columns have {n} rows "
                         "(one weight per row).")
    if not np.isfinite(weight).all() or (weight < 0).any():
        raise ValueError("sample_weight must be finite and non-negative (rows of zero weight "
                         "are left out of the encoder's fit).")
    keep = weight > 0
    if keep.all():
        return columns
    if not keep.any() and not allow_none:
        raise ValueError("sample_weight is zero for every row: there is no row to fit the "
                         "encoder on.")
    return [np.asarray(col)[keep] for col in columns]


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


def _coarser_codes(coarse, fine, fine_codes):
    """``np.searchsorted(coarse, x, side="right")`` from
    ``fine_codes = np.searchsorted(fine, x, side="right")``, exactly, when
    every edge of ``coarse`` is an edge of ``fine``: the coarse edges at or
    below ``x`` are the coarse edges among the ``fine_codes`` fine edges at
    or below it."""
    lookup = np.concatenate([[0], np.searchsorted(coarse, fine, side="right")])
    return lookup[fine_codes]


def _additive_edges(parts, additive_bins):
    """Inner quantile edges of the additive term's bins of a numeric column from
    its parts' summaries: of the pooled values when every part sent them (what
    :meth:`TabularEncoder.fit` computes), else of the count-weighted mixture of
    the parts' sketches; distinct, sorted. Quantiles interpolate between
    neighbouring values, so a column with few distinct values gets many edges
    (a 5-valued column 285 at 4,096 bins), most of its bins empty: empty bins
    are never trained and cost only table rows."""
    levels = np.linspace(0.0, 1.0, int(additive_bins) + 1)[1:-1]
    parts = [part for part in parts if part["count"] > 0]
    if not parts:
        return np.zeros(0)
    if all(part.get("values") is not None for part in parts):
        edges = np.unique(np.quantile(np.concatenate([part["values"] for part in parts]),
                                      levels))
    else:
        edges = np.unique(_mixture_quantiles(_sketches(parts), levels))
    return edges


def additive_levels(additive_bins):
    """The resolutions of an additive term: ``additive_bins`` as a sorted
    tuple of bins per numeric column (``()`` for None, one entry for an int).

    The order in which a sequence lists the resolutions does not matter: the
    sorted tuple lays out the table (coarsest resolution first; categorical
    columns at the coarsest, with its step, 1), so that ``(16, 64, 256)`` and
    ``(256, 64, 16)`` give the same encoder and model.

    Parameters
    ----------
    additive_bins : int, sequence of int or None

    Returns
    -------
    levels : tuple of int
        Sorted ascending.

    Raises
    ------
    ValueError
        Unless ``additive_bins`` is None, an int in [2, 65536] or a non-empty
        sequence of distinct such ints; the message names the bad value.
    """
    if additive_bins is None:
        return ()
    single = not isinstance(additive_bins, (tuple, list))
    levels = (additive_bins,) if single else tuple(additive_bins)
    expected = ("additive_bins must be an int >= 2, a non-empty sequence of distinct ints >= 2, "
                f"or None (at most {MAX_ADDITIVE_BINS} bins each), got {additive_bins!r}")
    if not levels:
        raise ValueError(f"{expected}: an empty sequence.")
    for b in levels:
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
            raise ValueError(f"{expected}: {b!r} is not an int.")
        if not 2 <= b <= MAX_ADDITIVE_BINS:
            raise ValueError(f"{expected}: {b!r} is outside [2, {MAX_ADDITIVE_BINS}].")
    if len(set(levels)) != len(levels):
        raise ValueError(f"{expected}: it repeats a value.")
    return tuple(sorted(int(b) for b in levels))


def _same_additive_bins(a, b):
    """Whether two ``additive_bins`` are the same resolutions (in any order)."""
    try:
        return additive_levels(a) == additive_levels(b)
    except ValueError:
        return a == b


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


class TabularEncoder:
    """Input encoding of the soft tree ensembles: raw tabular columns to float32 features.

    The estimators fit one in ``fit`` (their ``encoder_`` attribute, built
    from ``numeric_encoding``, ``n_bins``, ``categorical_features`` and
    ``max_categories``) and apply it in every prediction method, so that raw
    data, DataFrames with string or categorical columns and missing values
    included, needs no preprocessing. Numeric columns are encoded by
    ``numeric_encoding``; categorical columns are one-hot encoded, with an
    "infrequent" feature beyond ``max_categories`` categories; a column that
    had missing values in ``fit`` gets a missing-indicator feature (details
    in the module docstring and in the user guide, "Input encoding and the
    training recipe").

    Every input column owns a contiguous range of the output features
    (``feature_groups_``), which is how ``max_features`` draws whole input
    columns per tree. The fitted state is plain arrays, so that two models
    can be checked for equal encodings before they are merged: models fitted
    on the same rows with the same settings have equal encoders; models whose
    encoders differ cannot be merged (a ``ValueError`` names what differs).

    Parameters
    ----------
    numeric_encoding : {"piecewise_linear", "quantile_normal", "standard", "none"}, \
            default="piecewise_linear"
        Encoding of the numeric columns: the degree-1 spline ("hat") basis on
        quantile knots (one feature per knot), the quantile transform to a
        standard normal, ``(x - mean) / std``, or the value itself.
    n_bins : int, default=16
        Quantile bins of the piecewise-linear encoding (``n_bins + 1`` knots
        before removing duplicates, so fewer for columns with few distinct
        values).
    max_categories : int, default=32
        Most frequent categories kept per categorical column; the others
        share one "infrequent" feature.
    additive_bins : int in [2, 65536], sequence of int or None, default=None
        Quantile bins per numeric column of the additive term (the
        estimators' ``additive_bins``): :meth:`additive_codes` gives every
        value its row of the additive table. The bins are quantile bins:
        a column with few distinct values gets many edges between them (a
        5-valued column 285 at 4,096 bins), most of its bins empty and never
        trained, and two values can share a bin when one is rare. A
        sequence: one code column per numeric column and resolution, in
        ascending order of bins whatever the sequence's order (categorical
        columns at the coarsest only), so that the order does not change the
        model. None: no additive term. Stored as given.

    Attributes
    ----------
    n_features_in_ : int
        Number of input columns.
    categorical_ : ndarray of bool of shape (`n_features_in_`,)
        Which input columns are categorical.
    names_ : list of str or None
        Column names (a DataFrame's), used in error messages.
    has_missing_ : ndarray of bool of shape (`n_features_in_`,)
        Columns that had missing values in ``fit``; each has a
        missing-indicator feature, the last of its range.
    has_infrequent_ : ndarray of bool of shape (`n_features_in_`,)
        Categorical columns with more than ``max_categories`` categories,
        which have an "infrequent" feature.
    categories_ : list of (ndarray or None)
        Per column, the sorted categories that have their own feature (None
        for numeric columns).
    knots_ : list of (ndarray or None)
        Per column, the distinct quantile knots of ``"piecewise_linear"``
        (None otherwise).
    center_, scale_ : list of (float or None)
        Per column, the mean and standard deviation of ``"standard"`` (None
        otherwise).
    quantile_transformers_ : dict of int to QuantileTransformer
        The fitted transformers of ``"quantile_normal"``, by column index.
    widths_ : ndarray of int of shape (`n_features_in_`,)
        Number of output features of each input column.
    n_features_out_ : int
        Number of output features: the ``F`` of the estimators'
        ``tree_params_.split_weight``.
    feature_groups_ : ndarray of int of shape (`n_features_out_`,)
        The input column of each output feature.
    additive_edges_ : list of (ndarray or None) or None
        With ``additive_bins``: per code column (an input column at one
        resolution; one per input column with one resolution), the distinct
        inner quantile edges of its bins (a value's bin is the number of
        edges ``<= value``); None for categorical columns.
        None without.
    additive_sources_ : ndarray of int or None
        With ``additive_bins``: the input column of every code column.
    additive_steps_ : ndarray of float or None
        With ``additive_bins``: every code column's relative training step,
        ``sqrt(min(additive_bins) / bins)`` of its resolution (1 with one,
        and for the categorical columns, at the coarsest resolution).
    additive_offsets_ : ndarray of int of shape (J + 1,) or None
        With ``additive_bins``: the first table row of every code column (and
        the table's size, ``n_additive_``, last).
    n_additive_ : int
        Rows of the additive table (0 without ``additive_bins``).

    See Also
    --------
    SoftTreeEnsembleClassifier : Fits one in ``fit``, as ``encoder_``.
    SoftTreeEnsembleRegressor : Fits one in ``fit``, as ``encoder_``.

    Examples
    --------
    A classifier fitted on a DataFrame with a numeric column, a string
    column and missing values holds its encoder in ``encoder_``:

    >>> import numpy as np
    >>> import pandas as pd
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, TabularEncoder
    >>> X = pd.DataFrame({
    ...     "size": [1.0, 2.5, np.nan, 4.0, 5.5, 6.0, 7.5, 9.0],
    ...     "color": ["red", "blue", "red", None, "green", "blue", "red", "green"],
    ... })
    >>> y = [0, 0, 0, 1, 1, 1, 1, 0]
    >>> clf = SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2,
    ...                                  numeric_encoding="piecewise_linear",
    ...                                  random_state=0).fit(X, y)
    >>> enc = clf.encoder_
    >>> isinstance(enc, TabularEncoder)
    True
    >>> enc.categorical_.tolist(), enc.has_missing_.tolist()
    ([False, True], [True, True])
    >>> enc.categories_[1].tolist()
    ['blue', 'green', 'red']

    "size" has 7 distinct values, hence 7 knots and 7 hat features, plus its
    missing indicator; "color" has 3 categories plus its missing indicator.
    The trees split on these 12 features:

    >>> enc.widths_.tolist(), enc.n_features_out_
    ([8, 4], 12)
    >>> enc.feature_groups_.tolist()
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    >>> clf.get_tree_params().split_weight.shape  # (trees, splits, features)
    (4, 4, 12)

    A missing value or a category unseen in ``fit`` is accepted at
    prediction time:

    >>> X_new = pd.DataFrame({"size": [np.nan, 3.0], "color": ["purple", "red"]})
    >>> clf.predict(X_new).shape
    (2,)

    The same encoder from summaries of parts of the rows (dask partitions,
    summarized where they live, as :class:`ShardedSoftTreeEnsemble` does):

    >>> from sktree_lmc._encoding import summarize, to_columns
    >>> Xn = np.array([[0.0, 1.0], [1.0, np.nan], [2.0, 3.0], [3.0, 4.0]])
    >>> columns, categorical = to_columns(Xn)
    >>> enc = TabularEncoder(n_bins=2).fit(columns, categorical)
    >>> parts = [summarize([c[:2] for c in columns], categorical, n_bins=2, sketch_size=1001),
    ...          summarize([c[2:] for c in columns], categorical, n_bins=2, sketch_size=1001)]
    >>> merged = TabularEncoder.from_summaries(parts, categorical, n_bins=2)
    >>> merged.knots_[0].tolist() == enc.knots_[0].tolist() == [0.0, 1.5, 3.0]
    True
    """

    def __init__(self, numeric_encoding="piecewise_linear", n_bins=16, max_categories=32,
                 additive_bins=None):
        self.numeric_encoding = numeric_encoding
        self.n_bins = n_bins
        self.max_categories = max_categories
        self.additive_bins = additive_bins

    # -- fitting ------------------------------------------------------------------
    def fit(self, columns, categorical, names=None, sample_weight=None):
        """Fit the encoding on the input's column arrays.

        The same computation as :meth:`from_summaries` of the one exact
        :func:`summarize` of ``columns``.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns, as the estimators split them (one 1-D array
            per input column: float64 with NaN for numeric columns, object
            otherwise).
        categorical : ndarray of bool
            Which columns are categorical.
        names : sequence of str, default=None
            Column names, for error messages.
        sample_weight : array-like of shape (n_samples,), default=None
            The rows' weights. Rows of zero weight are left out of every
            fitted statistic (quantiles and knots, moments, categories,
            missing-value indicators, additive bins); the rows of positive
            weight count once each (the fit is unweighted: with all weights
            positive it equals the fit without weights).

        Returns
        -------
        self : TabularEncoder
            The fitted encoder.

        Raises
        ------
        ValueError
            For an invalid setting, a value that is not a number (or is
            infinite) in a numeric column, an invalid ``sample_weight`` or a
            weight of zero for every row.
        TypeError
            For a categorical column whose values cannot be sorted or are not
            hashable.
        """
        self._check_additive_bins()
        columns = _rows_of_positive_weight(columns, sample_weight)
        summary = summarize(columns, categorical, numeric_encoding=self.numeric_encoding,
                            n_bins=self.n_bins, names=names, additive_bins=self.additive_bins)
        return self._fit_summaries([summary], categorical, names)

    def _check_additive_bins(self):
        additive_levels(self.additive_bins)

    def _fit_additive(self, summaries):
        """The additive term's bins (``additive_edges_``) and table layout.

        Every resolution of ``additive_bins`` gives every numeric column a
        code column (the first resolution also every categorical column): a
        numeric code column with edges ``e`` has ``len(e) + 2`` rows, its
        bins then one for missing values. A categorical column has one row
        per category with a one-hot feature, one for the infrequent ones
        (when there are), one for missing values and one for categories
        unseen in ``fit`` (a row no training value reaches, which stays at
        its zero start: an unseen category adds nothing, as in the one-hot
        features).
        """
        levels = additive_levels(self.additive_bins)  # sorted: the coarsest first
        edges, sizes, sources, steps = [], [], [], []
        for level, bins in enumerate(levels):
            for j in range(self.n_features_in_):
                if self.categorical_[j]:
                    if level:
                        continue
                    edges.append(None)
                    sizes.append(len(self.categories_[j]) + int(self.has_infrequent_[j]) + 2)
                else:
                    parts = [summary["columns"][j] for summary in summaries]
                    e = _additive_edges(parts, bins)
                    edges.append(e)
                    sizes.append(len(e) + 2)
                sources.append(j)
                # finer bins hold fewer rows each: their gradients are noisier
                steps.append(math.sqrt(min(levels) / bins))
        self.additive_edges_ = edges
        self.additive_sources_ = np.asarray(sources, dtype=np.int64)
        self.additive_steps_ = np.asarray(steps, dtype=np.float64)
        self.additive_offsets_ = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_additive_ = int(self.additive_offsets_[-1])

    def additive_row_steps(self):
        """The relative training step of every row of the additive table.

        Returns
        -------
        steps : ndarray of shape (`n_additive_`,)
            ``additive_steps_`` of each row's code column: 1 with one
            resolution; with several, ``sqrt(min(additive_bins) / bins)`` of
            the row's resolution.
        """
        steps = getattr(self, "additive_steps_", None)
        if steps is None:
            return np.ones(self.n_additive_)
        return np.repeat(steps, np.diff(self.additive_offsets_))

    @classmethod
    def from_summaries(cls, summaries, categorical, names=None, *,
                       numeric_encoding="piecewise_linear", n_bins=16, max_categories=32,
                       additive_bins=None):
        """The encoder fitted on the union of the rows that ``summaries`` describe.

        Each summary is the :func:`summarize` of one part of the rows (e.g.
        the partitions of a dask collection, summarized where they live);
        only the summaries need to travel. Exact (equal to :meth:`fit` on all
        rows) for the categories, the missing-value flags, ``"none"`` and
        ``"standard"`` (up to floating-point rounding of the merged mean and
        scale), the knots of a column with at most ``n_bins + 1`` distinct
        values, and every knot when each part sent its values (at most
        ``sketch_size`` present values per column); otherwise the knots are
        the quantiles of the count-weighted mixture of the parts' sketched
        quantile functions (see the module docstring).

        Parameters
        ----------
        summaries : list of dict
            :func:`summarize` of every part, all with the same columns,
            ``categorical`` mask, ``numeric_encoding`` and ``n_bins``.
        categorical : ndarray of bool
            Which columns are categorical (as given to :func:`summarize`).
        names : sequence of str, default=None
            Column names, for error messages.
        numeric_encoding, n_bins, max_categories, additive_bins
            The encoder's settings (see :class:`TabularEncoder`). The bins of
            the additive term come from the pooled values when every part sent
            them, else from the merged sketches (as the knots).

        Returns
        -------
        encoder : TabularEncoder
            The fitted encoder.

        Raises
        ------
        ValueError
            If the summaries do not match each other or the settings, or
            ``numeric_encoding="quantile_normal"`` meets a summary without
            the column's values (a sketch).
        """
        enc = cls(numeric_encoding, n_bins, max_categories, additive_bins)
        enc._check_additive_bins()
        return enc._fit_summaries(list(summaries), categorical, names)

    def _fit_summaries(self, summaries, categorical, names):
        categorical = np.asarray(categorical, dtype=bool).copy()
        if not summaries:
            raise ValueError("from_summaries needs at least one summary.")
        for i, summary in enumerate(summaries):
            for key, value in (("numeric_encoding", self.numeric_encoding),
                               ("n_bins", self.n_bins),
                               ("additive_bins", getattr(self, "additive_bins", None))):
                if (not _same_additive_bins(summary.get(key), value) if key == "additive_bins"
                        else summary.get(key) != value):
                    raise ValueError(
                        f"Summary {i} was computed with {key}={summary.get(key)!r}, the encoder "
                        f"has {key}={value!r}."
                    )
            kinds = np.array([c["kind"] == "categorical" for c in summary["columns"]],
                             dtype=bool)
            if kinds.shape != categorical.shape or not np.array_equal(kinds, categorical):
                raise ValueError(
                    f"Summary {i} does not describe the given columns (their number or which "
                    "are categorical differ)."
                )
        n_columns = len(categorical)
        self.n_features_in_ = n_columns
        self.categorical_ = categorical
        self.names_ = None if names is None else [str(n) for n in names]
        self.has_missing_ = np.zeros(n_columns, dtype=bool)
        self.has_infrequent_ = np.zeros(n_columns, dtype=bool)
        self.knots_, self.center_, self.scale_, self.categories_ = [], [], [], []
        self.quantile_transformers_ = {}
        self.additive_edges_, self.additive_offsets_, self.n_additive_ = None, None, 0
        self.additive_sources_ = self.additive_steps_ = None
        for j in range(n_columns):
            parts = [summary["columns"][j] for summary in summaries]
            knots = center = scale = cats = None
            if categorical[j]:
                keys, counts = _merge_counts(parts, self._name(j))
                cats, self.has_infrequent_[j] = _categories_from_counts(
                    keys, counts, self.max_categories)
            elif self.numeric_encoding == "piecewise_linear":
                knots = _merged_knots(parts, self.n_bins)
            elif self.numeric_encoding == "standard":
                center, scale = _merged_moments(parts)
            elif self.numeric_encoding == "quantile_normal":
                present = _merged_quantile_points(parts)
                if present.size:
                    qt = QuantileTransformer(
                        output_distribution="normal", n_quantiles=min(1000, present.size),
                        subsample=None,
                    )
                    self.quantile_transformers_[j] = qt.fit(present.reshape(-1, 1))
            self.has_missing_[j] = any(part["has_missing"] for part in parts)
            self.knots_.append(knots)
            self.center_.append(center)
            self.scale_.append(scale)
            self.categories_.append(cats)
        self._set_layout()
        if getattr(self, "additive_bins", None) is not None:
            self._fit_additive(summaries)
        return self

    def _name(self, j):
        return _column_name(self.names_, j)

    def _set_layout(self):
        """Output width per input column, and the feature groups."""
        widths = []
        for j in range(self.n_features_in_):
            if self.categorical_[j]:
                w = len(self.categories_[j]) + int(self.has_infrequent_[j])
            elif self.numeric_encoding == "piecewise_linear":
                k = len(self.knots_[j])
                w = k if k >= 2 else 0
            elif self.numeric_encoding == "quantile_normal":
                w = 1 if j in self.quantile_transformers_ else 0
            else:
                w = 1
            widths.append(w + int(self.has_missing_[j]))
        self.widths_ = np.asarray(widths, dtype=np.int64)
        self.n_features_out_ = int(self.widths_.sum())
        self.feature_groups_ = np.repeat(np.arange(self.n_features_in_), self.widths_)

    @classmethod
    def identity(cls, n_features):
        """Build the fitted identity encoder of ``n_features`` numeric columns.

        It is the encoding of models pickled before encoders existed.

        Parameters
        ----------
        n_features : int
            Number of numeric columns.

        Returns
        -------
        encoder : TabularEncoder
            A fitted encoder whose output is its input.
        """
        enc = cls("none")
        enc.n_features_in_ = n_features
        enc.categorical_ = np.zeros(n_features, dtype=bool)
        enc.names_ = None
        enc.has_missing_ = np.zeros(n_features, dtype=bool)
        enc.has_infrequent_ = np.zeros(n_features, dtype=bool)
        enc.knots_ = [None] * n_features
        enc.center_ = [None] * n_features
        enc.scale_ = [None] * n_features
        enc.categories_ = [None] * n_features
        enc.quantile_transformers_ = {}
        enc.additive_bins = None
        enc.additive_edges_, enc.additive_offsets_, enc.n_additive_ = None, None, 0
        enc.additive_sources_ = enc.additive_steps_ = None
        enc._set_layout()
        return enc

    def to_dict(self):
        """Return the settings and fitted state as a plain dict.

        The estimators pickle their encoder this way, so that loading with
        ``skops.io`` does not need this class trusted.

        Returns
        -------
        state : dict
            The encoder's attributes.
        """
        return dict(vars(self))

    @classmethod
    def from_dict(cls, state):
        """Rebuild an encoder from :meth:`to_dict`.

        Parameters
        ----------
        state : dict
            The output of :meth:`to_dict`.

        Returns
        -------
        encoder : TabularEncoder
            The encoder.
        """
        enc = cls.__new__(cls)
        enc.__setstate__(dict(state))
        return enc

    def __setstate__(self, state):
        """Restore a pickled state, filling what older versions did not have."""
        # encoders pickled before the additive term had none
        self.__dict__.update({"additive_bins": None, "additive_edges_": None,
                              "additive_offsets_": None, "n_additive_": 0,
                              "additive_sources_": None, "additive_steps_": None})
        self.__dict__.update(state)
        if self.additive_offsets_ is not None and self.additive_sources_ is None:
            # one resolution, before the code columns were named: one per input column
            self.additive_sources_ = np.arange(self.n_features_in_, dtype=np.int64)
            self.additive_steps_ = np.ones(self.n_features_in_)

    def ramp_directions(self):
        """Return the linear ramp over the knots of every piecewise-linear column.

        ``sum_t ramp_t * hat_t(x)`` is the position of ``x`` among its column's
        knots, from -1 (first knot) to 1 (last knot): a quantile-like
        transform. The estimators start their splits on these ramps.

        Returns
        -------
        ramps : ndarray of shape (`n_features_out_`,) or None
            The ramp value at the knot of each piecewise-linear feature, NaN
            for every other feature; None when there is no piecewise-linear
            feature.
        """
        if self.numeric_encoding != "piecewise_linear":
            return None
        out = np.full(self.n_features_out_, np.nan)
        offset = 0
        for j in range(self.n_features_in_):
            width = int(self.widths_[j])
            if not self.categorical_[j]:
                k = width - int(self.has_missing_[j])
                if k >= 2:
                    out[offset : offset + k] = np.linspace(-1.0, 1.0, k)
            offset += width
        return None if np.isnan(out).all() else out

    @property
    def is_identity(self):
        """bool: Whether the encoding returns its inputs unchanged.

        True for ``numeric_encoding="none"`` without categorical columns and
        without missing values in ``fit``.
        """
        return (self.numeric_encoding == "none" and not self.categorical_.any()
                and not self.has_missing_.any())

    # -- transforming ---------------------------------------------------------------
    def transform_columns(self, columns, start=0, stop=None):
        """Encode rows ``start:stop`` of the column arrays.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns, as split by the estimators (one 1-D array per
            input column: float64 for numeric columns, object otherwise).
        start, stop : int, default=0 and None
            The rows to encode (``stop=None``: to the end).

        Returns
        -------
        encoded : ndarray of shape (stop - start, `n_features_out_`), dtype float32
            The features the trees see.
        """
        n = len(columns[0]) if columns else 0
        stop = n if stop is None else min(stop, n)
        out = np.zeros((stop - start, self.n_features_out_), dtype=np.float32)
        offset = 0
        for j, col in enumerate(columns):
            width = int(self.widths_[j])
            block = out[:, offset : offset + width]
            offset += width
            values = col[start:stop]
            if self.categorical_[j]:
                values = np.asarray(values, dtype=object)
                missing = _missing_mask(values)
                self._encode_categories(values, missing, j, block)
            else:
                x = _numeric(np.asarray(values), self._name(j))
                missing = np.isnan(x)
                self._encode_numeric(x, missing, j, block)
            if self.has_missing_[j]:
                block[:, -1] = missing
        return out

    def _encode_numeric(self, x, missing, j, block):
        width = block.shape[1] - int(self.has_missing_[j])
        if width == 0:
            return
        present = ~missing
        xp = x[present]
        if xp.size == 0:  # all missing (at predict time): zeros, as any missing value
            return
        if self.numeric_encoding == "piecewise_linear":
            block[present, :width] = _hat_features(xp, self.knots_[j])
        elif self.numeric_encoding == "quantile_normal":
            qt = self.quantile_transformers_[j]
            block[present, 0] = qt.transform(xp.reshape(-1, 1))[:, 0]
        elif self.numeric_encoding == "standard":
            block[present, 0] = (xp - self.center_[j]) / self.scale_[j]
        else:
            block[present, 0] = xp

    def _category_index(self, values, j, fallback):
        """Index of every value (object array) in column ``j``'s categories;
        ``fallback`` for the others."""
        lookup = {c: i for i, c in enumerate(self.categories_[j].tolist())}
        values = values.tolist()
        try:
            return np.fromiter((lookup.get(v, fallback) for v in values), dtype=np.int64,
                               count=len(values))
        except TypeError:  # an unhashable value, unseen in fit
            _check_hashable(values, self._name(j))
            raise

    def _encode_categories(self, values, missing, j, block):
        n_cats = len(self.categories_[j])
        present = np.flatnonzero(~missing)
        if present.size == 0 or (n_cats == 0 and not self.has_infrequent_[j]):
            return
        fallback = n_cats if self.has_infrequent_[j] else -1
        idx = self._category_index(values[present], j, fallback)
        hit = idx >= 0
        block[present[hit], idx[hit]] = 1.0

    def additive_codes(self, columns, start=0, stop=None):
        """The additive table's row of every value of rows ``start:stop``.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns (see :meth:`transform_columns`).
        start, stop : int, default=0 and None
            The rows (``stop=None``: to the end).

        Returns
        -------
        codes : ndarray of shape (stop - start, J), dtype float32
            Table rows (whole numbers, below 2**24, so exact in float32: the
            estimators append them to the encoded features), one column per
            code column (input column ``additive_sources_[c]`` at one
            resolution; ``J = n_features_in_`` with one resolution); code
            column ``c``'s rows start at ``additive_offsets_[c]``.

        Raises
        ------
        ValueError
            If the encoder has no additive term.
        """
        if self.additive_offsets_ is None:
            raise ValueError("This encoder has no additive term (additive_bins=None).")
        n = len(columns[0]) if columns else 0
        stop = n if stop is None else min(stop, n)
        out = np.empty((stop - start, len(self.additive_sources_)), dtype=np.float32)
        numeric = {}  # each numeric column checked once, whatever its resolutions
        finest, fine_codes = self._finest_additive_columns(), {}
        for c, j in enumerate(self.additive_sources_):
            first, end = self.additive_offsets_[c], self.additive_offsets_[c + 1]
            values = columns[j][start:stop]
            if self.categorical_[j]:
                values = np.asarray(values, dtype=object)
                missing = _missing_mask(values)
                n_cats = len(self.categories_[j])
                unseen = n_cats if self.has_infrequent_[j] else end - first - 1
                idx = self._category_index(values, j, unseen)
                idx[missing] = end - first - 2
            else:
                if j not in numeric:
                    x = _numeric(np.asarray(values), self._name(j))
                    numeric[j] = x, np.isnan(x)
                x, missing = numeric[j]
                fine = finest.get(j)
                if fine is None:
                    idx = np.searchsorted(self.additive_edges_[c], x, side="right")
                else:  # one binary search per column, at its finest resolution
                    if j not in fine_codes:
                        fine_codes[j] = np.searchsorted(self.additive_edges_[fine], x,
                                                        side="right")
                    idx = (fine_codes[j].copy() if c == fine else _coarser_codes(
                        self.additive_edges_[c], self.additive_edges_[fine], fine_codes[j]))
                idx[missing] = end - first - 1
            out[:, c] = first + idx
        return out

    def _finest_additive_columns(self):
        """``{column: code column}``: for every numeric column with several
        resolutions whose coarser edges are all among its finest edges (so
        that a coarser bin is a union of finest bins), the code column of its
        finest bins: :meth:`additive_codes` finds those bins with one binary
        search, and the coarser codes follow from them by a lookup
        (:func:`_coarser_codes`) instead of a binary search each."""
        by_column = {}
        for c, j in enumerate(self.additive_sources_):
            if self.additive_edges_[c] is not None:
                by_column.setdefault(int(j), []).append(c)
        finest = {}
        for j, cols in by_column.items():
            if len(cols) < 2:
                continue
            fine = max(cols, key=lambda c: len(self.additive_edges_[c]))
            edges = self.additive_edges_[fine]
            if all(np.isin(self.additive_edges_[c], edges).all() for c in cols):
                finest[j] = fine
        return finest

    def transform(self, columns):
        """Encode all rows of the column arrays.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns (see :meth:`transform_columns`).

        Returns
        -------
        encoded : ndarray of shape (n_samples, `n_features_out_`), dtype float32
            The features the trees see.
        """
        return self.transform_columns(columns)

    def transform_chunks(self, columns, chunk_rows=ENCODE_CHUNK_ROWS):
        """Encode the column arrays chunk by chunk.

        The encoded copy of a large input is then never held whole.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns (see :meth:`transform_columns`).
        chunk_rows : int, default=16384
            Rows per chunk.

        Yields
        ------
        start : int
            The first row of the chunk.
        encoded : ndarray of shape (n_rows, `n_features_out_`), dtype float32
            The chunk's features.
        """
        n = len(columns[0]) if columns else 0
        for start in range(0, n, chunk_rows):
            yield start, self.transform_columns(columns, start, start + chunk_rows)


def encoders_differ(a, b, additive=True):
    """A sentence saying how two fitted encoders differ, or ``None`` if equal.

    Two models can be merged only when their encoders map every input to the
    same features: same settings, same columns and kinds, same knots,
    statistics and categories (as for two models fitted on the same rows).
    ``additive=False`` ignores the edges of the additive term's bins (not its
    setting ``additive_bins``): encoders that differ only there can be
    brought to common bins exactly (:func:`union_additive_bins`).
    """
    if (a is None) != (b is None):
        return "one model encodes its inputs and the other does not"
    if a is None:
        return None
    for attr in ("numeric_encoding", "n_bins", "max_categories", "n_features_in_",
                 "additive_bins"):
        if attr == "n_bins" and a.numeric_encoding != "piecewise_linear":
            continue  # only the piecewise-linear encoding has bins
        if attr == "additive_bins":  # the resolutions, in any order
            if not _same_additive_bins(getattr(a, attr, None), getattr(b, attr, None)):
                return (f"{attr} differs: {getattr(a, attr, None)!r} vs "
                        f"{getattr(b, attr, None)!r}")
        elif getattr(a, attr, None) != getattr(b, attr, None):
            return f"{attr} differs: {getattr(a, attr, None)!r} vs {getattr(b, attr, None)!r}"
    for attr in ("categorical_", "has_missing_", "has_infrequent_", "widths_"):
        if not np.array_equal(getattr(a, attr), getattr(b, attr)):
            cols = np.flatnonzero(np.asarray(getattr(a, attr)) != np.asarray(getattr(b, attr)))
            return f"{attr.rstrip('_')} differs in column(s) {cols.tolist()}"
    for j in range(a.n_features_in_):
        for attr in ("knots_", "center_", "scale_"):
            x, y = getattr(a, attr)[j], getattr(b, attr)[j]
            if (x is None) != (y is None) or (
                x is not None and not np.array_equal(np.asarray(x), np.asarray(y))
            ):
                what = {"knots_": "quantile knots", "center_": "mean", "scale_": "scale"}[attr]
                return (f"the {what} of column {a._name(j)} differ (encoders fitted on "
                        "different rows)")
        ca, cb = a.categories_[j], b.categories_[j]
        if (ca is None) != (cb is None) or (
            ca is not None and (len(ca) != len(cb) or list(ca) != list(cb))
        ):
            return f"the categories of column {a._name(j)} differ"
        qa, qb = a.quantile_transformers_.get(j), b.quantile_transformers_.get(j)
        if (qa is None) != (qb is None) or (
            qa is not None and not np.array_equal(qa.quantiles_, qb.quantiles_)
        ):
            return (f"the quantiles of column {a._name(j)} differ (encoders fitted on "
                    "different rows)")
    # last: the trees' features first, then the additive term's bins
    edges_a = getattr(a, "additive_edges_", None) or []
    edges_b = getattr(b, "additive_edges_", None) or []
    if additive and len(edges_a) == len(edges_b):  # else additive_bins differs
        for c, (ea, eb) in enumerate(zip(edges_a, edges_b)):
            if (ea is None) != (eb is None) or (ea is not None and not np.array_equal(ea, eb)):
                return (f"the additive bins of column {a._name(a.additive_sources_[c])} "
                        "differ (encoders fitted on different rows)")
    return None


def union_additive_bins(encoders):
    """Common additive bins for encoders that differ only in their edges.

    The additive term of a numeric column is constant on each of its bins, so
    it is also constant on the bins of the union of several encoders' edges:
    every union bin lies inside one bin of each encoder. Each encoder's table
    is therefore its own function exactly on the union's bins, and tables on
    common bins can be averaged or interpolated as the trees are.

    Parameters
    ----------
    encoders : list of TabularEncoder
        Fitted encoders with an additive term, equal but for the edges of
        their additive bins (``encoders_differ(a, b, additive=False)`` is
        None), for example with ``numeric_encoding="none"`` fitted on
        different rows.

    Returns
    -------
    union : TabularEncoder
        A copy of the first encoder whose numeric columns' additive edges are
        the sorted union of all encoders' edges.
    rows : list of ndarray of int
        For each encoder, the row of its table that every row of the union's
        table takes: ``table[rows[k]]`` is encoder ``k``'s table on the
        union's bins (the missing-value row maps to the missing-value row,
        categorical columns map one to one).
    """
    ref = encoders[0]
    union = copy.deepcopy(ref)
    edges, sizes = [], []
    for j in range(len(ref.additive_edges_)):  # code columns
        if ref.additive_edges_[j] is None:
            edges.append(None)
            sizes.append(int(ref.additive_offsets_[j + 1] - ref.additive_offsets_[j]))
            continue
        e = np.unique(np.concatenate([enc.additive_edges_[j] for enc in encoders]))
        edges.append(e)
        sizes.append(len(e) + 2)
    union.additive_edges_ = edges
    union.additive_offsets_ = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    union.n_additive_ = int(union.additive_offsets_[-1])
    rows = []
    for enc in encoders:
        r = np.empty(union.n_additive_, dtype=np.int64)
        for j, e in enumerate(edges):
            u0, u1 = union.additive_offsets_[j], union.additive_offsets_[j + 1]
            o0, o1 = enc.additive_offsets_[j], enc.additive_offsets_[j + 1]
            if e is None:
                r[u0:u1] = np.arange(o0, o1)
                continue
            # union bin i >= 1 holds [e[i-1], e[i]): the encoder's bin of e[i-1] (codes use
            # searchsorted(side="right")); bin 0 is below every edge; the last row: missing
            own = np.searchsorted(enc.additive_edges_[j], e, side="right")
            r[u0:u1] = o0 + np.concatenate([[0], own, [o1 - o0 - 1]])
        rows.append(r)
    return union, rows

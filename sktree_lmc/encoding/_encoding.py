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

**Structure.** A fitted encoder is a list of fitted columns plus the additive
term's bins, as a ``ColumnTransformer`` is a list of fitted transformers. Its
split features are the per-column encodings (``column_encodings_``): one
fitted object per input column, of the class of its kind
(``NUMERIC_ENCODINGS``, keyed by ``numeric_encoding``, and the one-hot
encoding of the categorical columns, in :mod:`._column_encodings`), holding
the column's state and computing its features, summary, export form,
differences and unions. The additive term's bins are an
:class:`~._additive_bins.AdditiveBins` with its own fitted state
(``additive_term_``), to which the encoder's ``additive_*`` attributes and
methods delegate. The per-column attributes users see (``knots_``,
``center_``, ``scale_``, ``categories_``, ``has_infrequent_``,
``quantile_transformers_``) are read from the columns, and
:meth:`TabularEncoder.to_dict` flattens both into one plain dict of that
layout; :meth:`TabularEncoder.from_columns` assembles an encoder from fitted
parts (a union's).

**Unions.** Encoders fitted on different rows differ; their union
(:func:`~._common_encoding.common_encoder`) is an encoder on which each of
them is an affine function of the union's features. Where no exact union
exists (two quantile transforms, two numeric kinds) its column is a
``"stacked"`` one, several encodings side by side; such an encoder names
the kind of every column in ``column_kinds_`` (absent from a fitted
encoder and its :meth:`TabularEncoder.to_dict`).
"""

from __future__ import annotations

import copy
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_feature_names_in,
    _get_feature_names,
    check_array,
    check_is_fitted,
    validate_data,
)

# the per-column encodings and the additive term's bins live in their own modules
from ._additive_bins import (
    MAX_ADDITIVE_BINS,
    AdditiveBins,
    additive_levels,
    same_additive_bins,
)
from ._column_encodings import (
    CATEGORICAL,
    NUMERIC_ENCODINGS,
    NoneColumns,
    column_name,
    column_state_lists,
    columns_from_state_lists,
    time_seconds,
)

__all__ = ["NUMERIC_ENCODINGS", "SKETCH_SIZE", "TabularEncoder", "as_rows",
           "check_categorical_features", "encoders_differ", "fit_encoding", "rows_and_columns",
           "summarize", "to_columns", "union_additive_bins"]

#: Rows encoded at once by :meth:`TabularEncoder.encode_chunks`: the encoded
#: chunk (rows x features, float32) then stays in the order of 10-100 MB.
ENCODE_CHUNK_ROWS = 16384

#: Quantile levels of the sketch of a numeric column in :func:`summarize` (a
#: part with at most this many present values sends them instead).
SKETCH_SIZE = 1001


def _is_dataframe(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _is_string_like(v):
    return isinstance(v, (str, bytes, np.str_))


def _is_from_dtype(categorical_features):
    return isinstance(categorical_features, str) and categorical_features == "from_dtype"


def as_rows(X):
    """``X`` as the encoder reads it, indexable by rows: a DataFrame as it is
    (strings, categories, missing values), anything else as a 2-D array of any
    dtype (scikit-learn's ``check_array``: its errors for a 1-D, empty or
    sparse ``X``; NaN allowed, the encoder checks the values)."""
    if _is_dataframe(X):
        return X
    return check_array(
        X, dtype=None, ensure_all_finite=False, accept_sparse=False, ensure_2d=True
    )


def rows_and_columns(X):
    """``(rows, columns, categorical)``: ``X`` as rows (:func:`as_rows`, what
    is shared out by rows) and split into its columns with their default kinds
    (:func:`to_columns`), the input checked once."""
    rows = as_rows(X)
    return (rows, *_split_columns(rows))


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
    return _split_columns(as_rows(X))


def _split_columns(X):
    """:func:`to_columns` of ``X`` as rows (:func:`as_rows`)."""
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
                columns.append(time_seconds(values, label))
                categorical.append(False)
            else:
                try:
                    columns.append(series.to_numpy(dtype=np.float64, na_value=np.nan))
                except (TypeError, ValueError):
                    columns.append(series.to_numpy(dtype=object))
                categorical.append(False)
        return columns, np.asarray(categorical, dtype=bool)
    if X.dtype.kind in "biuf":
        X = X.astype(np.float64, copy=False)
        return [X[:, j] for j in range(X.shape[1])], np.zeros(X.shape[1], dtype=bool)
    if X.dtype.kind in "Mm":
        return ([time_seconds(X[:, j], f"{j}") for j in range(X.shape[1])],
                np.zeros(X.shape[1], dtype=bool))
    if X.dtype.kind in "SU":
        X = X.astype(object)
    columns = [X[:, j] for j in range(X.shape[1])]
    categorical = np.array([any(_is_string_like(v) for v in c) for c in columns], dtype=bool)
    return columns, categorical


def fit_encoding(columns, by_dtype, names=None, *, settings, sample_weight=None):
    """A :class:`TabularEncoder` fitted on training ``columns`` (of
    :func:`to_columns`, ``by_dtype`` their categorical mask by dtype, named
    ``names``) by an estimator's encoding hyperparameters ``settings`` (a
    mapping with ``categorical_features``, ``numeric_encoding``, ``n_bins``,
    ``max_categories`` and ``additive_bins``: its ``get_params()``); rows of
    zero ``sample_weight`` left out."""
    categorical = check_categorical_features(settings["categorical_features"], len(columns),
                                             names, by_dtype)
    encoder = TabularEncoder(settings["numeric_encoding"], settings["n_bins"],
                             settings["max_categories"], settings["additive_bins"])
    return encoder._fit_columns(columns, categorical, names, sample_weight=sample_weight)


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


def summarize(columns, categorical, *, numeric_encoding="quantile_normal", n_bins=16,
              sketch_size=None, names=None, additive_bins=(16, 64, 256, 1024, 4096),
              sample_weight=None):
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
    numeric_encoding : {"piecewise_linear", "quantile_normal", "standard", "none"}, \
            default="quantile_normal"
        The encoder's ``numeric_encoding``.
    n_bins : int, default=16
        The encoder's ``n_bins``: a numeric column with at most ``n_bins + 1``
        distinct values sends them (its knots are then exact).
    sketch_size : int >= 2 or None, default=None
        None: an exact summary (the present values of the numeric columns,
        for :meth:`TabularEncoder.fit`). An int: a numeric column with more
        present values sends its values at ``sketch_size`` evenly spaced
        quantile levels instead (``SKETCH_SIZE`` = 1,001 levels: every 0.1%).
    names : sequence of str, default=None
        Column names, for error messages.
    additive_bins : int, sequence of int or None, default=(16, 64, 256, 1024, 4096)
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
        ``additive_bins``), ``distinct`` (``"piecewise_linear"``); and
        ``dependence``: the rows and the Gram matrix of their normal scores
        (for ``dependence_``; None beyond 256 columns).

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
        raise ValueError(f"numeric_encoding must be one of {tuple(NUMERIC_ENCODINGS)}, got "
                         f"{numeric_encoding!r}.")
    if sketch_size is not None and sketch_size < 2:
        raise ValueError(f"sketch_size must be at least 2, got {sketch_size}.")
    additive_levels(additive_bins)  # its errors
    bins = AdditiveBins(additive_bins)
    categorical = np.asarray(categorical, dtype=bool)
    if len(categorical) != len(columns):
        raise ValueError(f"categorical has {len(categorical)} entries for {len(columns)} "
                         "columns.")
    columns = _rows_of_positive_weight(columns, sample_weight, allow_none=True)
    numeric = NUMERIC_ENCODINGS[numeric_encoding]
    out = [(CATEGORICAL if categorical[j] else numeric).summarize(
        col, column_name(names, j), n_bins=n_bins, sketch_size=sketch_size,
        sketch=bins.sketched) for j, col in enumerate(columns)]
    return {"n_rows": len(columns[0]) if columns else 0, "numeric_encoding": numeric_encoding,
            "n_bins": n_bins, "additive_bins": additive_bins, "columns": out,
            "dependence": _dependence_summary(columns, categorical)}


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


#: The fitted attributes of :meth:`TabularEncoder.to_dict` besides the columns'
#: state and the additive term's.
_FITTED_KEYS = ("n_features_in_", "categorical_", "names_", "has_missing_", "widths_",
                "n_features_out_", "feature_groups_")

#: Input columns beyond which an encoder keeps no dependence between its columns
#: (``dependence_`` is a columns x columns matrix: 0.5 MB at this size).
MAX_DEPENDENCE_COLUMNS = 256
#: Rows of a summarized part whose normal scores enter its Gram matrix (evenly
#: spaced rows beyond: the correlations of 20,000 rows are within about 0.01).
_DEPENDENCE_ROWS = 20_000


def _normal_scores(columns, categorical):
    """The rows' normal scores: per numeric column, the standard normal quantile
    of every present value's mid-rank level among the column's present values
    (tied values share their average rank; a constant column scores 0); 0 for
    missing values and for categorical columns."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    n = len(columns[0]) if columns else 0
    rows = (np.arange(n) if n <= _DEPENDENCE_ROWS
            else np.linspace(0, n - 1, _DEPENDENCE_ROWS).astype(np.int64))
    Z = np.zeros((len(rows), len(columns)))
    for j, column in enumerate(columns):
        if categorical[j]:
            continue
        values = np.asarray(column, dtype=np.float64)[rows]
        present = ~np.isnan(values)
        m = int(present.sum())
        if m:
            Z[present, j] = ndtri((rankdata(values[present]) - 0.5) / m)
    return Z


def _dependence_summary(columns, categorical):
    """What a part of the rows contributes to ``dependence_``: its rows and the
    Gram matrix of their normal scores (None beyond ``MAX_DEPENDENCE_COLUMNS``)."""
    if len(columns) > MAX_DEPENDENCE_COLUMNS:
        return None
    Z = _normal_scores(columns, categorical)
    return {"n": int(Z.shape[0]), "gram": Z.T @ Z}


def _dependence(parts):
    """The correlation matrix of the normal scores pooled over parts'
    :func:`_dependence_summary` (None when a part has none or no row was seen);
    a column whose scores are all 0 (constant, categorical, always missing) is
    uncorrelated with the others."""
    if not parts or any(part is None for part in parts):
        return None
    n = sum(part["n"] for part in parts)
    if n < 2:
        return None
    gram = np.sum([np.asarray(part["gram"], dtype=np.float64) for part in parts], axis=0)
    scale = np.sqrt(np.clip(np.diag(gram), 0.0, None))
    live = scale > 1e-12 * max(n, 1)
    corr = np.zeros_like(gram)
    corr[np.ix_(live, live)] = gram[np.ix_(live, live)] / np.outer(scale[live], scale[live])
    np.fill_diagonal(corr, 1.0)
    return np.clip(corr, -1.0, 1.0)


def _category_rows(columns):
    """Per column, None (numeric) or its number of one-hot features, for the
    additive table's layout."""
    return [column.width if isinstance(column, CATEGORICAL) else None for column in columns]


class _Count(Interval):
    """An :class:`~sklearn.utils._param_validation.Interval` that rejects
    booleans, as the estimators' constraints do (``n_bins=True`` is a mistake)."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


def _unique_names(names):
    """``names`` with every repeated one but the first suffixed ``__1``,
    ``__2``... (never a name of the list)."""
    used = set(names)
    seen, out = set(), []
    for name in names:
        if name in seen:
            k = 1
            while f"{name}__{k}" in used:
                k += 1
            name = f"{name}__{k}"
            used.add(name)
        seen.add(name)
        out.append(name)
    return out


class TabularEncoder(TransformerMixin, BaseEstimator):
    """Input encoding of the soft tree ensembles: raw tabular columns to float32 features.

    A scikit-learn transformer: :meth:`fit` takes an array or a DataFrame as
    the estimators do (numbers, strings, pandas categories, datetimes,
    missing values), :meth:`transform` returns the float32 features the
    trees split on. The estimators fit one in ``fit`` (their ``encoder_``
    attribute, built from their ``numeric_encoding``, ``n_bins``,
    ``categorical_features``, ``max_categories`` and ``additive_bins``) and
    apply it in every prediction method, so that raw data needs no
    preprocessing. Fitted once and given to several estimators as their
    ``encoder`` parameter, it is their shared encoding: models fitted on
    different rows then encode alike and merge at no extra feature cost
    (:func:`~sktree_lmc.merge_estimators`). It is also a Pipeline step.

    Numeric columns are encoded by ``numeric_encoding``; categorical columns
    are one-hot encoded, with an "infrequent" feature beyond
    ``max_categories`` categories; a column that had missing values in
    ``fit`` gets a missing-indicator feature (details in the module
    docstring and in the user guide, "Input encoding and the training
    recipe").

    Every input column owns a contiguous range of the output features
    (``feature_groups_``), which is how ``max_features`` draws whole input
    columns per tree. The fitted state is plain arrays, so that two models
    can be checked for equal encodings before they are merged: models fitted
    on the same rows with the same settings have equal encoders; models whose
    encoders differ cannot be merged (a ``ValueError`` names what differs).
    :func:`~sklearn.base.clone` of a fitted encoder is a copy that stays
    fitted (so that cloning an estimator keeps its ``encoder``); of an
    unfitted one, an unfitted encoder with the same parameters.

    Parameters
    ----------
    numeric_encoding : {"piecewise_linear", "quantile_normal", "standard", "none"}, \
            default="quantile_normal"
        Encoding of the numeric columns: the degree-1 spline ("hat") basis on
        quantile knots (one feature per knot), the quantile transform to a
        standard normal, ``(x - mean) / std``, or the value itself. The
        defaults of the encoder are the estimators' (this one and
        ``additive_bins``), so that an encoder fitted once and passed as
        ``encoder=`` gives the model the estimator would have fitted alone.
    n_bins : int, default=16
        Quantile bins of the piecewise-linear encoding (``n_bins + 1`` knots
        before removing duplicates, so fewer for columns with few distinct
        values).
    max_categories : int, default=32
        Most frequent categories kept per categorical column; the others
        share one "infrequent" feature.
    additive_bins : int in [2, 65536], sequence of int or None, \
            default=(16, 64, 256, 1024, 4096)
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
    categorical_features : "from_dtype", None, or array-like of int, bool or str, \
            default="from_dtype"
        The categorical columns of :meth:`fit`'s ``X``, as the estimators'
        parameter: ``"from_dtype"``, the pandas ``category``, string and
        object columns holding strings (in a NumPy object array, the columns
        holding strings); None, none; else indices, a boolean mask of length
        ``n_features_in_``, or column names (``X`` a DataFrame). Encoders
        fitted from a mask (inside the estimators' ``fit``, or by
        :meth:`from_summaries`) keep the default; ``categorical_`` says which
        columns are categorical.

    Attributes
    ----------
    n_features_in_ : int
        Number of input columns.
    feature_names_in_ : ndarray of str of shape (`n_features_in_`,)
        Names of the input columns, when fitted on a DataFrame whose column
        names are all strings (``names_`` as an array; absent otherwise).
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
        ``tree_params_.split_weight``, and the length of
        :meth:`get_feature_names_out`.
    feature_groups_ : ndarray of int of shape (`n_features_out_`,)
        The input column of each output feature.
    dependence_ : ndarray of shape (`n_features_in_`, `n_features_in_`) or None
        The correlations of the numeric columns' normal scores (each value's
        quantile level mapped to a standard normal; categorical columns and
        missing values score 0): a summary of how the columns vary together,
        beside the columns' own distributions. Merges draw their probe rows
        from it (a Gaussian copula), so that the rows on which models fitted
        apart are compared lie where data lies. None beyond
        ``MAX_DEPENDENCE_COLUMNS`` (256) input columns.
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
    column_kinds_ : list of str or None
        Per column, the name of its kind in
        :data:`~._column_encodings.COLUMN_KINDS` when it is not the one
        that ``numeric_encoding`` and ``categorical_`` give (a union of
        encoders, :func:`~._common_encoding.common_encoder`); None (absent
        from :meth:`to_dict`) for a fitted encoder.
    column_encodings_ : list of ColumnEncoding
        Per column, its fitted encoding (of the class of its kind in
        :data:`~._column_encodings.COLUMN_KINDS`), which holds the column's
        state; ``knots_``, ``center_``, ``scale_``, ``categories_``,
        ``has_infrequent_``, ``quantile_transformers_`` and ``stacked_`` are
        read from them.
    additive_term_ : AdditiveBins
        The additive term's bins (:class:`~._additive_bins.AdditiveBins`),
        whose state the ``additive_*`` attributes read.
    stacked_ : dict of int to list
        Only with a ``"stacked"`` column: its sub-encodings, pairs of a
        numeric kind's name and its state
        (:class:`~._column_encodings.StackedColumns`).

    See Also
    --------
    SoftTreeEnsembleClassifier : Fits one in ``fit``, as ``encoder_``, or takes a
        fitted one as ``encoder``.
    SoftTreeEnsembleRegressor : Fits one in ``fit``, as ``encoder_``, or takes a
        fitted one as ``encoder``.

    Examples
    --------
    An encoder fitted on a DataFrame with a numeric column, a string column
    and missing values:

    >>> import numpy as np
    >>> import pandas as pd
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, TabularEncoder, merge_estimators
    >>> X = pd.DataFrame({
    ...     "size": [1.0, 2.5, np.nan, 4.0, 5.5, 6.0, 7.5, 9.0],
    ...     "color": ["red", "blue", "red", None, "green", "blue", "red", "green"],
    ... })
    >>> y = np.array([0, 0, 0, 1, 1, 1, 1, 0])
    >>> enc = TabularEncoder("piecewise_linear", additive_bins=None).fit(X)
    >>> enc.categorical_.tolist(), enc.has_missing_.tolist()
    ([False, True], [True, True])
    >>> enc.categories_[1].tolist()
    ['blue', 'green', 'red']

    With the piecewise-linear encoding (the default, ``"quantile_normal"``,
    gives one feature per numeric column), "size" has 7 distinct values, hence
    7 knots and 7 hat features, plus its missing indicator; "color" has 3 categories plus its missing indicator.
    The trees split on these 12 features:

    >>> enc.widths_.tolist(), enc.n_features_out_
    ([8, 4], 12)
    >>> enc.feature_groups_.tolist()
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    >>> enc.get_feature_names_out()[6:].tolist()
    ['size_knot6', 'size_missing', 'color=blue', 'color=green', 'color=red', 'color_missing']
    >>> enc.transform(X).shape
    (8, 12)

    Fitted once, it is the encoding of every model given it as ``encoder``
    (each keeps a copy as ``encoder_``, untouched if ``enc`` is refitted):
    models fitted on different rows (different sites) then encode alike and
    merge without extra features. A missing value or a category unseen in
    ``fit`` is accepted at prediction time:

    >>> a = SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2, encoder=enc,
    ...                                random_state=0).fit(X[:4], y[:4])
    >>> b = SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2, encoder=enc,
    ...                                random_state=1).fit(X[4:], y[4:])
    >>> a.encoder_ is enc, a.encoder_.n_features_out_ == enc.n_features_out_  # a copy
    (False, True)
    >>> b.get_tree_params().split_weight.shape  # (trees, splits, features)
    (4, 4, 12)
    >>> merged = merge_estimators(a, b)
    >>> merged.encoder_.n_features_out_
    12
    >>> X_new = pd.DataFrame({"size": [np.nan, 3.0], "color": ["purple", "red"]})
    >>> merged.predict(X_new).shape
    (2,)

    The same encoder from summaries of parts of the rows (sites or dask
    partitions, summarized where they live, as
    :class:`ShardedSoftTreeEnsemble` does), from the column arrays of
    ``to_columns``:

    >>> from sktree_lmc.encoding._encoding import summarize, to_columns
    >>> Xn = np.array([[0.0, 1.0], [1.0, np.nan], [2.0, 3.0], [3.0, 4.0]])
    >>> settings = dict(numeric_encoding="piecewise_linear", n_bins=2, additive_bins=None)
    >>> enc = TabularEncoder(**settings).fit(Xn)
    >>> columns, categorical = to_columns(Xn)
    >>> parts = [summarize([c[:2] for c in columns], categorical, sketch_size=1001, **settings),
    ...          summarize([c[2:] for c in columns], categorical, sketch_size=1001, **settings)]
    >>> merged = TabularEncoder.from_summaries(parts, categorical, **settings)
    >>> merged.knots_[0].tolist() == enc.knots_[0].tolist() == [0.0, 1.5, 3.0]
    True
    """
    _parameter_constraints: dict = {
        "numeric_encoding": [StrOptions(set(NUMERIC_ENCODINGS))],
        "n_bins": [_Count(Integral, 1, 1024, closed="both")],
        "max_categories": [_Count(Integral, 1, None, closed="left")],
        "additive_bins": [_Count(Integral, 2, MAX_ADDITIVE_BINS, closed="both"), tuple, list,
                          None],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
    }

    def __init__(self, numeric_encoding="quantile_normal", n_bins=16, max_categories=32,
                 additive_bins=(16, 64, 256, 1024, 4096), categorical_features="from_dtype"):
        self.numeric_encoding = numeric_encoding
        self.n_bins = n_bins
        self.max_categories = max_categories
        self._additive = AdditiveBins(additive_bins)
        self.categorical_features = categorical_features

    # -- the additive term's bins (AdditiveBins), delegated -------------------------
    @property
    def additive_bins(self):
        """The additive term's setting ``additive_bins``, as given (int, sequence or None)."""
        return self._additive.additive_bins

    @additive_bins.setter
    def additive_bins(self, value):
        self._additive.additive_bins = value

    @property
    def additive_edges_(self):
        """The additive bins' inner edges per code column (None: categorical)."""
        return self._additive.edges_

    @property
    def additive_sources_(self):
        """The input column of every code column of the additive term."""
        return self._additive.sources_

    @property
    def additive_steps_(self):
        """The relative training step of every code column of the additive term."""
        return self._additive.steps_

    @property
    def additive_offsets_(self):
        """The first additive table row of every code column, then the table's size."""
        return self._additive.offsets_

    @property
    def n_additive_(self):
        """The number of rows of the additive table (0 without ``additive_bins``)."""
        return self._additive.n_additive_

    # -- scikit-learn's API ---------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit the encoding on ``X``.

        ``X`` is what the estimators take: an array or a pandas DataFrame
        of numbers, strings, pandas categories, datetimes and time deltas,
        with missing values (``NaN``, ``None``, ``pd.NA``, ``NaT``). The
        categorical columns are those of ``categorical_features``.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, n_features)
            The training input.
        y : None
            Ignored.
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
            For an invalid setting or ``categorical_features``, a value that
            is not a number (or is infinite) in a numeric column, an invalid
            ``sample_weight`` or a weight of zero for every row.
        TypeError
            For a categorical column whose values cannot be sorted or are not
            hashable.
        """
        columns, by_dtype = to_columns(X)  # first: scikit-learn's errors for a 1-D X
        names = _get_feature_names(X)  # as validate_data sets feature_names_in_
        categorical = check_categorical_features(self.categorical_features, len(columns),
                                                 names, by_dtype)
        return self._fit_columns(columns, categorical, names, sample_weight=sample_weight)

    def transform(self, X):
        """Encode ``X`` into the features the trees see.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, `n_features_in_`)
            The input, with the columns of :meth:`fit`'s (their names too,
            for a DataFrame). A missing value or a category unseen in ``fit``
            is accepted.

        Returns
        -------
        X_out : ndarray of shape (n_samples, `n_features_out_`), dtype float32
            The encoded features, named by :meth:`get_feature_names_out`.

        Raises
        ------
        ValueError
            If ``X`` has another number of columns or other column names
            than in ``fit``, or a value that is not a number (or is infinite)
            in a numeric column.
        """
        check_is_fitted(self)
        columns = to_columns(X)[0]  # first: scikit-learn's errors for a 1-D X
        validate_data(self, X, reset=False, skip_check_array=True)
        return self.transform_columns(columns)

    def get_feature_names_out(self, input_features=None):
        """Get the names of the encoded features.

        A numeric column ``x`` gives ``x`` (one feature: ``"standard"``,
        ``"quantile_normal"``, ``"none"``) or ``x_knot0``, ``x_knot1``...
        (``"piecewise_linear"``); a categorical one ``x=category`` per
        category and ``x=infrequent``; a missing indicator is ``x_missing``.
        A stacked column of a union encoder suffixes each sub-encoding's
        features with its index (``x_q_0``, ``x_q_1``). A name that would
        repeat another is suffixed ``__1``, ``__2``...

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            The input columns' names: None, ``feature_names_in_`` when
            defined, else ``x0``, ``x1``...; an array-like must match
            ``feature_names_in_`` when it is defined, else have
            `n_features_in_` names.

        Returns
        -------
        feature_names_out : ndarray of str objects of shape (`n_features_out_`,)
            One unique name per encoded feature, in the order of
            :meth:`transform`'s columns.
        """
        check_is_fitted(self)
        input_features = _check_feature_names_in(self, input_features)
        names = []
        for j, column in enumerate(self.column_encodings_):
            name = str(input_features[j])
            names += column.feature_names(name)
            if self.has_missing_[j]:
                names.append(f"{name}_missing")
        return np.asarray(_unique_names(names), dtype=object)

    @property
    def feature_names_in_(self):
        """The input columns' names (``names_`` as an array), when fitted with names."""
        names = getattr(self, "names_", None)
        if names is None:
            raise AttributeError("'TabularEncoder' object has no attribute 'feature_names_in_' "
                                 "(it was fitted without column names).")
        return np.asarray(names, dtype=object)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "n_features_in_")

    def __getstate__(self):
        """The state to pickle, in plain types only (:meth:`to_dict`, with
        ``categorical_features``), so that :mod:`skops.io` loads a standalone
        encoder with only this class trusted."""
        state = self.to_dict()
        state["categorical_features"] = self.categorical_features
        return state

    def __setstate__(self, state):
        """Restore a state of :meth:`__getstate__` (:meth:`from_dict`)."""
        super().__setstate__(vars(type(self).from_dict(state)))

    def __sklearn_clone__(self):
        # a fitted encoder given to an estimator as ``encoder`` is a fitted
        # setting: clone(estimator) keeps it fitted (a copy)
        if self.__sklearn_is_fitted__():
            return copy.deepcopy(self)
        return super().__sklearn_clone__()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # NaN is a missing value. Categorical columns (strings, pandas category)
        # are accepted too, but, as for the estimators, the ``categorical`` tag is
        # not set: in scikit-learn it marks estimators that take integer-coded
        # categories only, and makes the common checks feed such data.
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float32"]  # the output is float32
        return tags

    # -- fitting on column arrays (the package's callers) ----------------------------
    def _fit_columns(self, columns, categorical, names=None, sample_weight=None):
        """Fit the encoding on the input's column arrays.

        The same computation as :meth:`from_summaries` of the one exact
        :func:`summarize` of ``columns``; :meth:`fit` of ``X`` is this fit of
        ``to_columns(X)``.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns, as the estimators split them (one 1-D array
            per input column: float64 with NaN for numeric columns, object
            otherwise).
        categorical : ndarray of bool
            Which columns are categorical.
        names : sequence of str, default=None
            Column names, for error messages (and ``feature_names_in_``).
        sample_weight : array-like of shape (n_samples,), default=None
            See :meth:`fit`.

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

    def additive_row_steps(self):
        """The relative training step of every row of the additive table.

        Returns
        -------
        steps : ndarray of shape (`n_additive_`,)
            ``additive_steps_`` of each row's code column: 1 with one
            resolution; with several, ``sqrt(min(additive_bins) / bins)`` of
            the row's resolution.
        """
        return self._additive.row_steps()

    @classmethod
    def from_summaries(cls, summaries, categorical, names=None, *,
                       numeric_encoding="quantile_normal", n_bins=16, max_categories=32,
                       additive_bins=(16, 64, 256, 1024, 4096)):
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

        ``numeric_encoding="quantile_normal"`` is exact when every part sent
        its values (exact summaries); from quantile sketches it is an
        approximation, with a ``UserWarning``: the transform is fitted on the
        merged sketch's quantiles, so the quantile level it gives a value is
        within ``1 / (sketch_size - 1)`` of the exact fit's (the mixture of
        the parts' interpolated quantile functions is that close to the
        pooled one), and the normal output, steep in the tails, moves more
        there; see ``docs/sharded.md``, "Data that stays where it lives:
        dask collections", for their sizes.

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
        TypeError
            If ``summaries`` is not a list of :func:`summarize` dicts.
        ValueError
            If the summaries do not match each other or the settings.

        Warns
        -----
        UserWarning
            For ``numeric_encoding="quantile_normal"`` from quantile sketches
            (an approximation, see above).
        """
        if isinstance(summaries, (str, bytes, dict)) or not hasattr(summaries, "__iter__"):
            raise TypeError("summaries must be a list of the dicts that summarize() returns, "
                            f"one per part of the rows; got a {type(summaries).__name__}.")
        summaries = list(summaries)
        for i, summary in enumerate(summaries):
            if not (isinstance(summary, dict) and isinstance(summary.get("columns"), list)):
                what = ("a dict without the 'columns' of a summary"
                        if isinstance(summary, dict) else f"a {type(summary).__name__}")
                raise TypeError("summaries must be a list of the dicts that summarize() "
                                f"returns; item {i} is {what}.")
        enc = cls(numeric_encoding, n_bins, max_categories, additive_bins)
        enc._check_additive_bins()
        enc = enc._fit_summaries(summaries, categorical, names)
        enc._warn_if_sketched(summaries)
        return enc

    def _warn_if_sketched(self, summaries):
        """The ``UserWarning`` of a quantile-normal encoder fitted from
        quantile sketches (see :meth:`from_summaries`)."""
        if self.numeric_encoding != "quantile_normal":
            return
        sizes = {j: len(column["quantiles"]) for summary in summaries
                 for j, column in enumerate(summary["columns"])
                 if column.get("kind") != "categorical" and column.get("values") is None
                 and column.get("quantiles") is not None}
        if not sizes:
            return
        bound = 1.0 / (min(sizes.values()) - 1)
        warnings.warn(
            "TabularEncoder.from_summaries: numeric_encoding='quantile_normal' fitted from "
            f"quantile sketches (column(s) {[self._name(j) for j in sorted(sizes)][:5]}) is "
            f"approximate: a value's quantile level is within {bound:.3g} (1 / (sketch_size "
            "- 1)) of the exact fit's, and the normal output can differ more in the tails. "
            "Summarize the parts with a larger sketch_size, or exactly (sketch_size=None), "
            "for the exact transform.", UserWarning, stacklevel=3)

    def _fit_summaries(self, summaries, categorical, names):
        categorical = np.asarray(categorical, dtype=bool).copy()
        if not summaries:
            raise ValueError("from_summaries needs at least one summary.")
        for i, summary in enumerate(summaries):
            for key, value in (("numeric_encoding", self.numeric_encoding),
                               ("n_bins", self.n_bins),
                               ("additive_bins", self.additive_bins)):
                if (not same_additive_bins(summary.get(key), value) if key == "additive_bins"
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
        names = None if names is None else [str(n) for n in names]
        columns, has_missing = [], np.zeros(len(categorical), dtype=bool)
        for j, kind in enumerate(self._default_kinds(categorical)):
            parts = [summary["columns"][j] for summary in summaries]
            columns.append(kind.fit(parts, name=column_name(names, j), n_bins=self.n_bins,
                                    max_categories=self.max_categories))
            has_missing[j] = any(part["has_missing"] for part in parts)
        additive = AdditiveBins(self.additive_bins).fit(summaries, _category_rows(columns))
        dependence = _dependence([summary.get("dependence") for summary in summaries])
        return self._set_columns(columns, has_missing, categorical, names, additive,
                                 dependence=dependence)

    def _default_kinds(self, categorical):
        """The kind of every column of a fit: ``numeric_encoding``'s or the
        categorical one."""
        numeric = NUMERIC_ENCODINGS[self.numeric_encoding]
        return [CATEGORICAL if c else numeric for c in categorical]

    def _set_columns(self, columns, has_missing, categorical, names, additive, *,
                     dependence=None):
        """Hold fitted columns and additive bins: the fitted state, and the
        layout of the output features (widths, feature groups)."""
        self.dependence_ = None if dependence is None else np.asarray(dependence,
                                                                      dtype=np.float64)
        self.n_features_in_ = len(columns)
        self.categorical_ = np.asarray(categorical, dtype=bool).copy()
        self.names_ = None if names is None else list(names)
        self.has_missing_ = np.asarray(has_missing, dtype=bool).copy()
        self.column_encodings_ = list(columns)
        self._additive = additive
        widths = [column.width + int(self.has_missing_[j]) for j, column in enumerate(columns)]
        self.widths_ = np.asarray(widths, dtype=np.int64)
        self.n_features_out_ = int(self.widths_.sum())
        self.feature_groups_ = np.repeat(np.arange(self.n_features_in_), self.widths_)
        return self

    @classmethod
    def from_columns(cls, columns, has_missing, *, categorical, additive, names=None,
                     dependence=None, **params):
        """Build a fitted encoder from fitted columns and additive bins.

        How an encoder is assembled from parts fitted or united elsewhere
        (:func:`~._common_encoding.common_encoder`).

        Parameters
        ----------
        columns : list of ColumnEncoding
            Every input column's fitted encoding.
        has_missing : array-like of bool
            Which columns have a missing indicator.
        categorical : array-like of bool
            Which columns are categorical.
        additive : AdditiveBins
            The fitted additive bins (their ``additive_bins`` is the
            encoder's).
        names : list of str or None, default=None
            Column names.
        dependence : ndarray of shape (n_columns, n_columns) or None, default=None
            The columns' ``dependence_`` (None: unknown).
        **params
            The encoder's other settings (``numeric_encoding``, ``n_bins``,
            ``max_categories``, ``categorical_features``).

        Returns
        -------
        encoder : TabularEncoder
            The fitted encoder.
        """
        enc = cls(additive_bins=additive.additive_bins, **params)
        return enc._set_columns(columns, has_missing, categorical, names, additive,
                                dependence=dependence)

    # -- the fitted state, by column -------------------------------------------------
    @property
    def additive_term_(self):
        """AdditiveBins: The additive term's bins (setting and fitted state)."""
        return self._additive

    @property
    def column_kinds_(self):
        """Per column, the name of its kind when it is not the one that
        ``numeric_encoding`` and ``categorical_`` give (a union encoder's);
        None otherwise (and before fit)."""
        columns = getattr(self, "column_encodings_", None)
        if columns is None:
            return None
        kinds = [column.name for column in columns]
        default = [kind.name for kind in self._default_kinds(self.categorical_)]
        return None if kinds == default else kinds

    def _state_list(self, key):
        return column_state_lists(self.column_encodings_)[key]

    @property
    def knots_(self):
        """Per column, the knots of ``"piecewise_linear"`` (list of ndarray or None)."""
        return self._state_list("knots_")

    @property
    def center_(self):
        """Per column, the mean of ``"standard"`` (list of float or None)."""
        return self._state_list("center_")

    @property
    def scale_(self):
        """Per column, the standard deviation of ``"standard"`` (list of float or None)."""
        return self._state_list("scale_")

    @property
    def categories_(self):
        """Per column, the categories with a feature (list of ndarray or None)."""
        return self._state_list("categories_")

    @property
    def has_infrequent_(self):
        """The categorical columns with an "infrequent" feature (ndarray of bool)."""
        return self._state_list("has_infrequent_")

    @property
    def quantile_transformers_(self):
        """The transforms of ``"quantile_normal"`` (dict of int to QuantileTransformer)."""
        return self._state_list("quantile_transformers_")

    @property
    def stacked_(self):
        """The sub-encodings of the stacked columns, if any (dict of int to list)."""
        stacked = column_state_lists(self.column_encodings_).get("stacked_")
        if stacked is None:
            raise AttributeError("'TabularEncoder' object has no attribute 'stacked_' (it has "
                                 "no stacked column).")
        return stacked

    def _name(self, j):
        return column_name(self.names_, j)

    def column_label(self, j):
        """Return column ``j``'s name for messages (quoted), or its index.

        Parameters
        ----------
        j : int
            An input column.

        Returns
        -------
        label : str
            The column's name, quoted, or its index when the columns have no names.
        """
        return self._name(j)

    @classmethod
    def identity(cls, n_features):
        """Build the fitted identity encoder of ``n_features`` numeric columns.

        ``numeric_encoding="none"``, no missing value and no additive term:
        the encoded rows are the input rows.

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
        none = np.zeros(n_features, dtype=bool)
        additive = AdditiveBins(enc.additive_bins).fit([], [None] * n_features)
        return enc._set_columns([NoneColumns() for _ in range(n_features)], none, none, None,
                                additive)

    def to_dict(self):
        """Return the settings and fitted state as a plain dict.

        The estimators pickle their encoder this way, so that loading with
        ``skops.io`` does not need this class trusted.

        Returns
        -------
        state : dict
            The settings and fitted attributes (the columns' states as
            per-column lists, ``knots_``, ``center_``, ``scale_``,
            ``categories_``, ``has_infrequent_``, ``quantile_transformers_``,
            and for a union ``column_kinds_`` and ``stacked_``; the additive
            term's under their ``additive_*`` and ``n_additive_`` names;
            ``categorical_features`` only when it is not the default
            ``"from_dtype"``, so that the estimators' encoders keep the
            layout of their pickles).
        """
        state = {"numeric_encoding": self.numeric_encoding, "n_bins": self.n_bins,
                 "max_categories": self.max_categories}
        if not _is_from_dtype(self.categorical_features):
            state["categorical_features"] = self.categorical_features
        if self.__sklearn_is_fitted__():
            state.update({key: getattr(self, key) for key in _FITTED_KEYS})
            state["dependence_"] = getattr(self, "dependence_", None)
            state.update(column_state_lists(self.column_encodings_))
            if self.column_kinds_ is not None:
                state["column_kinds_"] = self.column_kinds_
        state.update(self._additive.to_dict())
        return state

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
        state = dict(state)
        additive = AdditiveBins.from_dict(
            {key: state.pop(key) for key in AdditiveBins.STATE_KEYS if key in state})
        enc = cls(**{key: state[key] for key in ("numeric_encoding", "n_bins", "max_categories",
                                                 "categorical_features") if key in state})
        enc._additive = additive
        if "n_features_in_" not in state:
            return enc
        kinds = state.get("column_kinds_")
        if kinds is None:
            kinds = [kind.name for kind in enc._default_kinds(state["categorical_"])]
        columns = columns_from_state_lists(state, kinds)
        return enc._set_columns(columns, state["has_missing_"], state["categorical_"],
                                state["names_"], additive,
                                dependence=state.get("dependence_"))

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
        out = np.full(self.n_features_out_, np.nan)
        offset = 0
        for j, column in enumerate(self.column_encodings_):
            ramp = column.ramp()
            if ramp is not None:
                out[offset : offset + len(ramp)] = ramp
            offset += int(self.widths_[j])
        return None if np.isnan(out).all() else out

    def _column_export(self, j):
        """How the exported torch module encodes column ``j``: ``(form, args)``
        of :meth:`~._column_encodings.ColumnEncoding.export_form`."""
        return self.column_encodings_[j].export_form()

    @property
    def is_identity(self):
        """bool: Whether the encoding returns its inputs unchanged.

        True for ``numeric_encoding="none"`` without categorical columns and
        without missing values in ``fit`` (with ``column_kinds_``: every
        column of kind ``"none"``, without missing indicator).
        """
        return (all(column.identity for column in self.column_encodings_)
                and not self.has_missing_.any())

    # -- transforming ---------------------------------------------------------------
    def transform_columns(self, columns, start=0, stop=None, skip=None):
        """Encode rows ``start:stop`` of the column arrays.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns, as split by the estimators (one 1-D array per
            input column: float64 for numeric columns, object otherwise).
        start, stop : int, default=0 and None
            The rows to encode (``stop=None``: to the end).
        skip : ndarray of bool of shape (`n_features_in_`,) or None, default=None
            Columns whose features a model multiplies by zero only: a numeric
            one is checked but not encoded (its features stay 0).

        Returns
        -------
        encoded : ndarray of shape (stop - start, `n_features_out_`), dtype float32
            The features the trees see.
        """
        return self._transform(columns, start, stop, skip)[0]

    def _transform(self, columns, start=0, stop=None, skip=None, search=None):
        """:meth:`transform_columns`, and ``searched``: for the columns ``j``
        of ``search`` (a dict of their additive edges), ``(bins, missing)``
        where their kind found the bins in ``search[j]`` in the same search
        as their features
        (:meth:`~._column_encodings._NumericColumns.transform_searched`)."""
        search = search or {}
        n = len(columns[0]) if columns else 0
        stop = n if stop is None else min(stop, n)
        out = np.zeros((stop - start, self.n_features_out_), dtype=np.float32)
        columns_ = self.column_encodings_
        offset = 0
        searched = {}
        for j, col in enumerate(columns):
            width = int(self.widths_[j])
            block = out[:, offset : offset + width]
            offset += width
            has_missing = bool(self.has_missing_[j])
            column = columns_[j]
            if skip is not None and skip[j] and column.check(col[start:stop], self._name(j)):
                continue
            args = (col[start:stop], self._name(j), block[:, : width - int(has_missing)])
            if j in search:
                missing, codes = column.transform_searched(*args, search[j])
                if codes is not None:
                    searched[j] = codes, missing
            else:
                missing = column.transform(*args)
            if has_missing:
                block[:, -1] = missing
        return out, searched

    def encode(self, columns, start=0, stop=None, skip=None, code_columns=None):
        """Encode rows ``start:stop`` and find their additive codes.

        Each value is searched once where its column's kind allows:
        :meth:`transform_columns` and :meth:`additive_codes` in one call: a
        quantile-encoded column (``"quantile_normal"``) finds its additive
        bins in the search of its features (over the union of its quantiles
        and its finest additive edges), so its codes cost a gather instead of
        a second binary search. The result equals the two calls'.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns (see :meth:`transform_columns`).
        start, stop : int, default=0 and None
            The rows (``stop=None``: to the end).
        skip : ndarray of bool or None, default=None
            See :meth:`transform_columns`.
        code_columns : sequence of int or None, default=None
            See :meth:`additive_codes`.

        Returns
        -------
        encoded : ndarray of shape (stop - start, `n_features_out_`), dtype float32
            The features (:meth:`transform_columns`).
        codes : ndarray of shape (stop - start, J), dtype int32, or None
            The additive codes (:meth:`additive_codes`), an array of their
            own; None without an additive term.
        """
        if self.additive_offsets_ is None:
            return self.transform_columns(columns, start, stop, skip), None
        sources = self.additive_sources_
        wanted = sources if code_columns is None else sources[np.asarray(code_columns, dtype=int)]
        search = {int(j): self._additive.search_edges(int(j)) for j in np.unique(wanted)}
        search = {j: edges for j, edges in search.items() if edges is not None}
        encoded, searched = self._transform(columns, start, stop, skip, search)
        codes = self._additive.codes(columns, start, stop, encodings=self.column_encodings_,
                                     names=self.names_, code_columns=code_columns,
                                     searched=searched)
        return encoded, codes

    def additive_codes(self, columns, start=0, stop=None, code_columns=None):
        """The additive table's row of every value of rows ``start:stop``.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns (see :meth:`transform_columns`).
        start, stop : int, default=0 and None
            The rows (``stop=None``: to the end).
        code_columns : sequence of int or None, default=None
            Only these code columns, in this order (None: all ``J``): a
            model skips those whose table rows are all zero.

        Returns
        -------
        codes : ndarray of shape (stop - start, J), dtype int32
            Table rows (the additive term's input, which the estimators keep
            apart from the encoded features), one column per code column (input column ``additive_sources_[c]`` at one
            resolution; ``J = n_features_in_`` with one resolution); code
            column ``c``'s rows start at ``additive_offsets_[c]``.

        Raises
        ------
        ValueError
            If the encoder has no additive term.
        """
        return self._additive.codes(columns, start, stop, encodings=self.column_encodings_,
                                    names=self.names_, code_columns=code_columns)

    def _finest_additive_columns(self):
        """``{column: code column}`` of the columns whose additive bins nest
        (:meth:`AdditiveBins.finest <._additive_bins.AdditiveBins.finest>`)."""
        return self._additive.finest()

    def encode_chunks(self, columns, chunk_rows=ENCODE_CHUNK_ROWS, skip=None, codes=False,
                      code_columns=None):
        """Encode the column arrays chunk by chunk (:meth:`encode` per chunk).

        The encoded copy of a large input is then never held whole.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns (see :meth:`transform_columns`).
        chunk_rows : int, default=16384
            Rows per chunk.
        skip : ndarray of bool or None, default=None
            See :meth:`transform_columns`.
        codes : bool, default=False
            Whether to find the additive codes too.
        code_columns : sequence of int or None, default=None
            See :meth:`additive_codes` (with ``codes`` only).

        Yields
        ------
        start : int
            The first row of the chunk.
        encoded : ndarray of shape (n_rows, `n_features_out_`), dtype float32
            The chunk's features.
        codes : ndarray of shape (n_rows, J), dtype int32, or None
            Its additive codes; None without ``codes`` or an additive term.
        """
        n = len(columns[0]) if columns else 0
        for start in range(0, n, chunk_rows):
            stop = start + chunk_rows
            if codes:
                yield (start, *self.encode(columns, start, stop, skip, code_columns))
            else:
                yield start, self.transform_columns(columns, start, stop, skip), None


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
    kind = NUMERIC_ENCODINGS.get(a.numeric_encoding)
    binned = kind is not None and kind.uses_n_bins
    for attr in ("numeric_encoding", "n_bins", "max_categories", "n_features_in_",
                 "additive_bins"):
        if attr == "n_bins" and not binned:
            continue  # only the piecewise-linear encoding has bins
        if attr == "additive_bins":  # the resolutions, in any order
            if not same_additive_bins(a.additive_bins, b.additive_bins):
                return f"{attr} differs: {a.additive_bins!r} vs {b.additive_bins!r}"
        elif getattr(a, attr, None) != getattr(b, attr, None):
            return f"{attr} differs: {getattr(a, attr, None)!r} vs {getattr(b, attr, None)!r}"
    for attr in ("categorical_", "has_missing_", "has_infrequent_", "widths_"):
        if not np.array_equal(getattr(a, attr), getattr(b, attr)):
            cols = np.flatnonzero(np.asarray(getattr(a, attr)) != np.asarray(getattr(b, attr)))
            return f"{attr.rstrip('_')} differs in column(s) {cols.tolist()}"
    kinds_a = [column.name for column in a.column_encodings_]
    kinds_b = [column.name for column in b.column_encodings_]
    if kinds_a != kinds_b:
        cols = [j for j, (x, y) in enumerate(zip(kinds_a, kinds_b)) if x != y]
        return f"the encoding differs in column(s) {cols}"
    for j, (ca, cb) in enumerate(zip(a.column_encodings_, b.column_encodings_)):
        sentence = ca.difference(cb, a._name(j))
        if sentence is not None:
            return sentence
    # last: the trees' features first, then the additive term's bins
    return a.additive_term_.difference(b.additive_term_, a.names_) if additive else None


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
    additive, rows = AdditiveBins.union([enc.additive_term_ for enc in encoders])
    params = {key: value for key, value in ref.get_params().items() if key != "additive_bins"}
    union = TabularEncoder.from_columns(
        copy.deepcopy(ref.column_encodings_), ref.has_missing_, categorical=ref.categorical_,
        additive=additive, names=copy.deepcopy(ref.names_), **params)
    return union, rows

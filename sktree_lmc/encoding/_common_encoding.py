"""One input encoding for models fitted apart: the union of their encoders.

Every estimator fits its own encoder (``encoder_``, a
:class:`~sktree_lmc.encoding._encoding.TabularEncoder`) on its own rows, so models
fitted on different rows split on different features and cannot be merged
as they are. The trees use their features linearly (a split's
pre-activation is ``W[m, n] @ f(x) + b[m, n]``), so a model stays the same
function on another encoding ``f_U`` whenever its own features are an affine
function of ``f_U`` on every input: ``f_i(x) = T_i f_U(x) + t_i`` gives
``W @ f_i(x) + b = (W @ T_i) @ f_U(x) + (b + W @ t_i)``.
:func:`common_encoder` builds such a union ``f_U`` of several encoders and,
per encoder, its translation ``(T_i, t_i)``, so that models fitted apart
become models on one encoding, to be matched and merged there.

The union is built column by column and, within a column, per kind of
encoding, by the kind's entry of :data:`UNIONS` (a kind's encodings of the
column in every encoder in, the union's encodings of that kind and every
encoder's map into them out):

=====================  ==========================================================
kind                   union, and the map of encoder ``i``
=====================  ==========================================================
``"none"``             the value itself; the identity
``"standard"``         one center and scale (the parents' common values, else
                       the scales' mean and the center that keeps every
                       parent's shift smallest): ``(x - m_i) / s_i = (s_U / s_i) u +
                       (m_U - m_i) / s_i``, the shift taken back on a missing
                       row through the union's missing indicator (which the
                       union then has)
``"piecewise_linear"`` the union of the knots: encoder ``i``'s hat functions
                       are piecewise linear with knots among the union's, so
                       exactly their interpolants on the union's hat basis
                       (both clamp outside their knots: below the union's first
                       knot both are at their first knot's values)
``"quantile_normal"``  no exact union (``Phi^-1(F_i(x))`` is no linear function
                       of ``Phi^-1(F_k(x))``): the distinct transforms side by
                       side, a ``"stacked"`` column
                       (:class:`~._column_encodings.StackedColumns`); encoder
                       ``i``'s feature is its own sub-block's
``"one_hot"``          the union of the categories, with an infrequent feature
                       when an encoder has one: a union category's feature is
                       encoder ``i``'s feature of the category, else its
                       infrequent feature, else nothing; the union's infrequent
                       feature is encoder ``i``'s, or nothing
=====================  ==========================================================

Columns of different numeric kinds in different encoders (``"standard"`` in
one, ``"piecewise_linear"`` in another) are stacked the same way: each
kind's union is a sub-block. A column's missing indicator is in the union
when an encoder has one or a shift needs it; an encoder without one weighs
it 0 (after the shift's correction). The additive term's bins are the union
of the edges (:meth:`~._additive_bins.AdditiveBins.union`; a categorical
column's rows follow its union categories as its one-hot features do).

Everything is exact: the translated weights give the same pre-activations
on every input (present and missing values, categories unseen by one
encoder or by all, values beyond the fitted ranges), up to float32
rounding of the features. Only a column count, column names, a column
categorical in one encoder and numeric in another, or different additive
resolutions cannot be united: :func:`common_encoder` raises one
``ValueError`` listing every such difference.

:func:`function_view` makes weights of models whose features sit in
different sub-blocks comparable, to match their trees: the inner products of
the weights become those of the functions the splits compute on probe rows.
:func:`matching_view` sums the sub-blocks of every stacked column instead
(the raw coefficients of weight matching without the features' scales).
"""

from __future__ import annotations

import numpy as np

from ._additive_bins import AdditiveBins, same_additive_bins
from ._column_encodings import (
    COLUMN_KINDS,
    STACKED,
    OneHotColumns,
    column_name,
    union_column,
)
from ._encoding import TabularEncoder, encoders_differ

__all__ = ["UNIONS", "EncodingTranslation", "common_encoder", "feature_scales", "function_view",
           "matching_view", "probe_columns"]


#: The union of each kind of encoding, by name: ``union(columns, name)`` (the
#: kind's :meth:`~._column_encodings.ColumnEncoding.union`) takes the fitted
#: columns of one column's encodings of that kind (one per encoder, more for
#: an encoder whose column is already stacked) and the column's name (for
#: error messages), and returns the union's encodings of that kind (its
#: sub-encodings of the column: one when the union is exact) and, per given
#: column, its :class:`~._column_encodings.ColumnMap`.
UNIONS = {name: kind.union for name, kind in COLUMN_KINDS.items() if kind is not STACKED}


def _union_column(encoders, j):
    """The union of column ``j`` of every encoder.

    Returns
    -------
    column : ColumnEncoding
        The union's encoding of the column.
    has_missing : bool
        Whether the union's column has a missing indicator.
    blocks : list of (ndarray, ndarray)
        Per encoder, ``(T, t)`` of its column: its column's features are
        ``T @ union column features + t``.
    """
    parents = [enc.column_encodings_[j] for enc in encoders]
    union, maps = union_column(parents, column_name(encoders[0].names_, j))
    widths = [part.width for part in union.sub_encodings()]
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    has_missing = bool(any(enc.has_missing_[j] for enc in encoders)
                       or any(np.any(m.indicator != 0) for parent in maps for m in parent))
    width = int(starts[-1]) + int(has_missing)
    blocks = []
    for enc, parent, parent_maps in zip(encoders, parents, maps):
        own = [part.width for part in parent.sub_encodings()]
        own_starts = np.concatenate([[0], np.cumsum(own)]).astype(int)
        T = np.zeros((int(own_starts[-1]) + int(enc.has_missing_[j]), width))
        t = np.zeros(T.shape[0])
        for p, m in enumerate(parent_maps):
            rows = slice(own_starts[p], own_starts[p + 1])
            T[rows, starts[m.sub]:starts[m.sub + 1]] = m.matrix
            t[rows] = m.offset
            if has_missing:
                T[rows, -1] = m.indicator
        if enc.has_missing_[j]:
            T[-1, -1] = 1.0
        blocks.append((T, t))
    return union, has_missing, blocks


def _incompatibilities(encoders):
    """Every difference between the encoders that no union can express."""
    problems = []
    ref = encoders[0]
    for i, enc in enumerate(encoders[1:], 1):
        if enc.n_features_in_ != ref.n_features_in_:
            problems.append(f"encoder {i} has {enc.n_features_in_} input columns, encoder 0 "
                            f"has {ref.n_features_in_}")
            continue
        if (enc.names_ is None) != (ref.names_ is None) or (
                enc.names_ is not None and list(enc.names_) != list(ref.names_)):
            problems.append(f"the column names of encoder {i} ({enc.names_}) are not those of "
                            f"encoder 0 ({ref.names_})")
        cols = np.flatnonzero(np.asarray(enc.categorical_) != np.asarray(ref.categorical_))
        for j in cols.tolist():
            kinds = ["categorical" if e.categorical_[j] else "numeric" for e in (ref, enc)]
            problems.append(f"column {ref.column_label(j)} is {kinds[0]} in encoder 0 and "
                            f"{kinds[1]} in encoder {i}")
        if not same_additive_bins(enc.additive_bins, ref.additive_bins):
            problems.append(f"additive_bins is {enc.additive_bins!r} in encoder {i} and "
                            f"{ref.additive_bins!r} in encoder 0")
    return problems


class EncodingTranslation:
    """One encoder's features as an affine function of a union's.

    ``f_i(x) = matrix @ f_U(x) + offset`` for every input row, where
    ``f_i`` is the encoder's ``transform`` and ``f_U`` the union's (up to
    float32 rounding of both). Built by :func:`common_encoder`.

    Parameters
    ----------
    matrix : ndarray of shape (F_i, F_U) or None
        None: the identity (the union is the encoder itself).
    offset : ndarray of shape (F_i,) or None
        None: zeros.
    additive_rows : ndarray of int of shape (n_additive_U,) or None
        See the attribute.

    Attributes
    ----------
    matrix : ndarray of shape (F_i, F_U) or None
        Block diagonal by input column (an input column's features depend
        only on the same column's union features); None for the identity.
    offset : ndarray of shape (F_i,) or None
        Nonzero only for ``"standard"`` columns whose center differs from
        the union's; None for zeros.
    additive_rows : ndarray of int of shape (n_additive_U,) or None
        The row of the encoder's additive table that every row of the
        union's takes: ``table_i[additive_rows]`` indexed by the union's
        :meth:`~TabularEncoder.additive_codes` gives the encoder's additive
        output exactly. None without an additive term.
    is_identity : bool
        Whether :meth:`weights` returns its arguments unchanged.
    """

    def __init__(self, matrix, offset=None, additive_rows=None):
        self.matrix = None if matrix is None else np.asarray(matrix, dtype=np.float64)
        self.offset = (None if offset is None or not np.any(offset)
                       else np.asarray(offset, dtype=np.float64))
        self.additive_rows = additive_rows

    def __repr__(self):
        shape = "identity" if self.matrix is None else f"{self.matrix.shape}"
        return f"EncodingTranslation({shape})"

    @property
    def is_identity(self):
        """bool: Whether :meth:`weights` returns its arguments unchanged."""
        return self.matrix is None and self.offset is None

    def weights(self, W, b):
        """Return split weights and biases re-expressed on the union's features.

        Parameters
        ----------
        W : ndarray or torch.Tensor of shape (..., F_i)
            Split weights on the encoder's features (e.g. ``(M, N, F_i)``).
        b : ndarray or torch.Tensor of shape (...)
            The split biases (e.g. ``(M, N)``).

        Returns
        -------
        W_U : ndarray or torch.Tensor of shape (..., F_U)
            ``W @ matrix``, computed in float64, of ``W``'s dtype (and
            device, for a tensor).
        b_U : ndarray or torch.Tensor of shape (...)
            ``b + W @ offset``, of ``b``'s dtype: ``b`` itself when there
            is no offset. ``W_U @ f_U(x) + b_U == W @ f_i(x) + b`` for
            every input row, up to float32 rounding. The identity returns
            ``W`` and ``b`` themselves.
        """
        if self.is_identity:
            return W, b
        if hasattr(W, "detach"):  # a torch tensor: through NumPy, back to its dtype/device
            import torch

            w_np, b_np = W.detach().cpu().numpy(), b.detach().cpu().numpy()
            W_U, b_U = self.weights(w_np, b_np)
            return (torch.as_tensor(W_U, device=W.device),
                    b if b_U is b_np else torch.as_tensor(b_U, device=b.device))
        W = np.asarray(W)
        W64 = W.astype(np.float64)
        W_U = W64 @ self.matrix if self.matrix is not None else W64
        b_U = b if self.offset is None else (
            np.asarray(b, dtype=np.float64) + W64 @ self.offset).astype(np.asarray(b).dtype)
        return W_U.astype(W.dtype), b_U

    def features(self, encoded):
        """Return the encoder's features from the union's.

        Parameters
        ----------
        encoded : ndarray of shape (n, F_U)
            The union's ``transform`` of some rows.

        Returns
        -------
        features : ndarray of float64 of shape (n, F_i)
            The encoder's ``transform`` of the same rows, up to float32
            rounding.
        """
        encoded = np.asarray(encoded, dtype=np.float64)
        out = encoded if self.matrix is None else encoded @ self.matrix.T
        return out if self.offset is None else out + self.offset


def _mean_dependence(encoders):
    """The union's ``dependence_``: the mean of the encoders' (None when one has none)."""
    matrices = [getattr(enc, "dependence_", None) for enc in encoders]
    if any(m is None for m in matrices):
        return None
    return np.mean(matrices, axis=0)


def common_encoder(encoders):
    """Return the union of fitted encoders and every encoder's translation.

    Parameters
    ----------
    encoders : list of TabularEncoder
        Fitted encoders of the same input columns (number, names, which are
        categorical, and additive resolutions), e.g. the ``encoder_`` of
        models fitted on different rows or with different
        ``numeric_encoding``.

    Returns
    -------
    union : TabularEncoder
        A fitted encoder of the same input columns, built per column as in
        the module docstring (its ``numeric_encoding``, ``n_bins`` and
        ``max_categories`` are the first encoder's settings; a column whose
        union is not of the kind they give is in ``column_kinds_``). When
        the encoders are all equal (:func:`~._encoding.encoders_differ`),
        the first encoder itself.
    translations : list of EncodingTranslation
        Per encoder, its features as an affine function of the union's:
        :meth:`EncodingTranslation.weights` re-expresses a model's split
        weights and biases on the union's features, and
        ``additive_rows`` its additive table on the union's bins. The
        identity for equal encoders.

    Raises
    ------
    ValueError
        If the encoders differ in what no union can express: the number of
        input columns, the column names, a column categorical in one and
        numeric in another, or ``additive_bins``; the message lists every
        such difference. Also for an empty list, or a None among encoders
        (a model without encoder) unless all are None.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TabularEncoder
    >>> rng = np.random.RandomState(0)
    >>> x = rng.standard_normal(200)
    >>> a = TabularEncoder("piecewise_linear", n_bins=4).fit(x[:100, None])
    >>> b = TabularEncoder("piecewise_linear", n_bins=4).fit(x[100:, None])
    >>> union, (ta, tb) = common_encoder([a, b])
    >>> a.n_features_out_, b.n_features_out_, union.n_features_out_
    (5, 5, 10)
    >>> W, bias = rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 3))
    >>> W_U, b_U = ta.weights(W, bias)
    >>> x_new = np.array([[-9.0], [0.1], [2.0]])
    >>> bool(np.allclose(union.transform(x_new) @ W_U[0, 0] + b_U[0, 0],
    ...                  a.transform(x_new) @ W[0, 0] + bias[0, 0]))
    True
    """
    encoders = list(encoders)
    if not encoders:
        raise ValueError("common_encoder needs at least one encoder.")
    if any(enc is None for enc in encoders):
        if all(enc is None for enc in encoders):
            return None, [EncodingTranslation(None) for _ in encoders]
        raise ValueError("The encoders cannot be brought to a common encoding: some models "
                         "encode their inputs and others do not.")
    problems = _incompatibilities(encoders)
    if problems:
        raise ValueError("The encoders cannot be brought to a common encoding: "
                         + "; ".join(problems) + ".")
    ref = encoders[0]
    if all(encoders_differ(ref, enc) is None for enc in encoders[1:]):
        rows = None if ref.additive_offsets_ is None else np.arange(ref.n_additive_)
        return ref, [EncodingTranslation(None, None, rows) for _ in encoders]
    n = ref.n_features_in_
    columns, blocks = [], []
    has_missing = np.zeros(n, dtype=bool)
    for j in range(n):
        column, has_missing[j], column_blocks = _union_column(encoders, j)
        columns.append(column)
        blocks.append(column_blocks)
    additive, rows = _union_additive(columns, encoders)
    union = TabularEncoder.from_columns(
        columns, has_missing, categorical=ref.categorical_, additive=additive,
        names=None if ref.names_ is None else list(ref.names_),
        dependence=_mean_dependence(encoders),
        numeric_encoding=ref.numeric_encoding, n_bins=ref.n_bins,
        max_categories=ref.max_categories)
    translations = []
    for i, enc in enumerate(encoders):
        matrix = np.zeros((enc.n_features_out_, union.n_features_out_))
        offset = np.zeros(enc.n_features_out_)
        r = c = 0
        for j in range(n):
            T, t = blocks[j][i]
            matrix[r:r + T.shape[0], c:c + T.shape[1]] = T
            offset[r:r + T.shape[0]] = t
            r, c = r + T.shape[0], c + T.shape[1]
        if matrix.shape[0] == matrix.shape[1] and np.array_equal(
                matrix, np.eye(matrix.shape[0])):
            matrix = None  # the encoder's features are the union's: no cost
        translations.append(EncodingTranslation(matrix, offset,
                                                None if rows is None else rows[i]))
    return union, translations


def _union_additive(columns, encoders):
    """The union of the encoders' additive bins, for the union's ``columns``,
    and every encoder's ``additive_rows`` (None without an additive term)."""
    if encoders[0].additive_bins is None:
        return AdditiveBins(None).fit([], [None] * len(columns)), None
    category_rows = {}
    ref = encoders[0].additive_term_
    for c, j in enumerate(int(v) for v in ref.sources_):
        if isinstance(columns[j], OneHotColumns):
            category_rows[c] = [columns[j].additive_rows(enc.column_encodings_[j])
                                for enc in encoders]
    return AdditiveBins.union([enc.additive_term_ for enc in encoders], category_rows)


def matching_view(encoder):
    """Return the matrix that sums the sub-blocks of every stacked column.

    In a union encoder (:func:`common_encoder`) the models' weights on a
    stacked column (e.g. the quantile transforms of encoders fitted apart)
    sit in different sub-blocks: model ``a``'s on its own transform, model
    ``b``'s on another. ``W_U @ P`` adds the sub-blocks of every stacked
    column into one block (sub-block feature ``t`` to view feature ``t``:
    the block is as wide as the widest sub-block), so that the models'
    weights are comparable there, approximately (the sub-encodings are
    different functions of the value), e.g. to match their trees. The
    other features (and every missing indicator) are kept.

    Parameters
    ----------
    encoder : TabularEncoder
        A fitted encoder.

    Returns
    -------
    P : ndarray of float64 of shape (`n_features_out_`, F_view)
        A 0/1 matrix with one 1 per row; the identity for an encoder
        without a stacked column.
    """
    cols, start = [], 0
    for j, column in enumerate(encoder.column_encodings_):
        widths = [part.width for part in column.sub_encodings()]
        width = max(widths, default=0)
        for w in widths:
            cols.extend(range(start, start + w))
        if encoder.has_missing_[j]:
            cols.append(start + width)
            width += 1
        start += width
    P = np.zeros((encoder.n_features_out_, start))
    P[np.arange(len(cols)), cols] = 1.0
    return P


def probe_columns(encoder, n_rows=2048, *, missing_share=0.0, random_state=0, joint=False):
    """Rows drawn from the distribution a fitted encoder summarizes.

    An encoder fitted on training rows keeps a summary of every column (its
    quantiles, knots, moments or categories: see each kind's ``sample``).
    Each column of the probe rows holds the column's values at ``n_rows``
    evenly spaced quantile levels, in an order of its own (a random
    permutation per column): a sample of every column's marginal
    distribution, the columns independent. With ``joint`` and the encoder's
    ``dependence_``, the levels are those of a Gaussian copula instead: the
    standard normal CDF of normal draws with the correlations of
    ``dependence_``, so that the columns vary together as in the training
    rows (each column's distribution is still its own). They are the points
    on which models that saw none of each other's rows can be compared.

    Parameters
    ----------
    encoder : TabularEncoder
        A fitted encoder (a union of encoders included).
    n_rows : int, default=2048
        Rows to draw.
    missing_share : float, default=0.0
        Share of the rows, in every column that had missing values, made
        missing (``NaN``, or ``None`` in a categorical column).
    random_state : int, default=0
        Seed of the columns' orders or of the copula's draws (and of the
        missing rows).
    joint : bool, default=False
        Draw the levels from the encoder's Gaussian copula (``dependence_``;
        independent columns when it is None).

    Returns
    -------
    columns : list of ndarray or None
        One array of ``n_rows`` values per input column (float64 for numeric
        columns, object for categorical ones), or None for a column whose
        state says nothing of its distribution (``numeric_encoding="none"``).
    """
    rng = np.random.RandomState(random_state)
    dependence = getattr(encoder, "dependence_", None) if joint else None
    if dependence is not None:
        correlated = _copula_levels(dependence, n_rows, rng)
    levels = (np.arange(n_rows) + 0.5) / n_rows
    columns = []
    for j, column in enumerate(encoder.column_encodings_):
        values = column.sample(correlated[:, j] if dependence is not None
                               else levels[rng.permutation(n_rows)])
        if values is not None and missing_share and encoder.has_missing_[j]:
            values = values.astype(object) if encoder.categorical_[j] else values.copy()
            values[rng.rand(n_rows) < missing_share] = None if encoder.categorical_[j] else np.nan
        columns.append(values)
    return columns


def _copula_levels(correlation, n_rows, rng):
    """``n_rows`` draws of a Gaussian copula of ``correlation``: quantile levels
    in ``(0, 1)`` (within half a row's level of the ends), one column each."""
    from scipy.special import ndtr

    eigenvalues, vectors = np.linalg.eigh(np.asarray(correlation, dtype=np.float64))
    root = vectors * np.sqrt(np.clip(eigenvalues, 0.0, None))
    normal = rng.standard_normal((n_rows, len(eigenvalues))) @ root.T
    half = 0.5 / n_rows
    return np.clip(ndtr(normal), half, 1.0 - half)


def _probe_features(encoder, n_rows):
    """The features (float64) of ``n_rows`` probe rows (:func:`probe_columns`,
    without missing values; a column of ``"none"`` filled with zeros)."""
    columns = probe_columns(encoder, n_rows)
    filled = [np.zeros(n_rows) if c is None else c for c in columns]
    return np.asarray(encoder.transform_columns(filled), dtype=np.float64)


def _root_mean_squares(features):
    """Every feature's root mean square over the rows, 1 where it is 0."""
    rms = np.sqrt(np.mean(features ** 2, axis=0))
    return np.where(rms > 0, rms, 1.0)


def feature_scales(encoder, n_rows=2048):
    """The root mean square of every feature of ``encoder`` on its probe rows.

    A split computes ``sum_f W[f] * x_f``: how much a difference in the
    weight of feature ``f`` changes what the split computes grows with the
    size of ``x_f``. Quantile-normal features of a column that is mostly one
    value (a count that is 0 on most rows) sit near the clip of the normal
    scores (about -5.2) on most rows, and other features within about 1.
    They are the diagonal of :func:`function_view` (all of it for an encoder
    whose columns have one feature each, or features that never overlap).

    Parameters
    ----------
    encoder : TabularEncoder
        A fitted encoder.
    n_rows : int, default=2048
        Probe rows (:func:`probe_columns`, without missing values).

    Returns
    -------
    scales : ndarray of float64 of shape (`n_features_out_`,)
        Each feature's root mean square; 1 for the features the probe rows
        leave at zero (missing indicators, columns of ``"none"``, whose
        distribution the encoder does not know).
    """
    return _root_mean_squares(_probe_features(encoder, n_rows))


def function_view(encoder, n_rows=2048):
    """A factor of the features' Gram matrix on probe rows, column by column.

    A split computes ``sum_j W_j @ x_j``, one function ``W_j @ x_j`` of each
    input column ``j`` through the column's features ``x_j``. Weight
    matching compares the models' splits by the inner products of their
    weights; ``W @ L`` makes these the inner products of what the splits
    compute: ``(W @ L) @ (V @ L).T = W @ G @ V.T``, the mean over probe rows
    (:func:`probe_columns`) of ``sum_j (W_j @ x_j) (V_j @ x_j)``, where ``G``
    is block diagonal with each column's Gram matrix ``G_j = X_j.T @ X_j /
    n_rows`` (its features on the probe rows). It compares like with like
    where weights on different features mean the same function: a stacked
    column's sub-blocks (the quantile transforms of encoders fitted apart,
    one per model) are different but close functions of the value, so
    model ``a``'s weight on its own transform meets model ``b``'s on its
    own in the measure that these transforms agree (a column's hat
    functions, which overlap their neighbours, likewise).

    ``L_j = diag(s_j) @ R_j``: ``s_j`` the features' root mean squares
    (:func:`feature_scales`) and ``R_j`` the symmetric square root of their
    correlation-like matrix ``C_j = diag(1 / s_j) G_j diag(1 / s_j)``, its
    diagonal set to 1 (a feature the probe rows leave at zero keeps the
    scale 1 of :func:`feature_scales`) and its negative eigenvalues (rank
    deficiency, rounding) to 0. A column of one feature, or of features
    that are never nonzero on one row (one-hot), has ``R_j = I``: ``L`` is
    then ``diag(feature_scales(encoder))`` exactly. Missing indicators
    (zero on the probe rows) stay apart, with a scale of 1.

    Parameters
    ----------
    encoder : TabularEncoder
        A fitted encoder (a union of encoders included).
    n_rows : int, default=2048
        Probe rows (:func:`probe_columns`, without missing values).

    Returns
    -------
    L : ndarray of float64 of shape (`n_features_out_`, `n_features_out_`)
        Block diagonal, one block per input column (its features but the
        missing indicator), with ``L_j @ L_j.T = G_j`` up to the diagonal's
        convention above.
    """
    features = _probe_features(encoder, n_rows)
    scales = _root_mean_squares(features)
    L = np.diag(scales)
    start = 0
    for j, width in enumerate(int(w) for w in encoder.widths_):
        stop = start + width - int(encoder.has_missing_[j])
        if stop - start > 1:
            units = features[:, start:stop] / scales[start:stop]
            correlation = units.T @ units / n_rows
            np.fill_diagonal(correlation, 1.0)
            if np.count_nonzero(correlation - np.eye(stop - start)):
                L[start:stop, start:stop] = scales[start:stop, None] * _symmetric_root(
                    correlation)
        start += width
    return L


def _symmetric_root(C):
    """The symmetric positive semidefinite square root of the symmetric ``C``
    (its negative eigenvalues taken as 0)."""
    eigenvalues, vectors = np.linalg.eigh(C)
    return (vectors * np.sqrt(np.clip(eigenvalues, 0.0, None))) @ vectors.T

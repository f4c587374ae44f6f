"""The additive term's bins: every value's row of the additive table.

With ``additive_bins``, the estimators add to the trees' output a table
lookup per input column and resolution: a numeric value's row is its
quantile bin (one row per bin, and one for missing values), a categorical
value's row its category's (one per category with a one-hot feature, one
for the infrequent ones when there are, one for missing values and one for
categories unseen in ``fit``). :class:`AdditiveBins` holds the setting, the
bins fitted from the parts' summaries and the table's layout;
:class:`~sktree_lmc.encoding._encoding.TabularEncoder` owns one and delegates its
``additive_*`` attributes and methods to it.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ._column_encodings import (
    column_name,
    missing_mask,
    mixture_quantiles,
    numeric_values,
    sketch_parts,
    sorted_quantiles,
)

__all__ = ["MAX_ADDITIVE_BINS", "AdditiveBins", "additive_levels", "same_additive_bins"]


#: The largest ``additive_bins`` (bins per numeric column and resolution), as
#: the estimators' constraint on a single int.
MAX_ADDITIVE_BINS = 2**16
#: The dtype of the additive codes (table rows): the additive term's input,
#: an array of its own beside the trees' float32 features.
CODE_DTYPE = np.int32


def _coarser_lookup(coarse, fine):
    """``lookup`` such that ``lookup[fine_codes]`` is
    ``np.searchsorted(coarse, x, side="right")`` for
    ``fine_codes = np.searchsorted(fine, x, side="right")``, exactly, when
    every edge of ``coarse`` is an edge of ``fine``: the coarse edges at or
    below ``x`` are the coarse edges among the ``fine_codes`` fine edges at
    or below it. ``lookup[i]`` is the number of edges of ``coarse`` at or
    below the ``i``-th edge of ``fine`` (0 for ``i = 0``, below every fine
    edge)."""
    return np.concatenate([[0], np.searchsorted(coarse, fine, side="right")])


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
        values = np.sort(np.concatenate([part["values"] for part in parts]))
        edges = np.unique(sorted_quantiles(values, levels))
    else:
        edges = np.unique(mixture_quantiles(sketch_parts(parts), levels))
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


def same_additive_bins(a, b):
    """Whether two ``additive_bins`` are the same resolutions (in any order)."""
    try:
        return additive_levels(a) == additive_levels(b)
    except ValueError:
        return a == b




class AdditiveBins:
    """The additive term's bins and the layout of its table.

    Every resolution of ``additive_bins`` gives every numeric column a code
    column (the coarsest also every categorical column): a numeric code
    column with edges ``e`` has ``len(e) + 2`` rows, its bins then one for
    missing values. A categorical column has one row per category with a
    one-hot feature, one for the infrequent ones (when there are), one for
    missing values and one for categories unseen in ``fit`` (a row no
    training value reaches, which stays at its zero start: an unseen
    category adds nothing, as in the one-hot features).

    Parameters
    ----------
    additive_bins : int in [2, 65536], sequence of int or None, default=None
        Quantile bins per numeric column, one resolution per entry, in
        ascending order whatever the sequence's order (see
        :func:`additive_levels`). None: no additive term. Stored as given.

    Attributes
    ----------
    edges_ : list of (ndarray or None) or None
        Per code column, the distinct inner quantile edges of its bins (a
        value's bin is the number of edges ``<= value``); None for
        categorical columns. None without ``additive_bins``.
    sources_ : ndarray of int or None
        The input column of every code column.
    steps_ : ndarray of float or None
        Every code column's relative training step,
        ``sqrt(min(additive_bins) / bins)`` of its resolution.
    offsets_ : ndarray of int of shape (J + 1,) or None
        The first table row of every code column, and the table's size last.
    n_additive_ : int
        Rows of the table (0 without ``additive_bins``).

    See Also
    --------
    additive_levels : The resolutions of ``additive_bins``.
    """

    #: The entries of ``TabularEncoder.to_dict`` that are the bins' state,
    #: and the attribute of each.
    STATE_KEYS = {"additive_bins": "additive_bins", "additive_edges_": "edges_",
                  "additive_offsets_": "offsets_", "n_additive_": "n_additive_",
                  "additive_sources_": "sources_", "additive_steps_": "steps_"}

    def __init__(self, additive_bins=None):
        self.additive_bins = additive_bins

    def __repr__(self):
        return f"AdditiveBins({self.additive_bins!r})"

    @property
    def levels(self):
        """tuple of int: The resolutions, sorted (:func:`additive_levels`)."""
        return additive_levels(self.additive_bins)

    @property
    def sketched(self):
        """bool: Whether the summaries must send the numeric columns'
        values or sketches (``values`` or ``quantiles``) for the bins."""
        return self.additive_bins is not None

    def fit(self, summaries, category_rows):
        """Fit the bins and the table's layout.

        Parameters
        ----------
        summaries : list of dict
            The summaries of the parts of the rows (see ``summarize``).
        category_rows : list of (int or None)
            Per input column, None for a numeric one, else the number of its
            one-hot features (categories, and the infrequent one).

        Returns
        -------
        self : AdditiveBins
            Fitted: without ``additive_bins``, no table (``offsets_`` None
            and ``n_additive_`` 0).
        """
        self.edges_, self.offsets_, self.n_additive_ = None, None, 0
        self.sources_ = self.steps_ = None
        if self.additive_bins is None:
            return self
        levels = additive_levels(self.additive_bins)  # sorted: the coarsest first
        edges, sizes, sources, steps = [], [], [], []
        for level, bins in enumerate(levels):
            for j, rows in enumerate(category_rows):
                if rows is not None:
                    if level:
                        continue
                    edges.append(None)
                    sizes.append(rows + 2)
                else:
                    parts = [summary["columns"][j] for summary in summaries]
                    e = _additive_edges(parts, bins)
                    edges.append(e)
                    sizes.append(len(e) + 2)
                sources.append(j)
                # finer bins hold fewer rows each: their gradients are noisier
                steps.append(math.sqrt(min(levels) / bins))
        self.edges_ = edges
        self.sources_ = np.asarray(sources, dtype=np.int64)
        self.steps_ = np.asarray(steps, dtype=np.float64)
        self.offsets_ = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_additive_ = int(self.offsets_[-1])
        return self

    def row_steps(self):
        """Return the relative training step of every row of the table.

        Returns
        -------
        steps : ndarray of shape (`n_additive_`,)
            ``steps_`` of each row's code column.
        """
        if self.steps_ is None:
            return np.ones(self.n_additive_)
        return np.repeat(self.steps_, np.diff(self.offsets_))

    def codes(self, columns, start=0, stop=None, *, encodings, names=None,
              code_columns=None, searched=None):
        """Return the table's row of every value of rows ``start:stop``.

        Parameters
        ----------
        columns : list of ndarray
            The input's columns.
        start, stop : int, default=0 and None
            The rows (``stop=None``: to the end).
        encodings : list of ColumnEncoding
            The encoder's fitted columns: a categorical column's
            (:class:`~._column_encodings.OneHotColumns`) ``codes`` give the
            one-hot feature of every value, -1 for an unseen category
            without an infrequent feature.
        names : list of str, default=None
            Column names, for error messages.
        code_columns : sequence of int or None, default=None
            Only these code columns, in this order (None: all ``J``).
        searched : dict of int to tuple, default=None
            Searches already done: ``searched[j]`` is ``(bins, missing)``,
            ``np.searchsorted(search_edges(j), x, side="right")`` for the
            rows' values ``x`` of numeric column ``j`` (any value where ``x``
            is missing) and ``x``'s missing mask, as the quantile encoding
            finds them with its features (:meth:`search_edges`); the column
            is then neither read nor checked again.

        Returns
        -------
        codes : ndarray of shape (stop - start, J), dtype int32
            Table rows, one column per code column (of ``code_columns``).

        Raises
        ------
        ValueError
            Without an additive term.
        """
        if self.offsets_ is None:
            raise ValueError("This encoder has no additive term (additive_bins=None).")
        n = len(columns[0]) if columns else 0
        stop = n if stop is None else min(stop, n)
        if code_columns is None:
            code_columns = range(len(self.sources_))
        # filled code column by code column: rows of the transpose, each contiguous
        out = np.empty((len(code_columns), stop - start), dtype=CODE_DTYPE)
        numeric = {}  # each numeric column checked once, whatever its resolutions
        plan = self._search_plan()
        fine_codes = {}
        for j, (bins, missing) in (searched or {}).items():
            fine_codes[j], numeric[j] = bins, (None, missing)
        for i, c in enumerate(code_columns):
            j = self.sources_[c]
            first, end = self.offsets_[c], self.offsets_[c + 1]
            values = columns[j][start:stop]
            if self.edges_[c] is None:  # a categorical column
                values = np.asarray(values, dtype=object)
                missing = missing_mask(values)
                idx = encodings[j].codes(values, column_name(names, j))
                idx[idx < 0] = end - first - 1  # unseen, without an infrequent row
                idx[missing] = end - first - 2
            else:
                if j not in numeric:
                    x = numeric_values(np.asarray(values), column_name(names, j))
                    numeric[j] = x, np.isnan(x)
                x, missing = numeric[j]
                fine = plan.get(j)
                if fine is None:  # resolutions that do not nest: a search each
                    out[i] = first + np.searchsorted(self.edges_[c], x, side="right")
                else:  # one binary search per column, at its finest resolution
                    if j not in fine_codes:
                        fine_codes[j] = np.searchsorted(self.edges_[fine], x, side="right")
                    if c == fine:
                        np.add(fine_codes[j], first, out=out[i], casting="unsafe")
                    else:  # the coarser rows gathered, offset and int32 already
                        np.take(self._rows(c, fine), fine_codes[j], out=out[i])
                if missing.any():
                    out[i][missing] = end - 1
                continue
            out[i] = first + idx
        return out.T  # Fortran-ordered: a transposed copy costs more than its readers save

    def finest(self):
        """Return the finest code column of the columns whose bins nest.

        Returns
        -------
        finest : dict of int to int
            For every numeric column with several resolutions whose coarser
            edges are all among its finest edges (so that a coarser bin is a
            union of finest bins), the code column of its finest bins:
            :meth:`codes` finds those bins with one binary search, and the
            coarser codes follow from them by a lookup
            (:func:`_coarser_lookup`) instead of a binary search each.
            Computed once per fitted state (it costs as much as encoding
            10,000 rows of 400 columns).
        """
        cached = getattr(self, "_finest", None)
        if cached is not None and cached[0] is self.edges_ and cached[1] is self.sources_:
            return cached[2]
        by_column = {}
        for c, j in enumerate(self.sources_):
            if self.edges_[c] is not None:
                by_column.setdefault(int(j), []).append(c)
        finest = {}
        for j, cols in by_column.items():
            if len(cols) < 2:
                continue
            fine = max(cols, key=lambda c: len(self.edges_[c]))
            edges = self.edges_[fine]
            if all(np.isin(self.edges_[c], edges).all() for c in cols):
                finest[j] = fine
        # keyed by the state's own objects (held here, so never reused by others)
        self._finest = (self.edges_, self.sources_, finest)
        return finest

    #: Caches of the fitted state (made on first use, never pickled).
    _caches = ("_finest", "_plan", "_lookups")

    def __getstate__(self):
        state = self.__dict__.copy()
        for key in self._caches:
            state.pop(key, None)
        return state

    def _search_plan(self):
        """``{column: code column searched}`` for every numeric column whose
        resolutions nest (one resolution included): its values are searched
        once, in that code column's edges (the finest), and the coarser codes
        are gathered from :meth:`_rows`. Made once per fitted state."""
        cached = getattr(self, "_plan", None)
        if cached is not None and cached[0] is self.edges_ and cached[1] is self.sources_:
            return cached[2]
        finest, plan = self.finest(), {}
        resolutions = np.bincount(self.sources_)  # code columns per input column
        for c, j in enumerate(self.sources_):
            j = int(j)
            if self.edges_[c] is not None and (j in finest or resolutions[j] == 1):
                plan[j] = finest.get(j, c)
        self._plan = (self.edges_, self.sources_, plan)
        self._lookups = {}
        return plan

    def _rows(self, c, fine):
        """The table rows of code column ``c`` by bin of the finest code
        column ``fine`` of its column: :func:`_coarser_lookup` plus the
        column's first row, in int32 (as :meth:`codes` returns them), made on first use (at 4,096 bins, about 0.1 ms each,
        against a search's 0.6 ms per 10,000 values)."""
        lookups = self._lookups
        if c not in lookups:
            lookups[c] = (self.offsets_[c] + _coarser_lookup(
                self.edges_[c], self.edges_[fine])).astype(CODE_DTYPE)
        return lookups[c]

    def search_edges(self, j):
        """Return the edges whose search gives every code of column ``j``.

        Parameters
        ----------
        j : int
            An input column.

        Returns
        -------
        edges : ndarray or None
            The finest edges of a numeric column whose resolutions nest (or
            its only resolution's), whose ``searchsorted(..., side="right")``
            :meth:`codes` takes as ``searched``; None for a categorical
            column, a column of resolutions that do not nest, or without an
            additive term.
        """
        if self.offsets_ is None:
            return None
        fine = self._search_plan().get(int(j))
        return None if fine is None else self.edges_[fine]

    def difference(self, other, names=None):
        """Return a sentence saying how the edges of two fitted bins differ.

        Parameters
        ----------
        other : AdditiveBins
            Fitted bins of an encoder with the same settings.
        names : list of str, default=None
            Column names, for the sentence.

        Returns
        -------
        sentence : str or None
            None when the edges are equal, or their code columns differ in
            number (then ``additive_bins`` differs).
        """
        edges_a, edges_b = self.edges_ or [], other.edges_ or []
        if len(edges_a) != len(edges_b):
            return None
        for c, (ea, eb) in enumerate(zip(edges_a, edges_b)):
            if (ea is None) != (eb is None) or (ea is not None and not np.array_equal(ea, eb)):
                return (f"the additive bins of column {column_name(names, self.sources_[c])} "
                        "differ (encoders fitted on different rows)")
        return None

    @classmethod
    def union(cls, bins, category_rows=None):
        """Return common bins for fitted bins that differ only in their edges.

        Parameters
        ----------
        bins : list of AdditiveBins
            Fitted bins of the same code columns.
        category_rows : dict of int to list of ndarray, default=None
            For a categorical code column whose categories differ between
            the bins (a union of encoders' categories), its union rows: per
            one of ``bins``, the row of that bins' block (counted from the
            block's first row) that every row of the union's block takes;
            the union's block has as many rows. None, and for the other
            categorical code columns: the blocks map one to one.

        Returns
        -------
        union : AdditiveBins
            A copy of the first whose numeric code columns' edges are the
            sorted union of all edges.
        rows : list of ndarray of int
            For each of ``bins``, the row of its table that every row of the
            union's table takes (see ``union_additive_bins``).
        """
        ref = bins[0]
        union = copy.deepcopy(ref)
        edges, sizes = [], []
        category_rows = {} if category_rows is None else category_rows
        for j in range(len(ref.edges_)):  # code columns
            if ref.edges_[j] is None:
                edges.append(None)
                sizes.append(len(category_rows[j][0]) if j in category_rows
                             else int(ref.offsets_[j + 1] - ref.offsets_[j]))
                continue
            e = np.unique(np.concatenate([b.edges_[j] for b in bins]))
            edges.append(e)
            sizes.append(len(e) + 2)
        union.edges_ = edges
        union.offsets_ = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        union.n_additive_ = int(union.offsets_[-1])
        rows = []
        for k, b in enumerate(bins):
            r = np.empty(union.n_additive_, dtype=np.int64)
            for j, e in enumerate(edges):
                u0, u1 = union.offsets_[j], union.offsets_[j + 1]
                o0, o1 = b.offsets_[j], b.offsets_[j + 1]
                if e is None and j in category_rows:
                    r[u0:u1] = o0 + np.asarray(category_rows[j][k], dtype=np.int64)
                    continue
                if e is None:
                    r[u0:u1] = np.arange(o0, o1)
                    continue
                # union bin i >= 1 holds [e[i-1], e[i]): the bins' bin of e[i-1] (codes use
                # searchsorted(side="right")); bin 0 is below every edge; the last row: missing
                own = np.searchsorted(b.edges_[j], e, side="right")
                r[u0:u1] = o0 + np.concatenate([[0], own, [o1 - o0 - 1]])
            rows.append(r)
        return union, rows

    def to_dict(self):
        """Return the setting and fitted state as ``TabularEncoder.to_dict`` entries.

        Returns
        -------
        state : dict
            ``additive_bins`` and, when fitted, ``additive_edges_``,
            ``additive_offsets_``, ``n_additive_``, ``additive_sources_``
            and ``additive_steps_``.
        """
        return {key: getattr(self, attr) for key, attr in self.STATE_KEYS.items()
                if hasattr(self, attr)}

    @classmethod
    def from_dict(cls, state):
        """Rebuild bins from :meth:`to_dict` (the fitted entries when present).

        Parameters
        ----------
        state : dict
            The output of :meth:`to_dict`.

        Returns
        -------
        bins : AdditiveBins
        """
        bins = cls.__new__(cls)
        for key, attr in cls.STATE_KEYS.items():
            if key in state:
                setattr(bins, attr, state[key])
        return bins

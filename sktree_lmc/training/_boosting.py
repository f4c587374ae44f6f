"""A gradient-boosted start of the trees (``split_init="boosting"``).

Before gradient descent, the ensemble is grown the way gradient-boosted trees
are (Friedman 2001; the histogram method of LightGBM and scikit-learn's
``HistGradientBoosting``): tree after tree, each one a Newton step on the
loss of the trees before it. Every tree is *oblivious* (CatBoost's symmetric
trees): one (feature, threshold) pair per depth level, chosen to maximize the
summed second-order gain over all the level's nodes, then one Newton leaf
value per leaf and output, shrunk by :data:`BOOSTING_LEARNING_RATE`. Splits
are searched on at most :data:`BOOSTING_MAX_BINS` quantile thresholds per
encoded feature, in histograms of gradients and Hessians over all nodes
(the rows binned once; one pass over a level's rows for all its nodes,
outputs, gradients and Hessians per block of features small enough for the
histogram table to stay in cache, :func:`_cell_sums`; no loop over rows or
candidate thresholds). Below the root only the left
children's histograms are computed (a right child's is its parent's minus its
sibling's), and for two classes only the first output's (the second's
gradients are its negative): a quarter of the work, and of what a federated
site sends, which packs them (the bins its features have, the nonzero cells).
Every sum adds the same numbers in the same order as plain ``np.bincount``
histograms and NumPy's losses do: the trees do not depend on these choices.
With the numba engine, one site of this process (a plain fit) grows each
tree's levels in one compiled call (:mod:`._boosting_numba`: the histograms,
the split search and the rows' descent, the same sums bit for bit), about
half the growth's time on electricity; the losses' gradients stay NumPy's.

The grown trees become the soft trees' starting parameters: a level's split is
the axis-aligned logit ``slope * (threshold - x_f) / std(x_f)`` (left below
the threshold), sharp enough that the soft tree computes the boosted one
(:data:`BOOSTING_SLOPE`), on top of the uniform start of the weights, so the
oblique directions stay trainable. Non-oblivious perfect trees get the same
split at every node of a level (an oblivious tree is one of them). Gradient
descent then continues from this start.

Nothing here imports the estimators.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch

try:  # the kernel of a CSC matrix times a dense one (scipy.sparse's own product)
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
except ImportError:  # pragma: no cover
    _csc_matvecs = None

from ..model import _kernel
from ..model._architectures import MAX_LEAVES_PER_TREE
from ..encoding._column_encodings import sorted_quantiles
from ._losses import CrossEntropy, SquaredError, as_loss, weighted_mean

__all__ = ["averaged_site_trees", "averaged_trees", "boosted_start", "grow_oblivious_trees",
           "grow_shared_trees", "oblivious_output", "BoostingSite", "LocalSites",
           "BOOSTING_ARCHITECTURES"]

#: Shrinkage of every tree's Newton step: the default of scikit-learn's
#: ``HistGradientBoosting`` and of XGBoost's ``eta`` is 0.1 and 0.3.
BOOSTING_LEARNING_RATE = 0.1
#: L2 penalty on the leaf values in the gain and the Newton steps (XGBoost's
#: default ``lambda``).
BOOSTING_L2 = 1.0
#: Thresholds per encoded feature (``HistGradientBoosting``'s ``max_bins``).
BOOSTING_MAX_BINS = 255
#: Rows the thresholds are computed from (``HistGradientBoosting`` bins on a
#: subsample of 200,000 rows too).
BOOSTING_BIN_ROWS = 200_000
#: Slope of a boosted split, per standard deviation of its feature: 10 % to
#: 90 % over 0.022 standard deviations, a hard threshold for all but the
#: rows at it. Measured on electricity and eye_movements (seed 0, 10,000
#: rows), the soft trees at slopes 20, 60 and 200 reached 81.1, 82.0 and
#: 82.4 % (electricity) of the boosted trees' 82.6 % before training.
BOOSTING_SLOPE = 200.0
#: Cells (node, feature, bin, output) of the deepest level's histograms that one
#: call to the sites asks for (features per call: this over the rest).
_BLOCK_ENTRIES = 1 << 22
#: Features histogrammed by one kernel call: a table of ``nodes x 16 x 256``
#: cells of a few hundred kilobytes, which stays in the core's cache while the
#: rows' values are added to it (a wide level's table of megabytes did not, and
#: took 2 to 3 times as long). Each cell still sums its rows in their order.
_CELL_BLOCK = 16
#: Architectures whose trees can hold an oblivious tree.
BOOSTING_ARCHITECTURES = ("oblivious", "non_oblivious")


def _as_int(name, value, minimum):
    """``value`` as a Python int: NumPy integers (``np.uint8(2)``) become
    ``int`` before any arithmetic, where their fixed width would overflow
    (``1 << depth`` in uint8 arithmetic).

    Parameters
    ----------
    name : str
        The argument's name, for the error message.
    value : int or numpy.integer
        The value.
    minimum : int
        The smallest value allowed.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``value`` is not an integer (a bool, a float, ...).
    ValueError
        If it is below ``minimum``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}: {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def grow_oblivious_trees(X, target, weight, *, loss, n_trees, depth, n_outputs,
                         mask=None, learning_rate=BOOSTING_LEARNING_RATE, l2=BOOSTING_L2,
                         max_bins=BOOSTING_MAX_BINS, generator=None, validation=None,
                         gains=None):
    """Grow ``n_trees`` oblivious trees of ``depth`` levels by gradient boosting.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Encoded training rows.
    target : ndarray
        Int class indices of shape (n_samples,) (cross-entropy) or float
        targets of shape (n_samples, n_outputs) (squared error).
    weight : ndarray of shape (n_samples,)
        Sample weights (nonnegative), relative: they are rescaled to a mean
        of 1, so that the L2 penalty ``l2`` does not depend on their scale.
    loss : Loss or {"softmax", "squared"}
        The objective (:mod:`._losses`): its gradients and Hessians, initial
        prediction and validation loss.
    n_trees, depth, n_outputs : int
        Python or NumPy integers (converted to ``int`` first: a NumPy
        integer's fixed width would overflow in ``2**depth``).
    mask : ndarray of bool of shape (n_trees, n_features) or None
        The features each tree may split on (None: all).
    learning_rate, l2 : float
        Shrinkage of the leaf values and their L2 penalty.
    max_bins : int
        Thresholds per feature (an integer, as ``n_trees``).
    generator : torch.Generator or None
        Draws the rows the thresholds come from when there are more than
        :data:`BOOSTING_BIN_ROWS`.
    validation : tuple or None
        ``(X_val, target_val, weight_val)``, rows the trees are not grown on.
        All ``n_trees`` trees are grown, and the shortest prefix of them with
        the least loss on these rows is kept: the trees after it are dropped
        (feature -1 at every level, zero leaves). None: every tree is kept.
    gains : ndarray of shape (n_trees, depth) or None
        Filled with the second-order gain of every level's split (0 where
        there is none, and for the dropped trees): the teacher's feature
        importances (:func:`feature_gains`).

    Returns
    -------
    base : ndarray of shape (n_outputs,)
        The constant the trees add to.
    features : ndarray of int of shape (n_trees, depth)
        The feature of every level (-1: no split gains; the level sends
        every row left).
    thresholds : ndarray of shape (n_trees, depth)
        A row goes right at a level when its value is above the threshold.
    leaves : ndarray of shape (n_trees, 2**depth, n_outputs)
        Leaf values; leaf ``sum_d right_d * 2**(depth - 1 - d)``.

    Raises
    ------
    TypeError
        If ``n_trees``, ``depth``, ``n_outputs`` or ``max_bins`` is not an
        integer.
    ValueError
        If one of them is out of range (``n_outputs``, ``max_bins`` < 1;
        ``n_trees``, ``depth`` < 0), or the trees would have more than
        :data:`~sktree_lmc.model._architectures.MAX_LEAVES_PER_TREE` leaves.
    """
    n_outputs = _as_int("n_outputs", n_outputs, 1)
    site = BoostingSite(X, target, weight, loss=loss, n_outputs=n_outputs,
                        validation=validation, generator=generator)
    return grow_shared_trees(LocalSites([site], pack=False), loss=loss, n_trees=n_trees,
                             depth=depth, n_outputs=n_outputs, mask=mask,
                             learning_rate=learning_rate, l2=l2, max_bins=max_bins, gains=gains)


class BoostingSite:
    """The rows of one site of a (possibly federated) boosting, and every
    computation on them: what :func:`grow_shared_trees` asks of a site only
    takes and returns sums over its rows (histograms, loss sums), never rows.

    The rows are binned once (:meth:`start`): per block of
    :data:`_CELL_BLOCK` features, the flat cell ``f * n_bins + bin`` of every
    row and feature, so that a level's histograms of a block are one pass
    over its rows (:func:`_cell_sums`) for all its nodes, outputs, gradients
    and Hessians, each cell summed over its rows in their order, as
    ``np.bincount`` sums. The outputs are kept per output
    (``(n_outputs, n_rows)``).

    Parameters
    ----------
    X, target, weight
        The site's training rows (see :func:`grow_oblivious_trees`).
    loss : Loss or {"softmax", "squared"}
    n_outputs : int
    validation : tuple or None
        ``(X_val, target_val, weight_val)``: the site's validation rows.
    generator : torch.Generator or None
        Draws the rows the thresholds come from when there are more than
        :data:`BOOSTING_BIN_ROWS`.
    """

    def __init__(self, X, target, weight, *, loss, n_outputs, validation=None,
                 generator=None):
        self.X = np.asarray(X, dtype=np.float64)
        self.target, self.loss = target, as_loss(loss)
        self.n_outputs = _as_int("n_outputs", n_outputs, 1)
        self.weight = np.asarray(weight, dtype=np.float64)
        self.generator = generator
        self.validation = None
        if validation is not None:
            X_val, target_val, weight_val = validation
            self.validation = (np.asarray(X_val, dtype=np.float64), target_val,
                               np.asarray(weight_val, dtype=np.float64))

    @classmethod
    def of_fit(cls, objective, X, target, weight, *, n_outputs, validation=None):
        """The site of a fit's encoded rows: the trees' features ``X``, the
        ``target`` and ``weight`` fitted by ``objective`` (the fit's
        :class:`~sktree_lmc.training._objective.Objective`, whose loss the
        trees are grown on), the targets in the units the shards' shared
        trees are grown on (``objective.shared_units``); ``validation``: ``(X_val,
        target_val, weight_val)`` fitted alike, or None."""
        if validation is not None:
            X_val, target_val, weight_val = validation
            validation = (X_val, objective.shared_units(target_val), weight_val)
        return cls(X, objective.shared_units(target), weight, loss=objective.loss,
                   n_outputs=n_outputs, validation=validation)

    # -- set-up: thresholds and the constant start ------------------------------------------

    def summary(self, max_bins):
        """Per feature: its distinct values (None when more than
        ``max_bins + 1``) and its quantiles at ``max_bins + 2`` even levels
        (minimum and maximum included); and the number of rows."""
        n = len(self.X)
        rows = np.arange(n)
        if n > BOOSTING_BIN_ROWS:
            rows = torch.randperm(n, generator=self.generator)[:BOOSTING_BIN_ROWS].numpy()
        levels = np.linspace(0, 1, max_bins + 2)
        out = []
        for f in range(self.X.shape[1]):
            x = np.sort(self.X[rows, f])
            if len(x) and not np.isnan(x[-1]):
                # one sort for both: np.unique's and np.quantile's values, bit for bit
                values = x[np.concatenate(([True], x[1:] != x[:-1]))]
                quantiles = sorted_quantiles(x, levels)
            else:
                values = np.unique(x)
                quantiles = np.quantile(x, levels) if len(x) else None
            out.append((values if len(values) <= max_bins + 1 else None, quantiles))
        return out, len(rows)

    def shape(self):
        """``(n_rows, n_features, n_outputs)``."""
        return len(self.X), self.X.shape[1], self.n_outputs

    def base_sums(self):
        """``(sum, weight sum)`` of the class weights (softmax) or of the weighted targets."""
        return self.loss.target_sums(self.target, self.weight, self.n_outputs)

    def start(self, edges, base, weight_scale=1.0):
        """Bin the rows on the shared thresholds; every output starts at
        ``base``; the training weights are multiplied by ``weight_scale``."""
        self.edges, self.n_bins = edges, max(1, max((len(e) for e in edges), default=0) + 1)
        self.weight = self.weight * weight_scale
        n, F = self.X.shape
        # the bins of every feature, feature after feature, for the splits
        self.codes = np.empty((F, n), dtype=np.uint8 if self.n_bins <= 256 else np.int32)
        for f in range(F):
            self.codes[f] = np.searchsorted(edges[f], self.X[:, f], side="left")
        # and for the histograms, per block of _CELL_BLOCK features, the cell
        # f * n_bins + bin of every row and feature of the block (f counted from
        # the block's first), row after row: a level's histograms of a block are
        # one pass over its rows into a table that stays in the core's cache
        self._cell_blocks = []
        for a in range(0, F, _CELL_BLOCK):
            w = min(F - a, _CELL_BLOCK)
            kind = _index_type(w * self.n_bins, n * w)
            block = self.codes[a:a + w].T.astype(kind, order="C")
            block += (np.arange(w) * self.n_bins).astype(kind)
            self._cell_blocks.append((a, block))
        self.raw = np.tile(np.asarray(base, dtype=np.float64)[:, None], (1, n))  # (C, n)
        self._hist = None  # the compiled growth's histograms (compiled_tree), made once
        self._onehot = None
        if type(self.loss) is CrossEntropy and self.n_outputs == 2:
            self._onehot = (np.arange(2)[:, None] == np.asarray(self.target)[None, :]) * 1.0
        if self.validation is not None:
            self.raw_val = np.tile(np.asarray(base, dtype=np.float64)[:, None],
                                   (1, len(self.validation[0])))  # (C, n_val)

    # -- one tree ----------------------------------------------------------------------------

    def add_tree(self, tree):
        """Add a grown tree ``(features, thresholds, leaves)`` (None: none) to
        the outputs; then start the next one (gradients at the new outputs,
        every row at the root). Returns the validation ``(loss sum, weight
        sum)`` of the trees so far (zeros without validation rows)."""
        if tree is not None:
            features, thresholds, leaves = tree
            for c in range(self.n_outputs):
                self.raw[c] += leaves[:, c].take(self.node)
            if self.validation is not None:  # oblivious_output(X_val, 0.0, the tree)
                X_val = self.validation[0]
                leaf = np.zeros(len(X_val), dtype=np.int64)
                for f, t in zip(features, thresholds) if X_val.shape[1] else ():
                    leaf = leaf * 2 + ((X_val[:, f] > t) if f >= 0 else 0)
                values = 0.0 + leaves
                for c in range(self.n_outputs):
                    self.raw_val[c] += values[:, c].take(leaf)
        # the gradient and the Hessian of every output, row after row
        self.stats = _gradients(self.loss, self.raw, self.target, self.weight, self._onehot)
        self.g, self.h = self.stats[:, 0::2], self.stats[:, 1::2]  # (n, C) each
        self._sent = None
        self.node = np.zeros(len(self.X), dtype=np.int64)
        if self.validation is None:
            return 0.0, 0.0
        _, target_val, weight_val = self.validation
        loss = _mean_loss(self.loss, self.raw_val, target_val, weight_val)
        return loss * float(weight_val.sum()), float(weight_val.sum())

    def histograms(self, lo, hi, n_nodes, left_only=False, n_sent=None):
        """Sums of the gradients and Hessians per (node, feature ``lo:hi``,
        bin, output): two arrays of shape ``(n_nodes, hi - lo, n_bins, C)``.

        ``left_only``: of the left children only (the even nodes), shape
        ``(n_nodes // 2, ...)``; the caller has their parents' histograms,
        and a right child's is its parent's minus its sibling's. ``n_sent``:
        of the first ``n_sent`` outputs only (default: all)."""
        n_bins = self.n_bins
        n_sent = self.n_outputs if n_sent is None else n_sent
        if self._sent is None or self._sent.shape[1] != 2 * n_sent:
            self._sent = np.ascontiguousarray(self.stats[:, :2 * n_sent])
        node, stats = self.node, self._sent
        if left_only:
            rows = np.flatnonzero((node & 1) == 0)
            node, n_nodes, stats = node.take(rows) >> 1, n_nodes // 2, stats.take(rows, axis=0)
        parts, shifts = [], {}
        for a, block in self._cell_blocks:
            b = a + block.shape[1]
            if b <= lo or a >= hi:
                continue
            if a < lo or b > hi:  # a block the range cuts: its columns in the range
                cut = slice(max(lo, a) - a, min(hi, b) - a)
                block = block[:, cut] - block.dtype.type(cut.start * n_bins)
            w = block.shape[1]
            size = n_nodes * w * n_bins
            cells = block.take(rows, axis=0) if left_only else block
            if n_nodes > 1:
                # cell (node, f, bin) of the block: node * w * n_bins + f * n_bins + bin
                kind = _index_type(size, len(node) * w)
                cells = cells.astype(kind, copy=not left_only)
                if (w, kind) not in shifts:
                    shifts[w, kind] = (node * (w * n_bins)).astype(kind)[:, None]
                cells += shifts[w, kind]
            parts.append(_cell_sums(cells, stats, size).reshape(n_nodes, w, n_bins, -1))
        if not parts:  # no feature
            parts = [np.zeros((n_nodes, 0, n_bins, 2 * n_sent))]
        sums = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        return sums[..., 0::2], sums[..., 1::2]

    def packed_histograms(self, lo, hi, n_nodes, left_only=False, n_sent=None,
                          dtype="float64"):
        """:meth:`histograms` as a remote site sends them (:func:`_unpacked`
        restores them): of the cells of the bins each feature has
        (``len(edges[f]) + 1``), a bit per cell, set where the cell has a
        nonzero sum, then the sums of those cells only, in ``dtype``
        (``"float64"``: exact, the same trees; ``"float32"``: half the bytes
        of the sums, rounded), or in unsigned integers where they are
        integers (the Hessians of squared error with unit weights: the
        counts), exact."""
        G, H = self.histograms(lo, hi, n_nodes, left_only, n_sent)
        present = _bins_present(self.edges[lo:hi], self.n_bins)
        has = present[None] & ((G != 0) | (H != 0)).any(axis=-1)
        return np.packbits(has[:, present]), _narrowed(G[has], dtype), _narrowed(H[has], dtype)

    def compiled_tree(self, kernel, depth, allowed, options):
        """Grow one tree's levels with the compiled ``kernel``
        (:func:`._boosting_numba.grow_tree`): the splits :func:`grow_shared_trees`
        chooses from this site's :meth:`histograms` alone, and the rows sent
        down them (as :meth:`split` sends them). ``allowed``: ``(valid,
        mask)``, the bins after which a split exists (F, n_bins) and the
        features the tree may split on (F,); ``options``: ``(n_sent, l2)``.
        Returns ``(features, bins, gains, leaf sums)``: each level's feature
        (-1: none), bin and gain over the unsplit score (``(depth,)`` each),
        and :meth:`leaf_sums` as one ``(2**depth, 2 C)`` array."""
        n_sent, l2 = options
        F, n = self.codes.shape
        size = F * (1 << max(depth - 1, 0)) * self.n_bins * 2 * n_sent
        if self._hist is None or self._hist[0].shape[0] < size:
            self._hist = (np.empty(size), np.empty(size))
        out = (self.node, np.empty(depth, dtype=np.int64), np.empty(depth, dtype=np.int64),
               np.empty(depth), np.empty((1 << depth, self.stats.shape[1])))
        kernel.grow_tree(self.codes, self.stats, allowed, self._hist,
                         (depth, n_sent, self.n_outputs, float(l2)), out)
        return out[1:]

    def split(self, f, k):
        """Send every row of every node left (``f < 0``) or by ``bin > k`` of feature ``f``."""
        self.node = self.node * 2 + ((self.codes[f] > k) if f >= 0 else 0)

    def leaf_sums(self, n_leaves):
        """Sums of the gradients and Hessians per leaf and output."""
        sums = _cell_sums(self.node[:, None], self.stats, n_leaves)
        return sums[:, 0::2], sums[:, 1::2]

    # -- a site's own trees ------------------------------------------------------------------

    def grow(self, n_trees, depth, mask=None):
        """``(trees, gains, weight sum)``: the trees
        :func:`grow_oblivious_trees` grows on this site's rows alone (the
        prefix chosen on its validation rows, if any), the gains of their
        splits (``(n_trees, depth)``), and the sum of the site's weights
        (the rows' share of an average of sites' trees,
        :func:`averaged_trees`). What a site of ``teacher="averaged"`` sends:
        its trees, a few hundred bytes each, never a histogram. The site is
        spent: its rows are binned on its own thresholds."""
        n_trees, depth = _as_int("n_trees", n_trees, 0), _as_int("depth", depth, 0)
        weight_sum = self.base_sums()[1]
        gains = np.zeros((n_trees, depth))
        trees = grow_shared_trees(LocalSites([self], pack=False), loss=self.loss,
                                  n_trees=n_trees, depth=depth, n_outputs=self.n_outputs,
                                  mask=mask, gains=gains)
        return trees, gains, float(np.sum(weight_sum))


def _cell_sums(cells, values, n_cells):
    """``(n_cells, k)``: per cell, the sum of the rows of ``values`` (``(n,
    k)``) over the pairs ``(row j, column)`` with ``cells[j, column] ==
    cell`` (``cells``: ``(n, m)`` ints; a row's cells distinct), summed from
    zero row after row: per column of ``values``, the sums of
    ``np.bincount(cells.ravel(), np.repeat(values[:, i], m), n_cells)``.

    One pass for all ``k`` columns: the product of the ``(n_cells, n)``
    matrix of ones at the cells and ``values``, by SciPy's sparse kernel
    (CSC: column ``j`` is row ``j``'s cells), which adds each row's values to
    its cells in row order."""
    n, m = cells.shape
    values = np.ascontiguousarray(values, dtype=np.float64)
    out = np.zeros((n_cells, values.shape[1]))
    if n == 0 or m == 0 or values.shape[1] == 0:
        return out
    kind = np.intp  # or the cells' int32, where every index fits in it
    if cells.dtype == np.int32 and _index_type(n_cells, n * m) is np.int32:
        kind = np.int32
    index = np.ascontiguousarray(cells, dtype=kind).ravel()
    starts = np.arange(0, n * m + 1, m, dtype=kind)
    ones = _ones(n * m)
    if _csc_matvecs is None:  # pragma: no cover - SciPy without the private kernel
        return scipy.sparse.csc_matrix((ones, index, starts), shape=(n_cells, n)) @ values
    _csc_matvecs(n_cells, n, values.shape[1], starts, index, ones, values.ravel(), out.ravel())
    return out


def _index_type(*sizes):
    """int32 when every index below ``sizes`` fits in it (SciPy's sparse
    kernels take int32 or intp indices), else intp."""
    return np.int32 if max(sizes) < np.iinfo(np.int32).max else np.intp


_ONES = np.ones(0)


def _ones(n):
    """``n`` ones (read only), from a buffer kept between calls."""
    global _ONES
    ones = _ONES
    if len(ones) < n:
        ones = np.ones(max(n, 2 * len(ones)))
        ones.flags.writeable = False
        _ONES = ones
    return ones[:n]


def _gradients(loss, raw, target, weight, onehot=None):
    """``loss.gradients`` at the outputs ``raw`` of shape ``(C, n)``, bit for
    bit, as one ``(n, 2 C)`` array: the gradient and the Hessian of every
    output, row after row. Computed per output for two classes (``onehot``:
    the labels one-hot, ``(2, n)``) and squared error, where NumPy's
    reductions over a row's two outputs would take most of the time."""
    C, n = raw.shape
    out = np.empty((n, 2 * C))
    g, h = out[:, 0::2].T, out[:, 1::2].T  # (C, n) views
    target = np.asarray(target)
    if onehot is not None and type(loss) is CrossEntropy:
        e = np.exp(raw - np.maximum(raw[0], raw[1]))  # raw.max(axis=1)
        p = e / (e[0] + e[1])  # the row sums of two
        np.multiply(p - onehot, weight, out=g)
        hessian = p * (1.0 - p) * 2.0  # C / (C - 1)
        np.multiply(np.maximum(hessian, 1e-6), weight, out=h)
    elif type(loss) is SquaredError and target.ndim == 2:  # Hessians of 1: the weights
        np.multiply(raw - target.T, weight, out=g)
        h[...] = weight
    else:
        out[:, 0::2], out[:, 1::2] = loss.gradients(np.ascontiguousarray(raw.T), target, weight)
    return out


def _mean_loss(loss, raw, target, weight):
    """``loss.mean`` at the outputs ``raw`` of shape ``(C, n)``, bit for bit
    (per output for two classes and one squared-error output)."""
    C = raw.shape[0]
    target = np.asarray(target)
    if type(loss) is CrossEntropy and C == 2 and target.ndim == 1:
        z = raw - np.maximum(raw[0], raw[1])
        per_row = -(np.where(target == 0, z[0], z[1]) - np.log(np.exp(z[0]) + np.exp(z[1])))
    elif type(loss) is SquaredError and C == 1 and target.ndim == 2:
        per_row = 0.5 * (raw[0] - target[:, 0]) ** 2
    else:
        return loss.mean(np.ascontiguousarray(raw.T), target, weight)
    return weighted_mean(per_row, weight)


def _bins_present(edges, n_bins):
    """``(len(edges), n_bins)``: whether feature ``f`` has bin ``k`` (``k <=
    len(edges[f])``); the others are empty on every site."""
    return np.arange(n_bins)[None, :] <= np.array([len(e) for e in edges],
                                                  dtype=np.int64).reshape(-1, 1)


def _narrowed(sums, dtype):
    """``sums`` in the smallest unsigned integer type that holds them exactly
    where they are integers, else in ``dtype``."""
    if sums.size and sums.min() >= 0 and sums.max() < 2 ** 32 and (
            np.floor(sums) == sums).all():
        top = sums.max()
        return sums.astype(np.uint8 if top < 2 ** 8 else np.uint16 if top < 2 ** 16
                           else np.uint32)
    return sums.astype(dtype, copy=False)


def _unpacked(packed, present, n_nodes):
    """The ``(G, H)`` histograms of shape ``(n_nodes, F, n_bins, C)`` of a
    site's :meth:`BoostingSite.packed_histograms` (``present``: the
    ``(F, n_bins)`` cells the features have, :func:`_bins_present`)."""
    bits, G_sums, H_sums = packed
    has = np.zeros((n_nodes,) + present.shape, dtype=bool)
    has[:, present] = np.unpackbits(bits, count=n_nodes * int(present.sum())).reshape(
        n_nodes, -1).astype(bool)
    G = np.zeros(has.shape + G_sums.shape[1:])
    H = np.zeros_like(G)
    G[has], H[has] = G_sums, H_sums
    return G, H


def _site_call(site, calls):
    """Run ``calls`` (``(method name, args)`` pairs) on ``site``; returns the
    site and the list of the results (a remote site stays where it is; only
    the results travel)."""
    return site, [getattr(site, name)(*args) for name, args in calls]


def result_nbytes(obj):
    """Bytes of the arrays (and floats) in a site's results: what a remote
    site sends."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (list, tuple)):
        return sum(result_nbytes(o) for o in obj)
    if obj is None:
        return 0
    return 8


class LocalSites:
    """The sites of a boosting held in this process (one for a plain fit).
    ``bytes_received`` counts what the sites returned, as a remote site would
    send it.

    ``pack``: the sites send their histograms packed, as remote sites do
    (:meth:`BoostingSite.packed_histograms`; the same sums); False for a
    plain fit, which sends nothing (and counts no bytes).
    """

    def __init__(self, sites, pack=True):
        self.sites = list(sites)
        self.pack = bool(pack)
        self.bytes_received = 0

    def call(self, *calls):
        """Every site's results of ``calls`` (see :func:`_site_call`): one
        list per site."""
        out = [_site_call(site, calls)[1] for site in self.sites]
        if self.pack:
            self.bytes_received += result_nbytes(out)
        return out


def _compiled_growth(sites):
    """:mod:`._boosting_numba`, where its compiled growth of a tree can take
    the levels of :func:`grow_shared_trees` (the same trees): one site of
    this process that sends nothing (:func:`grow_oblivious_trees`,
    :meth:`BoostingSite.grow`), with the numba engine
    (:func:`sktree_lmc.model._kernel.resolve_engine`); else None."""
    if not (type(sites) is LocalSites and not sites.pack and len(sites.sites) == 1
            and type(sites.sites[0]) is BoostingSite):
        return None
    if _kernel.resolve_engine() != "numba":
        return None
    from . import _boosting_numba

    return _boosting_numba


def _merge_thresholds(summaries, max_bins):
    """Candidate thresholds of every feature from the sites' :meth:`BoostingSite.summary`.

    The distinct values of all sites when they are at most ``max_bins + 1``
    (midpoints between them: exact); else, for one site, its quantiles (what
    a plain fit computes); for several, the quantiles of the mixture of the
    sites' distributions, each known at ``max_bins + 2`` quantiles and
    interpolated linearly between them, weighted by its rows.
    """
    sizes = np.array([n for _, n in summaries], dtype=np.float64)
    per_site = [s for s, _ in summaries]
    levels = np.linspace(0, 1, max_bins + 2)
    edges = []
    for f in range(len(per_site[0])):
        cols = [site[f] for site, n in zip(per_site, sizes) if n > 0]
        if not cols:
            edges.append(np.zeros(0))
            continue
        if all(values is not None for values, _ in cols):
            values = np.unique(np.concatenate([values for values, _ in cols]))
            if len(values) <= max_bins + 1:
                edges.append((values[1:] + values[:-1]) / 2)
                continue
        quantiles = [q for _, q in cols]
        if len(quantiles) == 1:
            edges.append(np.unique(quantiles[0][1:-1]))
            continue
        grid = np.unique(np.concatenate(quantiles))
        w = sizes[sizes > 0] / sizes.sum()
        cdf = sum(wk * np.interp(grid, q, levels) for wk, q in zip(w, quantiles))
        edges.append(np.unique(np.interp(levels[1:-1], cdf, grid)))
    return edges


def grow_shared_trees(sites, *, loss, n_trees, depth, n_outputs, mask=None,
                      learning_rate=BOOSTING_LEARNING_RATE, l2=BOOSTING_L2,
                      max_bins=BOOSTING_MAX_BINS, histogram_dtype="float64", on_tree=None,
                      gains=None):
    """Gradient boosting of oblivious trees over the rows of several sites.

    The sites (:class:`LocalSites`, or the shards of a federated fit) return
    sums only: per-feature summaries for the thresholds, class or target sums
    for the constant, and per level the histograms of gradients and Hessians
    over (node, feature, bin). The split search, the leaf values and the
    choice of the prefix run here, on the sums. With one site it is
    :func:`grow_oblivious_trees`; with several, the trees are those grown on
    the union of their rows, as in federated histogram boosting (federated
    XGBoost, SecureBoost), up to the thresholds, which come from the merged
    quantile summaries (exact when a feature has at most ``max_bins + 1``
    distinct values). Every site that holds validation rows contributes to
    the validation loss that chooses the prefix.

    Per level, a site sends the histograms of the left children (a right
    child's is its parent's minus its sibling's), of one output for two
    classes, packed (:meth:`BoostingSite.packed_histograms`: the cells of the
    bins its features have, a bit per cell, and the sums of the nonzero
    cells), unless ``sites.pack`` is False.

    Parameters
    ----------
    sites : LocalSites or a federated equivalent
        An object whose ``call(*calls)`` runs :func:`_site_call` on every site.
    loss, n_trees, depth, n_outputs, mask, learning_rate, l2, max_bins
        See :func:`grow_oblivious_trees`.
    histogram_dtype : {"float64", "float32"}, default="float64"
        The sums the sites send: ``"float64"`` grows the trees of the summed
        histograms exactly; ``"float32"`` halves the bytes of the sums, and
        a split can change where two gains are within float32 rounding (the
        leaf values are sent in float64 either way).
    on_tree : callable or None, default=None
        Called as ``on_tree(m)`` after tree ``m`` (0-based) is grown: the
        progress of a long federated growth.
    gains : ndarray of shape (n_trees, depth) or None, default=None
        See :func:`grow_oblivious_trees`.

    Returns
    -------
    base, features, thresholds, leaves
        See :func:`grow_oblivious_trees`.

    Raises
    ------
    TypeError, ValueError
        See :func:`grow_oblivious_trees`.
    """
    loss = as_loss(loss)
    n_trees = _as_int("n_trees", n_trees, 0)
    depth = _as_int("depth", depth, 0)
    n_outputs = _as_int("n_outputs", n_outputs, 1)
    max_bins = _as_int("max_bins", max_bins, 1)
    if histogram_dtype not in ("float64", "float32"):
        raise ValueError(f"histogram_dtype must be 'float64' or 'float32', got "
                         f"{histogram_dtype!r}.")
    if depth >= MAX_LEAVES_PER_TREE.bit_length():  # 2**depth > MAX_LEAVES_PER_TREE
        raise ValueError(
            f"depth={depth}: the boosted trees would have 2**{depth} leaves each, more than "
            f"the limit of {MAX_LEAVES_PER_TREE:,} (MAX_LEAVES_PER_TREE; see "
            f"sktree_lmc.model._architectures.check_model_size); their histograms alone would "
            f"have 2**{depth - 1} nodes per level. Use a smaller depth."
        )
    summaries = [r[0] for r in sites.call(("summary", (max_bins,)))]
    edges = _merge_thresholds(summaries, max_bins)
    F = len(edges)
    n_bins = max(1, max((len(e) for e in edges), default=0) + 1)
    out = sites.call(("base_sums", ()), ("shape", ()))
    sums = [r[0] for r in out]
    total, weight_sum = sum(s for s, _ in sums), sum(w for _, w in sums)
    # The weights are relative, as in the soft trees' weighted mean loss: they
    # are rescaled to a mean of 1 over all sites' rows, so that the L2 penalty
    # does not depend on their scale (weights of 1e-4 summing to 1 would
    # otherwise shrink every leaf to nothing) and no sum overflows; unweighted
    # rows keep weight 1. A weight of k counts as k repeated rows but for the
    # penalty's relative strength (exactly so with l2=0).
    weight_scale = sum(r[1][0] for r in out) / weight_sum
    base = loss.initial_prediction(total, weight_sum)
    # a split "after bin k" exists for k < len(edges[f]); others never win
    valid = np.arange(n_bins)[None, :] < np.array([len(e) for e in edges])[:, None]
    if mask is None:
        mask = np.ones((n_trees, F), dtype=bool)
    features = np.full((n_trees, depth), -1, dtype=np.int64)
    thresholds = np.zeros((n_trees, depth))
    leaves = np.zeros((n_trees, 1 << depth, n_outputs))
    # features per histogram call: at most _BLOCK_ENTRIES cells of the deepest level
    width = max(1, _BLOCK_ENTRIES // ((1 << max(depth - 1, 0)) * n_bins * n_outputs))
    # (no feature at all, e.g. every column constant: one empty block, and every
    # tree is a constant)
    blocks = [(lo, min(F, lo + width)) for lo in range(0, F, width)] or [(0, 0)]
    sites.call(("start", (edges, base, weight_scale)))
    n_leaves = 1 << depth
    first = blocks[0]
    # What the sites send, halved twice (the trees are the same up to rounding):
    # below the root only the left children's histograms (a right child's is its
    # parent's minus its sibling's), and for two classes only the first output's
    # (the softmax gradients of the two are opposite, their Hessians equal).
    n_sent = loss.histogram_outputs(n_outputs)
    pack = getattr(sites, "pack", True)
    present = _bins_present(edges, n_bins)

    def histograms(lo, hi, n_nodes, left_only):
        if pack:
            return ("packed_histograms", (lo, hi, n_nodes, left_only, n_sent, histogram_dtype))
        return ("histograms", (lo, hi, n_nodes, left_only, n_sent))

    def received(results, lo, hi, n_nodes):
        """The sum over the sites of their histograms of ``n_nodes`` nodes
        (each site's result list ends with them)."""
        pairs = [r[-1] for r in results]
        if pack:
            pairs = [_unpacked(p, present[lo:hi], n_nodes) for p in pairs]
        return _summed(pairs)

    def grown_levels(m, pending):
        """Tree ``m``'s levels from the sites' histograms (``pending``: the
        root's first block), its splits written; returns the leaves' sums."""
        parents = {}
        for d in range(depth):
            n_nodes = 1 << d
            gain = np.full((F, n_bins), -np.inf)
            hists = {}
            for lo, hi in blocks:
                sums = pending if (lo, hi) == first else received(
                    sites.call(histograms(lo, hi, n_nodes, d > 0)), lo, hi, max(n_nodes // 2, 1))
                hists[lo, hi] = sums if d == 0 else _with_right_children(
                    parents[lo, hi], sums, levels.get((d, lo, hi)))
                levels[d, lo, hi] = hists[lo, hi]
                gain[lo:hi] = _split_gain(*hists[lo, hi], l2, n_outputs)
            parents = hists
            # a split after the last bin is no split: every feature's last
            # column is the score of the level's nodes as they are
            unsplit = gain[:, -1].copy()
            gain[~valid] = -np.inf
            gain[~mask[m]] = -np.inf
            f, k = -1, 0
            if np.isfinite(gain).any():
                f, k = np.unravel_index(int(np.argmax(gain)), gain.shape)
                features[m, d], thresholds[m, d] = f, edges[f][k]
                if gains is not None:
                    gains[m, d] = max(gain[f, k] - unsplit[f], 0.0)
            if d < depth - 1:
                out = sites.call(("split", (int(f), int(k))),
                                 histograms(*first, 2 * n_nodes, True))
                pending = received(out, *first, n_nodes)
            else:
                out = sites.call(("split", (int(f), int(k))), ("leaf_sums", (n_leaves,)))
                pending = _summed([r[-1] for r in out])
        return pending

    compiled = _compiled_growth(sites)
    best_loss = best_m = None
    tree = None
    # each level's histograms, kept from one tree to the next as the arrays the
    # next tree's histograms of that level are written into (fresh arrays of
    # megabytes, on wide data, cost more to allocate than to fill)
    levels = {}
    for m in range(n_trees + 1):
        # add the last tree, start this one: the validation loss of the first m
        # trees, and the root's first histogram block
        calls = [("add_tree", (tree,))] + (
            [histograms(*first, 1, False)] if m < n_trees and compiled is None else [])
        out = sites.call(*calls)
        loss_sum = sum(o[0][0] for o in out)
        val_weight = sum(o[0][1] for o in out)
        if val_weight > 0 and (best_loss is None or loss_sum / val_weight < best_loss):
            best_loss, best_m = loss_sum / val_weight, m
        if m == n_trees:
            break
        if compiled is not None:  # the levels in one compiled call
            level_features, level_bins, level_gains, sums = sites.sites[0].compiled_tree(
                compiled, depth, (valid, np.ascontiguousarray(mask[m], dtype=bool)), (n_sent, l2))
            for d, (f, k) in enumerate(zip(level_features, level_bins)):
                if f >= 0:
                    features[m, d], thresholds[m, d] = f, edges[f][k]
                    if gains is not None:
                        gains[m, d] = max(level_gains[d], 0.0)
            pending = sums[:, 0::2], sums[:, 1::2]
        else:
            pending = grown_levels(m, received(out, *first, 1))
        G, H = pending
        leaves[m] = -learning_rate * G / (H + l2)
        tree = (features[m], thresholds[m], leaves[m])
        if on_tree is not None:
            on_tree(m)
    if best_m is not None:  # some site has validation rows: keep the best prefix
        features[best_m:], thresholds[best_m:], leaves[best_m:] = -1, 0.0, 0.0
        if gains is not None:
            gains[best_m:] = 0.0
    return base, features, thresholds, leaves


def averaged_trees(trees, weights):
    """One ensemble of oblivious trees whose output is the weighted mean of
    the outputs of several (``trees``: :func:`grow_oblivious_trees`'s
    ``(base, features, thresholds, leaves)`` of each; ``weights``: their
    nonnegative weights, normalized here): their trees side by side, each
    one's leaves times its ensemble's weight, and the weighted mean of the
    bases. Exact, as :func:`oblivious_output` sums the trees. Trees that
    split nowhere and add nothing (those a prefix dropped) are left out.

    Returns
    -------
    base, features, thresholds, leaves
        As :func:`grow_oblivious_trees` returns them, with the trees of all
        ensembles (at least one tree, when they have any).
    """
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != len(trees) or len(w) == 0 or (w < 0).any() or not w.sum() > 0:
        raise ValueError(f"averaged_trees needs one nonnegative weight per ensemble with a "
                         f"positive sum, got {len(w)} weights for {len(trees)} ensembles.")
    w = w / w.sum()
    base = sum(wk * np.asarray(t[0], dtype=np.float64) for wk, t in zip(w, trees))
    features = np.concatenate([t[1] for t in trees])
    thresholds = np.concatenate([t[2] for t in trees])
    leaves = np.concatenate([wk * np.asarray(t[3], dtype=np.float64)
                             for wk, t in zip(w, trees)])
    live = (features >= 0).any(axis=1) | (leaves != 0).reshape(len(leaves), -1).any(axis=1)
    if len(live) and not live.any():
        live[0] = True  # a constant ensemble: one tree of zeros keeps the shapes
    return base, features[live], thresholds[live], leaves[live]


def averaged_site_trees(results, loss, n_features):
    """The average of the trees that sites grew on their own rows
    (:meth:`BoostingSite.grow`), and the sum of their gains per feature:
    ``(trees, gains)``, or None when no site can take part.

    ``results``: per site, ``(base sums, grow result)`` (its
    :meth:`BoostingSite.base_sums` and :meth:`BoostingSite.grow`). Under
    cross-entropy a site whose rows lack a class is left out: its trees
    start from the log of a zero share and would push that class's logit
    down everywhere in the average (the other sites' say nothing of the
    class they lack). None when every site lacks one.
    """
    loss = as_loss(loss)
    kept = [grown for (sums, _), grown in results
            if type(loss) is not CrossEntropy or bool(np.all(np.asarray(sums) > 0))]
    if not kept:
        return None
    trees = averaged_trees([t for t, _, _ in kept], [w for _, _, w in kept])
    return trees, sum(feature_gains(t[1], g, n_features) for t, g, _ in kept)


def feature_gains(features, gains, n_features):
    """The total gain of the splits on every feature, of trees
    :func:`grow_oblivious_trees` grew with ``gains``: shape ``(n_features,)``."""
    used = features >= 0
    return np.bincount(features[used], weights=np.asarray(gains)[used], minlength=n_features)


def _with_right_children(parent, left, buffers=None):
    """The histograms of all ``2 n`` children of ``n`` nodes from their parents'
    ``(G, H)`` and their left children's (node ``2 i`` is node ``i``'s left
    child, ``2 i + 1`` its right one: the parent's minus the left).
    ``buffers``: two arrays of the result's shape to write into (a level's
    histograms of the tree before, no longer read), or None."""
    out = []
    for i, (P, L) in enumerate(zip(parent, left)):
        shape = (2 * len(P),) + P.shape[1:]
        both = buffers[i] if buffers is not None and buffers[i].shape == shape else np.empty(
            shape)
        both[0::2] = L
        np.subtract(P, L, out=both[1::2])
        out.append(both)
    return tuple(out)


def _all_outputs(G, H, n_outputs):
    """``(G, H)`` of every output, from the histograms the sites sent: for two
    classes, those of the first (the second's gradients are its negative, its
    Hessians the same)."""
    if G.shape[-1] == n_outputs:
        return G, H
    return np.concatenate([G, -G], axis=-1), np.concatenate([H, H], axis=-1)


def _summed(pairs):
    """The elementwise sum over sites of their ``(G, H)`` pairs (one site's as it is)."""
    if len(pairs) == 1:
        return pairs[0]
    G = sum(p[0] for p in pairs)
    H = sum(p[1] for p in pairs)
    return G, H


#: Cells (node, feature, bin) of the gains computed at once: a few hundred
#: kilobytes per intermediate, which stay in the core's cache and are reused
#: by the allocator, where the arrays of a whole level (megabytes on wide
#: data) were fresh memory for every operation.
_GAIN_BLOCK_CELLS = 1 << 15


def _split_gain(G, H, l2, n_outputs=None):
    """Second-order gain of every split "after bin k" of every feature,
    summed over the nodes and outputs: ``G`` and ``H`` of shape
    ``(n_nodes, n_features, n_bins, C)``; returns ``(n_features, n_bins)``.
    ``n_outputs``: 2 where ``G`` and ``H`` are the first output's of two
    classes (:func:`_all_outputs`): the second's terms are the same.
    Computed a block of features at a time (:data:`_GAIN_BLOCK_CELLS`): the
    same operations on every cell, so the same values."""
    n_nodes, F, n_bins = G.shape[:3]
    step = max(1, _GAIN_BLOCK_CELLS // max(n_nodes * n_bins, 1))
    if F <= step:
        return _block_gain(G, H, l2, n_outputs)
    out = np.empty((F, n_bins))
    for a in range(0, F, step):
        out[a:a + step] = _block_gain(G[:, a:a + step], H[:, a:a + step], l2, n_outputs)
    return out


def _block_gain(G, H, l2, n_outputs):
    """:func:`_split_gain` of one block of features."""
    total = np.zeros(G.shape[:3])
    for c in range(G.shape[3]):
        # GL^2 / (HL + l2) + (GT - GL)^2 / (HT - HL + l2), in place; the
        # cumulative sums are NumPy's (a sum from the first bin on, bin after
        # bin), by torch's kernel, several times as fast
        GL, HL = _cumsum(G[..., c]), _cumsum(H[..., c])
        GR, HR = GL[..., -1:] - GL, HL[..., -1:] - HL
        HR += l2
        HL += l2
        GR **= 2
        GR /= HR
        GL **= 2
        GL /= HL
        GL += GR
        total += GL
    if n_outputs is not None and G.shape[3] < n_outputs:
        # the second of two classes: gradients negated, Hessians equal, so that
        # its terms are the first's exactly (a negation rounds as its operand)
        total += total
    return total.sum(axis=0)


def _cumsum(a):
    """``a.cumsum(axis=-1)`` of a float64 array: the same sums in the same
    order (torch's kernel adds bin after bin from zero too)."""
    if not a.flags.writeable:  # torch wants arrays it could write to
        return a.cumsum(axis=-1)
    return torch.cumsum(torch.from_numpy(a), dim=-1).numpy()


def oblivious_output(X, base, features, thresholds, leaves):
    """Output of the trees of :func:`grow_oblivious_trees` on rows ``X``
    (hard thresholds; one vectorized pass per depth level).

    Returns
    -------
    raw : ndarray of shape (n_samples, n_outputs)
    """
    X = np.asarray(X, dtype=np.float64)
    M, D = features.shape
    out = np.empty((len(X), leaves.shape[2]))
    # rows apart in the kernel's threads (NumPy releases the GIL; each row's sum
    # is the same whatever rows it is computed with)
    tasks = max(1, min(_kernel._n_threads(), len(X) // 2048))

    def rows(g):
        lo, hi = len(X) * g // tasks, len(X) * (g + 1) // tasks
        leaf = np.zeros((hi - lo, M), dtype=np.int64)
        for d in range(D if X.shape[1] else 0):  # no feature: every row in leaf 0
            f = features[:, d]
            right = (X[lo:hi, np.maximum(f, 0)] > thresholds[None, :, d]) & (f[None, :] >= 0)
            leaf = leaf * 2 + right
        out[lo:hi] = base + leaves[np.arange(M)[None, :], leaf].sum(axis=1)

    _kernel.run_tasks(rows, tasks)
    return out


def boosted_start(module, arch, X, target, weight, *, loss, mask=None, generator=None,
                  slope=BOOSTING_SLOPE, validation=None, trees=None):
    """Set ``module``'s splits and leaves to gradient-boosted oblivious trees.

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        Freshly initialized; its parameters are changed in place (the
        additive table, when there is one, is left at its start).
    arch : TreeArchitecture
        ``"oblivious"`` or ``"non_oblivious"``.
    X : ndarray of shape (n_samples, F_enc)
        Encoded training rows (the validation rows excluded).
    target, weight, loss
        See :func:`grow_oblivious_trees`.
    mask : FeatureMask or None
        The features each tree may use.
    generator : torch.Generator or None
    slope : float, default=BOOSTING_SLOPE
        Slope of a split per standard deviation of its feature.
    validation : tuple or None
        Rows that choose how many trees to keep (see
        :func:`grow_oblivious_trees`); the trees after them keep the random
        splits ``module`` was initialized with and a constant output.
    trees : tuple or None
        Trees grown already (``(base, features, thresholds, leaves)``, e.g.
        by :func:`grow_shared_trees` over the shards of a federated fit):
        used instead of growing them on ``X``, whose standard deviations
        still scale the splits.

    Returns
    -------
    trees : tuple
        ``(base, features, thresholds, leaves)`` of :func:`grow_oblivious_trees`.
    """
    if arch.name not in BOOSTING_ARCHITECTURES:
        raise ValueError(
            f"split_init='boosting' supports the architectures {BOOSTING_ARCHITECTURES}, "
            f"got arch={arch.name!r}."
        )
    M, N, F = module.split_weight.shape
    C = module.leaf_value.shape[2]
    allowed = None if mask is None else mask.mask.cpu().numpy() > 0
    X = np.asarray(X, dtype=np.float64)
    if trees is None:
        trees = grow_oblivious_trees(
            X, target, weight, loss=loss, n_trees=M, depth=arch.depth, n_outputs=C,
            mask=allowed, generator=generator, validation=validation)
    base, feats, thr, leaves = trees
    if feats.shape != (M, arch.depth) or leaves.shape != (M, 1 << arch.depth, C):
        raise ValueError(f"The given trees have the shape {feats.shape} and {leaves.shape}, "
                         f"not the model's {(M, arch.depth)} and {(M, 1 << arch.depth, C)}.")
    # the trees dropped on the validation rows keep their random splits (and
    # a constant output), for gradient descent to train
    dropped = (feats < 0).all(axis=1) & (leaves == 0).all(axis=(1, 2))
    std = X.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    level = _node_levels(arch)  # every node takes the split of its depth level
    f = feats[:, level]  # (M, N)
    split = f >= 0
    scale = np.where(split, slope / std[np.maximum(f, 0)], 0.0)
    with torch.no_grad():
        w = module.split_weight
        b = module.split_bias
        trees, nodes = np.nonzero(split)
        cols = f[trees, nodes]
        w[trees, nodes, cols] -= torch.as_tensor(scale[trees, nodes], dtype=w.dtype,
                                                 device=w.device)
        bias = np.where(split, scale * thr[:, level], 20.0)  # no split: every row left
        bias = torch.as_tensor(bias, dtype=b.dtype, device=b.device)
        keep = torch.as_tensor(dropped, device=b.device)
        b.copy_(torch.where(keep[:, None], b, bias))
        values = leaves + base[None, None, :] / M
        # structural leaf l of the architecture <- the oblivious leaf its path reaches
        module.leaf_value.copy_(torch.as_tensor(values[:, _leaf_index(arch)][:, arch.free_leaves],
                                                dtype=module.leaf_value.dtype,
                                                device=module.leaf_value.device))
    return base, feats, thr, leaves


def _node_levels(arch):
    """Depth level of every split node of ``arch``'s table."""
    if arch.name == "oblivious":
        return np.arange(arch.n_nodes)
    # perfect binary tree in breadth-first order: node i is at level floor(log2(i + 1))
    return np.floor(np.log2(np.arange(arch.n_nodes) + 1)).astype(np.int64)


def _leaf_index(arch):
    """The oblivious leaf (``sum_d right_d * 2**(D - 1 - d)``) of every
    structural leaf of ``arch``: the sides its path takes level by level."""
    code = arch.code  # (L, N): +1 left of the node, -1 right, 0 not on the path
    level = _node_levels(arch)
    D = arch.depth
    out = np.zeros(code.shape[0], dtype=np.int64)
    for n in range(arch.n_nodes):
        right = code[:, n] == -1
        out += np.where(right, 1 << (D - 1 - level[n]), 0)
    return out

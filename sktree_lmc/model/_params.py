"""Array form of an ensemble's parameters, and the ops that act on it."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ._architectures import SymmetryOps

__all__ = ["TreeParams"]


@dataclass(eq=False)
class TreeParams:
    """Parameters of a soft tree ensemble as NumPy arrays (always on the CPU).

    The layout is the one of :class:`TreeArchitecture`: ``M`` trees,
    ``N`` splitting nodes, ``L`` free leaves, ``F`` features, ``C`` outputs.

    Parameters
    ----------
    split_weight : ndarray of shape (M, N, F)
        Split weights ``w``.
    split_bias : ndarray of shape (M, N)
        Split biases ``b``; node ``n`` sends ``sigmoid(w[n] . x + b[n])`` left.
    leaf_value : ndarray of shape (M, L, C)
        Leaf values ``pi``.
    additive : ndarray of shape (K, C) or None, default=None
        The table of the additive term (``additive_bins`` of the estimators):
        one row per input bin or category, added to the output of every row
        in it (see :meth:`TabularEncoder.additive_codes`). It has no symmetry:
        the symmetry ops leave it as it is, and interpolation and averages
        act on it entry by entry. None: no additive term.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TreeParams
    >>> p = TreeParams(np.zeros((4, 3, 5)), np.zeros((4, 3)), np.ones((4, 4, 2)))
    >>> p.n_trees, p.n_nodes, p.n_leaves, p.n_features, p.n_outputs
    (4, 3, 4, 5, 2)
    >>> q = p.interpolate(p.permute_trees([3, 2, 1, 0]), 0.5)
    >>> float(q.leaf_value.mean())
    1.0
    """

    split_weight: np.ndarray
    split_bias: np.ndarray
    leaf_value: np.ndarray
    additive: np.ndarray | None = None

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or f.name != "additive":
                setattr(self, f.name, np.asarray(value, dtype=np.float32))
        M, N, _ = self.split_weight.shape
        if self.split_bias.shape != (M, N) or self.leaf_value.ndim != 3 or (
            self.leaf_value.shape[0] != M
        ) or (self.additive is not None and (
            self.additive.ndim != 2 or self.additive.shape[1] != self.leaf_value.shape[2]
        )):
            raise ValueError(
                "Inconsistent parameter shapes: split_weight "
                f"{self.split_weight.shape}, split_bias {self.split_bias.shape}, "
                f"leaf_value {self.leaf_value.shape}"
                + ("" if self.additive is None else f", additive {self.additive.shape}")
                + "."
            )

    # -- shape ---------------------------------------------------------------
    @property
    def n_trees(self):
        """Number of trees ``M``."""
        return self.split_weight.shape[0]

    @property
    def n_nodes(self):
        """Splitting nodes per tree ``N``."""
        return self.split_weight.shape[1]

    @property
    def n_features(self):
        """Number of input features ``F``."""
        return self.split_weight.shape[2]

    @property
    def n_leaves(self):
        """Free leaves per tree ``L``."""
        return self.leaf_value.shape[1]

    @property
    def n_outputs(self):
        """Outputs per leaf ``C``."""
        return self.leaf_value.shape[2]

    @property
    def n_additive(self):
        """Rows ``K`` of the additive table (0 without one)."""
        return 0 if self.additive is None else self.additive.shape[0]

    def arrays(self):
        """The parameter arrays, ``additive`` last when there is one.

        Returns
        -------
        tuple of ndarray
            ``(split_weight, split_bias, leaf_value[, additive])``.
        """
        base = (self.split_weight, self.split_bias, self.leaf_value)
        return base if self.additive is None else (*base, self.additive)

    @property
    def nbytes(self):
        """Bytes of all the parameter arrays.

        Every array field counts (``split_weight``, ``split_bias``,
        ``leaf_value`` and the additive table); a field that is None (no
        additive term) counts 0.

        Returns
        -------
        int
            The sum of the arrays' ``nbytes``.
        """
        return sum(int(getattr(self, f.name).nbytes) for f in fields(self)
                   if getattr(self, f.name) is not None)

    @property
    def shape_signature(self):
        """Tuple ``(M, N, F, L, C)`` used to check compatibility of models."""
        return (self.n_trees, self.n_nodes, self.n_features, self.n_leaves, self.n_outputs)

    def copy(self):
        """Return a deep copy.

        Returns
        -------
        TreeParams
            New arrays with the same values.
        """
        return TreeParams(*(a.copy() for a in self.arrays()))

    # -- algebra -------------------------------------------------------------
    # Parameters form a vector space: ``p + q``, ``p - q`` and ``c * p`` act
    # array by array and keep the dtype of their operands (``astype(np.float64)``
    # gives exact accumulations); ``inner`` is the node-weighted inner product
    # whose maximization over symmetries is weight matching.
    #: NumPy scalars defer to ``__rmul__`` (``np.float64(0.5) * params``).
    __array_ufunc__ = None

    @classmethod
    def _from_arrays(cls, split_weight, split_bias, leaf_value, additive=None):
        """Build without casting to float32 (results of the algebra)."""
        new = object.__new__(cls)
        new.split_weight, new.split_bias, new.leaf_value = split_weight, split_bias, leaf_value
        new.additive = additive
        return new

    def _check_same_shape(self, other):
        if not isinstance(other, TreeParams):
            raise TypeError(f"Expected TreeParams, got {type(other).__name__}.")
        if other.shape_signature != self.shape_signature:
            raise ValueError(
                f"Parameter shapes {other.shape_signature} (M, N, F, L, C) do not match "
                f"{self.shape_signature}."
            )
        check_same_additive(self, other)

    def _map(self, fn, *others):
        """``fn`` applied array by array to ``self`` and ``others`` (same shapes)."""
        for other in others:
            self._check_same_shape(other)
        return TreeParams._from_arrays(
            *(fn(*arrays) for arrays in zip(self.arrays(), *(o.arrays() for o in others))))

    def astype(self, dtype):
        """Return the parameters as arrays of ``dtype``.

        Parameters
        ----------
        dtype : numpy dtype
            For example ``np.float64`` for exact sums of many models; the
            algebra keeps it, the constructor casts back to float32.

        Returns
        -------
        TreeParams
            New arrays of ``dtype``.
        """
        return self._map(lambda a: np.asarray(a, dtype=dtype))

    def __add__(self, other):
        return self._map(np.add, other)

    def __sub__(self, other):
        return self._map(np.subtract, other)

    def __mul__(self, scalar):
        if not np.isscalar(scalar) and np.ndim(scalar) != 0:
            return NotImplemented
        return self._map(lambda a: scalar * a)

    __rmul__ = __mul__

    def inner(self, other, node_weights=None):
        """Node-weighted inner product ``<self, other>_W``, in float64.

        ``sum_n W_n (w_n . w'_n + b_n b'_n)`` over all trees plus the plain
        inner products of the leaf values and of the additive tables (which
        no symmetry op changes). With ``W`` the architecture's
        ``node_weights`` (leaves affected by each node) it is the objective
        of weighted weight matching (Section 3.2 of the paper).

        Parameters
        ----------
        other : TreeParams
            Parameters of the same shapes.
        node_weights : array-like of shape (N,), default=None
            Per-node weights; all ones when None.

        Returns
        -------
        float
            The inner product.
        """
        self._check_same_shape(other)
        nw = np.ones(self.n_nodes) if node_weights is None else np.asarray(node_weights)
        return float(
            np.einsum("mnf,mnf,n->", self.split_weight, other.split_weight, nw)
            + np.einsum("mn,mn,n->", self.split_bias, other.split_bias, nw)
            + np.sum(self.leaf_value * other.leaf_value)
            + (0.0 if self.additive is None else np.sum(self.additive * other.additive))
        )

    # -- operations ----------------------------------------------------------
    def permute_trees(self, perm):
        """Return the ensemble with trees reordered: tree ``m`` becomes ``perm[m]``.

        Parameters
        ----------
        perm : array-like of shape (M,)
            A permutation of ``range(M)``.

        Returns
        -------
        TreeParams
            New parameters; tree ``m`` is tree ``perm[m]`` of ``self``.
        """
        perm = np.asarray(perm)
        return TreeParams(self.split_weight[perm], self.split_bias[perm], self.leaf_value[perm],
                          self.additive)

    def apply_ops(self, ops):
        """Apply one symmetry op per tree (the same code path for every architecture).

        Parameters
        ----------
        ops : SymmetryOps
            ``M`` ops; op ``m`` acts on tree ``m`` as
            ``w'[n] = sign[n] * w[perm[n]]``, ``b'[n] = sign[n] * b[perm[n]]``,
            ``pi'[l] = pi[leaf_perm[l]]``.

        Returns
        -------
        TreeParams
            New parameters computing the same function.
        """
        if len(ops) != self.n_trees:
            raise ValueError(f"Expected {self.n_trees} ops, got {len(ops)}.")
        rows = np.arange(self.n_trees)[:, None]
        sign = ops.sign.astype(np.float32)
        return TreeParams(
            self.split_weight[rows, ops.perm] * sign[:, :, None],
            self.split_bias[rows, ops.perm] * sign,
            self.leaf_value[rows, ops.leaf_perm],
            self.additive,
        )

    def interpolate(self, other, lam):
        """Return ``(1 - lam) * self + lam * other``, parameter by parameter.

        Parameters
        ----------
        other : TreeParams
            Parameters of the same shapes (aligned to ``self`` for merging).
        lam : float
            Weight of ``other``.

        Returns
        -------
        TreeParams
            The interpolated parameters.
        """
        lam = np.float32(lam)
        self._check_same_shape(other)
        return TreeParams(*((1 - lam) * a + lam * b
                            for a, b in zip(self.arrays(), other.arrays())))

    @staticmethod
    def weighted_average(params, weights):
        """Weighted average of several compatible parameter sets.

        Parameters
        ----------
        params : sequence of TreeParams
            Parameter sets of the same shapes.
        weights : array-like of shape (len(params),)
            Non-negative weights; they are normalized to sum to one.

        Returns
        -------
        TreeParams
            ``sum(w_i * params_i) / sum(w_i)``, parameter by parameter.
        """
        w = np.asarray(weights, dtype=np.float64)
        w = (w / w.sum()).astype(np.float32)
        for p in params[1:]:
            check_same_additive(params[0], p)
        return TreeParams(*(sum(wi * arrays[i] for wi, arrays in
                                zip(w, (p.arrays() for p in params)))
                            for i in range(len(params[0].arrays()))))


def check_same_additive(a, b):
    """Raise a ValueError unless ``a`` and ``b`` both lack an additive table or
    have tables of the same shape."""
    sa = None if a.additive is None else a.additive.shape
    sb = None if b.additive is None else b.additive.shape
    if sa != sb:
        what = {None: "no additive term"}
        raise ValueError(
            f"Additive tables differ: {what.get(sa, f'shape {sa}')} vs "
            f"{what.get(sb, f'shape {sb}')} (models fitted with different additive_bins "
            "or encoders)."
        )


def check_finite_params(params, owner):
    """Raise a ValueError naming ``owner`` and the array unless every parameter
    array of ``params`` (the additive table included) is finite.

    Parameters
    ----------
    params : TreeParams
        The parameters to check.
    owner : str
        What holds them, for the message (``"Estimator 1"``, ``"Model 0"``).

    Raises
    ------
    ValueError
        If an array holds NaN or an infinity.
    """
    for f in fields(params):
        array = getattr(params, f.name)
        if array is not None and not np.all(np.isfinite(array)):
            raise ValueError(
                f"{owner} has non-finite (NaN or infinite) parameters in {f.name}: it "
                "cannot be aligned or merged. Refit it (a diverging fit gives such "
                "parameters; try a lower learning_rate)."
            )


def compose_ops(first: SymmetryOps, second: SymmetryOps) -> SymmetryOps:
    """Op equal to applying ``first`` and then ``second`` (per tree)."""
    rows = np.arange(len(first))[:, None]
    return SymmetryOps(
        first.perm[rows, second.perm],
        second.sign * first.sign[rows, second.perm],
        first.leaf_perm[rows, second.leaf_perm],
    )

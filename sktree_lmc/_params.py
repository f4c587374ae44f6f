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

    def __post_init__(self):
        for f in fields(self):
            setattr(self, f.name, np.asarray(getattr(self, f.name), dtype=np.float32))
        M, N, _ = self.split_weight.shape
        if self.split_bias.shape != (M, N) or self.leaf_value.ndim != 3 or (
            self.leaf_value.shape[0] != M
        ):
            raise ValueError(
                "Inconsistent parameter shapes: split_weight "
                f"{self.split_weight.shape}, split_bias {self.split_bias.shape}, "
                f"leaf_value {self.leaf_value.shape}."
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
        return TreeParams(self.split_weight.copy(), self.split_bias.copy(), self.leaf_value.copy())

    # -- algebra -------------------------------------------------------------
    # Parameters form a vector space: ``p + q``, ``p - q`` and ``c * p`` act
    # array by array and keep the dtype of their operands (``astype(np.float64)``
    # gives exact accumulations); ``inner`` is the node-weighted inner product
    # whose maximization over symmetries is weight matching.
    #: NumPy scalars defer to ``__rmul__`` (``np.float64(0.5) * params``).
    __array_ufunc__ = None

    @classmethod
    def _from_arrays(cls, split_weight, split_bias, leaf_value):
        """Build without casting to float32 (results of the algebra)."""
        new = object.__new__(cls)
        new.split_weight, new.split_bias, new.leaf_value = split_weight, split_bias, leaf_value
        return new

    def _check_same_shape(self, other):
        if not isinstance(other, TreeParams):
            raise TypeError(f"Expected TreeParams, got {type(other).__name__}.")
        if other.shape_signature != self.shape_signature:
            raise ValueError(
                f"Parameter shapes {other.shape_signature} (M, N, F, L, C) do not match "
                f"{self.shape_signature}."
            )

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
        return TreeParams._from_arrays(
            *(np.asarray(a, dtype=dtype) for a in (self.split_weight, self.split_bias,
                                                   self.leaf_value))
        )

    def __add__(self, other):
        self._check_same_shape(other)
        return TreeParams._from_arrays(self.split_weight + other.split_weight,
                                       self.split_bias + other.split_bias,
                                       self.leaf_value + other.leaf_value)

    def __sub__(self, other):
        self._check_same_shape(other)
        return TreeParams._from_arrays(self.split_weight - other.split_weight,
                                       self.split_bias - other.split_bias,
                                       self.leaf_value - other.leaf_value)

    def __mul__(self, scalar):
        if not np.isscalar(scalar) and np.ndim(scalar) != 0:
            return NotImplemented
        return TreeParams._from_arrays(scalar * self.split_weight, scalar * self.split_bias,
                                       scalar * self.leaf_value)

    __rmul__ = __mul__

    def inner(self, other, node_weights=None):
        """Node-weighted inner product ``<self, other>_W``, in float64.

        ``sum_n W_n (w_n . w'_n + b_n b'_n)`` over all trees plus the plain
        inner product of the leaf values. With ``W`` the architecture's
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
        return TreeParams(self.split_weight[perm], self.split_bias[perm], self.leaf_value[perm])

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
        return TreeParams(
            (1 - lam) * self.split_weight + lam * other.split_weight,
            (1 - lam) * self.split_bias + lam * other.split_bias,
            (1 - lam) * self.leaf_value + lam * other.leaf_value,
        )

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
        return TreeParams(
            sum(wi * p.split_weight for wi, p in zip(w, params)),
            sum(wi * p.split_bias for wi, p in zip(w, params)),
            sum(wi * p.leaf_value for wi, p in zip(w, params)),
        )


def compose_ops(first: SymmetryOps, second: SymmetryOps) -> SymmetryOps:
    """Op equal to applying ``first`` and then ``second`` (per tree)."""
    rows = np.arange(len(first))[:, None]
    return SymmetryOps(
        first.perm[rows, second.perm],
        second.sign * first.sign[rows, second.perm],
        first.leaf_perm[rows, second.leaf_perm],
    )

"""The encoded inputs of a batch of rows: the trees' features and the additive codes.

A model with an additive term reads two arrays: the float32 features its trees split on,
``X`` of shape ``(n_rows, F)``, and the additive table's row of every value of every code
column, ``codes`` of shape ``(n_rows, J)`` (int32, as
:meth:`~sktree_lmc.encoding.TabularEncoder.encode` makes them). They travel together in
an :class:`Inputs`, each its own array, from the encoding to the module's forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Inputs"]


@dataclass(frozen=True)
class Inputs:
    """The encoded rows of a fit or a batch: features and additive codes.

    Not a tuple (no ``len``, no unpacking), so that it cannot pass for an
    array of rows by mistake.

    Parameters
    ----------
    X : ndarray or torch.Tensor of shape (n_rows, F)
        The trees' features.
    codes : ndarray or torch.Tensor of int of shape (n_rows, J), default=None
        The additive table's row of every code column; None without an
        additive term.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc.model._inputs import Inputs
    >>> rows = Inputs(np.zeros((4, 3), dtype=np.float32), np.arange(8).reshape(4, 2))
    >>> rows.n_rows, rows.take([0, 2]).codes.tolist()
    (4, [[0, 1], [4, 5]])
    """

    X: Any
    codes: Any = None

    @property
    def n_rows(self):
        """The number of rows."""
        return self.X.shape[0]

    def take(self, rows):
        """The rows ``rows`` (an index array, a mask or a slice) of both arrays."""
        return Inputs(self.X[rows], None if self.codes is None else self.codes[rows])

    @classmethod
    def concatenate(cls, parts):
        """The rows of the :class:`Inputs` ``parts`` (NumPy arrays) one after the other."""
        parts = list(parts)
        codes = None
        if parts[0].codes is not None:
            codes = np.concatenate([p.codes for p in parts])
        return cls(np.concatenate([p.X for p in parts]), codes)

"""The model: what a soft tree ensemble is and how it computes.

Lives here: the four architectures as data (``_architectures``: one table of shapes and
symmetry operations per architecture), the trees' parameters (``_params.TreeParams``), the
forward pass (``_forward.SoftTreeEnsembleModule``), the oblivious trees' splitting orders
(``_oblivious``), and the compiled CPU kernel of the forward and its gradients
(``_kernel``, ``_fused_numba``; the torch forward stays the reference).

May import: ``sktree_lmc.utils``.
"""

from ._architectures import (
    ARCHITECTURES,
    SymmetryOps,
    TreeArchitecture,
    get_architecture,
    is_valid_op,
    random_ops,
)
from ._forward import SoftTreeEnsembleModule
from ._kernel import training_engine
from ._params import TreeParams

__all__ = [
    "ARCHITECTURES", "SoftTreeEnsembleModule", "SymmetryOps", "TreeArchitecture", "TreeParams",
    "get_architecture", "is_valid_op", "random_ops", "training_engine",
]

"""sktree_lmc: soft tree ensembles for scikit-learn, with model merging.

Soft (differentiable) tree ensembles trained with PyTorch, in four
architectures, and the machinery of "Linear Mode Connectivity in
Differentiable Tree Ensembles": the symmetries of trees, weight and activation
matching, merging of independently trained models and the LMC barrier.
"""

from ._architectures import ARCHITECTURES, SymmetryOps, TreeArchitecture, get_architecture
from ._estimators import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
from ._params import TreeParams

__version__ = "0.1.0.dev0"

__all__ = [
    "ARCHITECTURES",
    "SoftTreeEnsembleClassifier",
    "SoftTreeEnsembleRegressor",
    "SymmetryOps",
    "TreeArchitecture",
    "TreeParams",
    "get_architecture",
]

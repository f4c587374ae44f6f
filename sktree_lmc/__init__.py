"""sktree_lmc: soft tree ensembles for scikit-learn, with model merging.

Soft (differentiable) tree ensembles trained with PyTorch, in four
architectures, and the machinery of "Linear Mode Connectivity in
Differentiable Tree Ensembles": the symmetries of trees, weight and activation
matching, merging of independently trained models and the LMC barrier.
"""

from ._architectures import (
    ARCHITECTURES,
    SymmetryOps,
    TreeArchitecture,
    get_architecture,
    is_valid_op,
    random_ops,
)
from ._dask import WorkerLostError
from ._encoding import TabularEncoder
from ._estimators import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
from ._export import encode_categories, export_module
from ._forward import SoftTreeEnsembleModule
from ._kernel import training_engine
from ._onnx import export_onnx, onnx_inputs
from ._matching import (
    Alignment,
    activation_matching,
    best_ops_for_pairs,
    pairwise_tree_similarity,
    weight_matching,
)
from ._merge import ModelAligner, merge_estimators
from ._metrics import (
    InterpolationCurve,
    InterpolationCurveDisplay,
    interpolation_curve,
    lmc_barrier,
)
from ._params import TreeParams
from ._refit import refit_leaves
from ._report import MergeQualityWarning, MergeReport
from ._sharded import ShardedSoftTreeEnsemble, make_shards

__version__ = "0.1.0.dev0"

__all__ = [
    "ARCHITECTURES",
    "Alignment",
    "InterpolationCurve",
    "InterpolationCurveDisplay",
    "MergeQualityWarning",
    "MergeReport",
    "ModelAligner",
    "ShardedSoftTreeEnsemble",
    "SoftTreeEnsembleClassifier",
    "SoftTreeEnsembleModule",
    "SoftTreeEnsembleRegressor",
    "SymmetryOps",
    "TabularEncoder",
    "TreeArchitecture",
    "TreeParams",
    "WorkerLostError",
    "activation_matching",
    "best_ops_for_pairs",
    "encode_categories",
    "export_module",
    "export_onnx",
    "get_architecture",
    "interpolation_curve",
    "is_valid_op",
    "lmc_barrier",
    "make_shards",
    "merge_estimators",
    "onnx_inputs",
    "pairwise_tree_similarity",
    "random_ops",
    "refit_leaves",
    "training_engine",
    "weight_matching",
]

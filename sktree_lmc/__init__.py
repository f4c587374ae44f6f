"""sktree_lmc: soft tree ensembles for scikit-learn, with model merging.

Soft (differentiable) tree ensembles trained with PyTorch, in four
architectures, and the machinery of "Linear Mode Connectivity in
Differentiable Tree Ensembles": the symmetries of trees, weight and activation
matching, merging of independently trained models and the LMC barrier.

The package is laid out by concept, each subpackage importing only those listed before it:

- ``sktree_lmc.utils``: device, threads and progress;
- ``sktree_lmc.model``: the architectures, the trees' parameters, the forward and its kernel;
- ``sktree_lmc.encoding``: raw columns to features, summaries and unions of encoders;
- ``sktree_lmc.training``: losses, the fit's plan, the epochs, the teacher and the start;
- the estimators (``SoftTreeEnsembleClassifier``, ``SoftTreeEnsembleRegressor``), the front
  that assembles the parts above;
- ``sktree_lmc.merging``: matching, merging, leaf refits, barriers and curves;
- ``sktree_lmc.federation``: shards, federated rounds and dask;
- ``sktree_lmc.export``: torch and ONNX export, persistence.

Every public name is importable from ``sktree_lmc`` itself.
"""

from .encoding import TabularEncoder
from ._estimators import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
from .export import encode_categories, export_module, export_onnx, onnx_inputs
from .federation import ShardedSoftTreeEnsemble, WorkerLostError, make_shards
from .merging import (
    Alignment,
    InterpolationCurve,
    InterpolationCurveDisplay,
    MergeQualityWarning,
    MergeReport,
    ModelAligner,
    PredictionSums,
    activation_matching,
    best_ops_for_pairs,
    calibrate_mean,
    interpolation_curve,
    lmc_barrier,
    merge_estimators,
    pairwise_tree_similarity,
    prediction_sums,
    refit_leaves,
    weight_matching,
)
from .model import (
    ARCHITECTURES,
    SoftTreeEnsembleModule,
    SymmetryOps,
    TreeArchitecture,
    TreeParams,
    get_architecture,
    is_valid_op,
    random_ops,
    training_engine,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "ARCHITECTURES",
    "Alignment",
    "InterpolationCurve",
    "InterpolationCurveDisplay",
    "MergeQualityWarning",
    "MergeReport",
    "ModelAligner",
    "PredictionSums",
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
    "calibrate_mean",
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
    "prediction_sums",
    "random_ops",
    "refit_leaves",
    "training_engine",
    "weight_matching",
]

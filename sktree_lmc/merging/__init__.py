"""Alignment and merging of fitted models, and the measures of linear mode connectivity.

Lives here: weight and activation matching over the symmetries of trees (``_matching``,
``_nway`` for more than two models), ``ModelAligner`` and ``merge_estimators``
(``_merge``), the estimator-level glue of a merge (``_bridge``: compatible models, a common
encoding, the merged estimator), the merge's quality report (``_report``), leaf refits
(``_refit``), a merged regressor's mean set from sums at its sites (``_calibrate``), and
barriers and interpolation curves (``_metrics``).

May import: the estimators (``sktree_lmc._estimators``, ``sktree_lmc._validation``) and
every subpackage below them: ``training``, ``encoding``, ``model``, ``utils``; ``_refit``
uses ``federation._dask`` for leaf refits of rows held by dask workers.
"""

from ._matching import (
    Alignment,
    activation_matching,
    best_ops_for_pairs,
    pairwise_tree_similarity,
    weight_matching,
)
from ._calibrate import PredictionSums, calibrate_mean, prediction_sums
from ._merge import ModelAligner, merge_estimators
from ._metrics import (
    InterpolationCurve,
    InterpolationCurveDisplay,
    interpolation_curve,
    lmc_barrier,
)
from ._refit import refit_leaves
from ._report import MergeQualityWarning, MergeReport

__all__ = [
    "Alignment", "InterpolationCurve", "InterpolationCurveDisplay", "MergeQualityWarning",
    "MergeReport", "ModelAligner", "PredictionSums", "activation_matching",
    "best_ops_for_pairs", "calibrate_mean", "interpolation_curve", "lmc_barrier",
    "merge_estimators", "pairwise_tree_similarity", "prediction_sums", "refit_leaves",
    "weight_matching",
]

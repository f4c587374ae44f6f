"""The explicit inputs of one fit: :class:`FitPlan` and :class:`Recipe`.

Every way of training an estimator goes through one private entry point,
``_fit(X, y, sample_weight, plan)``: :meth:`fit` with the default plan,
``partial_fit`` with a one-epoch recipe, the shard fits of
:class:`~sktree_lmc.ShardedSoftTreeEnsemble` with the encoder and the
boosted trees shared by all shards, and the federated rounds with the merged
model to continue from and their window of the learning-rate schedule. What
the caller decides is an argument, never an attribute set on the estimator
from outside (scikit-learn's ``HistGradientBoosting*.fit(X_val=...)`` and
LightGBM's ``fit(init_model=...)`` do the same).

Nothing here imports the estimators.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model._params import TreeParams

__all__: list = []


@dataclass(frozen=True)
class Recipe:
    """The training recipe of one fit: the hyperparameters that a caller
    (``partial_fit``, a federated round) may set for a single fit without
    changing the estimator's own.

    Attributes
    ----------
    max_epochs : int
        Epochs of this fit.
    early_stopping : bool or "auto"
        Whether a validation split ends the fit early and restores its best
        epoch; ``"auto"`` until :meth:`resolved` decides it from the data.
    lr_schedule : str
        ``"constant"`` or ``"cosine"`` (see the estimators).
    warmup_fraction : float
        Fraction of the schedule's steps spent warming up.
    averaging : str or None
        ``"ema"``, ``"swa"`` or None: the weight average that becomes the fitted model.
    teacher_weight : float
        Weight of the gradient-boosted teacher in the training targets.
    keep_optimizer_state : bool
        Whether Adam's state is kept after the fit (``optimizer_state_``), so
        that a later fit continues it.
    label_smoothing : float or "auto"
        The classifier's label smoothing (0 for a regressor); ``"auto"`` until
        :meth:`resolved` decides it with the early stopping.
    teacher_rows : float or "auto"
        Extra rows labelled by the teacher alone, as a multiple of the
        training rows; ``"auto"`` until :meth:`resolved` decides it.
    """

    max_epochs: int
    early_stopping: bool | str
    lr_schedule: str
    warmup_fraction: float
    averaging: str | None
    teacher_weight: float
    keep_optimizer_state: bool
    label_smoothing: float | str = 0.0
    teacher_rows: float | str = 0.0

    @classmethod
    def from_estimator(cls, est, **changes):
        """The recipe of ``est``'s hyperparameters, with ``changes``."""
        values = {f.name: getattr(est, f.name) for f in dataclasses.fields(cls)
                  if f.name not in ("keep_optimizer_state", "label_smoothing")}
        values["keep_optimizer_state"] = bool(est.warm_start)
        values["label_smoothing"] = getattr(est, "label_smoothing", 0.0)  # none: a regressor
        values.update(changes)
        return cls(**values)

    def resolved(self, n_samples, validation=None, n_classes=0):
        """This recipe with ``early_stopping="auto"`` decided for a fit of
        ``n_samples`` training rows of ``n_classes`` classes (0: a
        regression): on with validation rows of the user's own, or above
        :data:`EARLY_STOPPING_AUTO_ROWS` rows (multiclass:
        :data:`EARLY_STOPPING_AUTO_ROWS_MULTICLASS`; see
        :func:`auto_early_stopping`); and ``label_smoothing="auto"``:
        :data:`AUTO_LABEL_SMOOTHING` where ``early_stopping="auto"`` decided
        to run without early stopping (small data), else 0; and
        ``teacher_rows="auto"``: :func:`auto_teacher_rows`."""
        early = self.early_stopping
        if early == "auto":
            early = auto_early_stopping(n_samples, validation is not None, n_classes)
        smoothing = self.label_smoothing
        if isinstance(smoothing, str):  # "auto"
            small = self.early_stopping == "auto" and not early
            smoothing = AUTO_LABEL_SMOOTHING if small else 0.0
        extra = self.teacher_rows
        if isinstance(extra, str):  # "auto"
            extra = auto_teacher_rows(n_classes, self.teacher_weight)
        return dataclasses.replace(self, early_stopping=early, label_smoothing=smoothing,
                                   teacher_rows=float(extra))

    #: The recipe of ``partial_fit``: one epoch at the constant learning
    #: rate, no averaging, no early stopping, no teacher, Adam's state kept.
    PARTIAL_FIT = dict(max_epochs=1, early_stopping=False, lr_schedule="constant",
                       warmup_fraction=0.0, averaging=None, teacher_weight=0.0,
                       keep_optimizer_state=True, teacher_rows=0.0)


#: ``early_stopping="auto"`` holds out a validation split above this many
#: training rows. Below it, the split is too small to choose an epoch (10 % of
#: 1,000 rows is 100 rows) and costs more than it saves: chosen by
#: measurement (``docs/benchmarks.md``, "Early stopping on small data").
EARLY_STOPPING_AUTO_ROWS = 3_000


#: ``label_smoothing="auto"`` on a fit that ``early_stopping="auto"`` runs
#: without early stopping (small data): with no rows held out to stop it, the
#: model fits its training rows to the last epoch, and smoothing the targets
#: keeps it from fitting them with certainty. Chosen by measurement
#: (``docs/benchmarks.md``, "Label smoothing on small data" and "Label smoothing and
#: calibration"): 0.05 was the default at first, and 0.02 is as accurate while its
#: probabilities on data of many classes are less underconfident.
AUTO_LABEL_SMOOTHING = 0.02


#: ``early_stopping="auto"`` of a multiclass fit (more than 2 classes) holds out
#: a validation split above this many training rows, as HistGradientBoosting
#: does for every task. The validation log-loss of several classes chose an
#: epoch in the middle of the cosine schedule (before its learning rate
#: decays) on the multiclass benchmarks of ``benchmarks/bench_tasks.py``, and
#: the fit to the last epoch was the more accurate: hpc (3,032 training
#: rows; 82.1 % early-stopped at epochs 43-150 against 83.0 %) and the
#: diamonds' cut (10,000 rows; 77.5 % against 77.9 %), 3 seeds, with the
#: teacher of :func:`teacher_trees`.
EARLY_STOPPING_AUTO_ROWS_MULTICLASS = 10_000


def auto_early_stopping(n_samples, has_validation, n_classes=0):
    """What ``early_stopping="auto"`` means for a fit of ``n_samples`` rows
    of ``n_classes`` classes (0: a regression): on with validation rows of
    the user's own (``X_val``), else on above :data:`EARLY_STOPPING_AUTO_ROWS`
    rows (:data:`EARLY_STOPPING_AUTO_ROWS_MULTICLASS` with more than 2
    classes)."""
    rows = EARLY_STOPPING_AUTO_ROWS_MULTICLASS if n_classes > 2 else EARLY_STOPPING_AUTO_ROWS
    return bool(has_validation or n_samples > rows)


#: ``teacher_rows="auto"`` of a multiclass fit with a teacher: the extra rows
#: labelled by the teacher alone, as a multiple of the training rows
#: (:func:`auto_teacher_rows`).
AUTO_TEACHER_ROWS = 3.0


def auto_teacher_rows(n_classes, teacher_weight):
    """What ``teacher_rows="auto"`` means for a fit of ``n_classes`` classes
    (0: a regression): :data:`AUTO_TEACHER_ROWS` with more than 2 classes and
    a teacher (``teacher_weight > 0``), else 0.

    The model learns the teacher's function only on the training rows; the
    gradient-boosted teacher of a multiclass fit generalized better than the
    model trained on its targets (hpc, 4 classes: 84.7 % against 83.2 %), and
    rows drawn from the encoder's joint column distribution with the teacher's
    probabilities as targets carry its function between the training rows
    (``docs/benchmarks_archive.md``, "Multiclass: a learning-rate rule and
    teacher-labelled rows"). Not the default (``teacher_rows=0``): at 3x the
    rows, hpc gained +0.36 points over 6 seeds (still 1.0 below
    HistGradientBoosting) at 1.8x the fit time, the other multiclass sets
    -0.12 to +0.12, and on hpc the weight-matching barrier of two models rose
    0.08 -> 0.72 and the 4-way merge of IID quarters fell 79.93 -> 79.16
    (``docs/_static/benchmarks/tasks/tasks_teacher_rows.jsonl`` and
    ``teacher_rows_merge_axis.jsonl``)."""
    return AUTO_TEACHER_ROWS if n_classes > 2 and teacher_weight > 0 else 0.0


#: Most trees per ``n_estimators`` of the teacher of a multiclass fit
#: (:func:`teacher_trees`).
TEACHER_TREES_MAX_FACTOR = 4


def teacher_trees(n_estimators, n_classes=0):
    """The number of gradient-boosted trees of the teacher
    (``teacher_weight > 0``): ``n_estimators``, times the number of classes
    up to :data:`TEACHER_TREES_MAX_FACTOR` with more than 2 classes
    (``n_classes``; 0 for a regression, whatever its outputs).

    An oblivious tree of the teacher has one split per level for all its
    outputs, so with several classes each class gets a share of its splits
    (HistGradientBoosting grows a tree per class and iteration): 256 trees of
    depth 4 at the boosting's learning rate of 0.1 underfitted the multiclass
    benchmarks (``benchmarks/bench_tasks.py``, seed 0: 87.9 % training
    accuracy on hpc, 78.5 % on the diamonds' cut, against HGB's 99.9 % and
    92 %), and the model trained on its targets with them; 1,024 trees
    reached 83.3 % and 78.5 % on the test rows instead of 81.5 % and 75.9 %,
    and their validation rows still kept 691 and 851 of them. The factor is
    capped for the cost of growing them (digits, 10 classes: 98.3 % with
    1,024 trees as with 256 and 2,560)."""
    if n_classes > 2:
        return int(n_estimators) * min(int(n_classes), TEACHER_TREES_MAX_FACTOR)
    return int(n_estimators)


@dataclass(frozen=True)
class Start:
    """A fitted model to continue from (a federated round's merged model).

    Attributes
    ----------
    params : TreeParams
        The parameters to start from, in the estimator's fitted layout.
    optimizer_state : dict or None
        Adam's state in the basis of ``params`` (None: Adam starts afresh).
    target_scale : dict
        Fitted target statistics that ``params`` are expressed in
        (the regressor's ``y_mean_`` and ``y_scale_``; empty for a classifier).
    """

    params: TreeParams
    optimizer_state: dict | None = None
    target_scale: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Validation:
    """Validation rows of the user's own (``fit(X_val=..., y_val=...)``),
    monitored by early stopping instead of a held-out ``validation_fraction``
    of the training rows, as in scikit-learn's ``HistGradientBoosting*``.

    Attributes
    ----------
    X : array-like or DataFrame of shape (n_val, n_features)
        Raw validation rows (encoded with the fit's encoder, never fitted on).
    y : array-like of shape (n_val,) or (n_val, n_targets)
        Their labels or targets.
    sample_weight : array-like of shape (n_val,) or None
        Their weights in the validation loss (None: 1).
    """

    X: Any
    y: Any
    sample_weight: Any = None

    @classmethod
    def from_fit_params(cls, X_val, y_val, sample_weight_val):
        """The validation set of ``fit``'s keyword arguments, or None when
        none is given; one of ``X_val`` and ``y_val`` alone, or
        ``sample_weight_val`` without them, is an error (as in
        HistGradientBoosting)."""
        if X_val is None and y_val is None:
            if sample_weight_val is not None:
                raise ValueError("sample_weight_val is provided, but X_val and y_val were not "
                                 "provided.")
            return None
        if y_val is None:
            raise ValueError("X_val is provided, but y_val was not provided.")
        if X_val is None:
            raise ValueError("y_val is provided, but X_val was not provided.")
        return cls(X_val, y_val, sample_weight_val)


@dataclass(frozen=True)
class FitPlan:
    """The inputs of one fit that are not the estimator's hyperparameters.

    Attributes
    ----------
    encoder : TabularEncoder or None
        A fitted encoder to encode with instead of fitting one (the encoder
        shared by the shards of a sharded fit). None: the estimator's
        ``encoder`` parameter, else one fitted on the training rows.
    boosting_trees : tuple or None
        Gradient-boosted trees grown over all shards (``(base, features,
        thresholds, leaves)`` in the targets' own units), used as the teacher
        and the boosted start instead of trees grown on this fit's rows.
    feature_gains : ndarray or None
        The gains of ``boosting_trees``' splits per encoded feature
        (:func:`~._boosting.feature_gains`): the weights of the trees'
        feature draws (``feature_selection="auto"``).
    schedule_window : tuple of (int, int) or None
        ``(epochs before this fit, epochs of the whole run)``: the window of
        the learning-rate schedule this fit takes (a federated round is a
        window of one schedule). None: the whole schedule over
        ``recipe.max_epochs``.
    classes : ndarray or None
        All class labels of the stream (``partial_fit(classes=...)``), when
        they are not those of ``y``.
    start : Start or None
        A model to continue from instead of the estimator's fitted one.
    recipe : Recipe or None
        The recipe of this fit; None: the estimator's hyperparameters.
    warm : bool or None
        Whether this fit continues the estimator's fitted model (None: as
        ``warm_start`` says). ``start`` implies it.
    validation : Validation or None
        Validation rows of the user's own for early stopping (and for the
        prefix of the teacher's boosted trees), appended after the training
        rows; every training row then trains. None: early stopping holds out
        ``validation_fraction`` of the training rows.
    split_seed : int or None
        Seed of a generator of its own for the held-out validation split.
        The fit's generator then draws the model's start first, before any
        draw whose length depends on the number of rows, so that fits of one
        ``random_state`` on different rows start alike (the shard models of
        ``ShardedSoftTreeEnsemble(shard_init="shared")``). None: the split is
        the first draw of the fit's generator.
    """

    encoder: Any = None
    boosting_trees: tuple | None = None
    feature_gains: np.ndarray | None = None
    schedule_window: tuple | None = None
    classes: np.ndarray | None = None
    start: Start | None = None
    recipe: Recipe | None = None
    warm: bool | None = None
    validation: Validation | None = None
    split_seed: int | None = None

    def replace(self, **changes):
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)


def n_classes_of(objective):
    """The number of classes of a fitted ``objective``'s task: its outputs
    for a classification, 0 for a regression (of any number of outputs)."""
    return objective.n_outputs if objective.task == "classification" else 0

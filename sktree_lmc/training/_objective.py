"""The fitted objective of a soft tree ensemble: what a fit minimises, per task.

One object per task, :class:`ClassificationObjective` and
:class:`RegressionObjective`, built from the estimator's hyperparameters by
keyword (as scikit-learn's ``HistGradientBoosting*`` builds ``self._loss``)
and stored on the fitted estimator as ``objective_``. It owns everything
about the targets: checking and encoding them (the classes, the target
standardization), the class weights of the training and validation rows,
the loss and its link (built once), the units of the shards' shared trees,
the teacher's mixing and the teachers themselves (:class:`Teacher`), the
label smoothing, the targets of ``refit_leaves``, and the objective of a
merged model (:meth:`Objective.merged`). Nothing here calls back into the
estimator, and nothing here imports it.
"""

from __future__ import annotations

import copy
from numbers import Real
from typing import NamedTuple

import numpy as np
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, _check_y, check_consistent_length

from ._boosting import oblivious_output
from ._losses import LOSSES, CrossEntropy, Quantile

__all__: list = []

#: The largest magnitude float32, the training precision, represents.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32_range(array, name):
    """Raise a ValueError if ``array`` (finite, validated) holds values that
    float32, the training precision, cannot represent (they would become
    infinite and turn every parameter into NaN)."""
    if array.size and np.abs(array).max() > FLOAT32_MAX:
        raise ValueError(
            f"{name} contains values beyond the float32 range (largest magnitude "
            f"{np.abs(array).max():.3g} > {FLOAT32_MAX:.3g}); the model trains in float32. "
            f"Rescale {name} first."
        )


#: Sample weights whose largest lies outside ``[2**-_WEIGHT_EXPONENT,
#: 2**_WEIGHT_EXPONENT]`` are rescaled (see :func:`rescaled_weights`).
_WEIGHT_EXPONENT = 64


def rescaled_weights(sample_weight):
    """``sample_weight`` (float64, non-negative) multiplied by a power of two
    that brings its largest value into ``[0.5, 1)`` when that value is below
    ``2**-64`` or above ``2**64``, else as it is. Only the ratios of the
    weights matter, and a power of two keeps them exactly; subnormal weights
    (``1e-310``) would otherwise overflow ``1 / sum`` in the gradient-boosted
    teacher's rescaling and end the fit in a NaN loss."""
    largest = float(sample_weight.max(initial=0.0))
    if largest > 0 and not 2.0 ** -_WEIGHT_EXPONENT <= largest <= 2.0 ** _WEIGHT_EXPONENT:
        exponent = np.frexp(largest)[1]
        return np.ldexp(sample_weight, -exponent)
    return sample_weight


class Teacher(NamedTuple):
    """Gradient-boosted oblivious trees on the encoded features (a teacher of
    ``teacher_weight > 0``): ``base`` (outputs,), ``features`` and
    ``thresholds`` (trees, depth), ``leaves`` (trees, 2**depth, outputs)."""

    base: np.ndarray
    features: np.ndarray
    thresholds: np.ndarray
    leaves: np.ndarray

    @classmethod
    def of(cls, trees):
        """The teacher of a tuple ``(base, features, thresholds, leaves)``."""
        return cls(*(np.asarray(a) for a in trees))

    def output(self, X):
        """The trees' raw outputs on the encoded rows ``X`` (float64, the
        trees' features first), shape (n_samples, outputs)."""
        return oblivious_output(X, *self)

    def to_dict(self):
        """Plain data: a dict of the four arrays."""
        return dict(self._asdict())

    @classmethod
    def from_dict(cls, value):
        """The teacher of :meth:`to_dict`."""
        return cls.of(value[name] for name in cls._fields)


def _same_teacher(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def distinct_teachers(teacher_lists):
    """The distinct teachers of several lists of teachers (None: none)."""
    out = []
    for teachers in teacher_lists:
        for teacher in teachers or ():
            if not any(_same_teacher(teacher, t) for t in out):
                out.append(teacher)
    return out


class Objective:
    """What a fit minimises; the common part of both tasks.

    Parameters
    ----------
    teacher_weight : float, default=0.0
        The weight of the teachers' outputs in the targets of
        ``refit_leaves`` (the estimator's ``teacher_weight``).
    teachers : list of Teacher or None, default=None
        The gradient-boosted teachers the model was trained with.
    estimator_name : str or None, default=None
        The estimator's class name, for the messages of the target checks.
    """

    #: The key of the task in the plain form of :meth:`to_dict`.
    task = None

    def __init__(self, *, teacher_weight=0.0, teachers=None, estimator_name=None):
        self.teacher_weight = float(teacher_weight)
        self.teachers = teachers
        self.estimator_name = estimator_name
        self.loss = self._make_loss()

    def _make_loss(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the targets of a fit -----------------------------------------------------
    def training_targets(self, y, sample_weight, rows, *, warm=False, classes=None):
        """The targets and weights of a fit's training ``rows`` (the rows, or
        one of their columns: what counts them): ``(y, target, sample_weight,
        n_outputs)``. ``y`` checked (:meth:`check_y`) and counted against the
        rows; ``sample_weight`` checked (float64, non-negative, one per row;
        None: ones), times the class weights (:meth:`class_weights`) and
        rescaled by a power of two (:func:`rescaled_weights`), with a positive
        sum; the encoded targets and their number (:meth:`fit_targets`, with
        ``warm`` and ``classes``)."""
        y = self.check_y(y)
        check_consistent_length(rows, y)
        sample_weight = _check_sample_weight(sample_weight, rows, dtype=np.float64,
                                             ensure_non_negative=True)
        sample_weight = rescaled_weights(sample_weight * self.class_weights(y))
        if not sample_weight.sum() > 0:
            raise ValueError(
                "sample_weight (times class_weight, for a classifier) sums to zero: "
                "there is nothing to fit."
            )
        target, n_outputs = self.fit_targets(y, sample_weight, warm=warm, classes=classes)
        return y, target, sample_weight, n_outputs

    def class_weights(self, y):
        """Per-sample weight factors that depend on the target (class
        weights); they multiply ``sample_weight``."""
        return 1.0

    def validation_weights(self, y, y_val):
        """Per-row weight factors of the validation rows ``y_val`` that
        depend on their target (as fitted on the training targets ``y``)."""
        return 1.0

    def continued(self, previous):
        """Take over the fitted target encoding of ``previous`` (the objective
        of the model this fit continues) and its teachers; returns self."""
        self.teachers = previous.teachers
        return self

    def resolve(self, recipe):
        """Take what the fit's resolved ``recipe`` decided (the label
        smoothing of ``"auto"``)."""

    def shared_units(self, target):
        """Fitted targets in the units the shards' shared trees are grown on."""
        return target

    def shared_trees(self, trees):
        """The gradient-boosted trees grown over all shards, in this fit's
        target units (None: None)."""
        return trees

    # -- the teacher --------------------------------------------------------------
    def mix(self, target, teacher_output, rows, teacher_weight):
        """``target`` with the teacher's raw outputs ``teacher_output`` mixed
        in on ``rows`` at ``teacher_weight`` (see the loss's ``mix``)."""
        loss = self.loss
        return loss.mix(target, loss.teacher_targets(teacher_output), rows, teacher_weight,
                        teacher_output.shape[1])

    def distilled(self, X, target, rows, teacher_weight, teacher):
        """The training targets of ``teacher_weight > 0``: on ``rows``,
        ``target`` mixed with the outputs of ``teacher`` (a :class:`Teacher`)
        on the trees' features ``X`` (float64); the teacher is kept
        (``teachers``)."""
        self.teachers = [teacher]
        return self.mix(target, teacher.output(X), rows, teacher_weight)

    def teacher_labelled(self, X):
        """The training targets of rows labelled by the fit's teacher alone
        (``teacher_rows``): its outputs on the trees' features ``X``
        (float64) as the loss takes a teacher's (``teacher_targets``: a
        classifier's class probabilities)."""
        return self.loss.teacher_targets(Teacher.of(self.teachers[0]).output(X))

    def refit_targets(self, X, y, n_features):
        """The targets ``refit_leaves`` fits the leaves to, for the encoded
        rows ``X`` (the trees' ``n_features`` features) and their labels or
        targets ``y``."""
        return self.fitted_targets(y)

    # -- merges and persistence -----------------------------------------------------
    def replace(self, **changes):
        """A copy with the attributes ``changes``."""
        new = copy.deepcopy(self)
        for key, value in changes.items():
            setattr(new, key, value)
        if "label_smoothing" in changes or "loss_name" in changes:
            new.loss = new._make_loss()
        return new

    def to_dict(self):
        """The objective as plain data (see :func:`objective_from_dict`)."""
        state = {k: v for k, v in vars(self).items() if k != "loss"}
        if self.teachers is not None:
            state["teachers"] = [Teacher.of(t).to_dict() for t in self.teachers]
        return {"task": self.task, "state": state}


def _check_teachers(teachers, n_outputs, n_features):
    """Raise a ``ValueError`` naming ``teacher_`` when a teacher does not
    describe the model (modified, or of another model): ``(base, features,
    thresholds, leaves)`` of oblivious trees on the ``n_features`` encoded
    features, with ``n_outputs`` outputs. Returns them as :class:`Teacher`."""
    out = []
    for i, teacher in enumerate(teachers):
        if not isinstance(teacher, (tuple, list)) or len(teacher) != 4:
            raise ValueError(f"teacher_[{i}] must be a tuple (base, features, thresholds, "
                             "leaves) of the model's boosted trees; it was modified.")
        base, features, thresholds, leaves = teacher = Teacher.of(teacher)
        if base.shape != (n_outputs,) or leaves.ndim != 3 or leaves.shape[2] != n_outputs:
            raise ValueError(
                f"teacher_[{i}] has base of shape {base.shape} and leaves of shape "
                f"{leaves.shape}, but the model has n_outputs_={n_outputs} outputs: teacher_ "
                "was modified or comes from another model.")
        if (features.ndim != 2 or thresholds.shape != features.shape
                or leaves.shape[:2] != (features.shape[0], 2 ** features.shape[1])):
            raise ValueError(
                f"teacher_[{i}]'s features {features.shape}, thresholds {thresholds.shape} "
                f"and leaves {leaves.shape} do not describe oblivious trees (trees, depth), "
                "(trees, depth), (trees, 2**depth, outputs): teacher_ was modified.")
        # -1: a level without a split (the boosting stopped before the tree's end)
        if features.size and not (-1 <= features.min() and features.max() < n_features):
            raise ValueError(
                f"teacher_[{i}] splits on features outside the model's {n_features} encoded "
                "features: teacher_ was modified or comes from another model.")
        out.append(teacher)
    return out


class ClassificationObjective(Objective):
    """Cross-entropy over the classes, with label smoothing and class weights.

    Parameters
    ----------
    class_weight : dict, "balanced" or None, default=None
        The classifier's ``class_weight``.
    label_smoothing : float, default=0.0
        The label smoothing of the loss (resolved: ``"auto"`` decided).
    **kwargs
        See :class:`Objective`.

    Attributes
    ----------
    classes : ndarray of shape (n_classes,)
        The class labels (after :meth:`fit_targets`).
    """

    task = "classification"

    def __init__(self, *, class_weight=None, label_smoothing=0.0, **kwargs):
        self.class_weight = class_weight
        self.label_smoothing = float(label_smoothing)
        self.classes = None
        super().__init__(**kwargs)

    def _make_loss(self):
        return CrossEntropy(self.label_smoothing)

    def resolve(self, recipe):
        self.label_smoothing = float(recipe.label_smoothing)
        self.loss = self._make_loss()

    @property
    def n_outputs(self):
        """The number of outputs: one per class."""
        return len(self.classes)

    def check_y(self, y, name="y", training=True):
        """Validated labels (scikit-learn's checks of a classifier's ``y``)."""
        return _check_y(y, estimator=self.estimator_name)

    def class_weights(self, y):
        if self.class_weight is None:
            return 1.0
        check_classification_targets(y)
        if isinstance(self.class_weight, dict):
            classes = np.unique(y)
            unknown = [label for label in self.class_weight if label not in set(classes)]
            if unknown:
                raise ValueError(
                    f"class_weight has labels {unknown!r} that are not classes of y "
                    f"{classes.tolist()!r}."
                )
            weights = list(self.class_weight.values())
            if not all(
                isinstance(w, Real) and not isinstance(w, (bool, np.bool_))
                and np.isfinite(w) and w >= 0
                for w in weights
            ):
                raise ValueError(
                    "class_weight values must be finite non-negative numbers, got "
                    f"{self.class_weight!r}."
                )
        return compute_sample_weight(self.class_weight, y)

    def validation_weights(self, y, y_val):
        """``class_weight`` of the validation rows: each class weighs what it
        weighs in the training rows ``y`` (``"balanced"`` counts ``y``)."""
        if self.class_weight is None:
            return 1.0
        per_class = np.ones(len(self.classes))
        per_class[self.fitted_targets(y)] = self.class_weights(y)
        return per_class[self.fitted_targets(y_val)]

    def continued(self, previous):
        super().continued(previous)
        self.classes = previous.classes
        return self

    def fit_targets(self, y, sample_weight, *, warm=False, classes=None):
        """The class indices of ``y`` and the number of outputs; fixes
        ``classes`` (those of ``y``, or the stream's ``classes`` of
        ``partial_fit``) unless ``warm`` (a fit continuing a model, whose
        classes ``y`` must have; any subset with ``classes``)."""
        check_classification_targets(y)
        if classes is not None:  # partial_fit's labels of the stream: y may hold any subset
            if not warm:  # the first partial_fit
                self.classes = classes
            return self.fitted_targets(y), self.n_outputs
        if warm:
            found, encoded = np.unique(y, return_inverse=True)
            if not np.array_equal(found, self.classes):
                raise ValueError(
                    "warm_start=True needs y to have the classes of the previous fit, "
                    f"{self.classes.tolist()}; got {found.tolist()}."
                )
            return np.asarray(encoded, dtype=np.int64), self.n_outputs
        self.classes, encoded = np.unique(y, return_inverse=True)
        if len(self.classes) < 2:
            raise ValueError(
                "Classifier can't train when only one class is present: "
                f"y contains only the class {self.classes[0]!r}."
            )
        weighted = np.unique(encoded[np.asarray(sample_weight) > 0])
        if len(weighted) < 2:
            raise ValueError(
                "Classifier can't train when only one class has a positive sample_weight "
                f"(times class_weight): only the class {self.classes[weighted[0]]!r} has."
            )
        return np.asarray(encoded, dtype=np.int64), self.n_outputs

    def fitted_targets(self, y):
        """Class indices into ``classes``; labels the model was not fitted on
        are an error (any subset of ``classes`` is fine)."""
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be one-dimensional for a classifier, got shape {y.shape}.")
        idx = np.clip(np.searchsorted(self.classes, y), 0, len(self.classes) - 1)
        unknown = self.classes[idx] != y
        if np.any(unknown):
            raise ValueError(
                f"y contains labels the estimator was not fitted on: "
                f"{np.unique(y[unknown])[:5].tolist()}; classes_ is {self.classes.tolist()}."
            )
        return idx.astype(np.int64)

    def refit_targets(self, X, y, n_features):
        """The labels, mixed with the teachers' probabilities as in training
        when the model has teachers (the mean of their probabilities for a
        merge of models with different teachers), so that the refit solves
        the objective the model was trained on."""
        target = self.fitted_targets(y)
        if not self.teachers or not self.teacher_weight > 0:
            return target
        teachers = _check_teachers(self.teachers, self.n_outputs, n_features)
        Xe = np.asarray(X, dtype=np.float64)
        loss = self.loss
        probs = np.mean([loss.teacher_targets(t.output(Xe)) for t in teachers], axis=0)
        return loss.mix(target, probs, slice(None), self.teacher_weight, self.n_outputs)

    def prediction_meta(self, method):
        """An empty array of the type and columns of ``method``'s output."""
        if method == "predict":
            return np.empty((0,), dtype=self.classes.dtype)
        if method == "decision_function" and self.n_outputs == 2:
            return np.empty((0,))
        return np.empty((0, self.n_outputs))

    @classmethod
    def merged(cls, objectives, weights):
        """The objective of a merged model: the weighted mean of the models'.

        Cross-entropy is linear in its (smoothed) target, so the weighted
        mean of the objectives is one such objective: with ``t_i`` the
        effective teacher weight of model ``i`` (its ``teacher_weight`` when
        it has teachers, else 0), ``s_i`` its label smoothing and ``w_i`` the
        merge weights (normalized), ``label_smoothing = sum_i w_i s_i`` and
        ``teacher_weight = sum_i w_i (1 - s_i) t_i / (1 - label_smoothing)``
        (``sum_i w_i t_i`` when the ``s_i`` are equal); the teachers are the
        distinct teachers of the models with ``t_i > 0``. It is exact when
        those models share one teacher or only one has a teacher; with
        several distinct teachers the refit mixes in their mean
        probabilities. Models that agree keep model 0's objective with the
        distinct teachers of all of them; otherwise the result does not
        depend on the order of the models.
        """
        ref = objectives[0]
        teachers = distinct_teachers(o.teachers for o in objectives) or None
        w = np.asarray(weights, dtype=np.float64)
        w = w / w.sum()
        teach = [o.teacher_weight if o.teachers and o.teacher_weight > 0 else 0.0
                 for o in objectives]
        smooth = [o.label_smoothing for o in objectives]
        # what model 0's objective gives: its teacher weight applies when the
        # merged model has teachers
        ref_teach = ref.teacher_weight if teachers else 0.0
        if len(set(teach)) == 1 and len(set(smooth)) == 1 and teach[0] == ref_teach:
            return ref.replace(teachers=teachers)  # the models agree
        smoothing = ref.label_smoothing
        if len(set(smooth)) == 1:
            teacher_weight = teach[0] if len(set(teach)) == 1 else float(np.dot(w, teach))
        else:
            smoothing = float(np.dot(w, smooth))
            teacher_weight = float(np.dot(w, (1 - np.asarray(smooth)) * np.asarray(teach))
                                   / (1 - smoothing))
        teaching = [o for o, t in zip(objectives, teach) if t > 0]
        teachers = (distinct_teachers(o.teachers for o in teaching)
                    if teacher_weight > 0 else None)
        return ref.replace(label_smoothing=smoothing, teacher_weight=teacher_weight,
                           teachers=teachers)


#: The regressor's ``loss`` values, and the names of their loss objects.
REGRESSION_LOSSES = {"squared_error": "squared", "absolute_error": "absolute_error",
                     "quantile": "quantile", "poisson": "poisson", "gamma": "gamma"}


class RegressionObjective(Objective):
    """A regression loss on standardized targets.

    Parameters
    ----------
    loss_name : str, default="squared_error"
        The regressor's ``loss`` (a key of :data:`REGRESSION_LOSSES`).
    quantile : float or None, default=None
        The quantile of ``loss_name="quantile"``.
    **kwargs
        See :class:`Objective`.

    Attributes
    ----------
    y_mean, y_scale : ndarray of shape (n_outputs,)
        The target standardization (after :meth:`fit_targets`).
    one_dimensional : bool
        Whether the targets were 1-D (the predictions are then).
    """

    task = "regression"

    def __init__(self, *, loss_name="squared_error", quantile=None, **kwargs):
        self.loss_name = loss_name
        self.quantile = quantile
        self.y_mean = self.y_scale = self.one_dimensional = None
        super().__init__(**kwargs)

    def _make_loss(self):
        if self.loss_name == "quantile":
            if self.quantile is None:
                raise ValueError("loss='quantile' needs the quantile parameter (in (0, 1)), "
                                 "for example quantile=0.9.")
            return Quantile(self.quantile)
        return LOSSES[REGRESSION_LOSSES[self.loss_name]]()

    @property
    def n_outputs(self):
        """The number of targets."""
        return len(self.y_mean)

    def check_y(self, y, name="y", training=True):
        """Validated targets (scikit-learn's checks of a regressor's ``y``,
        float32's range, the loss's domain); errors name ``name``.
        ``training=False`` (validation targets): only the loss's domain, not
        what standardizing them needs."""
        y = _check_y(y, multi_output=True, y_numeric=True, estimator=self.estimator_name)
        check_float32_range(np.asarray(y, dtype=np.float64), name)
        y2 = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        if training:
            self.loss.check_target(y2, name)
        else:
            self.loss.check_domain(y2, name)
        return y

    def check_continues(self, previous):
        """Raise a clear error when ``previous`` (the fitted objective a fit
        continues) has another loss: its leaves are in that loss's units."""
        fitted = previous.loss_name
        if fitted is not None and fitted != self.loss_name:
            raise ValueError(
                "warm_start=True (and partial_fit) continues from the fitted parameters, but "
                f"loss changed from {fitted!r} to {self.loss_name!r}: the fitted leaves and "
                f"target scale are those of loss={fitted!r}. Set loss={fitted!r} back, or fit "
                "a new model (warm_start=False, or fit instead of partial_fit)."
            )

    def continued(self, previous):
        self.check_continues(previous)
        super().continued(previous)
        self.y_mean, self.y_scale = previous.y_mean, previous.y_scale
        self.one_dimensional = previous.one_dimensional
        return self

    def fit_targets(self, y, sample_weight, *, warm=False, classes=None):
        """The standardized targets (float32) and their number; fits the
        standardization unless ``warm`` (a fit continuing a model keeps the
        one its leaves are expressed in)."""
        y = np.asarray(y, dtype=np.float64)
        y2 = y.reshape(len(y), -1)
        if warm:
            if y2.shape[1] != self.n_outputs:
                raise ValueError(
                    f"warm_start=True needs y with the {self.n_outputs} targets of the "
                    f"previous fit; got {y2.shape[1]} targets."
                )
            return ((y2 - self.y_mean) / self.y_scale).astype(np.float32), y2.shape[1]
        self.one_dimensional = y.ndim == 1
        # y is within float32's range (checked), so in float64 neither the mean
        # nor the spread can overflow.
        w = np.asarray(sample_weight, dtype=np.float64)
        self.y_mean, self.y_scale = self.loss.standardization(y2, w)
        return ((y2 - self.y_mean) / self.y_scale).astype(np.float32), y2.shape[1]

    def fitted_targets(self, y):
        """Targets standardized with the fitted ``y_mean`` and ``y_scale``."""
        y2 = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        if y2.shape[1] != self.n_outputs:
            raise ValueError(
                f"y has {y2.shape[1]} targets, but the estimator was fitted on "
                f"{self.n_outputs}."
            )
        return (y2 - self.y_mean) / self.y_scale

    def shared_trees(self, trees):
        """The shards' shared trees are grown on the targets in their own
        units (each shard standardizes its targets with its own mean and
        scale): here in this fit's standardized units."""
        if trees is None:
            return None
        base, features, thresholds, leaves = trees
        base, leaves = self.loss.link.standardized_trees(base, leaves, self.y_mean,
                                                         self.y_scale)
        return base, features, thresholds, leaves

    def shared_units(self, target):
        """Standardized targets back in the targets' own units."""
        return np.asarray(target, dtype=np.float64) * self.y_scale + self.y_mean

    def predictions(self, raw):
        """Predictions in the units of ``y`` from the raw outputs ``raw``."""
        out = self.loss.link.inverse(raw) * self.y_scale + self.y_mean
        return out[:, 0] if self.one_dimensional else out

    def prediction_meta(self, method):
        """An empty array of the shape of the predictions."""
        return np.empty((0,) if self.one_dimensional else (0, self.n_outputs))

    @staticmethod
    def merged_scale(objectives, weights):
        """Merged target standardization, and each model's leaf factor:
        ``(y_mean, y_scale, factors)`` (see the link's ``merged_scale``)."""
        w = np.asarray(weights, dtype=np.float64)
        w = w / w.sum()
        return objectives[0].loss.link.merged_scale(
            [np.asarray(o.y_mean, dtype=np.float64) for o in objectives],
            [np.asarray(o.y_scale, dtype=np.float64) for o in objectives], w)

    @classmethod
    def merged(cls, objectives, weights):
        """The objective of a merged model: model 0's, in the merged target
        scale, with the distinct teachers of all the models (regressors
        refit on their targets alone)."""
        y_mean, y_scale, _ = cls.merged_scale(objectives, weights)
        teachers = distinct_teachers(o.teachers for o in objectives) or None
        return objectives[0].replace(y_mean=y_mean, y_scale=y_scale, teachers=teachers)


def objective_from_params(params, *, classifier, estimator_name=None):
    """The objective of an estimator of the hyperparameters ``params`` (its
    ``get_params()``): a classifier's (``class_weight``, ``label_smoothing``,
    ``"auto"`` undecided counting as 0 until :meth:`Objective.resolve`) or a
    regressor's (``loss``, ``quantile``), with its ``teacher_weight``."""
    common = dict(teacher_weight=params["teacher_weight"], estimator_name=estimator_name)
    if classifier:
        smoothing = params["label_smoothing"]
        return ClassificationObjective(class_weight=params["class_weight"],
                                       label_smoothing=0.0 if smoothing == "auto" else smoothing,
                                       **common)
    return RegressionObjective(loss_name=params["loss"], quantile=params["quantile"], **common)


_TASKS = {cls.task: cls for cls in (ClassificationObjective, RegressionObjective)}


def objective_from_dict(value):
    """The objective of :meth:`Objective.to_dict`."""
    cls = _TASKS[value["task"]]
    new = cls.__new__(cls)
    state = dict(value["state"])
    if state.get("teachers") is not None:
        state["teachers"] = [Teacher.from_dict(t) for t in state["teachers"]]
    vars(new).update(state)
    new.loss = new._make_loss()
    return new

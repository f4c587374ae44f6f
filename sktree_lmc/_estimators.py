"""scikit-learn estimators: soft tree ensembles trained with PyTorch."""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context, clone
from sklearn.dummy import DummyRegressor
from sklearn.metrics import check_scoring, get_scorer
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    _check_y,
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from .model._architectures import (
    ARCHITECTURES,
    MAX_LEAVES_PER_TREE,
    check_model_size,
    get_architecture,
)
from .training._boosting import feature_gains, grow_oblivious_trees, oblivious_output
from .utils._device import DEVICE_CONSTRAINT, prediction_device, resolve_device
from .encoding._encoding import (
    NUMERIC_ENCODINGS,
    TabularEncoder,
    check_categorical_features,
    encoders_differ,
    to_columns,
)
from .model._forward import SoftTreeEnsembleModule, predict_chunked, used_features
from .training._losses import LOSSES, CrossEntropy, Quantile
from .model._params import TreeParams, check_same_additive
from ._persistence import estimator_state, restore_estimator_state
from .training._plan import FitPlan, Recipe, Validation
from .utils._progress import ProgressLog, Stopwatch
from .training._start import (
    boosting_start,
    boosting_validation,
    data_start,
    init_module,
    start_from_params,
)
from .utils._threads import limit_threads
from ._validation import (
    _FLOAT32_MAX,
    _MAX_SCALE,
    _check_classes,
    _check_float32_range,
    _check_given_encoder,
    _check_score,
    _NumberInterval,
    _rescaled_weights,
    _torch_seed,
)
from .training._training import (
    AVERAGING,
    LR_SCHEDULES,
    SWA_START,
    FeatureMask,
    TrainingView,
    TrainingHooks,
    DivergenceCheck,
    EarlyStoppingCallback,
    ProgressCallback,
    ValidationLoss,
    WeightAverage,
    _export_adam_state,
    _FitTensors,
    _load_adam_state,
    _reference_loss,
    _user_stacklevel,
    _validation_split,
    _warn_if_diverged,
    live_code_columns,
    make_lr_scheduler,
    make_optimizer,
    resolve_max_features,
    train,
)

__all__ = ["SoftTreeEnsembleClassifier", "SoftTreeEnsembleRegressor"]


def _named(exc, name, new_name):
    """The message of ``exc`` (about ``name``: scikit-learn's checks say "y"
    or "X") with ``name`` as a word replaced by ``new_name`` (``y_val``),
    and the rows that disagree in number named."""
    message = re.sub(rf"\b{name}\b", new_name, str(exc))
    if "inconsistent numbers of samples" in message:
        message = f"X_val and y_val: {message}"
    return message


# -- what a sparse model skips (feature_selection="auto") ---------------------------------------
def _unused_columns(features, groups, n_columns):
    """Per input column, whether none of its encoded features (``groups``: the
    column of each) is among the used ``features`` (:func:`used_features`;
    None: all); None when every column is used. Prediction does not encode
    those (their features are multiplied by zero only)."""
    if features is None:
        return None
    used = np.zeros(n_columns, dtype=bool)
    used[np.asarray(groups)[features]] = True
    return None if used.all() else ~used


# -- prediction on dask collections ------------------------------------------------------------
def _lazy_on_dask(method):
    """Decorator of a prediction method ``method(self, X)``: on a dask array or
    DataFrame it returns a lazy dask array (``federation._dask.lazy_prediction`` of the
    fitted model ``self._prediction_model()``) instead of computing."""
    name = method.__name__

    @functools.wraps(method)
    def predict(self, X):
        # dask is imported only for objects of dask's own types: plain input never imports it
        if type(X).__module__.partition(".")[0] in ("dask", "dask_expr"):
            from .federation._dask import is_dask_collection, lazy_prediction

            if is_dask_collection(X):
                return lazy_prediction(self._prediction_model(), X, name)
        return method(self, X)

    return predict


# -- feature importances ---------------------------------------------------------------------
def _mean_abs_difference(values):
    """``mean |v_i - v_j|`` over all pairs ``(i, j)`` of the rows of
    ``values`` (n, C), summed over the columns (Gini's mean difference)."""
    n = values.shape[0]
    if n < 2:
        return 0.0
    ordered = np.sort(values, axis=0)
    ranks = 2.0 * np.arange(1, n + 1) - n - 1
    return float((ranks @ ordered).sum() * 2.0 / n**2)


def feature_importances(params, arch, encoder, centered):
    """Per input column, the share of the model's output spread that passes
    through it (see ``feature_importances_``): trees and additive term, summed
    and normalized to 1 (zeros when the model is constant). ``centered``:
    leaves and table rows are centered over the outputs first (a classifier's
    logits, which a shift common to all classes leaves unchanged)."""
    n_columns = encoder.n_features_in_
    M, _, C = params.leaf_value.shape
    leaves = np.zeros((M, arch.n_leaves, C))
    leaves[:, arch.free_leaves] = params.leaf_value
    if centered:
        leaves -= leaves.mean(axis=2, keepdims=True)
    left, right = (arch.code == 1).astype(np.float64), (arch.code == -1).astype(np.float64)
    # each node: the difference of the mean leaf on its two sides (L1 over the outputs),
    # halved (two rows fall on different sides of an even split half the time), times
    # the share of the rows that reach it (the node weights of weight matching)
    mean_left = np.einsum("ln,mlc->mnc", left, leaves) / left.sum(axis=0)[None, :, None]
    mean_right = np.einsum("ln,mlc->mnc", right, leaves) / right.sum(axis=0)[None, :, None]
    node = (np.abs(mean_left - mean_right).sum(axis=2) / 2.0
            * arch.node_weights / arch.n_leaves)  # (M, N)
    groups = np.zeros((encoder.n_features_out_, n_columns))
    groups[np.arange(encoder.n_features_out_), encoder.feature_groups_] = 1.0
    per_column = np.square(params.split_weight.astype(np.float64)) @ groups  # (M, N, columns)
    total = per_column.sum(axis=2, keepdims=True)
    share = np.divide(per_column, total, out=np.zeros_like(per_column), where=total > 0)
    importance = np.einsum("mn,mnj->j", node, share)
    if params.additive is not None:
        table = params.additive.astype(np.float64)
        if centered:
            table = table - table.mean(axis=1, keepdims=True)
        offsets = encoder.additive_offsets_
        for c, column in enumerate(encoder.additive_sources_):
            importance[column] += _mean_abs_difference(table[offsets[c]:offsets[c + 1]])
    total = importance.sum()
    return importance / total if total > 0 else importance

class _BaseSoftTreeEnsemble(BaseEstimator):
    """Shared fitting and prediction logic; see the public subclasses."""

    _parameter_constraints: dict = {
        "arch": [StrOptions(set(ARCHITECTURES))],
        "n_estimators": [_NumberInterval(Integral, 1, None, closed="left")],
        "depth": [_NumberInterval(Integral, 1, None, closed="left")],
        "leaf_init": [StrOptions({"tree", "ensemble"})],
        "split_init": [
            StrOptions({"fan_in", "data", "boosting"}),
            _NumberInterval(Real, 0, _MAX_SCALE, closed="right"),
        ],
        "learning_rate": [_NumberInterval(Real, 0, _MAX_SCALE, closed="right")],
        "batch_size": [_NumberInterval(Integral, 1, None, closed="left")],
        "max_epochs": [_NumberInterval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean", StrOptions({"auto"})],
        "validation_fraction": [_NumberInterval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [_NumberInterval(Integral, 1, None, closed="left")],
        "tol": [_NumberInterval(Real, 0, None, closed="left")],
        "warm_start": ["boolean"],
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "n_threads": [
            _NumberInterval(Integral, 1, None, closed="left"),
            _NumberInterval(Integral, None, -1, closed="right"),
            None,
        ],
        "numeric_encoding": [StrOptions(set(NUMERIC_ENCODINGS))],
        "n_bins": [_NumberInterval(Integral, 1, 1024, closed="both")],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "max_categories": [_NumberInterval(Integral, 1, None, closed="left")],
        "lr_schedule": [StrOptions(set(LR_SCHEDULES))],
        "warmup_fraction": [_NumberInterval(Real, 0, 1, closed="left")],
        "averaging": [StrOptions(set(AVERAGING)), None],
        "ema_decay": [_NumberInterval(Real, 0, 1, closed="neither")],
        "scoring": [str, callable, None],
        "max_features": [
            StrOptions({"sqrt", "log2"}),
            _NumberInterval(Integral, 1, None, closed="left"),
            _NumberInterval(Real, 0, 1, closed="right"),
            None,
        ],
        "feature_selection": [StrOptions({"auto", "uniform"})],
        "additive_bins": [_NumberInterval(Integral, 2, 2**16, closed="both"), tuple, list,
                          None],
        "teacher_weight": [_NumberInterval(Real, 0, 1, closed="left")],
        "n_members": [_NumberInterval(Integral, 1, None, closed="left")],
        "encoder": [TabularEncoder, None],
    }

    def __init__(
        self,
        arch="oblivious",
        n_estimators=256,
        depth=4,
        leaf_init="ensemble",
        split_init="fan_in",
        learning_rate=1e-2,
        batch_size=512,
        max_epochs=150,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change=10,
        tol=1e-4,
        warm_start=False,
        device="auto",
        random_state=None,
        verbose=0,
        n_threads=1,
        numeric_encoding="quantile_normal",
        n_bins=16,
        categorical_features="from_dtype",
        max_categories=32,
        lr_schedule="cosine",
        warmup_fraction=0.0,
        averaging="ema",
        ema_decay=0.995,
        max_features=0.5,
        feature_selection="auto",
        scoring="loss",
        additive_bins=(16, 64, 256, 1024, 4096),
        teacher_weight=0.0,
        n_members=1,
        encoder=None,
    ):
        self.arch = arch
        self.n_estimators = n_estimators
        self.depth = depth
        self.leaf_init = leaf_init
        self.split_init = split_init
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.n_threads = n_threads
        self.numeric_encoding = numeric_encoding
        self.n_bins = n_bins
        self.categorical_features = categorical_features
        self.max_categories = max_categories
        self.lr_schedule = lr_schedule
        self.warmup_fraction = warmup_fraction
        self.averaging = averaging
        self.ema_decay = ema_decay
        self.max_features = max_features
        self.feature_selection = feature_selection
        self.scoring = scoring
        self.additive_bins = additive_bins
        self.teacher_weight = teacher_weight
        self.n_members = n_members
        self.encoder = encoder

    # -- hooks for subclasses ---------------------------------------------------
    def _encode_targets(self, y, sample_weight, warm=False):  # pragma: no cover - abstract
        """Return the target array used by ``_loss`` and the number of outputs
        (with ``warm``, in the encoding of the fitted model)."""
        raise NotImplementedError

    @property
    def _loss(self):  # pragma: no cover - abstract
        """The task's :class:`~sktree_lmc.training._losses.Loss`: the training loss
        (``self._loss(output, target)``), the boosting's gradients, the
        teacher's mixing."""
        raise NotImplementedError

    def _fitted_targets(self, y):  # pragma: no cover - abstract
        """``y`` in the encoding of the fitted model, the targets ``_loss``
        takes (float64 or int64), for losses evaluated outside ``fit``."""
        raise NotImplementedError

    def _check_y(self, y, name="y", training=True):  # pragma: no cover - abstract
        """Validated targets (scikit-learn's checks for this kind of estimator);
        errors name ``name``. ``training=False`` (validation targets): only
        the loss's domain, not what standardizing them needs."""
        raise NotImplementedError

    def _target_weights(self, y):
        """Per-sample weight factors that depend on the target (class weights);
        they multiply ``sample_weight``."""
        return 1.0

    # -- fitting ------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, *, X_val=None, y_val=None, sample_weight_val=None):
        """Fit the input encoding, then the ensemble with Adam on minibatches.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, n_features)
            Training data: numeric, categorical (strings, pandas
            ``category``; see ``categorical_features``) and missing values
            (NaN, None, ``pd.NA``) are accepted; infinite values are not.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (class labels of any type for the classifier).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights of the loss (multiplied by the classifier's
            ``class_weight``); only their ratios matter. Rows of zero weight
            are also left out of the input encoder's fit.
        X_val : array-like or pandas DataFrame of shape (n_val, n_features), default=None
            Validation rows of your own for early stopping, as in
            :class:`~sklearn.ensemble.HistGradientBoostingClassifier`: early
            stopping (and the teacher's choice of how many boosted trees to
            keep) monitors them instead of holding out
            ``validation_fraction`` of ``X``, and every row of ``X`` trains.
            They are encoded with the encoder fitted on ``X`` (they do not
            shape it). Needs ``early_stopping=True``. In a
            :class:`~sklearn.pipeline.Pipeline`, pass it as
            ``<step>__X_val``, already transformed: the steps before this
            estimator do not transform it (a width other than ``X``'s is a
            ValueError naming ``X_val``); with metadata routing enabled,
            ``Pipeline(..., transform_input=["X_val"])`` also applies the
            preprocessing steps to it.
        y_val : array-like of shape (n_val,) or (n_val, n_targets), default=None
            Labels or targets of ``X_val`` (a classifier's among the classes of ``y``).
        sample_weight_val : array-like of shape (n_val,), default=None
            Weights of the validation rows (times ``class_weight``, with the
            weights of the classes in ``y``).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            For invalid data or hyperparameters, for ``X_val`` without
            ``y_val`` (or the reverse) or with ``early_stopping=False``, and
            when training diverges: an epoch that ends with a non-finite loss
            or parameter stops the fit with an error naming the epoch.
        """
        validation = Validation.from_fit_params(X_val, y_val, sample_weight_val)
        return self._fit(X, y, sample_weight, FitPlan(validation=validation))

    @_fit_context(prefer_skip_nested_validation=True)
    @limit_threads
    def _fit(self, X, y, sample_weight, plan):
        """The one training entry point of ``fit``, ``partial_fit``, the shard
        fits and the federated rounds: what is not a hyperparameter comes in
        ``plan`` (a :class:`~sktree_lmc.training._plan.FitPlan`)."""
        clock = Stopwatch()  # the steps before the first epoch, for verbose
        recipe = plan.recipe or Recipe.from_estimator(self)
        warm = self._begin_fit(plan, recipe)
        X_raw = X
        X, y, target, sample_weight, n_outputs = self._prepare_fit_data(
            X, y, sample_weight, warm, plan)
        recipe = recipe.resolved(X.shape[0], plan.validation)
        self._note_recipe(recipe)
        check_model_size(self.arch, self.depth, self.n_estimators, self.encoder_.n_features_out_,
                         n_outputs)  # a clear error, with the cost, before any allocation
        arch = get_architecture(self.arch, self.depth)
        device = resolve_device(self.device)
        generator = torch.Generator().manual_seed(
            _torch_seed(self.random_state, self.n_epochs_ if warm else 0))
        X, target, sample_weight, (train_idx, val_idx), scored = self._fit_rows(
            X_raw, y, X, target, sample_weight, generator, recipe, plan)
        clock.lap(self._encoding_note(len(train_idx), len(X) - len(train_idx), plan))
        module = self._init_module(arch, n_outputs, generator, device, warm)
        split = (train_idx, val_idx)
        teacher = self._teacher(X, target, sample_weight, split, n_outputs, generator, warm,
                                recipe, plan)
        mask = self._feature_mask(module, generator, device, warm,
                                  gains=None if teacher is None else teacher[1])
        boosted, target = self._start(module, arch, X, target, sample_weight, split, n_outputs,
                                      generator, mask, warm, recipe, plan, teacher)
        clock.lap(self._start_note(warm, recipe, plan, mask))
        view = TrainingView.of(mask, self.encoder_)
        X, module, optimizer, hooks = self._trainer(view, X, module, mask, warm, len(train_idx),
                                                    recipe, plan.schedule_window)
        data = _FitTensors.from_arrays(X, target, sample_weight, device)
        reference_loss = _reference_loss(module, self._loss, data, train_idx, self.batch_size,
                                         n_outputs)
        callbacks, stopper = self._callbacks(scored, data, val_idx, arch, recipe, boosted, clock,
                                             view)
        first_epoch = self.n_epochs_
        model, self.n_iter_ = train(
            module, optimizer, self._loss, data, train_idx, batch_size=self.batch_size,
            max_epochs=recipe.max_epochs, generator=generator, hooks=hooks,
            n_members=self.n_members, callbacks=callbacks, loss_curve=self.loss_curve_)
        self.n_epochs_ = first_epoch + self.n_iter_
        _warn_if_diverged(self.loss_curve_, reference_loss, self.learning_rate)
        self._end_fit(model, optimizer, view, stopper, recipe, callbacks[-1].log)
        self.architecture_, self.device_, self.n_outputs_ = arch, str(device), n_outputs
        return self

    def _note_recipe(self, recipe):
        """Record what the fit's resolved ``recipe`` decided (``do_early_stopping_``)."""
        self.do_early_stopping_ = bool(recipe.early_stopping)

    def _trainer(self, view, X, module, mask, warm, n_train, recipe, window):
        """What trains: ``(X, module, optimizer, hooks)``, the compact copies of
        ``view`` (a :class:`~sktree_lmc.training._training.TrainingView`: on wide data,
        the entries the feature ``mask`` keeps) or the whole model, Adam with
        the state of a warm start, and the recipe's hooks."""
        state = getattr(self, "optimizer_state_", None) if warm else None
        if view is not None:
            X, module, mask, state = (view.inputs(X), view.module(module), view.mask(mask),
                                      view.state(state))
        optimizer = make_optimizer(module, self.learning_rate)
        if state is not None:
            _load_adam_state(optimizer, state)
        hooks = self._training_hooks(module, optimizer, n_train, recipe, window, mask)
        return X, module, optimizer, hooks

    def _end_fit(self, model, optimizer, view, stopper, recipe, log):
        """The fitted state of a finished fit (the kept epoch, the parameters,
        Adam's state, expanded from the compact ones of ``view``) and the
        closing line of a verbose fit."""
        self.best_epoch_ = self.n_iter_
        if stopper is not None and stopper.best_epoch is not None:
            self.best_epoch_ = stopper.best_epoch
        log.close(self._fit_summary(stopper, recipe))
        params = model.to_params()
        state = _export_adam_state(optimizer) if recipe.keep_optimizer_state else None
        if view is not None:
            params, state = view.expand(params), view.state(state, expand=True)
        self.tree_params_, self.optimizer_state_ = params, state

    def _fit_rows(self, X_raw, y, X, target, sample_weight, generator, recipe, plan):
        """The rows of this fit and their roles: ``(X, target, sample_weight,
        (train_idx, val_idx), scored)``. Without ``plan.validation``, early
        stopping holds out ``validation_fraction`` of the training rows (one
        draw from ``generator``, or from a generator of ``plan.split_seed``);
        with it, the user's validation rows, encoded
        with the fitted encoder, are appended after the training rows, which
        all train. ``scored``: a function that returns the raw validation rows
        ``(X, y, sample_weight)`` a ``scoring`` other than ``"loss"`` is
        computed on."""
        validation = plan.validation
        if validation is None:
            if plan.split_seed is not None:
                generator = torch.Generator().manual_seed(plan.split_seed)
            train_idx, val_idx = _validation_split(
                X.shape[0], self.validation_fraction if recipe.early_stopping else None,
                generator, sample_weight)

            def scored():  # indexed only when a scorer needs the raw rows
                return _safe_indexing(X_raw, val_idx), _safe_indexing(y, val_idx), None

            return X, target, sample_weight, (train_idx, val_idx), scored
        X_val, y_val, target_val, weight_val = self._validation_rows(y, target, validation)
        n, n_val = X.shape[0], X_val.shape[0]
        # the validation weights on the training weights' scale: the largest weight
        # over all rows (which _FitTensors divides by) is the training rows' own
        weight_val = weight_val * (sample_weight.max() / weight_val.max())
        return (np.concatenate([X, X_val]), np.concatenate([target, target_val]),
                np.concatenate([sample_weight, weight_val]),
                (np.arange(n), np.arange(n, n + n_val)),
                lambda: (validation.X, y_val, validation.sample_weight))

    def _validation_rows(self, y, target, validation):
        """The user's validation rows checked against the fit (features,
        labels or targets) and encoded: ``(X_val, y_val, target_val,
        sample_weight_val)``, the targets in the encoding of ``target``."""
        try:
            columns = to_columns(validation.X)[0]
        except ValueError as exc:
            raise ValueError(_named(exc, "X", "X_val")) from None
        if len(columns) != self.n_features_in_:
            raise ValueError(
                f"X_val has {len(columns)} features, but this estimator is fitted on X of "
                f"{self.n_features_in_} features (its encoder's input). In a Pipeline, X_val "
                "(passed as "
                "fit(X, y, <step>__X_val=...)) is not transformed by the steps before this "
                "estimator: pass it transformed by them, pipeline[:-1].transform(X_val)."
            )
        try:
            validate_data(self, validation.X, reset=False, skip_check_array=True)
        except ValueError as exc:
            raise ValueError(_named(exc, "X", "X_val")) from None
        X_val = self._with_codes(columns)
        try:  # y_val need only be in the loss's domain (all-zero Poisson counts are valid)
            y_val = self._check_y(validation.y, name="y_val", training=False)
            check_consistent_length(X_val, y_val)
            target_val = np.asarray(self._fitted_targets(y_val), dtype=target.dtype)
        except ValueError as exc:
            raise ValueError(_named(exc, "y", "y_val")) from None
        try:
            weight = _check_sample_weight(validation.sample_weight, X_val, dtype=np.float64,
                                          ensure_non_negative=True)
        except ValueError as exc:  # scikit-learn's message names sample_weight
            raise ValueError(f"sample_weight_val: {exc}") from None
        weight = _rescaled_weights(weight * self._validation_target_weights(y, y_val))
        if not weight.sum() > 0:
            raise ValueError(
                "sample_weight_val (times class_weight, for a classifier) sums to zero: "
                "there is nothing to validate on."
            )
        return X_val, y_val, target_val, weight

    def _validation_target_weights(self, y, y_val):
        """Per-row weight factors of the validation rows that depend on their
        target (the classifier's ``class_weight``, as fitted on ``y``)."""
        return 1.0

    def _encoding_note(self, n_train, n_val, plan):
        """What the encoding did, for the line a verbose fit shows before its
        first epoch (``n_val``: the validation rows, held out or the user's)."""
        if plan.validation is not None:
            rows = f"{n_train} training rows and {n_val} validation rows"
        elif n_val:
            rows = f"{n_train + n_val} rows ({n_val} held out for early stopping)"
        else:
            rows = f"{n_train} rows"
        return (f"encoded {rows} of {self.n_features_in_} columns into "
                f"{self.encoder_.n_features_out_} features")

    def _start_note(self, warm, recipe, plan, mask=None):
        """What the start did (the boosted start, the teacher, the columns
        ``mask`` drew by the teacher's gains), or None."""
        notes = []
        if self.split_init == "boosting" and not warm:
            notes.append("boosted start")
        if recipe.teacher_weight > 0 and self.teacher_:
            kept = len(self.teacher_[0][1])
            if plan.boosting_trees is not None:
                notes.append(f"the shards' shared teacher: {kept} boosted trees")
            else:
                notes.append(f"grew the teacher: {kept} boosted trees of depth {self.depth}"
                             + (f" (the first {kept} of {self.n_estimators} kept on the "
                                "validation rows)" if kept < self.n_estimators else ""))
        elif self.split_init == "data" and not warm:
            notes.append("data-aware start of the splits")
        if mask is not None and mask.note:
            notes.append(mask.note)
        return "; ".join(notes) or None

    def _begin_fit(self, plan, recipe):
        """Whether this fit continues a fitted model (the estimator's own with
        ``warm_start``, or ``plan.start``'s, installed here); checks that the
        hyperparameters still describe it (and that validation rows of the
        user's own come with early stopping), and resets the history of a new fit."""
        if plan.validation is not None and recipe.early_stopping is False:
            raise ValueError(
                "X_val and y_val are passed to fit while early_stopping is False. When passing "
                "X_val and y_val to fit, set early_stopping to 'auto' or True."
            )
        if plan.start is not None:
            self.tree_params_ = plan.start.params.copy()
            self.optimizer_state_ = plan.start.optimizer_state
            for key, value in plan.start.target_scale.items():
                setattr(self, key, np.array(value, copy=True))
        self._check_scoring()
        continued = plan.start is not None or (
            self.warm_start if plan.warm is None else plan.warm)
        warm = self._check_warm_start(continued, plan)
        if self.n_members > self.n_estimators:
            raise ValueError(
                f"n_members={self.n_members} is more than n_estimators={self.n_estimators}: "
                "every member needs a tree."
            )
        if not warm:
            self.loss_curve_, self.n_epochs_ = [], 0
            self.validation_loss_curve_ = self.validation_score_ = None
            self.teacher_ = None
        return warm

    def _teacher(self, X, target, sample_weight, split, n_outputs, generator, warm, recipe,
                 plan):
        """The teacher of ``teacher_weight > 0``, grown before the features of
        the trees are drawn (they are drawn by its gains; see
        :meth:`_grow_teacher`). None without a teacher, and with a new boosted
        start, whose trees are the teacher (:meth:`_start`)."""
        self._check_boosted_depth(recipe, warm)
        if not recipe.teacher_weight > 0 or (self.split_init == "boosting" and not warm):
            return None
        return self._grow_teacher(X, target, sample_weight, split, n_outputs, generator, plan)

    def _check_boosted_depth(self, recipe, warm):
        """Raise a ``ValueError`` that names the setting to change when the
        gradient-boosted trees of the teacher (``teacher_weight > 0``) or of
        the boosted start (``split_init="boosting"``), oblivious trees of
        ``depth``, would have more leaves than a tree may (the model itself,
        as a deep decision list, may be fine)."""
        if self.depth < MAX_LEAVES_PER_TREE.bit_length():  # 2**depth <= the limit
            return
        causes = []
        if recipe.teacher_weight > 0:
            causes.append(f"the teacher (teacher_weight={recipe.teacher_weight:g}; set "
                          "teacher_weight=0 to train without it)")
        if self.split_init == "boosting" and not warm:
            causes.append("the boosted start (split_init='boosting'; use split_init='data' "
                          "or 'fan_in')")
        if causes:
            raise ValueError(
                f"depth={self.depth}: the gradient-boosted oblivious trees of "
                f"{' and of '.join(causes)} would have 2**{self.depth} leaves each, more than "
                f"the limit of {MAX_LEAVES_PER_TREE:,} (MAX_LEAVES_PER_TREE); the "
                f"arch={self.arch!r} model itself does not need them. Or use a smaller depth."
            )

    def _grow_teacher(self, X, target, sample_weight, split, n_outputs, generator, plan):
        """``(trees, gains)``: the gradient-boosted trees grown on the training
        rows of ``split`` (or the shards' shared trees of ``plan``), and the
        gain of their splits per encoded feature (None for shared trees
        without them)."""
        if plan.boosting_trees is not None:
            return self._shared_trees(plan.boosting_trees), plan.feature_gains
        train_idx, val_idx = split
        F_enc = self.encoder_.n_features_out_
        sw = np.asarray(sample_weight, dtype=np.float64)
        gains = np.zeros((self.n_estimators, self.depth))
        trees = grow_oblivious_trees(
            np.asarray(X[train_idx, :F_enc], dtype=np.float64), target[train_idx],
            sw[train_idx], loss=self._loss, n_trees=self.n_estimators, depth=self.depth,
            n_outputs=n_outputs, generator=generator, gains=gains,
            validation=boosting_validation(X, target, sw, val_idx, F_enc))
        return trees, feature_gains(trees[1], gains, F_enc)

    def _start(self, module, arch, X, target, sample_weight, split, n_outputs, generator, mask,
               warm, recipe, plan, teacher=None):
        """The data-aware starts of a new model (``split_init="data"`` or
        ``"boosting"``) and the teacher's targets (``teacher``: see
        :meth:`_teacher`); returns whether the model starts from boosted
        trees, and the training targets."""
        sw = np.asarray(sample_weight, dtype=np.float64)
        if self.split_init == "data" and not warm:
            data_start(module, X, split[0], self.encoder_, generator, mask)
        boosted = self.split_init == "boosting" and not warm
        if boosted:
            start_trees = boosting_start(
                module, arch, X, target, sw, split, loss=self._loss, mask=mask,
                generator=generator, trees=self._shared_trees(plan.boosting_trees))
            if recipe.teacher_weight > 0:
                # the teacher is the boosted start's trees when they were grown on every
                # column (the same boosting on the same rows): they are not grown twice
                if start_trees is None:
                    start_trees = self._grow_teacher(X, target, sample_weight, split,
                                                     n_outputs, generator, plan)[0]
                teacher = (start_trees, None)
        if teacher is not None:
            target = self._distilled_targets(X, target, split, recipe.teacher_weight,
                                             teacher[0])
        return boosted, target

    def _callbacks(self, scored, data, val_idx, arch, recipe, boosted, clock=None, view=None):
        """The callbacks of the epoch loop (validation loss, divergence check,
        early stopping, progress) and the early-stopping one, or None.
        ``scored``: the raw validation rows of a ``scoring`` other than
        ``"loss"``; ``clock``: the steps before the loop (a
        :class:`~sktree_lmc.utils._progress.Stopwatch`), which the progress shows
        first and counts in its elapsed time."""
        early = recipe.early_stopping
        if early and self.validation_loss_curve_ is None:
            self.validation_loss_curve_, self.validation_score_ = [], []
        callbacks = []
        stopper = None
        if early:
            callbacks.append(ValidationLoss(self._loss, data, val_idx,
                                            self.validation_loss_curve_))
        callbacks.append(DivergenceCheck(self.learning_rate))
        if early:
            score = self._validation_scorer(scored, arch, view)
            stopper = EarlyStoppingCallback(
                self.tol, self.n_iter_no_change, self.validation_score_, score,
                score_start=boosted).start_on(self._loss, data, val_idx)
            callbacks.append(stopper)
        log = ProgressLog(type(self).__name__, recipe.max_epochs, self.verbose, clock=clock)
        callbacks.append(ProgressCallback(log, show_score=early and self.scoring != "loss"))
        return callbacks, stopper

    def _distilled_targets(self, X, target, split, teacher_weight, trees):
        """The training targets of ``teacher_weight > 0``: on the training rows,
        ``(1 - teacher_weight) * target + teacher_weight * teacher``, the
        teacher being the gradient-boosted ``trees`` (:meth:`_teacher`); the
        validation rows keep their labels, so early stopping measures the
        loss against them."""
        train_idx = split[0]
        Xe = np.asarray(X[train_idx, :self.encoder_.n_features_out_], dtype=np.float64)
        self.teacher_ = [tuple(np.asarray(a) for a in trees)]
        return self._mix_targets(target, oblivious_output(Xe, *trees), train_idx, teacher_weight)

    def _refit_targets(self, X, y):
        """The targets ``refit_leaves`` fits the leaves to, for the encoded rows
        ``X`` and their labels or targets ``y`` (see the classifier)."""
        return self._fitted_targets(y)

    def _shared_units(self, target):
        """Fitted targets in the units the shards' shared trees are grown on
        (classifier: the class indices)."""
        return target

    def _shared_trees(self, trees):
        """The gradient-boosted trees a meta-estimator grew over its shards
        (:attr:`FitPlan.boosting_trees`; see ``ShardedSoftTreeEnsemble``), in
        this fit's target units, or None."""
        return trees

    def _mix_targets(self, target, teacher, train_idx, teacher_weight):
        """``target`` with the teacher's raw outputs ``teacher`` mixed in on
        ``train_idx`` at ``teacher_weight`` (see the loss's ``mix``)."""
        loss = self._loss
        return loss.mix(target, loss.teacher_targets(teacher), train_idx, teacher_weight,
                        teacher.shape[1])

    def _fit_summary(self, stopper, recipe):
        """The closing line of a verbose fit."""
        if stopper is None:
            return f"{self.n_iter_} epochs, training loss {self.loss_curve_[-1]:.5f}"
        stopped = "stopped early" if self.n_iter_ < recipe.max_epochs else "ran all epochs"
        if self.best_epoch_ == 0:
            return f"{stopped} after {self.n_iter_} epochs; kept the boosted start"
        best = self.validation_score_[-self.n_iter_ + self.best_epoch_ - 1]
        what = "validation loss" if self.scoring == "loss" else "validation score"
        value = -best if self.scoring == "loss" else best
        return (f"{stopped} after {self.n_iter_} epochs; kept epoch {self.best_epoch_} "
                f"({what} {value:.5f})")

    def _validation_scorer(self, scored, arch, view=None):
        """None for ``scoring="loss"``, else a function ``module -> score`` of
        a model on the raw validation rows that ``scored()`` returns (``(X, y,
        sample_weight)``), computed with the scikit-learn scorer of
        ``scoring`` (``None``: the estimator's ``score``, accuracy or R^2) on
        a copy of this estimator holding the module's parameters."""
        if self.scoring == "loss":
            return None
        scorer = check_scoring(self, scoring=self.scoring)
        X_val, y_val, weight = scored()
        kwargs = {} if weight is None else {"sample_weight": weight}

        def score(module):
            snapshot = copy.copy(self)
            params = module.to_params()
            snapshot.architecture_ = arch
            snapshot.tree_params_ = params if view is None else view.expand(params)
            snapshot.n_outputs_ = module.leaf_value.shape[2]
            snapshot.verbose = 0
            return _check_score(scorer(snapshot, X_val, y_val, **kwargs), self.scoring)

        return score

    def _partial_fit(self, X, y, sample_weight=None, classes=None):
        """One pass of Adam over the rows given, continuing from the previous
        calls (parameters and Adam's state): a fit with the recipe
        :attr:`Recipe.PARTIAL_FIT`. The first call fits the input encoding on
        its rows (with a warning, unless ``encoder`` is given) and, for a
        classifier, takes the labels of ``classes``; ``n_iter_`` counts the
        passes (as ``MLPClassifier.partial_fit``'s)."""
        first = not hasattr(self, "tree_params_")
        passes = 0 if first else getattr(self, "n_iter_", 0)
        if classes is not None:
            classes = _check_classes(classes)
            if not first and not np.array_equal(classes, self.classes_):
                raise ValueError(
                    f"classes={classes.tolist()} differs from the classes of the first "
                    f"partial_fit call, {self.classes_.tolist()}."
                )
        elif not first:
            classes = getattr(self, "classes_", None)  # None for a regressor
        plan = FitPlan(classes=classes, warm=not first,
                       recipe=Recipe.from_estimator(self, **Recipe.PARTIAL_FIT))
        if first and self.encoder is None:
            warnings.warn(
                f"{type(self).__name__}.partial_fit fits the input encoding on the rows of its "
                "first call and keeps it for every later call: a column's quantiles, categories "
                "and missing values unseen in this first chunk are not represented. To encode "
                "the whole stream, pass encoder=TabularEncoder(...).fit(representative rows) "
                "(or TabularEncoder.from_summaries of several chunks).",
                UserWarning, stacklevel=_user_stacklevel())
        self._fit(X, y, sample_weight, plan)
        self.n_iter_ = passes + 1
        return self

    def _feature_mask(self, module, generator, device, warm, gains=None):
        """The per-tree feature mask (:class:`~sktree_lmc.training._training.FeatureMask`,
        or None), applied to ``module``: drawn from ``generator`` for a new
        model, by the teacher's ``gains`` per encoded feature when there are
        some and ``feature_selection="auto"``, recovered from the zero weights
        when warm-started."""
        if self.max_features is None:
            return None
        enc = self.encoder_
        if warm:
            params = self.tree_params_
            return FeatureMask.from_params(params.split_weight, device, params.additive,
                                           enc.additive_offsets_)
        mask = None
        groups = enc.feature_groups_
        if gains is not None and self.feature_selection == "auto":
            mask = FeatureMask.guided(
                generator, self.n_estimators, groups, gains, self.max_features, device,
                additive_sources=enc.additive_sources_, additive_offsets=enc.additive_offsets_)
        if mask is None:
            k = resolve_max_features(self.max_features, enc.n_features_in_)
            mask = FeatureMask.draw(generator, self.n_estimators, groups, k, device)
        if mask is not None:
            mask.apply(module)
        return mask

    def _training_hooks(self, module, optimizer, n_train, recipe, window=None, mask=None):
        """The recipe around each Adam step (see :mod:`._training`): the
        feature ``mask`` (:meth:`_feature_mask`), the learning-rate schedule
        over this fit's steps (or over ``window``, ``(epochs before this fit,
        epochs of the whole run)``: the federated rounds are one run of the
        schedule), and the weight average of ``module``."""
        steps_per_epoch = -(-n_train // int(self.batch_size))
        before, total = window or (0, recipe.max_epochs)
        scheduler = make_lr_scheduler(
            optimizer, recipe.lr_schedule, recipe.warmup_fraction, steps_per_epoch * total,
            start_step=steps_per_epoch * before,
        )
        average = None
        if recipe.averaging is not None:
            average = WeightAverage(module, recipe.averaging, self.ema_decay,
                                    start_epoch=int(SWA_START * recipe.max_epochs))
        return TrainingHooks(scheduler, average, mask)

    def _check_warm_start(self, continued, plan):
        """Whether this fit continues from the fitted parameters (``continued``
        and fitted); raises a clear error when the hyperparameters (or the
        encoder of ``plan`` or of ``encoder``) no longer describe them."""
        if not (continued and hasattr(self, "tree_params_")):
            return False
        fitted = (self.architecture_.name, self.architecture_.depth, self.tree_params_.n_trees)
        wanted = (self.arch, self.depth, self.n_estimators)
        if fitted != wanted:
            raise ValueError(
                "warm_start=True continues from the fitted parameters, but (arch, depth, "
                f"n_estimators) changed from {fitted} to {wanted}. Set warm_start=False to "
                "fit a new model."
            )
        self._check_warm_loss()
        enc = self.encoder_
        given = plan.encoder if plan.encoder is not None else self.encoder
        if given is not None:
            if encoders_differ(enc, given):
                raise ValueError(
                    "warm_start=True continues with the fitted input encoding, but the "
                    f"encoder given differs from it: {encoders_differ(enc, given)}. Set "
                    "warm_start=False to fit a new model."
                )
            return True
        fitted = (enc.numeric_encoding, enc.n_bins, enc.max_categories,
                  enc.additive_bins)
        wanted = (self.numeric_encoding, self.n_bins, self.max_categories, self.additive_bins)
        if fitted != wanted:
            raise ValueError(
                "warm_start=True continues with the fitted input encoding, but "
                f"(numeric_encoding, n_bins, max_categories, additive_bins) changed from "
                f"{fitted} to {wanted}. Set warm_start=False to fit a new model."
            )
        return True

    def _check_scoring(self):
        """Raise a ``ValueError`` naming ``scoring`` for a scorer name that
        scikit-learn does not know, before any training."""
        if isinstance(self.scoring, str) and self.scoring != "loss":
            try:
                get_scorer(self.scoring)
            except ValueError as exc:
                raise ValueError(f"scoring={self.scoring!r}: {exc}") from None

    def _check_warm_loss(self):
        """Raise a clear error when a fit continuing the fitted parameters
        has another training loss than theirs (their leaves are in its units)."""

    def _prepare_fit_data(self, X, y, sample_weight, warm=False, plan=None):
        """Validate the training data and encode it (fitting the encoder unless
        ``warm``, or taking the fitted one of ``plan`` or of the ``encoder``
        parameter); return the encoded ``X``, the validated ``y``, the encoded
        target, the float64 sample weights (times the class weights) and the
        number of outputs. With ``warm``, the data must
        match the fitted model (features, classes or targets)."""
        # to_columns first: its check_array gives scikit-learn's errors for a
        # 1-D or empty X, before validate_data counts features (it cannot on 1-D
        # input); y goes to validate_data for its error on y=None.
        columns, by_dtype = to_columns(X)
        validate_data(self, X, y, reset=not warm, skip_check_array=True)
        y = self._check_y(y)
        check_consistent_length(columns[0] if columns else X, y)
        plan = FitPlan() if plan is None else plan
        sample_weight = _check_sample_weight(
            sample_weight, columns[0] if columns else X, dtype=np.float64,
            ensure_non_negative=True)
        sample_weight = _rescaled_weights(sample_weight * self._target_weights(y))
        if not sample_weight.sum() > 0:
            raise ValueError(
                "sample_weight (times class_weight, for a classifier) sums to zero: "
                "there is nothing to fit."
            )
        if not warm:  # rows of zero weight do not shape the encoder
            self.encoder_ = self._make_encoder(columns, by_dtype, getattr(
                self, "feature_names_in_", None), plan.encoder, sample_weight)
        X = self._with_codes(columns)
        # float64 and unscaled: the gradient-boosted trees (split_init="boosting", the
        # teacher) rescale them to a mean of 1 over the rows of all shards (a rescaling
        # here would differ per shard), and _FitTensors to a largest weight of 1.
        target, n_outputs = self._encode_targets(y, sample_weight, warm, plan.classes)
        return X, y, target, sample_weight, n_outputs

    def _with_codes(self, columns):
        """The encoded rows of ``columns`` (checked), with the additive term's
        codes appended (as float32 columns, after the trees' features) when
        the model has one (:meth:`TabularEncoder.encode`)."""
        X, codes = self.encoder_.encode(columns)
        X = self._check_encoded(X)
        return X if codes is None else np.concatenate([X, codes], axis=1)

    def _make_encoder(self, columns, by_dtype, names=None, shared=None, sample_weight=None):
        """The input encoder fitted on the training columns (named ``names``;
        rows of zero ``sample_weight`` left out), or a fitted one: ``shared``
        (that a meta-estimator fitted once for several fits, as the shards of
        :class:`~sktree_lmc.ShardedSoftTreeEnsemble`, which must encode
        alike), else the ``encoder`` parameter."""
        shared = self.encoder if shared is None else shared
        if shared is not None:
            return _check_given_encoder(shared, columns, names)
        categorical = check_categorical_features(
            self.categorical_features, len(columns), names, by_dtype
        )
        encoder = TabularEncoder(self.numeric_encoding, self.n_bins, self.max_categories,
                                 self.additive_bins)
        return encoder._fit_columns(columns, categorical, names, sample_weight=sample_weight)

    @staticmethod
    def _check_encoded(X):
        """Check encoded rows: finite in float32 (the training precision)."""
        if not np.isfinite(X).all():
            raise ValueError(
                "X contains values beyond the float32 range (largest magnitude "
                f"> {_FLOAT32_MAX:.3g}); the model trains in float32. Rescale X first, "
                "or use a numeric_encoding other than 'none'."
            )
        return X

    def _init_module(self, arch, n_outputs, generator, device, warm=False):
        """The module to train: the fitted parameters with ``warm``, else freshly
        initialized (draws from ``generator``; see :mod:`._start`)."""
        if warm:
            return start_from_params(arch, self.tree_params_, self.encoder_, device)
        return init_module(arch, self.n_estimators, self.encoder_, n_outputs, generator, device,
                           leaf_init=self.leaf_init, split_init=self.split_init)

    # -- input --------------------------------------------------------------------
    def _input_columns(self, X):
        """Validate prediction input against the fit (feature count and names)
        and split it into columns for the encoder."""
        check_is_fitted(self, "tree_params_")
        columns = to_columns(X)[0]  # first: scikit-learn's error for a 1-D X
        validate_data(self, X, reset=False, skip_check_array=True)
        return columns

    def _encoded_input(self, X):
        """``X`` validated and encoded, float32 of shape ``(n_samples,
        n_encoded_features)``: the input of the trees, followed by the
        additive term's codes when the model has one (held whole; prediction
        encodes in chunks instead)."""
        return self._with_codes(self._input_columns(X))

    # -- prediction ---------------------------------------------------------------
    @limit_threads
    def _predict_in_chunks(self, X, method, contrast=False):
        """Encode ``X`` and run the inference kernel (:func:`predict_chunked`).

        ``method`` is ``"forward"`` or ``"tree_outputs"``. Rows are encoded in
        chunks (so an encoded copy of a large input is never held whole); the
        kernel works in float32 on fixed-size row chunks, so that a row's
        prediction does not depend on how rows are batched; the result is a
        float64 array.
        """
        columns = self._input_columns(X)
        device = prediction_device(self.device)
        params = self.tree_params_
        module = SoftTreeEnsembleModule.from_params(self.architecture_, params, device)
        with_codes = params.additive is not None and method == "forward"
        # the code columns feature_selection="auto" left at zero add nothing: skipped
        live = (live_code_columns(params.additive, self.encoder_.additive_offsets_)
                if with_codes else None)
        features = used_features(params.split_weight)
        skip = _unused_columns(features, self.encoder_.feature_groups_, self.n_features_in_)
        outs = []
        for _, chunk, codes in self.encoder_.encode_chunks(columns, skip=skip, codes=with_codes,
                                                           code_columns=live):
            outs.append(predict_chunked(module, self._check_encoded(chunk), output=method,
                                        codes=codes, features=features, contrast=contrast))
        return np.concatenate(outs, axis=0)

    def _prediction_model(self):
        """The fitted model that predicts (see :func:`_lazy_on_dask`)."""
        return self

    def _prediction_meta(self, method):  # pragma: no cover - abstract
        """An empty array of the type and columns of ``method``'s output."""
        raise NotImplementedError

    @property
    def feature_importances_(self):
        """Importance of every input column, from the fitted parameters.

        For each input column, an estimate of how much of the model's output
        (a classifier's logits, centered over the classes; a regressor's
        standardized prediction) varies through it, as the mean absolute
        difference between the outputs of two random rows:

        - **trees**: every split node contributes half the difference of the
          mean leaf value on its two sides (the change when two rows fall on
          different sides of an even split), times the share of the rows that
          reach it (the share of the leaves below it, the node weight of
          weight matching), divided among the input columns in proportion to
          the squared split weights of their encoded features
          (``encoder_.feature_groups_``): for standardized, independent
          features, each column's share of the variance of the split's input
          ``w . x``;
        - **additive term**: each column's table contributes the mean
          absolute difference between its bins' values (quantile bins hold
          about as many training rows each).

        The sum over all columns is normalized to 1, except for a constant
        model (every leaf alike, no additive term): then no column moves the
        output, and the importances are all zeros (as those of scikit-learn's
        forests of single-leaf trees), rather than shares of nothing. It needs no data, so it is cheap, but it assumes even splits
        and equally filled bins; with ``numeric_encoding="none"`` the split
        weights are in the columns' own units, so the trees' share depends on
        them. :func:`sklearn.inspection.permutation_importance` measures
        importance on data instead.

        Returns
        -------
        importances : ndarray of shape (`n_features_in_`,)
            Non-negative, summing to 1; all zeros for a constant model.
        """
        check_is_fitted(self, "tree_params_")
        return feature_importances(self.tree_params_, self.architecture_, self.encoder_,
                                   centered=self._centered_outputs)

    #: Whether the outputs are a classifier's logits (feature_importances_ centers them).
    _centered_outputs = False

    def _raw_output(self, X):
        """Ensemble output (before link function), shape (n_samples, n_outputs)."""
        return self._predict_in_chunks(X, "forward")

    def tree_outputs(self, X):
        """Outputs of every single tree (Eq. 3 of the paper).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_estimators, n_outputs)
            ``outputs.sum(axis=1)`` is the raw ensemble output, up to float32
            rounding (the kernel computes in float32; see ``device``).
        """
        return self._predict_in_chunks(X, "tree_outputs")

    # -- parameters as arrays -----------------------------------------------------
    def get_tree_params(self):
        """Return a copy of the fitted parameters as NumPy arrays.

        Returns
        -------
        params : TreeParams
            ``split_weight`` ``(M, N, F)``, ``split_bias`` ``(M, N)`` and
            ``leaf_value`` ``(M, L, C)``, laid out as documented in
            :class:`TreeParams` and :class:`TreeArchitecture`.
        """
        check_is_fitted(self, "tree_params_")
        return self.tree_params_.copy()

    def set_tree_params(self, params):
        """Replace the fitted parameters by ``params`` (same shapes).

        Parameters
        ----------
        params : TreeParams
            New parameters; they must have the shapes of the current ones and
            be finite.

        Returns
        -------
        self : object
            The estimator, with the new parameters.
        """
        check_is_fitted(self, "tree_params_")
        if not isinstance(params, TreeParams):
            raise TypeError(f"params must be a TreeParams, got {type(params).__name__}.")
        if params.shape_signature != self.tree_params_.shape_signature:
            raise ValueError(
                f"Parameter shapes {params.shape_signature} (M, N, F, L, C) do not match "
                f"the fitted ones {self.tree_params_.shape_signature}."
            )
        check_same_additive(self.tree_params_, params)
        for f in dataclasses.fields(TreeParams):
            value = getattr(params, f.name)
            if value is not None and not np.isfinite(value).all():
                raise ValueError(f"params.{f.name} contains NaN or infinity.")
        self.tree_params_ = params.copy()
        return self

    def _fitted_copy(self, params, **overrides):
        """A new fitted estimator with this one's hyperparameters and fitted
        metadata, the parameters ``params`` and the fitted attributes
        ``overrides`` (see :func:`~sktree_lmc.merging._bridge.with_params`): the
        public fitted attributes and the private ones of
        ``_fitted_private_attrs`` are copied, Adam's state is not."""
        new = clone(self)
        private = getattr(self, "_fitted_private_attrs", ())
        for key, value in vars(self).items():
            fitted = key.endswith("_") and not key.startswith("_")
            if (fitted or key in private) and key not in ("tree_params_", "optimizer_state_"):
                setattr(new, key, copy.deepcopy(value))
        new.tree_params_ = params.copy()
        if "optimizer_state_" in vars(self):
            new.optimizer_state_ = None
        for key, value in overrides.items():
            setattr(new, key, value)
        return new

    # -- persistence --------------------------------------------------------------
    def __getstate__(self):
        """The state to pickle, with the fitted state in plain types only
        (see :mod:`._persistence`), so that loading with :mod:`skops.io`
        needs only the estimator class trusted."""
        return estimator_state(super().__getstate__())

    def __setstate__(self, state):
        """Restore a state of :meth:`__getstate__`; a state pickled by another
        version of the package (another pickle format) is a ValueError."""
        super().__setstate__(restore_estimator_state(state, type(self)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        # NaN is a missing value. Categorical columns (strings, pandas category)
        # are accepted too, but the ``categorical`` tag is not set: in
        # scikit-learn it marks estimators that take integer-coded categories
        # only (as CategoricalNB), and makes the common checks feed such data.
        tags.input_tags.allow_nan = True
        return tags


class SoftTreeEnsembleClassifier(ClassifierMixin, _BaseSoftTreeEnsemble):
    """Soft (differentiable) tree ensemble classifier trained with PyTorch.

    The model is the sum of ``n_estimators`` soft trees (Eq. 2-4 of "Linear
    Mode Connectivity in Differentiable Tree Ensembles"); each split sends the
    fraction ``sigmoid(w . x + b)`` of a sample to its left. It is trained with
    Adam on the cross-entropy of ``softmax(sum of trees)``.

    Read more in the :ref:`User Guide <encoding_and_training>`.

    Parameters
    ----------
    arch : {"oblivious", "non_oblivious", "decision_list", "decision_list_modified"}, \
            default="oblivious"
        Tree architecture: perfect binary trees (``"non_oblivious"``,
        ``2**depth - 1`` splits), one split per level (``"oblivious"``), a
        chain of ``depth`` splits and ``depth + 1`` leaves (``"decision_list"``),
        or that chain with its last leaf fixed to zero
        (``"decision_list_modified"``: no symmetry but tree permutation).
    n_estimators : int, default=256
        Number of trees ``M``.
    depth : int, default=4
        Tree depth ``D``.
    leaf_init : {"ensemble", "tree"}, default="ensemble"
        Scale of the uniform initialization of the leaf values: ``"ensemble"``
        reads all ``M * L`` leaves as one layer (``U(+-1/sqrt(M * L))``, an
        initial output near zero); ``"tree"`` reads each tree's leaves as a
        layer (``U(+-1/sqrt(L))``). The default trains to higher accuracy and
        lower barriers (``docs/benchmarks.md``, "Findings of the first run",
        "Leaf initialization").
    split_init : "fan_in", "data", "boosting" or float, default="fan_in"
        How the splits start: ``"fan_in"``, weights and biases from
        ``U(-c, c)`` with ``c = 1/sqrt(F)`` (a fully connected layer's start,
        the paper's); a float, that ``c`` whatever ``F`` (0.45 reproduces the
        paper's training accuracies); ``"data"``, half of the splits as sharp
        thresholds at training values; ``"boosting"`` (oblivious and
        non-oblivious trees), gradient-boosted trees grown on the training
        rows (``best_epoch_`` is 0 when no epoch beats them). These two fit
        one model faster, and better where thresholds are sharp, but their
        models merge badly. See :ref:`encoding_and_training`.
    learning_rate : float, default=3e-2
        Adam learning rate (the peak of ``lr_schedule``), suited to the
        teacher's soft targets, which keep the validation loss improving
        longer; the paper's protocol uses 1e-2 (``docs/benchmarks.md``, "The
        learning rate with the teacher").
    batch_size : int, default=512
        Minibatch size.
    max_epochs : int, default=150
        Most passes over the training data (the schedule spans them).
    early_stopping : "auto" or bool, default="auto"
        Hold out ``validation_fraction`` of the training data (or use
        ``fit``'s ``X_val``), stop when the validation loss has not improved
        by ``tol`` for ``n_iter_no_change`` epochs, and restore the
        parameters of the best epoch. ``"auto"``, as in
        HistGradientBoosting: on with ``X_val``, or above 3,000 training rows;
        below, a tenth of the rows is too few to choose an epoch, and all
        ``max_epochs`` run on every row (``do_early_stopping_`` says which).
        See :ref:`encoding_and_training`.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping (without ``X_val``).
    n_iter_no_change : int, default=10
        Patience of early stopping, in epochs.
    tol : float, default=1e-4
        Minimum validation-loss improvement for early stopping.
    warm_start : bool, default=False
        When True, ``fit`` continues from the fitted parameters for
        ``max_epochs`` more epochs (as in ``MLPClassifier``); the features,
        classes, ``arch``, ``depth`` and ``n_estimators`` must match. Adam's
        state is carried on in ``optimizer_state_`` (a restarted Adam undoes
        part of the fit); set it to None to restart Adam.
    device : str or torch.device, default="auto"
        Torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...); ``"auto"``
        uses CUDA when available. The fitted parameters are stored on the
        CPU, so a model loads and predicts anywhere; computation is in
        float32. See :ref:`gpu_and_persistence`.
    random_state : int, RandomState instance or None, default=None
        Seeds a per-fit :class:`torch.Generator`; global random state is
        never touched. An int gives bit-identical fits on the CPU.
    verbose : int, default=0
        ``1`` shows a per-epoch progress bar (tqdm, when installed) or prints
        one line per epoch; ``2`` prints one line per epoch.
    n_threads : int or None, default=1
        Torch intra-op threads inside ``fit`` and prediction (restored on
        exit); None keeps the caller's, negative values count back from the
        CPUs. One by default: the kernels are small, and more threads slow
        fits down badly on a busy machine (:ref:`gpu_and_persistence`).
    numeric_encoding : {"quantile_normal", "piecewise_linear", "standard", "none"}, \
            default="quantile_normal"
        Encoding of the numeric columns (``encoder_``): a quantile transform
        to a standard normal, robust to any scale and shape; the
        piecewise-linear basis on ``n_bins + 1`` quantile knots (Gorishniy et
        al., 2022), better on large data with sharp thresholds but overfitting
        small data; ``(x - mean) / std``; or the values as given (the paper's
        protocol). Missing values are accepted (zeros plus a missing
        indicator). See :class:`TabularEncoder` and :ref:`encoding_and_training`.
    n_bins : int, default=16
        Quantile bins of ``"piecewise_linear"``.
    categorical_features : "from_dtype", None, or array-like, default="from_dtype"
        Categorical columns (indices, a boolean mask or names), one-hot
        encoded, as in :class:`~sklearn.ensemble.HistGradientBoostingClassifier`;
        ``"from_dtype"``: the pandas ``category``, string and object columns
        (and NumPy object columns) holding strings. An unseen category is
        encoded as an infrequent one, or as zeros.
    max_categories : int, default=32
        Most frequent categories of a column that get their own feature; the
        others share one "infrequent" feature.
    lr_schedule : {"cosine", "constant"}, default="cosine"
        Learning rate over the ``max_epochs`` of a fit, per minibatch: a
        cosine decay from ``learning_rate`` to zero, or constant.
    warmup_fraction : float in [0, 1), default=0.01
        Fraction of the steps of a fit with a linear warm-up of the
        learning rate before the schedule. The default's 1.5 epochs (of
        150) keep the first steps at 3e-2 from overshooting (a training loss
        of up to 4 in epoch 1 without it); see :ref:`encoding_and_training`.
    averaging : {"ema", "swa"} or None, default="ema"
        Weight averaging; the average is the fitted model (and what early
        stopping evaluates): ``"ema"``, a moving average with decay
        ``ema_decay`` per step (less in the first steps); ``"swa"``, the mean
        of the epoch-end weights of the second half; None, the last weights.
    ema_decay : float in (0, 1), default=0.995
        Decay per step of ``averaging="ema"``.
    max_features : {"sqrt", "log2"}, int, float or None, default=0.5
        Input columns each tree may split on, drawn per tree (None: all). The
        other columns' split weights are zero and stay zero in training; a
        merge unites the subsets of matched trees. With the teacher, a
        fraction counts the effective number of columns its gains spread over
        (see ``feature_selection``); without, all of them, as in
        :class:`~sklearn.ensemble.RandomForestClassifier`.
    feature_selection : {"auto", "uniform"}, default="auto"
        How the trees' columns are drawn. ``"auto"``: with the teacher
        (``teacher_weight > 0``), in proportion to the gains of its splits,
        so that columns it never splits on are never drawn, and the additive
        term keeps only its most useful columns; this is what makes wide and
        noisy data work (:ref:`encoding_and_training`). ``"uniform"``: every
        column alike.
    scoring : str, callable or None, default="loss"
        What early stopping monitors on the validation rows, as in
        HistGradientBoosting: ``"loss"``, a scorer name (``"accuracy"``, ...),
        a callable ``scorer(estimator, X, y)``, or None for :meth:`score`.
    additive_bins : int >= 2, sequence of int or None, default=(16, 64, 256, 1024, 4096)
        A learned additive term added to the trees' output (a generalized
        additive model, ``tree_params_.additive``): each numeric column cut
        into this many quantile bins (each count in [2, 65536]), each
        categorical column into its categories, missing values in a bin of
        their own. A sequence learns one table per resolution, summed: coarse
        bins for smooth effects, fine ones for sharp steps and columns such
        as time stamps. Symmetry ops keep the table and merging averages it.
        None: no term; on wide data ``(16, 64, 256)`` is smaller and faster.
        See :ref:`encoding_and_training`.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the loss, multiplying ``sample_weight``, as
        in scikit-learn's classifiers (a dict of label to weight, missing
        classes 1; ``"balanced"``: ``n_samples / (n_classes * count)``).
    label_smoothing : float in [0, 1) or "auto", default="auto"
        Label smoothing of the cross-entropy: the targets are mixed with the
        uniform distribution at this weight. ``"auto"``: 0.02 on a fit that
        ``early_stopping="auto"`` runs without early stopping (small data,
        where nothing else stops the model from fitting its training rows with
        certainty), else 0 (``label_smoothing_`` says which). See
        :ref:`encoding_and_training`.
    teacher_weight : float in [0, 1), default=0.75
        Distillation: before training, gradient boosting grows a teacher of
        ``n_estimators`` oblivious trees of ``depth`` on the training rows,
        and their targets become ``(1 - teacher_weight) * one-hot label +
        teacher_weight * the teacher's probabilities`` (the validation rows
        keep their labels). The model, its symmetries and merging are
        unchanged; it gains accuracy at a longer fit. 0: the labels alone.
        Ignored by ``partial_fit``. See :ref:`encoding_and_training`.
    n_members : int, default=1
        Train the trees as ``n_members`` members (at most ``n_estimators``),
        each on its own loss as a whole model, as in TabM (Gorishniy et al.,
        2024); tree ``t`` belongs to member ``t * n_members // n_estimators``.
        Only the training loss changes. 1 by default: more members helped
        one benchmark dataset only (``docs/benchmarks.md``, "Members").
    encoder : TabularEncoder or None, default=None
        A fitted input encoding to use instead of fitting one (for example
        ``TabularEncoder.from_summaries`` of several sites): models with the
        same encoder see the same features, and merge. ``numeric_encoding``,
        ``n_bins``, ``categorical_features``, ``max_categories`` and
        ``additive_bins`` are then unused. It must match ``X``'s columns.
        ``fit`` keeps a deep copy as ``encoder_``: refitting the object given
        later does not change the fitted model.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when ``X`` has string column names.
    encoder_ : TabularEncoder
        The fitted input encoding (``encoder_.feature_groups_[f]`` is the
        input column of encoded feature ``f``).
    n_outputs_ : int
        Number of outputs per leaf (the number of classes).
    architecture_ : TreeArchitecture
        The architecture table (routing code, symmetry group).
    tree_params_ : TreeParams
        Fitted parameters as CPU NumPy arrays; see :meth:`get_tree_params`.
    device_ : str
        Device used for fitting.
    loss_curve_ : list of float
        Mean training loss per epoch (of the members with ``n_members > 1``).
    validation_loss_curve_ : list of float or None
        Validation loss per epoch when the fit early-stopped, else None.
    do_early_stopping_ : bool
        Whether the last fit early-stopped (``early_stopping="auto"`` decided).
    label_smoothing_ : float
        The label smoothing of the last fit (``label_smoothing="auto"``
        decided).
    n_iter_ : int
        Epochs run by the last call to :meth:`fit`.
    best_epoch_ : int
        The epoch whose parameters were kept (1-based; 0 when none beat the
        start of ``split_init="boosting"``).
    validation_score_ : list of float or None
        Validation score per epoch when ``early_stopping=True``, in the sense
        of ``scoring`` (higher is better; the negated loss for ``"loss"``).
    n_epochs_ : int
        Number of epochs run (over all warm-started fits).
    optimizer_state_ : dict or None
        Adam's state (``step``, and the moments as :class:`TreeParams`) after
        the last fit when ``warm_start=True``, else None.
    teacher_ : list of tuple or None
        The gradient-boosted teacher(s) of ``teacher_weight > 0`` (arrays on
        the encoded features; a merged model holds its models' teachers), kept
        so that :func:`refit_leaves` solves the objective the model was
        trained on. Not used in prediction. None without a teacher.

    See Also
    --------
    SoftTreeEnsembleRegressor : The same model for regression.
    merge_estimators : Align and average two fitted ensembles.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> clf = SoftTreeEnsembleClassifier(
    ...     arch="decision_list_modified", n_estimators=16, max_epochs=30,
    ...     device="cpu", random_state=0).fit(X, y)
    >>> clf.predict(X[:3]).shape
    (3,)
    >>> bool(clf.score(X, y) > 0.8)
    True
    """

    _parameter_constraints: dict = {
        **_BaseSoftTreeEnsemble._parameter_constraints,
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "label_smoothing": [_NumberInterval(Real, 0, 1, closed="left"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        arch="oblivious",
        n_estimators=256,
        depth=4,
        leaf_init="ensemble",
        split_init="fan_in",
        learning_rate=3e-2,
        batch_size=512,
        max_epochs=150,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change=10,
        tol=1e-4,
        warm_start=False,
        device="auto",
        random_state=None,
        verbose=0,
        n_threads=1,
        numeric_encoding="quantile_normal",
        n_bins=16,
        categorical_features="from_dtype",
        max_categories=32,
        lr_schedule="cosine",
        warmup_fraction=0.01,
        averaging="ema",
        ema_decay=0.995,
        max_features=0.5,
        feature_selection="auto",
        scoring="loss",
        additive_bins=(16, 64, 256, 1024, 4096),
        class_weight=None,
        label_smoothing="auto",
        teacher_weight=0.75,
        n_members=1,
        encoder=None,
    ):
        super().__init__(
            arch=arch, n_estimators=n_estimators, depth=depth, leaf_init=leaf_init,
            split_init=split_init, learning_rate=learning_rate, batch_size=batch_size,
            max_epochs=max_epochs, early_stopping=early_stopping,
            validation_fraction=validation_fraction, n_iter_no_change=n_iter_no_change, tol=tol,
            warm_start=warm_start, device=device, random_state=random_state, verbose=verbose,
            n_threads=n_threads, numeric_encoding=numeric_encoding, n_bins=n_bins,
            categorical_features=categorical_features, max_categories=max_categories,
            lr_schedule=lr_schedule, warmup_fraction=warmup_fraction, averaging=averaging,
            ema_decay=ema_decay, max_features=max_features,
            feature_selection=feature_selection, scoring=scoring,
            additive_bins=additive_bins, teacher_weight=teacher_weight, n_members=n_members,
            encoder=encoder,
        )
        self.class_weight = class_weight
        self.label_smoothing = label_smoothing

    def _target_weights(self, y):
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

    def _validation_target_weights(self, y, y_val):
        """``class_weight`` of the validation rows: each class weighs what it
        weighs in the training rows ``y`` (``"balanced"`` counts ``y``)."""
        if self.class_weight is None:
            return 1.0
        per_class = np.ones(len(self.classes_))
        per_class[self._fitted_targets(y)] = self._target_weights(y)
        return per_class[self._fitted_targets(y_val)]

    def _encode_targets(self, y, sample_weight, warm=False, classes=None):
        check_classification_targets(y)
        partial = classes  # partial_fit's labels of the stream: y may hold any subset
        if partial is not None and not warm:  # the first partial_fit: classes= given
            self.classes_ = partial
            return self._fitted_targets(y), len(self.classes_)
        if warm and partial is not None:  # later partial_fit calls: any subset
            return self._fitted_targets(y), len(self.classes_)
        if warm:
            classes, encoded = np.unique(y, return_inverse=True)
            if not np.array_equal(classes, self.classes_):
                raise ValueError(
                    "warm_start=True needs y to have the classes of the previous fit, "
                    f"{self.classes_.tolist()}; got {classes.tolist()}."
                )
            return np.asarray(encoded, dtype=np.int64), len(self.classes_)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                "Classifier can't train when only one class is present: "
                f"y contains only the class {self.classes_[0]!r}."
            )
        weighted = np.unique(encoded[np.asarray(sample_weight) > 0])
        if len(weighted) < 2:
            raise ValueError(
                "Classifier can't train when only one class has a positive sample_weight "
                f"(times class_weight): only the class {self.classes_[weighted[0]]!r} has."
            )
        return np.asarray(encoded, dtype=np.int64), len(self.classes_)

    def _fitted_targets(self, y):
        """Class indices into ``classes_``; labels the model was not fitted on
        are an error (any subset of ``classes_`` is fine)."""
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be one-dimensional for a classifier, got shape {y.shape}.")
        idx = np.clip(np.searchsorted(self.classes_, y), 0, len(self.classes_) - 1)
        unknown = self.classes_[idx] != y
        if np.any(unknown):
            raise ValueError(
                f"y contains labels the estimator was not fitted on: "
                f"{np.unique(y[unknown])[:5].tolist()}; classes_ is {self.classes_.tolist()}."
            )
        return idx.astype(np.int64)

    def _check_y(self, y, name="y", training=True):
        return _check_y(y, estimator=self)

    def _refit_targets(self, X, y):
        """The targets ``refit_leaves`` fits the leaves to: the labels, mixed
        with the teachers' probabilities as in training when the model has
        teachers (``teacher_``; the mean of their probabilities for a merge
        of models with different teachers), so that the refit solves the
        objective the model was trained on."""
        target = self._fitted_targets(y)
        teachers = self.teacher_
        if not teachers or not self.teacher_weight > 0:
            return target
        self._check_teachers(teachers)
        Xe = np.asarray(X[:, : self.encoder_.n_features_out_], dtype=np.float64)
        loss = self._loss
        probs = np.mean([loss.teacher_targets(oblivious_output(Xe, *t)) for t in teachers],
                        axis=0)
        return loss.mix(target, probs, slice(None), self.teacher_weight, self.n_outputs_)

    #: The fitted state a pickled classifier must hold (checked when loaded).
    _required_fitted_attrs = ("tree_params_", "architecture_", "encoder_", "n_features_in_",
                              "n_outputs_", "classes_")

    def _check_teachers(self, teachers):
        """Raise a ``ValueError`` naming ``teacher_`` when a teacher does not
        describe this model (modified, or of another model): ``(base,
        features, thresholds, leaves)`` of oblivious trees on the encoded
        features, with ``n_outputs_`` outputs."""
        n_out, n_features = self.n_outputs_, self.encoder_.n_features_out_
        for i, teacher in enumerate(teachers):
            if not isinstance(teacher, (tuple, list)) or len(teacher) != 4:
                raise ValueError(f"teacher_[{i}] must be a tuple (base, features, thresholds, "
                                 "leaves) of the model's boosted trees; it was modified.")
            base, features, thresholds, leaves = (np.asarray(a) for a in teacher)
            if base.shape != (n_out,) or leaves.ndim != 3 or leaves.shape[2] != n_out:
                raise ValueError(
                    f"teacher_[{i}] has base of shape {base.shape} and leaves of shape "
                    f"{leaves.shape}, but the model has n_outputs_={n_out} outputs: teacher_ "
                    "was modified or comes from another model.")
            if (features.ndim != 2 or thresholds.shape != features.shape
                    or leaves.shape[:2] != (features.shape[0], 2 ** features.shape[1])):
                raise ValueError(
                    f"teacher_[{i}]'s features {features.shape}, thresholds {thresholds.shape} "
                    f"and leaves {leaves.shape} do not describe oblivious trees (trees, depth), "
                    "(trees, depth), (trees, 2**depth, outputs): teacher_ was modified.")
            if features.size and not (0 <= features.min() and features.max() < n_features):
                raise ValueError(
                    f"teacher_[{i}] splits on features outside the model's {n_features} encoded "
                    "features: teacher_ was modified or comes from another model.")

    @property
    def _loss(self):
        return CrossEntropy(self._label_smoothing())

    def _label_smoothing(self):
        """The label smoothing of the loss: ``label_smoothing``, or for
        ``"auto"`` what the last fit decided (``label_smoothing_``; 0 before
        a fit)."""
        if self.label_smoothing != "auto":
            return float(self.label_smoothing)
        return float(getattr(self, "label_smoothing_", 0.0))

    def _note_recipe(self, recipe):
        super()._note_recipe(recipe)
        self.label_smoothing_ = float(recipe.label_smoothing)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over the given rows, continuing from the previous calls.

        For out-of-core and streaming training (e.g. dask-ml's
        ``Incremental``), as scikit-learn's ``SGDClassifier.partial_fit``: each
        call runs one epoch of Adam over ``X`` in minibatches of
        ``batch_size``, keeping the parameters and Adam's state between calls;
        ``n_iter_`` counts the calls (one pass each). The first call
        initializes the trees and needs ``classes``, all the labels of the
        stream. The learning rate is constant and there is no weight
        averaging nor early stopping in ``partial_fit`` (``lr_schedule``,
        ``averaging`` and ``early_stopping`` apply to :meth:`fit`): a stream
        has no end to decay towards nor a fixed set of rows to validate on.
        Each step takes ``learning_rate``; a lower one gives steadier
        accuracy from pass to pass at a slower start, and several passes
        stay short of one :meth:`fit` on the same rows (see
        ``docs/benchmarks.md``, "partial_fit on a stream"). After a
        :meth:`fit`, whose schedule ended near a zero rate, a ``partial_fit``
        at the full rate first moves the model away from the fitted
        optimum: lower ``learning_rate`` (``set_params``) to fine-tune.

        The input encoding is fitted on the rows of the first call and kept
        for the whole stream, with a ``UserWarning``: quantiles, categories
        and missing values that the first chunk lacks are not represented
        (a column whose missing values only appear later gets no missing
        indicator). To avoid it, fit the encoding beforehand on rows that
        represent the stream and pass it: ``encoder=TabularEncoder(...)
        .fit(sample_of_rows)``, or ``TabularEncoder.from_summaries`` of
        summaries of several chunks; there is no warning then.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, n_features)
            A batch of rows.
        y : array-like of shape (n_samples,)
            Their labels, among ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every label of the stream; required on the first call, and equal
            to the first call's when given later.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights.

        Returns
        -------
        self : object
            The estimator.
        """
        if not hasattr(self, "tree_params_") and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit.")
        return self._partial_fit(X, y, sample_weight=sample_weight, classes=classes)

    @_lazy_on_dask
    def decision_function(self, X):
        """Raw ensemble scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes the logit of ``classes_[1]`` against
            ``classes_[0]``, else one score per class. For a dask array or
            DataFrame ``X``, a lazy dask array (see :meth:`predict`).
        """
        out = self._scores(X)
        if out.shape[1] == 2:
            return out[:, 1] - out[:, 0]
        return out

    @_lazy_on_dask
    def predict_proba(self, X):
        """Class probabilities ``softmax(sum of trees)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities, columns ordered as ``classes_``. For a dask array
            or DataFrame ``X``, a lazy dask array (see :meth:`predict`).
        """
        return softmax(self._scores(X), axis=1)

    @_lazy_on_dask
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Log-probabilities, columns ordered as ``classes_``.
        """
        return log_softmax(self._scores(X), axis=1)

    @_lazy_on_dask
    def predict(self, X):
        """Predict class labels (elements of ``classes_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array or DataFrame
            Input samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or dask array
            Predicted labels. For a dask array or DataFrame ``X``, a lazy
            dask array computed partition by partition on the workers that
            hold them (``map_blocks`` / ``map_partitions``, as dask-ml's
            ``ParallelPostFit``); ``.compute()`` gives the labels.
        """
        scores = self._scores(X)
        return self.classes_[np.argmax(scores, axis=1)]

    def _scores(self, X):
        """The logits up to a shift per row, what softmax, argmax and the
        decision function read: for two classes ``[0, l_1 - l_0]``, from one
        row of the kernel's contraction instead of two (``contrast``)."""
        check_is_fitted(self, "tree_params_")
        return self._predict_in_chunks(X, "forward", contrast=self.n_outputs_ == 2)

    _centered_outputs = True

    def _prediction_meta(self, method):
        if method == "predict":
            return np.empty((0,), dtype=self.classes_.dtype)
        if method == "decision_function" and self.n_outputs_ == 2:
            return np.empty((0,))
        return np.empty((0, self.n_outputs_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


#: The regressor's ``loss`` values, and the names of their loss objects.
_REGRESSION_LOSSES = {"squared_error": "squared", "absolute_error": "absolute_error",
                      "quantile": "quantile", "poisson": "poisson", "gamma": "gamma"}


class SoftTreeEnsembleRegressor(RegressorMixin, _BaseSoftTreeEnsemble):
    """Soft (differentiable) tree ensemble regressor trained with PyTorch.

    The same model as :class:`SoftTreeEnsembleClassifier`, trained with Adam on
    ``loss`` (the squared error by default). Targets are standardized
    internally (``y_mean_``, ``y_scale_``, weighted by ``sample_weight``) so
    that the default learning rate suits any target scale; predictions are
    returned in the original units.

    Parameters
    ----------
    arch : {"oblivious", "non_oblivious", "decision_list", "decision_list_modified"}, \
            default="oblivious"
        Tree architecture, see :class:`SoftTreeEnsembleClassifier`.
    n_estimators : int, default=256
        Number of trees ``M``.
    depth : int, default=4
        Tree depth ``D``.
    leaf_init : {"ensemble", "tree"}, default="ensemble"
        Scale of the leaf-value initialization, see
        :class:`SoftTreeEnsembleClassifier`.
    split_init : "fan_in", "data", "boosting" or float, default="fan_in"
        How the splits start: the uniform initialization (``1/sqrt(F)`` for
        ``"fan_in"``), for half of them sharp thresholds at the data's
        values (``"data"``), or gradient-boosted trees on the squared error
        (``"boosting"``), see :class:`SoftTreeEnsembleClassifier`.
    learning_rate : float, default=1e-2
        Adam learning rate (the peak of ``lr_schedule``). Lower than the
        classifier's: without a teacher a larger step gains little and costs
        small data (``docs/benchmarks.md``, "Regression").
    batch_size : int, default=512
        Minibatch size.
    max_epochs : int, default=150
        Most passes over the training data (the schedule spans them).
    early_stopping : "auto" or bool, default="auto"
        Stop on a held-out validation fraction or ``X_val``; ``"auto"``: on
        with ``X_val`` or above 3,000 training rows. See the classifier.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping (without ``X_val``).
    n_iter_no_change : int, default=10
        Patience of early stopping, in epochs.
    tol : float, default=1e-4
        Minimum validation-loss improvement for early stopping.
    warm_start : bool, default=False
        Continue from the fitted parameters (and Adam state), keeping the
        target standardization; see :class:`SoftTreeEnsembleClassifier`.
    device : str or torch.device, default="auto"
        Torch device; ``"auto"`` uses CUDA when available.
    random_state : int, RandomState instance or None, default=None
        Seeds a per-fit :class:`torch.Generator`.
    verbose : int, default=0
        Progress display level.
    n_threads : int or None, default=1
        Torch intra-op threads inside ``fit`` and prediction, see
        :class:`SoftTreeEnsembleClassifier`.
    numeric_encoding : {"quantile_normal", "piecewise_linear", "standard", "none"}, \
            default="quantile_normal"
        Encoding of the numeric columns, fitted in ``fit`` (``encoder_``); missing
        values are accepted. See :class:`SoftTreeEnsembleClassifier`.
    n_bins : int, default=16
        Quantile bins of ``"piecewise_linear"``.
    categorical_features : "from_dtype", None, or array-like, default="from_dtype"
        Categorical columns, one-hot encoded (as in HistGradientBoosting).
    max_categories : int, default=32
        Most frequent categories of a column with their own feature.
    lr_schedule : {"cosine", "constant"}, default="cosine"
        Learning-rate schedule over the ``max_epochs`` of a fit.
    warmup_fraction : float in [0, 1), default=0.0
        Fraction of the steps with a linear warm-up of the learning rate.
    averaging : {"ema", "swa"} or None, default="ema"
        Weight averaging; the averaged weights are the fitted model.
    ema_decay : float in (0, 1), default=0.995
        Decay per step of ``averaging="ema"``.
    max_features : {"sqrt", "log2"}, int, float or None, default=0.5
        Input columns each tree may split on (exact zeros in the split
        weights, kept by alignment and merging).
    feature_selection : {"auto", "uniform"}, default="auto"
        ``"auto"``: with a teacher (``teacher_weight > 0``), columns drawn by
        its gains; see :class:`SoftTreeEnsembleClassifier`.
    scoring : str, callable or None, default="loss"
        What early stopping monitors (``"loss"``, a scorer, None for
        :meth:`score`), as in HistGradientBoosting.
    additive_bins : int >= 2, sequence of int or None, default=(16, 64, 256, 1024, 4096)
        Quantile bins per numeric column of a learned additive term added to
        the trees' output (in standardized target units), or one table per
        resolution of a sequence; None: none. See
        :class:`SoftTreeEnsembleClassifier`.
    teacher_weight : float in [0, 1), default=0.0
        Distillation from gradient-boosted trees grown on the training rows:
        their standardized targets become ``(1 - teacher_weight) * target +
        teacher_weight * the teacher's prediction``; see
        :class:`SoftTreeEnsembleClassifier`. 0 by default: a target already
        carries its value, and the teacher only smooths it.
    n_members : int, default=1
        Train the trees as ``n_members`` members, each on its own loss as a
        whole model; the fitted model is still the sum of all trees. See
        :class:`SoftTreeEnsembleClassifier`.
    encoder : TabularEncoder or None, default=None
        A fitted input encoding to use instead of fitting one in ``fit``, so
        that models see the same features and merge (``fit`` keeps a deep
        copy as ``encoder_``); see :class:`SoftTreeEnsembleClassifier`.
    loss : {"squared_error", "absolute_error", "quantile", "poisson", "gamma"}, \
            default="squared_error"
        The training loss, as HistGradientBoostingRegressor's, averaged over
        the outputs: the squared error (the conditional mean); the absolute
        error (the conditional median, robust to outliers in ``y``); the
        pinball loss of ``quantile``; or the half Poisson or Gamma deviance
        with the log link (the prediction is ``exp`` of the raw output; for
        counts and rates, ``y >= 0``, or positive skewed amounts, ``y > 0``).
        The targets are standardized by their weighted mean and standard
        deviation, their median and mean absolute deviation (absolute error,
        quantile), or divided by their weighted mean (log link). The
        teacher's boosting, the validation loss of early stopping and
        :func:`refit_leaves` use the same loss; only models of the same loss
        merge.
    quantile : float in (0, 1) or None, default=None
        The quantile ``loss="quantile"`` estimates (required with it, unused
        otherwise).

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when ``X`` has string column names.
    encoder_ : TabularEncoder
        The fitted input encoding (``encoder_.feature_groups_[f]`` is the
        input column of encoded feature ``f``).
    n_outputs_ : int
        Number of regression targets.
    y_mean_, y_scale_ : ndarray of shape (`n_outputs_`,)
        Target standardization.
    architecture_ : TreeArchitecture
        The architecture table.
    tree_params_ : TreeParams
        Fitted parameters as CPU NumPy arrays.
    device_ : str
        Device used for fitting.
    loss_curve_ : list of float
        Mean training loss per epoch (standardized units; with
        ``n_members > 1``, the mean of the members' losses).
    validation_loss_curve_ : list of float or None
        Validation loss per epoch when the fit early-stopped, else None.
    do_early_stopping_ : bool
        Whether the last fit early-stopped (``early_stopping="auto"`` decided).
    n_iter_ : int
        Epochs run by the last call to :meth:`fit`.
    best_epoch_ : int
        The epoch whose parameters were kept (1-based; 0 when none beat the
        start of ``split_init="boosting"``).
    validation_score_ : list of float or None
        Validation score per epoch when ``early_stopping=True``, in the sense
        of ``scoring`` (higher is better; the negated loss for ``"loss"``).
    n_epochs_ : int
        Number of epochs run (over all warm-started fits).
    optimizer_state_ : dict or None
        Adam's state after the last fit when ``warm_start=True``, else None.
    teacher_ : list of tuple or None
        The gradient-boosted teacher of ``teacher_weight > 0``, in the
        standardized target units of this fit (see
        :class:`SoftTreeEnsembleClassifier`); None without a teacher.
        :func:`refit_leaves` of a regressor refits to the targets alone.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sktree_lmc import SoftTreeEnsembleRegressor
    >>> X, y = make_regression(n_samples=300, n_features=5, random_state=0)
    >>> reg = SoftTreeEnsembleRegressor(n_estimators=16, max_epochs=20,
    ...                                 device="cpu", random_state=0).fit(X, y)
    >>> reg.predict(X[:2]).shape
    (2,)
    """


    #: Private fitted state (besides the public ``*_`` attributes), copied
    #: into estimators built from parameters (see ``_bridge.with_params``).
    _fitted_private_attrs = ("_y_1d", "_fitted_loss")
    #: The fitted state a pickled regressor must hold (checked when loaded).
    _required_fitted_attrs = ("tree_params_", "architecture_", "encoder_", "n_features_in_",
                              "n_outputs_", "y_mean_", "y_scale_")

    def _check_scoring(self):
        """Also refuse, before any training, a scorer that does not apply to
        regression targets (``"accuracy"``, ``"roc_auc"``, ...): it is tried
        on a constant regressor's predictions of two real targets."""
        super()._check_scoring()
        if not isinstance(self.scoring, str) or self.scoring == "loss":
            return
        X, y = np.zeros((2, 1)), np.array([0.5, 1.5])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                get_scorer(self.scoring)(DummyRegressor().fit(X, y), X, y)
        except Exception:  # noqa: BLE001 - any failure: not a regression scorer
            raise ValueError(
                f"scoring={self.scoring!r} does not apply to a regressor: it is a "
                "classification metric, for classifiers. Use scoring='loss' or a regression "
                "scorer, such as 'r2' or 'neg_mean_squared_error'."
            ) from None

    def _check_warm_loss(self):
        fitted = getattr(self, "_fitted_loss", None)  # None: fitted before it was recorded
        if fitted is not None and fitted != self.loss:
            raise ValueError(
                "warm_start=True (and partial_fit) continues from the fitted parameters, but "
                f"loss changed from {fitted!r} to {self.loss!r}: the fitted leaves and target "
                f"scale are those of loss={fitted!r}. Set loss={fitted!r} back, or fit a new "
                "model (warm_start=False, or fit instead of partial_fit)."
            )

    def _check_y(self, y, name="y", training=True):
        y = _check_y(y, multi_output=True, y_numeric=True, estimator=self)
        _check_float32_range(np.asarray(y, dtype=np.float64), name)
        y2 = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        if training:
            self._loss.check_target(y2, name)
        else:
            self._loss.check_domain(y2, name)
        return y

    def _encode_targets(self, y, sample_weight, warm=False, classes=None):
        y = np.asarray(y, dtype=np.float64)
        y2 = y.reshape(len(y), -1)
        self._fitted_loss = self.loss  # checked by the next warm fit (_check_warm_loss)
        if warm:  # keep the standardization the fitted leaves are expressed in
            if y2.shape[1] != self.n_outputs_:
                raise ValueError(
                    f"warm_start=True needs y with the {self.n_outputs_} targets of the "
                    f"previous fit; got {y2.shape[1]} targets."
                )
            return ((y2 - self.y_mean_) / self.y_scale_).astype(np.float32), y2.shape[1]
        self._y_1d = y.ndim == 1
        # y is within float32's range (checked), so in float64 neither the mean
        # nor the spread can overflow.
        w = np.asarray(sample_weight, dtype=np.float64)
        self.y_mean_, self.y_scale_ = self._loss.standardization(y2, w)
        return ((y2 - self.y_mean_) / self.y_scale_).astype(np.float32), y2.shape[1]

    def _fitted_targets(self, y):
        """Targets standardized with the fitted ``y_mean_`` and ``y_scale_``."""
        y2 = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        n_outputs = len(self.y_mean_)  # n_outputs_, also while fitting (X_val)
        if y2.shape[1] != n_outputs:
            raise ValueError(
                f"y has {y2.shape[1]} targets, but the estimator was fitted on {n_outputs}."
            )
        return (y2 - self.y_mean_) / self.y_scale_

    def _shared_trees(self, trees):
        """The shards' shared trees are grown on the targets in their own
        units (each shard standardizes its targets with its own mean and
        scale): here in this fit's standardized units."""
        if trees is None:
            return None
        base, features, thresholds, leaves = trees
        base, leaves = self._loss.link.standardized_trees(base, leaves, self.y_mean_,
                                                          self.y_scale_)
        return base, features, thresholds, leaves

    def _shared_units(self, target):
        """Standardized targets back in the targets' own units (for the
        shared trees)."""
        return np.asarray(target, dtype=np.float64) * self.y_scale_ + self.y_mean_

    _parameter_constraints: dict = {
        **_BaseSoftTreeEnsemble._parameter_constraints,
        "loss": [StrOptions(set(_REGRESSION_LOSSES))],
        "quantile": [_NumberInterval(Real, 0, 1, closed="neither"), None],
    }

    def __init__(
        self,
        arch="oblivious",
        n_estimators=256,
        depth=4,
        leaf_init="ensemble",
        split_init="fan_in",
        learning_rate=1e-2,
        batch_size=512,
        max_epochs=150,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change=10,
        tol=1e-4,
        warm_start=False,
        device="auto",
        random_state=None,
        verbose=0,
        n_threads=1,
        numeric_encoding="quantile_normal",
        n_bins=16,
        categorical_features="from_dtype",
        max_categories=32,
        lr_schedule="cosine",
        warmup_fraction=0.0,
        averaging="ema",
        ema_decay=0.995,
        max_features=0.5,
        feature_selection="auto",
        scoring="loss",
        additive_bins=(16, 64, 256, 1024, 4096),
        teacher_weight=0.0,
        n_members=1,
        encoder=None,
        loss="squared_error",
        quantile=None,
    ):
        super().__init__(
            arch=arch,
            n_estimators=n_estimators,
            depth=depth,
            leaf_init=leaf_init,
            split_init=split_init,
            learning_rate=learning_rate,
            batch_size=batch_size,
            max_epochs=max_epochs,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            warm_start=warm_start,
            device=device,
            random_state=random_state,
            verbose=verbose,
            n_threads=n_threads,
            numeric_encoding=numeric_encoding,
            n_bins=n_bins,
            categorical_features=categorical_features,
            max_categories=max_categories,
            lr_schedule=lr_schedule,
            warmup_fraction=warmup_fraction,
            averaging=averaging,
            ema_decay=ema_decay,
            max_features=max_features,
            feature_selection=feature_selection,
            scoring=scoring,
            additive_bins=additive_bins,
            teacher_weight=teacher_weight,
            n_members=n_members,
            encoder=encoder,
        )
        self.loss = loss
        self.quantile = quantile

    @property
    def _loss(self):
        if self.loss == "quantile":
            if self.quantile is None:
                raise ValueError("loss='quantile' needs the quantile parameter (in (0, 1)), "
                                 "for example quantile=0.9.")
            return Quantile(self.quantile)
        return LOSSES[_REGRESSION_LOSSES[self.loss]]()

    def partial_fit(self, X, y, sample_weight=None):
        """One pass over the given rows, continuing from the previous calls.

        See :meth:`SoftTreeEnsembleClassifier.partial_fit`: one epoch of Adam
        per call, the parameters and Adam's state kept between calls,
        ``n_iter_`` counting the calls; the first call fits the target
        standardization on its rows, and the input encoding too (with a
        ``UserWarning``) unless ``encoder=`` is given. Constant learning rate,
        no averaging nor early stopping.

        Parameters
        ----------
        X : array-like or pandas DataFrame of shape (n_samples, n_features)
            A batch of rows.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Their targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights.

        Returns
        -------
        self : object
            The estimator.
        """
        return self._partial_fit(X, y, sample_weight=sample_weight)

    @_lazy_on_dask
    def predict(self, X):
        """Predict regression targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array or DataFrame
            Input samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs), or dask array
            Predictions in the units of ``y``. For a dask array or DataFrame
            ``X``, a lazy dask array computed partition by partition (see
            :meth:`SoftTreeEnsembleClassifier.predict`).
        """
        out = self._loss.link.inverse(self._raw_output(X)) * self.y_scale_ + self.y_mean_
        return out[:, 0] if self._y_1d else out

    def _prediction_meta(self, method):
        return np.empty((0,) if self._y_1d else (0, self.n_outputs_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

"""scikit-learn estimators: soft tree ensembles trained with PyTorch."""

from __future__ import annotations

import copy
import dataclasses
import functools
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from scipy.special import log_softmax, softmax
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    _fit_context,
    is_classifier,
)
from sklearn.dummy import DummyRegressor
from sklearn.metrics import check_scoring, get_scorer
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from ._persistence import estimator_state, restore_estimator_state
from ._validation import (
    _MAX_SCALE,
    _check_classes,
    _check_score,
    _NumberInterval,
    _torch_seed,
    check_encoded,
    encoded_input,
    check_warm_start,
    fit_rows,
    split_rows,
    input_columns,
)
from .encoding._encoding import NUMERIC_ENCODINGS, TabularEncoder
from .model._architectures import ARCHITECTURES, check_model_size, get_architecture
from .model._forward import SoftTreeEnsembleModule, predict_chunked, used_features
from .model._params import TreeParams, check_same_additive
from .training._fit import FitHistory, FitSettings, FitState, encoding_note, run_fit
from .training._objective import REGRESSION_LOSSES, objective_from_params
from .training._plan import FitPlan, Recipe, Validation, n_classes_of
from .training._training import (
    AVERAGING,
    LR_SCHEDULES,
    _user_stacklevel,
    live_code_columns,
)
from .utils._device import DEVICE_CONSTRAINT, prediction_device, resolve_device
from .utils._progress import Stopwatch
from .utils._threads import limit_threads

__all__ = ["SoftTreeEnsembleClassifier", "SoftTreeEnsembleRegressor"]


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


def _objective_attribute(name, doc):
    """A fitted attribute of an estimator that is its fitted objective's
    ``name`` (read and set through ``objective_``)."""
    def get(self):
        if "objective_" not in vars(self):
            raise AttributeError(name + "_")
        return getattr(self.objective_, name)

    def set_(self, value):
        setattr(self.objective_, name, value)

    return property(get, set_, doc=doc)


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
        "teacher_rows": [_NumberInterval(Real, 0, None, closed="left"), StrOptions({"auto"})],
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
        teacher_rows=0.0,
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
        self.teacher_rows = teacher_rows
        self.n_members = n_members
        self.encoder = encoder

    # -- hooks for subclasses ---------------------------------------------------
    def _build_objective(self):
        """The task's objective (:mod:`~sktree_lmc.training._objective`), built
        from the hyperparameters (label smoothing ``"auto"`` undecided: 0)."""
        return objective_from_params(self.get_params(deep=False),
                                     classifier=is_classifier(self),
                                     estimator_name=type(self).__name__)

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
        objective = self._build_objective()
        if warm:
            objective.continued(self.objective_)
        X_raw = X
        X, y, target, sample_weight, n_outputs, self.encoder_ = fit_rows(
            self, X, y, sample_weight, objective=objective, warm=warm, plan=plan)
        recipe = recipe.resolved(X.n_rows, plan.validation, n_classes_of(objective))
        objective.resolve(recipe)
        self.do_early_stopping_ = bool(recipe.early_stopping)
        check_model_size(self.arch, self.depth, self.n_estimators, self.encoder_.n_features_out_,
                         n_outputs)  # a clear error, with the cost, before any allocation
        generator = torch.Generator().manual_seed(
            _torch_seed(self.random_state, self.n_epochs_ if warm else 0))
        rows, scored = split_rows(self, X_raw, y, (X, target, sample_weight), generator=generator,
                                      recipe=recipe, plan=plan, objective=objective)
        state = FitState(*rows, n_outputs=n_outputs, generator=generator, recipe=recipe,
                         plan=plan, arch=get_architecture(self.arch, self.depth),
                         device=resolve_device(self.device),
                         settings=FitSettings.from_params(self.get_params(deep=False),
                                                          type(self).__name__),
                         start=(self.tree_params_, getattr(self, "optimizer_state_", None))
                         if warm else None)
        clock.lap(encoding_note(state, self.n_features_in_, self.encoder_.n_features_out_))
        self.objective_ = objective
        history = FitHistory(self.loss_curve_, self.validation_loss_curve_,
                             self.validation_score_)
        result = run_fit(state, objective, self.encoder_, history, clock=clock,
                         score_of=functools.partial(self._validation_scorer, scored, state.arch))
        self.validation_loss_curve_ = history.validation_loss_curve
        self.validation_score_ = history.validation_score
        self.n_iter_, self.best_epoch_ = result.n_iter, result.best_epoch
        self.n_epochs_ += result.n_iter
        self.tree_params_, self.optimizer_state_ = result.params, result.optimizer_state
        self.architecture_, self.device_, self.n_outputs_ = state.arch, str(state.device), n_outputs
        return self

    def _begin_fit(self, plan, recipe):
        """Whether this fit continues a fitted model (the estimator's own with
        ``warm_start``, or ``plan.start``'s, installed here); checks that the
        hyperparameters still describe it (and that validation rows of the
        user's own come with early stopping), and resets the history of a new fit."""
        if plan.validation is not None and recipe.early_stopping is False:
            raise ValueError("X_val and y_val are passed to fit while early_stopping is False. "
                             "When passing X_val and y_val to fit, set early_stopping to "
                             "'auto' or True.")
        if plan.start is not None:
            self.tree_params_ = plan.start.params.copy()
            self.optimizer_state_ = plan.start.optimizer_state
            for key, value in plan.start.target_scale.items():
                setattr(self, key, np.array(value, copy=True))
        self._check_scoring()
        continued = plan.start is not None or (
            self.warm_start if plan.warm is None else plan.warm)
        warm = check_warm_start(self, continued, plan)
        if self.n_members > self.n_estimators:
            raise ValueError(f"n_members={self.n_members} is more than n_estimators="
                             f"{self.n_estimators}: every member needs a tree.")
        if not warm:
            self.loss_curve_, self.n_epochs_ = [], 0
            self.validation_loss_curve_ = self.validation_score_ = None
        return warm

    @property
    def teacher_(self):
        """The gradient-boosted teachers of the fitted objective, or None.

        See the subclasses' attributes.
        """
        if "objective_" not in vars(self):
            raise AttributeError("teacher_")
        return self.objective_.teachers

    @teacher_.setter
    def teacher_(self, value):
        self.objective_.teachers = value

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

    def _check_scoring(self):
        """Raise a ``ValueError`` naming ``scoring`` for a scorer name that
        scikit-learn does not know, before any training."""
        if isinstance(self.scoring, str) and self.scoring != "loss":
            try:
                get_scorer(self.scoring)
            except ValueError as exc:
                raise ValueError(f"scoring={self.scoring!r}: {exc}") from None

    # -- input --------------------------------------------------------------------
    def _input_columns(self, X):
        """Validate prediction input against the fit (see :func:`input_columns`)."""
        return input_columns(self, X)

    def _encoded_input(self, X):
        """``X`` validated and encoded (see :func:`encoded_input`)."""
        return encoded_input(self, X)

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
        columns = input_columns(self, X)
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
            outs.append(predict_chunked(module, check_encoded(chunk), output=method,
                                        codes=codes, features=features, contrast=contrast))
        return np.concatenate(outs, axis=0)

    def _prediction_model(self):
        """The fitted model that predicts (see :func:`_lazy_on_dask`)."""
        return self

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
        HistGradientBoosting: on with ``X_val``, or above 3,000 training rows
        (10,000 with more than two classes, HistGradientBoosting's threshold:
        there the validation log-loss chose an epoch before the schedule's
        end, less accurate than the last one); below, a tenth of the rows is
        too few to choose an epoch, and all ``max_epochs`` run on every row
        (``do_early_stopping_`` says which).
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
        Largest decay per step of ``averaging="ema"``: step ``t`` decays by
        ``min(ema_decay, (1 + t) / (10 + t))``, so ``ema_decay`` only takes
        over after about ``9 / (1 - ema_decay)`` steps (1,790 at 0.995); a
        shorter fit averages over about the last tenth of its steps,
        whatever ``ema_decay``.
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
        ``n_estimators`` oblivious trees of ``depth`` on the training rows
        (times the number of classes, at most 4, with more than two classes:
        each tree's splits serve every class, and 256 underfitted),
        and their targets become ``(1 - teacher_weight) * one-hot label +
        teacher_weight * the teacher's probabilities`` (the validation rows
        keep their labels). The model, its symmetries and merging are
        unchanged; it gains accuracy at a longer fit. 0: the labels alone.
        Ignored by ``partial_fit``. See :ref:`encoding_and_training`.
    teacher_rows : float >= 0 or "auto", default=0.0
        Extra training rows whose targets are the teacher's probabilities
        alone, as a multiple of the training rows: drawn from the fitted
        encoder's joint column distribution (seeded by ``random_state``),
        weighted as the mean training row; the validation rows are never
        among them. They carry the teacher between the training rows at a
        longer fit. ``"auto"``: 3 with more than two classes, else 0.
        Ignored without a teacher (``teacher_weight=0``) and by
        ``partial_fit``. See :ref:`encoding_and_training`.
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
        teacher_rows=0.0,
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
            additive_bins=additive_bins, teacher_weight=teacher_weight,
            teacher_rows=teacher_rows, n_members=n_members, encoder=encoder,
        )
        self.class_weight = class_weight
        self.label_smoothing = label_smoothing


    @property
    def classes_(self):
        """The class labels (of the fitted objective)."""
        if "objective_" not in vars(self):
            raise AttributeError("classes_")
        return self.objective_.classes

    @property
    def label_smoothing_(self):
        """The label smoothing of the last fit (of the fitted objective)."""
        if "objective_" not in vars(self):
            raise AttributeError("label_smoothing_")
        return self.objective_.label_smoothing

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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags




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
        Largest decay per step of ``averaging="ema"``: step ``t`` decays by
        ``min(ema_decay, (1 + t) / (10 + t))``, so ``ema_decay`` only takes
        over after about ``9 / (1 - ema_decay)`` steps (1,790 at 0.995); a
        shorter fit averages over about the last tenth of its steps,
        whatever ``ema_decay``.
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
    teacher_rows : float >= 0 or "auto", default=0.0
        Extra training rows whose targets are the teacher's predictions
        alone, as a multiple of the training rows (see
        :class:`SoftTreeEnsembleClassifier`). ``"auto"``: 0 for a regressor.
        Ignored without a teacher.
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

    _parameter_constraints: dict = {
        **_BaseSoftTreeEnsemble._parameter_constraints,
        "loss": [StrOptions(set(REGRESSION_LOSSES))],
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
        teacher_rows=0.0,
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
            teacher_rows=teacher_rows,
            n_members=n_members,
            encoder=encoder,
        )
        self.loss = loss
        self.quantile = quantile


    y_mean_ = _objective_attribute("y_mean", "The target standardization's mean.")
    y_scale_ = _objective_attribute("y_scale", "The target standardization's scale.")

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
        raw = self._raw_output(X)  # checks that the model is fitted first
        return self.objective_.predictions(raw)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

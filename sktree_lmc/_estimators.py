"""scikit-learn estimators: soft tree ensembles trained with PyTorch."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import sys
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._architectures import ARCHITECTURES, TreeArchitecture, get_architecture
from ._device import DEVICE_CONSTRAINT, prediction_device, resolve_device
from ._forward import SoftTreeEnsembleModule, predict_chunked
from ._params import TreeParams
from ._threads import limit_threads

__all__ = ["SoftTreeEnsembleClassifier", "SoftTreeEnsembleRegressor"]

class _NumberInterval(Interval):
    """An :class:`~sklearn.utils._param_validation.Interval` that rejects
    booleans: ``batch_size=True`` is a mistake, not ``batch_size=1``."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Upper bound of ``learning_rate`` and ``split_init``: larger values overflow
#: float32 in Adam's first step (``learning_rate / (1 - beta1)``) or in the
#: initialization itself.
_MAX_SCALE = 1e30


def _check_float32_range(array, name):
    """Raise a ValueError if ``array`` (finite, validated) holds values that
    float32, the training precision, cannot represent (they would become
    infinite and turn every parameter into NaN)."""
    if array.size and np.abs(array).max() > _FLOAT32_MAX:
        raise ValueError(
            f"{name} contains values beyond the float32 range (largest magnitude "
            f"{np.abs(array).max():.3g} > {_FLOAT32_MAX:.3g}); the model trains in float32. "
            f"Rescale {name} first."
        )


def _torch_seed(random_state, offset=0):
    """A seed for a private :class:`torch.Generator`, without touching global state.

    An int or a ``RandomState`` instance gives a reproducible seed (sklearn's
    convention); ``None`` draws fresh entropy from the operating system rather
    than from NumPy's global generator, so that ``fit`` never advances
    ``np.random``'s state (nor torch's: only private generators are used).
    A nonzero ``offset`` (the epochs already run by a warm-started fit) mixes
    into the seed, so that a continued fit does not replay the minibatch
    order of the first one.
    """
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    rng = check_random_state(random_state)
    seed = int(rng.randint(np.iinfo(np.int32).max))
    if offset:
        seed = int(np.random.SeedSequence([seed, int(offset)]).generate_state(1)[0])
    return seed


def _export_adam_state(optimizer):
    """The state of an Adam optimizer over ``(split_weight, split_bias,
    leaf_value)`` as CPU arrays: ``{"step": int, "exp_avg": TreeParams,
    "exp_avg_sq": TreeParams}`` (None before the first step)."""
    state = optimizer.state_dict()["state"]
    if len(state) != 3:
        return None
    moments = {
        key: TreeParams(*(state[i][key].detach().cpu().numpy().copy() for i in range(3)))
        for key in ("exp_avg", "exp_avg_sq")
    }
    return {"step": int(float(state[0]["step"])), **moments}


def _load_adam_state(optimizer, state):
    """Load a state of :func:`_export_adam_state` into ``optimizer`` (whose
    hyperparameters, e.g. the learning rate, are kept)."""
    names = ("split_weight", "split_bias", "leaf_value")
    full = optimizer.state_dict()
    full["state"] = {
        i: {"step": torch.tensor(float(state["step"])),
            "exp_avg": torch.from_numpy(np.array(getattr(state["exp_avg"], name))),
            "exp_avg_sq": torch.from_numpy(np.array(getattr(state["exp_avg_sq"], name)))}
        for i, name in enumerate(names)
    }
    optimizer.load_state_dict(full)


def _params_as_dict(params):
    """A :class:`TreeParams` as a plain dict of its three arrays (for pickling)."""
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(TreeParams)}


def _as_tensor(array, dtype, device):
    """``torch.as_tensor``, copying read-only arrays (e.g. memory maps) first,
    which torch cannot share."""
    if not array.flags.writeable:
        array = np.array(array)
    return torch.as_tensor(array, dtype=dtype, device=device)


def _progress(iterable, enabled, desc):
    """Wrap ``iterable`` in a tqdm progress bar when available and enabled."""
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - optional dependency
        return iterable
    return tqdm(iterable, desc=desc, leave=False, file=sys.stderr)


def _validation_split(n_samples, validation_fraction, generator):
    """Indices ``(train_idx, val_idx)`` of the early-stopping split.

    ``validation_fraction=None`` (no early stopping) trains on every sample,
    returns ``val_idx=None`` and draws nothing from ``generator``; otherwise
    one ``randperm`` of ``generator`` picks the held-out samples.

    Raises
    ------
    ValueError
        If the held-out fraction leaves no training samples.
    """
    if validation_fraction is None:
        return np.arange(n_samples), None
    n_val = max(1, int(round(validation_fraction * n_samples)))
    if n_val >= n_samples:
        raise ValueError("validation_fraction leaves no training samples.")
    order = torch.randperm(n_samples, generator=generator).numpy()
    return order[n_val:], order[:n_val]


class _FitTensors(NamedTuple):
    """Training inputs, encoded targets and sample weights, on the fit device."""

    X: torch.Tensor
    target: torch.Tensor
    weight: torch.Tensor

    @classmethod
    def from_arrays(cls, X, target, sample_weight, device):
        return cls(
            _as_tensor(X, torch.float32, device),
            torch.as_tensor(target, device=device),
            torch.as_tensor(sample_weight, dtype=torch.float32, device=device),
        )


def _train_step(module, optimizer, loss_fn, data, idx):
    """One Adam step on the weighted mean loss of rows ``idx``; returns the loss."""
    w = data.weight[idx]
    loss = (loss_fn(module(data.X[idx]), data.target[idx]) * w).sum() / w.sum().clamp_min(1e-12)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _run_epoch(module, optimizer, loss_fn, data, train_idx, batch_size, generator):
    """One pass over ``train_idx`` in minibatches of a fresh ``generator`` order.

    Returns the mean training loss of the epoch (minibatch losses weighted by
    minibatch size).
    """
    module.train()
    device = data.X.device
    train_t = torch.as_tensor(train_idx, device=device)
    order = train_t[torch.randperm(len(train_idx), generator=generator).to(device)]
    total, count = 0.0, 0.0
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        total += _train_step(module, optimizer, loss_fn, data, idx) * len(idx)
        count += len(idx)
    return total / count


def _check_finite_epoch(module, epoch, learning_rate, loss, val_loss=None):
    """Stop the fit with a ValueError when an epoch ends with a non-finite
    training or validation loss or parameter: the optimization diverged or
    overflowed float32, and every later prediction would be NaN."""
    if not np.isfinite(loss):
        what = f"the training loss is {loss}"
    elif val_loss is not None and not np.isfinite(val_loss):
        what = f"the validation loss is {val_loss}"
    elif not all(bool(torch.isfinite(p).all()) for p in module.parameters()):
        what = "the parameters are no longer finite"
    else:
        return
    raise ValueError(
        f"Training diverged at epoch {epoch + 1}: {what}. Use a lower learning_rate "
        f"(now {learning_rate!r}), or rescale X (or y)."
    )


#: A fit whose last epoch's loss exceeds this multiple of its reference loss
#: (see :func:`_reference_loss`) has diverged: finite, but far worse than
#: where it started and than predicting nothing.
_DIVERGED_LOSS_FACTOR = 10.0


def _reference_loss(module, loss_fn, data, train_idx, batch_size, n_outputs):
    """The larger of the initial model's loss on the first ``batch_size``
    training rows and the loss of the all-zero output (uniform probabilities,
    the weighted mean target) on all of them: the reference of
    :func:`_warn_if_diverged`, computed before training, with no random draw."""
    initial = _evaluate_loss(module, loss_fn, data, train_idx[:batch_size])
    idx = torch.as_tensor(train_idx, device=data.X.device)
    w = data.weight[idx]
    zeros = data.X.new_zeros((len(idx), n_outputs))
    zero_output = float((loss_fn(zeros, data.target[idx]) * w).sum() / w.sum())
    return max(initial, zero_output)


def _warn_if_diverged(loss_curve, reference_loss, learning_rate):
    """ConvergenceWarning when training ended far worse than it started
    (finite but diverged: e.g. a learning rate orders of magnitude too high)."""
    if loss_curve and loss_curve[-1] > _DIVERGED_LOSS_FACTOR * reference_loss:
        warnings.warn(
            f"Training diverged: the last epoch's loss {loss_curve[-1]:.4g} is more than "
            f"{_DIVERGED_LOSS_FACTOR:g} times that of the initial model or of a zero output "
            f"({reference_loss:.4g}). Use a lower learning_rate (now {learning_rate!r}), "
            "or rescale X.",
            ConvergenceWarning,
            stacklevel=5,  # the caller of fit, through limit_threads and _fit_context
        )


def _evaluate_loss(module, loss_fn, data, idx):
    """Weighted mean loss of rows ``idx`` in evaluation mode, without gradients."""
    module.eval()
    idx = torch.as_tensor(idx, device=data.X.device)
    with torch.inference_mode():
        w = data.weight[idx]
        return float((loss_fn(module(data.X[idx]), data.target[idx]) * w).sum() / w.sum())


class _EarlyStopping:
    """Early-stopping state: best validation loss, its parameters, patience count.

    A validation loss counts as an improvement when it is below the best one
    by more than ``tol``; training should stop after ``patience`` epochs in a
    row without one.
    """

    def __init__(self, tol, patience):
        self.tol, self.patience = tol, patience
        self.best_loss, self.best_state, self.no_improve = np.inf, None, 0

    def update(self, val_loss, module):
        """Record one epoch's validation loss (and ``module``'s state if best)."""
        if val_loss < self.best_loss - self.tol:
            self.best_loss, self.no_improve = val_loss, 0
            self.best_state = copy.deepcopy(module.state_dict())
        else:
            self.no_improve += 1

    @property
    def should_stop(self):
        return self.no_improve >= self.patience

    def restore_best(self, module):
        """Load the parameters of the best epoch into ``module`` (if any improved)."""
        if self.best_state is not None:
            module.load_state_dict(self.best_state)


def _report_epoch(epochs, epoch, max_epochs, loss, val_loss, verbose):
    """Show one epoch's losses: on the progress bar ``epochs`` when it has one
    (``verbose=1`` with tqdm), else on stderr when ``verbose`` is set."""
    message = f"epoch {epoch + 1}/{max_epochs} loss {loss:.5f}"
    if val_loss is not None:
        message += f" val_loss {val_loss:.5f}"
    has_bar = hasattr(epochs, "set_postfix_str")
    if verbose > 1 or (verbose and not has_bar):
        print(message, file=sys.stderr)
    elif has_bar:
        epochs.set_postfix_str(message)


class _BaseSoftTreeEnsemble(BaseEstimator):
    """Shared fitting and prediction logic; see the public subclasses."""

    _parameter_constraints: dict = {
        "arch": [StrOptions(set(ARCHITECTURES))],
        "n_estimators": [_NumberInterval(Integral, 1, None, closed="left")],
        "depth": [_NumberInterval(Integral, 1, None, closed="left")],
        "leaf_init": [StrOptions({"tree", "ensemble"})],
        "split_init": [
            StrOptions({"fan_in"}), _NumberInterval(Real, 0, _MAX_SCALE, closed="right")
        ],
        "learning_rate": [_NumberInterval(Real, 0, _MAX_SCALE, closed="right")],
        "batch_size": [_NumberInterval(Integral, 1, None, closed="left")],
        "max_epochs": [_NumberInterval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
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
    }

    def __init__(
        self,
        arch="oblivious",
        n_estimators=256,
        depth=2,
        leaf_init="ensemble",
        split_init="fan_in",
        learning_rate=1e-2,
        batch_size=512,
        max_epochs=50,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=5,
        tol=1e-4,
        warm_start=False,
        device="auto",
        random_state=None,
        verbose=0,
        n_threads=1,
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

    # -- hooks for subclasses ---------------------------------------------------
    def _encode_targets(self, y, sample_weight, warm=False):  # pragma: no cover - abstract
        """Return the target array used by ``_loss`` and the number of outputs
        (with ``warm``, in the encoding of the fitted model)."""
        raise NotImplementedError

    def _loss(self, output, target):  # pragma: no cover - abstract
        raise NotImplementedError

    def _fitted_targets(self, y):  # pragma: no cover - abstract
        """``y`` in the encoding of the fitted model, the targets ``_loss``
        takes (float64 or int64), for losses evaluated outside ``fit``."""
        raise NotImplementedError

    def _target_weights(self, y):
        """Per-sample weight factors that depend on the target (class weights);
        they multiply ``sample_weight``."""
        return 1.0

    # -- fitting ------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    @limit_threads
    def fit(self, X, y, sample_weight=None):
        """Fit the ensemble with Adam on minibatches.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; NaN or infinite values are rejected.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (class labels of any type for the classifier).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights of the loss (multiplied by the classifier's
            ``class_weight``); only their ratios matter.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            For invalid data or hyperparameters, and when training diverges:
            an epoch that ends with a non-finite loss or parameter stops the
            fit with an error naming the epoch.
        """
        warm = self._check_warm_start()
        X, target, sample_weight, n_outputs = self._prepare_fit_data(X, y, sample_weight, warm)
        arch = get_architecture(self.arch, self.depth)
        device = resolve_device(self.device)
        generator = torch.Generator().manual_seed(
            _torch_seed(self.random_state, self.n_epochs_ if warm else 0))
        train_idx, val_idx = _validation_split(
            X.shape[0], self.validation_fraction if self.early_stopping else None, generator
        )
        module = self._init_module(arch, X.shape[1], n_outputs, generator, device, warm)
        optimizer = torch.optim.Adam(module.parameters(), lr=self.learning_rate)
        if warm and getattr(self, "optimizer_state_", None) is not None:
            _load_adam_state(optimizer, self.optimizer_state_)
        data = _FitTensors.from_arrays(X, target, sample_weight, device)
        stopper = _EarlyStopping(self.tol, self.n_iter_no_change) if self.early_stopping else None

        reference_loss = _reference_loss(
            module, self._loss, data, train_idx, self.batch_size, n_outputs
        )
        if not warm:
            self.loss_curve_, self.n_epochs_ = [], 0
            self.validation_loss_curve_ = None
        if stopper is not None and self.validation_loss_curve_ is None:
            self.validation_loss_curve_ = []
        first_epoch = self.n_epochs_
        epochs = _progress(range(self.max_epochs), self.verbose > 0, type(self).__name__)
        for epoch in epochs:
            loss = _run_epoch(
                module, optimizer, self._loss, data, train_idx, self.batch_size, generator
            )
            self.loss_curve_.append(loss)
            self.n_epochs_ = first_epoch + epoch + 1
            val_loss = None
            if stopper is not None:
                val_loss = _evaluate_loss(module, self._loss, data, val_idx)
                self.validation_loss_curve_.append(val_loss)
            _check_finite_epoch(module, epoch, self.learning_rate, loss, val_loss)
            if stopper is not None:
                stopper.update(val_loss, module)
            _report_epoch(epochs, epoch, self.max_epochs, loss, val_loss, self.verbose)
            if stopper is not None and stopper.should_stop:
                break
        _warn_if_diverged(self.loss_curve_, reference_loss, self.learning_rate)
        if stopper is not None:
            stopper.restore_best(module)
        self.architecture_, self.device_, self.n_outputs_ = arch, str(device), n_outputs
        self.tree_params_ = module.to_params()
        self.optimizer_state_ = _export_adam_state(optimizer) if self.warm_start else None
        return self

    def _check_warm_start(self):
        """Whether this fit continues from the fitted parameters; raises a clear
        error when the hyperparameters no longer describe them."""
        if not (self.warm_start and hasattr(self, "tree_params_")):
            return False
        fitted = (self.architecture_.name, self.architecture_.depth, self.tree_params_.n_trees)
        wanted = (self.arch, self.depth, self.n_estimators)
        if fitted != wanted:
            raise ValueError(
                "warm_start=True continues from the fitted parameters, but (arch, depth, "
                f"n_estimators) changed from {fitted} to {wanted}. Set warm_start=False to "
                "fit a new model."
            )
        return True

    def _prepare_fit_data(self, X, y, sample_weight, warm=False):
        """Validate the training data; return ``X``, the encoded target, the
        float32 sample weights and the number of outputs. With ``warm``, the
        data must match the fitted model (features, classes or targets)."""
        X, y = self._validate_fit_data(X, y, reset=not warm)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True
        )
        sample_weight = sample_weight * self._target_weights(y)
        if not sample_weight.sum() > 0:
            raise ValueError(
                "sample_weight (times class_weight, for a classifier) sums to zero: "
                "there is nothing to fit."
            )
        # The loss is a weighted mean, so the scale of the weights is free: a
        # largest weight of 1 keeps their float32 sums finite.
        sample_weight = (sample_weight / sample_weight.max()).astype(np.float32)
        target, n_outputs = self._encode_targets(y, sample_weight, warm)
        return X, target, sample_weight, n_outputs

    def _init_module(self, arch, n_features, n_outputs, generator, device, warm=False):
        """The module to train: the fitted parameters with ``warm``, else freshly
        initialized (draws from ``generator``)."""
        if warm:
            return SoftTreeEnsembleModule.from_params(arch, self.tree_params_, device)
        return SoftTreeEnsembleModule(
            arch, self.n_estimators, n_features, n_outputs, generator=generator,
            leaf_init=self.leaf_init, split_init=self.split_init,
        ).to(device)

    def _validate_fit_data(self, X, y, reset=True):
        X, y = validate_data(
            self, X, y, reset=reset, dtype=[np.float32, np.float64], y_numeric=False
        )
        _check_float32_range(X, "X")
        return X, y

    # -- prediction ---------------------------------------------------------------
    @limit_threads
    def _predict_in_chunks(self, X, method):
        """Run the inference kernel (:func:`predict_chunked`) on validated ``X``.

        ``method`` is ``"forward"`` or ``"tree_outputs"``. The kernel works in
        float32 on fixed-size row chunks, so that a row's prediction does not
        depend on how rows are batched; the result is a float64 array.
        """
        check_is_fitted(self, "tree_params_")
        X = validate_data(self, X, reset=False, dtype=[np.float32, np.float64])
        _check_float32_range(X, "X")
        device = prediction_device(self.device)
        module = SoftTreeEnsembleModule.from_params(self.architecture_, self.tree_params_, device)
        return predict_chunked(module, X, output=method)

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
            :mod:`sktree_lmc._architectures`.
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
        for f in dataclasses.fields(TreeParams):
            if not np.isfinite(getattr(params, f.name)).all():
                raise ValueError(f"params.{f.name} contains NaN or infinity.")
        self.tree_params_ = params.copy()
        return self

    # -- persistence --------------------------------------------------------------
    def __getstate__(self):
        """The state to pickle, with the fitted state in plain types only.

        ``architecture_`` is stored as its ``(name, depth)`` and ``tree_params_``
        as a dict of three arrays, so that loading with :mod:`skops.io` needs
        only the estimator class trusted; :meth:`__setstate__` rebuilds both.
        """
        state = dict(super().__getstate__())  # a copy: object's is self.__dict__ itself
        arch = state.get("architecture_")
        if isinstance(arch, TreeArchitecture):
            state["architecture_"] = (arch.name, arch.depth)
        params = state.get("tree_params_")
        if isinstance(params, TreeParams):
            state["tree_params_"] = _params_as_dict(params)
        opt = state.get("optimizer_state_")
        if isinstance(opt, dict):  # Adam's moments, also as plain dicts of arrays
            state["optimizer_state_"] = {
                k: _params_as_dict(v) if isinstance(v, TreeParams) else v for k, v in opt.items()
            }
        return state

    def __setstate__(self, state):
        """Restore a pickled state (of this version, or one storing the objects).

        A hyperparameter added after the state was written (``class_weight``,
        ``n_threads``, ``warm_start``, ...) takes its default, which reproduces
        the behaviour of the version that wrote it, so that ``get_params``,
        ``clone`` and merging work on models pickled by an older version.
        """
        state = dict(state)
        for name, param in inspect.signature(type(self).__init__).parameters.items():
            if name != "self" and param.default is not inspect.Parameter.empty:
                state.setdefault(name, param.default)
        arch = state.get("architecture_")
        if isinstance(arch, (tuple, list)):
            name, depth = arch
            state["architecture_"] = get_architecture(str(name), int(depth))
        params = state.get("tree_params_")
        if isinstance(params, dict):
            state["tree_params_"] = TreeParams(**params)
        opt = state.get("optimizer_state_")
        if isinstance(opt, dict):
            state["optimizer_state_"] = {
                k: TreeParams(**v) if isinstance(v, dict) else v for k, v in opt.items()
            }
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


class SoftTreeEnsembleClassifier(ClassifierMixin, _BaseSoftTreeEnsemble):
    """Soft (differentiable) tree ensemble classifier trained with PyTorch.

    The model is the sum of ``n_estimators`` soft trees (Eq. 2-4 of "Linear
    Mode Connectivity in Differentiable Tree Ensembles"); each split sends the
    fraction ``sigmoid(w . x + b)`` of a sample to its left. It is trained with
    Adam on the cross-entropy of ``softmax(sum of trees)``.

    Parameters
    ----------
    arch : {"oblivious", "non_oblivious", "decision_list", "decision_list_modified"}, \
            default="oblivious"
        Tree architecture:

        - ``"non_oblivious"``: perfect binary trees, ``2**depth - 1`` splits and
          ``2**depth`` leaves;
        - ``"oblivious"``: one split per level shared by all its nodes,
          ``depth`` splits and ``2**depth`` leaves;
        - ``"decision_list"``: a chain of ``depth`` splits, ``depth + 1`` leaves;
        - ``"decision_list_modified"``: the same chain with the last leaf fixed
          to zero, which removes every symmetry but tree permutation.
    n_estimators : int, default=256
        Number of trees ``M``.
    depth : int, default=2
        Tree depth ``D``.
    leaf_init : {"ensemble", "tree"}, default="ensemble"
        Scale of the uniform initialization of the leaf values, read as a
        fully connected layer: ``"ensemble"`` takes the ensemble output as
        one layer over all ``M * L`` leaf responses (``U(+-1/sqrt(M * L))``),
        so the initial output is near zero; ``"tree"`` takes each tree's
        leaves as a layer with ``L`` inputs (``U(+-1/sqrt(L))``), so 256
        random trees start with logits of standard deviation about 2.
        Measured on the seven Tabular-Benchmark datasets (M=256, D=2, lr 1e-2,
        50 epochs, one seed pair, ``benchmarks/bench_leaf_init.py``),
        ``"ensemble"`` gave higher training (77.8 vs 75.4) and test (73.6 vs
        72.9) accuracy on average and lower barriers (WM all 0.18 vs 0.38,
        AM all 0.67 vs 2.04), closer to the paper.
    split_init : "fan_in" or float, default="fan_in"
        Bound ``c`` of the uniform initialization ``U(-c, c)`` of the split
        weights and biases. ``"fan_in"`` reads the splits as a fully
        connected layer with ``F`` inputs, ``c = 1/sqrt(F)``, so the initial
        split logits have the same scale whatever the number of features. A
        float sets ``c`` itself, independent of ``F``: wider datasets then
        start with sharper splits and fit their training data faster.
        Measured on the seven Tabular-Benchmark datasets (paper protocol,
        M=256, D=2, 5 seed pairs): ``split_init=0.45`` reproduces the paper's
        training accuracies (Table 12) within 2 points in 27 of 28
        dataset/architecture cells (the last 2.004 above), ``"fan_in"`` in 20,
        falling short on the datasets with ``F=20`` (eye_movements: 75.0-77.2 % versus 81.5-84.2 %
        with 0.45, paper 81.1-83.7 %). ``"fan_in"`` stays the default for its
        test accuracy (73.2-73.7 % versus 73.1-73.6 % on average) and lower
        barriers (see ``docs/benchmarks.md``, "Reproducing Table 12").
    learning_rate : float, default=1e-2
        Adam learning rate. Chosen by measurement on the seven Tabular-Benchmark
        datasets of the paper (M=256, D=2, 50 epochs, grid 1e-2/1e-3/1e-4 by
        training accuracy, ``leaf_init="ensemble"``): 1e-2 won 24 of 28
        dataset/architecture pairs and lost the others by at most 2 points,
        while 1e-3 left models under-trained, e.g. eye_movements 61 vs 77 %
        training accuracy (see ``docs/benchmarks.md``).
    batch_size : int, default=512
        Minibatch size.
    max_epochs : int, default=50
        Number of passes over the training data.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training data, stop when the
        validation loss has not improved by ``tol`` for ``n_iter_no_change``
        epochs, and restore the parameters of the best epoch.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping.
    n_iter_no_change : int, default=5
        Patience of early stopping, in epochs.
    tol : float, default=1e-4
        Minimum validation-loss improvement for early stopping.
    warm_start : bool, default=False
        When True, ``fit`` continues from the fitted parameters instead of a
        new initialization (scikit-learn's meaning, as in ``MLPClassifier``):
        ``max_epochs`` more epochs, appended to ``loss_curve_``. The data
        must match the fitted model (features and classes; a regressor keeps
        its target standardization ``y_mean_``/``y_scale_``), and ``arch``,
        ``depth`` and ``n_estimators`` must be unchanged, or ``fit`` raises a
        ``ValueError``. Adam's state (moments and step count) is kept in
        ``optimizer_state_`` and carried into the next fit: a restarted
        Adam's first steps have the full learning rate in every coordinate
        and undo part of the fit (MagicTelescope, 25 + 25 epochs: training
        loss 0.539 in epoch 26 after a restart, 0.350 with the state kept,
        0.341 in one 50-epoch fit), and in federated rounds keeping it was
        better on 3 of 4 datasets (see ``docs/sharded.md``). Set
        ``optimizer_state_ = None`` to restart Adam from the current
        parameters.
    device : str or torch.device, default="auto"
        Torch device for fitting and prediction (``"cpu"``, ``"cuda"``,
        ``"cuda:1"``, ``"mps"``, ...); ``"auto"`` uses CUDA when available.
        A device that is not available is a ``ValueError`` at fit. Fitted
        parameters are always stored on the CPU, so a model trained on a GPU
        pickles and loads anywhere; on a machine without CUDA it predicts on
        the CPU (with a warning). Training and prediction run in float32;
        predictions are computed on fixed-size row chunks (the last one
        padded), so a row's prediction does not depend on how rows are
        batched.
    random_state : int, RandomState instance or None, default=None
        Seeds a per-fit :class:`torch.Generator` (initialization, minibatch
        order, validation split); global random state is never touched. An
        int gives bit-identical fits on the CPU.
    verbose : int, default=0
        ``1`` shows a per-epoch progress bar (tqdm, when installed) or prints
        one line per epoch; ``2`` prints one line per epoch.
    n_threads : int or None, default=1
        Torch intra-op threads used inside ``fit`` and the prediction methods
        (set on entry, the caller's ``torch.get_num_threads()`` restored on
        exit, also on error). ``None`` keeps the caller's setting; a negative
        value counts back from the available CPUs as joblib does (``-1``: all).
        One thread is the default because the per-minibatch kernels are small:
        with one core busy with another process, torch's default of one
        thread per core made fits 10-30x slower (every kernel waits for the
        descheduled thread), while on an idle 2-core machine two threads were
        at most 1.6x faster (``benchmarks/README.md``, "Threads on a busy
        machine"). Named ``n_threads`` rather than ``n_jobs`` because it sets
        threads inside one process; ``ShardedSoftTreeEnsemble(n_jobs=...)``
        sets the number of worker processes, whose fits each use the
        estimator's ``n_threads``.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the loss, as in scikit-learn's classifiers:
        ``None`` weighs every class 1; a dict maps class labels to weights
        (missing classes weigh 1); ``"balanced"`` weighs each class by
        ``n_samples / (n_classes * count)`` of its count in ``y``. They
        multiply ``sample_weight`` given to :meth:`fit`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when ``X`` has string column names.
    n_outputs_ : int
        Number of outputs per leaf (the number of classes).
    architecture_ : TreeArchitecture
        The architecture table (routing code, symmetry group).
    tree_params_ : TreeParams
        Fitted parameters as CPU NumPy arrays; see :meth:`get_tree_params`.
    device_ : str
        Device used for fitting.
    loss_curve_ : list of float
        Mean training loss per epoch.
    validation_loss_curve_ : list of float or None
        Validation loss per epoch when ``early_stopping=True``.
    n_epochs_ : int
        Number of epochs run (over all warm-started fits).
    optimizer_state_ : dict or None
        Adam's state after the last fit when ``warm_start=True`` (``step``,
        and the moments ``exp_avg`` and ``exp_avg_sq`` as
        :class:`TreeParams` on the CPU), else None.

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
    }

    def __init__(
        self,
        arch="oblivious",
        n_estimators=256,
        depth=2,
        leaf_init="ensemble",
        split_init="fan_in",
        learning_rate=1e-2,
        batch_size=512,
        max_epochs=50,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=5,
        tol=1e-4,
        warm_start=False,
        device="auto",
        random_state=None,
        verbose=0,
        n_threads=1,
        class_weight=None,
    ):
        super().__init__(
            arch=arch, n_estimators=n_estimators, depth=depth, leaf_init=leaf_init,
            split_init=split_init, learning_rate=learning_rate, batch_size=batch_size,
            max_epochs=max_epochs, early_stopping=early_stopping,
            validation_fraction=validation_fraction, n_iter_no_change=n_iter_no_change, tol=tol,
            warm_start=warm_start, device=device, random_state=random_state, verbose=verbose,
            n_threads=n_threads,
        )
        self.class_weight = class_weight

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

    def _encode_targets(self, y, sample_weight, warm=False):
        check_classification_targets(y)
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

    def _loss(self, output, target):
        return F.cross_entropy(output, target, reduction="none")

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
            ``classes_[0]``, else one score per class.
        """
        out = self._raw_output(X)
        if out.shape[1] == 2:
            return out[:, 1] - out[:, 0]
        return out

    def predict_proba(self, X):
        """Class probabilities ``softmax(sum of trees)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Probabilities, columns ordered as ``classes_``.
        """
        return softmax(self._raw_output(X), axis=1)

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
        return log_softmax(self._raw_output(X), axis=1)

    def predict(self, X):
        """Predict class labels (elements of ``classes_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Predicted labels.
        """
        scores = self._raw_output(X)
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class SoftTreeEnsembleRegressor(RegressorMixin, _BaseSoftTreeEnsemble):
    """Soft (differentiable) tree ensemble regressor trained with PyTorch.

    The same model as :class:`SoftTreeEnsembleClassifier`, trained with Adam on
    the squared error. Targets are standardized internally (``y_mean_``,
    ``y_scale_``, weighted by ``sample_weight``) so that the default learning
    rate suits any target scale; predictions are returned in the original
    units.

    Parameters
    ----------
    arch : {"oblivious", "non_oblivious", "decision_list", "decision_list_modified"}, \
            default="oblivious"
        Tree architecture, see :class:`SoftTreeEnsembleClassifier`.
    n_estimators : int, default=256
        Number of trees ``M``.
    depth : int, default=2
        Tree depth ``D``.
    leaf_init : {"ensemble", "tree"}, default="ensemble"
        Scale of the leaf-value initialization, see
        :class:`SoftTreeEnsembleClassifier`.
    split_init : "fan_in" or float, default="fan_in"
        Bound of the uniform split initialization (``1/sqrt(F)`` for
        ``"fan_in"``), see :class:`SoftTreeEnsembleClassifier`.
    learning_rate : float, default=1e-2
        Adam learning rate.
    batch_size : int, default=512
        Minibatch size.
    max_epochs : int, default=50
        Number of passes over the training data.
    early_stopping : bool, default=False
        Stop on a held-out validation fraction, see the classifier.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping.
    n_iter_no_change : int, default=5
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

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Feature names, when ``X`` has string column names.
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
        Mean training loss per epoch (standardized units).
    validation_loss_curve_ : list of float or None
        Validation loss per epoch when ``early_stopping=True``.
    n_epochs_ : int
        Number of epochs run (over all warm-started fits).
    optimizer_state_ : dict or None
        Adam's state after the last fit when ``warm_start=True``, else None.

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
    _fitted_private_attrs = ("_y_1d",)

    def _validate_fit_data(self, X, y, reset=True):
        X, y = validate_data(
            self, X, y, reset=reset, dtype=[np.float32, np.float64], y_numeric=True,
            multi_output=True,
        )
        _check_float32_range(X, "X")
        _check_float32_range(np.asarray(y, dtype=np.float64), "y")
        return X, y

    def _encode_targets(self, y, sample_weight, warm=False):
        y = np.asarray(y, dtype=np.float64)
        y2 = y.reshape(len(y), -1)
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
        self.y_mean_ = np.average(y2, axis=0, weights=w)
        scale = np.sqrt(np.average((y2 - self.y_mean_) ** 2, axis=0, weights=w))
        self.y_scale_ = np.where(scale > 0, scale, 1.0)
        return ((y2 - self.y_mean_) / self.y_scale_).astype(np.float32), y2.shape[1]

    def _fitted_targets(self, y):
        """Targets standardized with the fitted ``y_mean_`` and ``y_scale_``."""
        y2 = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        if y2.shape[1] != self.n_outputs_:
            raise ValueError(
                f"y has {y2.shape[1]} targets, but the estimator was fitted on {self.n_outputs_}."
            )
        return (y2 - self.y_mean_) / self.y_scale_

    def _loss(self, output, target):
        return ((output - target) ** 2).mean(dim=1)

    def predict(self, X):
        """Predict regression targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            Predictions in the units of ``y``.
        """
        out = self._raw_output(X) * self.y_scale_ + self.y_mean_
        return out[:, 0] if self._y_1d else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

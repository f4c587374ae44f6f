"""The training loop of the estimators and its recipe.

``fit`` (:mod:`._estimators`) is a short driver over the pieces here:

- the loop itself: :func:`run_epoch` over minibatches of a seeded order,
  :func:`train_step`, the validation split, early stopping that restores the
  best epoch, the divergence checks and the per-epoch report;
- the recipe, each piece an estimator hyperparameter: the learning-rate
  schedule (:func:`make_lr_scheduler`: constant or cosine decay, with an
  optional linear warm-up), weight averaging (:class:`WeightAverage`: an
  exponential moving average of the weights per step, or the uniform average
  of the epoch-end weights of the second half of training, SWA; the averaged
  model is the fitted one), per-tree feature subsets
  (:class:`FeatureMask`, ``max_features``) and the data-aware start of the
  splits (:func:`init_splits_from_data`, ``split_init="data"``);
- Adam's state exported to and loaded from plain arrays (``warm_start``).

Nothing here imports the estimators.
"""

from __future__ import annotations

import copy
import math
import os
import sys
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from ..model import _kernel
from ._adam import Adam, LambdaSchedule
from ..model._inputs import Inputs
from ..model._params import TreeParams

#: Values of ``lr_schedule``.
LR_SCHEDULES = ("constant", "cosine")
#: Values of ``averaging`` (besides None).
AVERAGING = ("ema", "swa")
#: Fraction of ``max_epochs`` after which SWA starts averaging epoch-end weights.
SWA_START = 0.5
#: Slope of a split started by ``split_init="data"``, per standard deviation of
#: its direction: the split goes from 10 % to 90 % over 0.44 standard deviations.
DATA_INIT_SLOPE = 10.0
#: Fraction of the splits that ``split_init="data"`` starts on the data (the
#: others keep the uniform start). Measured (seven Tabular-Benchmark datasets,
#: 10,000 training rows, seeds 0 and 1): +0.41 points of test accuracy over the
#: uniform start with half, -0.03 with all (the sharp starts alone lose on
#: Diabetes130US, default-of-credit-card-clients and eye_movements).
DATA_INIT_FRACTION = 0.5
#: Rows that estimate the standard deviation of every direction.
DATA_INIT_ROWS = 4096


#: The additive table's Adam steps relative to the learning rate (its own
#: parameter group): at the trees' rate, a table of 64 bins per column
#: overfit (``benchmarks/bench_additive.py``: MagicTelescope -2.7 and -3.4
#: points, default-of-credit-card-clients -1.8 and -1.6 on two seeds).
ADDITIVE_LR_FACTOR = 0.1
#: Largest fraction of the additive table's rows a feature mask may keep for
#: training to hold those rows alone (:class:`TrainingView`): the table's
#: gradient, Adam's step and the weight average then pass over them alone.
#: Above it, the whole table trains (the saving is small). Both give the same
#: fit, bit for bit.
SPARSE_ROWS_FRACTION = 0.5
#: Largest fraction of the encoded features some tree's mask may keep for
#: training to read those alone (:class:`TrainingView`): the splits' matmul
#: then runs over them, the same function rounded in another order. Above it,
#: every feature is read (the saving is small, and narrow data's fits stay the
#: same, bit for bit).
SPLIT_FEATURES_FRACTION = 0.5


def make_optimizer(module, learning_rate):
    """Adam over ``(split_weight, split_bias, leaf_value)`` at ``learning_rate``,
    and the additive table, when the module has one, in a second group at
    ``ADDITIVE_LR_FACTOR * learning_rate`` (a schedule scales both).

    :class:`._adam.Adam` steps as :class:`torch.optim.Adam` does, with torch's
    functional kernel, without constructing a :class:`torch.optim.Optimizer`
    (which imports ``torch._dynamo``: seconds in the first fit of a process)."""
    groups = [{"params": [module.split_weight, module.split_bias, module.leaf_value]}]
    if module.additive is not None:
        groups.append({"params": [module.additive],
                       "lr": ADDITIVE_LR_FACTOR * learning_rate})
    return Adam(groups, lr=learning_rate)


def _export_adam_state(optimizer):
    """The state of an Adam optimizer over ``(split_weight, split_bias,
    leaf_value[, additive])`` as CPU arrays: ``{"step": int, "exp_avg":
    TreeParams, "exp_avg_sq": TreeParams}`` (None before the first step)."""
    state = optimizer.state_dict()["state"]
    n = sum(len(g["params"]) for g in optimizer.param_groups)
    if len(state) != n or n not in (3, 4):
        return None
    moments = {
        key: TreeParams(*(state[i][key].detach().cpu().numpy().copy() for i in range(n)))
        for key in ("exp_avg", "exp_avg_sq")
    }
    return {"step": int(float(state[0]["step"])), **moments}


def _load_adam_state(optimizer, state):
    """Load a state of :func:`_export_adam_state` into ``optimizer`` (whose
    hyperparameters, e.g. the learning rate, are kept)."""
    names = ("split_weight", "split_bias", "leaf_value", "additive")
    n = sum(len(g["params"]) for g in optimizer.param_groups)
    full = optimizer.state_dict()
    full["state"] = {
        i: {"step": torch.tensor(float(state["step"])),
            "exp_avg": torch.from_numpy(np.array(getattr(state["exp_avg"], name))),
            "exp_avg_sq": torch.from_numpy(np.array(getattr(state["exp_avg_sq"], name)))}
        for i, name in enumerate(names[:n])
    }
    optimizer.load_state_dict(full)


def _as_tensor(array, dtype, device):
    """``torch.as_tensor``, copying read-only arrays (e.g. memory maps) first,
    which torch cannot share."""
    if not array.flags.writeable:
        array = np.array(array)
    return torch.as_tensor(array, dtype=dtype, device=device)


def _validation_split(n_samples, validation_fraction, generator, sample_weight=None):
    """Indices ``(train_idx, val_idx)`` of the early-stopping split.

    ``validation_fraction=None`` (no early stopping) trains on every sample,
    returns ``val_idx=None`` and draws nothing from ``generator``; otherwise
    one ``randperm`` of ``generator`` picks the held-out samples.

    Raises
    ------
    ValueError
        If the held-out fraction leaves no training samples, or (given
        ``sample_weight``) either side of the split has zero total weight:
        its weighted mean loss would be 0/0.
    """
    if validation_fraction is None:
        return np.arange(n_samples), None
    n_val = max(1, int(round(validation_fraction * n_samples)))
    if n_val >= n_samples:
        raise ValueError(
            f"validation_fraction={validation_fraction!r} of n_samples={n_samples} leaves no "
            "training samples; pass more samples or set early_stopping=False."
        )
    order = torch.randperm(n_samples, generator=generator).numpy()
    train_idx, val_idx = order[n_val:], order[:n_val]
    if sample_weight is not None:
        weight = np.asarray(sample_weight, dtype=np.float64)
        for name, idx in (("validation", val_idx), ("training", train_idx)):
            if not weight[idx].sum() > 0:
                raise ValueError(
                    f"The {name} part of the early-stopping split (validation_fraction="
                    f"{validation_fraction!r}, {len(val_idx)} of {n_samples} samples held out) "
                    "holds only samples of zero sample_weight; give more samples a positive "
                    "weight or set early_stopping=False."
                )
    return train_idx, val_idx


class _FitTensors(NamedTuple):
    """Training inputs (the trees' features and the additive codes, or None),
    encoded targets and sample weights, on the fit device."""

    X: torch.Tensor
    target: torch.Tensor
    weight: torch.Tensor
    codes: torch.Tensor | None = None

    @classmethod
    def from_arrays(cls, inputs, target, sample_weight, device):
        """The tensors of the :class:`~sktree_lmc.model._inputs.Inputs`
        ``inputs``, ``target`` and ``sample_weight`` on ``device``."""
        # The loss is a weighted mean, so the scale of the weights is free: a
        # largest weight of 1 keeps their float32 sums finite.
        weight = np.asarray(sample_weight, dtype=np.float64)
        codes = None
        if inputs.codes is not None:  # row-major: a minibatch gathers whole rows
            codes = _as_tensor(np.ascontiguousarray(inputs.codes), None, device)
        return cls(
            _as_tensor(inputs.X, torch.float32, device),
            torch.as_tensor(target, device=device),
            torch.as_tensor(weight / weight.max(), dtype=torch.float32, device=device),
            codes,
        )

    def inputs(self, idx):
        """The :class:`~sktree_lmc.model._inputs.Inputs` of rows ``idx``."""
        return Inputs(self.X, self.codes).take(idx)

    def rows(self, idx):
        """``(inputs, target, weight)`` of the rows ``idx`` (an int64 tensor on
        the fit device), gathered by ``index_select`` (half the time of
        indexing, the same values)."""
        codes = None if self.codes is None else self.codes.index_select(0, idx)
        return (Inputs(self.X.index_select(0, idx), codes), self.target.index_select(0, idx),
                self.weight.index_select(0, idx))


def _member_loss(module, loss_fn, inputs, target, n_members):
    """Per-row loss of ``module`` on ``(inputs, target)``: of its output, or with
    ``n_members > 1`` the mean over its members of each member's loss
    (:meth:`~sktree_lmc.SoftTreeEnsembleModule.member_outputs`)."""
    if n_members == 1:
        return loss_fn(module(inputs.X, inputs.codes), target)
    members = module.member_outputs(inputs.X, n_members, codes=inputs.codes)  # (B, K, C)
    B, K, C = members.shape
    repeated = target.repeat_interleave(K, dim=0)  # row-major, as members.reshape
    return loss_fn(members.reshape(B * K, C), repeated).view(B, K).mean(dim=1)


def _train_step(module, optimizer, loss_fn, data, idx, *, hooks=None, n_members=1):
    """One Adam step on the weighted mean loss of rows ``idx``; returns the loss.

    ``hooks`` (a :class:`TrainingHooks`) masks the gradients before the step and
    advances the schedule and the weight average after it. ``n_members > 1``
    takes the members' mean loss instead of the ensemble's
    (:func:`_member_loss`).
    """
    inputs, target, w = data.rows(idx)
    per_row = _member_loss(module, loss_fn, inputs, target, n_members)
    loss = (per_row * w).sum() / w.sum().clamp_min(1e-12)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if hooks is not None:
        hooks.step(module, optimizer)
    else:
        optimizer.step()
    return float(loss.detach())


def _run_epoch(module, optimizer, loss_fn, data, train_idx, batch_size, *, generator,
               hooks=None, n_members=1, fast=None):
    """One pass over ``train_idx`` in minibatches of a fresh ``generator`` order.

    Returns the mean training loss of the epoch (minibatch losses weighted by
    minibatch size; the members' mean loss with ``n_members > 1``). ``fast``
    (a :class:`._fast_step.FastStep` of the same training, or None) takes
    the steps without autograd.
    """
    module.train()
    device = data.X.device
    train_t = torch.as_tensor(train_idx, device=device)
    order = train_t[torch.randperm(len(train_idx), generator=generator).to(device)]
    if fast is not None:
        loss = fast.epoch(order.numpy(), batch_size)
        if loss is not None:
            return loss
    total, count = 0.0, 0.0
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        total += _train_step(module, optimizer, loss_fn, data, idx, hooks=hooks,
                             n_members=n_members) * len(idx)
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
            stacklevel=_user_stacklevel(),
        )


def _user_stacklevel():
    """The ``stacklevel`` of a warning raised by the caller of this function
    that points at the first frame outside this package and scikit-learn's
    wrappers (the user's call of ``fit``, ``partial_fit`` or a meta-estimator),
    however many layers lie between."""
    import sklearn

    inside = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # sktree_lmc/
              os.path.dirname(os.path.abspath(sklearn.__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


def _evaluate_loss(module, loss_fn, data, idx):
    """Weighted mean loss of rows ``idx`` in evaluation mode, without gradients."""
    module.eval()
    idx = torch.as_tensor(idx, device=data.X.device)
    with torch.inference_mode():
        rows, target, w = data.rows(idx)
        return float((loss_fn(module(rows.X, rows.codes), target) * w).sum() / w.sum())


def _copied_state(state):
    """A copy of a module's ``state_dict``: its tensors cloned (what
    ``copy.deepcopy`` copies, in a tenth of the time: an early-stopping fit
    keeps the state of every improving epoch), anything else deep-copied."""
    copied = type(state)((k, v.detach().clone() if isinstance(v, torch.Tensor)
                          else copy.deepcopy(v)) for k, v in state.items())
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        copied._metadata = copy.deepcopy(metadata)
    return copied


class _EarlyStopping:
    """Early-stopping state: best validation value, its parameters and epoch,
    patience count.

    Values are losses (lower is better; a score is passed negated). A value
    counts as an improvement when it is below the best one by more than
    ``tol``; training should stop after ``patience`` epochs in a row without
    one.
    """

    def __init__(self, tol, patience):
        self.tol, self.patience = tol, patience
        self.best_loss, self.best_state, self.no_improve = np.inf, None, 0
        self.best_epoch = None

    def update(self, val_loss, module, epoch=None):
        """Record one epoch's validation value (and ``module``'s state if best)."""
        if val_loss < self.best_loss - self.tol:
            self.best_loss, self.no_improve, self.best_epoch = val_loss, 0, epoch
            self.best_state = _copied_state(module.state_dict())
        else:
            self.no_improve += 1

    @property
    def should_stop(self):
        return self.no_improve >= self.patience

    def restore_best(self, module):
        """Load the parameters of the best epoch into ``module`` (if any improved)."""
        if self.best_state is not None:
            module.load_state_dict(self.best_state)


# ----------------------------------------------------------------------------
# The epoch loop and its callbacks
# ----------------------------------------------------------------------------


class EpochLog:
    """What the callbacks of :func:`train` see of one epoch, and fill in.

    Attributes
    ----------
    epoch : int
        The epoch, 0-based.
    loss : float
        Its mean training loss.
    module : SoftTreeEnsembleModule
        The module being trained.
    model : SoftTreeEnsembleModule
        The model to evaluate (the weight average when there is one).
    val_loss, val_score : float or None
        Set by :class:`ValidationLoss` and :class:`EarlyStoppingCallback`.
    """

    def __init__(self, epoch, loss, module, model):
        self.epoch, self.loss, self.module, self.model = epoch, loss, module, model
        self.val_loss = self.val_score = None


class Callback:
    """A step of :func:`train`'s epoch loop. ``on_train_begin(model)`` runs
    before the first epoch, ``on_epoch_end(log)`` after each (a true return
    value stops the loop after this epoch's callbacks), ``on_train_end(model)``
    after the last."""

    def on_train_begin(self, model):
        pass

    def on_epoch_end(self, log):
        return False

    def on_train_end(self, model):
        pass


class ValidationLoss(Callback):
    """The weighted mean loss of the model on the validation rows ``val_idx``
    (``log.val_loss``), appended to ``curve``."""

    def __init__(self, loss_fn, data, val_idx, curve):
        self.loss_fn, self.data, self.val_idx, self.curve = loss_fn, data, val_idx, curve

    def on_epoch_end(self, log):
        log.val_loss = _evaluate_loss(log.model, self.loss_fn, self.data, self.val_idx)
        self.curve.append(log.val_loss)
        return False


class DivergenceCheck(Callback):
    """A ValueError naming the epoch when its training or validation loss or a
    parameter is not finite (:func:`_check_finite_epoch`)."""

    def __init__(self, learning_rate):
        self.learning_rate = learning_rate

    def on_epoch_end(self, log):
        _check_finite_epoch(log.module, log.epoch, self.learning_rate, log.loss, log.val_loss)
        return False


class EarlyStoppingCallback(Callback):
    """Early stopping on ``log.val_loss`` (``score=None``) or on
    ``score(model)`` (higher is better), whose values are appended to
    ``scores``; restores the best epoch's parameters at the end. With
    ``score_start``, the model before the first epoch is a candidate too
    (epoch 0: a boosted start is a model already)."""

    def __init__(self, tol, patience, scores, score=None, score_start=False):
        self.stopper = _EarlyStopping(tol, patience)
        self.scores, self.score, self.score_start = scores, score, score_start
        self.loss_fn = self.data = self.val_idx = None

    def start_on(self, loss_fn, data, val_idx):
        """The validation rows the start is scored on with ``score=None``."""
        self.loss_fn, self.data, self.val_idx = loss_fn, data, val_idx
        return self

    def on_train_begin(self, model):
        if self.score_start:
            value = (_evaluate_loss(model, self.loss_fn, self.data, self.val_idx)
                     if self.score is None else -self.score(model))
            self.stopper.update(value, model, 0)

    def on_epoch_end(self, log):
        log.val_score = -log.val_loss if self.score is None else self.score(log.model)
        self.scores.append(log.val_score)
        self.stopper.update(-log.val_score, log.model, log.epoch + 1)
        return self.stopper.should_stop

    def on_train_end(self, model):
        self.stopper.restore_best(model)

    @property
    def best_epoch(self):
        return self.stopper.best_epoch


class ProgressCallback(Callback):
    """One :class:`ProgressLog` step per epoch, with the losses (and the
    validation score when ``show_score``)."""

    def __init__(self, log, show_score=False):
        self.log, self.show_score = log, show_score

    def on_epoch_end(self, log):
        self.log.step(log.epoch, loss=log.loss, val_loss=log.val_loss,
                      **({"val_score": log.val_score} if self.show_score else {}))
        return False


def train(module, optimizer, loss_fn, data, train_idx, *, batch_size, max_epochs, generator,
          hooks, n_members=1, callbacks=(), loss_curve=None):
    """Train ``module`` for at most ``max_epochs`` epochs of Adam minibatches.

    On the CPU, the forward and backward passes of the trees run the fused
    kernel of :mod:`sktree_lmc.model._kernel` when its engine resolves to numba
    (:func:`~sktree_lmc.model._kernel.engine`; by default wherever numba imports),
    else the torch path of :mod:`sktree_lmc.model._forward`. Where the kernel
    runs and :meth:`._fast_step.FastStep.of` covers the fit (the built-in
    softmax and squared-error losses, one member, the package's Adam and
    recipe), the steps skip autograd: :class:`._fast_step.FastStep` takes
    them on NumPy views of the same tensors, equal up to float32 rounding.

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        The module, trained in place.
    optimizer : Adam or torch.optim.Optimizer
        Its optimizer.
    loss_fn : callable
        ``loss_fn(output, target)``: the per-row loss.
    data : _FitTensors
        The encoded rows, targets and weights.
    train_idx : ndarray
        The training rows.
    batch_size, max_epochs : int
        Minibatch size and the most epochs.
    generator : torch.Generator
        The minibatch order's random source.
    hooks : TrainingHooks
        The recipe around each step (mask, schedule, weight average).
    n_members : int, default=1
        Train the trees as this many members (:func:`_member_loss`).
    callbacks : sequence of Callback, default=()
        Run in order after each epoch; any of them may stop the loop.
    loss_curve : list or None
        Each epoch's training loss is appended to it.

    Returns
    -------
    model : SoftTreeEnsembleModule
        The fitted model (the weight average when there is one), after the
        callbacks' ``on_train_end`` (early stopping restores its best epoch).
    n_iter : int
        Epochs run.
    """
    from ._fast_step import FastStep

    mask = None if hooks is None or hooks.mask is None else hooks.mask.mask
    with _kernel.training_loop(grad_mask=mask):
        fast = FastStep.of(module, optimizer, loss_fn, data, hooks, n_members)
        return _train_loop(module, optimizer, loss_fn, data, train_idx, batch_size=batch_size,
                           max_epochs=max_epochs, generator=generator, hooks=hooks,
                           n_members=n_members, callbacks=callbacks, loss_curve=loss_curve,
                           fast=fast)


def _train_loop(module, optimizer, loss_fn, data, train_idx, *, batch_size, max_epochs,
                generator, hooks, n_members, callbacks, loss_curve, fast=None):
    """The loop of :func:`train`, inside the engine it chose
    (:func:`~sktree_lmc.model._kernel.training_loop`); ``fast``: the steps
    without autograd (:class:`._fast_step.FastStep`), or None."""
    for callback in callbacks:
        callback.on_train_begin(hooks.model(module))
    epoch = -1
    for epoch in range(max_epochs):
        loss = _run_epoch(module, optimizer, loss_fn, data, train_idx, batch_size,
                          generator=generator, hooks=hooks, n_members=n_members, fast=fast)
        hooks.end_epoch(module, epoch)
        if loss_curve is not None:
            loss_curve.append(loss)
        log = EpochLog(epoch, loss, module, hooks.model(module))
        stop = False
        for callback in callbacks:
            stop = bool(callback.on_epoch_end(log)) or stop
        if stop:
            break
    model = hooks.model(module)
    for callback in callbacks:
        callback.on_train_end(model)
    return model, epoch + 1


# ----------------------------------------------------------------------------
# The recipe: learning-rate schedule, weight averaging, feature subsets
# ----------------------------------------------------------------------------


def lr_factor(step, schedule, warmup_steps, total_steps):
    """Multiplier of the learning rate after ``step`` optimizer steps.

    A linear warm-up from ``1 / warmup_steps`` to 1 over the first
    ``warmup_steps`` steps, then 1 (``"constant"``) or a cosine decay from 1 to
    0 at ``total_steps`` (``"cosine"``, Loshchilov and Hutter's SGDR without
    restarts).
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_lr_scheduler(optimizer, schedule, warmup_fraction, total_steps, start_step=0):
    """A :class:`._adam.LambdaSchedule` (what
    :class:`torch.optim.lr_scheduler.LambdaLR` does) stepped once per optimizer
    step, or None for a constant learning rate without warm-up (then the
    optimizer's learning rate is never touched).

    ``start_step``: the steps of the run taken before this fit (a federated
    round continues the schedule of the rounds before it); the schedule spans
    ``total_steps`` steps of the whole run.
    """
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {schedule!r}.")
    warmup_steps = int(round(warmup_fraction * total_steps))
    if schedule == "constant" and warmup_steps <= start_step:
        return None
    return LambdaSchedule(
        optimizer,
        lambda step: lr_factor(step + start_step, schedule, warmup_steps, total_steps),
    )


def ema_decay_at(step, decay):
    """Decay of the moving average at its ``step``-th update (0-based):
    ``min(decay, (1 + step) / (10 + step))``, the warm-up of TensorFlow's
    ``ExponentialMovingAverage(num_updates=...)``, so that the first updates
    follow the weights closely instead of averaging with the initialization."""
    return min(float(decay), (1.0 + step) / (10.0 + step))


def _warmup_ema(decay):
    """A ``multi_avg_fn`` for :class:`~torch.optim.swa_utils.AveragedModel`:
    an in-place exponential moving average with :func:`ema_decay_at`."""

    @torch.no_grad()
    def update(averaged, current, num_averaged):
        d = ema_decay_at(int(num_averaged), decay)
        torch._foreach_lerp_(averaged, current, 1.0 - d)

    return update


class WeightAverage:
    """The averaged copy of the trained module: the model that is evaluated,
    early-stopped and stored.

    ``"ema"``: after optimizer step ``t``, ``avg = d_t * avg + (1 - d_t) *
    weights`` with ``d_t = min(decay, (1 + t) / (10 + t))`` (:func:`ema_decay_at`):
    the average of a short fit (few steps) is not held back by the
    initialization; ``"swa"``:
    the uniform average of the weights at the end of every epoch from
    ``start_epoch`` on (Izmailov et al., 2018), the live weights before. Built
    on :class:`torch.optim.swa_utils.AveragedModel`.
    """

    def __init__(self, module, kind, decay=0.995, start_epoch=0):
        from torch.optim.swa_utils import AveragedModel

        if kind not in AVERAGING:
            raise ValueError(f"averaging must be one of {AVERAGING} or None, got {kind!r}.")
        self.kind, self.start_epoch = kind, start_epoch
        fn = _warmup_ema(decay) if kind == "ema" else None
        self.averaged = AveragedModel(module, multi_avg_fn=fn, use_buffers=False)
        self.decay = decay
        self.started = False
        self._pairs = None

    def after_step(self, module):
        if self.kind == "ema":
            if not self._ema_step(module):
                self.averaged.update_parameters(module)
            self.started = True

    def _ema_step(self, module):
        """The EMA update of :meth:`AveragedModel.update_parameters
        <torch.optim.swa_utils.AveragedModel.update_parameters>` after its
        first one, with the same operations (``_foreach_lerp_`` of the
        parameters by :func:`ema_decay_at`, the buffers copied), without its
        per-step walk over the modules (a third of a millisecond a step);
        False, nothing done, where ``update_parameters`` should run: the
        first update (a copy) and a module other than the last one's."""
        averaged = self.averaged
        pairs = self._pairs
        if pairs is None or pairs[0] is not module:
            if int(averaged.n_averaged) == 0:
                return False
            avg, cur = list(averaged.module.parameters()), list(module.parameters())
            if len(avg) != len(cur) or any(
                    a.device != c.device or a.dtype != c.dtype or a.shape != c.shape
                    for a, c in zip(avg, cur)):
                return False
            pairs = self._pairs = (module, [a.detach() for a in avg],
                                   [c.detach() for c in cur],
                                   list(zip(averaged.module.buffers(), module.buffers())))
        _, avg, cur, buffers = pairs
        with torch.no_grad():
            d = self.decay_at(int(averaged.n_averaged))
            torch._foreach_lerp_(avg, cur, 1.0 - d)
            for b_avg, b_cur in buffers:
                b_avg.detach().copy_(b_cur.detach())
            averaged.n_averaged += 1
        return True

    def decay_at(self, step):
        """The EMA's decay at its ``step``-th update (:func:`ema_decay_at`)."""
        return ema_decay_at(step, self.decay)

    def end_epoch(self, module, epoch):
        if self.kind == "swa" and epoch >= self.start_epoch:
            self.averaged.update_parameters(module)
            self.started = True

    def module_for(self, module):
        """The module to evaluate and store: the average once it has started."""
        return self.averaged.module if self.started else module


def resolve_max_features(max_features, n_features):
    """Number of input features per tree for ``max_features``, as in
    :class:`~sklearn.ensemble.RandomForestClassifier`: None (all), ``"sqrt"``,
    ``"log2"``, an int, or a fraction in (0, 1]."""
    if max_features is None:
        return n_features
    if isinstance(max_features, str):
        if max_features == "sqrt":
            k = int(math.sqrt(n_features))
        elif max_features == "log2":
            k = int(math.log2(n_features)) if n_features > 0 else 0
        else:
            raise ValueError(
                f"max_features must be None, 'sqrt', 'log2', an int or a float, got "
                f"{max_features!r}."
            )
    elif isinstance(max_features, Integral):
        if max_features > n_features:
            raise ValueError(
                f"max_features={max_features} is larger than the number of features "
                f"({n_features})."
            )
        k = int(max_features)
    elif isinstance(max_features, Real):
        k = int(float(max_features) * n_features)
    else:
        raise ValueError(f"max_features must be None, a str, an int or a float, got "
                         f"{max_features!r}.")
    return max(1, min(n_features, k))


def effective_count(weights):
    """The effective number of features of nonnegative ``weights``:
    ``exp`` of the entropy of their shares (the perplexity), from 1 when one
    feature has all the weight to the number of features when they share it
    evenly; 0 when every weight is 0."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if not total > 0:
        return 0.0
    p = w / total
    p = p[p > 0]  # a share can underflow to 0
    return float(np.exp(-(p * np.log(p)).sum()))


def guided_count(max_features, n_effective, n_used):
    """Features per tree of the teacher-guided draw: ``max_features`` of the
    ``n_effective`` features the teacher's gains spread over (a fraction of
    it rounded, ``"sqrt"`` or ``"log2"`` of it, at least 2, so that a tree
    can model an interaction; an int as it is), at most the ``n_used``
    features with a gain, and at least 1."""
    if isinstance(max_features, Integral):
        k = int(max_features)
    else:
        if isinstance(max_features, str):
            k = {"sqrt": math.sqrt, "log2": math.log2}[max_features](max(n_effective, 1.0))
        else:
            k = float(max_features) * n_effective
        k = max(2, int(round(k)))
    return max(1, min(n_used, k))


def live_code_columns(table, offsets):
    """The code columns of an additive table (column ``j``: rows
    ``offsets[j]`` to ``offsets[j + 1]`` of ``table``, of shape
    ``(n_additive, ...)``) with a nonzero entry, or None when that is all of
    them. A column whose rows are all zero adds nothing to any row."""
    table = np.asarray(table).reshape(len(table), -1)
    nonzero = np.zeros(len(table), dtype=bool)
    for c in range(table.shape[1]):  # column by column: any(axis=1) over a short axis is slow
        nonzero |= table[:, c] != 0
    offsets = np.asarray(offsets)
    if len(offsets) < 2:
        return None
    sizes = np.diff(offsets)
    any_nonzero = np.zeros(len(sizes), dtype=bool)
    rows = sizes > 0  # reduceat's segment runs to the next start given: only non-empty ones
    if nonzero.size:
        any_nonzero[rows] = np.logical_or.reduceat(nonzero, offsets[:-1][rows])
    live = np.flatnonzero(any_nonzero)
    return None if len(live) == len(offsets) - 1 else live


def _code_column_rows(keep, offsets):
    """The row mask (float32, 1 where kept) of the code columns ``keep``
    (bool per column) of an additive table laid out by ``offsets``."""
    return np.repeat(np.asarray(keep, dtype=np.float32), np.diff(offsets))


class FeatureMask:
    """Which encoded features each tree may use: ``mask`` of shape ``(M, F_enc)``,
    and which rows of the additive table train: ``additive`` of shape
    ``(n_additive,)`` (None: all).

    The mask is data in the parameters: the split weights of the features a
    tree does not use (and the additive rows of the columns left out) are
    exactly zero, and stay zero in training because their gradients are
    zeroed before every Adam step (Adam moves a weight whose gradients were
    always zero by exactly 0). Symmetry ops permute and negate the zeros with
    everything else, so aligned and merged models keep them (a merge keeps
    the union of the two models' features per tree), and a warm-started fit
    recovers the mask from the zeros (:meth:`from_params`).
    """

    def __init__(self, mask, additive=None, note=None):
        self.mask = mask
        self.additive = additive
        #: What a guided draw chose, for a verbose fit's line (None otherwise).
        self.note = note

    @classmethod
    def draw(cls, generator, n_trees, groups, n_per_tree, device):
        """``n_per_tree`` input features drawn per tree (from ``generator``),
        expanded to their encoded features (``groups[f]`` is the input feature
        of encoded feature ``f``); None when every tree uses everything."""
        n_inputs = int(groups.max()) + 1 if len(groups) else 0
        if n_per_tree >= n_inputs:
            return None
        ranks = torch.rand((n_trees, n_inputs), generator=generator).argsort(dim=1)
        chosen = ranks < n_per_tree  # (M, F_in): a uniform n_per_tree-subset per tree
        mask = chosen[:, torch.as_tensor(groups, dtype=torch.long)]
        return cls(mask.to(device=device, dtype=torch.float32))

    @classmethod
    def guided(cls, generator, n_trees, groups, gains, max_features, device, *,
               additive_sources=None, additive_offsets=None):
        """The features of every tree drawn by the teacher's gains.

        ``gains`` (per encoded feature, :func:`~._boosting.feature_gains`)
        sum to a weight per input feature. Each tree draws
        :func:`guided_count` input features without replacement, with
        probabilities proportional to their weights (Efraimidis and
        Spirakis' keys ``u ** (1 / w)``): a feature the teacher never split
        on is never drawn. The additive term keeps the columns of the
        ``ceil`` of the effective number of features (:func:`effective_count`)
        with the largest weights (``additive_sources``: the input column of
        every code column, ``additive_offsets``: their first table rows; None
        without an additive term). None when no feature has a gain.
        """
        groups = np.asarray(groups)
        n_inputs = int(groups.max()) + 1 if len(groups) else 0
        weight = np.bincount(groups, weights=np.asarray(gains, dtype=np.float64),
                             minlength=n_inputs)
        n_used = int((weight > 0).sum())
        if n_used == 0:
            return None
        n_eff = effective_count(weight)
        k = guided_count(max_features, n_eff, n_used)
        u = torch.rand((n_trees, n_inputs), generator=generator, dtype=torch.float64)
        w = torch.as_tensor(weight)
        keys = torch.where(w > 0, u.log() / w, torch.tensor(-math.inf, dtype=torch.float64))
        top = keys.argsort(dim=1, descending=True, stable=True)[:, :k]
        chosen = torch.zeros((n_trees, n_inputs), dtype=torch.bool).scatter_(1, top, True)
        mask = chosen[:, torch.as_tensor(groups, dtype=torch.long)]
        additive = None
        if additive_offsets is not None:
            kept = np.argsort(-weight, kind="stable")[:min(n_used, math.ceil(n_eff))]
            rows = _code_column_rows(np.isin(additive_sources, kept), additive_offsets)
            additive = torch.as_tensor(rows, device=device)
        note = (f"columns drawn by the teacher's gains: {k} per tree, of {n_eff:.1f} effective "
                f"({n_used} with a gain, of {n_inputs})")
        if additive is not None:
            note += f"; the additive term on the {len(kept)} strongest"
        return cls(mask.to(device=device, dtype=torch.float32), additive, note)

    @classmethod
    def from_params(cls, split_weight, device, additive=None, additive_offsets=None):
        """The mask of a fitted model: the features with a nonzero weight in a
        tree, and the additive table's code columns (rows ``additive_offsets[j]``
        to ``additive_offsets[j + 1]`` of ``additive``) with a nonzero row;
        None when nothing is zero."""
        used = (np.asarray(split_weight) != 0).any(axis=1)  # (M, F)
        rows = None
        if additive is not None and additive_offsets is not None:
            live = live_code_columns(additive, additive_offsets)
            if live is not None:
                keep = np.isin(np.arange(len(additive_offsets) - 1), live)
                rows = torch.as_tensor(_code_column_rows(keep, additive_offsets), device=device)
        if used.all() and rows is None:
            return None
        return cls(torch.as_tensor(used, dtype=torch.float32, device=device), rows)

    def apply(self, module):
        """Zero the masked weights of ``module`` (after initialization)."""
        with torch.no_grad():
            module.split_weight.mul_(self.mask[:, None, :])
            if self.additive is not None and module.additive is not None:
                module.additive.mul_(self.additive[:, None])

    def mask_gradient(self, module):
        """Zero the gradients of the masked weights of ``module``."""
        grad = module.split_weight.grad
        if grad is not None:
            grad.mul_(self._expanded(self.mask, grad, lambda m: m[:, None, :]))
        if self.additive is not None and module.additive is not None:
            grad = module.additive.grad
            if grad is not None:
                grad.mul_(self._expanded(self.additive, grad, lambda m: m[:, None]))

    def _expanded(self, mask, grad, view):
        """``view(mask)`` expanded to ``grad``'s shape, contiguous, made once
        per mask, shape and version (every training step multiplies by it: a
        broadcast product of the additive table's gradient costs ten times the
        contiguous one; the products are the same)."""
        cache = self.__dict__.setdefault("_expanded_masks", {})
        key = (id(mask), mask._version, tuple(grad.shape), grad.dtype, grad.device)
        found = cache.get(key)
        if found is None or found[0] is not mask:
            found = cache[key] = (mask, view(mask).expand(grad.shape).to(grad.dtype)
                                  .contiguous())
        return found[1]


class TrainingView:
    """The entries of a model that training moves, where a feature mask keeps
    most of the others at exactly zero (wide data): the encoded features
    some tree keeps, when they are at most :data:`SPLIT_FEATURES_FRACTION` of
    all, and the additive table's rows the mask keeps, when they are at most
    :data:`SPARSE_ROWS_FRACTION` of all. Training runs on a compact copy of
    the module (:meth:`~sktree_lmc.SoftTreeEnsembleModule.compacted`), of its
    inputs, of Adam's state and of the mask, and its result is expanded back
    with zeros for the entries left out, which the mask kept at zero.

    The kept rows alone are the same fit, bit for bit (the same values,
    gradients, Adam steps and averages, without passing over millions of
    zero rows every step); the kept features alone round the splits' matmul
    in another order. Code columns with no kept row are dropped from the
    inputs either way (they add zeros to every row's additive term).

    Parameters
    ----------
    features : ndarray of int or None
        The encoded features kept (sorted); None: all.
    live : ndarray of int or None
        The code columns kept (those with a kept row); None: all.
    rows : ndarray of int or None
        The additive table's rows kept (sorted); None: all.
    n_features, n_rows : int
        Encoded features and additive table rows of the whole model.
    """

    def __init__(self, features, live, rows, n_features, n_rows):
        self.features, self.live, self.rows = features, live, rows
        self.n_features, self.n_rows = n_features, n_rows

    @classmethod
    def of(cls, mask, encoder):
        """The view of a fit with feature ``mask`` on ``encoder``'s features,
        or None where the mask keeps every feature and table row."""
        if mask is None:
            return None
        F = encoder.n_features_out_
        used = mask.mask.any(dim=0)
        features = None
        if int(used.sum()) <= SPLIT_FEATURES_FRACTION * F:
            features = used.nonzero().squeeze(1).cpu().numpy()
        live = rows = None
        if mask.additive is not None:
            kept = mask.additive.detach().cpu().numpy()
            live = live_code_columns(kept, encoder.additive_offsets_)
            if np.count_nonzero(kept) <= SPARSE_ROWS_FRACTION * len(kept):
                rows = np.flatnonzero(kept)
        if features is None and live is None and rows is None:
            return None
        return cls(features, live, rows, F, encoder.n_additive_)

    def inputs(self, inputs):
        """Encoded rows :class:`~sktree_lmc.model._inputs.Inputs` as the
        compact module reads them: the kept features, and the kept code
        columns, their codes renumbered to the kept rows."""
        X, codes = inputs.X, inputs.codes
        if self.features is not None:
            X = X[:, self.features]
        if codes is not None and self.live is not None:
            codes = codes[:, self.live]
        if codes is not None and self.rows is not None:
            number = np.full(self.n_rows, -1, dtype=codes.dtype)
            number[self.rows] = np.arange(len(self.rows))
            codes = number[codes]
        return Inputs(X, codes)

    def module(self, module):
        """The compact copy of ``module`` that trains."""
        def index(a):
            return None if a is None else torch.as_tensor(a, device=module.split_weight.device)
        return module.compacted(index(self.features), index(self.rows))

    def mask(self, mask):
        """``mask`` on the compact module's features and rows."""
        keep = mask.mask
        if self.features is not None:
            keep = keep[:, torch.as_tensor(self.features, device=keep.device)]
        return FeatureMask(keep, mask.additive if self.rows is None else None, mask.note)

    def params(self, params):
        """The compact part of a :class:`TreeParams` of the whole model (the
        parameters, or Adam's moments of them)."""
        weight, additive = params.split_weight, params.additive
        if self.features is not None:
            weight = weight[:, :, self.features]
        if self.rows is not None and additive is not None:
            additive = additive[self.rows]
        return TreeParams(weight, params.split_bias, params.leaf_value, additive)

    def expand(self, params):
        """A :class:`TreeParams` of the compact module as one of the whole
        model: zeros for the features and rows left out."""
        weight, additive = params.split_weight, params.additive
        if self.features is not None:
            weight = np.zeros(weight.shape[:2] + (self.n_features,), dtype=weight.dtype)
            weight[:, :, self.features] = params.split_weight
        if self.rows is not None and additive is not None:
            additive = np.zeros((self.n_rows,) + additive.shape[1:], dtype=additive.dtype)
            additive[self.rows] = params.additive
        return TreeParams(weight, params.split_bias, params.leaf_value, additive)

    def state(self, state, expand=False):
        """Adam's state (:func:`_export_adam_state`) of the whole model made
        compact, or with ``expand`` that of the compact module made whole."""
        if state is None:
            return None
        how = self.expand if expand else self.params
        return {**state, "exp_avg": how(state["exp_avg"]), "exp_avg_sq": how(state["exp_avg_sq"])}


class TrainingHooks:
    """What the recipe does around each optimizer step: mask the gradients
    (:class:`FeatureMask`), then step the learning-rate schedule and update
    the weight average."""

    def __init__(self, scheduler=None, average=None, mask=None):
        self.scheduler, self.average, self.mask = scheduler, average, mask

    def step(self, module, optimizer):
        """Mask the gradients, step ``optimizer``, then advance the schedule and
        the weight average."""
        if self.mask is not None:
            self.mask.mask_gradient(module)
        optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        if self.average is not None:
            self.average.after_step(module)

    def end_epoch(self, module, epoch):
        if self.average is not None:
            self.average.end_epoch(module, epoch)

    def model(self, module):
        """The module to evaluate, early-stop and store."""
        return module if self.average is None else self.average.module_for(module)


def split_directions(encoder):
    """The directions a split can start on with ``split_init="data"``.

    A numeric column gives one: its encoded value (the ramp over its knots for
    the piecewise-linear encoding, a quantile-like transform of the value; see
    ``ramp_directions`` of the encoder), not its missing-value indicator. A
    categorical column gives one per encoded feature (a category against the
    others).

    Parameters
    ----------
    encoder : TabularEncoder
        Fitted.

    Returns
    -------
    directions : ndarray of shape (n_directions, F_enc)
    groups : ndarray of int of shape (n_directions,)
        The input column of every direction (the feature mask keeps or drops
        whole input columns, and a split draws a column, then one of its
        directions).
    """
    F = encoder.n_features_out_
    ramps = encoder.ramp_directions()
    rows, groups = [], []
    for j in range(encoder.n_features_in_):
        cols = np.flatnonzero(encoder.feature_groups_ == j)
        if encoder.categorical_[j]:
            for c in cols:
                d = np.zeros(F)
                d[c] = 1.0
                rows.append(d)
                groups.append(j)
            continue
        values = cols[: len(cols) - int(encoder.has_missing_[j])]
        if len(values) == 0:
            continue
        d = np.zeros(F)
        if ramps is not None and not np.isnan(ramps[values]).any():
            d[values] = ramps[values]
        else:
            d[values[0]] = 1.0
        rows.append(d)
        groups.append(j)
    return np.array(rows).reshape(len(rows), F), np.array(groups, dtype=np.int64)


def init_splits_from_data(module, X, rows, directions, groups, *, generator, mask=None,
                          slope=DATA_INIT_SLOPE):
    """Start half of the splits as sharp thresholds on the data (``split_init="data"``).

    Every split node of every tree is drawn with probability
    :data:`DATA_INIT_FRACTION` (one half); a drawn one takes one of its
    tree's input columns (see :class:`FeatureMask`), uniformly among those
    that vary in the rows, then one of the column's directions (see
    :func:`split_directions`), a threshold halfway between a
    training row's value along it and the next distinct value (so the
    thresholds follow the data's quantiles, and sit between the values of a
    discrete column, as a tree's), and a random sign: its logit becomes
    ``sign * slope * (d . x - threshold) / std(d . x)`` on top of the uniform
    initialization of its weights (its bias is replaced). These splits start
    axis-aligned and sharp (10 % to 90 % over 0.44 standard deviations), the
    others soft and oblique; training then moves and bends both. A tree whose
    directions are all constant keeps its uniform start. Draws from
    ``generator`` only; the symmetry ops of the architectures are untouched
    (they act on the weights, whatever they are).

    Measured against the uniform start (the seven Tabular-Benchmark datasets,
    10,000 training rows, raw features, seeds 0 and 1, the classifier's
    defaults otherwise): +0.41 points of test accuracy on average, most on
    the datasets with sharp thresholds (bank-marketing +1.5, electricity
    +1.0, california +0.7), -0.8 on Diabetes130US; slopes 1, 3, 10 and 30
    were tried (10 best), and all splits on the data instead of half gave
    -0.03. On ``make_classification`` data (oblique classes, 4,000 training
    rows) it lost 0.4-0.5 points. Two models started this way are much
    further apart than two uniform starts (the weight-matching barrier grows
    several times), which is why it is not the default; see
    ``docs/benchmarks.md``, "The data-aware start of the splits".

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        Freshly initialized; its split weights and biases are changed in place.
    X : ndarray of shape (n_samples, F_enc)
        Encoded rows.
    rows : ndarray of int
        The training rows of ``X``: thresholds and scales come from them, or
        from ``DATA_INIT_ROWS`` of them drawn at random.
    directions, groups : ndarray
        From :func:`split_directions`.
    generator : torch.Generator
    mask : FeatureMask or None
        The per-tree feature subsets (None: every tree uses every feature).
    slope : float, default=DATA_INIT_SLOPE
    """
    M, N, _ = module.split_weight.shape
    rows = np.asarray(rows)
    if len(rows) == 0 or len(directions) == 0:
        return
    D = torch.as_tensor(directions, dtype=torch.float64)
    if len(rows) > DATA_INIT_ROWS:
        rows = rows[torch.randint(len(rows), (DATA_INIT_ROWS,), generator=generator).numpy()]
    proj = torch.as_tensor(np.asarray(X[rows], dtype=np.float64)) @ D.T  # (S, n_dir)
    std = proj.std(dim=0, correction=0)
    varies = std > 1e-6 * (1 + proj.abs().amax(dim=0))
    groups = torch.as_tensor(groups)
    # a column drawn uniformly among the tree's (those that vary), then one of its directions
    n_varying = torch.zeros(int(groups.max()) + 1, dtype=torch.float64).index_add_(
        0, groups, varies.to(torch.float64))
    allowed = (varies / n_varying[groups].clamp(min=1)).expand(M, -1)
    if mask is not None:  # a direction's columns are all of one input column
        allowed = allowed * mask.mask.detach().cpu().to(torch.float64)[:, D.abs().argmax(dim=1)]
    trees = allowed.sum(dim=1) > 0
    if not bool(trees.any()):
        return
    keep = torch.rand((int(trees.sum()), N), generator=generator) >= DATA_INIT_FRACTION
    probs = allowed[trees].repeat_interleave(N, dim=0)  # (M' * N, n_dir)
    chosen = torch.multinomial(probs, 1, generator=generator).view(-1, N)
    sign = torch.rand(chosen.shape, generator=generator, dtype=torch.float64).lt(0.5) * 2.0 - 1
    # the threshold: halfway between a sampled row's value and the next distinct
    # value above it (below it for the largest), as a tree's thresholds sit between
    # the values of a discrete column; on a continuous column, at the row's value.
    # The neighbours of every (direction, row) from one sort: memory O(n_dir * S).
    values = proj.T.contiguous()  # (n_dir, S)
    ordered = values.sort(dim=1).values
    inf = torch.full((len(values), 1), float("inf"), dtype=values.dtype)
    above = torch.cat([ordered, inf], dim=1).gather(
        1, torch.searchsorted(ordered, values, right=True))
    lower = torch.searchsorted(ordered, values, right=False) - 1
    below = ordered.gather(1, lower.clamp(min=0))
    neighbour = torch.where(torch.isfinite(above), above, below)
    row = torch.randint(len(proj), (chosen.numel(),), generator=generator)
    at = values[chosen.ravel(), row]
    threshold = (at + neighbour[chosen.ravel(), row]).div(2).view(chosen.shape)
    d = D[chosen.ravel()]  # (M' * N, F_enc)
    scale = sign * slope / std[chosen]  # (M', N)
    with torch.no_grad():
        w, b = module.split_weight, module.split_bias
        add = (scale.reshape(-1, 1) * d).view(-1, N, d.shape[1])
        add[keep] = 0
        new_b = (-scale * threshold).to(b.dtype).to(b.device)
        new_b[keep.to(b.device)] = b[trees][keep.to(b.device)]
        w[trees] += add.to(w.dtype).to(w.device)
        b[trees] = new_b
    if mask is not None:
        mask.apply(module)

"""One fit of a soft tree ensemble, as functions of its state.

The estimators validate their input, build the fitted objective
(:mod:`._objective`), the input encoder and a :class:`FitState` (the encoded
rows, targets, weights, split, generator, recipe, plan, architecture and
device of this fit), then call :func:`run_fit`, which grows the teacher,
starts the model, draws the feature mask, assembles Adam, the schedule and the
callbacks, and trains. Every step here is a function of ``(state, objective,
encoder)``: nothing calls back into the estimator, and nothing here imports it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..model._architectures import MAX_LEAVES_PER_TREE
from ..model._inputs import Inputs
from ..utils._progress import ProgressLog
from ._boosting import feature_gains, grow_oblivious_trees
from ._objective import Teacher
from ._plan import n_classes_of, teacher_trees
from ._start import (
    boosting_start,
    boosting_validation,
    data_start,
    init_module,
    probe_inputs,
    start_from_params,
)
from ._training import (
    SWA_START,
    DivergenceCheck,
    EarlyStoppingCallback,
    FeatureMask,
    ProgressCallback,
    TrainingHooks,
    TrainingView,
    ValidationLoss,
    WeightAverage,
    _export_adam_state,
    _FitTensors,
    _load_adam_state,
    _reference_loss,
    _warn_if_diverged,
    make_lr_scheduler,
    make_optimizer,
    resolve_max_features,
    train,
)

__all__: list = []


@dataclass(frozen=True)
class FitSettings:
    """The estimator's hyperparameters that the steps of a fit read (see the
    estimators for their meaning); ``name``: the estimator's class name, for
    the progress lines."""

    name: str
    arch: str
    n_estimators: int
    depth: int
    leaf_init: str
    split_init: Any
    learning_rate: float
    batch_size: int
    tol: float
    n_iter_no_change: int
    verbose: int
    ema_decay: float
    max_features: Any
    feature_selection: str
    scoring: Any
    n_members: int

    @classmethod
    def from_params(cls, params, name):
        """The settings of the hyperparameters ``params`` (``get_params()``)."""
        return cls(name=name, **{f.name: params[f.name] for f in dataclasses.fields(cls)
                                 if f.name != "name"})


@dataclass
class FitState:
    """What one fit works on, built once before training.

    Attributes
    ----------
    inputs : Inputs
        The encoded rows (:class:`~sktree_lmc.model._inputs.Inputs`: the
        trees' features and the additive term's codes, each its own array),
        the training rows then the user's validation rows.
    target, sample_weight : ndarray
        Their fitted targets (:meth:`Objective.fit_targets`) and weights.
    train_idx, val_idx : ndarray
        The training and validation rows of ``inputs``.
    n_outputs : int
        Outputs per leaf.
    generator : torch.Generator
        The fit's random draws.
    recipe : Recipe
        The resolved recipe.
    plan : FitPlan
        What the caller decided besides the hyperparameters.
    arch : TreeArchitecture
        The architecture.
    device : torch.device
        Where training runs.
    settings : FitSettings
        The hyperparameters.
    start : tuple or None
        ``(tree_params, optimizer_state)`` of the fitted model this fit
        continues (a warm start), else None.
    """

    inputs: Inputs
    target: np.ndarray
    sample_weight: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    n_outputs: int
    generator: Any
    recipe: Any
    plan: Any
    arch: Any
    device: Any
    settings: FitSettings
    start: tuple | None = None

    @property
    def warm(self):
        """Whether this fit continues a fitted model."""
        return self.start is not None


@dataclass
class FitHistory:
    """The curves a fit appends to (kept over warm-started fits)."""

    loss_curve: list
    validation_loss_curve: list | None = None
    validation_score: list | None = None


@dataclass
class FitResult:
    """What a fit leaves: the parameters, Adam's state (or None), the epochs
    run, the kept epoch and the closing line's stopper."""

    params: Any
    optimizer_state: dict | None
    n_iter: int
    best_epoch: int
    notes: dict = field(default_factory=dict)


# -- the teacher and the start ---------------------------------------------------------------
def check_boosted_depth(state):
    """Raise a ``ValueError`` that names the setting to change when the
    gradient-boosted trees of the teacher (``teacher_weight > 0``) or of
    the boosted start (``split_init="boosting"``), oblivious trees of
    ``depth``, would have more leaves than a tree may."""
    s, recipe = state.settings, state.recipe
    if s.depth < MAX_LEAVES_PER_TREE.bit_length():  # 2**depth <= the limit
        return
    causes = []
    if recipe.teacher_weight > 0:
        causes.append(f"the teacher (teacher_weight={recipe.teacher_weight:g}; set "
                      "teacher_weight=0 to train without it)")
    if s.split_init == "boosting" and not state.warm:
        causes.append("the boosted start (split_init='boosting'; use split_init='data' "
                      "or 'fan_in')")
    if causes:
        raise ValueError(
            f"depth={s.depth}: the gradient-boosted oblivious trees of "
            f"{' and of '.join(causes)} would have 2**{s.depth} leaves each, more than "
            f"the limit of {MAX_LEAVES_PER_TREE:,} (MAX_LEAVES_PER_TREE); the "
            f"arch={s.arch!r} model itself does not need them. Or use a smaller depth."
        )


def teacher_of(state, objective, encoder):
    """The teacher of ``teacher_weight > 0``, grown before the features of
    the trees are drawn (they are drawn by its gains): ``(trees, gains)``, or
    None without a teacher and with a new boosted start, whose trees are the
    teacher (:func:`start_model`)."""
    check_boosted_depth(state)
    if not state.recipe.teacher_weight > 0 or (state.settings.split_init == "boosting"
                                               and not state.warm):
        return None
    return grow_teacher(state, objective, encoder)


def grow_teacher(state, objective, encoder):
    """``(trees, gains)``: the gradient-boosted trees grown on the training
    rows (or the shards' shared trees of the plan), and the gain of their
    splits per encoded feature (None for shared trees without them)."""
    plan, s = state.plan, state.settings
    if plan.boosting_trees is not None:
        return objective.shared_trees(plan.boosting_trees), plan.feature_gains
    X, target, train_idx = state.inputs.X, state.target, state.train_idx
    sw = np.asarray(state.sample_weight, dtype=np.float64)
    n_trees = teacher_trees(s.n_estimators, n_classes_of(objective))
    gains = np.zeros((n_trees, s.depth))
    trees = grow_oblivious_trees(
        np.asarray(X[train_idx], dtype=np.float64), target[train_idx],
        sw[train_idx], loss=objective.loss, n_trees=n_trees, depth=s.depth,
        n_outputs=state.n_outputs, generator=state.generator, gains=gains,
        validation=boosting_validation(X, target, sw, state.val_idx))
    return trees, feature_gains(trees[1], gains, encoder.n_features_out_)


def new_module(state, encoder):
    """The module to train: the fitted parameters of a warm start, else
    freshly initialized (draws from the generator)."""
    s = state.settings
    if state.warm:
        return start_from_params(state.arch, state.start[0], encoder, state.device)
    return init_module(state.arch, s.n_estimators, encoder, state.n_outputs, state.generator,
                       state.device, leaf_init=s.leaf_init, split_init=s.split_init)


def feature_mask(state, encoder, module, gains=None):
    """The per-tree feature mask (:class:`FeatureMask`, or None), applied to
    ``module``: drawn for a new model, by the teacher's ``gains`` per
    encoded feature when there are some and ``feature_selection="auto"``,
    recovered from the zero weights when warm-started."""
    s = state.settings
    if s.max_features is None:
        return None
    if state.warm:
        params = state.start[0]
        return FeatureMask.from_params(params.split_weight, state.device, params.additive,
                                       encoder.additive_offsets_)
    mask = None
    groups = encoder.feature_groups_
    if gains is not None and s.feature_selection == "auto":
        mask = FeatureMask.guided(
            state.generator, s.n_estimators, groups, gains, s.max_features, state.device,
            additive_sources=encoder.additive_sources_,
            additive_offsets=encoder.additive_offsets_)
    if mask is None:
        k = resolve_max_features(s.max_features, encoder.n_features_in_)
        mask = FeatureMask.draw(state.generator, s.n_estimators, groups, k, state.device)
    if mask is not None:
        mask.apply(module)
    return mask


def start_model(state, objective, encoder, module, mask, teacher=None):
    """The data-aware starts of a new model (``split_init="data"`` or
    ``"boosting"``) and the teacher's targets (``teacher``: see
    :func:`teacher_of`); returns whether the model starts from boosted trees,
    and the training targets."""
    s, recipe, target = state.settings, state.recipe, state.target
    X, split = state.inputs.X, (state.train_idx, state.val_idx)
    if s.split_init == "data" and not state.warm:
        data_start(module, X, state.train_idx, encoder, state.generator, mask)
    boosted = s.split_init == "boosting" and not state.warm
    if boosted:
        sw = np.asarray(state.sample_weight, dtype=np.float64)
        start_trees = boosting_start(
            module, state.arch, X, target, sw, split, loss=objective.loss, mask=mask,
            generator=state.generator,
            trees=objective.shared_trees(state.plan.boosting_trees))
        if recipe.teacher_weight > 0:
            # the teacher is the boosted start's trees when they were grown on every
            # column (the same boosting on the same rows): they are not grown twice
            if start_trees is None:
                start_trees = grow_teacher(state, objective, encoder)[0]
            teacher = (start_trees, None)
    if teacher is not None:
        Xe = np.asarray(X[state.train_idx], dtype=np.float64)
        target = objective.distilled(Xe, target, state.train_idx, recipe.teacher_weight,
                                     Teacher.of(teacher[0]))
    return boosted, target


def with_teacher_rows(state, objective, encoder, target):
    """``(state, target)`` with the extra rows of ``teacher_rows`` (the
    resolved recipe's) appended to the training rows, when this fit has a
    teacher (``teacher_weight > 0``): ``teacher_rows`` times the training
    rows, drawn from the encoder's joint column distribution
    (:func:`~._start.probe_inputs`, seeded by a draw of the fit's generator),
    their targets the teacher's alone (:meth:`Objective.teacher_labelled`),
    their weight the training rows' mean weight. The validation rows stay
    the same; without extra rows, ``state`` and ``target`` unchanged and
    nothing drawn."""
    n_train = len(state.train_idx)
    n_extra = int(round(state.recipe.teacher_rows * n_train))
    if not (n_extra > 0 and state.recipe.teacher_weight > 0 and objective.teachers):
        return state, target
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=state.generator))
    extra = probe_inputs(encoder, n_extra, state.inputs, state.train_idx, seed)
    labels = objective.teacher_labelled(np.asarray(extra.X, dtype=np.float64))
    labels = np.asarray(labels, dtype=target.dtype).reshape((n_extra,) + target.shape[1:])
    sw = np.asarray(state.sample_weight)
    n = state.inputs.n_rows
    state = dataclasses.replace(
        state, inputs=Inputs.concatenate([state.inputs, extra]),
        sample_weight=np.concatenate(
            [sw, np.full(n_extra, sw[state.train_idx].mean(), dtype=sw.dtype)]),
        train_idx=np.concatenate([state.train_idx, np.arange(n, n + n_extra)]))
    return state, np.concatenate([target, labels])


# -- Adam, the schedule and the callbacks ----------------------------------------------------
def training_hooks(state, module, optimizer, mask=None):
    """The recipe around each Adam step: the feature ``mask``, the
    learning-rate schedule over this fit's steps (or over the plan's
    schedule window) and the weight average of ``module``."""
    recipe = state.recipe
    steps_per_epoch = -(-len(state.train_idx) // int(state.settings.batch_size))
    before, total = state.plan.schedule_window or (0, recipe.max_epochs)
    scheduler = make_lr_scheduler(
        optimizer, recipe.lr_schedule, recipe.warmup_fraction, steps_per_epoch * total,
        start_step=steps_per_epoch * before,
    )
    average = None
    if recipe.averaging is not None:
        average = WeightAverage(module, recipe.averaging, state.settings.ema_decay,
                                start_epoch=int(SWA_START * recipe.max_epochs))
    return TrainingHooks(scheduler, average, mask)


def trainer(state, view, module, mask):
    """What trains: ``(inputs, module, optimizer, hooks)``, the compact copies of
    ``view`` (on wide data, the entries the feature ``mask`` keeps) or the
    whole model, Adam with the state of a warm start, and the recipe's hooks."""
    inputs = state.inputs
    opt_state = state.start[1] if state.warm else None
    if view is not None:
        inputs, module, mask, opt_state = (view.inputs(inputs), view.module(module),
                                           view.mask(mask), view.state(opt_state))
    optimizer = make_optimizer(module, state.settings.learning_rate)
    if opt_state is not None:
        _load_adam_state(optimizer, opt_state)
    return inputs, module, optimizer, training_hooks(state, module, optimizer, mask)


def callbacks_of(state, objective, data, history, *, boosted, score_of=None, view=None,
                 clock=None):
    """The callbacks of the epoch loop (validation loss, divergence check,
    early stopping, progress) and the early-stopping one, or None.
    ``score_of``: see :func:`run_fit` (called with ``view`` when the fit
    early-stops); ``clock``: the steps before the loop, which the progress
    shows first and counts in its elapsed time."""
    s, early = state.settings, state.recipe.early_stopping
    if early and history.validation_loss_curve is None:
        history.validation_loss_curve, history.validation_score = [], []
    callbacks = []
    stopper = None
    if early:
        callbacks.append(ValidationLoss(objective.loss, data, state.val_idx,
                                        history.validation_loss_curve))
    callbacks.append(DivergenceCheck(s.learning_rate))
    if early:
        score = None if score_of is None else score_of(view)
        stopper = EarlyStoppingCallback(
            s.tol, s.n_iter_no_change, history.validation_score, score,
            score_start=boosted).start_on(objective.loss, data, state.val_idx)
        callbacks.append(stopper)
    log = ProgressLog(s.name, state.recipe.max_epochs, s.verbose, clock=clock)
    callbacks.append(ProgressCallback(log, show_score=early and s.scoring != "loss"))
    return callbacks, stopper


# -- the fit ---------------------------------------------------------------------------------
def encoding_note(state, n_columns, n_features):
    """What the encoding of ``n_columns`` input columns into ``n_features``
    did, for the line a verbose fit shows before its first epoch."""
    n_train = len(state.train_idx)
    n_val = state.inputs.n_rows - n_train  # the validation rows, held out or the user's
    if state.plan.validation is not None:
        rows = f"{n_train} training rows and {n_val} validation rows"
    elif n_val:
        rows = f"{n_train + n_val} rows ({n_val} held out for early stopping)"
    else:
        rows = f"{n_train} rows"
    return f"encoded {rows} of {n_columns} columns into {n_features} features"


def start_note(state, mask, teachers, extra_rows=0):
    """What the start did (the boosted start, the teacher, the ``extra_rows``
    of ``teacher_rows``, the columns ``mask`` drew by the teacher's gains),
    or None."""
    s, notes = state.settings, []
    if s.split_init == "boosting" and not state.warm:
        notes.append("boosted start")
    if state.recipe.teacher_weight > 0 and teachers:
        kept = len(teachers[0][1])
        if state.plan.boosting_trees is not None:
            notes.append(f"the shards' shared teacher: {kept} boosted trees")
        else:
            notes.append(f"grew the teacher: {kept} boosted trees of depth {s.depth}"
                         + (f" (the first {kept} of {s.n_estimators} kept on the "
                            "validation rows)" if kept < s.n_estimators else ""))
        if extra_rows:
            notes.append(f"{extra_rows} more training rows labelled by the teacher alone")
    elif s.split_init == "data" and not state.warm:
        notes.append("data-aware start of the splits")
    if mask is not None and mask.note:
        notes.append(mask.note)
    return "; ".join(notes) or None


def fit_summary(state, history, stopper, n_iter, best_epoch):
    """The closing line of a verbose fit."""
    if stopper is None:
        return f"{n_iter} epochs, training loss {history.loss_curve[-1]:.5f}"
    stopped = "stopped early" if n_iter < state.recipe.max_epochs else "ran all epochs"
    if best_epoch == 0:
        return f"{stopped} after {n_iter} epochs; kept the boosted start"
    best = history.validation_score[-n_iter + best_epoch - 1]
    scoring = state.settings.scoring
    what = "validation loss" if scoring == "loss" else "validation score"
    value = -best if scoring == "loss" else best
    return (f"{stopped} after {n_iter} epochs; kept epoch {best_epoch} "
            f"({what} {value:.5f})")


def run_fit(state, objective, encoder, history, *, score_of=None, clock=None):
    """Train the model of ``state`` on ``objective``'s loss; returns a
    :class:`FitResult` and appends to ``history``. ``score_of``: a function
    ``view -> (module -> score)`` for a ``scoring`` other than ``"loss"``
    (None: the loss); ``clock``: the steps so far (a
    :class:`~sktree_lmc.utils._progress.Stopwatch`)."""
    s = state.settings
    module = new_module(state, encoder)
    teacher = teacher_of(state, objective, encoder)
    mask = feature_mask(state, encoder, module,
                        gains=None if teacher is None else teacher[1])
    boosted, target = start_model(state, objective, encoder, module, mask, teacher)
    n_rows = state.inputs.n_rows
    state, target = with_teacher_rows(state, objective, encoder, target)
    if clock is not None:
        clock.lap(start_note(state, mask, objective.teachers,
                             extra_rows=state.inputs.n_rows - n_rows))
    view = TrainingView.of(mask, encoder)
    inputs, module, optimizer, hooks = trainer(state, view, module, mask)
    data = _FitTensors.from_arrays(inputs, target, state.sample_weight, state.device)
    reference_loss = _reference_loss(module, objective.loss, data, state.train_idx,
                                     s.batch_size, state.n_outputs)
    callbacks, stopper = callbacks_of(state, objective, data, history, boosted=boosted,
                                      score_of=score_of, view=view, clock=clock)
    model, n_iter = train(
        module, optimizer, objective.loss, data, state.train_idx, batch_size=s.batch_size,
        max_epochs=state.recipe.max_epochs, generator=state.generator, hooks=hooks,
        n_members=s.n_members, callbacks=callbacks, loss_curve=history.loss_curve)
    _warn_if_diverged(history.loss_curve, reference_loss, s.learning_rate)
    best = n_iter
    if stopper is not None and stopper.best_epoch is not None:
        best = stopper.best_epoch
    callbacks[-1].log.close(fit_summary(state, history, stopper, n_iter, best))
    params = model.to_params()
    opt_state = _export_adam_state(optimizer) if state.recipe.keep_optimizer_state else None
    if view is not None:
        params, opt_state = view.expand(params), view.state(opt_state, expand=True)
    return FitResult(params, opt_state, n_iter, best)


"""The training step of the numba engine without autograd, for the built-in losses.

Inside the numba engine's training loop (:func:`sktree_lmc.model._kernel.training_loop`)
a step of the reference path (:func:`._training._train_step`) runs the fused
kernel of the trees through torch's autograd: the module's forward, the
additive term, the loss, ``backward``, the gradient mask, Adam, the schedule
and the weight average, each a few torch or NumPy calls of 5-40 us, about
as much time as the kernel itself on the default model. :class:`FastStep`
takes the same step on NumPy views of the same tensors, in compiled calls
around the kernel's forward and backward passes: the minibatch's rows
gathered in the kernel's blocked layout, the loss and its gradient with
respect to the outputs (with the additive term and its table's gradient),
and one Adam step of every parameter fused with the moving average. With
``n_threads > 1`` they run as tasks over the kernel's threads: groups of
blocks of rows, then parts of the parameters (:meth:`FastStep.step`), with
the same sums in the same order as one thread.

It covers what the default fits train: the module of the estimators (any
architecture the kernel runs, with or without its additive table), one
member, the softmax cross-entropy (class indices, or the teacher's
probabilities, with label smoothing) and the squared error, the package's
Adam with its two groups, any learning-rate schedule, the feature mask, and
no weight average, SWA or EMA. Elsewhere (GPUs, another loss, members, a
torch optimizer) :meth:`FastStep.of` returns None and the reference path
runs. The results are the reference path's up to float32 rounding (the
loss's sums and exponentials round in another order;
``tests/test_fast_step.py``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..model import _kernel
from ..model._forward import SoftTreeEnsembleModule
from ._adam import Adam, _scalar_dtype
from ._losses import CrossEntropy, SquaredError

__all__: list = []

#: Whether :meth:`FastStep.of` may return a fast step (the tests compare it
#: with the reference path by turning it off).
ENABLED = True

_COMPILED = None


def _compiled():
    """:mod:`._step_numba` (imported at the first step: it needs numba)."""
    global _COMPILED
    if _COMPILED is None:
        from . import _step_numba

        _COMPILED = _step_numba
    return _COMPILED


def _flat(t):
    """The flat NumPy view of a contiguous CPU tensor (shares its memory)."""
    return t.detach().view(-1).numpy()


def _cpu_float32(*tensors):
    return all(t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous()
               for t in tensors)


class FastStep:
    """Training steps of ``module`` without autograd (see the module docstring).

    Build with :meth:`of`; :meth:`epoch` runs the steps of one epoch.
    """

    def __init__(self, module, optimizer, loss, data, hooks):
        self.module, self.optimizer, self.data, self.hooks = module, optimizer, data, hooks
        self.kind, self.smoothing = loss
        target = data.target
        if self.kind and target.dim() == 1:  # class indices: one-hot (smoothed later)
            C = module.leaf_value.shape[2]
            onehot = np.zeros((len(target), C), dtype=np.float32)
            onehot[np.arange(len(target)), target.numpy()] = 1.0
            target = onehot
        else:
            target = np.ascontiguousarray(target.numpy(), dtype=np.float32)
        self.targets = (target, np.ascontiguousarray(data.weight.numpy()))
        self.X = np.ascontiguousarray(data.X.numpy())
        self.fmask = _kernel._feature_mask(module.split_weight)
        self._buffers = {}
        self._plans = {}

    @classmethod
    def of(cls, module, optimizer, loss_fn, data, hooks, n_members=1):
        """The fast step of this training, or None where the reference path
        must run: outside the numba engine's training loop, on another
        device or dtype, with another loss, module or optimizer, members, or
        a weight average other than the package's."""
        if not ENABLED or n_members != 1 or type(module) is not SoftTreeEnsembleModule:
            return None
        # the numba engine's training loop, and an input without gradient (its device
        # and dtype are checked with the parameters' below)
        if not _kernel.engine_active() or data.X.requires_grad:
            return None
        loss = _loss_kind(loss_fn)
        if loss is None:
            return None
        if not _cpu_float32(data.X, data.weight, *module.parameters()):
            return None
        if (module.additive is None) != (data.codes is None) or not all(
                p.requires_grad for p in module.parameters()):
            return None
        if data.codes is not None and data.codes.device.type != "cpu":
            return None
        scale = getattr(module, "additive_scale", None)
        if scale is not None and (scale.requires_grad or not _cpu_float32(scale)):
            return None
        if not _target_fits(data.target, loss[0], module.leaf_value.shape[2]):
            return None
        if _parameter_hypers(module, optimizer) is None or not _hooks_fit(module, hooks):
            return None
        return cls(module, optimizer, loss, data, hooks)

    # -- the arrays of a step ------------------------------------------------------
    def _bind(self):
        """The NumPy views of this epoch: the parameters, Adam's moments and
        step counts (created as :class:`._adam.Adam` creates them), the
        averaged parameters, and the gradients' buffers."""
        module, optimizer = self.module, self.optimizer
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for p in params:
            if p not in optimizer.state:
                optimizer.state[p] = {
                    "step": torch.tensor(0.0, dtype=_scalar_dtype(), device="cpu"),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
        states = [optimizer.state[p] for p in params]
        if not all(_cpu_float32(s["exp_avg"], s["exp_avg_sq"]) and s["step"].dtype ==
                   torch.float32 and s["exp_avg"].shape == p.shape
                   for s, p in zip(states, params)):
            return False
        grads = [np.zeros(tuple(p.shape), dtype=np.float32) for p in params]
        self.grads = grads
        self._plans = {}
        self.tensors = (tuple(_flat(p) for p in params), tuple(g.reshape(-1) for g in grads),
                        tuple(_flat(s["exp_avg"]) for s in states),
                        tuple(_flat(s["exp_avg_sq"]) for s in states))
        self.steps = tuple(s["step"].view(1).numpy() for s in states)
        #: elements per row of each parameter: Adam's parts of the additive
        #: table are whole rows, the rows of the table's gradient
        C = module.leaf_value.shape[2]
        self.units = tuple(C if n == 3 else 1 for n in range(len(params)))
        self._drivers = _kernel.row_drivers(module._steps, tuple(module.split_weight.shape))
        self.hyper = np.array([[g["lr"], *g["betas"], g["eps"]] for g in optimizer.param_groups
                               for _ in g["params"]], dtype=np.float64)
        #: (row of ``hyper``, its group) of every parameter
        self.lr_rows = [(n, g) for n, g in enumerate(
            k for k, group in enumerate(optimizer.param_groups) for _ in group["params"])]
        self.model = tuple(p.detach().numpy() for p in
                           (module.split_weight, module.split_bias, module.leaf_value))
        additive = module.additive
        if additive is None:
            C = module.leaf_value.shape[2]
            empty = np.zeros((0, C), dtype=np.float32)
            self.additive = (empty, np.zeros((0, 1), dtype=np.float32),
                             np.zeros((1, 0), dtype=np.int32), empty,
                             np.zeros(0, dtype=np.float32))
        else:
            scale = getattr(module, "additive_scale", None)
            mask = None if self.hooks is None or self.hooks.mask is None else \
                self.hooks.mask.additive
            self.additive = (
                additive.detach().numpy(),
                np.zeros((0, 1), np.float32) if scale is None else scale.detach().numpy(),
                self.data.codes.numpy(), grads[3],
                np.zeros(0, np.float32) if mask is None else
                np.ascontiguousarray(mask.detach().cpu().numpy(), dtype=np.float32))
        return True

    def _averages(self):
        """The averaged parameters the EMA updates this step, and the weight
        of the new values (-1: none; the first update is the average's own,
        a copy)."""
        average = None if self.hooks is None else self.hooks.average
        if average is None or average.kind != "ema":
            return self.tensors[0], -1.0
        n = int(self.counter[0])
        if n == 0:
            return None, -1.0
        return self.avg, 1.0 - average.decay_at(n)

    def _bind_average(self):
        average = None if self.hooks is None else self.hooks.average
        if average is None or average.kind != "ema":
            return
        self.counter = average.averaged.n_averaged.view(1).numpy()
        self.avg = tuple(_flat(a) for a in average.averaged.module.parameters())
        self.buffers = list(zip(average.averaged.module.buffers(), self.module.buffers()))

    def _buffer(self, key, shape):
        found = self._buffers.get(key)
        if found is None or found.shape != shape:
            found = self._buffers[key] = np.empty(shape, dtype=np.float32)
        return found

    # -- the steps -----------------------------------------------------------------
    def epoch(self, order, batch_size):
        """The steps of one epoch over the training rows ``order`` (int64, in
        their order) in minibatches of ``batch_size``; returns the mean
        training loss (minibatch losses weighted by minibatch size), or None
        (nothing done) where the optimizer's state does not fit."""
        if not self._bind():
            return None
        self._bind_average()
        total, count = 0.0, 0
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            total += self.step(idx) * len(idx)
            count += len(idx)
        average = None if self.hooks is None else self.hooks.average
        if average is not None and average.kind == "ema":
            with torch.no_grad():
                for b_avg, b_cur in self.buffers:
                    b_avg.copy_(b_cur)
        return total / count

    def step(self, idx):
        """One Adam step on the weighted mean loss of rows ``idx`` (int64
        array); returns the loss.

        The step runs as tasks (:func:`sktree_lmc.model._kernel.run_tasks`,
        over the kernel's threads): first over groups of blocks of
        :data:`~sktree_lmc.model._kernel.ROW_BLOCK` rows, each gathering its
        rows, running the trees' forward pass, the loss's gradient and the
        backward pass into gradients of its own per block; then over parts of
        the parameters, each summing the blocks' gradients in block order,
        computing the additive table's gradient on its rows of the table and
        taking Adam's step on its part. The sums run in the same order
        whatever the number of tasks, so one thread or several give the same
        parameters, bit for bit."""
        nb = _compiled()
        n_blocks = -(-len(idx) // _kernel.ROW_BLOCK)
        tasks = min(_kernel._n_threads(), n_blocks)
        plan = self._plan(n_blocks, tasks)
        rows, (batch, grads, adam) = plan
        _kernel.run_tasks(lambda g: self._rows_task(idx, *rows[g]), tasks)
        hyper = self.hyper
        param_groups = self.optimizer.param_groups
        for n, g in self.lr_rows:
            hyper[n, 0] = param_groups[g]["lr"]
        averages, ema = self._averages()
        tensors, steps, units = adam
        finish = ((batch[0], idx, *batch[1:]), self.additive, grads,
                  (tensors, steps, hyper, tensors[0] if averages is None else averages, ema,
                   units))
        losses = [0.0] * tasks

        def finish_task(k):
            losses[k] = nb.finish_step((k, tasks), *finish)

        _kernel.run_tasks(finish_task, tasks)
        for step in steps:
            step[0] += 1.0
        hooks = self.hooks
        if hooks is not None:
            if hooks.scheduler is not None:
                hooks.scheduler.step()
            average = hooks.average
            if average is not None and average.kind == "ema":
                if averages is None:
                    average.after_step(self.module)  # the first update: a copy
                else:
                    self.counter[0] += 1
                    average.started = True
        return losses[0]

    def _plan(self, n_blocks, tasks):
        """The arrays of a step of ``n_blocks`` blocks of rows in ``tasks``
        tasks, made once per epoch (:meth:`_bind` forgets them): per row
        task, the arguments of :meth:`_rows_task`; then those of
        :func:`._step_numba.finish_step` but for the rows and Adam's
        hyperparameters (``(Gb, lb, weight)``, the gradients' blocks, and
        ``(tensors, steps, units)``)."""
        key = (n_blocks, tasks)
        if key in self._plans:
            return self._plans[key]
        W, bias, pi = self.model
        M, N, F = W.shape
        kept = 2 * N if _kernel._oblivious_depth(self.module._steps, N) is None else N
        RB = _kernel.ROW_BLOCK
        C = pi.shape[2]
        Xb = self._buffer(("X", n_blocks), (n_blocks, F, RB))
        S = self._buffer(("S", n_blocks), (n_blocks, M, kept, RB))
        Gb = self._buffer(("G", n_blocks), (n_blocks, C, RB))
        lb = self._buffer(("lb", n_blocks), (n_blocks * RB,))
        blocks = tuple(self._buffer((name, n_blocks), (n_blocks, p.size))
                       for name, p in (("gW", W), ("gb", bias), ("gpi", pi)))
        n_chunks = len(_kernel._chunk_bounds(M)) - 1
        groups = [n_blocks * g // tasks for g in range(tasks + 1)]
        rows = []
        for g in range(tasks):
            lo, hi = groups[g], groups[g + 1]
            parts = self._buffer(("parts", n_blocks, g), (n_chunks, hi - lo, C, RB))
            grads = tuple(b[lo:hi].reshape((hi - lo,) + p.shape)
                          for b, p in zip(blocks, (W, bias, pi)))
            rows.append(((lo * RB, hi * RB, lo), (Xb[lo:hi], S[lo:hi], parts),
                         (Gb, lb, Gb[lo:hi]), (*grads, self.fmask)))
        finish = ((Gb, lb, self.targets[1]), (blocks, n_blocks, self.tensors[1][:3]),
                  (self.tensors, self.steps, self.units))
        plan = self._plans[key] = (rows, finish)
        return plan

    def _rows_task(self, idx, span, kept, sink, grads):
        """A task of a step's rows (:meth:`step`): rows ``idx[span[0] :
        span[1]]`` (blocks from ``span[2]``) gathered, forward, the loss's
        gradient, and backward into the blocks' own gradients; ``kept``:
        ``(Xb, S, parts)`` of these blocks, ``sink``: ``(Gb, lb)`` of the step
        and ``Gb`` of these blocks, ``grads``: the blocks' gradients and the
        feature mask (:func:`sktree_lmc.model._kernel.row_drivers`)."""
        nb = _compiled()
        start, stop, first = span
        Xb, S, parts = kept
        Gb, lb, Gk = sink
        forward, backward = self._drivers
        nb.gather_blocked(self.X, idx[start:stop], Xb)
        parts.fill(0.0)
        forward(Xb, self.model, (parts, S))
        nb.objective_rows(parts, (idx, first), self.targets, self.additive,
                          (self.kind, self.smoothing), (Gb, lb))
        backward((Xb, Gk, S), self.model, grads)


def _loss_kind(loss_fn):
    """``(softmax, label_smoothing)`` of the built-in losses the fast step
    computes (``softmax``: the cross-entropy, else the squared error), else
    None."""
    if type(loss_fn) is CrossEntropy:
        return True, float(loss_fn.label_smoothing)
    if type(loss_fn) is SquaredError:
        return False, 0.0
    return None


def _target_fits(target, kind, C):
    """Whether the encoded targets are what the loss reads: class indices
    (int64) or probabilities (float32, one per output) for the softmax,
    float32 targets (one per output) for the squared error."""
    if target.device.type != "cpu":
        return False
    if target.dim() == 1:
        return kind and target.dtype == torch.int64 and (
            len(target) == 0 or bool(((target >= 0) & (target < C)).all()))
    return target.dim() == 2 and target.shape[1] == C and target.dtype == torch.float32


def _parameter_hypers(module, optimizer):
    """The package's Adam over the groups of
    :func:`._training.make_optimizer` (without weight decay), or None."""
    if type(optimizer) is not Adam:
        return None
    expected = [[module.split_weight, module.split_bias, module.leaf_value]]
    if module.additive is not None:
        expected.append([module.additive])
    groups = optimizer.param_groups
    if len(groups) != len(expected) or any(
            len(g["params"]) != len(e) or any(p is not q for p, q in zip(g["params"], e))
            for g, e in zip(groups, expected)):
        return None
    if any(g.get("weight_decay", 0.0) != 0.0 for g in groups):
        return None
    return groups


def _hooks_fit(module, hooks):
    """Whether the hooks are the package's: a feature mask of the module's
    shapes, and a weight average of its parameters' shapes (or none)."""
    if hooks is None:
        return True
    mask = hooks.mask
    if mask is not None:
        M, _, F = module.split_weight.shape
        if tuple(mask.mask.shape) != (M, F):
            return False
        if mask.additive is not None and (
                module.additive is None or tuple(mask.additive.shape) != (len(module.additive),)):
            return False
    average = hooks.average
    if average is not None and average.kind == "ema":
        avg = list(average.averaged.module.parameters())
        cur = list(module.parameters())
        if len(avg) != len(cur) or not _cpu_float32(*avg) or any(
                a.shape != c.shape for a, c in zip(avg, cur)):
            return False
    return True

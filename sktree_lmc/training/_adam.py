"""A minimal Adam and a multiplicative learning-rate schedule without
:class:`torch.optim.Optimizer`.

Constructing a :class:`torch.optim.Optimizer` (and stepping it) imports
``torch._dynamo`` (seconds, once per process) through the ``_disable_dynamo``
wrappers of its methods; :class:`torch.optim.lr_scheduler.LambdaLR` needs such
an optimizer. :class:`Adam` keeps the same ``param_groups`` and per-parameter
state (``step``, ``exp_avg``, ``exp_avg_sq``) and steps with torch's own
functional kernel :func:`torch.optim.adam.adam`, which does not import it, so a
step is bit-identical to :class:`torch.optim.Adam` with the default
hyperparameters (``foreach`` chosen by torch, as there: the multi-tensor kernel
on CUDA, the single-tensor one on CPU). Inside a training loop of the numba
engine (:func:`sktree_lmc.model._kernel.training_loop`), CPU float32 tensors
step through the compiled update of :func:`sktree_lmc.model._kernel.fused_adam`
instead: the same operations fused into one pass per tensor (equal up to
float32 rounding: torch's vectorized ``sqrt`` is not correctly rounded). :class:`LambdaSchedule` sets each
group's learning rate as :class:`~torch.optim.lr_scheduler.LambdaLR` does.
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam as _adam_kernel

from ..model import _kernel


def _scalar_dtype():
    """The dtype of ``step``, as torch's Adam keeps it (without capturable or
    fused): float64 under a float64 default dtype, else float32."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class Adam:
    """Adam (Kingma and Ba) over ``groups``, dicts with ``"params"`` and
    optionally ``"lr"`` (default ``lr``), as :class:`torch.optim.Adam` with
    ``weight_decay=0``, ``amsgrad=False`` and ``maximize=False``.

    ``state`` maps a parameter to its ``{"step", "exp_avg", "exp_avg_sq"}``
    (created at its first step with a gradient; ``step`` a scalar float tensor
    on the CPU). :meth:`state_dict` and :meth:`load_state_dict` use the layout
    of :meth:`torch.optim.Optimizer.state_dict` (parameters numbered in group
    order).
    """

    def __init__(self, groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        if isinstance(groups, torch.Tensor):
            raise TypeError("groups must be an iterable of tensors or of dicts.")
        groups = list(groups)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": 0.0}
        self.defaults = defaults
        self.param_groups = []
        for group in groups:
            params = group["params"]
            params = [params] if isinstance(params, torch.Tensor) else list(params)
            self.param_groups.append({**defaults, **group, "params": params})
        for group in self.param_groups:
            if not 0.0 <= group["lr"]:
                raise ValueError(f"Invalid learning rate: {group['lr']}")
        self.state = {}
        #: the compiled step's NumPy views of the parameters and their state
        #: (:func:`sktree_lmc.model._kernel.fused_adam`)
        self._fused_arrays = {}

    def _params(self):
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none=True):
        """Drop (or zero) the gradients of every parameter."""
        for p in self._params():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    @torch.no_grad()
    def step(self):
        """One Adam step of every parameter with a gradient (as
        :meth:`torch.optim.Adam.step`)."""
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients.")
                state = self.state.get(p)
                if state is None:
                    state = self.state[p] = {
                        "step": torch.tensor(0.0, dtype=_scalar_dtype(), device="cpu"),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                    }
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if not params:
                continue
            beta1, beta2 = group["betas"]
            if _kernel.fused_adam(params, grads, (exp_avgs, exp_avg_sqs), steps,
                                  (group["lr"], beta1, beta2, group["eps"]),
                                  cache=self._fused_arrays):
                continue  # the numba engine's training loop: one compiled pass per tensor
            _adam_kernel(params, grads, exp_avgs, exp_avg_sqs, [], steps,
                         amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
                         weight_decay=group["weight_decay"], eps=group["eps"],
                         maximize=False)

    def state_dict(self):
        """``{"state": {index: state}, "param_groups": [hyperparameters with
        "params" as indices]}`` (the state's tensors are not copied)."""
        index = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": ids})
        state = {index[id(p)]: dict(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a :meth:`state_dict` (as :meth:`torch.optim.Optimizer.load_state_dict`:
        the groups' hyperparameters are the saved ones; the moments are copied
        to each parameter's device and dtype)."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
                len(s["params"]) != len(g["params"]) for s, g in zip(saved, self.param_groups)):
            raise ValueError("loaded state dict does not match the optimizer's parameter groups")
        by_index = {}
        for s, group in zip(saved, self.param_groups):
            by_index.update(zip(s["params"], group["params"]))
            group.update({k: v for k, v in s.items() if k != "params"})
        self.state = {}
        for i, values in state_dict["state"].items():
            p = by_index[i]
            self.state[p] = {
                key: (torch.tensor(float(value), dtype=_scalar_dtype()) if key == "step"
                      else torch.as_tensor(value).detach().to(device=p.device, dtype=p.dtype,
                                                              copy=True))
                for key, value in values.items()
            }


class LambdaSchedule:
    """Each group's learning rate at its ``initial_lr`` (its learning rate when
    the schedule starts) times ``factor(k)`` after ``k`` calls of :meth:`step`,
    as :class:`torch.optim.lr_scheduler.LambdaLR` sets it; works on any
    optimizer with ``param_groups``."""

    def __init__(self, optimizer, factor):
        self.optimizer, self.factor = optimizer, factor
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self.step()

    def step(self):
        self.last_epoch += 1
        self._last_lr = []
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base_lr * self.factor(self.last_epoch)
            self._last_lr.append(group["lr"])

    def get_last_lr(self):
        return list(self._last_lr)

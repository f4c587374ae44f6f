"""The optimizer of the fits (:mod:`sktree_lmc.training._adam`): torch's Adam step and
LambdaLR's learning rates, bit for bit, without importing ``torch._dynamo``."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sktree_lmc.training._adam import Adam, LambdaSchedule
from sktree_lmc.model._architectures import get_architecture
from sktree_lmc.model._forward import SoftTreeEnsembleModule
from sktree_lmc.training._training import (
    _export_adam_state,
    _load_adam_state,
    lr_factor,
    make_lr_scheduler,
    make_optimizer,
)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def test_a_default_fit_does_not_import_dynamo():
    """Constructing or stepping a torch.optim.Optimizer imports torch._dynamo
    (seconds, in the first fit of a process); the fit's optimizer does not."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import sktree_lmc
        rng = np.random.RandomState(0)
        X = rng.standard_normal((60, 3))
        y = (X[:, 0] > 0).astype(int)
        sktree_lmc.SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=2,
                                              device="cpu").fit(X, y)
        assert "torch._dynamo" not in sys.modules, "torch._dynamo was imported"
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def _two_groups(device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(4, 3, 5), (4, 3), (4, 4, 2)], [(7, 2)]
    return [[torch.randn(s, generator=gen).to(device).requires_grad_() for s in group]
            for group in shapes]


def _grads(params, step):
    gen = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).to(p.device)


@pytest.mark.parametrize("device", DEVICES)
def test_steps_are_torch_adams_bit_for_bit(device):
    """Two groups at different rates, a LambdaLR-like schedule: the parameters
    and the moments equal torch.optim.Adam's after every step."""
    ours, theirs = _two_groups(device), _two_groups(device)
    opt = Adam([{"params": ours[0]}, {"params": ours[1], "lr": 0.003}], lr=0.05)
    ref = torch.optim.Adam([{"params": theirs[0]}, {"params": theirs[1], "lr": 0.003}], lr=0.05)

    def factor(step):
        return lr_factor(step, "cosine", 3, 12)

    sched = LambdaSchedule(opt, factor)
    ref_sched = torch.optim.lr_scheduler.LambdaLR(ref, factor)
    flat, ref_flat = ours[0] + ours[1], theirs[0] + theirs[1]
    for step in range(12):
        assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in ref.param_groups]
        opt.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        assert all(p.grad is None for p in flat)
        _grads(flat, step)
        _grads(ref_flat, step)
        opt.step()
        ref.step()
        sched.step()
        ref_sched.step()
        for p, q in zip(flat, ref_flat):
            assert torch.equal(p, q)
            for key in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(opt.state[p][key], ref.state[q][key])
    assert sched.get_last_lr() == ref_sched.get_last_lr()


def test_a_parameter_without_a_gradient_is_left_alone():
    a, b = _two_groups("cpu")[0][:2]
    opt = Adam([a, b], lr=0.1)
    before = b.detach().clone()
    a.grad = torch.ones_like(a)
    opt.step()
    assert torch.equal(b, before) and b not in opt.state and a in opt.state


def _module(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return SoftTreeEnsembleModule(get_architecture("oblivious", 2), 4, 3, 2, n_additive=5,
                                  generator=gen)


def _steps(module, opt, n, start=0):
    for step in range(start, start + n):
        opt.zero_grad(set_to_none=True)
        _grads([module.split_weight, module.split_bias, module.leaf_value, module.additive],
               step)
        opt.step()


def test_exported_state_round_trips_and_continues_the_run():
    """_export_adam_state / _load_adam_state: a fresh optimizer loaded with the
    exported state continues exactly as the original (and as torch's Adam)."""
    module, other = _module(), _module()
    opt = make_optimizer(module, 0.05)
    _steps(module, opt, 3)
    state = _export_adam_state(opt)
    assert state["step"] == 3

    other.load_state_dict(module.state_dict())
    loaded = make_optimizer(other, 0.05)
    assert _export_adam_state(loaded) is None
    _load_adam_state(loaded, state)
    again = _export_adam_state(loaded)
    for key in ("exp_avg", "exp_avg_sq"):
        for name in ("split_weight", "split_bias", "leaf_value", "additive"):
            a, b = getattr(state[key], name), getattr(again[key], name)
            assert np.array_equal(a, b)
    assert [g["lr"] for g in loaded.param_groups] == [g["lr"] for g in opt.param_groups]

    ref_module = _module()
    ref_module.load_state_dict(module.state_dict())
    ref = torch.optim.Adam([{"params": [ref_module.split_weight, ref_module.split_bias,
                                        ref_module.leaf_value]},
                            {"params": [ref_module.additive], "lr": 0.005}], lr=0.05)
    _load_adam_state(ref, state)
    sched = make_lr_scheduler(loaded, "cosine", 0.0, 10, start_step=3)
    ref_sched = make_lr_scheduler(ref, "cosine", 0.0, 10, start_step=3)
    for step in range(3, 6):
        _steps(other, loaded, 1, step)
        _steps(ref_module, ref, 1, step)
        sched.step()
        ref_sched.step()
    for name, p in other.named_parameters():
        assert torch.equal(p, dict(ref_module.named_parameters())[name]), name
    assert _export_adam_state(loaded)["step"] == 6


@settings(max_examples=30, deadline=None)
@given(n_rows=st.integers(1, 40), n_cols=st.integers(1, 3), seed=st.integers(0, 2**16),
       keep=st.floats(0.0, 1.0))
def test_stepping_the_kept_rows_alone_is_the_whole_step(n_rows, n_cols, seed, keep):
    """Adam on a table of the kept rows alone (what a ``TrainingView`` trains) gives the
    parameters and moments of those rows in the whole step of a table whose other rows
    never get a gradient (a feature mask's additive table), bit for bit, over several
    steps and a changing learning rate; the other rows never move."""
    gen = torch.Generator().manual_seed(seed)
    kept = torch.rand(n_rows, generator=gen) < keep
    start = torch.randn(n_rows, n_cols, generator=gen)
    other_start = torch.randn(3, generator=gen)
    whole = [start.clone().requires_grad_(True), other_start.clone().requires_grad_(True)]
    part = [start[kept].clone().requires_grad_(True), other_start.clone().requires_grad_(True)]
    opt_whole = Adam([{"params": [whole[1]]}, {"params": [whole[0]], "lr": 0.01}], lr=0.1)
    opt_part = Adam([{"params": [part[1]]}, {"params": [part[0]], "lr": 0.01}], lr=0.1)
    for step in range(4):
        grad = torch.randn(n_rows, n_cols, generator=gen) * kept[:, None]
        other = torch.randn(3, generator=gen)
        whole[0].grad, whole[1].grad = grad.clone(), other.clone()
        part[0].grad, part[1].grad = grad[kept].clone(), other.clone()
        for opt in (opt_whole, opt_part):
            for group in opt.param_groups:
                group["lr"] *= 0.5
        opt_whole.step()
        opt_part.step()
        assert torch.equal(part[0], whole[0][kept]) and torch.equal(part[1], whole[1])
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt_part.state[part[0]][key], opt_whole.state[whole[0]][key][kept])
    assert torch.equal(whole[0][~kept], start[~kept])  # never moved


def test_the_numba_engines_step_is_torchs_up_to_rounding():
    """Inside a training loop of the numba engine, CPU float32 parameters step through
    the compiled update (``_kernel.fused_adam``): torch's Adam up to float32 rounding
    (torch's vectorized sqrt is not correctly rounded), the step counts equal; a row
    whose gradient is always zero never moves, and a compact copy of the kept rows steps
    them bit for bit as the whole table does."""
    numba = pytest.importorskip("numba")  # noqa: F841
    from sktree_lmc.model import _kernel

    gen = torch.Generator().manual_seed(0)
    start = torch.randn(37, 2, generator=gen)
    kept = torch.rand(37, generator=gen) < 0.6
    ours, ref = start.clone().requires_grad_(True), start.clone().requires_grad_(True)
    part = start[kept].clone().requires_grad_(True)
    opt, ref_opt = Adam([ours], lr=0.05), torch.optim.Adam([ref], lr=0.05)
    part_opt = Adam([part], lr=0.05)
    calls = []
    original = _kernel.fused_adam

    def spy(*args, **kwargs):
        calls.append(original(*args, **kwargs))
        return calls[-1]

    with _kernel.training_engine("numba"):
        for step in range(20):
            grad = torch.randn(37, 2, generator=gen) * kept[:, None]
            ours.grad, ref.grad, part.grad = grad.clone(), grad.clone(), grad[kept].clone()
            _kernel.fused_adam = spy
            try:
                opt.step()
                part_opt.step()
            finally:
                _kernel.fused_adam = original
            ref_opt.step()
    assert len(calls) == 40 and all(calls)  # the compiled update ran every step
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-7)
    for key in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(opt.state[ours][key], ref_opt.state[ref][key])
    assert float(opt.state[ours]["step"]) == 20.0
    assert torch.equal(ours[~kept], start[~kept])  # never moved
    assert torch.equal(part, ours[kept])
    for key in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(part_opt.state[part][key], opt.state[ours][key][kept])


def test_the_compiled_step_follows_replaced_tensors():
    """The compiled step keeps NumPy views of a parameter and its state from step to
    step: a parameter given new storage and a state loaded anew are stepped, not the
    tensors they replaced (the same values as an optimizer that never held views)."""
    pytest.importorskip("numba")
    from sktree_lmc.model import _kernel

    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(5, 3, generator=gen) for _ in range(4)]
    start = torch.randn(5, 3, generator=gen)

    def run(replace):
        p = start.clone().requires_grad_(True)
        opt = Adam([p], lr=0.1)
        with _kernel.training_engine("numba"):
            for step, g in enumerate(grads):
                p.grad = g.clone()
                opt.step()
                if replace and step == 1:
                    p.data = p.data.clone()  # new storage
                    saved = opt.state_dict()
                    opt.load_state_dict(saved)  # new moment tensors
                    p.data.add_(1.0)
                elif step == 1:
                    with torch.no_grad():
                        p.add_(1.0)
        return p.detach(), opt.state[p]["exp_avg"]

    replaced, reference = run(True), run(False)
    assert torch.equal(replaced[0], reference[0]) and torch.equal(replaced[1], reference[1])

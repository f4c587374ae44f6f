"""The numba engine's training step without autograd (``training/_fast_step.py``)
takes the reference step's (autograd through the fused kernel) up to float32
rounding, and stands aside where it does not cover a fit."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_classification, make_regression

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
from sktree_lmc.model import _kernel
from sktree_lmc.training import _fast_step
from sktree_lmc.training._losses import CrossEntropy, SquaredError

pytest.importorskip("numba")


def _fit(make, X, y, enabled, monkeypatch, engine="numba"):
    monkeypatch.setattr(_fast_step, "ENABLED", enabled)
    calls = []
    real = _fast_step.FastStep.epoch

    def epoch(self, order, batch_size):
        calls.append(len(order))
        return real(self, order, batch_size)

    monkeypatch.setattr(_fast_step.FastStep, "epoch", epoch)
    with _kernel.training_engine(engine):
        model = make().fit(X, y)
    return model, calls


def _params(model):
    p = model.tree_params_
    names = ("split_weight", "split_bias", "leaf_value", "additive")
    return [np.asarray(getattr(p, n)) for n in names if getattr(p, n) is not None]


def _assert_close(fast, ref):
    for a, b in zip(fast, ref):
        scale = max(1.0, float(np.abs(b).max()))
        assert float(np.abs(a - b).max()) <= 1e-5 * scale


CASES = {
    # the default recipe (teacher's probabilities, label smoothing "auto", EMA, mask,
    # additive table of several resolutions, cosine schedule) on two classes
    "binary": (SoftTreeEnsembleClassifier, dict(n_classes=2)),
    # class indices (no teacher), explicit smoothing, three classes, no average
    "multiclass": (SoftTreeEnsembleClassifier,
                   dict(n_classes=3, teacher_weight=0.0, label_smoothing=0.1, averaging=None)),
    "regression": (SoftTreeEnsembleRegressor, dict()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_step_fits_as_the_reference_step(case, monkeypatch):
    cls, params = CASES[case]
    params = dict(params)
    if cls is SoftTreeEnsembleClassifier:
        X, y = make_classification(600, 6, n_informative=4, n_classes=params.pop("n_classes"),
                                   random_state=0)
    else:
        X, y = make_regression(600, 6, noise=5.0, random_state=0)

    def make():
        return cls(n_estimators=16, depth=3, max_epochs=2, batch_size=100, random_state=0,
                   early_stopping=False, **params)

    fast, calls = _fit(make, X, y, True, monkeypatch)
    assert calls == [600, 600]  # two epochs of the fast step
    ref, none = _fit(make, X, y, False, monkeypatch)
    assert none == []
    _assert_close(_params(fast), _params(ref))
    np.testing.assert_allclose(fast.loss_curve_, ref.loss_curve_, rtol=1e-5)


def test_objective_gradient_is_the_losses_gradient():
    from sktree_lmc.training import _step_numba as nb

    gen = torch.Generator().manual_seed(0)
    n, C, T, J = 300, 3, 40, 4
    out = torch.randn(n, C, generator=gen)
    table = torch.randn(T, C, generator=gen)
    scale = torch.rand(T, 1, generator=gen) + 0.5
    codes = torch.randint(0, T, (n, J), generator=gen, dtype=torch.int32)
    rowmask = (torch.rand(T, generator=gen) < 0.7).float()
    weight = torch.rand(n, generator=gen)
    idx = torch.randperm(n, generator=gen)[:200]
    probs = torch.softmax(torch.randn(n, C, generator=gen), dim=1)
    for softmax, loss_fn, target in [(True, CrossEntropy(0.1), probs),
                                     (False, SquaredError(), torch.randn(n, C, generator=gen))]:
        z = out[idx].clone().requires_grad_(True)
        tab = table.clone().requires_grad_(True)
        logits = z + (tab * scale)[codes[idx].long()].sum(dim=1)
        w = weight[idx]
        loss = (loss_fn(logits, target[idx]) * w).sum() / w.sum()
        loss.backward()
        Gb = _kernel.blocked(np.zeros((200, C), np.float32))
        gtable = np.empty((T, C), np.float32)
        value = nb.objective_gradient(
            _kernel.blocked(out[idx].numpy()), idx.numpy(), (target.numpy(), weight.numpy()),
            (table.numpy(), scale.numpy(), codes.numpy(), gtable, rowmask.numpy()),
            (softmax, getattr(loss_fn, "label_smoothing", 0.0)), Gb)
        assert value == pytest.approx(float(loss.detach()), rel=1e-5)
        np.testing.assert_allclose(_kernel.unblocked(Gb, 200), z.grad.numpy(), atol=1e-7,
                                   rtol=1e-4)
        np.testing.assert_allclose(gtable, (tab.grad * rowmask[:, None]).numpy(), atol=1e-7,
                                   rtol=1e-4)


@pytest.mark.parametrize("params", [dict(n_members=2), dict(loss="absolute_error")])
def test_reference_step_where_the_fast_step_does_not_cover(params, monkeypatch):
    X, y = make_regression(200, 4, random_state=0)
    _, calls = _fit(lambda: SoftTreeEnsembleRegressor(n_estimators=8, depth=2, max_epochs=1,
                                                      random_state=0, **params),
                    X, y, True, monkeypatch)
    assert calls == []


def test_no_fast_step_with_the_torch_engine(monkeypatch):
    X, y = make_classification(200, 4, random_state=0)
    _, calls = _fit(lambda: SoftTreeEnsembleClassifier(n_estimators=8, depth=2, max_epochs=1,
                                                       random_state=0),
                    X, y, True, monkeypatch, engine="torch")
    assert calls == []
    assert _fast_step.FastStep.of(torch.nn.Linear(2, 2), None, CrossEntropy(), None, None) is None


def test_the_steps_parts_give_the_whole_steps_bits():
    """The end of a step in parts (the additive table's gradient on ranges of
    its rows, Adam on parts of each parameter) gives the bits of the whole:
    what makes a fit's parameters the same with one thread or several."""
    from sktree_lmc.model import _fused_numba
    from sktree_lmc.training import _step_numba as nb

    gen = np.random.default_rng(1)
    n, C, T, J, B = 50, 2, 37, 4, 300
    f32 = np.float32
    table = gen.standard_normal((T, C)).astype(f32)
    scale = (gen.random((T, 1)) + 0.5).astype(f32)
    codes = gen.integers(-T, T, (n, J)).astype(np.int32)
    rowmask = (gen.random(T) < 0.7).astype(f32)
    idx = gen.integers(0, n, B)
    Gb = _kernel.blocked(gen.standard_normal((B, C)).astype(f32))
    whole = np.full((T, C), np.nan, f32)
    nb.scatter_table(Gb, idx, (table, scale, codes, whole, rowmask), (0, 1))
    expected = np.zeros((T, C), f32)  # row by row and code by code, as torch's index_put
    for b in range(B):
        for k in codes[idx[b]]:
            if rowmask[k]:
                expected[k] += _kernel.unblocked(Gb, B)[b] * scale[k, 0]
    np.testing.assert_allclose(whole, expected, rtol=1e-5, atol=1e-6)
    for n_parts in (2, 3):
        parted = np.full((T, C), np.nan, f32)
        for k in range(n_parts):
            nb.scatter_table(Gb, idx, (table, scale, codes, parted, rowmask), (k, n_parts))
        assert np.array_equal(parted, whole)

    sizes = (10, 7, 2 * T)  # the last a table of two columns: parts of whole rows
    units = (1, 1, C)

    def state():
        r = np.random.default_rng(2)
        return tuple(tuple(r.standard_normal(s).astype(f32) for s in sizes) for _ in range(3)) + (
            tuple(r.random(s).astype(f32) for s in sizes),)

    hyper = np.array([[0.01, 0.9, 0.999, 1e-8]] * 3)
    for ema in (-1.0, 0.3):
        reference, tensors = state(), state()
        avg_ref, avg = (tuple(a.copy() for a in reference[0]) for _ in range(2))
        steps_ref, steps = (tuple(np.full(1, 4.0, f32) for _ in sizes) for _ in range(2))
        for n in range(len(sizes)):  # the whole of each parameter: Adam, then the average
            _fused_numba.adam_update(tuple(t[n] for t in reference), steps_ref[n], hyper[n])
            if ema >= 0:
                _fused_numba.lerp_span(reference[0][n], avg_ref[n], ema, (0, sizes[n]))
        for k in range(3):
            nb.adam_part(tensors, steps, hyper, avg, ema, (units, (k, 3)))
        for step in steps:
            step[0] += 1.0
        for a, b in zip(reference + (avg_ref, steps_ref), tensors + (avg, steps)):
            for x, y in zip(a, b):
                assert np.array_equal(x, y)


def test_a_fit_with_an_additive_table_gives_the_same_parameters_with_one_thread_or_two(
        monkeypatch):
    """The step's tasks over blocks of rows (a minibatch of four blocks and
    the last of three, in two tasks) and parts of the parameters: the bits of
    one thread's step."""
    X, y = make_classification(900, 6, n_informative=4, n_classes=3, random_state=0)
    fits = []
    for threads in (1, 2):
        model, calls = _fit(lambda: SoftTreeEnsembleClassifier(
            n_estimators=16, max_epochs=2, random_state=0, n_threads=threads),
            X, y, True, monkeypatch)
        assert calls  # the fast step ran
        fits.append(_params(model))
    assert len(fits[0]) == 4  # the additive table too
    for a, b in zip(*fits):
        assert np.array_equal(a, b)

"""The steps of ``fit`` (validation split, train step, epoch, early stopping,
report), each tested on its own."""

import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from sktree_lmc.model._inputs import Inputs
from sktree_lmc.model._architectures import get_architecture
from sktree_lmc.model._forward import SoftTreeEnsembleModule
from sktree_lmc.utils._progress import ProgressLog
from sktree_lmc.training._training import (
    _EarlyStopping,
    _evaluate_loss,
    _FitTensors,
    _run_epoch,
    _train_step,
    _validation_split,
)


def _setup(n_samples=40, n_features=3, n_classes=2, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n_samples, n_features)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64) if n_classes == 2 else rng.randint(n_classes, size=n_samples)
    w = np.ones(n_samples, dtype=np.float32)
    gen = torch.Generator().manual_seed(seed)
    module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), 4, n_features, n_classes,
                                    generator=gen)
    optimizer = torch.optim.Adam(module.parameters(), lr=0.05)
    data = _FitTensors.from_arrays(Inputs(X), y, w, torch.device("cpu"))
    return module, optimizer, data, gen


def _ce(output, target):
    return F.cross_entropy(output, target, reduction="none")


@settings(max_examples=50, deadline=None)
@given(n_samples=st.integers(2, 500), fraction=st.floats(0.01, 0.99), seed=st.integers(0, 99))
def test_validation_split_partitions_the_samples(n_samples, fraction, seed):
    gen = torch.Generator().manual_seed(seed)
    n_val = max(1, int(round(fraction * n_samples)))
    if n_val >= n_samples:
        with pytest.raises(ValueError, match="validation_fraction"):
            _validation_split(n_samples, fraction, gen)
        return
    train, val = _validation_split(n_samples, fraction, gen)
    assert len(val) == n_val
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(n_samples))


def test_validation_split_without_early_stopping_draws_nothing():
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    train, val = _validation_split(7, None, gen)
    assert val is None and np.array_equal(train, np.arange(7))
    assert torch.equal(gen.get_state(), state)


def test_train_step_lowers_the_loss_on_its_batch():
    module, optimizer, data, _ = _setup()
    idx = torch.arange(40)
    first = _train_step(module, optimizer, _ce, data, idx)
    for _ in range(20):
        last = _train_step(module, optimizer, _ce, data, idx)
    assert last < first


def test_train_step_ignores_zero_weight_rows():
    module, optimizer, data, _ = _setup()
    weight = data.weight.clone()
    weight[20:] = 0.0
    data_w = data._replace(weight=weight)
    loss = _train_step(module, optimizer, _ce, data_w, torch.arange(40))
    module2, optimizer2, data2, _ = _setup()
    loss2 = _train_step(module2, optimizer2, _ce, data2, torch.arange(20))
    assert loss == pytest.approx(loss2, rel=1e-6)


def test_run_epoch_returns_the_size_weighted_mean_of_its_batch_losses(monkeypatch):
    module, optimizer, data, gen = _setup(n_samples=25)
    seen = []
    losses = iter([1.0, 2.0, 4.0])

    def fake_step(module, optimizer, loss_fn, data, idx, hooks=None, n_members=1):
        seen.append(idx.clone())
        return next(losses)

    monkeypatch.setattr("sktree_lmc.training._training._train_step", fake_step)
    mean = _run_epoch(module, optimizer, _ce, data, np.arange(5, 25), 8, generator=gen)
    assert [len(i) for i in seen] == [8, 8, 4]
    assert np.array_equal(np.sort(torch.cat(seen).numpy()), np.arange(5, 25))
    assert mean == pytest.approx((8 * 1 + 8 * 2 + 4 * 4) / 20)


def test_evaluate_loss_does_not_change_the_module():
    module, _, data, _ = _setup()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    loss = _evaluate_loss(module, _ce, data, np.arange(10))
    assert np.isfinite(loss) and loss > 0
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())


def test_early_stopping_keeps_the_best_state_and_counts_patience():
    module, _, _, _ = _setup()
    stopper = _EarlyStopping(tol=0.1, patience=2)
    stopper.update(1.0, module)
    best = {k: v.clone() for k, v in module.state_dict().items()}
    with torch.no_grad():
        for p in module.parameters():
            p.add_(1.0)
    stopper.update(0.95, module)  # not better by more than tol
    assert stopper.best_loss == 1.0 and stopper.no_improve == 1 and not stopper.should_stop
    stopper.update(2.0, module)
    assert stopper.should_stop
    stopper.restore_best(module)
    assert all(torch.equal(best[k], v) for k, v in module.state_dict().items())
    stopper.update(0.5, module)
    assert stopper.no_improve == 0 and not stopper.should_stop


def test_early_stopping_without_improvement_leaves_the_module_alone():
    module, _, _, _ = _setup()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    stopper = _EarlyStopping(tol=0.0, patience=1)
    stopper.update(np.nan, module)
    assert stopper.should_stop
    stopper.restore_best(module)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_progress_log_writes_plain_lines_when_not_on_a_terminal(verbose):
    stream = io.StringIO()  # a log file: never a bar
    log = ProgressLog("Est", 3, verbose, stream=stream)
    log.step(0, loss=0.5, val_loss=None)
    log.step(1, loss=0.25, val_loss=0.125)
    log.close("kept epoch 2")
    lines = stream.getvalue().splitlines()
    if verbose == 0:
        assert lines == []
        return
    assert len(lines) == 3
    assert lines[0].startswith("Est epoch 1/3: loss 0.50000 [elapsed ")
    assert "left <= " in lines[0] and "val_loss" not in lines[0]
    assert lines[1].startswith("Est epoch 2/3: loss 0.25000 val_loss 0.12500 [elapsed ")
    assert lines[2].startswith("Est: kept epoch 2 (")


def test_progress_log_shows_a_bar_on_a_terminal():
    pytest.importorskip("tqdm")
    stream = _Terminal()
    log = ProgressLog("Est", 4, 1, stream=stream)
    for i in range(4):
        log.step(i, loss=1.0 / (i + 1))
    log.close("done")
    out = stream.getvalue()
    assert "4/4" in out and "loss 0.25000" in out  # tqdm's counter and postfix
    assert "epoch 1/4:" not in out  # no plain lines
    assert out.rstrip().endswith(")") and "Est: done (" in out  # the closing line stays
    stream2 = _Terminal()
    log = ProgressLog("Est", 2, 2, stream=stream2)  # verbose=2: lines even on a terminal
    log.step(0, loss=1.0)
    assert stream2.getvalue().startswith("Est epoch 1/2: loss 1.00000")


# -- divergence checks ----------------------------------------------------------------------


def test_check_finite_epoch_names_the_epoch_and_what_is_not_finite():
    from sktree_lmc.training._training import _check_finite_epoch

    module = _setup()[0]
    _check_finite_epoch(module, 0, 0.01, 0.7, 0.8)  # all finite: no error
    _check_finite_epoch(module, 0, 0.01, 0.7)
    for loss, val_loss, match in [(np.nan, None, "epoch 3: the training loss is nan"),
                                  (np.inf, 0.5, "epoch 3: the training loss is inf"),
                                  (0.5, np.nan, "epoch 3: the validation loss is nan")]:
        with pytest.raises(ValueError, match=match):
            _check_finite_epoch(module, 2, 0.01, loss, val_loss)
    with torch.no_grad():
        module.leaf_value[0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="epoch 1: the parameters are no longer finite.*"
                                         r"lower learning_rate \(now 0.5\)"):
        _check_finite_epoch(module, 0, 0.5, 0.7)


def test_warn_if_diverged_compares_the_last_epoch_with_the_initial_loss():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sktree_lmc.training._training import _warn_if_diverged

    with pytest.warns(ConvergenceWarning, match="10 times that of the initial model"):
        _warn_if_diverged([0.5, 20.0, 7.1], 0.7, 1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_if_diverged([5.0, 20.0, 6.9], 0.7, 1e-2)  # the last epoch decides
        _warn_if_diverged([], 0.7, 1e-2)
        _warn_if_diverged([1.0], np.nan, 1e-2)


def test_reference_loss_is_the_larger_of_the_initial_and_the_zero_output_loss():
    from sktree_lmc.training._training import _evaluate_loss, _reference_loss

    module, _, data, _ = _setup()
    rows = np.arange(40)
    initial = _evaluate_loss(module, _ce, data, rows[:8])
    assert _reference_loss(module, _ce, data, rows, 8, 2) == pytest.approx(
        max(initial, np.log(2)), rel=1e-6)  # the zero output's cross-entropy is log 2
    with torch.no_grad():
        module.leaf_value.zero_()  # now the initial model is the zero output
    assert _reference_loss(module, _ce, data, rows, 8, 2) == pytest.approx(np.log(2), rel=1e-6)

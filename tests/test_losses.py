"""Issue 44: one loss object per task, tested against each of its uses."""

import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
from sktree_lmc.training._losses import LOSSES, CrossEntropy, SquaredError, as_loss


def _case(kind, seed, n=7, C=3):
    rng = np.random.default_rng(seed)
    raw = rng.normal(scale=3, size=(n, C))
    if kind == "softmax":
        target = rng.integers(0, C, size=n)
    else:
        target = rng.normal(size=(n, C))
    return raw, target, rng.uniform(0.1, 2, size=n)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), C=st.integers(1, 4))
def test_numpy_gradients_are_torch_autograd_of_the_training_loss(seed, C):
    """The boosting's NumPy gradient is the gradient of the training loss (cross-entropy
    exactly; squared error up to its constant C / 2: the mean over outputs against half
    the sum), and its mean is the weighted mean of the per-row loss (same constant)."""
    for kind, factor in (("softmax", 1.0), ("squared", C / 2)):
        if kind == "softmax" and C == 1:
            continue
        loss = as_loss(kind)
        raw, target, w = _case(kind, seed, C=C)
        out = torch.tensor(raw, requires_grad=True)
        per_row = loss(out, torch.as_tensor(target))
        (per_row * torch.as_tensor(w)).sum().backward()
        g, h = loss.gradients(raw, target, w)
        assert_allclose(g, out.grad.numpy() * factor, rtol=1e-10, atol=1e-12)
        assert (h > 0).all()
        assert loss.mean(raw, target, w) == pytest.approx(
            float(np.average(per_row.detach().numpy(), weights=w)) * factor, rel=1e-10)


@pytest.mark.parametrize("kind", ["softmax", "squared"])
def test_initial_prediction_minimizes_the_loss(kind):
    raw, target, w = _case(kind, 0, n=50, C=3)
    loss = as_loss(kind)
    base = loss.initial_prediction(*loss.target_sums(target, w, 3))
    # the gradient of the weighted loss at the constant is zero
    g, _ = loss.gradients(np.tile(base, (50, 1)), target, w)
    assert_allclose(g.sum(axis=0), 0.0, atol=1e-9)


def test_mix_and_teacher_targets():
    ce = CrossEntropy()
    teacher = np.array([[2.0, 0.0], [0.0, 1.0]])
    probs = ce.teacher_targets(teacher)
    assert_allclose(probs, softmax(teacher, axis=1))
    mixed = ce.mix(np.array([0, 1, 1]), probs, np.array([0, 2]), 0.25, 2)
    assert mixed.dtype == np.float32
    assert_allclose(mixed[1], [0, 1])  # not a teacher row: the label
    assert_allclose(mixed[0], 0.75 * np.array([1, 0]) + 0.25 * probs[0], rtol=1e-6)
    se = SquaredError()
    target = np.arange(6, dtype=np.float64).reshape(3, 2)
    mixed = se.mix(target, np.ones((1, 2)), [1], 0.5, 2)
    assert_array_equal(mixed, [[0, 1], [1.5, 2], [4, 5]])
    assert_array_equal(target, np.arange(6).reshape(3, 2))  # not changed in place


def test_the_estimators_train_on_their_loss():
    """The classifier's loss carries its label smoothing; the one object serves the
    training loss, the boosting and the teacher."""
    clf = SoftTreeEnsembleClassifier(label_smoothing=0.1)
    loss = clf._build_objective().loss
    assert loss == CrossEntropy(0.1) and loss != CrossEntropy()
    assert SoftTreeEnsembleRegressor()._build_objective().loss == SquaredError()
    out, target = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0])
    assert_allclose(loss(out, target).numpy(),
                    torch.nn.functional.cross_entropy(out, target, reduction="none",
                                                      label_smoothing=0.1).numpy())


def test_as_loss_names_and_errors():
    assert set(LOSSES) == {"softmax", "squared", "absolute_error", "quantile", "poisson",
                           "gamma"}
    assert as_loss("squared") == SquaredError()
    loss = CrossEntropy(0.2)
    assert as_loss(loss) is loss
    with pytest.raises(ValueError, match="loss must be a Loss or one of"):
        as_loss("hinge")


def test_absolute_error_gradients_are_the_sign_of_the_residual():
    from sktree_lmc.training._losses import AbsoluteError

    loss = as_loss("absolute_error")
    assert loss == AbsoluteError()
    raw, target, w = _case("squared", 3, C=2)
    out = torch.tensor(raw, requires_grad=True)
    (loss(out, torch.as_tensor(target)) * torch.as_tensor(w)).sum().backward()
    g, h = loss.gradients(raw, target, w)
    assert_allclose(g, out.grad.numpy() * 2, rtol=1e-12)  # the mean over 2 outputs
    assert_allclose(h, np.tile(w[:, None], (1, 2)))


def test_regressor_absolute_error_fits_the_median_under_heavy_tails():
    """Issue 45: loss="absolute_error" (the conditional median). With Cauchy noise the
    squared error chases the outliers; the absolute error does not. Its targets are
    standardized by their median and mean absolute deviation."""
    from sktree_lmc import merge_estimators, refit_leaves

    rng = np.random.RandomState(0)
    X = rng.normal(size=(1500, 3))
    y = X[:, 0] + 0.3 * rng.standard_cauchy(1500)
    kw = dict(n_estimators=32, max_epochs=15, random_state=0, device="cpu")
    l1 = SoftTreeEnsembleRegressor(loss="absolute_error", **kw).fit(X, y)
    l2 = SoftTreeEnsembleRegressor(**kw).fit(X, y)
    err = {name: np.median(np.abs(m.predict(X) - X[:, 0])) for name, m in
           (("l1", l1), ("l2", l2))}
    assert err["l1"] < 0.5 * err["l2"]
    assert l1.y_mean_[0] == pytest.approx(np.median(y), abs=0.05)
    assert l1.objective_.loss == as_loss("absolute_error")
    other = SoftTreeEnsembleRegressor(loss="absolute_error", **{**kw, "random_state": 1}).fit(
        X, y)
    merged = merge_estimators(l1, other)
    assert np.isfinite(merged.predict(X)).all()
    assert np.isfinite(refit_leaves(merged, X, y, max_iter=5).predict(X)).all()
    with pytest.raises(ValueError, match="loss"):
        SoftTreeEnsembleRegressor(loss="hinge").fit(X, y)


# -- quantile, Poisson and Gamma (issue 45) ----------------------------------------------


def _positive_case(seed, n=9, C=2):
    rng = np.random.default_rng(seed)
    raw = rng.normal(scale=1.5, size=(n, C))
    target = rng.gamma(2.0, 1.5, size=(n, C))
    target[0, 0] = 0.0  # a zero count
    return raw, target, rng.uniform(0.1, 2, size=n)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), q=st.floats(0.05, 0.95))
def test_new_losses_numpy_gradients_are_autograd_of_the_training_loss(seed, q):
    """The boosting's gradients of the quantile, Poisson and Gamma losses are the
    autograd gradients of the torch training loss (the mean over the C outputs against
    the NumPy sum: the factor C), and the NumPy mean is the torch per-row loss times C."""
    from sktree_lmc.training._losses import Quantile

    raw, target, w = _positive_case(seed)
    for loss in (Quantile(q), as_loss("poisson"), as_loss("gamma")):
        t = target if loss.name != "gamma" else target + 0.1
        out = torch.tensor(raw, requires_grad=True)
        per_row = loss(out, torch.as_tensor(t))
        (per_row * torch.as_tensor(w)).sum().backward()
        g, h = loss.gradients(raw, t, w)
        assert_allclose(g, out.grad.numpy() * 2, rtol=1e-9, atol=1e-12)
        assert (h > 0).all()
        assert loss.mean(raw, t, w) == pytest.approx(
            float(np.average(per_row.detach().numpy(), weights=w)) * 2, rel=1e-9)


def test_new_losses_against_scikit_learn_metrics():
    """Independent computation: the training losses are scikit-learn's mean pinball loss
    and half its mean Poisson and Gamma deviances of the prediction exp(raw)."""
    from sklearn.metrics import mean_gamma_deviance, mean_pinball_loss, mean_poisson_deviance

    from sktree_lmc.training._losses import Quantile

    rng = np.random.default_rng(0)
    raw = rng.normal(size=(200, 1))
    y = rng.poisson(np.exp(raw[:, 0] + 0.3)).astype(float)
    yg = rng.gamma(2.0, np.exp(raw[:, 0]) / 2)
    torch_mean = lambda loss, t: float(loss(torch.tensor(raw), torch.tensor(t)[:, None]).mean())
    assert torch_mean(as_loss("poisson"), y) == pytest.approx(
        0.5 * mean_poisson_deviance(y, np.exp(raw[:, 0])), rel=1e-12)
    assert torch_mean(as_loss("gamma"), yg) == pytest.approx(
        0.5 * mean_gamma_deviance(yg, np.exp(raw[:, 0])), rel=1e-12)
    assert torch_mean(Quantile(0.8), y) == pytest.approx(
        mean_pinball_loss(y, raw[:, 0], alpha=0.8), rel=1e-12)


@pytest.mark.parametrize("name", ["poisson", "gamma"])
def test_log_link_initial_prediction_minimizes_the_loss(name):
    raw, target, w = _positive_case(1, n=50, C=2)
    loss = as_loss(name)
    target = target + 0.1
    base = loss.initial_prediction(*loss.target_sums(target, w, 2))
    g, _ = loss.gradients(np.tile(base, (50, 1)), target, w)
    assert_allclose(g.sum(axis=0), 0.0, atol=1e-9)


def _regression_data(name, n=1200, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 3))
    mu = np.exp(0.8 * X[:, 0] - 0.5 * X[:, 1] + 1.0)
    y = {"poisson": lambda: rng.poisson(mu).astype(float),
         "gamma": lambda: rng.gamma(2.0, mu / 2.0),
         "quantile": lambda: X[:, 0] + (1 + np.abs(X[:, 1])) * rng.normal(size=n)}[name]()
    return X, y


@pytest.mark.parametrize("name, metric", [("poisson", "mean_poisson_deviance"),
                                          ("gamma", "mean_gamma_deviance"),
                                          ("quantile", "mean_pinball_loss")])
def test_regressor_losses_fit_merge_refit_and_export_beside_hgb(name, metric):
    """Each loss fits as well as HistGradientBoostingRegressor with that loss (same
    rows), its models merge (exactly at the endpoints; the merge is as good as its
    models), refit and export the inverse link."""
    import sklearn.metrics
    from sklearn.ensemble import HistGradientBoostingRegressor

    from sktree_lmc import export_module, merge_estimators, refit_leaves

    X, y = _regression_data(name)
    Xt, yt = _regression_data(name, n=1000, seed=1)
    kw = {"quantile": 0.9} if name == "quantile" else {}
    score = functools.partial(getattr(sklearn.metrics, metric),
                              **({"alpha": 0.9} if name == "quantile" else {}))
    common = dict(n_estimators=32, max_epochs=40, device="cpu", loss=name, **kw)
    a = SoftTreeEnsembleRegressor(random_state=0, **common).fit(X, y)
    b = SoftTreeEnsembleRegressor(random_state=1, **common).fit(X, y)
    hgb = HistGradientBoostingRegressor(loss=name, random_state=0, **kw).fit(X, y)
    ours, theirs = score(yt, a.predict(Xt)), score(yt, hgb.predict(Xt))
    assert ours < 1.1 * theirs, (ours, theirs)
    if name != "quantile":
        assert (a.predict(Xt) > 0).all()
        assert a.y_mean_[0] == 0 and a.y_scale_[0] == pytest.approx(y.mean())
    else:  # the pinball loss estimates the 0.9 quantile
        assert 0.85 < np.mean(yt <= a.predict(Xt)) < 0.95
    tol = dict(rtol=2e-5, atol=1e-5 * np.abs(yt).mean())  # float32 rounding
    assert_allclose(merge_estimators(a, b, lam=0.0).predict(Xt), a.predict(Xt), **tol)
    assert_allclose(merge_estimators(a, b, lam=1.0).predict(Xt), b.predict(Xt), **tol)
    merged = merge_estimators(a, b)
    assert score(yt, merged.predict(Xt)) < 1.05 * max(ours, score(yt, b.predict(Xt)))
    refit = refit_leaves(merged, X, y, max_iter=20)
    assert score(yt, refit.predict(Xt)) < 1.05 * score(yt, merged.predict(Xt))
    module = export_module(a)
    assert_allclose(module(torch.tensor(Xt)).detach().numpy(), a.predict(Xt), **tol)


def test_regressor_loss_errors_name_the_problem():
    X = np.random.RandomState(0).normal(size=(50, 2))
    y = X[:, 0]
    with pytest.raises(ValueError, match="needs non-negative targets"):
        SoftTreeEnsembleRegressor(loss="poisson", max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="needs positive targets"):
        SoftTreeEnsembleRegressor(loss="gamma", max_epochs=1).fit(X, np.abs(y) * (y > 0))
    with pytest.raises(ValueError, match="needs the quantile parameter"):
        SoftTreeEnsembleRegressor(loss="quantile", max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="quantile"):
        SoftTreeEnsembleRegressor(loss="quantile", quantile=1.5, max_epochs=1).fit(X, y)
    kw = dict(n_estimators=4, max_epochs=1, device="cpu", random_state=0)
    a = SoftTreeEnsembleRegressor(**kw).fit(X, np.abs(y))
    b = SoftTreeEnsembleRegressor(loss="poisson", **kw).fit(X, np.abs(y))
    from sktree_lmc import merge_estimators

    with pytest.raises(ValueError, match="loss: SquaredError"):
        merge_estimators(a, b)


@pytest.mark.parametrize("name", ["poisson", "quantile"])
def test_teacher_and_boosting_start_take_the_loss(name):
    """The gradient-boosted teacher and split_init="boosting" boost on the loss."""
    X, y = _regression_data(name, n=600)
    kw = {"quantile": 0.9} if name == "quantile" else {}
    est = SoftTreeEnsembleRegressor(loss=name, teacher_weight=0.5, split_init="boosting",
                                    n_estimators=16, max_epochs=3, device="cpu",
                                    random_state=0, **kw).fit(X, y)
    assert est.teacher_ is not None and np.isfinite(est.predict(X)).all()

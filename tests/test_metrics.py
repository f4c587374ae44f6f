"""LMC barrier (Eq. 1), interpolation curves and their display."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import make_classification, make_regression
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, r2_score

from sktree_lmc import (
    InterpolationCurve,
    InterpolationCurveDisplay,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    interpolation_curve,
    lmc_barrier,
)

FAST = dict(n_estimators=8, depth=2, max_epochs=3, batch_size=64, device="cpu")


@pytest.fixture(scope="module")
def clf_data():
    X, y = make_classification(n_samples=200, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    a = SoftTreeEnsembleClassifier(random_state=1, **FAST).fit(X, y)
    b = SoftTreeEnsembleClassifier(random_state=2, **FAST).fit(X, y)
    return a, b, X, y


# ----------------------------------------------------------------------------
# lmc_barrier on hand-made curves
# ----------------------------------------------------------------------------


def test_barrier_accuracy_direction():
    assert lmc_barrier([80.0, 70.0, 84.0]) == pytest.approx(12.0)  # line 82 at the midpoint
    assert lmc_barrier([90.0, 90.0, 90.0, 90.0]) == 0.0
    # a curve above the straight line has no barrier
    assert lmc_barrier([80.0, 95.0, 84.0]) == 0.0
    # the maximum gap, not the midpoint gap: line at lam=1/4 is 81, curve 71
    assert lmc_barrier([80.0, 71.0, 80.0, 79.0, 84.0]) == pytest.approx(10.0)


def test_barrier_loss_direction():
    assert lmc_barrier([0.4, 0.9, 0.5], greater_is_better=False) == pytest.approx(0.45)
    # the accuracy direction sees no barrier in a loss bump, and vice versa
    assert lmc_barrier([0.4, 0.9, 0.5], greater_is_better=True) == 0.0
    assert lmc_barrier([80.0, 70.0, 84.0], greater_is_better=False) == 0.0


def test_barrier_uneven_lambdas():
    # line through (0, 80) and (1, 90): 81 at lam=0.1 where the curve is 60
    assert lmc_barrier([80.0, 60.0, 90.0], lambdas=[0.0, 0.1, 1.0]) == pytest.approx(21.0)
    assert lmc_barrier([80.0, 60.0, 90.0]) == pytest.approx(25.0)


def test_barrier_errors():
    with pytest.raises(ValueError):
        lmc_barrier([1.0])
    with pytest.raises(ValueError):
        lmc_barrier([[1.0, 2.0]])
    with pytest.raises(ValueError):
        lmc_barrier([1.0, 2.0, 3.0], lambdas=[0.0, 1.0])


def test_barrier_of_curve_object():
    curve = InterpolationCurve(
        np.linspace(0, 1, 3), {"accuracy": np.array([80.0, 70.0, 84.0]),
                               "log_loss": np.array([0.4, 0.9, 0.5])},
        {"accuracy": True, "log_loss": False},
    )
    assert lmc_barrier(curve) == pytest.approx(12.0)
    assert curve.barrier("log_loss") == pytest.approx(0.45)
    with pytest.raises(ValueError, match="metric"):
        curve.barrier("f1")


# ----------------------------------------------------------------------------
# interpolation_curve
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["wm", "am"])
def test_curve_endpoints_are_the_models(clf_data, method):
    a, b, X, y = clf_data
    curve = interpolation_curve(a, b, X, y, lambdas=5,
                                aligner=ModelAligner(method=method, random_state=0))
    assert_allclose(curve.lambdas, np.linspace(0, 1, 5))
    assert set(curve.scores) == {"accuracy", "log_loss"}
    assert curve.greater_is_better == {"accuracy": True, "log_loss": False}
    for score in curve.scores.values():
        assert score.shape == (5,) and np.isfinite(score).all()
    for model, i in ((a, 0), (b, -1)):
        expected = 100 * accuracy_score(y, model.predict(X))
        assert curve.scores["accuracy"][i] == pytest.approx(expected)
        assert curve.scores["log_loss"][i] == pytest.approx(
            log_loss(y, model.predict_proba(X)), rel=1e-5
        )
    assert curve.barrier("accuracy") >= 0 and curve.barrier("log_loss") >= 0
    assert curve.method == method and curve.invariances == "all"
    assert curve.aligner.alignments_[1].tree_perm.shape == (8,)


def test_curve_explicit_lambdas_and_errors(clf_data):
    a, b, X, y = clf_data
    curve = interpolation_curve(a, b, X, y, lambdas=[0.0, 0.3, 1.0], aligner="naive")
    assert_allclose(curve.lambdas, [0.0, 0.3, 1.0])
    with pytest.raises(ValueError, match="lambdas"):
        interpolation_curve(a, b, X, y, lambdas=[0.0, 1.5])


def test_naive_curve_matches_manual_interpolation(clf_data):
    """With invariances="none" the curve is plain parameter averaging."""
    import copy

    a, b, X, y = clf_data
    curve = interpolation_curve(a, b, X, y, lambdas=[0.5], aligner="naive")
    mid = copy.deepcopy(a).set_tree_params(a.tree_params_.interpolate(b.tree_params_, 0.5))
    assert curve.scores["accuracy"][0] == pytest.approx(100 * mid.score(X, y))


def test_regressor_curve_endpoints():
    X, y = make_regression(n_samples=150, n_features=5, noise=1.0, random_state=0)
    a = SoftTreeEnsembleRegressor(random_state=1, **FAST).fit(X, y)
    b = SoftTreeEnsembleRegressor(random_state=2, **FAST).fit(X, 3 * y + 10)
    curve = interpolation_curve(a, b, X, y, lambdas=3)
    assert set(curve.scores) == {"r2", "mse"}
    assert curve.scores["r2"][0] == pytest.approx(r2_score(y, a.predict(X)), rel=1e-5)
    assert curve.scores["mse"][-1] == pytest.approx(mean_squared_error(y, b.predict(X)), rel=1e-5)
    assert lmc_barrier(curve) == curve.barrier("r2")


# ----------------------------------------------------------------------------
# Display
# ----------------------------------------------------------------------------


def test_display(clf_data):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    a, b, X, y = clf_data
    disp = InterpolationCurveDisplay.from_estimators(a, b, X, y, aligners=["naive", "wm"],
                                                     lambdas=3)
    assert len(disp.lines_) == 2 and len(disp.curves) == 2
    assert disp.ax_.get_xlabel().startswith("$\\lambda$")
    assert disp.ax_.get_ylabel() == "accuracy (%)"
    labels = [line.get_label() for line in disp.lines_]
    assert labels[0].startswith("WM naive") and "barrier" in labels[1]
    assert_allclose(disp.lines_[1].get_ydata(), list(disp.curves.values())[1].scores["accuracy"])
    # onto given axes, another metric
    fig, ax = plt.subplots()
    disp2 = InterpolationCurveDisplay(disp.curves, metric="log_loss").plot(ax=ax)
    assert disp2.ax_ is ax and disp2.figure_ is fig
    assert disp2.ax_.get_ylabel() == "log_loss"
    plt.close("all")

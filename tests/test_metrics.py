"""LMC barrier (Eq. 1), interpolation curves and their display."""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from conftest import FAST
from hypothesis import given, settings
from numpy.testing import assert_allclose
from sklearn.datasets import make_regression
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, r2_score

from sktree_lmc import (
    InterpolationCurve,
    InterpolationCurveDisplay,
    ModelAligner,
    SoftTreeEnsembleRegressor,
    interpolation_curve,
    lmc_barrier,
)

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
    with pytest.raises(ValueError, match="at least two points"):
        lmc_barrier([1.0])
    with pytest.raises(ValueError, match="1-D"):
        lmc_barrier([[1.0, 2.0]])
    with pytest.raises(ValueError, match="same length"):
        lmc_barrier([1.0, 2.0, 3.0], lambdas=[0.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        lmc_barrier([80.0, np.nan, 84.0])
    with pytest.raises(ValueError, match="finite"):
        lmc_barrier([80.0, np.inf, 84.0])
    with pytest.raises(ValueError, match="lambdas must be finite"):
        lmc_barrier([80.0, 70.0, 84.0], lambdas=[0.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="endpoints 0 and 1"):
        lmc_barrier([80.0, 70.0, 84.0], lambdas=[0.25, 0.5, 0.75])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        lmc_barrier([80.0, 70.0, 84.0], lambdas=[0.0, 1.5, 1.0])
    with pytest.raises(ValueError, match="repeated"):
        lmc_barrier([80.0, 70.0, 84.0], lambdas=[0.0, 1.0, 1.0])
    with pytest.raises(TypeError, match="values"):
        lmc_barrier(["a", "b"])
    with pytest.raises(TypeError, match="values must be an array of real numbers"):
        lmc_barrier([1 + 1j, 2.0])
    with pytest.raises(TypeError, match="greater_is_better must be a bool"):
        lmc_barrier([1.0, 2.0], greater_is_better="yes")
    with pytest.raises(ValueError, match="overflows"):
        lmc_barrier([1e308, -1e308, 1e308])
    with pytest.raises(TypeError, match="lambdas"):
        lmc_barrier([1.0, 2.0], lambdas="ab")


def test_barrier_of_huge_values_is_not_rounded_to_infinity():
    assert lmc_barrier([0.0, -1e297, 0.0]) == 1e297


def test_barrier_does_not_depend_on_the_order_of_the_points():
    # C(0) = 3, C(1/2) = 1.9, C(1) = 1: the line is at 2 at the midpoint
    assert lmc_barrier([1.0, 1.9, 3.0], [1.0, 0.5, 0.0]) == pytest.approx(0.1)
    forward = lmc_barrier([80.0, 71.0, 80.0, 79.0, 84.0], np.linspace(0, 1, 5))
    backward = lmc_barrier([84.0, 79.0, 80.0, 71.0, 80.0], np.linspace(1, 0, 5))
    assert forward == backward == pytest.approx(10.0)


@settings(max_examples=50, deadline=None)
@given(
    hnp.arrays(np.float64, st.integers(2, 12), elements=st.floats(-1e6, 1e6)),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_barrier_is_invariant_to_permuting_the_points(values, rnd, greater_is_better):
    lambdas = np.linspace(0.0, 1.0, len(values))
    order = list(range(len(values)))
    rnd.shuffle(order)
    expected = lmc_barrier(values, lambdas, greater_is_better=greater_is_better)
    assert expected >= 0
    assert lmc_barrier(values[order], lambdas[order], greater_is_better=greater_is_better) == (
        pytest.approx(expected, abs=1e-9)
    )


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


@pytest.mark.parametrize(
    "lambdas, error, match",
    [
        (0, ValueError, "at least 2"),
        (1, ValueError, "at least 2"),
        (-3, ValueError, "at least 2"),
        (True, TypeError, "lambdas"),
        (2.5, TypeError, "int >= 2"),
        ("abc", TypeError, "string"),
        ([0.25, 0.5, 0.75], ValueError, "endpoints 0 and 1"),
        ([0.0, np.nan, 1.0], ValueError, "finite"),
        ([[0.0, 1.0]], ValueError, "1-D"),
        ([], ValueError, "endpoints"),
    ],
)
def test_curve_rejects_bad_lambdas(clf_data, lambdas, error, match):
    a, b, X, y = clf_data
    with pytest.raises(error, match=match):
        interpolation_curve(a, b, X, y, lambdas=lambdas, aligner="naive")


def test_curve_needs_data(clf_data):
    a, b, X, y = clf_data
    with pytest.raises(ValueError, match="X and y"):
        interpolation_curve(a, b, None, y)
    with pytest.raises(ValueError, match="X and y"):
        interpolation_curve(a, b, X, None)
    for bad in (3.0, "abc"):
        with pytest.raises(TypeError, match="X must be an array-like"):
            interpolation_curve(a, b, bad, y)


def test_regressor_curve_needs_two_samples_and_float32_targets():
    X, y = make_regression(n_samples=60, n_features=4, random_state=0)
    a, b = (SoftTreeEnsembleRegressor(random_state=s, **FAST).fit(X, y) for s in (1, 2))
    with pytest.raises(ValueError, match="at least 2 samples"):
        interpolation_curve(a, b, X[:1], y[:1], lambdas=3)
    with pytest.raises(ValueError, match="y contains values beyond the float32 range"):
        interpolation_curve(a, b, X, y * 1e160, lambdas=3)


def test_unsorted_curve_has_the_barrier_of_the_sorted_one(clf_data):
    a, b, X, y = clf_data
    up = interpolation_curve(a, b, X, y, lambdas=[0.0, 0.25, 0.5, 0.75, 1.0], aligner="naive")
    down = interpolation_curve(a, b, X, y, lambdas=[1.0, 0.75, 0.5, 0.25, 0.0],
                               aligner="naive")
    assert_allclose(down.scores["log_loss"], up.scores["log_loss"][::-1])
    for metric in ("accuracy", "log_loss"):
        assert down.barrier(metric) == pytest.approx(up.barrier(metric))


def test_naive_curve_matches_manual_interpolation(clf_data):
    """With invariances="none" the curve is plain parameter averaging."""
    import copy

    a, b, X, y = clf_data
    curve = interpolation_curve(a, b, X, y, lambdas=[0.0, 0.5, 1.0], aligner="naive")
    mid = copy.deepcopy(a).set_tree_params(a.tree_params_.interpolate(b.tree_params_, 0.5))
    assert curve.scores["accuracy"][1] == pytest.approx(100 * mid.score(X, y))


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
    assert labels[0].startswith("naive (no alignment)") and "barrier" in labels[1]
    assert_allclose(disp.lines_[1].get_ydata(), list(disp.curves.values())[1].scores["accuracy"])
    # onto given axes, another metric
    fig, ax = plt.subplots()
    disp2 = InterpolationCurveDisplay(disp.curves, metric="log_loss").plot(ax=ax)
    assert disp2.ax_ is ax and disp2.figure_ is fig
    assert disp2.ax_.get_ylabel() == "log_loss"
    plt.close("all")


@pytest.mark.parametrize("scale", [1e-300, 1e-12, 1e-10, 1e-6, 1.0, 1e6, 1e300])
def test_barrier_does_not_depend_on_the_scale_of_the_values(scale):
    """Issue 20: the barrier was rounded to 12 decimals, so on curves whose values
    are below about 1e-10 it came out as 0."""
    values = np.array([80.0, 70.0, 84.0]) * scale
    assert lmc_barrier(values) == pytest.approx(12.0 * scale, rel=1e-9, abs=0)
    assert lmc_barrier(values[::-1], greater_is_better=False) == 0.0
    assert lmc_barrier([0.4 * scale, 0.9 * scale, 0.5 * scale],
                       greater_is_better=False) == pytest.approx(0.45 * scale, rel=1e-9, abs=0)
    assert lmc_barrier(np.full(4, 0.3 * scale)) == 0.0  # flat: exactly 0 at every scale


def test_barrier_of_tiny_values():
    assert lmc_barrier([8e-12, 7e-12, 8.4e-12]) == pytest.approx(1.2e-12, rel=1e-9, abs=0)
    assert lmc_barrier([3e-13, 5e-13, 2e-13], greater_is_better=False) == pytest.approx(
        2.5e-13, rel=1e-9, abs=0)

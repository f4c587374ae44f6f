"""warm_start: fit continues from the current parameters (and Adam state)."""

import pickle

import numpy as np
import pytest
from conftest import PAPER_RECIPE
from sklearn.datasets import make_classification, make_regression

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor

X, Y = make_classification(n_samples=240, n_features=5, n_informative=3, random_state=0)

#: The training in which a warm-started fit continues the trajectory of one longer fit:
#: a constant learning rate (a schedule restarts with every fit), the last weights (an
#: average restarts too), on every sample (early stopping holds out another validation
#: split in each fit, its seed mixed with the epochs already run).
CONTINUOUS = dict(PAPER_RECIPE, early_stopping=False)


def _clf(**kw):
    params = dict(n_estimators=8, max_epochs=4, batch_size=64, device="cpu", random_state=0)
    params.update(kw)
    return SoftTreeEnsembleClassifier(**params)


def test_default_is_off_and_refits_from_scratch():
    est = _clf().fit(X, Y)
    first = est.get_tree_params()
    est.fit(X, Y)
    np.testing.assert_array_equal(est.tree_params_.leaf_value, first.leaf_value)
    assert len(est.loss_curve_) == 4 and est.n_epochs_ == 4


def test_continues_without_reinitialization():
    est = _clf(warm_start=True, **CONTINUOUS).fit(X, Y)
    curve = list(est.loss_curve_)
    before = est.get_tree_params()
    # zero learning rate: parameters must come back exactly as they were
    est.set_params(learning_rate=1e-12, max_epochs=1).fit(X, Y)
    np.testing.assert_allclose(est.tree_params_.split_weight, before.split_weight, atol=1e-6)
    np.testing.assert_allclose(est.tree_params_.leaf_value, before.leaf_value, atol=1e-6)
    assert est.loss_curve_[:4] == curve and len(est.loss_curve_) == 5 and est.n_epochs_ == 5
    # the loss curve continues where it was (no jump back to the initial loss)
    cold = _clf(max_epochs=1, **CONTINUOUS).fit(X, Y)
    assert est.loss_curve_[-1] < cold.loss_curve_[0] - 0.05
    assert abs(est.loss_curve_[-1] - curve[-1]) < 0.1


def test_two_halves_continue_like_one_fit():
    """4 + 4 warm-started epochs, with the Adam state carried, track one 8-epoch fit."""
    one = _clf(max_epochs=8, warm_start=True, **CONTINUOUS).fit(X, Y)
    two = _clf(max_epochs=4, warm_start=True, **CONTINUOUS).fit(X, Y).fit(X, Y)
    assert len(two.loss_curve_) == 8
    assert two.optimizer_state_["step"] == one.optimizer_state_["step"]
    # same trajectory up to the minibatch order of the second half
    assert abs(two.loss_curve_[-1] - one.loss_curve_[-1]) < 0.05
    # the first half is bit-identical
    np.testing.assert_array_equal(two.loss_curve_[:4], one.loss_curve_[:4])


def test_optimizer_state_pickles_and_is_dropped_when_asked():
    est = _clf(warm_start=True).fit(X, Y)
    state = est.optimizer_state_
    assert state["step"] == 4 * int(np.ceil(len(Y) / 64))
    assert state["exp_avg"].shape_signature == est.tree_params_.shape_signature
    assert np.all(state["exp_avg_sq"].leaf_value >= 0)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.optimizer_state_["exp_avg"].leaf_value,
                                  state["exp_avg"].leaf_value)
    loaded.fit(X, Y)
    assert loaded.optimizer_state_["step"] == 2 * state["step"]
    loaded.optimizer_state_ = None  # restart Adam, keep the parameters
    loaded.fit(X, Y)
    assert loaded.optimizer_state_["step"] == state["step"]


def test_rejects_mismatches():
    est = _clf(warm_start=True).fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        est.fit(X[:, :3], Y)
    with pytest.raises(ValueError, match="classes"):
        est.fit(X, np.where(Y == 1, 2, Y))
    for change in ({"n_estimators": 4}, {"depth": 3}, {"arch": "non_oblivious"}):
        fitted = _clf(warm_start=True).fit(X, Y).set_params(**change)
        with pytest.raises(ValueError, match="warm_start"):
            fitted.fit(X, Y)
        # without warm_start the same change is a fresh fit
        fitted.set_params(warm_start=False).fit(X, Y)


def test_regressor_keeps_its_target_scale():
    Xr, yr = make_regression(n_samples=200, n_features=4, random_state=0)
    reg = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=3, device="cpu",
                                    random_state=0, warm_start=True).fit(Xr, yr)
    mean, scale = reg.y_mean_.copy(), reg.y_scale_.copy()
    reg.fit(Xr[:100], yr[:100] * 3)  # other targets: the standardization stays
    np.testing.assert_array_equal(reg.y_mean_, mean)
    np.testing.assert_array_equal(reg.y_scale_, scale)
    assert len(reg.loss_curve_) == 6
    with pytest.raises(ValueError, match="targets"):
        reg.fit(Xr, np.c_[yr, yr])


def test_a_merged_model_drops_adams_state_and_warm_starts_with_a_fresh_one():
    """Issue 20: a merged model kept model 0's ``optimizer_state_`` (moments of other
    parameters, in another basis) and its ``warm_start=True``, so ``merged.fit``
    continued with Adam moments that belong to other parameters."""
    from sktree_lmc import ModelAligner, merge_estimators, refit_leaves
    from sktree_lmc.merging._matching import _align_optimizer_state

    a, b = (_clf(warm_start=True, random_state=s).fit(X, Y) for s in (1, 2))
    steps = a.optimizer_state_["step"]
    assert steps > 0 and b.optimizer_state_ is not None
    for merged in (merge_estimators(a, b), merge_estimators([a, b, a], aligner="naive"),
                   refit_leaves(a, X, Y, max_iter=3)):
        assert merged.optimizer_state_ is None
        assert merged.warm_start is True  # the user's setting, kept
        start = merged.get_tree_params()
        merged.fit(X, Y)
        # continued from the merged parameters, with a fresh Adam (step count restarts)
        assert merged.optimizer_state_["step"] == steps
        assert merged.n_epochs_ == 2 * a.max_epochs and len(merged.loss_curve_) == 8
        assert not np.array_equal(merged.tree_params_.leaf_value, start.leaf_value)
        assert np.isfinite(merged.predict_proba(X)).all()
    # the originals are untouched
    assert a.optimizer_state_["step"] == steps
    # an aligned copy is the same model in another basis: its state is mapped with it
    aligner = ModelAligner().fit([a, b])
    b2 = aligner.align([a, b])[1]
    expected = _align_optimizer_state(b.optimizer_state_, aligner.alignments_[1])
    assert b2.optimizer_state_["step"] == expected["step"]
    for key in ("exp_avg", "exp_avg_sq"):
        for name in ("split_weight", "split_bias", "leaf_value"):
            np.testing.assert_array_equal(getattr(b2.optimizer_state_[key], name),
                                          getattr(expected[key], name))


# -- partial_fit ---------------------------------------------------------------------------


def test_partial_fit_is_one_warm_started_epoch_per_call():
    """Each partial_fit call equals one warm-started fit epoch with a constant
    learning rate and no averaging (what partial_fit documents)."""
    from sktree_lmc import SoftTreeEnsembleClassifier

    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    kw = dict(n_estimators=8, depth=2, batch_size=64, device="cpu", random_state=0,
              numeric_encoding="standard")
    streamed = SoftTreeEnsembleClassifier(**kw)
    streamed.partial_fit(X, y, classes=[0, 1]).partial_fit(X, y)
    reference = SoftTreeEnsembleClassifier(
        **kw, lr_schedule="constant", averaging=None, max_epochs=1, early_stopping=False,
        warm_start=True, teacher_weight=0.0)
    reference.fit(X, y).fit(X, y)
    for name in ("split_weight", "split_bias", "leaf_value"):
        np.testing.assert_array_equal(getattr(streamed.tree_params_, name),
                                      getattr(reference.tree_params_, name))
    assert streamed.n_epochs_ == 2
    # the hyperparameters are the user's again after each call
    assert streamed.get_params()["max_epochs"] == 150 and not streamed.warm_start


def test_partial_fit_classes_and_batches_with_some_labels():
    from sktree_lmc import SoftTreeEnsembleClassifier

    X, y = make_classification(n_samples=400, n_features=5, n_classes=3, n_informative=3,
                               random_state=0)
    est = SoftTreeEnsembleClassifier(n_estimators=16, depth=2, device="cpu", random_state=0)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        est.partial_fit(X, y)
    first = SoftTreeEnsembleClassifier(n_estimators=4, depth=2, device="cpu", random_state=0)
    first.partial_fit(X[y == 0], y[y == 0], classes=[0, 1, 2])  # one label in the batch
    assert first.classes_.tolist() == [0, 1, 2] and first.predict_proba(X).shape == (400, 3)
    est.partial_fit(X[:100], y[:100], classes=[0, 1, 2])
    for _ in range(20):
        est.partial_fit(X, y)
    assert est.score(X, y) > 0.7
    with pytest.raises(ValueError, match="differs from the classes of the first"):
        est.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="not fitted on"):
        est.partial_fit(X[:5], np.array([0, 1, 2, 3, 0]))


def test_regressor_partial_fit_learns():
    from sklearn.datasets import make_regression

    from sktree_lmc import SoftTreeEnsembleRegressor

    X, y = make_regression(n_samples=400, n_features=4, random_state=0)
    est = SoftTreeEnsembleRegressor(n_estimators=16, depth=2, device="cpu", random_state=0)
    for _ in range(15):
        for start in range(0, 400, 100):
            est.partial_fit(X[start:start + 100], y[start:start + 100])
    assert est.score(X, y) > 0.6 and est.n_epochs_ == 60

"""``teacher_rows``: extra training rows drawn from the encoder's joint column distribution,
labelled by the teacher alone ("auto": 3x the training rows with more than two classes and a
teacher, else 0; the default is 0: measured, it did not hold on the merge axis)."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

import sktree_lmc.training._fit as fit_module
from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    merge_estimators,
)
from sktree_lmc.training._plan import AUTO_TEACHER_ROWS, Recipe, auto_teacher_rows
from sktree_lmc.training._start import probe_inputs

SMALL = dict(n_estimators=8, max_epochs=3, device="cpu", teacher_rows="auto")


def _data(n_classes=3, n=300, seed=0):
    return make_classification(n_samples=n, n_features=6, n_informative=4,
                               n_classes=n_classes, random_state=seed)


def _proba(est, X, y):
    return est.fit(X, y).predict_proba(X)


@pytest.fixture
def spy(monkeypatch):
    """The states and targets before and after ``with_teacher_rows`` of every fit."""
    calls = []
    library = fit_module.with_teacher_rows

    def recorded(state, objective, encoder, target):
        new_state, new_target = library(state, objective, encoder, target)
        calls.append((state, target, new_state, new_target, objective))
        return new_state, new_target

    monkeypatch.setattr(fit_module, "with_teacher_rows", recorded)
    return calls


def test_auto_is_three_times_the_rows_with_several_classes_and_a_teacher_only():
    assert auto_teacher_rows(3, 0.75) == AUTO_TEACHER_ROWS == 3
    assert auto_teacher_rows(10, 0.1) == 3
    assert auto_teacher_rows(2, 0.75) == 0  # binary
    assert auto_teacher_rows(0, 0.75) == 0  # regression
    assert auto_teacher_rows(5, 0.0) == 0  # no teacher
    base = Recipe(max_epochs=1, early_stopping=False, lr_schedule="cosine", warmup_fraction=0,
                  averaging=None, teacher_weight=0.75, keep_optimizer_state=False,
                  teacher_rows="auto")
    assert base.resolved(100, None, 4).teacher_rows == 3
    assert base.resolved(100, None, 2).teacher_rows == 0
    explicit = Recipe(**{**vars(base), "teacher_rows": 1.5})
    assert explicit.resolved(100, None, 2).teacher_rows == 1.5
    assert Recipe.PARTIAL_FIT["teacher_rows"] == 0


@pytest.mark.parametrize("value", [-1, -0.5, "three", [1], None])
def test_bad_values_raise_a_value_error_naming_the_parameter(value):
    X, y = _data()
    with pytest.raises(ValueError, match="teacher_rows"):
        SoftTreeEnsembleClassifier(**{**SMALL, "teacher_rows": value}).fit(X, y)


def test_stored_unchanged_and_cloned():
    est = SoftTreeEnsembleClassifier(teacher_rows=1.5)
    assert est.teacher_rows == 1.5 and clone(est).teacher_rows == 1.5
    assert SoftTreeEnsembleClassifier().teacher_rows == 0
    assert SoftTreeEnsembleRegressor().teacher_rows == 0


def test_the_extra_rows_are_reproducible_with_random_state_and_differ_between_seeds():
    X, y = _data()
    a = _proba(SoftTreeEnsembleClassifier(random_state=3, **SMALL), X, y)
    b = _proba(SoftTreeEnsembleClassifier(random_state=3, **SMALL), X, y)
    c = _proba(SoftTreeEnsembleClassifier(random_state=4, **SMALL), X, y)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_zero_is_the_fit_without_the_step(monkeypatch):
    """``teacher_rows=0`` draws nothing and adds nothing: the fit is the one with the step
    removed (the library before the parameter)."""
    X, y = _data()
    zero = _proba(SoftTreeEnsembleClassifier(random_state=0, **{**SMALL, "teacher_rows": 0}),
                  X, y)
    auto = _proba(SoftTreeEnsembleClassifier(random_state=0, **SMALL), X, y)
    monkeypatch.setattr(fit_module, "with_teacher_rows", lambda s, o, e, t: (s, t))
    without = _proba(SoftTreeEnsembleClassifier(random_state=0, **SMALL), X, y)
    np.testing.assert_array_equal(zero, without)
    assert not np.array_equal(auto, without)


def test_binary_default_and_no_teacher_add_no_rows(spy):
    X, y = _data(n_classes=2)
    default = _proba(SoftTreeEnsembleClassifier(random_state=0, **SMALL), X, y)
    zero = _proba(SoftTreeEnsembleClassifier(random_state=0, **{**SMALL, "teacher_rows": 0}),
                  X, y)
    np.testing.assert_array_equal(default, zero)
    X3, y3 = _data()
    SoftTreeEnsembleClassifier(teacher_weight=0, random_state=0,
                               **{**SMALL, "teacher_rows": 2}).fit(X3, y3)
    for before, _, after, _, _ in spy:
        assert after is before  # nothing added, nothing drawn


@pytest.mark.parametrize("validation", ["held_out", "user"])
def test_extra_rows_are_training_rows_only_labelled_by_the_teacher(spy, validation):
    X, y = _data(n=400)
    est = SoftTreeEnsembleClassifier(early_stopping=True, random_state=0,
                                     **{**SMALL, "teacher_rows": 1.5})
    if validation == "user":
        est.fit(X[:300], y[:300], X_val=X[300:], y_val=y[300:])
    else:
        est.fit(X, y)
    (before, target, after, new_target, objective), = spy
    n, n_train = before.inputs.n_rows, len(before.train_idx)
    n_extra = int(round(1.5 * n_train))
    assert after.inputs.n_rows == n + n_extra
    np.testing.assert_array_equal(after.val_idx, before.val_idx)
    np.testing.assert_array_equal(after.train_idx[:n_train], before.train_idx)
    np.testing.assert_array_equal(after.train_idx[n_train:], np.arange(n, n + n_extra))
    assert not np.isin(after.val_idx, after.train_idx).any()
    # the rows before, the validation rows among them, are unchanged
    np.testing.assert_array_equal(after.inputs.X[:n], before.inputs.X)
    np.testing.assert_array_equal(new_target[:n], target)
    np.testing.assert_array_equal(after.sample_weight[:n], before.sample_weight)
    # the extra rows: the teacher's probabilities alone, the training rows' mean weight
    extra_X = np.asarray(after.inputs.X[n:], dtype=np.float64)
    np.testing.assert_allclose(new_target[n:], objective.teacher_labelled(extra_X), rtol=1e-6)
    np.testing.assert_allclose(new_target[n:].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(after.sample_weight[n:],
                               before.sample_weight[before.train_idx].mean())
    assert not any((extra_X == row).all(axis=1).any() for row in before.inputs.X)


def test_a_column_without_a_summary_takes_training_rows_values():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=200), "b": rng.integers(0, 5, 200).astype(float),
                      "c": pd.Categorical(rng.choice(list("xyz"), 200))})
    y = rng.integers(0, 3, 200)
    est = SoftTreeEnsembleClassifier(numeric_encoding="none", random_state=0,
                                     **SMALL).fit(X, y)
    enc = est.encoder_
    inputs = est._encoded_input(X)
    extra = probe_inputs(enc, 500, inputs, np.arange(150), seed=1)
    for column in (0, 1):  # numeric "none": the features of training rows 0..149
        f = enc.feature_groups_ == column
        assert np.isin(extra.X[:, f], inputs.X[:150][:, f]).all()
    assert len(np.unique(extra.X[:, enc.feature_groups_ == 0])) > 20
    again = probe_inputs(enc, 500, inputs, np.arange(150), seed=1)
    np.testing.assert_array_equal(extra.X, again.X)


def test_pickle_merge_and_sharded_fits_work_with_teacher_rows(spy):
    X, y = _data(n=400)
    a = SoftTreeEnsembleClassifier(random_state=0, **SMALL).fit(X, y)
    b = SoftTreeEnsembleClassifier(random_state=1, **SMALL).fit(X, y)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)).predict_proba(X),
                                  a.predict_proba(X))
    merged = merge_estimators(a, b)
    assert merged.predict_proba(X).shape == (400, 3)
    assert merged.teacher_rows == "auto"
    default = SoftTreeEnsembleClassifier(random_state=0, **{**SMALL, "teacher_rows": 0})
    np.testing.assert_array_equal(  # the default adds none
        _proba(SoftTreeEnsembleClassifier(random_state=0, n_estimators=8, max_epochs=3,
                                          device="cpu"), X, y), _proba(default, X, y))
    del spy[:]
    sharded = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**SMALL), n_shards=2,
                                      random_state=0).fit(X, y)
    assert sharded.predict_proba(X).shape == (400, 3)
    assert len(spy) == 2  # each shard's fit, its rows tripled by the shared teacher's
    for before, _, after, _, _ in spy:
        assert after.inputs.n_rows == before.inputs.n_rows + 3 * len(before.train_idx)
    rounds = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**SMALL), n_shards=2,
                                     n_rounds=2, random_state=0).fit(X, y)
    assert rounds.score(X, y) > 0.4


@pytest.mark.parametrize("loss", ["squared_error", "poisson"])
def test_a_regressor_adds_rows_only_when_asked(spy, loss):
    X, y = _data(n=300)
    y = np.exp(X[:, 0] / 2) if loss == "poisson" else X[:, 0] + X[:, 1] ** 2
    SoftTreeEnsembleRegressor(teacher_weight=0.5, loss=loss, random_state=0, **SMALL).fit(X, y)
    (before, _, after, _, _), = spy
    assert after is before  # "auto": none for a regression
    est = SoftTreeEnsembleRegressor(teacher_weight=0.5, loss=loss, random_state=0,
                                    **{**SMALL, "teacher_rows": 1}).fit(X, y)
    (before, target, after, new_target, objective) = spy[1]
    n = before.inputs.n_rows
    assert after.inputs.n_rows == n + len(before.train_idx)
    extra = objective.teacher_labelled(np.asarray(after.inputs.X[n:], dtype=np.float64))
    np.testing.assert_allclose(new_target[n:], extra.reshape(new_target[n:].shape), rtol=1e-6)
    # the teacher's predictions in the fitted targets' units
    assert abs(new_target[n:].mean() - target[before.train_idx].mean()) < 0.5 * target.std()
    assert np.isfinite(est.predict(X)).all()

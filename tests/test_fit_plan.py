"""Issue 44: one owner for training. The explicit inputs of a fit (FitPlan, the
``encoder`` hyperparameter), the epoch loop below the estimator, the round
state's checkpoint, and the findings of the fuzz that touched them."""

import inspect
import io
import pickle
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    merge_estimators,
)
from sktree_lmc.encoding._encoding import encoders_differ

PACKAGE = Path(__file__).resolve().parent.parent / "sktree_lmc"
FAST = dict(n_estimators=4, depth=2, max_epochs=2, device="cpu", random_state=0)
X, Y = make_classification(n_samples=240, n_features=5, n_informative=3, random_state=0)


def clf(**kw):
    return SoftTreeEnsembleClassifier(**{**FAST, **kw})


# -- explicit inputs ----------------------------------------------------------------------------
def test_no_hidden_settings_between_layers():
    """The old hooks are gone from the package."""
    source = "\n".join(p.read_text() for p in sorted(PACKAGE.glob("*.py")))
    for hook in ("_shared_encoder", "_shared_boosting", "_schedule_window", "_partial_classes"):
        assert hook not in source


def test_no_module_sets_a_private_attribute_on_an_estimator(monkeypatch):
    """Fits, partial fits, sharded rounds with a teacher and early stopping, merges and
    refits: every private attribute of an estimator is set by its own class's code."""
    from sktree_lmc import refit_leaves
    from sktree_lmc._estimators import _BaseSoftTreeEnsemble

    outside = []

    def spy(self, name, value):
        if name.startswith("_") and not name.startswith("__"):
            where = Path(sys._getframe(1).f_code.co_filename).name
            if where != "_estimators.py":
                outside.append((name, where))
        object.__setattr__(self, name, value)

    monkeypatch.setattr(_BaseSoftTreeEnsemble, "__setattr__", spy)
    a = clf(teacher_weight=0.5).fit(X, Y)
    b = SoftTreeEnsembleRegressor(**FAST).fit(X, X[:, 0])
    clf().partial_fit(X[:100], Y[:100], classes=[0, 1]).partial_fit(X[100:], Y[100:])
    ShardedSoftTreeEnsemble(clf(early_stopping=True), n_shards=2, n_rounds=2,
                            random_state=0).fit(X, Y)
    refit_leaves(merge_estimators(a, clf(random_state=1).fit(X, Y)), X, Y)
    merge_estimators(b, SoftTreeEnsembleRegressor(**{**FAST, "random_state": 1}).fit(X, X[:, 0]))
    assert outside == []


def test_fit_is_a_short_driver():
    from sktree_lmc._estimators import _BaseSoftTreeEnsemble

    for method in (_BaseSoftTreeEnsemble.fit, _BaseSoftTreeEnsemble._fit):
        assert len(inspect.getsource(method).splitlines()) <= 50 + (
            len(method.__doc__.splitlines()) + 2 if method.__doc__ else 0)


def test_partial_fit_does_not_change_hyperparameters(monkeypatch):
    est = clf()

    def refuse(self, **params):
        raise AssertionError(f"set_params({params}) during partial_fit")

    monkeypatch.setattr(SoftTreeEnsembleClassifier, "set_params", refuse)
    before = est.get_params()
    for start in (0, 80, 160):
        est.partial_fit(X[start:start + 80], Y[start:start + 80], classes=[0, 1])
    assert est.get_params() == before and est.n_epochs_ == 3


@pytest.mark.parametrize("classes", [[0, 1, np.nan], [0.0, np.nan], np.array([0, None, 1],
                                                                            dtype=object)])
def test_partial_fit_refuses_missing_classes(classes):
    with pytest.raises(ValueError, match="classes contains a missing value"):
        clf().partial_fit(X[:50], Y[:50], classes=classes)


# -- the encoder hyperparameter -----------------------------------------------------------------
@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_encoder_round_trip(Est):
    """A model fitted with ``encoder=`` the encoder it would fit is the same model;
    clone and pickle keep the fitted encoder; other columns are a clear error."""
    y = Y if Est is SoftTreeEnsembleClassifier else X[:, 0] + Y
    ref = Est(**FAST).fit(X, y)
    given = Est(**FAST, encoder=ref.encoder_).fit(X, y)
    assert_array_equal(given.predict(X), ref.predict(X))
    assert given.encoder_ is ref.encoder_ or encoders_differ(given.encoder_, ref.encoder_) is None
    cloned = clone(given)
    assert encoders_differ(cloned.encoder, ref.encoder_) is None
    assert_array_equal(cloned.fit(X, y).predict(X), ref.predict(X))
    back = pickle.loads(pickle.dumps(given))
    assert encoders_differ(back.encoder, ref.encoder_) is None
    assert_array_equal(back.predict(X), ref.predict(X))
    with pytest.raises(ValueError, match="encoder given expects 5 columns, got 4"):
        Est(**FAST, encoder=ref.encoder_).fit(X[:, :4], y)


def test_encoder_must_be_fitted_and_a_tabular_encoder():
    from sklearn.utils._param_validation import InvalidParameterError

    from sktree_lmc import TabularEncoder

    with pytest.raises(ValueError, match="not fitted"):
        clf(encoder=TabularEncoder()).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="encoder"):
        clf(encoder="quantile").fit(X, Y)


def test_models_of_different_rows_with_one_encoder_merge_and_grid_search():
    """The encoder fitted once (here on all rows) makes models of different rows
    mergeable; it is an ordinary hyperparameter for GridSearchCV and Pipelines."""
    encoder = clf().fit(X, Y).encoder_
    a = clf(encoder=encoder).fit(X[:120], Y[:120])
    b = clf(encoder=encoder, random_state=1).fit(X[120:], Y[120:])
    merged = merge_estimators(a, b)
    assert merged.predict_proba(X).shape == (len(X), 2)
    search = GridSearchCV(make_pipeline(clf(encoder=encoder)),
                          {"softtreeensembleclassifier__depth": [1, 2]}, cv=2).fit(X, Y)
    assert search.best_estimator_[-1].encoder_ is not None


def test_rows_of_zero_weight_do_not_shape_the_encoder():
    w = np.ones(len(Y))
    w[:60] = 0.0
    Xw = X.copy()
    Xw[:60] *= 1000.0  # far outside the others: they would move every quantile
    weighted = clf().fit(Xw, Y, sample_weight=w)
    dropped = clf().fit(Xw[60:], Y[60:])
    assert encoders_differ(weighted.encoder_, dropped.encoder_) is None


# -- the epoch loop's callbacks -----------------------------------------------------------------
@pytest.mark.parametrize("value, match", [
    (np.nan, "returned nan"), (None, "returned None"), (np.array([0.5, 0.6]), "array of shape"),
    ("good", "returned 'good'"), (np.inf, "returned inf"),
])
def test_scorers_of_odd_values_are_a_clear_error(value, match):
    def scorer(estimator, X, y):
        return value

    with pytest.raises(ValueError, match=match):
        clf(scoring=scorer, early_stopping=True).fit(X, Y)


class _NoFlush:
    def __init__(self):
        self.text = []

    def write(self, s):
        self.text.append(s)
        return len(s)


def test_verbose_with_a_closed_or_flushless_stderr_does_not_kill_the_fit(monkeypatch):
    closed = io.StringIO()
    closed.close()
    flushless = _NoFlush()
    for stream in (closed, flushless, None):
        monkeypatch.setattr(sys, "stderr", stream)
        est = clf(verbose=1).fit(X, Y)
        assert est.n_iter_ == 2
    # a stream without flush still shows the lines
    assert any("epoch 2/2" in line for line in flushless.text)


# -- sharded rounds -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 3, 4])
def test_rounds_with_shards_whose_held_out_rows_lack_a_class(seed):
    """Issue 44: with the teacher and round-level early stopping, a shard's few
    held-out rows can lack a class; this ended in a misleading warm_start error."""
    rng = np.random.RandomState(0)
    X80 = rng.normal(size=(80, 4))
    y80 = (X80[:, 0] > 0).astype(int)
    est = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2),
                                  n_shards=2, n_rounds=2, split="class_skewed",
                                  random_state=seed).fit(X80, y80)
    assert est.n_rounds_ >= 1 and est.predict(X80).shape == (80,)


def _checkpoint(tmp_path, **kw):
    path = tmp_path / "rounds.ckpt"
    base = clf(max_epochs=2, early_stopping=False)
    params = dict(n_shards=2, n_rounds=2, random_state=0, **kw)
    ShardedSoftTreeEnsemble(base, checkpoint=path, **params).fit(X, Y)
    return path, base, params


def test_resume_from_a_checkpoint_of_another_configuration_is_refused(tmp_path):
    path, base, params = _checkpoint(tmp_path)
    other = clone(base).set_params(n_estimators=8, depth=3)
    with pytest.raises(ValueError, match=r"other settings.*estimator__depth: 2 in the "
                                         r"checkpoint, 3 now.*estimator__n_estimators"):
        ShardedSoftTreeEnsemble(other, **params).fit(X, Y, resume_from=path)
    with pytest.raises(ValueError, match="numeric_encoding"):
        ShardedSoftTreeEnsemble(clone(base).set_params(numeric_encoding="standard"),
                                **params).fit(X, Y, resume_from=path)
    with pytest.raises(ValueError, match="written by a fit on other data"):
        ShardedSoftTreeEnsemble(base, **params).fit(X * 2 + 1, Y, resume_from=path)
    # where it runs and how verbosely may change; what it computes may not
    resumed = ShardedSoftTreeEnsemble(base, **params, verbose=0, n_jobs=1).fit(
        X, Y, resume_from=path)
    assert resumed.n_rounds_ == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "edit_header", "garbage", "missing"])
def test_a_damaged_checkpoint_is_a_clear_error_naming_the_file(tmp_path, damage):
    path, base, params = _checkpoint(tmp_path)
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        flipped = bytearray(raw)
        flipped[-100] ^= 0x01
        path.write_bytes(bytes(flipped))
    elif damage == "edit_header":
        path.write_bytes(raw.replace(b'"round": 2', b'"round": 9', 1)[:-3] + b"abc")
    elif damage == "garbage":
        path.write_bytes(b"not a checkpoint at all")
    else:
        path.unlink()
    with pytest.raises(ValueError, match=re.escape(str(path))):
        ShardedSoftTreeEnsemble(base, **params).fit(X, Y, resume_from=path)


@pytest.mark.parametrize("scale", [1e-310, 5e-324, 1e-40, 1e300])
@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_extreme_sample_weights_fit_as_their_ratios(Est, scale):
    """Issue 44: subnormal weights ended in a misleading "Training diverged" (the
    teacher's rescaling overflowed); only the weights' ratios matter."""
    y = Y if Est is SoftTreeEnsembleClassifier else X[:, 0]
    kw = dict(FAST, early_stopping=False, teacher_weight=0.5)
    ones = Est(**kw).fit(X, y)
    tiny = Est(**kw).fit(X, y, sample_weight=np.full(len(y), scale))
    # equal weights of any scale: the same model (up to the rounding of a weighted mean)
    np.testing.assert_allclose(tiny.predict(X), ones.predict(X), rtol=1e-9, atol=1e-12)

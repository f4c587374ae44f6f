"""Issue 45, "the second week of a user": a validation set of one's own
(``fit(X_val=..., y_val=...)``), ``refit_leaves`` of a sharded model,
``partial_fit``'s pass count and encoding warning, lazy predictions on dask
collections, the progress before the first epoch, ``feature_importances_``,
and docs that say what is so."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_wine, make_classification
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TabularEncoder,
    refit_leaves,
)
from sktree_lmc._encoding import encoders_differ

from conftest import FAST

REPO = Path(__file__).resolve().parent.parent
X, Y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0)
X_TR, X_VA, Y_TR, Y_VA = X[:300], X[300:], Y[:300], Y[300:]


def clf(**kw):
    return SoftTreeEnsembleClassifier(**{**FAST, "random_state": 0, **kw})


def reg(**kw):
    return SoftTreeEnsembleRegressor(**{**FAST, "random_state": 0, **kw})


# -- 1. a validation set of the user's own -----------------------------------------------------
def test_x_val_trains_on_every_row_and_early_stops_on_the_validation_rows(monkeypatch):
    """Every training row trains, the validation rows are appended (encoded with the
    encoder fitted on the training rows alone), and the validation loss of the kept
    epoch is the weighted log-loss of the fitted model on them."""
    import sktree_lmc._estimators as est_module

    seen = {}
    real_train = est_module.train

    def spy(module, optimizer, loss_fn, data, train_idx, **kw):
        seen["train_idx"], seen["n_rows"] = np.asarray(train_idx), data.X.shape[0]
        return real_train(module, optimizer, loss_fn, data, train_idx, **kw)

    monkeypatch.setattr(est_module, "train", spy)
    w_val = np.random.RandomState(0).uniform(0.5, 2.0, len(Y_VA))
    est = clf(max_epochs=6, n_iter_no_change=3, teacher_weight=0.5).fit(
        X_TR, Y_TR, X_val=X_VA, y_val=Y_VA, sample_weight_val=w_val)
    assert_array_equal(seen["train_idx"], np.arange(len(X_TR)))
    assert seen["n_rows"] == len(X_TR) + len(X_VA)
    no_val = clf(early_stopping=False).fit(X_TR, Y_TR)
    assert encoders_differ(est.encoder_, no_val.encoder_) is None  # fitted on X_TR only
    best = est.best_epoch_
    assert len(est.validation_loss_curve_) == est.n_iter_ and 1 <= best <= est.n_iter_
    assert est.validation_score_ == [-v for v in est.validation_loss_curve_]
    manual = log_loss(Y_VA, est.predict_proba(X_VA), sample_weight=w_val)
    assert_allclose(est.validation_loss_curve_[best - 1], manual, rtol=1e-4)


def test_x_val_for_the_regressor_and_a_scorer():
    y = X[:, 0] * 3 + X[:, 1]
    est = reg(max_epochs=4, n_iter_no_change=4).fit(X_TR, y[:300], X_val=X_VA, y_val=y[300:])
    manual = np.mean(((est.predict(X_VA) - y[300:]) / est.y_scale_) ** 2)
    assert_allclose(est.validation_loss_curve_[est.best_epoch_ - 1], manual, rtol=1e-4)
    scored = clf(max_epochs=4, scoring="accuracy", n_iter_no_change=4).fit(
        X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert scored.validation_score_[scored.best_epoch_ - 1] == pytest.approx(
        accuracy_score(Y_VA, scored.predict(X_VA)))


def test_the_teacher_keeps_the_prefix_chosen_on_the_users_rows(monkeypatch):
    import sktree_lmc._estimators as est_module

    seen = {}
    real_grow = est_module.grow_oblivious_trees

    def spy(Xe, target, weight, **kw):
        seen["n_train"], seen["validation"] = len(Xe), kw["validation"]
        return real_grow(Xe, target, weight, **kw)

    monkeypatch.setattr(est_module, "grow_oblivious_trees", spy)
    est = clf(teacher_weight=0.75).fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    Xv, tv, wv = seen["validation"]
    assert seen["n_train"] == len(X_TR) and len(Xv) == len(X_VA)
    assert_array_equal(Xv, est.encoder_.transform(X_VA))
    assert_array_equal(tv, Y_VA)
    assert est.teacher_ is not None


def test_x_val_errors_as_histgradientboosting():
    with pytest.raises(ValueError, match="early_stopping is False"):
        clf(early_stopping=False).fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    with pytest.raises(ValueError, match="y_val was not provided"):
        clf().fit(X_TR, Y_TR, X_val=X_VA)
    with pytest.raises(ValueError, match="X_val was not provided"):
        clf().fit(X_TR, Y_TR, y_val=Y_VA)
    with pytest.raises(ValueError, match="sample_weight_val is provided"):
        clf().fit(X_TR, Y_TR, sample_weight_val=np.ones(len(Y_VA)))
    with pytest.raises(ValueError, match="features"):
        clf().fit(X_TR, Y_TR, X_val=X_VA[:, :3], y_val=Y_VA)
    with pytest.raises(ValueError, match="not fitted on"):
        clf().fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA + 5)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf().fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA[:-1])
    with pytest.raises(ValueError, match="sample_weight_val"):
        clf().fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA, sample_weight_val=np.zeros(len(Y_VA)))


def test_sharded_x_val_rounds_stop_on_the_users_rows(monkeypatch):
    """ShardedSoftTreeEnsemble(...).fit(X_val=, y_val=): the rounds stop on the merged
    model's loss on the user's rows (no shard holds out rows), and one round's shard
    fits early-stop on them."""
    from sktree_lmc import _federated

    held = []
    monkeypatch.setattr(_federated._LocalShards, "hold_out",
                        lambda self, *a: held.append(a))
    sharded = ShardedSoftTreeEnsemble(clf(max_epochs=2), n_shards=2, n_rounds=3,
                                      random_state=0).fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert held == []  # every shard row trains
    losses = [h["validation_loss"] for h in sharded.history_]
    merged = ShardedSoftTreeEnsemble(clf(max_epochs=2), n_shards=2, n_rounds=1,
                                     random_state=0)
    assert all(np.isfinite(losses))
    # the last round's validation loss is the log loss of its merge on the user's rows
    # (the kept merge is the best round's)
    best = int(np.argmin(losses))
    assert losses[best] == pytest.approx(
        log_loss(Y_VA, sharded.merged_.predict_proba(X_VA)), rel=1e-5)
    one = merged.fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert all(len(e.validation_loss_curve_) == e.n_iter_ for e in one.estimators_)
    # the shard fits validated on the user's rows: all their rows trained
    assert all(e.do_early_stopping_ for e in one.estimators_)
    with pytest.raises(ValueError, match="early_stopping to 'auto' or True"):
        ShardedSoftTreeEnsemble(clf(early_stopping=False), n_shards=2).fit(
            X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    with pytest.raises(ValueError, match="y_val was not provided"):
        ShardedSoftTreeEnsemble(clf(), n_shards=2).fit(X_TR, Y_TR, X_val=X_VA)


def test_sharded_x_val_chooses_the_shared_teachers_trees():
    """With a teacher, the shared boosted trees' prefix is chosen on the user's rows
    (the first site holds them); on dask the rows go with the first site's task."""
    sharded = ShardedSoftTreeEnsemble(clf(max_epochs=2, teacher_weight=0.5), n_shards=2,
                                      n_rounds=2, random_state=0)
    sharded.fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert sharded.boosting_bytes_ > 0
    assert np.isfinite(sharded.predict_proba(X_VA)).all()


def test_early_stopping_auto_follows_the_size_and_the_users_rows():
    """early_stopping="auto" (the default): a validation split above
    EARLY_STOPPING_AUTO_ROWS training rows, none below, always with X_val."""
    from sktree_lmc._plan import EARLY_STOPPING_AUTO_ROWS, auto_early_stopping

    assert SoftTreeEnsembleClassifier().early_stopping == "auto"
    assert SoftTreeEnsembleRegressor().early_stopping == "auto"
    assert not auto_early_stopping(EARLY_STOPPING_AUTO_ROWS, False)
    assert auto_early_stopping(EARLY_STOPPING_AUTO_ROWS + 1, False)
    assert auto_early_stopping(10, True)
    small = clf(early_stopping="auto").fit(X_TR, Y_TR)
    assert not small.do_early_stopping_ and small.validation_loss_curve_ is None
    assert small.n_iter_ == small.max_epochs
    own = clf(early_stopping="auto").fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert own.do_early_stopping_ and own.validation_loss_curve_
    forced = clf(early_stopping=True).fit(X_TR, Y_TR)
    assert forced.do_early_stopping_ and forced.validation_loss_curve_
    with pytest.raises(InvalidParameterError, match="early_stopping"):
        clf(early_stopping="sometimes").fit(X_TR, Y_TR)


def test_x_val_on_small_data_uses_every_row():
    """load_wine, 75/25: a held-out 10 % of 133 rows costs points; the user's own
    validation rows (here the test rows, which the API allows) leave every row to train."""
    Xw, yw = load_wine(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(Xw, yw, test_size=0.25, random_state=0, stratify=yw)
    params = dict(n_estimators=32, random_state=0, device="cpu")
    held_out = SoftTreeEnsembleClassifier(**params).fit(Xtr, ytr)
    own = SoftTreeEnsembleClassifier(**params).fit(Xtr, ytr, X_val=Xte, y_val=yte)
    assert own.score(Xte, yte) >= held_out.score(Xte, yte)


def test_x_val_through_pipelines():
    """As a step parameter (``step__X_val``), and with metadata routing, where
    ``transform_input`` preprocesses the validation rows as the training rows."""
    import sklearn

    pipe = make_pipeline(StandardScaler(), clf()).fit(
        X_TR, Y_TR, softtreeensembleclassifier__X_val=X_VA,
        softtreeensembleclassifier__y_val=Y_VA)
    assert len(pipe[-1].validation_loss_curve_) == pipe[-1].n_iter_
    scaler = StandardScaler().fit(X_TR)
    direct = clf().fit(scaler.transform(X_TR), Y_TR, X_val=scaler.transform(X_VA), y_val=Y_VA)
    with sklearn.config_context(enable_metadata_routing=True):
        step = clf().set_fit_request(X_val=True, y_val=True, sample_weight_val=True)
        routed = Pipeline([("scale", StandardScaler()), ("model", step)],
                          transform_input=["X_val"]).fit(
            X_TR, Y_TR, X_val=X_VA, y_val=Y_VA, sample_weight_val=np.ones(len(Y_VA)))
    assert_allclose(routed[-1].validation_loss_curve_, direct.validation_loss_curve_)
    assert_array_equal(routed.predict(X_VA), direct.predict(scaler.transform(X_VA)))


# -- 2. refit_leaves of a sharded model ---------------------------------------------------------
def test_refit_leaves_of_a_sharded_model():
    sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(X, Y)
    before = sharded.merged_.tree_params_.leaf_value.copy()
    refitted, info = refit_leaves(sharded, X, Y, max_iter=30, return_info=True)
    assert type(refitted) is ShardedSoftTreeEnsemble and refitted is not sharded
    assert_array_equal(sharded.merged_.tree_params_.leaf_value, before)  # not modified
    alone = refit_leaves(sharded.merged_, X, Y, max_iter=30)
    assert_array_equal(refitted.merged_.tree_params_.leaf_value, alone.tree_params_.leaf_value)
    assert_array_equal(refitted.predict_proba(X), alone.predict_proba(X))
    assert info["objective"] <= info["objective_start"]
    assert refitted.estimators_[0] is not sharded.estimators_[0]
    with pytest.raises(NotFittedError):
        refit_leaves(ShardedSoftTreeEnsemble(clf()), X, Y)


def test_curves_and_merges_take_sharded_models():
    """interpolation_curve, merge_estimators and ModelAligner take fitted
    ShardedSoftTreeEnsembles: their merged models."""
    from sktree_lmc import ModelAligner, interpolation_curve, merge_estimators

    a = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(X_TR, Y_TR)
    b = ShardedSoftTreeEnsemble(clf(random_state=1), n_shards=2, random_state=1).fit(X_TR, Y_TR)
    curve = interpolation_curve(a, b, X_VA, Y_VA, lambdas=3)
    assert len(curve.lambdas) == 3
    assert_allclose(merge_estimators(a, b, lam=0.0).predict_proba(X_VA),
                    a.predict_proba(X_VA), atol=1e-5)
    assert ModelAligner().fit([a, b]).weights_ is not None


def test_refit_leaves_error_names_only_public_classes():
    with pytest.raises(InvalidParameterError, match="estimator") as error:
        refit_leaves(object(), X, Y)
    message = str(error.value)
    assert "ShardedSoftTreeEnsemble" in message and "SoftTreeEnsembleClassifier" in message
    assert not re.search(r"\b_[A-Za-z]", message.replace("<object object", ""))


# -- 3. partial_fit -----------------------------------------------------------------------------
def test_partial_fit_counts_passes_and_warns_once_about_the_encoding():
    est = clf()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for start in range(0, 400, 100):
            est.partial_fit(X[start:start + 100], Y[start:start + 100], classes=[0, 1])
            assert est.n_iter_ == start // 100 + 1
    ours = [w for w in caught if "input encoding" in str(w.message)]
    assert len(ours) == 1 and ours[0].category is UserWarning
    assert ours[0].filename == __file__  # points at the caller
    assert "encoder=TabularEncoder" in str(ours[0].message)
    assert est.n_epochs_ == 4
    r = reg()
    with pytest.warns(UserWarning, match="input encoding"):
        r.partial_fit(X[:100], X[:100, 0])
    r.partial_fit(X[100:200], X[100:200, 0])
    assert r.n_iter_ == 2


def test_partial_fit_with_a_given_encoder_does_not_warn():
    encoder = TabularEncoder(numeric_encoding="quantile_normal").fit(X)
    est = clf(encoder=encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.partial_fit(X[:100], Y[:100], classes=[0, 1]).partial_fit(X[100:], Y[100:])
    assert est.n_iter_ == 2 and encoders_differ(est.encoder_, encoder) is None


def test_partial_fit_after_fit_adds_to_n_iter():
    est = clf(max_epochs=3, early_stopping=False).fit(X, Y)
    assert est.n_iter_ == 3
    est.partial_fit(X[:100], Y[:100])
    assert est.n_iter_ == 4


# -- 4. predictions on dask collections ---------------------------------------------------------
@pytest.fixture
def synchronous_dask():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


def test_predictions_on_dask_arrays_are_lazy(synchronous_dask):
    import dask.array as da

    X3, y3 = make_classification(n_samples=300, n_features=5, n_informative=3, n_classes=3,
                                 random_state=0)
    labels = np.array(["a", "b", "c"])[y3]
    dX = da.from_array(X3, chunks=(70, 2))  # column chunks too: rows are made whole
    for est in (clf().fit(X3, labels), clf().fit(X3, y3 % 2)):
        for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
            lazy = getattr(est, method)(dX)
            assert isinstance(lazy, da.Array)
            expected = getattr(est, method)(X3)
            assert lazy.shape[1:] == expected.shape[1:]
            result = lazy.compute()
            assert result.dtype == expected.dtype
            assert_array_equal(result, expected)
    multi = reg().fit(X3, np.c_[X3[:, 0], X3[:, 1]])
    assert_array_equal(multi.predict(dX).compute(), multi.predict(X3))
    with pytest.raises(ValueError, match="4 features"):
        multi.predict(dX[:, :4])
    with pytest.raises(NotFittedError):
        clf().predict(dX)
    with pytest.raises(TypeError, match="compute"):
        multi.predict(dX[:, 0])


def test_predictions_on_dask_dataframes_and_sharded_models(synchronous_dask):
    import dask.dataframe as dd
    import pandas as pd

    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["kind"] = np.where(X[:, 0] > 0, "up", "down")
    est = clf().fit(frame, Y)
    lazy = est.predict_proba(dd.from_pandas(frame, npartitions=3))
    assert_array_equal(lazy.compute(), est.predict_proba(frame))
    sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(frame, Y)
    dframe = dd.from_pandas(frame, npartitions=4)
    assert_array_equal(sharded.predict(dframe).compute(), sharded.predict(frame))
    assert_array_equal(sharded.decision_function(dframe).compute(),
                       sharded.decision_function(frame))


def test_dask_fit_then_dask_predict():
    """After a fit on dask partitions (a client in this process), predictions on the
    same collection are lazy and equal the in-memory ones."""
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None):
        dX, dY = da.from_array(X, chunks=(200, 5)), da.from_array(Y, chunks=200)
        sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(dX, dY)
        lazy = sharded.predict_proba(dX)
        assert isinstance(lazy, da.Array)
        assert_allclose(lazy.compute(), sharded.predict_proba(X))


def test_dask_sharded_fit_with_the_users_validation_rows():
    """X_val with dask shards: the rounds' validation loss is computed where fit runs,
    and the shared teacher's trees are chosen on the rows sent with the first site."""
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None):
        dX, dY = da.from_array(X_TR, chunks=(150, 5)), da.from_array(Y_TR, chunks=150)
        sharded = ShardedSoftTreeEnsemble(clf(teacher_weight=0.5), n_shards=2, n_rounds=2,
                                          random_state=0).fit(dX, dY, X_val=X_VA, y_val=Y_VA)
        assert all(np.isfinite(h["validation_loss"]) for h in sharded.history_)
        assert sharded.boosting_bytes_ > 0
        assert sharded.score(X_VA, Y_VA) > 0.6


def test_sharded_verbose_says_what_came_before_the_first_round(capsys):
    """The sharded fit's first line: the encoding and the teacher, with its
    bytes and times; the elapsed time counts them."""
    ShardedSoftTreeEnsemble(clf(teacher_weight=0.5), n_shards=2, n_rounds=2, random_state=0,
                            teacher="shared", verbose=2).fit(X_TR, Y_TR)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines[:8]] == [
        f"ShardedSoftTreeEnsemble teacher tree {m}/8" for m in range(1, 9)]
    assert "MB_received" in lines[0] and "left <=" in lines[0]
    lines = lines[8:]
    assert re.match(r"ShardedSoftTreeEnsemble: encoded 300 rows in 2 shards into 5 features "
                    r"\(.*s\); the shared teacher: 8 boosted trees grown over 2 shards "
                    r"\([0-9,]+ kB of histograms received\) \(.*s\)$", lines[0]), lines[0]
    # the default teacher: one exchange of the shards' trees, no line per tree
    ShardedSoftTreeEnsemble(clf(teacher_weight=0.5), n_shards=2, n_rounds=2, random_state=0,
                            verbose=2).fit(X_TR, Y_TR)
    first = capsys.readouterr().err.splitlines()[0]
    assert re.match(r"ShardedSoftTreeEnsemble: encoded 300 rows in 2 shards into 5 features "
                    r"\(.*s\); the teacher: the average of the 2 shards' own \([0-9]+ boosted "
                    r"trees, [0-9,]+ kB of trees received\) \(.*s\)$", first), first
    assert lines[1].startswith("ShardedSoftTreeEnsemble round 1/2")


# -- 5. progress before the first epoch ---------------------------------------------------------
def test_verbose_says_what_came_before_the_first_epoch(capsys, monkeypatch):
    import time

    import sktree_lmc._estimators as est_module

    real_grow = est_module.grow_oblivious_trees

    def slow(*args, **kw):  # a teacher that takes a visible time
        time.sleep(0.3)
        return real_grow(*args, **kw)

    monkeypatch.setattr(est_module, "grow_oblivious_trees", slow)
    est = clf(max_epochs=2, verbose=1, teacher_weight=0.5, early_stopping=True).fit(X, Y)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == est.n_iter_ + 2
    first = lines[0]
    assert first.startswith("SoftTreeEnsembleClassifier: encoded 400 rows (40 held out for "
                            "early stopping) of 5 columns into ")
    assert "grew the teacher: " in first
    teacher_seconds = float(re.search(r"grew the teacher[^(]*(?:\([^)]*\)[^(]*)?\((\d+\.\d)s\)",
                                      first).group(1))
    assert teacher_seconds >= 0.3
    assert lines[1].startswith("SoftTreeEnsembleClassifier epoch 1/2")
    closing = float(re.search(r"\((\d+\.\d)s\)$", lines[-1]).group(1))
    assert closing >= teacher_seconds  # the elapsed time counts the steps before training
    clf(max_epochs=1, verbose=1).fit(X_TR, Y_TR, X_val=X_VA, y_val=Y_VA)
    assert "encoded 300 training rows and 100 validation rows" in capsys.readouterr().err


# -- 7. feature importances ---------------------------------------------------------------------
def _noise_data(n=600, seed=0):
    rng = np.random.RandomState(seed)
    Xn = rng.normal(size=(n, 4))  # column 3 is pure noise
    logit = 2 * Xn[:, 0] + Xn[:, 1] - 1.5 * (Xn[:, 2] > 0.5)
    return Xn, (logit + rng.logistic(size=n) > 0).astype(int), logit


@pytest.mark.parametrize("arch", ["oblivious", "non_oblivious", "decision_list_modified"])
def test_feature_importances_rank_the_noise_column_last(arch):
    Xn, yn, logit = _noise_data()
    est = SoftTreeEnsembleClassifier(arch=arch, n_estimators=32, max_epochs=30, random_state=0,
                                     device="cpu").fit(Xn, yn)
    importances = est.feature_importances_
    assert importances.shape == (4,) and np.all(importances >= 0)
    assert importances.sum() == pytest.approx(1.0)
    assert np.argmin(importances) == 3 and np.argmax(importances) == 0
    r = SoftTreeEnsembleRegressor(arch=arch, n_estimators=32, max_epochs=30, random_state=0,
                                  device="cpu").fit(Xn, logit)
    assert np.argmin(r.feature_importances_) == 3
    assert r.feature_importances_.sum() == pytest.approx(1.0)


def test_feature_importances_of_the_additive_term_and_sharded_models():
    from sktree_lmc import TreeParams

    Xn, yn, _ = _noise_data()
    est = clf(n_estimators=8, max_epochs=5).fit(Xn, yn)
    p = est.get_tree_params()
    # trees that do nothing, an additive table that varies with column 1 only
    table = np.zeros_like(p.additive)
    sources, offsets = est.encoder_.additive_sources_, est.encoder_.additive_offsets_
    for c in np.flatnonzero(sources == 1):
        rows = offsets[c + 1] - offsets[c]
        table[offsets[c]:offsets[c + 1], 1] = np.linspace(-1, 1, rows)
    est.set_tree_params(TreeParams(p.split_weight, p.split_bias,
                                   np.zeros_like(p.leaf_value), table))
    assert_allclose(est.feature_importances_, [0, 1, 0, 0])
    est.set_tree_params(TreeParams(p.split_weight, p.split_bias, np.zeros_like(p.leaf_value),
                                   np.zeros_like(table)))
    assert_array_equal(est.feature_importances_, np.zeros(4))  # a constant model
    assert not hasattr(clf(), "feature_importances_")
    sharded = ShardedSoftTreeEnsemble(clf(), n_shards=2, random_state=0).fit(Xn, yn)
    assert_array_equal(sharded.feature_importances_, sharded.merged_.feature_importances_)


# -- 6. docs that say what is so ----------------------------------------------------------------
def test_readme_extras_and_the_paper_settings_in_the_docs():
    readme = (REPO / "README.md").read_text()
    extras = re.search(r"Other extras: (.*?)\n\n", readme, re.S).group(1)
    for extra in ("export", "tests", "plot", "progress", "distributed", "docs", "benchmarks"):
        assert f"`{extra}`" in extras
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(declared) <= {m for m in re.findall(r"`(\w+)`", extras)}
    assert "version 0.2" not in (REPO / "docs" / "sharded.md").read_text()
    guide = (REPO / "docs" / "user_guide" / "encoding_and_training.rst").read_text()
    paper = guide[guide.index(">>> PAPER = dict("):]
    paper = paper[:paper.index(">>> X_train")]
    for setting in ("teacher_weight=0", "additive_bins=None", "learning_rate=1e-2"):
        assert setting in paper

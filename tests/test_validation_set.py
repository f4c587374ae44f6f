"""A validation set of one's own: ``fit(X_val=..., y_val=...)`` for the estimators, through
Pipelines, and for the sharded meta-estimator (in memory and on dask shards)."""

import numpy as np
import pytest
from _helpers import X_TR, X_VA, Y_TR, Y_VA, X, clf, reg
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_wine
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)
from sktree_lmc.encoding._encoding import encoders_differ


def test_x_val_trains_on_every_row_and_early_stops_on_the_validation_rows(monkeypatch):
    """Every training row trains, the validation rows are appended (encoded with the
    encoder fitted on the training rows alone), and the validation loss of the kept
    epoch is the weighted log-loss of the fitted model on them."""
    import sktree_lmc.training._fit as est_module

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
    import sktree_lmc.training._fit as est_module

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
    from sktree_lmc.federation import _federated

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
    from sktree_lmc.training._plan import EARLY_STOPPING_AUTO_ROWS, auto_early_stopping

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

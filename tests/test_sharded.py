"""ShardedSoftTreeEnsemble: sharded fits through joblib (loky, dask.distributed), then merging."""

import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import FAST
from joblib import parallel_config
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_estimator

import sktree_lmc.federation._federated as federated
from sktree_lmc import (
    ModelAligner,
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    make_shards,
    merge_estimators,
)

REPO_ROOT = Path(__file__).resolve().parent.parent

X, Y = make_classification(n_samples=360, n_features=6, n_informative=4, random_state=0)


def _base(**kw):
    return SoftTreeEnsembleClassifier(**{**FAST, **kw})


def _with_encoder(est, encoder):
    """``est`` set to encode with the sharded estimator's shared encoder (as its
    shard clones do) instead of fitting its own on the shard's rows."""
    return est.set_params(encoder=encoder)


def _assert_same_params(a, b):
    for name in ("split_weight", "split_bias", "leaf_value"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.slow
def test_dask_localcluster_gives_the_loky_result():
    pytest.importorskip("dask.distributed", reason="needs the [distributed] extra (dask)")
    from dask.distributed import Client, LocalCluster

    est = ShardedSoftTreeEnsemble(_base(), n_shards=3, split="stratified", random_state=7)
    with parallel_config(backend="loky", n_jobs=2):
        loky = clone(est).fit(X, Y)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        with parallel_config(backend="dask"):
            dask = clone(est).fit(X, Y)
    # the same fits in other processes: the loky workers may run the fused kernel's machine
    # code from numba's cache while this process compiled it, and the two may round apart in
    # the last bits (fastmath reassociation; the user guide, "The fused CPU kernel")
    for a, b in [(loky.merged_, dask.merged_), *zip(loky.estimators_, dask.estimators_)]:
        for name in ("split_weight", "split_bias", "leaf_value"):
            np.testing.assert_allclose(getattr(a.tree_params_, name),
                                       getattr(b.tree_params_, name), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(loky.predict(X), dask.predict(X))


def test_a_worker_receives_only_its_own_shard(monkeypatch):
    seen = []
    fit_shard = federated._shard_fit

    def spy(k, estimator, data, start):
        X_shard, y_shard, _ = data
        seen.append((X_shard.copy(), y_shard.copy(), estimator.random_state))
        return fit_shard(k, estimator, data, start)

    monkeypatch.setattr(federated, "_shard_fit", spy)
    est = ShardedSoftTreeEnsemble(_base(), n_shards=3, random_state=0, n_jobs=2)
    with parallel_config(backend="threading"):
        est.fit(X, Y)
    assert len(seen) == 3
    by_first_row = {tuple(X[idx[0]]): idx for idx in est.shard_indices_}
    for X_shard, y_shard, seed in seen:
        idx = by_first_row[tuple(X_shard[0])]
        np.testing.assert_array_equal(X_shard, X[idx])
        np.testing.assert_array_equal(y_shard, Y[idx])
    # every clone has its own seed, derived from random_state
    assert len({s[2] for s in seen}) == 3
    assert sorted(s[2] for s in seen) == sorted(e.random_state for e in est.estimators_)


def test_sequential_run_is_reproducible_and_equals_merge_of_its_shards():
    # no teacher: a shard's teacher is grown over all shards, so a shard's fit is not the
    # plain fit of its rows compared below (test_sharded_boosting_* test the shared teacher)
    est = ShardedSoftTreeEnsemble(_base(teacher_weight=0.0), n_shards=2,
                                  random_state=3).fit(X, Y)
    again = clone(est).fit(X, Y)
    _assert_same_params(est.merged_.tree_params_, again.merged_.tree_params_)
    manual = merge_estimators(est.estimators_, weights=est.shard_sizes_, distill=False)
    _assert_same_params(est.merged_.tree_params_, manual.tree_params_)
    for model, idx in zip(est.estimators_, est.shard_indices_):
        # every shard encodes with the one encoder fitted on all rows
        refit = _with_encoder(clone(model), est.encoder_).fit(X[idx], Y[idx])
        _assert_same_params(refit.tree_params_, model.tree_params_)


@pytest.mark.parametrize("early_stopping", [False, True])
@pytest.mark.parametrize("shard_init", ["independent", "shared"])
def test_shard_init_starts_the_shards_from_one_or_from_their_own_seeds(shard_init,
                                                                       early_stopping):
    """``shard_init="shared"``: every shard model of round 1 starts from one seed (the same
    splits, leaves and feature masks, as FedAvg's clients start from the server's model), so
    after a step of a tiny learning rate they are still equal to 1e-4, yet trained on their
    own rows; ``"independent"``: each from its own seed, far apart. With early stopping each
    shard fit holds out its own validation rows first, and the shards here differ in size
    (120, 120 and 119 rows): they still start alike (the split is drawn apart)."""
    base = _base(max_features=0.5, max_epochs=1, learning_rate=1e-7,
                 early_stopping=early_stopping)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, shard_init=shard_init,
                                  random_state=0).fit(X[:-1], Y[:-1])
    models = est.estimators_
    seeds = {m.random_state for m in models}
    masks = [m.tree_params_.split_weight == 0 for m in models]
    first = models[0].tree_params_
    if shard_init == "shared":
        assert len(seeds) == 1
        assert all(np.array_equal(masks[0], mask) for mask in masks)
        for model in models[1:]:
            for name in ("split_weight", "split_bias", "leaf_value"):
                a, b = getattr(first, name), getattr(model.tree_params_, name)
                np.testing.assert_allclose(a, b, atol=1e-4)
                assert not np.array_equal(a, b)  # trained on other rows
    else:
        assert len(seeds) == 3
        assert not np.array_equal(masks[0], masks[1])
        assert np.abs(first.split_weight - models[1].tree_params_.split_weight).max() > 0.1


def test_shard_splits():
    y = np.repeat([0, 1], [300, 100])
    for split in ("iid", "stratified", "class_skewed"):
        shards = make_shards(y, 4, split, random_state=0)
        allidx = np.concatenate(shards)
        assert len(allidx) == len(y) and len(np.unique(allidx)) == len(y)
        assert all(np.all(np.diff(s) > 0) for s in shards)
    iid = make_shards(y, 3, "iid", random_state=0)
    assert sorted(len(s) for s in iid) == [133, 133, 134]
    strat = make_shards(y, 4, "stratified", random_state=0)
    assert [int((y[s] == 1).sum()) for s in strat] == [25, 25, 25, 25]
    # the paper's split: two balanced classes, two shards, 80/20 and 20/80
    yb = np.repeat([0, 1], 500)
    skew = make_shards(yb, 2, "class_skewed", random_state=0)
    assert [float(np.mean(yb[s] == 0)) for s in skew] == [0.8, 0.2]
    skew4 = make_shards(yb, 4, "class_skewed", skew=0.9, random_state=0)
    assert [len(s) for s in skew4] == [250] * 4
    assert [float(np.mean(yb[s] == 0)) for s in skew4] == [0.9, 0.1, 0.9, 0.1]
    # regression targets: quantile bins play the classes
    t = np.arange(400.0)
    reg = make_shards(t, 2, "class_skewed", is_classifier=False, random_state=0)
    assert np.mean(t[reg[0]] < 200) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="'split' parameter of make_shards"):
        make_shards(y, 2, "bogus")


def test_classifier_behaviour():
    est = ShardedSoftTreeEnsemble(_base(), n_shards=2, split="class_skewed", random_state=0)
    assert is_classifier(est) and not is_regressor(est)
    labels = np.array(["no", "yes"])[Y]
    est.fit(X, labels)
    np.testing.assert_array_equal(est.classes_, ["no", "yes"])
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 2) and np.allclose(proba.sum(axis=1), 1)
    assert set(est.predict(X)) <= {"no", "yes"}
    assert est.score(X, labels) == pytest.approx(np.mean(est.predict(X) == labels))
    assert est.decision_function(X).shape == (len(X),)
    assert est.n_features_in_ == X.shape[1] and len(est.estimators_) == 2
    assert est.weights_.sum() == pytest.approx(1.0)
    assert est.n_alignment_sweeps_ == est.aligner_.n_iter_ == 0  # two models: no sweep
    assert est.n_iter_ == est.n_rounds_ == 1
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    pipe = make_pipeline(StandardScaler(), clone(est)).fit(X, Y)
    assert pipe.predict(X).shape == (len(X),)
    # merge options
    for aligner in ("am", "naive", ModelAligner(invariances="perm", max_iter=0)):
        other = clone(est).set_params(aligner=aligner, merge_weights="uniform").fit(X, Y)
        assert other.predict(X).shape == (len(X),)
        assert other.aligner_.n_matchings_ == (0 if aligner == "naive" else 1)


def test_regressor_behaviour():
    Xr, yr = make_regression(n_samples=300, n_features=4, noise=1.0, random_state=0)
    base = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=5, device="cpu")
    est = ShardedSoftTreeEnsemble(base, n_shards=3, split="stratified", random_state=0)
    assert is_regressor(est) and not is_classifier(est)
    assert not hasattr(est, "predict_proba")
    est.fit(Xr, yr)
    assert not hasattr(est, "classes_")
    assert est.predict(Xr).shape == (len(Xr),)
    assert est.score(Xr, yr) == pytest.approx(
        1 - np.sum((yr - est.predict(Xr)) ** 2) / np.sum((yr - yr.mean()) ** 2)
    )


@pytest.mark.parametrize("loss, n_rounds", [("poisson", 1), ("poisson", 2), ("gamma", 1),
                                             ("squared_error", 1)])
def test_sharded_regressors_keep_the_training_targets_mean(loss, n_rounds):
    """Averaging the shards' outputs moves the mean (the log link's geometric mean is
    below the arithmetic one): the merged model is calibrated to the targets' weighted
    mean over the training rows."""
    rng = np.random.RandomState(0)
    Xr = rng.normal(size=(300, 4))
    mean = np.exp(0.8 * Xr[:, 0] - 0.4 * Xr[:, 1])
    yr = {"poisson": rng.poisson(mean).astype(float), "gamma": rng.gamma(2.0, mean / 2),
          "squared_error": 3 * mean + 1}[loss]
    w = rng.uniform(0.5, 2.0, len(yr))
    base = SoftTreeEnsembleRegressor(loss=loss, n_estimators=8, max_epochs=4, device="cpu")
    est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=n_rounds, random_state=0)
    est.fit(Xr, yr, sample_weight=w)
    assert np.average(est.predict(Xr), weights=w) == pytest.approx(np.average(yr, weights=w),
                                                                   rel=1e-6)


def test_sample_weight_goes_to_the_shards():
    w = np.where(Y == 1, 2.0, 1.0)
    # no teacher: a shard's teacher is grown over all shards, so its fit is not the plain
    # fit of its rows compared below (test_sharded_boosting_* test the shared teacher)
    est = ShardedSoftTreeEnsemble(_base(teacher_weight=0.0), n_shards=2,
                                  random_state=0).fit(X, Y, sample_weight=w)
    expected = [w[idx].sum() for idx in est.shard_indices_]
    np.testing.assert_allclose(est.weights_, np.array(expected) / sum(expected))
    refit = _with_encoder(clone(est.estimators_[0]), est.encoder_).fit(
        X[est.shard_indices_[0]], Y[est.shard_indices_[0]],
        sample_weight=w[est.shard_indices_[0]])
    _assert_same_params(refit.tree_params_, est.estimators_[0].tree_params_)


def test_errors():
    with pytest.raises(InvalidParameterError):
        ShardedSoftTreeEnsemble(_base(), n_shards=1).fit(X, Y)
    with pytest.raises(InvalidParameterError):
        ShardedSoftTreeEnsemble(_base(), aligner="bogus").fit(X, Y)
    with pytest.raises(TypeError, match="SoftTreeEnsemble"):
        ShardedSoftTreeEnsemble(LogisticRegression(), n_shards=2).fit(X, Y)
    y_rare = np.zeros(len(Y), dtype=int)
    y_rare[:3] = 1
    with pytest.raises(ValueError, match="every class"):
        ShardedSoftTreeEnsemble(_base(), n_shards=4, random_state=0).fit(X, y_rare)
    with pytest.raises(ValueError, match="n_samples=6"):
        ShardedSoftTreeEnsemble(_base(), n_shards=4).fit(X[:6], Y[:6])


def test_sklearn_estimator_checks():
    """scikit-learn's conventions, with tiny (under-trained) models for speed."""
    expected = {
        # shards see different rows, so weights are not equivalent to repeated rows
        "check_sample_weight_equivalence_on_dense_data": "sharding and SGD",
        # 2 epochs of 4 trees on half the data: too weak for the accuracy thresholds
        "check_classifiers_train": "tiny model",
        "check_regressors_train": "tiny model",
    }
    # early_stopping=False (the default is on): 2-epoch models, and shards of 5 rows
    # whose one held-out row can have zero weight (check_classifiers_one_label_sample_
    # weights), which the estimator's early stopping does not handle (a NaN loss)
    for base in (_base(n_estimators=4, max_epochs=2, early_stopping=False),
                 SoftTreeEnsembleRegressor(n_estimators=4, max_epochs=2, device="cpu",
                                           early_stopping=False)):
        est = ShardedSoftTreeEnsemble(base, n_shards=2, split="stratified", random_state=0)
        results = check_estimator(est, on_fail=None, expected_failed_checks=expected)
        failed = {r["check_name"]: r["exception"] for r in results
                  if r["status"] == "failed"}
        assert not failed


@pytest.mark.slow
def test_benchmark_smoke(tmp_path, monkeypatch):
    """``python -m benchmarks.bench_sharded --smoke``, run in-process (imports are paid once)."""
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    bench = pytest.importorskip("benchmarks.bench_sharded")
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 0
    accuracy = (tmp_path / "smoke_sharded_accuracy.csv").read_text().splitlines()
    assert "merged_wm" in accuracy[0] and len(accuracy) == 3  # header, iid, class_skewed
    timing = (tmp_path / "smoke_sharded_timing.csv").read_text().splitlines()
    assert timing[0].startswith("arch,K,M") and len(timing) == 5


@pytest.mark.slow
def test_benchmark_smoke_rounds_and_refit(tmp_path, monkeypatch):
    """The rounds table and the pairwise refit benchmark in smoke mode."""
    import csv

    monkeypatch.syspath_prepend(str(REPO_ROOT))
    bench = pytest.importorskip("benchmarks.bench_sharded")
    assert bench.main(["--smoke", "--rounds-table", "--no-timing", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "smoke_sharded_rounds.csv") as fh:
        rows = list(csv.DictReader(fh))
    variants = {(r["split"], r["variant"], r["R"]) for r in rows}
    for split in ("iid", "class_skewed"):
        assert {(split, v, R) for v, R in [("full", "1"), ("shard", "1"), ("ensemble", "1"),
                                           ("wm", "1"), ("wm", "2"), ("fedavg", "2")]} <= variants
    assert all(r["batch_size"] == "256" for r in rows if r["variant"] == "wm")  # 512 / K
    assert all(r["test_refit"] for r in rows if r["variant"] == "wm")
    refit = pytest.importorskip("benchmarks.bench_refit")
    assert refit.main(["--smoke", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "smoke_refit.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["objective_refit"]) <= float(row["objective_merged"])


# ----------------------------------------------------------------------------
# federated rounds
# ----------------------------------------------------------------------------


def test_rounds_history_and_cost():
    # without early stopping (the default now): no held-out rows, no validation loss
    base = _base(max_epochs=6, early_stopping=False)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=3, random_state=0).fit(X, Y)
    assert est.n_rounds_ == 3 and [h["round"] for h in est.history_] == [1, 2, 3]
    assert all(h["shards"] == [0, 1, 2] for h in est.history_)
    # every parameter array that travels, the additive table included (issue 44: the
    # table was left out, 6x too few bytes in docs/sharded.md's case)
    params = est.merged_.tree_params_
    assert params.additive is not None
    nbytes = sum(a.nbytes for a in (params.split_weight, params.split_bias,
                                    params.leaf_value, params.additive))
    assert nbytes == params.nbytes
    assert [h["bytes_sent"] for h in est.history_] == [0, 3 * nbytes, 3 * nbytes]
    assert all(h["bytes_received"] == 3 * nbytes for h in est.history_)
    assert all(h["wall_time"] > 0 and h["validation_loss"] is None for h in est.history_)
    losses = [h["train_loss"] for h in est.history_]
    assert losses[-1] < losses[0]
    # the reported loss is the merged model's weighted mean loss on all training rows
    proba = est.merged_.predict_proba(X)
    expected = -np.mean(np.log(proba[np.arange(len(Y)), Y]))
    assert losses[-1] == pytest.approx(expected, rel=1e-6)
    # the rounds take three times the estimator's 6 epochs (local_epochs="auto": 6 per
    # round), every shard continuing (warm start)
    assert all(m.n_epochs_ == 18 and len(m.loss_curve_) == 18 for m in est.estimators_)
    # only parameters come back: no optimizer state in the collected models
    assert all(m.optimizer_state_ is None for m in est.estimators_)


def test_rounds_send_their_starts_as_records(monkeypatch):
    """Round 1's shard fits start from the fit's FitPlan; a later round's from a
    RoundStart record: the merged parameters, the chain of alignments of a shard
    that took part in the previous round, the later rounds' epochs and the
    round's window of the schedule."""
    from sktree_lmc.training._plan import FitPlan

    starts = []
    shard_fit = federated._shard_fit

    def spy(k, est, data, start):
        starts.append(start)
        return shard_fit(k, est, data, start)

    monkeypatch.setattr(federated, "_shard_fit", spy)
    est = ShardedSoftTreeEnsemble(_base(max_epochs=2), n_shards=2, n_rounds=3, local_epochs=2,
                                  first_round_epochs=3, random_state=0).fit(X, Y)
    assert [type(s) for s in starts] == [FitPlan] * 2 + [federated.RoundStart] * 4
    assert starts[0].schedule_window == (0, 7)
    later = starts[2:]
    assert [s.schedule_window for s in later] == [(3, 7)] * 2 + [(5, 7)] * 2
    assert all(s.recipe == {"max_epochs": 2} and s.keep_optimizer for s in later)
    assert all(isinstance(s.alignment, federated._Chain) for s in later)
    assert later[0].params is later[1].params  # one merged model sent to both shards
    assert [h["round"] for h in est.history_] == [1, 2, 3]


def test_rounds_align_every_round(monkeypatch):
    """A shard returning its model in another basis (trees permuted, splits flipped,
    the Adam state moved consistently) gives the same merged function: the
    alignment of later rounds is computed, not assumed to be the identity."""
    from sktree_lmc import random_ops

    base = _base(max_epochs=2)
    plain = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=3, random_state=0).fit(X, Y)
    shard_fit = federated._shard_fit
    rng = np.random.RandomState(0)

    def scrambled(k, est, data, start):
        est = shard_fit(k, est, data, start)
        if start is None:
            return est
        from sktree_lmc.merging._matching import Alignment

        M = est.tree_params_.n_trees
        al = Alignment(rng.permutation(M), random_ops(est.architecture_, M, rng), 0.0)
        est.tree_params_ = al.apply(est.tree_params_)
        est.optimizer_state_ = federated._align_optimizer_state(est.optimizer_state_, al)
        return est

    monkeypatch.setattr(federated, "_shard_fit", scrambled)
    scr = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=3, random_state=0).fit(X, Y)
    assert any(not np.array_equal(a.tree_perm, np.arange(8))
               for a in scr.aligner_.alignments_)
    np.testing.assert_allclose(scr.predict_proba(X), plain.predict_proba(X), atol=1e-4)
    assert scr.history_[-1]["train_loss"] == pytest.approx(plain.history_[-1]["train_loss"],
                                                           rel=1e-4)
    # the scrambled models failed the check of the models as they are (3 matchings)
    # and ran the usual alignment (2 + 3 at least) after it
    assert scr.aligner_.n_matchings_ >= 3 + 2 + 3


def test_later_rounds_try_the_models_as_they_are():
    """After round 1 every shard continued from the merged model, so the
    alignment first checks the identity with one sweep (K matchings) and keeps
    it when the sweep changes nothing: the result of the usual procedure."""
    base = _base(max_epochs=3, learning_rate=1e-4, early_stopping=False)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=3, random_state=0).fit(X, Y)
    assert est.aligner_.n_matchings_ == 3 and est.aligner_.n_iter_ == 1
    identity = np.arange(est.merged_.tree_params_.n_trees)
    assert all(np.array_equal(a.tree_perm, identity) for a in est.aligner_.alignments_)


@pytest.mark.parametrize("arch", ["non_oblivious", "oblivious", "decision_list",
                                  "decision_list_modified"])
def test_rounds_all_architectures(arch):
    est = ShardedSoftTreeEnsemble(_base(arch=arch, max_epochs=2), n_shards=2, n_rounds=2,
                                  random_state=0).fit(X, Y)
    assert est.n_rounds_ == 2 and est.history_[1]["train_loss"] < est.history_[0]["train_loss"]


def test_rounds_regressor_keeps_one_target_scale():
    Xr, yr = make_regression(n_samples=300, n_features=4, noise=1.0, random_state=0)
    yr = 10 + 3 * yr
    base = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=3, batch_size=32,
                                     learning_rate=0.05, device="cpu")
    est = ShardedSoftTreeEnsemble(base, n_shards=3, split="class_skewed", n_rounds=3,
                                  random_state=0).fit(Xr, yr)
    # after round 1 every shard works in the merged model's target scale
    for m in est.estimators_:
        np.testing.assert_allclose(m.y_scale_, est.merged_.y_scale_)
    losses = [h["train_loss"] for h in est.history_]
    assert losses[-1] < losses[0]
    assert est.score(Xr, yr) > 0.5


def test_round_options():
    base = _base(max_epochs=2)
    kw = dict(n_shards=2, n_rounds=3, random_state=0)
    reset = ShardedSoftTreeEnsemble(base, keep_optimizer_state=False, **kw).fit(X, Y)
    keep = ShardedSoftTreeEnsemble(base, **kw).fit(X, Y)
    assert not np.allclose(reset.merged_.tree_params_.leaf_value,
                           keep.merged_.tree_params_.leaf_value)
    momentum = ShardedSoftTreeEnsemble(base, server_momentum=0.5, **kw).fit(X, Y)
    assert momentum.history_[-1]["train_loss"] < momentum.history_[0]["train_loss"]
    longer = ShardedSoftTreeEnsemble(base, first_round_epochs=4, **kw).fit(X, Y)
    assert all(m.n_epochs_ == 4 + 2 + 2 for m in longer.estimators_)  # ceil(2 * 2 / 3) = 2
    fixed = ShardedSoftTreeEnsemble(base, local_epochs=3, **kw).fit(X, Y)
    assert all(m.n_epochs_ == 3 * 3 for m in fixed.estimators_)
    legacy = ShardedSoftTreeEnsemble(base, local_epochs=None, **kw).fit(X, Y)
    assert all(m.n_epochs_ == 3 * 2 for m in legacy.estimators_)  # max_epochs per round
    refit = ShardedSoftTreeEnsemble(base, refit_leaves=True, **kw).fit(X, Y)
    np.testing.assert_array_equal(refit.merged_.tree_params_.split_weight,
                                  keep.merged_.tree_params_.split_weight)
    assert refit.score(X, Y) >= keep.score(X, Y) - 0.01


def test_round_level_early_stopping():
    base = _base(max_epochs=1, early_stopping=True, n_iter_no_change=2, tol=10.0)
    est = ShardedSoftTreeEnsemble(base, n_shards=2, n_rounds=6, random_state=0).fit(X, Y)
    # tol=10 means no round ever improves enough: stop after 1 + patience rounds
    assert est.n_rounds_ == 3 and len(est.history_) == 3
    assert all(h["validation_loss"] is not None for h in est.history_)
    # the local fits do not early-stop on their own
    assert all(m.validation_loss_curve_ is None for m in est.estimators_)


def test_rounds_log_when_redirected_and_no_joblib_chatter(capsys):
    """stderr captured (not a terminal): one line per round with the merged
    model's loss, a closing line, and nothing from joblib below verbose=3."""
    est = ShardedSoftTreeEnsemble(_base(max_epochs=1), n_shards=2, n_rounds=2, verbose=1,
                                  teacher="shared", random_state=0).fit(X, Y)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    # first the shared teacher's growth (ten lines), what came before the rounds (the
    # shared encoding and the teacher), then a line per round
    teacher = [line for line in lines if line.startswith("ShardedSoftTreeEnsemble teacher")]
    assert len(teacher) == 8 and teacher[-1].startswith(  # every tree of 8
        "ShardedSoftTreeEnsemble teacher tree 8/8: MB_received ")
    lines = lines[len(teacher):]
    assert lines[0].startswith("ShardedSoftTreeEnsemble: encoded ")
    assert "the shared teacher: 8 boosted trees grown over 2 shards (" in lines[0]
    lines = lines[1:]
    assert [line.split(":")[0] for line in lines[:2]] == [
        "ShardedSoftTreeEnsemble round 1/2", "ShardedSoftTreeEnsemble round 2/2"]
    assert "train_loss" in lines[0] and "left <=" in lines[0]
    assert lines[-1].startswith("ShardedSoftTreeEnsemble: merged 2 shards in 2 rounds (")
    assert len(lines) == 3 and "Parallel" not in captured.err + captured.out
    assert est.n_iter_ == est.n_rounds_ == 2
    assert est.n_alignment_sweeps_ == est.aligner_.n_iter_
    ShardedSoftTreeEnsemble(_base(max_epochs=1), n_shards=2, n_rounds=1, verbose=3,
                            random_state=0).fit(X, Y)
    captured = capsys.readouterr()
    assert "Parallel" in captured.err + captured.out  # joblib's messages when asked for
    # the default teacher: one exchange of trees, one line, nothing per tree
    lines = captured.err.splitlines()
    assert not any(line.startswith("ShardedSoftTreeEnsemble teacher") for line in lines)
    assert any("the teacher: the average of the 2 shards' own (" in line for line in lines)


def test_bad_n_rounds_and_failing_shard():
    for bad in (0, -1, 1.5, "3"):
        with pytest.raises(InvalidParameterError, match="n_rounds"):
            ShardedSoftTreeEnsemble(_base(), n_rounds=bad).fit(X, Y)

    class Boom(SoftTreeEnsembleClassifier):  # the shard fits go through _fit (a FitPlan)
        def _fit(self, X, y, sample_weight, plan):
            if np.any(X[:, 0] > 1e6):
                raise ValueError("boom")
            return super()._fit(X, y, sample_weight, plan)

    Xb = X.copy()
    Xb[-1, 0] = 1e7  # in the last contiguous shard
    est = ShardedSoftTreeEnsemble(Boom(n_estimators=4, max_epochs=1, device="cpu"),
                                  n_shards=3, split="contiguous", random_state=0)
    with pytest.raises(ValueError, match=r"Shard 2 \(120 rows\) failed while fitting.*boom"):
        est.fit(Xb, Y)


def test_contiguous_split():
    shards = make_shards(np.zeros(10), 3, "contiguous")
    assert [s.tolist() for s in shards] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


@pytest.mark.parametrize(
    "n_shards, kwargs, match",
    [
        (0, {}, "'n_shards' parameter of make_shards"),
        (2.5, {}, "'n_shards' parameter of make_shards"),
        (True, {}, "'n_shards' parameter of make_shards"),
        (121, {}, "n_shards=121 is more shards than rows"),
        (121, dict(split="contiguous"), "n_shards=121 is more shards than rows"),
        (2, dict(split="class_skewed", skew=np.nan), "'skew' parameter of make_shards"),
        (2, dict(split="class_skewed", skew=True), "'skew' parameter of make_shards"),
        (2, dict(is_classifier="yes"), "'is_classifier' parameter of make_shards"),
    ],
)
def test_make_shards_validates_its_arguments(n_shards, kwargs, match):
    """Issue 20: n_shards=0 gave numpy's "number sections must be larger than 0",
    2.5 gave 2 shards, True gave 1, more shards than rows gave empty shards, and
    skew=nan gave sizes [0, 120]."""
    y = np.repeat([0, 1], 60)
    with pytest.raises(ValueError, match=match):
        make_shards(y, n_shards, **kwargs)


def test_make_shards_refuses_a_split_that_leaves_a_shard_empty():
    y = np.array([0, 1, 1, 1])
    with pytest.raises(ValueError, match=r"split='class_skewed' with n_shards=4 leaves shard"):
        make_shards(y, 4, "class_skewed", random_state=0)
    assert [len(s) for s in make_shards(y, 4, "iid", random_state=0)] == [1, 1, 1, 1]


@pytest.mark.parametrize(
    "param, value",
    [
        ("n_rounds", True),
        ("n_jobs", True),
        ("n_jobs", 0),
        ("first_round_epochs", True),
        ("n_shards", True),
        ("server_momentum", True),
        ("server_learning_rate", True),
        ("server_learning_rate", 1e300),
        ("server_learning_rate", np.inf),
        ("skew", np.nan),
        ("shard_init", "same"),
    ],
)
def test_sharded_hyperparameters_reject_bools_and_absurd_values(param, value):
    """Issue 20: n_rounds=True and n_jobs=True were accepted, first_round_epochs=True
    failed later with an error about max_epochs, and server_learning_rate=1e300
    overflowed into a non-finite model."""
    est = ShardedSoftTreeEnsemble(_base(), n_shards=2, random_state=0)
    est.set_params(**{param: value})
    with pytest.raises(InvalidParameterError,
                       match=f"'{param}' parameter of ShardedSoftTreeEnsemble"):
        est.fit(X, Y)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_server_step_out_of_float32_range_names_server_learning_rate(monkeypatch):
    step = federated._server_step

    def overflowing(*args):
        params, velocity, alignment = step(*args)
        return params * 1e39, velocity, alignment

    monkeypatch.setattr(federated, "_server_step", overflowing)
    est = ShardedSoftTreeEnsemble(_base(), n_shards=2, n_rounds=3, server_learning_rate=2.0,
                                  random_state=0)
    with pytest.raises(ValueError, match=r"server step of round 2 \(server_learning_rate=2.0"):
        est.fit(X, Y)


# ----------------------------------------------------------------------------
# the shared input encoder
# ----------------------------------------------------------------------------


def test_a_dataframe_with_strings_and_missing_values_shares_one_encoder(monkeypatch):
    """The encoder is fitted once, on all rows, before the shards train; every shard
    model (and the merged one) encodes with it, so they merge."""
    pd = pytest.importorskip("pandas")
    from sktree_lmc.encoding._encoding import TabularEncoder, encoders_differ

    rng = np.random.RandomState(0)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["color"] = rng.choice(["red", "green", "blue"], len(frame))
    frame.loc[::9, "f0"] = np.nan
    frame.loc[::13, "color"] = None
    fits = []
    fit = TabularEncoder._fit_columns

    def counted(self, *args, **kwargs):
        fits.append(self)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(TabularEncoder, "_fit_columns", counted)
    est = ShardedSoftTreeEnsemble(_base(), n_shards=3, random_state=0).fit(frame, Y)
    assert len(fits) == 1 and fits[0] is est.encoder_
    enc = est.encoder_
    assert_cols = [False] * X.shape[1] + [True]
    np.testing.assert_array_equal(enc.categorical_, assert_cols)
    np.testing.assert_array_equal(enc.has_missing_, [True] + [False] * 5 + [True])
    assert list(enc.categories_[-1]) == ["blue", "green", "red"]
    for model in [*est.estimators_, est.merged_]:
        assert encoders_differ(model.encoder_, enc) is None
        assert not any(key.startswith("_shared") for key in vars(model))
    # the encoder of all rows, as one estimator fitted on them learns it
    alone = SoftTreeEnsembleClassifier(**FAST).fit(frame, Y)
    assert encoders_differ(alone.encoder_, enc) is None
    np.testing.assert_array_equal(est.feature_names_in_, frame.columns)
    proba = est.predict_proba(frame)
    assert proba.shape == (len(Y), 2) and np.allclose(proba.sum(axis=1), 1)
    assert est.score(frame, Y) == pytest.approx(np.mean(est.predict(frame) == Y))
    with pytest.raises(ValueError, match="feature names"):
        est.predict(frame.drop(columns="f1"))
    # rounds, activation matching on the DataFrame's rows and refitted leaves
    fits.clear()
    rounds = ShardedSoftTreeEnsemble(_base(max_epochs=1, early_stopping=True), n_shards=2,
                                     n_rounds=2, aligner="am", refit_leaves=True,
                                     random_state=0).fit(frame, Y)
    assert len(fits) == 1 and rounds.n_rounds_ == 2
    assert all(h["validation_loss"] is not None for h in rounds.history_)
    assert rounds.predict(frame).shape == (len(Y),)


@pytest.mark.parametrize("setting, expected", [
    ("auto", [102, 102, 51]),  # 256 x the shard's share of the 200 rows: 40, 40 and 20 %
    (16, [16, 16, 16]),
    (None, [None, None, None]),  # the estimator's own
])
def test_shard_batch_size_keeps_the_full_data_steps_per_epoch(setting, expected):
    base = _base(max_epochs=1, batch_size=256)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, split="contiguous",
                                  shard_batch_size=setting, random_state=0)
    sizes = np.array([80, 80, 40])
    est.shard_sizes_ = sizes
    assert est._shard_batch_sizes(base) == expected
    fitted = ShardedSoftTreeEnsemble(base, n_shards=2, shard_batch_size=setting,
                                     random_state=0).fit(X, Y)
    half = {"auto": 128, 16: 16, None: 256}[setting]
    assert [m.batch_size for m in fitted.estimators_] == [half, half]
    assert fitted.get_params()["estimator"].batch_size == 256  # the user's estimator


@pytest.mark.parametrize("sampling", [{}, {"n_shards": 3, "shard_fraction": 0.5},
                                      {"shard_init": "shared"}])
def test_checkpoint_and_resume_equal_an_uninterrupted_fit(tmp_path, sampling):
    """Rounds 1-2 with a checkpoint file, then a new fit resumed from it for
    rounds 3-4: the same merged model, history and shard states as 4 rounds
    in one go (Adam's state, the learning-rate schedule and the sampled shards
    included)."""
    kw = {"n_shards": 2, "n_rounds": 4, "random_state": 0, "server_momentum": 0.5,
          **sampling}
    base = _base(max_epochs=8, early_stopping=False, lr_schedule="cosine")
    whole = ShardedSoftTreeEnsemble(base, **kw).fit(X, Y)
    path = tmp_path / "rounds.joblib"
    states = []

    class Stop(Exception):
        pass

    def keep_two(state):
        states.append(state)
        ShardedSoftTreeEnsemble(base, **kw, checkpoint=path)._checkpoint_writer()(state)
        if state["round"] == 2:
            raise Stop  # the fit dies after round 2

    with pytest.raises(Stop):
        ShardedSoftTreeEnsemble(base, **kw, checkpoint=keep_two).fit(X, Y)
    assert [s["round"] for s in states] == [1, 2] and path.exists()
    assert all(m.optimizer_state_ is not None for m in states[-1]["shards"])
    resumed = ShardedSoftTreeEnsemble(base, **kw, checkpoint=path).fit(X, Y, resume_from=path)
    _assert_same_params(resumed.merged_.tree_params_, whole.merged_.tree_params_)
    assert [h["train_loss"] for h in resumed.history_] == [h["train_loss"]
                                                           for h in whole.history_]
    assert resumed.n_rounds_ == 4
    assert [h["shards"] for h in resumed.history_] == [h["shards"] for h in whole.history_]
    with pytest.raises(ValueError, match="n_shards=5"):
        ShardedSoftTreeEnsemble(base, **{**kw, "n_shards": 5}).fit(X, Y, resume_from=path)
    with pytest.raises(ValueError, match="not a checkpoint"):
        ShardedSoftTreeEnsemble(base, **kw).fit(X, Y, resume_from={"nope": 1})


def test_rounds_take_one_run_of_the_learning_rate_schedule(monkeypatch):
    """local_epochs="auto": 3 rounds take three times the estimator's 6 epochs,
    and every round's local fit takes its window of one cosine schedule over the
    18 epochs (not a schedule restarted per round)."""
    from sktree_lmc.training import _fit as _estimators

    windows = []
    make = _estimators.make_lr_scheduler

    def record(optimizer, schedule, warmup, total_steps, start_step=0):
        windows.append((start_step, total_steps))
        return make(optimizer, schedule, warmup, total_steps, start_step=start_step)

    monkeypatch.setattr(_estimators, "make_lr_scheduler", record)
    base = _base(max_epochs=6, lr_schedule="cosine", batch_size=300, early_stopping=False)
    ShardedSoftTreeEnsemble(base, n_shards=2, n_rounds=3, random_state=0).fit(X, Y)
    steps = windows[0][1] // 18  # steps per epoch of a shard
    assert steps >= 1
    assert sorted(windows) == [(0, 18 * steps)] * 2 + [(6 * steps, 18 * steps)] * 2 + [
        (12 * steps, 18 * steps)] * 2
    windows.clear()
    ShardedSoftTreeEnsemble(base, n_shards=2, n_rounds=1, random_state=0).fit(X, Y)
    assert windows == [(0, 6 * steps)] * 2  # one round: the estimator's own schedule


def test_auto_local_epochs_give_the_acceptance_protocol_the_full_fits_epochs():
    """The cause of the acceptance protocol's misses (electricity, california:
    the rounds trained a third of the full-data fit's epochs): with
    ``max_epochs=15`` and 10 rounds, ``local_epochs="auto"`` gave ceil(3 * 15 /
    10) = 5 epochs per round, 50 in all, against the full-data fit's 150. A
    small ``max_epochs`` is now the epochs of every round (15, 150 in all);
    the full-data estimator passed as it is keeps 45 per round (three fits'
    epochs), and no setting trains fewer epochs per round than before."""
    from sktree_lmc import SoftTreeEnsembleClassifier
    from sktree_lmc.federation._sharded import _auto_round_epochs

    protocol = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(random_state=0, max_epochs=15),
                                       n_shards=8, split="iid", n_rounds=10, random_state=0)
    assert protocol._round_epochs(protocol.estimator) == [15] * 10
    as_is = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(), n_shards=8, n_rounds=10)
    assert as_is._round_epochs(as_is.estimator) == [45] * 10
    assert _auto_round_epochs(15, 1) == 15 and _auto_round_epochs(150, 1) == 150
    assert _auto_round_epochs(15, 2) == 23 and _auto_round_epochs(200, 10) == 60
    assert _auto_round_epochs(60, 10) == 45 and _auto_round_epochs(15, 100) == 5
    for n_rounds in (2, 3, 5, 10, 20, 50):
        per_round = [_auto_round_epochs(m, n_rounds) for m in range(1, 400)]
        assert per_round == sorted(per_round)  # more max_epochs, never fewer per round
        assert all(e >= -(-3 * m // n_rounds) for m, e in zip(range(1, 400), per_round))


def test_client_sampling_trains_and_weights_a_fraction_of_the_shards():
    base = _base(max_epochs=2, early_stopping=False)
    kw = dict(n_shards=4, n_rounds=4, local_epochs=1, random_state=0)
    est = ShardedSoftTreeEnsemble(base, shard_fraction=0.5, **kw).fit(X, Y)
    assert est.history_[0]["shards"] == [0, 1, 2, 3]  # round 1 fits every shard
    later = [h["shards"] for h in est.history_[1:]]
    assert all(len(s) == 2 and len(set(s)) == 2 for s in later)
    assert len({tuple(s) for s in later}) > 1  # drawn per round
    nbytes = est.history_[0]["bytes_received"] // 4
    assert all(h["bytes_sent"] == h["bytes_received"] == 2 * nbytes for h in est.history_[1:])
    # a shard trained its first round's epoch plus one per round it was sampled in
    for k, m in enumerate(est.estimators_):
        assert m.n_epochs_ == 1 + sum(k in s for s in later)
    # the merge weights are the sampled shards' sizes, normalized among them
    sizes = est.shard_sizes_[later[-1]].astype(float)
    np.testing.assert_allclose(est.weights_, sizes / sizes.sum())
    # the draw is seeded: the same fit again gives the same shards and model
    again = ShardedSoftTreeEnsemble(base, shard_fraction=0.5, **kw).fit(X, Y)
    assert [h["shards"] for h in again.history_] == [h["shards"] for h in est.history_]
    _assert_same_params(again.merged_.tree_params_, est.merged_.tree_params_)
    # a fraction leaving fewer than two shards still merges two
    two = ShardedSoftTreeEnsemble(base, shard_fraction=0.1, **kw).fit(X, Y)
    assert all(len(h["shards"]) == 2 for h in two.history_[1:])
    with pytest.raises(InvalidParameterError, match="shard_fraction"):
        ShardedSoftTreeEnsemble(base, shard_fraction=0.0, **kw).fit(X, Y)


def test_client_sampling_weights_unequal_shards_by_their_rows():
    """Skewed shards have unequal sizes: the merge weights of a round are the
    sizes of the shards that took part in it."""
    base = _base(max_epochs=2, early_stopping=False)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, split="class_skewed", n_rounds=2,
                                  shard_fraction=0.6, random_state=1).fit(X, Y)
    sampled = est.history_[-1]["shards"]
    sizes = est.shard_sizes_[sampled].astype(float)
    assert len(sampled) == 2
    np.testing.assert_allclose(est.weights_, sizes / sizes.sum())


def test_a_meta_estimator_pickled_by_another_version_is_refused():
    """Issue 44: a state without the pickle format of this version is a clear error."""
    from sktree_lmc._persistence import FORMAT_KEY

    est = ShardedSoftTreeEnsemble(_base(), n_shards=2, random_state=0).fit(X, Y)
    state = est.__getstate__()
    del state[FORMAT_KEY], state["local_epochs"]
    old = ShardedSoftTreeEnsemble.__new__(ShardedSoftTreeEnsemble)
    with pytest.raises(ValueError, match="ShardedSoftTreeEnsemble was pickled by"):
        old.__setstate__(state)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict(X), est.predict(X))


def test_round_level_patience_is_the_estimators_in_epochs_and_at_least_two_rounds():
    """n_iter_no_change=10 epochs with 3 local epochs per round: 4 rounds of
    patience; with 5, 2 rounds; with 15 (more than the patience), still 2 rounds,
    not 1."""
    base = _base(max_epochs=10, early_stopping=True, n_iter_no_change=10,
                 tol=10.0)  # no round improves by 10: stop after 1 + patience rounds
    for local_epochs, expected_rounds in ((3, 5), (5, 3), (15, 3)):
        est = ShardedSoftTreeEnsemble(base, n_shards=2, n_rounds=6, local_epochs=local_epochs,
                                      random_state=0)
        assert est.fit(X, Y).n_rounds_ == expected_rounds


def test_mean_and_error_is_the_weighted_mean_and_its_standard_error():
    rng = np.random.default_rng(0)
    losses, w = rng.random(50), rng.random(50) + 0.5
    parts = [(float(w[a:b] @ losses[a:b]), float(w[a:b].sum()),
              float(w[a:b] @ losses[a:b] ** 2), float(w[a:b] @ w[a:b]))
             for a, b in ((0, 20), (20, 50))]
    mean, error = federated._mean_and_error(parts)
    expected = np.average(losses, weights=w)
    sd = np.sqrt(np.average((losses - expected) ** 2, weights=w))
    assert mean == pytest.approx(expected)
    assert error == pytest.approx(sd / np.sqrt(w.sum() ** 2 / (w @ w)))


class _ScriptedValidation:
    """Shards whose validation loss of round r is ``losses[r]`` with ``error``."""

    def __init__(self, losses, error):
        self.losses, self.error, self.calls = list(losses), error, 0

    def validation_loss(self, merged):
        self.calls += 1
        return self.losses[self.calls - 1], self.error


@pytest.mark.parametrize("error, kept", [(0.01, 3), (0.001, 1)])
def test_rounds_keep_the_latest_model_within_the_validation_error_of_the_best(error, kept):
    """The cause of eye_movements' misses: its validation loss after rounds 1-3
    (0.6675, 0.6694, 0.6732 on 344 held-out rows) differed by less than its
    standard error (about 0.01) while test accuracy rose 1.8 points; keeping
    the lowest loss kept round 1's model. Within the error, the later (longer
    trained) model is kept; a loss worse by more than the error is not, and the
    patience still counts every round that does not improve by ``tol``."""
    shards = _ScriptedValidation([0.6675, 0.6694, 0.6732], error)
    state = federated.RoundState(shards=[None], participation=[None])
    validation = federated.RoundsValidation(tol=1e-4, patience=2)
    for r in range(3):
        state.merged, state.aligner = f"model {r + 1}", f"aligner {r + 1}"
        federated._validate(shards, state, validation)
    assert state.best == (0.6675, f"model {kept}", f"aligner {kept}")
    assert state.no_improve == 2


def test_round_level_early_stopping_keeps_the_last_round_that_is_as_good():
    """tol=10: no round improves, the rounds stop after 1 + patience rounds, and
    the model kept is the last round's where its loss is not above round 1's by
    more than the error (here below it): not round 1's, as before."""
    merged = []
    base = _base(max_epochs=1, early_stopping=True, n_iter_no_change=2, tol=10.0)
    est = ShardedSoftTreeEnsemble(base, n_shards=2, n_rounds=6, random_state=0,
                                  checkpoint=lambda state: merged.append(state["merged"]))
    est.fit(X, Y)
    losses = [h["validation_loss"] for h in est.history_]
    assert est.n_rounds_ == 3 and losses[2] < losses[0]
    np.testing.assert_array_equal(est.predict_proba(X), merged[2].predict_proba(X))
    assert not np.array_equal(est.predict_proba(X), merged[0].predict_proba(X))


# -- gradient-boosted trees grown once over all shards -----------------------------------------


def _recording(monkeypatch):
    """Record the trees ``ShardedSoftTreeEnsemble`` grows over its shards."""
    import sktree_lmc.federation._sharded as sharded

    grown = []
    grow = sharded.grow_shared_trees

    def recording(*args, **kwargs):
        grown.append(grow(*args, **kwargs))
        return grown[-1]

    monkeypatch.setattr(sharded, "grow_shared_trees", recording)
    return grown


def _integer_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 10, size=(n, 4)).astype(np.float64)
    y = ((X[:, 0] > 4) ^ (X[:, 1] > 6)).astype(np.int64)
    return X, y


@pytest.mark.parametrize("params", [dict(teacher_weight=0.5),
                                    dict(split_init="boosting", max_features=None)])
def test_sharded_boosting_is_grown_over_the_rows_of_all_shards(monkeypatch, params):
    from sktree_lmc.training._boosting import grow_oblivious_trees

    grown = _recording(monkeypatch)
    X, y = _integer_data()
    base = _base(n_estimators=16, depth=2, early_stopping=False, numeric_encoding="standard",
                 additive_bins=None, **params)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=1, teacher="shared",
                                  random_state=0).fit(X, y)
    assert len(grown) == 1
    # the trees of all rows, as one fit on them would grow them (no validation rows:
    # early_stopping=False), with the same (shared) encoding
    Xe = est.encoder_.transform_columns([X[:, j] for j in range(4)])
    union = grow_oblivious_trees(Xe, y, np.ones(len(y)), loss="softmax", n_trees=16, depth=2,
                                 n_outputs=2)
    assert_same = np.testing.assert_allclose
    np.testing.assert_array_equal(grown[0][1], union[1])
    assert_same(grown[0][3], union[3], rtol=1e-9, atol=1e-12)
    # what the shards sent: histograms over (node, feature, bin, output) per level,
    # independent of their rows: of the root and of the left child at depth 1 (the right
    # one is the root's minus it), of the first output only (two classes), G and H in
    # float64; the full histograms (3 nodes, 2 outputs) would be 3 times as many bytes
    n_bins = max(len(np.unique(Xe[:, j])) for j in range(Xe.shape[1]))
    histograms = 16 * 3 * (1 + 1) * Xe.shape[1] * n_bins * 2 * 8
    assert histograms < est.boosting_bytes_ < 2 * histograms
    # the shared trees are an argument of the shard fits, never an attribute
    assert all(not any(key.startswith("_shared") for key in vars(e)) for e in est.estimators_)
    if "split_init" in params:  # every shard started from these trees: the same leaves
        leaves = [e.tree_params_.leaf_value for e in est.estimators_]
        assert_same(leaves[0], leaves[1], atol=0.05)
        assert_same(leaves[0], leaves[2], atol=0.05)


@pytest.mark.parametrize("teacher", ["shared", "averaged"])
def test_sharded_boosting_uses_the_rows_held_out_at_the_shards(monkeypatch, teacher):
    from sktree_lmc.training._boosting import BoostingSite

    grown = _recording(monkeypatch)
    grow = BoostingSite.grow

    def recording(site, *args, **kwargs):
        out = grow(site, *args, **kwargs)
        grown.append(out[0])
        return out

    monkeypatch.setattr(BoostingSite, "grow", recording)
    X, y = _integer_data(900, seed=1)
    y = np.where(np.random.default_rng(2).random(900) < 0.3, 1 - y, y)  # noisy: few trees
    base = _base(n_estimators=64, depth=3, teacher_weight=0.5, early_stopping=True)
    ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=2, teacher=teacher,
                            random_state=0).fit(X, y)
    assert len(grown) == (1 if teacher == "shared" else 3)  # over all shards, or at each
    for trees in grown:
        kept = (trees[1] >= 0).any(axis=1).sum()
        assert 0 < kept < 64  # the prefix chosen on the held-out rows


@pytest.mark.parametrize("n_rounds", [1, 3])
def test_sharded_rounds_distill_the_teacher_grown_over_all_shards(monkeypatch, n_rounds):
    """By default (teacher="auto") federated rounds distill the teacher grown over all
    shards' rows, as teacher="shared" does: the shard models of the rounds reach the
    full-data model's level, where the student of an average of teachers grown on a
    shard each stays behind. A one-shot merge keeps the averaged teacher (fewer bytes,
    as accurate there)."""
    X, y = _integer_data(900, seed=1)
    base = _base(n_estimators=16, depth=2, teacher_weight=0.5, early_stopping=True)
    default = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=n_rounds,
                                      random_state=0).fit(X, y)
    expected = "shared" if n_rounds > 1 else "averaged"
    explicit = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=n_rounds, teacher=expected,
                                       random_state=0).fit(X, y)
    for a, b in zip(default.estimators_, explicit.estimators_):
        for ta, tb in zip(a.teacher_[0], b.teacher_[0]):
            np.testing.assert_array_equal(ta, tb)
    np.testing.assert_array_equal(default.predict_proba(X), explicit.predict_proba(X))
    assert default.boosting_bytes_ == explicit.boosting_bytes_
    assert default.get_params()["teacher"] == "auto"  # the parameter is kept as given
    assert default.teacher_kind_ == explicit.teacher_kind_ == expected
    # without a teacher there is none to name
    plain = ShardedSoftTreeEnsemble(base.set_params(teacher_weight=0), n_shards=3,
                                    n_rounds=n_rounds, random_state=0).fit(X, y)
    assert plain.teacher_kind_ is None and plain.boosting_bytes_ is None


@pytest.mark.parametrize("n_rounds", [1, 2])
def test_sharded_local_teacher_is_grown_at_every_shard_on_its_rows(monkeypatch, n_rounds):
    """teacher="local": no tree grown over the shards, no histogram sent; each shard
    distills a teacher of its own rows, as a lone estimator fitted on them does."""
    import sktree_lmc.training._fit as estimators

    grown = _recording(monkeypatch)
    local, grow = [], estimators.grow_oblivious_trees

    def recording(X, *args, **kwargs):
        local.append(len(X))
        return grow(X, *args, **kwargs)

    monkeypatch.setattr(estimators, "grow_oblivious_trees", recording)
    base = _base(n_estimators=16, depth=2, early_stopping=False, teacher_weight=0.5)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=n_rounds, teacher="local",
                                  random_state=0).fit(X, Y)
    assert grown == [] and est.boosting_bytes_ is None
    assert sorted(local[:3]) == sorted(est.shard_sizes_.tolist())  # one per shard, its rows
    assert len(local) == 3 * n_rounds
    assert est.predict_proba(X).shape == (len(X), 2) and est.merged_.score(X, Y) > 0.6


@pytest.mark.parametrize("n_rounds", [1, 2])
def test_sharded_averaged_teacher_is_the_mean_of_the_shards_own_teachers(monkeypatch,
                                                                         n_rounds):
    """teacher="averaged": each shard grows a teacher on its own rows (the prefix
    on its held-out rows with round-level early stopping) and sends its trees,
    fewer bytes than its rows; every shard distills their average, weighted by
    the shards' rows."""
    from sktree_lmc.training._boosting import BoostingSite, averaged_trees, oblivious_output

    grown = _recording(monkeypatch)
    sent, grow = [], BoostingSite.grow

    def recording(site, *args, **kwargs):
        sent.append((grow(site, *args, **kwargs), site.X))
        return sent[-1][0]

    monkeypatch.setattr(BoostingSite, "grow", recording)
    base = _base(n_estimators=16, depth=2, early_stopping=n_rounds > 1, teacher_weight=0.5)
    est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=n_rounds, teacher="averaged",
                                  random_state=0).fit(X, Y)
    assert grown == [] and len(sent) == 3  # nothing grown over the shards; once per shard
    sizes = [len(x) for _, x in sent]
    if n_rounds == 1:  # all of a shard's rows
        assert sizes == est.shard_sizes_.tolist()
    else:  # its training rows: the rounds' early stopping holds some out
        assert all(0 < n < s for n, s in zip(sizes, est.shard_sizes_))
    assert 0 < est.boosting_bytes_ < X.nbytes
    teacher = est.estimators_[0].teacher_[0]
    for e in est.estimators_[1:]:
        for a, b in zip(e.teacher_[0], teacher):
            np.testing.assert_array_equal(a, b)
    expected = averaged_trees([t for (t, _, _), _ in sent], [w for (_, _, w), _ in sent])
    for a, b in zip(teacher, expected):
        np.testing.assert_array_equal(a, b)
    Xe = np.vstack([x for _, x in sent])
    mean = sum(w * oblivious_output(Xe, *t) for (t, _, w), _ in sent) / sum(
        w for (_, _, w), _ in sent)
    np.testing.assert_allclose(oblivious_output(Xe, *teacher), mean, atol=1e-12)
    assert est.predict_proba(X).shape == (len(X), 2) and est.merged_.score(X, Y) > 0.6


def test_sharded_averaged_teacher_falls_back_to_the_shared_one(monkeypatch, capsys):
    """When no shard can take part in the average (every one lacks a class),
    the teacher is grown over all shards, and both exchanges count; the
    verbose line says which teacher the shards got."""
    import sktree_lmc.federation._sharded as sharded

    grown = _recording(monkeypatch)
    monkeypatch.setattr(sharded, "averaged_site_trees", lambda *args: None)
    base = _base(n_estimators=8, depth=2, early_stopping=False, teacher_weight=0.5)
    est = ShardedSoftTreeEnsemble(base, n_shards=2, verbose=1, random_state=0).fit(X, Y)
    assert len(grown) == 1
    assert "the shared teacher: 8 boosted trees grown over 2 shards" in capsys.readouterr().err
    shared = ShardedSoftTreeEnsemble(base, n_shards=2, teacher="shared",
                                     random_state=0).fit(X, Y)
    assert est.boosting_bytes_ > shared.boosting_bytes_
    for a, b in zip(est.estimators_[0].teacher_[0], shared.estimators_[0].teacher_[0]):
        np.testing.assert_array_equal(a, b)


def test_sharded_without_boosting_sends_no_histograms():
    est = ShardedSoftTreeEnsemble(_base(teacher_weight=0.0), n_shards=2,
                                  random_state=0).fit(X, Y)
    assert est.boosting_bytes_ is None
    # the default classifier has a teacher, grown over the shards
    est = ShardedSoftTreeEnsemble(_base(), n_shards=2, random_state=0).fit(X, Y)
    assert est.boosting_bytes_ > 0


def test_sharded_boosted_start_needs_every_feature():
    base = _base(split_init="boosting", max_features=0.5)
    with pytest.raises(ValueError, match="max_features=None"):
        ShardedSoftTreeEnsemble(base, n_shards=2, random_state=0).fit(X, Y)


def test_sharded_regressor_teacher_in_the_targets_units():
    rng = np.random.default_rng(0)
    Xr = rng.normal(size=(600, 3))
    yr = 1000.0 + 300.0 * (Xr[:, 0] > 0) + 10.0 * rng.normal(size=600)
    base = SoftTreeEnsembleRegressor(**{**FAST, "teacher_weight": 0.5, "n_estimators": 16,
                                        "max_epochs": 30})
    est = ShardedSoftTreeEnsemble(base, n_shards=3, split="contiguous", n_rounds=2,
                                  random_state=0).fit(Xr, yr)
    assert est.score(Xr, yr) > 0.7
    # the shared trees are grown in the targets' units; a shard, which standardizes its
    # targets with its own mean and scale, reads them in its units
    from sktree_lmc.training._boosting import grow_oblivious_trees, oblivious_output

    shard = clone(base).set_params(max_epochs=1).fit(Xr[:200], yr[:200] * 2.0)
    Xe = shard._encoded_input(Xr).X[:, : shard.encoder_.n_features_out_]
    trees = grow_oblivious_trees(Xe, yr[:, None], np.ones(600), loss="squared", n_trees=16,
                                 depth=2, n_outputs=1)
    in_units = oblivious_output(Xe, *shard.objective_.shared_trees(trees))
    np.testing.assert_allclose(in_units * shard.y_scale_ + shard.y_mean_,
                               oblivious_output(Xe, *trees), rtol=1e-12)
    assert not np.allclose(in_units, oblivious_output(Xe, *trees))


@pytest.mark.parametrize("teacher", ["shared", "averaged"])
def test_sharded_teachers_grow_as_many_trees_as_one_fits_teacher(teacher):
    """The teacher of the shards follows the estimator's rule for its trees
    (``teacher_trees``: ``n_estimators`` times the classes, up to 4, with more than
    two classes), whether grown over all shards or averaged from theirs."""
    from sktree_lmc.training._plan import teacher_trees

    X, y = make_classification(600, 6, n_informative=4, n_classes=3, random_state=0)
    base = _base(n_estimators=8, depth=2, teacher_weight=0.5, early_stopping=False,
                 max_epochs=2)
    per_copy = 3 if teacher == "averaged" else 1  # the average keeps every shard's trees
    for labels, n_classes in ((y, 3), ((y > 0).astype(int), 2)):
        est = ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=2, teacher=teacher,
                                      random_state=0).fit(X, labels)
        split_weight = est.estimators_[0].teacher_[0][1]
        assert len(split_weight) == per_copy * teacher_trees(8, n_classes)
        assert len(split_weight) == per_copy * (24 if n_classes == 3 else 8)


def test_sharded_rounds_early_stop_by_the_estimators_rule_for_classes(monkeypatch):
    """``early_stopping="auto"`` of the rounds decides on all shards' rows as one fit
    of the estimator would, with the multiclass threshold for more than two classes."""
    from sktree_lmc.training import _plan

    seen = []
    rule = _plan.auto_early_stopping
    monkeypatch.setattr("sktree_lmc.federation._sharded.auto_early_stopping",
                        lambda *args: seen.append(args) or rule(*args))
    X, y = make_classification(600, 6, n_informative=4, n_classes=3, random_state=0)
    base = _base(n_estimators=8, depth=2, max_epochs=2)
    ShardedSoftTreeEnsemble(base, n_shards=3, n_rounds=2, random_state=0).fit(X, y)
    assert seen == [(600, False, 3)]

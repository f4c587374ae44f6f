"""feature_selection="auto": every tree's columns drawn by the teacher's split gains, and the
additive term kept on the columns the gains spread over."""

import math

import numpy as np
import pytest
import torch
from conftest import FAST
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    merge_estimators,
)
from sktree_lmc.training._training import FeatureMask, effective_count, guided_count

#: 4 informative columns, then 16 columns of pure noise.
RNG = np.random.default_rng(0)
X = RNG.normal(size=(600, 20))
Y = (X[:, 0] + X[:, 1] - X[:, 2] + 0.5 * X[:, 3] > 0).astype(int)
INFORMATIVE = 4


def _clf(**kw):
    return SoftTreeEnsembleClassifier(**{**FAST, "n_estimators": 16, "random_state": 0, **kw})


def _columns_used(est):
    """Per tree, the input columns with a nonzero split weight."""
    used = (est.tree_params_.split_weight != 0).any(axis=1)  # (M, F_enc)
    groups = est.encoder_.feature_groups_
    return [set(groups[np.flatnonzero(row)].tolist()) for row in used]


def _additive_columns(est):
    """The input columns whose additive rows are not all zero."""
    enc, table = est.encoder_, est.tree_params_.additive
    off = enc.additive_offsets_
    return {int(enc.additive_sources_[j]) for j in range(len(off) - 1)
            if (table[off[j]:off[j + 1]] != 0).any()}


# -- the effective number of features and the draw ----------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1e6)), min_size=1, max_size=30),
       st.floats(1e-3, 1e3))
def test_effective_count_is_between_one_and_the_features_with_a_weight(weights, scale):
    w = np.asarray(weights)
    n = effective_count(w)
    if not w.sum() > 0:
        assert n == 0.0
        return
    assert 1.0 - 1e-9 <= n <= (w > 0).sum() + 1e-9
    assert math.isclose(effective_count(w * scale), n, rel_tol=1e-9)  # only the shares count


def test_effective_count_of_even_and_of_concentrated_weights():
    assert math.isclose(effective_count(np.ones(7)), 7.0)
    assert math.isclose(effective_count([0, 0, 3.0, 0]), 1.0)
    assert effective_count(np.zeros(3)) == 0.0


@pytest.mark.parametrize("max_features, n_eff, n_used, expected", [
    (0.5, 24.0, 158, 12), (0.5, 3.5, 7, 2), (0.5, 30.0, 10, 10), (1.0, 4.4, 9, 4),
    # a fraction keeps 2 features (an interaction), where there are 2
    (0.5, 1.2, 3, 2), (0.1, 9.0, 12, 2), (0.5, 1.0, 1, 1),
    ("sqrt", 16.0, 40, 4), ("log2", 8.0, 40, 3), ("log2", 2.0, 40, 2),
    # an int is the user's count
    (5, 2.0, 40, 5), (1, 9.0, 40, 1), (50, 2.0, 40, 40),
])
def test_guided_count(max_features, n_eff, n_used, expected):
    assert guided_count(max_features, n_eff, n_used) == expected


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.01, 1.0, 5.0]), min_size=2, max_size=12),
       st.integers(0, 2**31 - 1))
def test_guided_draw_never_takes_a_column_without_gain(gains, seed):
    gains = np.asarray(gains)
    groups = np.arange(len(gains))
    mask = FeatureMask.guided(torch.Generator().manual_seed(seed), 32, groups, gains, 0.5,
                              "cpu")
    if not (gains > 0).any():
        assert mask is None
        return
    chosen = mask.mask.numpy() > 0
    assert not chosen[:, gains == 0].any()
    k = guided_count(0.5, effective_count(gains), int((gains > 0).sum()))
    assert_array_equal(chosen.sum(axis=1), k)  # k columns in every tree


def test_guided_draw_follows_the_gains_and_expands_to_encoded_features():
    gains = np.array([8.0, 8.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    groups = np.repeat(np.arange(7), 2)  # two encoded features per column
    mask = FeatureMask.guided(torch.Generator().manual_seed(0), 4000, groups,
                              np.repeat(gains, 2) / 2, 0.5, "cpu")
    chosen = mask.mask.numpy()[:, ::2] > 0
    assert_array_equal(mask.mask.numpy()[:, ::2], mask.mask.numpy()[:, 1::2])
    freq = chosen.mean(axis=0)
    assert freq[0] > 2 * freq[2] and freq[1] > 2 * freq[5] and freq[6] == 0


def test_guided_draw_keeps_the_additive_rows_of_the_strongest_columns():
    gains = np.array([10.0, 5.0, 0.1, 0.0])
    sources = np.array([0, 1, 2, 3, 0, 1, 2, 3])  # two resolutions
    offsets = np.array([0, 2, 4, 6, 8, 12, 16, 20, 24])
    mask = FeatureMask.guided(torch.Generator().manual_seed(0), 8, np.arange(4), gains, 0.5,
                              "cpu", additive_sources=sources, additive_offsets=offsets)
    n_kept = math.ceil(effective_count(gains))
    assert n_kept == 2
    rows = mask.additive.numpy()
    kept = {int(sources[j]) for j in range(8) if rows[offsets[j]:offsets[j + 1]].all()}
    assert kept == {0, 1}
    assert set(np.unique(rows)) == {0.0, 1.0}
    assert rows.sum() == 2 + 2 + 4 + 4


# -- in a fit ------------------------------------------------------------------------------------


def test_trees_keep_two_columns_for_an_interaction():
    """y is the XOR of two columns: trees of one column each (a fraction of an effective
    number below 3, rounded) could not fit it."""
    rng = np.random.default_rng(1)
    X2 = rng.normal(size=(400, 6))
    y2 = ((X2[:, 0] > 0) ^ (X2[:, 1] > 0)).astype(int)
    est = _clf(n_estimators=32, depth=3, max_epochs=60, early_stopping=False).fit(X2, y2)
    assert all(len(u) >= 2 for u in _columns_used(est))
    assert est.score(X2, y2) > 0.9


def test_auto_draws_the_informative_columns_and_drops_the_noise_from_the_additive_term():
    auto = _clf().fit(X, Y)
    uniform = _clf(feature_selection="uniform").fit(X, Y)
    used_auto, used_uniform = _columns_used(auto), _columns_used(uniform)
    share = np.mean([len(u & set(range(INFORMATIVE))) / len(u) for u in used_auto])
    share_uniform = np.mean([len(u & set(range(INFORMATIVE))) / len(u) for u in used_uniform])
    assert share > 0.8 > 0.4 > share_uniform
    assert all(len(u) == 10 for u in used_uniform)  # max_features=0.5 of the 20 columns
    additive = _additive_columns(auto)
    assert additive and len(additive) <= 8
    assert len(additive & set(range(INFORMATIVE))) >= 3
    assert _additive_columns(uniform) == set(range(20))


def test_without_a_teacher_or_max_features_the_draw_is_uniform():
    for kw in (dict(teacher_weight=0.0), dict(max_features=None)):
        a, b = _clf(**kw).fit(X, Y), _clf(feature_selection="uniform", **kw).fit(X, Y)
        assert_array_equal(a.tree_params_.split_weight, b.tree_params_.split_weight)
        assert_array_equal(a.tree_params_.additive, b.tree_params_.additive)
    reg = SoftTreeEnsembleRegressor(**FAST, random_state=0).fit(X, X[:, 0])  # no teacher
    assert all(len(u) == 10 for u in _columns_used(reg))


def test_fits_are_reproducible():
    a, b = _clf().fit(X, Y), _clf().fit(X, Y)
    assert_array_equal(a.tree_params_.split_weight, b.tree_params_.split_weight)
    assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def _views(monkeypatch):
    """Record the ``TrainingView`` of every fit."""
    import sktree_lmc.training._training as training

    views, of = [], training.TrainingView.of.__func__

    def spy(cls, mask, encoder):
        views.append(of(cls, mask, encoder))
        return views[-1]

    monkeypatch.setattr(training.TrainingView, "of", classmethod(spy))
    return views


def test_training_the_kept_additive_rows_alone_changes_no_bit(monkeypatch):
    """Where the mask keeps at most ``SPARSE_ROWS_FRACTION`` of the additive table's rows,
    training holds those alone (a compact copy of the model): the fit, its Adam state and a
    warm-started continuation are those of training the whole table
    (``SPARSE_ROWS_FRACTION = 0``), bit for bit."""
    import sktree_lmc.training._training as training

    views = _views(monkeypatch)
    monkeypatch.setattr(training, "SPLIT_FEATURES_FRACTION", 0.0)  # every feature read
    fits = {}
    for fraction in (training.SPARSE_ROWS_FRACTION, 0.0):
        monkeypatch.setattr(training, "SPARSE_ROWS_FRACTION", fraction)
        views.clear()
        est = _clf(warm_start=True).fit(X, Y)  # warm starts keep Adam's state
        est.set_params(max_epochs=2).fit(X, Y)
        fits[fraction] = (est, [v is not None and v.rows is not None for v in views])
    (sparse, used_sparse), (dense, used_dense) = fits.values()
    assert used_sparse == [True, True] and used_dense == [False, False]
    for name in ("split_weight", "split_bias", "leaf_value", "additive"):
        assert_array_equal(getattr(sparse.tree_params_, name), getattr(dense.tree_params_, name))
    for key in ("exp_avg", "exp_avg_sq"):
        for name in ("split_weight", "additive"):
            assert_array_equal(getattr(sparse.optimizer_state_[key], name),
                               getattr(dense.optimizer_state_[key], name))
    assert_array_equal(sparse.predict_proba(X), dense.predict_proba(X))


def test_training_reads_the_features_the_trees_keep_where_they_keep_few(monkeypatch):
    """Where the trees keep at most ``SPLIT_FEATURES_FRACTION`` of the encoded features,
    training reads those alone: a fit of the same model up to float32 rounding as reading
    all of them (``SPLIT_FEATURES_FRACTION = 0``), warm-started continuations included, with
    the other features' weights and Adam moments exactly zero."""
    import sktree_lmc.training._training as training

    views = _views(monkeypatch)
    fits = {}
    for fraction in (training.SPLIT_FEATURES_FRACTION, 0.0):
        monkeypatch.setattr(training, "SPLIT_FEATURES_FRACTION", fraction)
        views.clear()
        est = _clf(warm_start=True).fit(X, Y)
        est.set_params(max_epochs=2).fit(X, Y)
        fits[fraction] = (est, [None if v is None else v.features for v in views])
    (few, read), (every, read_all) = fits.values()
    used = (few.tree_params_.split_weight != 0).any(axis=(0, 1))
    assert read_all == [None, None]
    for features in read:
        assert_array_equal(features, np.flatnonzero(used))
    assert used.sum() <= 0.5 * len(used)
    assert _columns_used(few) == _columns_used(every)
    assert not few.optimizer_state_["exp_avg_sq"].split_weight[:, :, ~used].any()
    assert_allclose(few.predict_proba(X), every.predict_proba(X), atol=1e-3)
    assert_allclose(few.tree_params_.split_weight, every.tree_params_.split_weight, atol=1e-3)


def test_a_scoring_fit_scores_the_whole_model_of_a_compact_training(monkeypatch):
    """With ``scoring`` other than the loss, early stopping scores the model as a whole
    (the compact module's parameters expanded): the same fit as without the view's
    features, up to rounding."""
    import sktree_lmc.training._training as training

    views = _views(monkeypatch)
    fits = []
    for fraction in (training.SPLIT_FEATURES_FRACTION, 0.0):
        monkeypatch.setattr(training, "SPLIT_FEATURES_FRACTION", fraction)
        fits.append(_clf(scoring="accuracy", early_stopping=True, max_epochs=4).fit(X, Y))
    assert views[0].features is not None and (views[1] is None or views[1].features is None)
    compact, whole = fits
    assert len(compact.validation_score_) == compact.n_iter_ == whole.n_iter_
    assert_allclose(compact.validation_score_, whole.validation_score_, atol=0.02)
    assert_allclose(compact.predict_proba(X), whole.predict_proba(X), atol=1e-3)


def test_a_warm_start_keeps_the_masked_columns_and_additive_rows_at_zero():
    est = _clf(warm_start=True).fit(X, Y)
    used, additive = _columns_used(est), _additive_columns(est)
    est.set_params(max_epochs=2).fit(X, Y)
    assert _columns_used(est) == used
    assert _additive_columns(est) == additive


def test_from_params_recovers_the_additive_columns():
    est = _clf().fit(X, Y)
    p, off = est.tree_params_, est.encoder_.additive_offsets_
    mask = FeatureMask.from_params(p.split_weight, "cpu", p.additive, off)
    rows = mask.additive.numpy()
    for j in range(len(off) - 1):
        nonzero = (p.additive[off[j]:off[j + 1]] != 0).any()
        assert rows[off[j]:off[j + 1]].all() == nonzero


def test_models_with_their_own_draws_merge_exactly_at_the_endpoints():
    a = _clf(random_state=0).fit(X[:300], Y[:300])
    b = _clf(random_state=1).fit(X[300:], Y[300:])
    for lam, end in ((0.0, a), (1.0, b)):
        merged = merge_estimators(a, b, lam=lam)
        np.testing.assert_allclose(merged.predict_proba(X), end.predict_proba(X), atol=1e-6)
    mid = merge_estimators(a, b)
    assert mid.score(X, Y) > 0.7


def test_sharded_models_draw_by_the_shared_teachers_gains():
    est = ShardedSoftTreeEnsemble(_clf(), n_shards=2, random_state=0).fit(X, Y)
    for shard in est.estimators_:
        used = _columns_used(shard)
        share = np.mean([len(u & set(range(INFORMATIVE))) / len(u) for u in used])
        assert share > 0.8
    assert est.score(X, Y) > 0.7


def test_a_verbose_fit_says_what_the_draw_chose(capsys):
    _clf(verbose=1, max_epochs=1).fit(X, Y)
    line = capsys.readouterr().err.splitlines()[0]
    assert "columns drawn by the teacher's gains:" in line and "of 20)" in line
    assert "the additive term on the" in line
    _clf(verbose=1, max_epochs=1, feature_selection="uniform").fit(X, Y)
    assert "teacher's gains" not in capsys.readouterr().err


def test_prediction_skips_the_additive_columns_left_at_zero():
    from sktree_lmc.training._training import live_code_columns
    from sktree_lmc.model._forward import SoftTreeEnsembleModule, predict_chunked

    est = _clf().fit(X, Y)
    enc, params = est.encoder_, est.tree_params_
    live = live_code_columns(params.additive, enc.additive_offsets_)
    assert live is not None and len(live) < len(enc.additive_sources_)
    assert {int(enc.additive_sources_[c]) for c in live} == _additive_columns(est)
    # every code column: the same probabilities, up to float32 rounding of the sums
    columns = est._input_columns(X)
    module = SoftTreeEnsembleModule.from_params(est.architecture_, params, "cpu")
    raw = predict_chunked(module, enc.transform_columns(columns),
                          codes=enc.additive_codes(columns))
    np.testing.assert_allclose(est._raw_output(X), raw, rtol=1e-6, atol=1e-6)
    uniform = _clf(feature_selection="uniform").fit(X, Y)
    assert live_code_columns(uniform.tree_params_.additive,
                              uniform.encoder_.additive_offsets_) is None


def test_prediction_does_not_encode_the_columns_no_split_uses_but_checks_them():
    from sktree_lmc._estimators import _unused_columns
    from sktree_lmc.model._forward import SoftTreeEnsembleModule, predict_chunked, used_features

    est = _clf().fit(X, Y)
    enc, params = est.encoder_, est.tree_params_
    features = used_features(params.split_weight)
    skip = _unused_columns(features, enc.feature_groups_, X.shape[1])
    assert skip is not None and skip.sum() >= 8 and not skip[:2].any()
    columns = est._input_columns(X)
    full, skipped = enc.transform_columns(columns), enc.transform_columns(columns, skip=skip)
    unused = skip[enc.feature_groups_]
    assert (skipped[:, unused] == 0).all() and (full[:, unused] != 0).any()
    assert_array_equal(skipped[:, ~unused], full[:, ~unused])
    # the trees multiply those features by zero: the same outputs, bit for bit
    table = params.split_weight[:, :, unused]
    assert (table == 0).all()
    assert_array_equal(features, np.flatnonzero(~unused))
    # ...and the kernel's matmul reads only the used ones: the same outputs
    module = SoftTreeEnsembleModule.from_params(est.architecture_, params, "cpu")
    for output in ("forward", "tree_outputs"):
        np.testing.assert_allclose(
            predict_chunked(module, full, output=output, features=features),
            predict_chunked(module, full, output=output), rtol=1e-6, atol=1e-6)
    bad = X.astype(object)
    bad[5, int(np.flatnonzero(skip)[0])] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.predict(bad.astype(float))

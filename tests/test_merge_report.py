"""The quality of a merge without the sites' rows: probe rows drawn from the encoder, the
features' scales weight matching compares in, ``merge_report_``, ``aligner="auto"`` and the
log-link merge's mean."""

import dataclasses
import warnings

import numpy as np
import pytest
from conftest import FAST
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import (
    MergeQualityWarning,
    MergeReport,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TabularEncoder,
    merge_estimators,
)
from sktree_lmc.encoding._common_encoding import feature_scales, probe_columns
from sktree_lmc.merging._merge import _matching_basis, _matching_params


def _credit_like(n, rng):
    """A continuous column, a count that is 0 on most rows with sentinel codes 96/98, a
    ratio with extreme outliers, and a categorical column with missing values."""
    x0 = rng.standard_normal(n)
    count = np.where(rng.rand(n) < 0.85, 0.0, rng.poisson(1.5, n) + 1.0)
    count[rng.rand(n) < 0.01] = 96.0
    count[rng.rand(n) < 0.01] = 98.0
    ratio = rng.exponential(0.5, n)
    ratio[rng.rand(n) < 0.005] = 2e4
    cat = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n).astype(object)
    cat[rng.rand(n) < 0.1] = None
    return [x0, count, ratio, cat]


def test_probe_columns_sample_each_columns_fitted_distribution():
    rng = np.random.RandomState(0)
    columns = _credit_like(3000, rng)
    enc = TabularEncoder(max_categories=3)._fit_columns(columns, np.array([0, 0, 0, 1], bool))
    probes = probe_columns(enc, 1000, missing_share=0.25, random_state=1)
    for j in range(3):  # numeric: within the fitted range, its quantiles' shares
        present = probes[j][~np.isnan(probes[j])]
        assert present.min() >= np.min(columns[j]) and present.max() <= np.max(columns[j])
    assert 0.8 < np.mean(probes[1] == 0.0) < 0.9  # the count's zeros keep their share
    assert np.isnan(probes[1]).sum() == 0  # no missing values in a column that had none
    cats = probes[3]
    assert 0.15 < np.mean([v is None for v in cats]) < 0.35  # the missing share asked
    seen = {v for v in cats if v is not None}
    assert set(enc.categories_[3]) < seen  # the kept categories, and one outside them
    # the same rows for the same seed, another order for another
    again = probe_columns(enc, 1000, missing_share=0.25, random_state=1)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(probes[:3], again[:3]))
    other = probe_columns(enc, 1000, random_state=2)
    assert not np.array_equal(other[0], probes[0])
    assert_allclose(np.sort(other[0]), np.sort(probe_columns(enc, 1000)[0]))


def _related(n, rng):
    """Two strongly related numeric columns (one heavy-tailed, one with ties), an
    independent one and a categorical column."""
    x0 = rng.standard_normal(n)
    x1 = np.round(np.exp(2 * x0 + 0.3 * rng.standard_normal(n)), 1)
    x2 = rng.standard_normal(n)
    cat = rng.choice(np.array(["a", "b"], dtype=object), n).astype(object)
    return [x0, x1, x2, cat]


def test_encoder_dependence_is_the_normal_scores_correlation():
    from scipy.stats import spearmanr

    rng = np.random.RandomState(0)
    columns = _related(4000, rng)
    enc = TabularEncoder()._fit_columns(columns, np.array([0, 0, 0, 1], bool))
    R = enc.dependence_
    assert R.shape == (4, 4) and np.allclose(R, R.T) and np.allclose(np.diag(R), 1)
    assert R[0, 1] > 0.9 and abs(R[0, 2]) < 0.05  # rank-based: the exp and ties change nothing
    assert R[3, :3].tolist() == [0, 0, 0]  # categorical columns: independent
    assert abs(R[0, 1] - spearmanr(columns[0], columns[1])[0]) < 0.02
    # the union of two encoders: the mean of theirs; kept by to_dict and from_summaries
    from sktree_lmc.encoding._common_encoding import common_encoder
    from sktree_lmc.encoding._encoding import summarize

    half = [c[:2000] for c in columns], [c[2000:] for c in columns]
    a, b = (TabularEncoder()._fit_columns(h, np.array([0, 0, 0, 1], bool)) for h in half)
    union = common_encoder([a, b])[0]
    assert_allclose(union.dependence_, (a.dependence_ + b.dependence_) / 2)
    assert_allclose(TabularEncoder.from_dict(enc.to_dict()).dependence_, R)
    parts = [summarize(h, np.array([0, 0, 0, 1], bool)) for h in half]
    pooled = TabularEncoder.from_summaries(parts, np.array([0, 0, 0, 1], bool))
    assert_allclose(pooled.dependence_, R, atol=0.02)  # ranks within each part
    # too many columns for a columns x columns matrix: none kept
    wide = TabularEncoder().fit(rng.standard_normal((50, 257)))
    assert wide.dependence_ is None


def test_joint_probe_columns_keep_the_columns_dependence_and_distributions():
    from scipy.stats import spearmanr

    rng = np.random.RandomState(0)
    columns = _related(4000, rng)
    enc = TabularEncoder()._fit_columns(columns, np.array([0, 0, 0, 1], bool))
    joint = probe_columns(enc, 2000, joint=True, random_state=3)
    apart = probe_columns(enc, 2000, random_state=3)
    assert spearmanr(joint[0], joint[1])[0] > 0.9  # as in the training rows
    assert abs(spearmanr(apart[0], apart[1])[0]) < 0.1  # the independent draw
    assert abs(spearmanr(joint[0], joint[2])[0]) < 0.1
    for j in range(3):  # each column's own distribution either way
        q = [0.1, 0.5, 0.9]
        assert_allclose(np.quantile(joint[j], q), np.quantile(columns[j], q),
                        atol=0.15 * np.std(columns[j]))
    no_dependence = TabularEncoder().fit(rng.standard_normal((50, 257)))
    assert probe_columns(no_dependence, 10, joint=True)[0].shape == (10,)


def test_a_common_encoders_stacked_column_samples_the_mixtures_quantile_function():
    # the union of quantile-normal columns fitted on different rows is their transforms side
    # by side; its sample at increasing levels increases (a copula's levels keep their order)
    # and follows the mixture of the columns' distributions
    from sktree_lmc.encoding._common_encoding import common_encoder

    rng = np.random.RandomState(0)
    a, b = rng.standard_normal((3000, 1)), rng.exponential(1.0, (3000, 1)) - 0.5
    union, _ = common_encoder([TabularEncoder().fit(a), TabularEncoder().fit(b)])
    column = union.column_encodings_[0]
    assert type(column).__name__ == "StackedColumns"
    levels = np.linspace(0.0, 1.0, 4001)[1:-1]
    values = column.sample(levels)
    assert np.all(np.diff(values) >= 0)
    pooled = np.concatenate([a[:, 0], b[:, 0]])
    assert_allclose(values[[400, 2000, 3600]], np.quantile(pooled, [0.1, 0.5, 0.9]), atol=0.1)


def test_merge_probe_rows_of_models_fitted_apart_keep_their_columns_dependence(monkeypatch):
    # each model's share comes from its own encoder (its columns and Gaussian copula), not
    # from the common encoding the merge aligns on
    from scipy.stats import spearmanr

    from sktree_lmc.merging import _merge

    drawn = []
    real = _merge.members_probe_rows

    def spy(estimators, weights, *args, **kwargs):
        rows = real(estimators, weights, *args, **kwargs)
        drawn.append(np.asarray(rows, dtype=float))
        return rows

    monkeypatch.setattr(_merge, "members_probe_rows", spy)
    rng = np.random.RandomState(0)
    models = []
    for k in range(2):
        x0 = rng.exponential(1.0, 600)
        X = np.column_stack([x0, x0 + 0.1 * rng.standard_normal(600), rng.standard_normal(600)])
        y = (X[:, 0] + X[:, 2] > 1).astype(int)
        models.append(SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2,
                                                 random_state=k).fit(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MergeQualityWarning)
        merge_estimators(models)
    assert len(drawn) == 2  # the report's rows and the distillation's
    for rows in drawn:
        assert spearmanr(rows[:, 0], rows[:, 1])[0] > 0.9  # as in every model's rows
        assert abs(spearmanr(rows[:, 0], rows[:, 2])[0]) < 0.15


def test_merge_probe_rows_come_from_every_member_by_weight():
    from sktree_lmc.merging._report import members_probe_rows

    rng = np.random.RandomState(0)
    X = rng.standard_normal((400, 3))
    y = (X[:, 0] > 0).astype(int)
    low = SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=1, random_state=0).fit(X, y)
    high = SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=1, random_state=1).fit(
        X + 100.0, y)
    rows = members_probe_rows([low, high], [0.25, 0.75], n_rows=1000, random_state=2)
    assert rows.shape == (1000, 3)
    assert np.mean(rows[:, 0] > 50) == pytest.approx(0.75, abs=0.001)  # by the weights
    assert 0.2 < np.mean(rows[:500, 0] > 50) / 0.75 < 1.8  # shuffled, not stacked
    again = members_probe_rows([low, high], [0.25, 0.75], n_rows=1000, random_state=2)
    assert np.array_equal(rows, again)
    only_low = members_probe_rows([low, high], [1.0, 0.0], n_rows=100)
    assert (only_low[:, 0] < 50).all()


def test_feature_scales_are_the_features_sizes_on_the_fitted_distribution():
    rng = np.random.RandomState(0)
    columns = _credit_like(3000, rng)[:3]
    enc = TabularEncoder()._fit_columns(columns, np.zeros(3, bool))
    scales = feature_scales(enc)
    features = enc.transform_columns(columns).astype(np.float64)
    assert_allclose(scales, np.sqrt((features ** 2).mean(axis=0)), rtol=0.05)
    # a continuous column's normal scores are about 1; the mostly-zero count's sit near
    # the clip of the normal scores, and weigh several times more
    assert 0.9 < scales[0] < 1.1 and scales[1] > 3
    # "none" says nothing of the distribution: 1
    plain = TabularEncoder("none", additive_bins=None)._fit_columns(columns, np.zeros(3, bool))
    assert_allclose(feature_scales(plain), 1.0)


def test_weight_matching_compares_weights_in_units_of_the_features(clf_pair):
    a, _ = clf_pair
    view = _matching_basis(a.encoder_, scale_features=True)
    assert view is not None and _matching_basis(a.encoder_) is None
    scaled = _matching_params(a, view).split_weight
    raw = _matching_params(a).split_weight
    assert raw is a.tree_params_.split_weight
    assert_allclose(scaled, raw * feature_scales(a.encoder_).astype(np.float32), rtol=1e-6)
    # one quantile-normal feature per column: the function view is the features' scales,
    # bit for bit (merges of models that share their encoder are aligned as before)
    assert_array_equal(scaled, raw * feature_scales(a.encoder_).astype(np.float32))
    # the aligner's switch, and AM ignores it
    assert ModelAligner().scale_features is True


def test_merge_report_of_a_working_merge_and_of_a_forced_naive_one(clf_pair, magic):
    a, b = clf_pair
    X, y = magic
    with warnings.catch_warnings():
        warnings.simplefilter("error", MergeQualityWarning)
        merged = merge_estimators(a, b, aligner="wm")
    report = merged.merge_report_
    assert isinstance(report, MergeReport) and report.aligner == "wm"
    assert report.rows == "probe" and report.n_rows == 2048 and not report.flagged
    assert report.disagreement < 1 and report.candidates == {"wm": report.disagreement}
    # the distance is the total variation from the ensemble's probabilities
    assert report.distance == pytest.approx(report.disagreement * report.member_distance)
    with pytest.warns(MergeQualityWarning, match="farther from the models' ensemble"):
        naive = merge_estimators(a, b, aligner="naive")
    assert naive.merge_report_.flagged and naive.merge_report_.disagreement > 1
    for r in (report, naive.merge_report_):  # the rule: farther than the models, and much
        assert r.flagged == (r.disagreement > 1 and r.signal_loss > 0.3)
    assert naive.merge_report_.signal_loss > report.signal_loss
    # rows given: measured there
    on_x = merge_estimators(a, b, aligner="wm", X=X)
    assert on_x.merge_report_.rows == "X" and on_x.merge_report_.n_rows == len(X)
    ens = (a.predict_proba(X) + b.predict_proba(X)) / 2
    tv = 0.5 * np.abs(on_x.predict_proba(X) - ens).sum(axis=1).mean()
    assert on_x.merge_report_.distance == pytest.approx(tv, rel=1e-6)


def test_auto_keeps_the_alignment_closest_to_the_ensemble(clf_pair):
    a, b = clf_pair
    merged = merge_estimators(a, b, distill=False)  # the default aligner is "auto"
    report = merged.merge_report_
    assert set(report.candidates) == {"wm", "am"}
    assert report.aligner == min(report.candidates, key=report.candidates.get)
    assert report.disagreement == report.candidates[report.aligner]
    assert report.aligner == "wm"  # these models: WM's merge is the closer one
    wm = merge_estimators(a, b, aligner="wm")
    assert_allclose(wm.tree_params_.leaf_value, merged.tree_params_.leaf_value)


def test_the_default_distills_only_where_it_comes_closer_to_the_ensemble(clf_pair):
    """``distill="auto"``: every alignment of the auto merge of models that all carry weight
    is refitted to their ensemble, and the merge kept is the one closest to it on the
    report's rows, refitted or not; never at an endpoint nor with an explicit aligner."""
    a, b = clf_pair
    plain = merge_estimators(a, b, distill=False).merge_report_
    merged = merge_estimators(a, b)
    report = merged.merge_report_
    assert set(report.candidates) == {"wm", "am", "wm+distill", "am+distill"}
    assert report.disagreement == min(report.candidates.values())
    assert {k: report.candidates[k] for k in ("wm", "am")} == plain.candidates
    if report.aligner.endswith("+distill"):
        assert report.distance < plain.distance
        assert not np.allclose(merged.tree_params_.leaf_value,
                               merge_estimators(a, b, distill=False).tree_params_.leaf_value)
    else:
        assert report == dataclasses.replace(plain, candidates=report.candidates)
    assert merged.get_params() == a.get_params()
    for model in (merge_estimators(a, b, lam=0.0), merge_estimators(a, b, aligner="wm")):
        assert not any(k.endswith("+distill") for k in model.merge_report_.candidates)
    forced = merge_estimators(a, b, distill=True).merge_report_
    assert forced.aligner.endswith("+distill")
    assert forced.disagreement == min(v for k, v in forced.candidates.items()
                                      if k.endswith("+distill"))


def test_a_merge_at_an_endpoint_is_the_model_and_is_not_flagged(clf_pair, magic):
    a, b = clf_pair
    X, _ = magic
    with warnings.catch_warnings():
        warnings.simplefilter("error", MergeQualityWarning)
        at_a = merge_estimators(a, b, lam=0.0)
        at_b = merge_estimators(a, b, lam=1.0)
    assert_allclose(at_a.predict_proba(X), a.predict_proba(X), atol=1e-6)
    assert_allclose(at_b.predict_proba(X), b.predict_proba(X), atol=1e-6)
    assert not at_a.merge_report_.flagged and not at_b.merge_report_.flagged


def _uncorrected_scale(a, b):
    """The merged target scale of a log-link merge at lam=0.5, before its correction: the
    geometric mean of the models' scales."""
    return np.sqrt(np.asarray(a.y_scale_) * np.asarray(b.y_scale_))


@pytest.mark.parametrize("loss", ["poisson", "gamma"])
def test_log_link_merges_are_corrected_to_the_ensemble(loss):
    """Averaging log-link outputs averages predictions geometrically, below their mean. With
    rows of the data the merge's scale is multiplied by the ratio of the ensemble's mean
    prediction to its own (the merge keeps the ensemble's mean over the data); on probe rows
    by the geometric mean of that ratio row by row. The endpoints stay exact."""
    rng = np.random.RandomState(0)
    X = rng.standard_normal((800, 4))
    mu = np.exp(0.8 * X[:, 0] - 0.5 * X[:, 1] + 0.3)
    y = rng.poisson(mu).astype(float) if loss == "poisson" else rng.gamma(2.0, mu / 2.0)
    settings = dict(FAST, n_estimators=16, max_epochs=10, loss=loss)
    # two sites split by a column: their target means differ
    site = X[:, 0] > 0
    a = SoftTreeEnsembleRegressor(random_state=1, **settings).fit(X[site], y[site])
    b = SoftTreeEnsembleRegressor(random_state=2, **settings).fit(X[~site], y[~site])
    ens = (a.predict(X) + b.predict(X)) / 2
    merged = merge_estimators(a, b, X=X, aligner="wm")
    again = merge_estimators(a, b, X=X, aligner="wm", lam=0.5)
    assert_allclose(merged.y_scale_, again.y_scale_)  # deterministic
    # the factor: the ensemble's mean prediction over X over the uncorrected merge's
    uncorrected = merged.predict(X) / (merged.y_scale_ / _uncorrected_scale(a, b))
    factor = ens.mean() / uncorrected.mean()
    assert merged.y_scale_ == pytest.approx(_uncorrected_scale(a, b) * factor, rel=1e-6)
    # after it, the merge's mean prediction over X is the ensemble's
    assert merged.predict(X).mean() == pytest.approx(ens.mean(), rel=1e-6)
    # the default with rows: the scale set on X, no refit
    assert "+distill" not in merge_estimators(a, b, X=X).merge_report_.aligner
    without_rows = merge_estimators(a, b)  # corrected on the probe rows
    assert abs(without_rows.predict(X).mean() / ens.mean() - 1) < 0.2
    for lam, model in ((0.0, a), (1.0, b)):
        end = merge_estimators(a, b, lam=lam)
        assert_allclose(end.predict(X), model.predict(X), rtol=1e-6)


def test_tabular_encoder_defaults_are_the_estimators():
    """An encoder fitted once with its defaults and passed as ``encoder=`` gives the model
    the estimator fits alone."""
    rng = np.random.RandomState(0)
    X = np.column_stack(_credit_like(400, rng)[:3])
    y = (X[:, 0] + (X[:, 1] > 0) > 0.5).astype(int)
    shared = ("numeric_encoding", "n_bins", "max_categories", "additive_bins",
              "categorical_features")
    enc_params = TabularEncoder().get_params()
    est_params = SoftTreeEnsembleClassifier().get_params()
    assert {k: enc_params[k] for k in shared} == {k: est_params[k] for k in shared}
    alone = SoftTreeEnsembleClassifier(random_state=0, **FAST).fit(X, y)
    given = SoftTreeEnsembleClassifier(random_state=0, encoder=TabularEncoder().fit(X),
                                       **FAST).fit(X, y)
    assert_allclose(given.predict_proba(X), alone.predict_proba(X))


def test_distill_refits_the_leaves_to_the_ensemble_without_labels(clf_pair, magic):
    a, b = clf_pair
    X, _ = magic
    plain = merge_estimators(a, b, aligner="wm")
    distilled = merge_estimators(a, b, aligner="wm", distill=True)
    # the splits are the merge's, the leaves refitted; the hyperparameters kept
    assert_allclose(distilled.tree_params_.split_weight, plain.tree_params_.split_weight)
    assert not np.allclose(distilled.tree_params_.leaf_value, plain.tree_params_.leaf_value)
    assert distilled.get_params() == plain.get_params()
    # closer to the ensemble on the report's rows, which it was not fitted on
    assert distilled.merge_report_.distance < plain.merge_report_.distance
    # and on rows of the data: fitted there when X is given
    on_x = merge_estimators(a, b, aligner="wm", X=X, distill=True)
    ens = (a.predict_proba(X) + b.predict_proba(X)) / 2
    tv = [0.5 * np.abs(m.predict_proba(X) - ens).sum(axis=1).mean() for m in (plain, on_x)]
    assert tv[1] < tv[0]


def test_a_refit_to_probabilities_is_the_refit_to_rows_weighted_by_them(clf_pair, magic):
    # the distillation's cross-entropy to the ensemble's probabilities equals the weighted
    # cross-entropy of every row repeated once per class, weighted by its probability
    from sktree_lmc.merging._refit import refit_in_memory

    a, b = clf_pair
    X, _ = magic
    X = X[:300]
    merged = merge_estimators(a, b, aligner="wm")
    # the labels' objective without the teachers and the smoothing, as the distillation's
    merged.objective_ = merged.objective_.replace(teacher_weight=0.0, label_smoothing=0.0)
    p = (a.predict_proba(X) + b.predict_proba(X)) / 2
    soft, _ = refit_in_memory(merged, X, None, probabilities=p, max_iter=30)
    n, C = p.shape
    rows = np.tile(np.arange(n), C)
    weighted, _ = refit_in_memory(merged, X[rows], np.repeat(merged.classes_, n),
                                  p.T.reshape(-1), max_iter=30)
    assert_allclose(soft.tree_params_.leaf_value, weighted.tree_params_.leaf_value, atol=2e-4)
    with pytest.raises(ValueError, match="probabilities of shape"):
        refit_in_memory(merged, X, None, probabilities=p[:, :1])


def test_distill_of_regressors_fits_the_ensembles_predictions():
    rng = np.random.RandomState(0)
    X = rng.standard_normal((400, 3))
    y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.standard_normal(400)
    a, b = (SoftTreeEnsembleRegressor(random_state=s, **dict(FAST, max_epochs=10)).fit(X, y)
            for s in (1, 2))
    plain = merge_estimators(a, b, aligner="wm", X=X)
    distilled = merge_estimators(a, b, aligner="wm", X=X, distill=True)
    ens = (a.predict(X) + b.predict(X)) / 2
    assert (np.mean((distilled.predict(X) - ens) ** 2)
            < np.mean((plain.predict(X) - ens) ** 2))

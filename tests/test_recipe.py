"""The training recipe as data in the parameters: per-tree feature subsets
(``max_features``) are exact zeros of ``split_weight`` that training, symmetry ops,
alignment and merging keep; label smoothing softens the predicted probabilities."""

import numpy as np
import pytest
from conftest import FAST
from numpy.testing import assert_array_equal
from sklearn.datasets import make_classification

from sktree_lmc import (
    ARCHITECTURES,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    merge_estimators,
    random_ops,
)

X, Y = make_classification(n_samples=240, n_features=6, n_informative=4, n_classes=3,
                           n_clusters_per_class=1, random_state=0)


def _fit(seed, **kw):
    return SoftTreeEnsembleClassifier(**{**FAST, "random_state": seed, "max_features": 2,
                                         **kw}).fit(X, Y)


def tree_masks(params):
    """(M, F) per tree: the encoded features whose weight is exactly zero at every node;
    also asserts that a feature is zero at every node of a tree or at none."""
    zero = params.split_weight == 0
    masked = zero.all(axis=1)
    assert_array_equal(zero.any(axis=1), masked)  # the same set for all nodes
    return masked


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_max_features_masks_whole_input_columns_per_tree(arch):
    est = _fit(0, arch=arch)
    masked = tree_masks(est.tree_params_)
    groups = est.encoder_.feature_groups_
    for m in range(est.n_estimators):
        # whole input columns (all their encoded features), 2 of the 6 used
        used_columns = np.unique(groups[~masked[m]])
        assert len(used_columns) == 2
        assert_array_equal(~masked[m], np.isin(groups, used_columns))
    # the trees draw different subsets
    assert len({tuple(row) for row in masked}) > 1
    # without max_features nothing is masked
    assert not tree_masks(_fit(0, arch=arch, max_features=None).tree_params_).any()


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_symmetry_ops_and_merging_keep_the_masked_weights_zero(arch):
    a, b = _fit(1, arch=arch), _fit(2, arch=arch)
    mask_a, mask_b = tree_masks(a.tree_params_), tree_masks(b.tree_params_)
    # a symmetry op moves and negates nodes within a tree: same zero set per tree
    moved = a.tree_params_.apply_ops(random_ops(a.architecture_, a.n_estimators, 0))
    assert_array_equal(tree_masks(moved), mask_a)
    # alignment permutes whole trees (with their masks) and applies ops within them
    aligner = ModelAligner(random_state=0).fit([a, b], X)
    b_aligned = aligner.align([a, b])[1].tree_params_
    mask_b_aligned = tree_masks(b_aligned)
    assert sorted(map(tuple, mask_b_aligned)) == sorted(map(tuple, mask_b))
    # merging matched pairs: a weight is zero where it is zero in both trees of the pair
    # (the merged tree uses the union of their features)
    merged = merge_estimators(a, b, lam=0.5, aligner=aligner, X=X)
    assert_array_equal(tree_masks(merged.tree_params_), mask_a & mask_b_aligned)
    # the pair's weights are averaged, zeros included: exact zeros stay exact
    expected = 0.5 * a.tree_params_.split_weight + 0.5 * b_aligned.split_weight
    np.testing.assert_allclose(merged.tree_params_.split_weight, expected, rtol=1e-6,
                               atol=1e-7)


def test_warm_start_with_the_default_recipe_keeps_the_feature_subsets():
    """Warm start with the default recipe (input encoding, cosine schedule restarted per
    fit, EMA, early stopping, max_features): it continues, and the masked weights stay
    exactly zero (the mask is recovered from the zeros)."""
    est = _fit(0, warm_start=True, max_epochs=3, early_stopping=True)
    before = est.get_tree_params()
    masked = tree_masks(before)
    assert masked.any()
    est.fit(X, Y)
    after = est.tree_params_
    assert est.n_epochs_ == 6 and len(est.loss_curve_) == 6
    assert len(est.validation_loss_curve_) == 6
    assert_array_equal(tree_masks(after), masked)
    assert not np.array_equal(after.split_weight, before.split_weight)
    assert np.isfinite(est.predict_proba(X)).all()


def test_label_smoothing_makes_probabilities_less_extreme():
    # no teacher: its soft targets make probabilities less extreme too
    params = dict(FAST, n_estimators=16, max_epochs=60, learning_rate=0.05,
                  early_stopping=False, random_state=0, numeric_encoding="piecewise_linear",
                  teacher_weight=0.0)
    plain = SoftTreeEnsembleClassifier(**params).fit(X, Y)
    smooth = SoftTreeEnsembleClassifier(label_smoothing=0.3, **params).fit(X, Y)
    p_plain = plain.predict_proba(X).max(axis=1)
    p_smooth = smooth.predict_proba(X).max(axis=1)
    # the smoothed targets put 1 - 0.3 + 0.3 / 3 = 0.8 on the label: the fit's
    # probabilities gather there (measured: median 0.78-0.79 over 3 seeds, 90 % quantile
    # 0.84-0.85), where the plain fit's go to 1 (median 0.999)
    assert np.median(p_plain) > 0.99 and np.quantile(p_plain, 0.1) > 0.9
    assert 0.7 < np.median(p_smooth) < 0.85 and np.quantile(p_smooth, 0.9) < 0.9
    assert p_smooth.mean() < p_plain.mean() - 0.1
    # while the predicted labels stay about as good
    assert smooth.score(X, Y) > plain.score(X, Y) - 0.05


@pytest.mark.parametrize("schedule, warmup", [("cosine", 0.0), ("cosine", 0.2),
                                              ("constant", 0.3)])
def test_a_scheduler_started_inside_a_run_continues_its_schedule(schedule, warmup):
    """make_lr_scheduler(start_step=s) gives, at its step k, the learning rate of
    the whole run's scheduler at step s + k (a federated round continues the
    schedule of the rounds before it instead of restarting it)."""
    import torch

    from sktree_lmc.training._training import make_lr_scheduler

    def rates(total, start, n):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=0.1)
        sched = make_lr_scheduler(opt, schedule, warmup, total, start_step=start)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            if sched is not None:
                sched.step()
        return out

    whole = rates(30, 0, 30)
    pieces = rates(30, 0, 10) + rates(30, 10, 10) + rates(30, 20, 10)
    np.testing.assert_allclose(pieces, whole, rtol=1e-12)
    if schedule == "cosine":
        assert whole[-1] < 0.1 * whole[int(30 * warmup)]  # it decays over the run


# -- split_init="data": the splits start as sharp thresholds on the data ----------------------


def _start(X, **kw):
    """A model whose splits are still their initialization (no step can move them)."""
    params = dict(n_estimators=32, depth=3, learning_rate=1e-12, max_epochs=1,
                  early_stopping=False, averaging=None, max_features=None, device="cpu",
                  random_state=0, split_init="data", numeric_encoding="standard")
    params.update(kw)
    return SoftTreeEnsembleClassifier(**params).fit(X, np.arange(len(X)) % 2)


def test_data_split_init_starts_sharp_axis_aligned_thresholds_between_values():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=300), rng.integers(0, 3, 300), np.full(300, 7.0),
                         rng.normal(size=(300, 3))])
    est = _start(X)
    w, b = est.tree_params_.split_weight, est.tree_params_.split_bias  # (M, N, F), (M, N)
    Z = est._encoded_input(X).X[:, : w.shape[2]]  # the trees' features (the bin codes apart)
    bound = 1 / np.sqrt(Z.shape[1])  # the uniform start of the other weights
    sharp = np.abs(w).max(axis=2) > 2 * bound
    assert 0.3 < sharp.mean() < 0.7  # half of the splits start on the data
    # the others keep the uniform start
    assert np.abs(w[~sharp]).max() <= bound + 1e-6 and np.abs(b[~sharp]).max() <= bound + 1e-6
    w, b = w[sharp], b[sharp]  # (S, F), (S,)
    j = np.abs(w).argmax(axis=1)
    w_j = np.take_along_axis(w, j[:, None], axis=1)[:, 0]
    # one dominant column per split: 10 per standard deviation of that column
    assert (np.abs(np.abs(w_j) - 10 / Z.std(axis=0)[j]) <= bound + 1e-3).all()
    others = np.abs(w).copy()
    np.put_along_axis(others, j[:, None], 0, axis=1)
    assert others.max() <= bound + 1e-6
    assert not (j == 2).any()  # a constant column is never a threshold
    assert len(np.unique(j)) == 5  # every other column is
    # thresholds (approximately -b / w_j, the other weights being small) inside the data, and
    # between the values of the discrete column, never on one
    t = -b / w_j
    assert (t > Z.min(axis=0)[j] - 0.5).all() and (t < Z.max(axis=0)[j] + 0.5).all()
    discrete = np.unique(Z[:, 1])
    gaps = np.abs(t[j == 1][:, None] - discrete[None, :]).min(axis=1)
    assert gaps.min() > 0.2 * np.diff(discrete).min()
    # both directions of a split are drawn
    assert (w_j > 0).any() and (w_j < 0).any()


def test_data_split_init_draws_the_columns_of_each_trees_subset():
    X, _ = make_classification(n_samples=200, n_features=8, random_state=0)
    est = _start(X, max_features=3)
    w = est.tree_params_.split_weight
    used = (w != 0).any(axis=1)  # (M, F): the tree's columns
    assert (used.sum(axis=1) == 3).all()
    j = np.abs(w).argmax(axis=2)
    assert np.take_along_axis(used, j, axis=1).all()


def test_data_split_init_on_piecewise_linear_columns_starts_on_their_ramps():
    X, _ = make_classification(n_samples=300, n_features=3, n_informative=2, n_redundant=0,
                               random_state=0)
    est = _start(X, numeric_encoding="piecewise_linear")
    ramps = est.encoder_.ramp_directions()
    groups = est.encoder_.feature_groups_
    w = est.tree_params_.split_weight
    sharp = np.argwhere(np.abs(w).max(axis=2) > 1.0)[:5]
    assert len(sharp) == 5
    for m, n in sharp:
        norms = [np.abs(w[m, n, groups == g]).max() for g in range(3)]
        g = int(np.argmax(norms))
        cols = (groups == g) & (np.nan_to_num(ramps) != 0)  # its knots' ramp (not 0 or NaN)
        ratio = w[m, n, cols] / ramps[cols]
        # the dominant column's weights are a multiple of its ramp (up to the small start)
        assert np.ptp(ratio) < 0.2 * np.abs(ratio).mean()


def test_data_split_init_is_deterministic_and_not_the_default():
    from sktree_lmc import SoftTreeEnsembleRegressor

    X, _ = make_classification(n_samples=200, n_features=5, random_state=0)
    a, b = _start(X), _start(X)
    assert_array_equal(a.tree_params_.split_weight, b.tree_params_.split_weight)
    assert SoftTreeEnsembleClassifier().split_init == "fan_in"
    assert SoftTreeEnsembleRegressor().split_init == "fan_in"


def test_data_split_init_draws_input_columns_not_encoded_features():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 600
    frame = pd.DataFrame({
        "a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.normal(size=n),
        "city": pd.Categorical(rng.choice([f"c{i}" for i in range(30)], n)),
    })
    frame.loc[rng.random(n) < 0.2, "a"] = np.nan  # "a" gets a missing-value indicator
    est = _start(frame, n_estimators=128)
    groups = est.encoder_.feature_groups_
    w = est.tree_params_.split_weight
    sharp = np.abs(w).max(axis=2) > 2 / np.sqrt(w.shape[2])
    j = np.abs(w).argmax(axis=2)[sharp]
    share = np.bincount(groups[j], minlength=4) / len(j)
    # a quarter each, although "city" has 30 of the 35 encoded features
    assert np.all(np.abs(share - 0.25) < 0.08), share
    a_cols = np.flatnonzero(groups == 0)
    assert not (j == a_cols[-1]).any()  # "a"'s missing indicator is never a threshold


@pytest.mark.parametrize("encoding", ["quantile_normal", "piecewise_linear", "none"])
def test_data_split_init_with_constant_columns_keeps_the_uniform_start(encoding):
    X = np.column_stack([np.full(50, 3.0), np.full(50, -1.0)])
    est = _start(X, numeric_encoding=encoding, n_estimators=4)
    w, b = est.tree_params_.split_weight, est.tree_params_.split_bias
    assert np.isfinite(w).all() and np.abs(b).max() <= 1.0  # no threshold was drawn
    assert est.predict(X).shape == (50,)


@pytest.mark.parametrize("early_stopping, n_samples, validation, given, expected", [
    ("auto", 3_000, None, "auto", 0.02),   # small data: auto runs it without early stopping
    ("auto", 3_001, None, "auto", 0.0),    # early stopping on: the validation rows stop it
    ("auto", 300, "X_val", "auto", 0.0),   # rows of the user's own: early stopping on
    (False, 300, None, "auto", 0.0),       # turned off by hand: not auto's small data
    (True, 300, None, "auto", 0.0),
    ("auto", 300, None, 0.2, 0.2),         # a number is used as it is
    ("auto", 30_000, None, 0.0, 0.0),
])
def test_auto_label_smoothing_smooths_where_auto_early_stopping_is_off(
        early_stopping, n_samples, validation, given, expected):
    from sktree_lmc.training._plan import AUTO_LABEL_SMOOTHING, Recipe

    assert AUTO_LABEL_SMOOTHING == 0.02
    est = SoftTreeEnsembleClassifier(early_stopping=early_stopping, label_smoothing=given)
    recipe = Recipe.from_estimator(est).resolved(n_samples, validation)
    assert recipe.label_smoothing == expected
    assert recipe.early_stopping == (n_samples > 3_000 or validation is not None
                                     if early_stopping == "auto" else early_stopping)


def test_regressors_recipe_has_no_label_smoothing():
    from sktree_lmc import SoftTreeEnsembleRegressor
    from sktree_lmc.training._plan import Recipe

    assert Recipe.from_estimator(SoftTreeEnsembleRegressor()).resolved(300).label_smoothing == 0


@pytest.mark.parametrize("n_samples, explicit, n_classes",
                         [(400, 0.02, 3), (3_200, 0.0, 2), (3_200, 0.02, 3)])
def test_auto_label_smoothing_fits_as_its_resolved_value(n_samples, explicit, n_classes):
    """A fit with "auto" is bit for bit the fit with the value it resolves to, and its
    loss (the refit's objective too) carries that value (several classes: no early
    stopping up to 10,000 rows, so the small-data smoothing)."""
    Xs, ys = make_classification(n_samples=n_samples, n_features=5, n_classes=n_classes,
                                 n_informative=3, random_state=0)
    params = dict(FAST, max_epochs=2, random_state=0)
    assert SoftTreeEnsembleClassifier().label_smoothing == "auto"  # the default
    auto = SoftTreeEnsembleClassifier(label_smoothing="auto", **params).fit(Xs, ys)
    fixed = SoftTreeEnsembleClassifier(label_smoothing=explicit, **params).fit(Xs, ys)
    other = SoftTreeEnsembleClassifier(label_smoothing=0.02 - explicit, **params).fit(Xs, ys)
    assert auto.label_smoothing_ == explicit and auto.objective_.loss.label_smoothing == explicit
    assert auto.do_early_stopping_ == (n_samples > (3_000 if n_classes == 2 else 10_000))
    assert_array_equal(auto.tree_params_.leaf_value, fixed.tree_params_.leaf_value)
    assert auto.loss_curve_ == fixed.loss_curve_
    assert not np.array_equal(auto.tree_params_.leaf_value, other.tree_params_.leaf_value)


def test_a_merge_refits_with_the_smoothing_its_models_resolved():
    """The refit objective of a merge weighs the models' resolved smoothing: "auto" on
    small data counts as 0.02."""
    a = _fit(0)
    b = _fit(1, label_smoothing=0.0)
    assert (a.label_smoothing_, b.label_smoothing_) == (0.02, 0.0)
    merged = merge_estimators(a, b, lam=0.5)
    assert merged.objective_.label_smoothing == pytest.approx(0.01)
    assert merged.objective_.loss.label_smoothing == pytest.approx(0.01)
    assert merged.get_params() == a.get_params()  # the hyperparameters stay model 0's

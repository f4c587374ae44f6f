"""``split_init="boosting"``: the trees start as gradient-boosted oblivious trees."""

import warnings

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification

from sktree_lmc import (
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleModule,
    SoftTreeEnsembleRegressor,
    get_architecture,
)
from sktree_lmc.training._boosting import boosted_start, grow_oblivious_trees, oblivious_output
from sktree_lmc.training._plan import FitPlan, Recipe


def _thresholds(x, max_bins):
    """Candidate thresholds of one column, written plainly: midpoints between its
    distinct values, or its quantiles when it has more than ``max_bins + 1``."""
    values = np.unique(x)
    if len(values) <= max_bins + 1:
        return (values[1:] + values[:-1]) / 2
    levels = np.linspace(0, 1, max_bins + 2)[1:-1]
    return np.unique(np.quantile(x, levels))


def _base_score(kind, target, weight, n_outputs):
    """The constant start, written plainly: log class shares (centered), or the
    weighted mean."""
    if kind == "softmax":
        share = np.bincount(target, weights=weight, minlength=n_outputs) / weight.sum()
        logp = np.log(np.maximum(share, 1e-12))
        return logp - logp.mean()
    return np.average(target, axis=0, weights=weight)


def _reference_trees(X, target, weight, kind, n_trees, depth, n_outputs, l2=1.0, lr=0.1):
    """The greedy search written plainly: every level, feature and threshold
    (the weights are relative: rescaled to a mean of 1 first)."""
    from sktree_lmc.training._losses import as_loss

    weight = weight * (len(weight) / weight.sum())
    base = _base_score(kind, target, weight, n_outputs)
    raw = np.tile(base, (len(X), 1))
    edges = [_thresholds(X[:, f], 255) for f in range(X.shape[1])]
    out_f, out_t = np.full((n_trees, depth), -1), np.zeros((n_trees, depth))
    out_l = np.zeros((n_trees, 1 << depth, n_outputs))
    for m in range(n_trees):
        g, h = as_loss(kind).gradients(raw, target, weight)
        node = np.zeros(len(X), dtype=np.int64)
        for d in range(depth):
            best = (-np.inf, None, None)
            for f in range(X.shape[1]):
                for t in edges[f]:
                    gain = 0.0
                    for v in range(1 << d):
                        for side in (X[:, f] <= t, X[:, f] > t):
                            rows = (node == v) & side
                            gain += (g[rows].sum(0) ** 2 / (h[rows].sum(0) + l2)).sum()
                    if gain > best[0] + 1e-9:
                        best = (gain, f, t)
            _, f, t = best
            out_f[m, d], out_t[m, d] = f, t
            node = node * 2 + (X[:, f] > t)
        for v in range(1 << depth):
            rows = node == v
            out_l[m, v] = -lr * g[rows].sum(0) / (h[rows].sum(0) + l2)
        raw += out_l[m][node]
    return base, out_f, out_t, out_l


@pytest.mark.parametrize("kind", ["softmax", "squared"])
@pytest.mark.parametrize("seed", [0, 1])
def test_histogram_search_equals_the_plain_greedy_search(kind, seed):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 6, size=(80, 3)).astype(float) + rng.normal(size=(80, 3)) * 0.01
    weight = rng.uniform(0.5, 2.0, size=80)
    if kind == "softmax":
        target, C = rng.integers(0, 3, size=80), 3
    else:
        target, C = rng.normal(size=(80, 2)), 2
    got = grow_oblivious_trees(X, target, weight, loss=kind, n_trees=3, depth=2, n_outputs=C)
    want = _reference_trees(X, target, weight, kind, 3, 2, C)
    assert_allclose(got[0], want[0])
    assert_array_equal(got[1], want[1])
    assert_allclose(got[2], want[2])
    assert_allclose(got[3], want[3], atol=1e-10)


@pytest.mark.parametrize("arch_name", ["oblivious", "non_oblivious"])
@pytest.mark.parametrize("kind", ["softmax", "squared"])
def test_the_soft_start_computes_the_boosted_trees(arch_name, kind):
    rng = np.random.default_rng(0)
    # integer-valued columns: every row is at least half a unit from any threshold
    X = rng.integers(0, 8, size=(400, 5)).astype(np.float64)
    C = 3
    if kind == "softmax":
        target = (X[:, 0] + 2 * (X[:, 1] > 3) + rng.integers(0, 2, 400)).astype(int) % 3
    else:
        target = np.column_stack([X[:, 0] * X[:, 1], X[:, 2] > 4, X[:, 3]])
    arch = get_architecture(arch_name, 3)
    module = SoftTreeEnsembleModule(arch, 16, 5, C, generator=torch.Generator().manual_seed(0))
    trees = boosted_start(module, arch, X, target, np.ones(400), loss=kind)
    with torch.no_grad():
        soft = module(torch.as_tensor(X, dtype=torch.float32)).double().numpy()
    # the soft module and the hard trees, computed independently, agree
    assert_allclose(soft, oblivious_output(X, *trees), atol=2e-4)
    assert (trees[1] >= 0).all()  # every level found a split here


def _weighted_rows():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, size=(60, 3)).astype(float)
    y = rng.integers(0, 2, size=60)
    w = rng.integers(1, 4, size=60)
    return X, y, w


def test_weights_count_like_repeated_rows_without_the_penalty():
    """The weights are rescaled to a mean of 1, so a weight of k counts as k
    repeated rows exactly where the L2 penalty does not weigh in (l2=0)."""
    X, y, w = _weighted_rows()
    kw = dict(loss="softmax", n_trees=4, depth=2, n_outputs=2, l2=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):  # empty bins: 0 / 0 without l2
        weighted = grow_oblivious_trees(X, y, w.astype(float), **kw)
        repeated = grow_oblivious_trees(np.repeat(X, w, axis=0), np.repeat(y, w),
                                        np.ones(w.sum()), **kw)
    for a, b in zip(weighted, repeated):
        assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("scale", [1e-40, 1e-4, 1e4, 1e300])
def test_the_scale_of_the_weights_is_free(scale):
    """Only weight ratios matter, the L2 penalty included: weights summing to
    1 do not shrink the leaves to nothing, and huge ones do not overflow."""
    X, y, w = _weighted_rows()
    kw = dict(loss="softmax", n_trees=4, depth=2, n_outputs=2)
    expected = grow_oblivious_trees(X, y, w.astype(float), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = grow_oblivious_trees(X, y, w * scale, **kw)
    for a, b in zip(got, expected):
        assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert np.abs(expected[3]).max() > 0.05  # leaves of a real step, not shrunk away


@pytest.mark.parametrize("kind", ["softmax", "squared"])
def test_validation_rows_keep_the_prefix_of_trees_with_the_least_loss(kind):
    from sktree_lmc.training._losses import as_loss

    _loss = lambda kind, *args: as_loss(kind).mean(*args)  # noqa: E731
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    noisy = X[:, 0] + rng.normal(scale=2.0, size=300) > 0  # few trees generalize
    target = noisy.astype(np.int64) if kind == "softmax" else noisy[:, None] * 1.0
    w = np.ones(300)
    tr, va = slice(0, 200), slice(200, 300)
    kw = dict(loss=kind, n_trees=40, depth=3, n_outputs=2 if kind == "softmax" else 1)
    full = grow_oblivious_trees(X[tr], target[tr], w[tr], **kw)
    kept = grow_oblivious_trees(X[tr], target[tr], w[tr], **kw,
                                validation=(X[va], target[va], w[va]))
    n_kept = int((kept[1] >= 0).any(axis=1).sum())
    assert 0 < n_kept < 40  # noise: the later trees overfit
    # the kept trees are the first trees of the full growth; the rest are dropped
    for a, b in zip(kept[1:], full[1:]):
        assert_array_equal(a[:n_kept], b[:n_kept])
    assert (kept[1][n_kept:] == -1).all() and (kept[3][n_kept:] == 0).all()
    # and the prefix length minimizes the validation loss
    base, f, t, leaves = full
    losses = [_loss(kind, oblivious_output(X[va], base, f[:m], t[:m], leaves[:m]), target[va],
                    w[va]) for m in range(1, 41)]
    assert n_kept == 1 + int(np.argmin(losses))


def test_trees_dropped_on_the_validation_rows_keep_their_random_splits():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))
    y = X[:, 0] + rng.normal(scale=2.0, size=400) > 0
    kw = dict(split_init="boosting", n_estimators=48, depth=2, learning_rate=1e-12,
              n_iter_no_change=1, random_state=0, device="cpu", max_features=None,
              additive_bins=None, numeric_encoding="standard", early_stopping=True)
    boosted = SoftTreeEnsembleClassifier(**kw).fit(X, y)
    random = SoftTreeEnsembleClassifier(**{**kw, "split_init": "fan_in"}).fit(X, y)
    a, b = boosted.tree_params_, random.tree_params_
    sharp = np.abs(a.split_weight).max(axis=(1, 2)) > 50
    assert 0 < sharp.sum() < 48
    # the dropped trees: the random start's splits, and one constant output per tree
    assert_allclose(a.split_weight[~sharp], b.split_weight[~sharp], atol=1e-9)
    assert_allclose(a.split_bias[~sharp], b.split_bias[~sharp], atol=1e-9)
    leaves = a.leaf_value[~sharp]
    assert_allclose(leaves, np.broadcast_to(leaves[:, :1], leaves.shape), atol=1e-9)
    # without early stopping there are no validation rows: every tree is boosted
    every = SoftTreeEnsembleClassifier(**{**kw, "early_stopping": False,
                                          "max_epochs": 1}).fit(X, y)
    assert (np.abs(every.tree_params_.split_weight).max(axis=(1, 2)) > 50).all()


def test_boosted_fit_keeps_the_start_when_training_cannot_improve_it():
    X, y = make_classification(n_samples=300, n_features=6, random_state=0)
    kw = dict(split_init="boosting", n_estimators=16, depth=3, random_state=0, device="cpu",
              max_features=None, additive_bins=None, numeric_encoding="standard",
              early_stopping=True)
    # steps of 1e-12 cannot improve the validation loss by tol: the start is kept
    still = SoftTreeEnsembleClassifier(learning_rate=1e-12, n_iter_no_change=2, **kw).fit(X, y)
    assert still.best_epoch_ == 0 and still.n_iter_ == 2
    # it is the boosted trees: on the training rows (standardized, as the trees see them)
    # the soft model predicts what the hard trees predict
    trained = SoftTreeEnsembleClassifier(**kw).fit(X, y)
    assert trained.best_epoch_ >= 0
    assert still.score(X, y) > 0.85
    a = SoftTreeEnsembleClassifier(**kw).fit(X, y)
    assert_array_equal(a.tree_params_.split_weight, trained.tree_params_.split_weight)


def test_boosted_start_respects_the_feature_subsets():
    X, y = make_classification(n_samples=300, n_features=8, random_state=0)
    est = SoftTreeEnsembleClassifier(split_init="boosting", n_estimators=12, depth=2,
                                     max_features=3, learning_rate=1e-12, max_epochs=1,
                                     early_stopping=False, random_state=0, device="cpu",
                                     numeric_encoding="standard", additive_bins=None).fit(X, y)
    w = est.tree_params_.split_weight  # (M, N, F)
    used = (w != 0).any(axis=1)
    assert (used.sum(axis=1) == 3).all()  # the masks are kept
    split = np.abs(w).argmax(axis=2)  # the boosted column of every split
    assert np.take_along_axis(used, split, axis=1).all()
    assert np.abs(w).max() > 100  # sharp (slope 200 per standard deviation)


def test_boosted_start_on_a_regressor():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = np.where(X[:, 0] > 0.3, 5.0, -2.0) + X[:, 1]
    est = SoftTreeEnsembleRegressor(split_init="boosting", n_estimators=32, depth=3,
                                    random_state=0, device="cpu", max_epochs=5).fit(X, y)
    assert est.score(X, y) > 0.9


@pytest.mark.parametrize("arch", ["decision_list", "decision_list_modified"])
def test_boosted_start_names_the_architectures_it_supports(arch):
    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    est = SoftTreeEnsembleClassifier(arch=arch, split_init="boosting", max_epochs=1)
    with pytest.raises(ValueError, match=f"arch='{arch}'"):
        est.fit(X, y)


def test_boosted_start_on_a_dataframe_with_categories_and_missing_values():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 400
    city = rng.choice(["paris", "rome", "oslo"], size=n)
    x = rng.normal(size=n)
    x[rng.random(n) < 0.1] = np.nan
    y = np.where((city == "rome") | (np.nan_to_num(x) > 0.5), "yes", "no")
    X = pd.DataFrame({"city": pd.Categorical(city), "x": x, "z": rng.normal(size=n)})
    est = SoftTreeEnsembleClassifier(split_init="boosting", n_estimators=16, depth=3,
                                     max_epochs=3, random_state=0, device="cpu",
                                     early_stopping=True).fit(X, y)
    assert est.score(X, y) > 0.95
    assert set(est.predict(X.iloc[:5])) <= {"yes", "no"}


def test_boosted_start_uses_class_weight_and_multi_output_targets():
    X, y = make_classification(n_samples=400, n_features=5, weights=[0.9, 0.1], random_state=0)
    kw = dict(split_init="boosting", n_estimators=16, depth=2, learning_rate=1e-12,
              max_epochs=1, early_stopping=False, random_state=0, device="cpu",
              max_features=None, additive_bins=None)
    plain = SoftTreeEnsembleClassifier(**kw).fit(X, y)
    balanced = SoftTreeEnsembleClassifier(class_weight="balanced", **kw).fit(X, y)
    # the weights enter the gradients: the rare class gets a larger share of the predictions
    assert (balanced.predict(X) == 1).sum() > (plain.predict(X) == 1).sum()
    Y = np.column_stack([X[:, 0] > 0, 3 * X[:, 1]]).astype(float)
    reg = SoftTreeEnsembleRegressor(**{**kw, "max_epochs": 1}).fit(X, Y)
    assert reg.predict(X).shape == (400, 2)
    assert reg.score(X, Y) > 0.5


# -- teacher_weight: the labels mixed with a gradient-boosted teacher's predictions ------------


def _distilled(est, Xe, target, sample_weight, split, n_outputs, generator):
    """The targets ``est`` trains on: its teacher grown on the rows of ``split``, mixed in."""
    from sktree_lmc.training._fit import FitSettings, FitState, teacher_of
    from sktree_lmc.training._objective import Teacher

    recipe = Recipe.from_estimator(est)
    state = FitState(Xe, target, sample_weight, *split, n_outputs=n_outputs,
                     generator=generator, recipe=recipe, plan=FitPlan(), arch=None,
                     device="cpu", settings=FitSettings.from_params(est.get_params(), "est"))
    objective = copy.deepcopy(est.objective_)
    trees, gains = teacher_of(state, objective, est.encoder_)
    assert gains.shape == (est.encoder_.n_features_out_,) and (gains >= 0).all() and gains.sum() > 0
    F = est.encoder_.n_features_out_
    return objective.distilled(np.asarray(Xe.X[split[0], :F], dtype=np.float64), target,
                               split[0], est.teacher_weight, Teacher.of(trees))


def test_teacher_targets_mix_the_labels_on_training_rows_only():
    X, y = make_classification(n_samples=300, n_features=6, n_classes=3, n_informative=4,
                               random_state=0)
    est = SoftTreeEnsembleClassifier(teacher_weight=0.25, n_estimators=32, depth=3,
                                     max_epochs=1, random_state=0, device="cpu").fit(X, y)
    Xe = est._encoded_input(X)
    train_idx, val_idx = np.arange(0, 300, 2), np.arange(1, 300, 2)
    soft = _distilled(est, Xe, y, np.ones(300, dtype=np.float32), (train_idx, val_idx), 3,
                      torch.Generator().manual_seed(0))
    assert soft.shape == (300, 3) and soft.dtype == np.float32
    assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    assert_array_equal(soft[val_idx], np.eye(3)[y[val_idx]])  # early stopping sees labels
    # on the training rows: 0.75 * one-hot + 0.25 * the teacher's probabilities
    teacher = (soft[train_idx] - 0.75 * np.eye(3)[y[train_idx]]) / 0.25
    assert (teacher > 0).all() and (teacher < 1).all()
    assert_allclose(teacher.sum(axis=1), 1.0, rtol=1e-5)
    # the teacher learned: it puts most mass on the label on most training rows
    assert (teacher.argmax(axis=1) == y[train_idx]).mean() > 0.8


def test_teacher_targets_of_a_regressor_mix_the_standardized_targets():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    est = SoftTreeEnsembleRegressor(teacher_weight=0.5, n_estimators=8, depth=2, max_epochs=1,
                                    random_state=0, device="cpu").fit(X, X[:, 0] > 0)
    target = ((X[:, :1] - X[:, :1].mean()) / X[:, :1].std()).astype(np.float32)
    train_idx = np.arange(150)
    mixed = _distilled(est, est._encoded_input(X), target, np.ones(200), (train_idx, None), 1,
                       None)
    assert_array_equal(mixed[150:], target[150:])  # validation rows: the targets
    teacher = 2 * mixed[:150, 0] - target[:150, 0]  # mixed = (target + teacher) / 2
    assert not np.allclose(teacher, target[:150, 0])
    assert np.corrcoef(teacher, target[:150, 0])[0, 1] > 0.9  # the teacher fits the target


def test_teacher_weight_changes_the_fit_and_partial_fit_ignores_it():
    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    kw = dict(n_estimators=8, depth=2, max_epochs=3, random_state=0, device="cpu")
    plain = SoftTreeEnsembleClassifier(**kw).fit(X, y)
    taught = SoftTreeEnsembleClassifier(teacher_weight=0.5, **kw).fit(X, y)
    assert not np.array_equal(plain.tree_params_.leaf_value, taught.tree_params_.leaf_value)
    a = SoftTreeEnsembleClassifier(**kw).partial_fit(X, y, classes=[0, 1])
    b = SoftTreeEnsembleClassifier(teacher_weight=0.5, **kw).partial_fit(X, y, classes=[0, 1])
    assert_array_equal(a.tree_params_.leaf_value, b.tree_params_.leaf_value)
    assert b.teacher_weight == 0.5  # restored after the pass


# -- boosting over several sites: the shards of a federated fit --------------------------------


def _integer_rows(n, seed, n_features=4):
    """Rows with few distinct values per feature (exact thresholds on any
    union of sites) and a target that depends on two of them."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 12, size=(n, n_features)).astype(np.float64)
    y = ((X[:, 0] > 5) ^ (X[:, 1] > 8)) | (rng.random(n) < 0.1)
    return X, y.astype(np.int64)


@pytest.mark.parametrize("kind", ["softmax", "squared"])
def test_trees_grown_over_sites_are_the_trees_of_their_union(kind):
    from sktree_lmc.training._boosting import BoostingSite, LocalSites, grow_shared_trees

    X, y = _integer_rows(900, 0)
    target = y if kind == "softmax" else np.column_stack([y * 2.0, X[:, 2]])
    C = 2
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=900)
    train, val = np.arange(0, 900) % 5 != 0, np.arange(0, 900) % 5 == 0
    union = grow_oblivious_trees(X[train], target[train], w[train], loss=kind, n_trees=30,
                                 depth=3, n_outputs=C,
                                 validation=(X[val], target[val], w[val]))
    sites = []
    for rows in np.array_split(np.arange(900), 3):  # three sites of 300 rows
        t, v = rows[train[rows]], rows[val[rows]]
        sites.append(BoostingSite(X[t], target[t], w[t], loss=kind, n_outputs=C,
                                  validation=(X[v], target[v], w[v])))
    shared = grow_shared_trees(LocalSites(sites), loss=kind, n_trees=30, depth=3, n_outputs=C)
    assert_array_equal(shared[1], union[1])  # the same splits (and prefix)
    assert_allclose(shared[2], union[2])
    assert_allclose(shared[0], union[0], rtol=1e-12)
    assert_allclose(shared[3], union[3], rtol=1e-9, atol=1e-12)
    assert 0 < (union[1] >= 0).any(axis=1).sum() <= 30


def test_merged_thresholds_follow_the_quantiles_of_the_union():
    from sktree_lmc.training._boosting import BoostingSite, _merge_thresholds

    rng = np.random.default_rng(0)
    # three sites with different distributions of one continuous feature
    parts = [rng.normal(0, 1, 3000), rng.normal(2, 0.5, 1000), rng.exponential(1, 6000)]
    sites = [BoostingSite(p[:, None], np.zeros(len(p), dtype=np.int64), np.ones(len(p)),
                          loss="softmax", n_outputs=2).summary(255) for p in parts]
    edges = _merge_thresholds(sites, 255)[0]
    union = np.concatenate(parts)
    # the share of the rows below every threshold is within 0.3 % of its level
    share = np.searchsorted(np.sort(union), edges) / len(union)
    levels = np.linspace(0, 1, 257)[1:-1]
    assert len(edges) == 255
    assert np.abs(share - levels).max() < 0.003
    # one site: exactly the thresholds of a plain fit
    one = _merge_thresholds(sites[:1], 255)[0]
    assert_array_equal(one, _thresholds(parts[0], 255))


@pytest.mark.parametrize("kind", ["softmax", "squared"])
def test_no_feature_at_all_grows_constant_trees(kind):
    """Every column constant (the piecewise-linear encoding drops them all): the
    boosting has nothing to split on, and every tree is a constant."""
    X = np.zeros((30, 0))
    y = np.arange(30) % 2
    target = y if kind == "softmax" else y[:, None].astype(float)
    base, features, thresholds, leaves = grow_oblivious_trees(
        X, target, np.ones(30), loss=kind, n_trees=3, depth=2, n_outputs=2 if kind == "softmax"
        else 1)
    assert (features == -1).all()
    assert (leaves[:, 1:] == 0).all()  # every row in leaf 0
    out = oblivious_output(X, base, features, thresholds, leaves)
    assert out.shape == (30, leaves.shape[2]) and np.allclose(out, out[0])


def test_a_site_sends_the_left_children_and_the_first_output_of_what_the_client_needs():
    """The histograms a site sends below the root (its left children's, of the
    first output for two classes) are the even nodes and first output of the
    full histograms, and the parents' minus them are the odd nodes'."""
    from sktree_lmc.training._boosting import BoostingSite, _all_outputs, _with_right_children

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + rng.normal(size=200) > 0).astype(int)
    site = BoostingSite(X, y, rng.uniform(0.5, 2, size=200), loss="softmax", n_outputs=2)
    edges = [np.quantile(X[:, f], np.linspace(0, 1, 9)[1:-1]) for f in range(3)]
    site.start(edges, np.zeros(2))
    site.add_tree(None)
    root = site.histograms(0, 3, 1)
    site.split(1, 3)
    full = site.histograms(0, 3, 2)
    left = site.histograms(0, 3, 2, True, 1)
    assert left[0].shape == (1, 3, 8, 1)  # 7 thresholds: 8 bins
    assert_allclose(left[0], full[0][0::2, ..., :1])
    # the client's reconstruction: right = parent - left, second output = -first
    parent = tuple(r[..., :1] for r in root)  # what the client kept, of the first output
    rebuilt = _all_outputs(*_with_right_children(parent, left), 2)
    assert_allclose(rebuilt[0], full[0], atol=1e-12)
    assert_allclose(rebuilt[1], full[1], atol=1e-12)


@pytest.mark.parametrize("max_features, grown", [(None, 1), (0.5, 2)])
def test_the_boosted_start_on_every_column_is_the_teacher(monkeypatch, max_features, grown):
    """With split_init="boosting" and a teacher, the trees are grown once when
    the start has every column (the same boosting on the same rows), twice when
    the start's trees are restricted to per-tree column subsets."""
    import sktree_lmc.training._boosting as boosting
    import sktree_lmc.training._fit as estimators

    calls = []
    original = boosting.grow_oblivious_trees

    def counting(*args, **kwargs):
        calls.append(kwargs.get("mask"))
        return original(*args, **kwargs)

    monkeypatch.setattr(boosting, "grow_oblivious_trees", counting)
    monkeypatch.setattr(estimators, "grow_oblivious_trees", counting)
    X, y = make_classification(n_samples=300, n_features=6, random_state=0)
    est = SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=2, split_init="boosting",
                                     teacher_weight=0.5, max_features=max_features,
                                     random_state=0).fit(X, y)
    assert len(calls) == grown
    # the teacher is the one a fit without the boosted start grows on the same rows
    alone = SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=2, teacher_weight=0.5,
                                       max_features=max_features, random_state=0).fit(X, y)
    for a, b in zip(est.teacher_[0], alone.teacher_[0]):
        assert_array_equal(a, b)


@settings(max_examples=25, deadline=None)
@given(n_ensembles=st.integers(1, 4), depth=st.integers(0, 3), n_outputs=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16))
def test_averaged_trees_output_the_weighted_mean_of_the_ensembles(n_ensembles, depth,
                                                                  n_outputs, seed):
    """averaged_trees is exact: its output is the weighted mean of its ensembles'
    outputs, and the trees it drops (those a prefix dropped) added nothing."""
    from sktree_lmc.training._boosting import averaged_trees

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(50, 4))
    ensembles = []
    for _ in range(n_ensembles):
        M = int(rng.integers(1, 6))
        features = rng.integers(-1, 4, size=(M, depth))
        leaves = rng.normal(size=(M, 1 << depth, n_outputs))
        dead = rng.random(M) < 0.3  # dropped by a prefix: no split, no value
        features[dead], leaves[dead] = -1, 0.0
        ensembles.append((rng.normal(size=n_outputs), features, rng.normal(size=(M, depth)),
                          leaves))
    weights = rng.uniform(0.1, 3.0, size=n_ensembles)
    averaged = averaged_trees(ensembles, weights)
    expected = sum(w * oblivious_output(X, *t) for w, t in zip(weights, ensembles))
    assert_allclose(oblivious_output(X, *averaged), expected / weights.sum(), atol=1e-12)
    live = sum(int(((t[1] >= 0).any(axis=1) | (t[3] != 0).any(axis=(1, 2))).sum())
               for t in ensembles)
    assert len(averaged[1]) == max(live, 1)


def test_averaged_trees_rejects_bad_weights():
    from sktree_lmc.training._boosting import averaged_trees

    trees = (np.zeros(1), np.zeros((1, 1), dtype=int), np.zeros((1, 1)), np.zeros((1, 2, 1)))
    with pytest.raises(ValueError, match="one nonnegative weight per ensemble"):
        averaged_trees([trees, trees], [1.0])
    with pytest.raises(ValueError, match="positive sum"):
        averaged_trees([trees], [0.0])


def test_a_site_grows_on_its_own_rows_the_trees_of_a_plain_fit():
    """BoostingSite.grow (what a shard of teacher="averaged" sends) is
    grow_oblivious_trees on the site's rows, with its gains and weight sum."""
    from sktree_lmc.training._boosting import BoostingSite

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] - X[:, 2] + rng.normal(size=300) > 0).astype(int)
    w = rng.uniform(0.5, 2.0, size=300)
    gains = np.zeros((12, 3))
    plain = grow_oblivious_trees(X, y, w, loss="softmax", n_trees=12, depth=3, n_outputs=2,
                                 gains=gains)
    trees, site_gains, weight_sum = BoostingSite(
        X, y, w, loss="softmax", n_outputs=2).grow(12, 3)
    for a, b in zip(trees, plain):
        assert_array_equal(a, b)
    assert_array_equal(site_gains, gains)
    assert weight_sum == pytest.approx(w.sum())


def test_averaged_site_trees_leave_out_a_site_that_lacks_a_class():
    """Under cross-entropy a site without a class would pull that class's logit
    down everywhere in the average (its trees start from log(1e-12)): it is left
    out, and with every site lacking one there is no average (None)."""
    from sktree_lmc.training._boosting import BoostingSite, averaged_site_trees, averaged_trees

    rng = np.random.default_rng(3)
    results = []
    for k in range(3):
        X = rng.normal(size=(150, 3))
        y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=150), [-0.5, 0.5])
        if k == 2:
            y = np.minimum(y, 1)  # site 2 never sees class 2
        site = BoostingSite(X, y, np.ones(150), loss="softmax", n_outputs=3)
        results.append((site.base_sums(), site.grow(6, 2)))
    trees, gains = averaged_site_trees(results, "softmax", 3)
    expected = averaged_trees([g[0] for _, g in results[:2]], [g[2] for _, g in results[:2]])
    for a, b in zip(trees, expected):
        assert_array_equal(a, b)
    assert gains.shape == (3,) and gains.sum() > 0
    lacking = averaged_trees([g[0] for _, g in results], [g[2] for _, g in results])
    # what averaging every site would have done: class 2 far below the others
    assert oblivious_output(np.zeros((1, 3)), *lacking)[0, 2] < oblivious_output(
        np.zeros((1, 3)), *trees)[0, 2] - 3
    assert averaged_site_trees(results[2:], "softmax", 3) is None
    # squared error has no class to lack
    assert averaged_site_trees(results[2:], "squared", 3) is not None

"""N-way merging: merge_estimators([m1, ..., mK]), ModelAligner with K models, and
the procedure behind them, sktree_lmc.merging._nway.align_many."""

import numpy as np
import pytest
from conftest import FAST
from sklearn.datasets import make_classification, make_regression

from sktree_lmc import (
    ARCHITECTURES,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TreeParams,
    get_architecture,
    merge_estimators,
    random_ops,
)
from sktree_lmc.merging._bridge import with_params as _with_params
from sktree_lmc.merging._nway import align_many

X_CLF, Y_CLF = make_classification(
    n_samples=240, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=0
)


def _tiny(arch="oblivious", depth=2, seed=0, n_estimators=12, epochs=3, **kw):
    return SoftTreeEnsembleClassifier(**{
        **FAST, "arch": arch, "depth": depth, "n_estimators": n_estimators,
        "max_epochs": epochs, "random_state": seed, **kw,
    }).fit(X_CLF, Y_CLF)


@pytest.fixture(scope="module")
def models():
    return [_tiny(seed=s) for s in range(4)]


def _scrambled(model, seed):
    """The same function in another basis: random tree permutation and ops."""
    rng = np.random.RandomState(seed)
    p = model.tree_params_
    ops = random_ops(model.architecture_, p.n_trees, rng)
    return _with_params(model, p.permute_trees(rng.permutation(p.n_trees)).apply_ops(ops))


def _random_params_model(template, seed):
    """``template`` with well-separated random parameters (distinct trees)."""
    rng = np.random.RandomState(seed)
    p = template.tree_params_
    return _with_params(template, TreeParams(
        rng.randn(*p.split_weight.shape), rng.randn(*p.split_bias.shape),
        rng.randn(*p.leaf_value.shape),
    ))


@pytest.mark.parametrize("arch,depth", [(a, 2) for a in ARCHITECTURES] + [("non_oblivious", 3)])
@pytest.mark.parametrize("method", ["wm", "am"])
def test_copies_under_random_symmetries_merge_to_the_original(arch, depth, method):
    original = _random_params_model(_tiny(arch, depth, epochs=1), seed=1)
    copies = [original] + [_scrambled(original, s) for s in range(2, 6)]
    merged = merge_estimators(copies, aligner=method, X=X_CLF)
    # model 0's basis is kept: the merge gives the original parameters back
    for name in ("split_weight", "split_bias", "leaf_value"):
        np.testing.assert_allclose(
            getattr(merged.tree_params_, name), getattr(original.tree_params_, name), atol=1e-6
        )
    # with a scrambled reference, the same function in the reference's basis
    merged = merge_estimators(copies[::-1], aligner=method, X=X_CLF, weights=[1, 2, 3, 4, 5])
    np.testing.assert_allclose(
        merged.predict_proba(X_CLF), original.predict_proba(X_CLF), atol=1e-5
    )


def test_two_models_match_the_pairwise_merge(models):
    a, b = models[:2]
    for lam in (0.5, 0.75):
        pair = merge_estimators(a, b, lam=lam)
        many = merge_estimators([a, b], weights=[1 - lam, lam])
        for name in ("split_weight", "split_bias", "leaf_value"):
            np.testing.assert_allclose(
                getattr(many.tree_params_, name), getattr(pair.tree_params_, name), atol=1e-6
            )


def test_weights(models):
    a = models[0]
    only_a = merge_estimators(models, weights=[1, 0, 0, 0])
    np.testing.assert_allclose(only_a.predict_proba(X_CLF), a.predict_proba(X_CLF), atol=1e-6)
    uniform = merge_estimators(models)
    scaled = merge_estimators(models, weights=[3, 3, 3, 3])
    np.testing.assert_array_equal(uniform.tree_params_.leaf_value, scaled.tree_params_.leaf_value)
    info = ModelAligner().fit(models, weights=[1, 1, 1, 5])
    np.testing.assert_allclose(info.weights_, [0.125, 0.125, 0.125, 0.625])


def test_naive_merge_is_the_plain_average(models):
    naive = merge_estimators(models, aligner="naive")
    expected = TreeParams.weighted_average([m.tree_params_ for m in models], [1] * 4)
    np.testing.assert_allclose(naive.tree_params_.split_weight, expected.split_weight)
    np.testing.assert_allclose(naive.tree_params_.leaf_value, expected.leaf_value)


@pytest.mark.parametrize("method", ["wm", "am"])
def test_refinement_never_lowers_the_objective(models, method):
    info0 = ModelAligner(method=method, max_iter=0).fit(models, X_CLF)
    info = ModelAligner(method=method).fit(models, X_CLF)
    assert info0.n_iter_ == 0 and info0.n_matchings_ == len(models) - 1
    assert info.objective_[0] == pytest.approx(info0.objective_[0])
    assert np.all(np.diff(info.objective_) >= -1e-9 * info.objective_[0])
    assert info.objective_[-1] >= info.objective_[0]
    assert info.converged_ and 1 <= info.n_iter_ <= 20
    assert info.n_matchings_ == len(models) - 1 + len(models) * info.n_iter_
    merged = merge_estimators(models, aligner=ModelAligner(method=method), X=X_CLF)
    assert merged.predict(X_CLF).shape == (len(X_CLF),)


def test_refinement_beats_the_reference_on_random_models():
    """Unrelated models: aligning to one reference is far from the joint optimum."""
    arch = get_architecture("oblivious", 2)
    rng = np.random.RandomState(0)
    params = [TreeParams(rng.randn(40, 2, 4), rng.randn(40, 2), rng.randn(40, 4, 2))
              for _ in range(5)]
    base = align_many(params, arch, max_iter=0)
    refined = align_many(params, arch, max_iter=50)
    assert refined.objective[-1] > 1.05 * base.objective[-1]
    assert refined.converged


def test_regressors_are_merged_in_a_common_target_scale():
    X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    reg = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=3, device="cpu",
                                    random_state=0).fit(X, y)
    p = reg.tree_params_
    # the same function with leaves in a 10 times larger standardization
    other = _with_params(reg, TreeParams(p.split_weight, p.split_bias, p.leaf_value / 10,
                                         p.additive / 10),
                         y_scale_=reg.y_scale_ * 10, y_mean_=reg.y_mean_)
    np.testing.assert_allclose(other.predict(X), reg.predict(X), rtol=1e-4)
    merged = merge_estimators([reg, _scrambled(other, 3)], weights=[1, 3])
    np.testing.assert_allclose(merged.predict(X), reg.predict(X), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(merged.y_scale_, reg.y_scale_ * 7.75)


def test_errors(models):
    a, b = models[:2]
    with pytest.raises(ValueError, match="at least two"):
        merge_estimators([a])
    with pytest.raises(ValueError, match="number of trees"):
        merge_estimators([a, b, _tiny(n_estimators=6)])
    with pytest.raises(ValueError, match="architecture"):
        merge_estimators([a, _tiny(arch="decision_list", n_estimators=12)])
    with pytest.raises(ValueError, match="weights"):
        merge_estimators([a, b], weights=[1, 2, 3])
    with pytest.raises(ValueError, match="weights"):
        merge_estimators([a, b], weights=[1, -1])
    with pytest.raises(ValueError, match="weights"):
        merge_estimators([a, b], weights=[0, 0])
    with pytest.raises(ValueError, match="needs data"):
        merge_estimators([a, b], aligner="am")
    with pytest.raises(TypeError, match="lam"):
        merge_estimators([a, b], lam=0.3)
    with pytest.raises(TypeError, match="list"):
        merge_estimators(a)
    with pytest.raises(TypeError, match="weights"):
        merge_estimators(a, b, weights=[1, 1])
    arch = a.architecture_
    with pytest.raises(ValueError, match="shape"):
        align_many([a.tree_params_, _tiny(n_estimators=6).tree_params_], arch)
    with pytest.raises(ValueError, match="tree outputs"):
        align_many([a.tree_params_, b.tree_params_], arch, method="am")


# ----------------------------------------------------------------------------
# start="identity": models that continued from one common model
# ----------------------------------------------------------------------------


def _near_copies(arch="oblivious", depth=3, K=4, noise=0.05):
    """K models that continued from one model: small perturbations of it, same basis."""
    base = _random_params_model(_tiny(arch, depth, epochs=1), seed=3).tree_params_
    rng = np.random.RandomState(0)
    return [TreeParams(base.split_weight + noise * rng.randn(*base.split_weight.shape),
                       base.split_bias + noise * rng.randn(*base.split_bias.shape),
                       base.leaf_value + noise * rng.randn(*base.leaf_value.shape))
            for _ in range(K)], get_architecture(arch, depth)


@pytest.mark.parametrize("arch", ["oblivious", "non_oblivious"])
def test_identity_start_is_checked_by_one_sweep(arch):
    params, a = _near_copies(arch)
    usual = align_many(params, a)
    short = align_many(params, a, start="identity")
    assert short.alignments == usual.alignments  # the same result ...
    assert short.n_matchings == len(params) < usual.n_matchings  # ... for one sweep: K, not 2K-1
    assert short.converged and short.n_iter == 1
    assert all(al == usual.alignments[0] for al in short.alignments)  # every one the identity


def test_identity_start_falls_back_when_a_model_is_in_another_basis():
    params, a = _near_copies()
    rng = np.random.RandomState(1)
    M = params[0].n_trees
    params[2] = params[2].permute_trees(rng.permutation(M)).apply_ops(random_ops(a, M, rng))
    usual = align_many(params, a)
    short = align_many(params, a, start="identity")
    assert short.alignments == usual.alignments  # the usual procedure's result ...
    assert short.n_matchings == usual.n_matchings + len(params)  # ... after the failed check
    merged = TreeParams.weighted_average(
        [al.apply(p) for al, p in zip(short.alignments, params)], short.weights)
    assert np.abs(merged.leaf_value - params[0].leaf_value).max() < 0.2  # realigned, not averaged

"""The fast inference path (issue 43): oblivious trees through monomials
(:class:`sktree_lmc.model._forward.MonomialPlan`) and the additive table through
``embedding_bag`` (:func:`sktree_lmc.model._forward.additive_chunked`).

Both must give the values of the reference path (leaf probabilities,
``predict_chunked(..., routing="leaves")``, and ``module.additive_term``) up to
float32 rounding, keep a row's prediction independent of the other rows of the
call, and leave the other architectures and the per-tree outputs unchanged.
"""

import copy

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax
from sklearn.datasets import make_classification

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor, get_architecture
from sktree_lmc.model._forward import (
    MAX_MONOMIAL_DEPTH,
    MonomialPlan,
    SoftTreeEnsembleModule,
    _route_forward,
    additive_chunked,
    inference_chunk_rows,
    monomial_coefficients,
    monomial_plan,
    predict_chunked,
)

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]


def _module(depth, n_trees=12, n_features=9, n_outputs=3, seed=0, scale=2.0, mask=0.5,
            n_additive=0, arch="oblivious"):
    """A module with trained-like magnitudes (sharp splits, large leaves) and, like
    ``max_features``, a random share ``mask`` of every tree's split weights exactly zero."""
    gen = torch.Generator().manual_seed(seed)
    module = SoftTreeEnsembleModule(get_architecture(arch, depth), n_trees, n_features,
                                    n_outputs, generator=gen, n_additive=n_additive)
    rng = np.random.default_rng(seed)
    keep = rng.random((n_trees, 1, n_features)) >= mask
    with torch.no_grad():
        module.split_weight.mul_(scale * torch.as_tensor(keep, dtype=torch.float32))
        module.leaf_value.mul_(10 * scale)
        if n_additive:
            module.additive.copy_(torch.as_tensor(rng.normal(size=(n_additive, n_outputs))))
    return module


def _rows(n, n_features, seed=1):
    return np.random.default_rng(seed).normal(scale=2.0, size=(n, n_features))


def _close(fast, ref):
    """Equal up to float32 rounding: relative to each output's scale and to the largest."""
    assert_allclose(fast, ref, rtol=1e-5, atol=2e-6 * np.abs(ref).max())


# -- the plan ---------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 6])
def test_plan_makes_every_monomial_once_from_rows_made_before(depth):
    plan = MonomialPlan(depth)
    assert plan.n_monomials == 2**depth - 1
    assert sorted(plan.order) == list(range(1, 2**depth))
    assert plan.order[:depth] == tuple(1 << d for d in range(depth))
    made = set(range(depth))
    for start, stop, node, dst in plan.products:
        assert set(range(start, stop)) <= made and node in made and node < depth
        for r in range(start, stop):  # a new monomial: the source times a node it lacks
            assert not plan.order[r] >> node & 1
            assert plan.order[dst + r - start] == plan.order[r] | 1 << node
        made |= set(range(dst, dst + stop - start))
    assert made == set(range(plan.n_monomials))
    assert len(plan.products) == max(0, 2 * depth - 3)


def test_the_plan_applies_to_oblivious_tables_alone():
    for name in ARCHS:
        for depth in (1, 2, 3, 5):
            plan = monomial_plan(get_architecture(name, depth))
            # depth 1: a single split, the oblivious table (but for the modified
            # decision list's fixed-zero leaf)
            if name == "oblivious" or (depth == 1 and name != "decision_list_modified"):
                assert isinstance(plan, MonomialPlan) and plan.depth == depth
            else:
                assert plan is None
    assert monomial_plan(get_architecture("oblivious", MAX_MONOMIAL_DEPTH + 1)) is None
    with pytest.raises(ValueError, match="depth"):
        MonomialPlan(0)


@pytest.mark.parametrize("depth", [1, 3, 5])
def test_coefficients_give_the_leaf_probability_contraction(depth):
    """Float64: the polynomial in ``u = sigmoid(z) - 1/2`` is the routed sum of leaf values."""
    rng = np.random.default_rng(depth)
    M, L, C = 4, 2**depth, 2
    leaf = torch.as_tensor(rng.normal(size=(M, L, C)))
    z = torch.as_tensor(rng.normal(scale=3.0, size=(depth, M, 50)))
    code = torch.as_tensor(np.asarray(get_architecture("oblivious", depth).code),
                           dtype=torch.float64)
    s = torch.sigmoid(z)
    mu = torch.ones((L, M, 50), dtype=torch.float64)
    for d in range(depth):
        mu = mu * torch.where(code[:, d, None, None] > 0, s[d], 1 - s[d])
    expected = torch.einsum("lmb,mlc->bc", mu, leaf)
    coef = monomial_coefficients(leaf)  # (M, L, C)
    u = s - 0.5
    terms = torch.ones((L, M, 50), dtype=torch.float64)
    for k in range(L):
        for d in range(depth):
            if k >> d & 1:
                terms[k] = terms[k] * u[d]
    assert_allclose(torch.einsum("kmb,mkc->bc", terms, coef), expected, rtol=1e-12, atol=1e-12)


def test_route_forward_dispatches_on_the_plan():
    plan = MonomialPlan(3)
    z = torch.randn(3, 4, 10)
    u, mono = _route_forward(z, plan, 8)
    assert mono.shape == (7, 4, 10)
    assert_allclose(u, torch.sigmoid(z) - 0.5, atol=1e-7)
    for r, k in enumerate(plan.order):
        expected = torch.ones(4, 10)
        for d in range(3):
            if k >> d & 1:
                expected = expected * u[d]
        assert_allclose(mono[r], expected, rtol=1e-6)


# -- the fast path against the reference --------------------------------------------------
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_monomials_equal_the_leaf_probabilities(depth, n_outputs):
    module = _module(depth, n_outputs=n_outputs, seed=depth)
    X = _rows(700, 9)
    fast = predict_chunked(module, X)
    assert_array_equal(fast, predict_chunked(module, X, routing="monomials"))
    ref = predict_chunked(module, X, routing="leaves")
    assert fast.dtype == np.float64 and fast.shape == (700, n_outputs)
    _close(fast, ref)
    with torch.no_grad():  # and the float64 training forward, as closely as the reference
        exact = module.double()(torch.as_tensor(X)).numpy()
    scale = np.abs(exact).max()
    assert np.abs(fast - exact).max() <= max(2.5 * np.abs(ref - exact).max(), 1e-6 * scale)


@pytest.mark.parametrize("depth", [10, 12])
def test_deep_trees_within_the_bound(depth):
    module = _module(depth, n_trees=3, seed=depth)
    X = _rows(130, 9)
    _close(predict_chunked(module, X), predict_chunked(module, X, routing="leaves"))


@pytest.mark.parametrize("name", ARCHS)
def test_other_architectures_and_tree_outputs_are_unchanged(name):
    module = _module(3, arch=name)
    X = _rows(300, 9)
    assert_array_equal(predict_chunked(module, X, "tree_outputs"),
                       predict_chunked(module, X, "tree_outputs", routing="leaves"))
    if name != "oblivious":
        assert_array_equal(predict_chunked(module, X), predict_chunked(module, X, routing="leaves"))
        with pytest.raises(ValueError, match="monomials"):
            predict_chunked(module, X, routing="monomials")
    with pytest.raises(ValueError, match="routing"):
        predict_chunked(module, X, routing="fast")


# -- row independence ---------------------------------------------------------------------
@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_row_does_not_depend_on_the_other_rows(n_threads):
    """Bit-identical, as the reference path: fixed-shape chunks, whatever the call."""
    module = _module(4, n_trees=64, n_outputs=2, n_additive=40)
    X = _rows(1500, 9)
    codes = np.random.default_rng(2).integers(0, 40, size=(1500, 6)).astype(np.float32)
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        whole = predict_chunked(module, X, codes=codes)
        B = inference_chunk_rows(module.arch, 64, monomials=True)
        assert B % 64 == 0
        for a, b in [(0, 1), (1, 2), (B - 1, B + 1), (7, 700), (1499, 1500), (3, 1500)]:
            assert_array_equal(predict_chunked(module, X[a:b], codes=codes[a:b]), whole[a:b])
        order = np.random.default_rng(3).permutation(1500)
        assert_array_equal(predict_chunked(module, X[order], codes=codes[order]), whole[order])
    finally:
        torch.set_num_threads(previous)


# -- the additive table -------------------------------------------------------------------
def test_additive_chunked_equals_the_additive_term():
    module = _module(2, n_additive=300, n_outputs=3)
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 300, size=(2100, 25)).astype(np.float32)
    with torch.no_grad():
        expected = module.additive_term(torch.as_tensor(codes)).numpy()
    out = additive_chunked(module, codes)
    assert out.dtype == np.float64 and out.shape == (2100, 3)
    _close(out, expected)
    assert_array_equal(additive_chunked(module, codes, chunk_rows=64), out)  # per row
    # the training-time scale of the table's rows is applied, as in additive_term
    module.register_buffer("additive_scale", torch.as_tensor(rng.random((300, 1)),
                                                             dtype=torch.float32))
    with torch.no_grad():
        _close(additive_chunked(module, codes),
               module.additive_term(torch.as_tensor(codes)).numpy())
    assert additive_chunked(module, codes[:0]).shape == (0, 3)


def test_codes_are_added_to_the_forward_output_only():
    module = _module(3, n_additive=50)
    X = _rows(200, 9)
    codes = np.random.default_rng(5).integers(0, 50, size=(200, 4)).astype(np.float32)
    assert_array_equal(predict_chunked(module, X, codes=codes),
                       predict_chunked(module, X) + additive_chunked(module, codes))
    assert_array_equal(predict_chunked(module, X, "tree_outputs", codes=codes),
                       predict_chunked(module, X, "tree_outputs"))
    with pytest.raises(ValueError, match="codes"):
        predict_chunked(module, X, codes=codes[:10])


@pytest.mark.parametrize("name", ARCHS)
def test_contrast_is_the_outputs_less_the_first(name):
    """``contrast=True`` (two outputs): ``[0, out_1 - out_0]`` from one row of the
    contraction, the additive term included; a ValueError where it does not apply."""
    module = _module(3, n_outputs=2, n_additive=40, arch=name)
    X = _rows(300, 9)
    codes = np.random.default_rng(6).integers(0, 40, size=(300, 3)).astype(np.float32)
    for kw in ({}, {"codes": codes}):
        full = predict_chunked(module, X, **kw)
        out = predict_chunked(module, X, contrast=True, **kw)
        assert out.shape == (300, 2) and (out[:, 0] == 0).all()
        _close(out[:, 1], full[:, 1] - full[:, 0])
    with pytest.raises(ValueError, match="contrast"):
        predict_chunked(_module(3, n_outputs=3), X, contrast=True)
    with pytest.raises(ValueError, match="contrast"):
        predict_chunked(module, X, "tree_outputs", contrast=True)


# -- the estimators -----------------------------------------------------------------------
def _reference_raw(est, X):
    """The estimator's raw output through the reference path: leaf probabilities and
    ``additive_term`` on the whole encoded input."""
    module = SoftTreeEnsembleModule.from_params(est.architecture_, est.tree_params_)
    Xe = est._encoded_input(X)
    F = est.tree_params_.split_weight.shape[2]
    raw = predict_chunked(module, Xe.X[:, :F], routing="leaves")
    if est.tree_params_.additive is not None:
        with torch.no_grad():
            raw = raw + module.additive_term(torch.as_tensor(Xe.codes)).numpy()
    return raw


def _sharpened(est, seed):
    """The fitted estimator with trained-like parameters: sharp splits, large leaves,
    a nonzero additive table (one epoch leaves it near zero)."""
    rng = np.random.default_rng(seed)
    p = est.get_tree_params()
    p.split_weight *= 4.0
    p.leaf_value = p.leaf_value * 20.0 + rng.normal(scale=0.2, size=p.leaf_value.shape)
    p.additive = rng.normal(scale=0.3, size=p.additive.shape)
    return copy.deepcopy(est).set_tree_params(p)


@pytest.fixture(scope="module")
def fitted():
    X, y = make_classification(n_samples=600, n_features=12, n_informative=6, n_classes=3,
                               random_state=0)
    common = dict(n_estimators=16, max_epochs=1, device="cpu", random_state=0,
                  teacher_weight=0.0, early_stopping=False)
    binary = SoftTreeEnsembleClassifier(**common).fit(X, y == 1)
    multi = SoftTreeEnsembleClassifier(**common).fit(X, y)
    reg = SoftTreeEnsembleRegressor(**common).fit(X, X[:, 0] + y)
    return X, [_sharpened(e, s) for s, e in enumerate((binary, multi, reg))]


def test_estimators_predict_as_through_the_reference_path(fitted):
    X, (binary, multi, reg) = fitted
    for clf in (binary, multi):
        assert clf.tree_params_.split_weight.shape[1] == 4  # the default: oblivious, depth 4
        assert (clf.tree_params_.split_weight == 0).any()  # max_features: masked features
        raw = _reference_raw(clf, X)
        proba = clf.predict_proba(X)
        assert_allclose(proba, softmax(raw, axis=1), rtol=1e-5, atol=1e-7)
        scores = raw[:, 1] - raw[:, 0] if raw.shape[1] == 2 else raw
        _close(clf.decision_function(X), scores)
        assert np.mean(clf.predict(X) == clf.classes_[np.argmax(raw, axis=1)]) > 0.99
    raw = _reference_raw(reg, X)
    _close(reg.predict(X), raw[:, 0] * reg.y_scale_[0] + reg.y_mean_[0])
    # the per-tree outputs keep the leaf probabilities
    module = SoftTreeEnsembleModule.from_params(multi.architecture_, multi.tree_params_)
    F = multi.tree_params_.split_weight.shape[2]
    assert_array_equal(multi.tree_outputs(X), predict_chunked(
        module, multi._encoded_input(X).X[:, :F], "tree_outputs", routing="leaves"))


def test_estimator_rows_do_not_depend_on_the_call(fitted):
    X, (binary, multi, _) = fitted
    for clf in (binary, multi):
        proba = clf.predict_proba(X)
        for i in (0, 1, 299, 599):
            assert_array_equal(clf.predict_proba(X[i : i + 1]), proba[i : i + 1])
        assert_array_equal(clf.predict_proba(X[::-1]), proba[::-1])


def test_bench_predict_smoke(tmp_path):
    from benchmarks import bench_predict

    (record,) = bench_predict.main(["--smoke", "--stages", "--out", str(tmp_path)])
    assert record["dataset"] == "smoke" and record["ours_cpu_rows_s"] > 0
    assert record["trees (kernel), profiled ms"] > 0 and record["table lookup, profiled ms"] > 0
    assert (tmp_path / "predict_smoke.csv").exists()

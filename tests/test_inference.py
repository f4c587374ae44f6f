"""The inference kernel (:func:`sktree_lmc.model._forward.predict_chunked`).

It serves every prediction method, ``tree_outputs`` (activation matching) and the
interpolation curves; it computes in float32 on fixed-size row chunks, so a row's result must
not depend on how rows are batched.
"""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor, get_architecture
from sktree_lmc.model._forward import (
    INFERENCE_CHUNK_ROWS,
    SoftTreeEnsembleModule,
    inference_chunk_rows,
    predict_chunked,
    reference_forward,
)

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]


def _module(name, depth, n_trees=6, n_features=5, n_outputs=3, seed=0, scale=2.0):
    gen = torch.Generator().manual_seed(seed)
    arch = get_architecture(name, depth)
    module = SoftTreeEnsembleModule(arch, n_trees, n_features, n_outputs, generator=gen)
    with torch.no_grad():  # trained-like magnitudes: sharp splits, large leaves
        module.split_weight.mul_(scale)
        module.leaf_value.mul_(10 * scale)
    return module


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("name", ARCHS)
def test_kernel_matches_the_float64_reference(name, depth):
    module = _module(name, depth)
    X = np.random.default_rng(1).normal(size=(300, 5))
    ref = reference_forward(module.arch, module.to_params(), X)  # float64, (B, M, C)
    trees = predict_chunked(module, X, "tree_outputs", chunk_rows=64)
    out = predict_chunked(module, X, "forward", chunk_rows=64)
    assert trees.dtype == out.dtype == np.float64
    assert trees.shape == (300, 6, 3) and out.shape == (300, 3)
    scale = np.abs(ref).max()
    assert_allclose(trees, ref, rtol=0, atol=1e-6 * scale)
    assert_allclose(out, ref.sum(axis=1), rtol=0, atol=1e-6 * np.abs(ref.sum(axis=1)).max())


def test_kernel_matches_the_training_forward():
    module = _module("non_oblivious", 3)
    X = np.random.default_rng(2).normal(size=(77, 5)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(X)).numpy()
        expected_trees = module.tree_outputs(torch.from_numpy(X)).numpy()
    assert_allclose(predict_chunked(module, X), expected, rtol=1e-5, atol=1e-5)
    assert_allclose(predict_chunked(module, X, "tree_outputs"), expected_trees,
                    rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(ARCHS),
    depth=st.integers(1, 4),
    n_rows=st.integers(1, 700),
    cuts=st.lists(st.integers(0, 700), max_size=6),
    chunk_rows=st.sampled_from([None, 64, 128, 256]),
    seed=st.integers(0, 2**16),
)
def test_property_rows_do_not_depend_on_the_batching(name, depth, n_rows, cuts, chunk_rows,
                                                     seed):
    module = _module(name, depth, seed=seed)
    X = np.random.default_rng(seed).normal(scale=3.0, size=(n_rows, 5))
    whole = predict_chunked(module, X, chunk_rows=chunk_rows)
    edges = sorted({0, n_rows, *(c % (n_rows + 1) for c in cuts)})
    parts = np.concatenate([predict_chunked(module, X[a:b], chunk_rows=chunk_rows)
                            for a, b in zip(edges[:-1], edges[1:])])
    # outputs reach |20|, where one float32 ulp is 2e-6: the documented contract is relative
    assert_allclose(parts, whole, rtol=1e-6, atol=1e-6)
    shuffled = np.random.default_rng(seed).permutation(n_rows)
    assert_allclose(predict_chunked(module, X[shuffled], chunk_rows=chunk_rows),
                    whole[shuffled], rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def big_call():
    """A fitted model and its predictions for 20,000 rows in one call."""
    X, y = make_classification(n_samples=20_000, n_features=44, n_informative=10,
                               random_state=0)
    est = SoftTreeEnsembleClassifier(arch="non_oblivious", n_estimators=64, depth=3,
                                     max_epochs=2, device="cpu", random_state=0)
    est.fit(X[:3000], y[:3000])
    return est, X, est.predict_proba(X), est.decision_function(X)


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.integers(0, 19_999), min_size=1, max_size=5, unique=True))
def test_property_a_row_alone_equals_the_row_in_a_20000_row_call(big_call, rows):
    est, X, proba, scores = big_call
    for i in rows:
        assert_allclose(est.predict_proba(X[i : i + 1]), proba[i : i + 1], rtol=0, atol=1e-6)
        assert_allclose(est.decision_function(X[i : i + 1]), scores[i : i + 1], rtol=1e-6,
                        atol=1e-6)
    assert_allclose(est.predict_proba(X[rows]), proba[rows], rtol=0, atol=1e-6)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_row_alone_is_bit_identical(big_call, n_threads):
    """Measured property of the fixed-shape chunks on the CPU (stronger than the documented
    1e-6): every row goes through the same kernels with the same shapes, so at a given number
    of threads a row alone gives the bits it gets in a 20,000-row call. Across numbers of
    threads the kernels may split their sums otherwise (on some CPUs they do): equal up to
    float32 rounding."""
    est, X, proba, scores = big_call
    est = copy.copy(est).set_params(n_threads=n_threads)  # fitted state kept
    proba_n, scores_n = est.predict_proba(X), est.decision_function(X)
    assert_allclose(proba_n, proba, rtol=0, atol=1e-6)
    for i in (0, 1, 127, 128, 12_345, 19_999):
        assert_array_equal(est.predict_proba(X[i : i + 1]), proba_n[i : i + 1])
        assert_array_equal(est.decision_function(X[i : i + 1]), scores_n[i : i + 1])


def test_input_layout_and_dtype_do_not_matter():
    module = _module("oblivious", 3)
    X = np.random.default_rng(3).normal(size=(150, 5)).astype(np.float32)
    expected = predict_chunked(module, X)
    readonly = X.copy()
    readonly.flags.writeable = False
    assert_array_equal(predict_chunked(module, readonly), expected)
    assert_array_equal(predict_chunked(module, np.asfortranarray(X)), expected)
    assert_array_equal(predict_chunked(module, X.astype(np.float64)), expected)
    assert_array_equal(predict_chunked(module, X[::-1])[::-1], expected)


def test_regressor_and_tree_outputs_go_through_the_kernel():
    X, y = make_classification(n_samples=200, n_features=6, random_state=0)
    reg = SoftTreeEnsembleRegressor(n_estimators=8, max_epochs=2, device="cpu",
                                    random_state=0).fit(X, y.astype(float))
    module = SoftTreeEnsembleModule.from_params(reg.architecture_, reg.tree_params_)
    Xe = reg._encoded_input(X)  # the trees see the encoded input; the additive its codes
    F = reg.tree_params_.split_weight.shape[2]
    raw = predict_chunked(module, Xe.X[:, :F])  # the kernel: the trees alone
    with torch.no_grad():
        raw = raw + module.additive_term(torch.as_tensor(Xe.codes)).numpy()
    assert_allclose(reg.predict(X), raw[:, 0] * reg.y_scale_[0] + reg.y_mean_[0], rtol=1e-6)
    assert_array_equal(reg.tree_outputs(X), predict_chunked(module, Xe.X[:, :F], "tree_outputs"))


def test_chunk_rows_are_powers_of_two_within_bounds():
    low, high = INFERENCE_CHUNK_ROWS["cpu"]
    for name in ARCHS:
        for depth in (1, 2, 4, 6, 8):
            for n_trees in (1, 16, 256, 2048):
                rows = inference_chunk_rows(get_architecture(name, depth), n_trees)
                assert low <= rows <= high and rows & (rows - 1) == 0
    # M=256, D=2: a few hundred rows; deep trees: the lower bound
    assert inference_chunk_rows(get_architecture("non_oblivious", 2), 256) == 256
    assert inference_chunk_rows(get_architecture("non_oblivious", 6), 256) == low


def test_bad_arguments_are_rejected():
    module = _module("oblivious", 2)
    with pytest.raises(ValueError, match="output"):
        predict_chunked(module, np.zeros((2, 5)), output="leaf_probabilities")
    with pytest.raises(ValueError, match="shape"):
        predict_chunked(module, np.zeros((2, 4)))
    for bad in (0, -64, 1.5):
        with pytest.raises(ValueError, match="chunk_rows"):
            predict_chunked(module, np.zeros((2, 5)), chunk_rows=bad)


def test_empty_input_gives_an_empty_result():
    module = _module("oblivious", 2)
    assert predict_chunked(module, np.zeros((0, 5))).shape == (0, 3)

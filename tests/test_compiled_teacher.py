"""The gradient-boosted teacher's trees grown by the compiled kernel
(:mod:`sktree_lmc.training._boosting_numba`, the numba engine) are the NumPy and
SciPy path's (the torch engine), bit for bit: splits, thresholds, leaf values,
the constant and the gains."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sktree_lmc.model import _kernel
from sktree_lmc.training import _boosting
from sktree_lmc.training._boosting import (
    BoostingSite,
    LocalSites,
    grow_oblivious_trees,
    grow_shared_trees,
)

pytest.importorskip("numba")


def _rows(n, kind, seed, n_outputs):
    """Continuous, discrete, constant, sparse-valued and missing (NaN) columns."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 5, n), np.zeros(n),
                         rng.exponential(size=n), (rng.random(n) < 0.1) * rng.normal(size=n),
                         rng.normal(size=n).round(1)])
    X[rng.random(n) < 0.15, 5] = np.nan  # missing values: the last bin
    signal = X[:, 0] + (X[:, 1] > 2) - X[:, 3] + 0.5 * rng.normal(size=n)
    if kind == "softmax":
        target = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_outputs + 1)[1:-1]))
    else:
        target = np.column_stack([signal, X[:, 1] * 2, -signal][:n_outputs])
    return X, target, rng.uniform(0.2, 3.0, n)


def _both(grow, *args, **kw):
    """``(reference, compiled)``: ``grow(*args, gains=..., **kw)`` with the torch
    engine and with the numba engine, the compiled kernel's calls counted."""
    out = []
    for name in ("torch", "numba"):
        gains = np.full((kw["n_trees"], kw["depth"]), np.nan)
        with _kernel.engine(name):
            out.append(grow(*args, gains=gains, **kw) + (gains,))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert_array_equal(x, y)
        assert np.asarray(x).dtype == np.asarray(y).dtype


@pytest.mark.parametrize("kind, n_outputs", [("softmax", 2), ("softmax", 3), ("squared", 1),
                                             ("squared", 3), ("absolute_error", 1)])
def test_the_compiled_teacher_grows_the_reference_trees(monkeypatch, kind, n_outputs):
    X, target, w = _rows(700, kind, 0, n_outputs)
    tr, va = np.arange(600), np.arange(600, 700)
    mask = np.random.default_rng(1).random((30, X.shape[1])) < 0.7
    mask[3] = False  # a tree that may split on nothing: a constant
    calls = []
    original = _boosting._compiled_growth

    def spy(sites):
        found = original(sites)
        calls.append(found is not None)
        return found

    monkeypatch.setattr(_boosting, "_compiled_growth", spy)
    ref, new = _both(grow_oblivious_trees, X[tr], target[tr], w[tr], loss=kind, n_trees=30,
                     depth=4, n_outputs=n_outputs, mask=mask, learning_rate=0.7,
                     validation=(X[va], target[va], w[va]))
    assert calls == [False, True]
    _same(ref, new)
    assert (new[1] >= 0).any() and (new[1][3] < 0).all()
    assert (new[4] > 0).any()


@pytest.mark.parametrize("depth", [1, 2, 6])
def test_depths_and_bins_over_uint8(depth):
    """Depths 1 to 6; 600 bins (int32 codes, more than
    one byte) and 3 bins; unweighted rows."""
    X, target, _ = _rows(900, "softmax", 2, 2)
    X[:, 0] = np.random.default_rng(3).permutation(900) * 0.5  # 900 distinct values
    for max_bins in (600, 3):
        ref, new = _both(grow_oblivious_trees, X, target, np.ones(900), loss="softmax",
                         n_trees=12, depth=depth, n_outputs=2, max_bins=max_bins)
        _same(ref, new)


def test_no_feature_and_no_row_splits():
    """Every column constant: no split anywhere, the same constant trees; no
    column at all: the same."""
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 200)
    for X in (np.ones((200, 3)), np.zeros((200, 0))):
        ref, new = _both(grow_oblivious_trees, X, y, np.ones(200), loss="softmax", n_trees=5,
                         depth=3, n_outputs=2)
        _same(ref, new)
        assert (new[1] == -1).all()


def test_a_sites_own_trees_and_several_sites():
    """:meth:`BoostingSite.grow` (one site: the kernel) and several sites (the
    sums of their histograms: the reference path under either engine)."""
    X, target, w = _rows(500, "softmax", 5, 3)
    grown = []
    for name in ("torch", "numba"):
        with _kernel.engine(name):
            grown.append(BoostingSite(X, target, w, loss="softmax", n_outputs=3).grow(10, 3))
    for a, b in zip(*grown):
        if isinstance(a, tuple):
            _same(a, b)
        else:
            assert_array_equal(a, b)
    parts = [(X[r], target[r], w[r]) for r in np.array_split(np.arange(500), 2)]
    ref, new = _both(lambda **kw: grow_shared_trees(LocalSites(
        [BoostingSite(*p, loss="softmax", n_outputs=3) for p in parts], pack=False), **kw),
        loss="softmax", n_trees=6, depth=3, n_outputs=3)
    _same(ref, new)


def test_ties_take_the_first_split():
    """Two identical columns: every gain ties, and both paths split on the
    first of them (``np.argmax``'s first maximum)."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=300)
    X = np.column_stack([x, x, x])
    y = (x + 0.3 * rng.normal(size=300) > 0).astype(int)
    ref, new = _both(grow_oblivious_trees, X, y, np.ones(300), loss="softmax", n_trees=6,
                     depth=3, n_outputs=2)
    _same(ref, new)
    assert set(np.unique(new[1])) <= {-1, 0}

"""The fast gradient-boosted teacher (issue 43): the same trees as before, bit for
bit, one pass per level for all histograms, and what a federated site sends."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc.training import _boosting
from sktree_lmc.training._boosting import (
    BoostingSite,
    LocalSites,
    _cell_sums,
    _cumsum,
    _gradients,
    _mean_loss,
    _merge_thresholds,
    grow_oblivious_trees,
    grow_shared_trees,
    oblivious_output,
)
from sktree_lmc.training._losses import as_loss

# -- the implementation before issue 43, written out as it was ----------------------------


def _reference_trees(parts, *, loss, n_trees, depth, n_outputs, mask=None, lr=0.1, l2=1.0,
                     max_bins=255):
    """Trees grown over the sites ``parts`` (``(X, target, weight, validation)``)
    as :func:`grow_shared_trees` grew them before: one ``np.bincount`` per
    output and statistic over the (row, feature) pairs, row after row; the
    right children by subtraction, one output sent for two classes; the
    gradients, Hessians and validation losses of the loss objects; the sites'
    sums added in site order. The thresholds and the constant come from the
    (unchanged) summaries."""
    loss = as_loss(loss)
    sites = [BoostingSite(X, t, w, loss=loss, n_outputs=n_outputs, validation=v)
             for X, t, w, v in parts]
    edges = _merge_thresholds([s.summary(max_bins) for s in sites], max_bins)
    F = len(edges)
    B = max(1, max((len(e) for e in edges), default=0) + 1)
    sums = [s.base_sums() for s in sites]
    total, weight_sum = sum(s for s, _ in sums), sum(w for _, w in sums)
    scale = sum(len(s.X) for s in sites) / weight_sum
    base = loss.initial_prediction(total, weight_sum)
    valid = np.arange(B)[None, :] < np.array([len(e) for e in edges])[:, None]
    mask = np.ones((n_trees, F), dtype=bool) if mask is None else mask
    features = np.full((n_trees, depth), -1, dtype=np.int64)
    thresholds = np.zeros((n_trees, depth))
    leaves = np.zeros((n_trees, 1 << depth, n_outputs))
    state = []
    for s in sites:
        codes = np.stack([np.searchsorted(edges[f], s.X[:, f], side="left")
                          for f in range(F)], axis=1).reshape(len(s.X), F)
        val = s.validation
        state.append(dict(codes=codes, w=s.weight * scale, raw=np.tile(base, (len(s.X), 1)),
                          raw_val=None if val is None else np.tile(base, (len(val[0]), 1))))
    n_sent = loss.histogram_outputs(n_outputs)

    def histograms(s, st, n_nodes, left_only):
        node, rows = st["node"], slice(None)
        if left_only:
            rows = (node & 1) == 0
            node, n_nodes = node[rows] >> 1, n_nodes // 2
        G = np.zeros((n_nodes, F, B, n_sent))
        H = np.zeros_like(G)
        idx = ((node[:, None] * F + np.arange(F)[None, :]) * B + st["codes"][rows]).ravel()
        for c in range(n_sent):
            G[..., c] = np.bincount(idx, np.repeat(st["g"][rows][:, c], F),
                                    n_nodes * F * B).reshape(n_nodes, F, B)
            H[..., c] = np.bincount(idx, np.repeat(st["h"][rows][:, c], F),
                                    n_nodes * F * B).reshape(n_nodes, F, B)
        return G, H

    def summed(pairs):
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    best_loss = best_m = None
    for m in range(n_trees + 1):
        loss_sum = val_weight = 0.0
        for s, st in zip(sites, state):
            if m > 0:
                st["raw"] += leaves[m - 1][st["node"]]
                if s.validation is not None:
                    st["raw_val"] += oblivious_output(s.validation[0], 0.0, features[m - 1][None],
                                                      thresholds[m - 1][None],
                                                      leaves[m - 1][None])
            st["g"], st["h"] = loss.gradients(st["raw"], s.target, st["w"])
            st["node"] = np.zeros(len(s.X), dtype=np.int64)
            if s.validation is not None:
                _, t_val, w_val = s.validation
                loss_sum += loss.mean(st["raw_val"], t_val, w_val) * float(w_val.sum())
                val_weight += float(w_val.sum())
        if val_weight > 0 and (best_loss is None or loss_sum / val_weight < best_loss):
            best_loss, best_m = loss_sum / val_weight, m
        if m == n_trees:
            break
        parent = None
        for d in range(depth):
            n_nodes = 1 << d
            G, H = summed([histograms(s, st, n_nodes, d > 0) for s, st in zip(sites, state)])
            if d > 0:  # the right children: parent minus left
                both = []
                for P, L in zip(parent, (G, H)):
                    out = np.empty((2 * len(P),) + P.shape[1:])
                    out[0::2], out[1::2] = L, P - L
                    both.append(out)
                G, H = both
            parent = (G, H)
            if G.shape[-1] < n_outputs:
                G, H = np.concatenate([G, -G], axis=-1), np.concatenate([H, H], axis=-1)
            GL, HL = G.cumsum(axis=2), H.cumsum(axis=2)
            GT, HT = GL[:, :, -1:], HL[:, :, -1:]
            gain = np.zeros(G.shape[:3])
            for c in range(G.shape[3]):
                gain += (GL[..., c] ** 2 / (HL[..., c] + l2)
                         + (GT[..., c] - GL[..., c]) ** 2 / (HT[..., c] - HL[..., c] + l2))
            gain = gain.sum(axis=0)
            gain[~valid] = -np.inf
            gain[~mask[m]] = -np.inf
            f, k = -1, 0
            if np.isfinite(gain).any():
                f, k = np.unravel_index(int(np.argmax(gain)), gain.shape)
                features[m, d], thresholds[m, d] = f, edges[f][k]
            for st in state:
                st["node"] = st["node"] * 2 + ((st["codes"][:, f] > k) if f >= 0 else 0)
        G, H = summed([(np.stack([np.bincount(st["node"], st["g"][:, c], 1 << depth)
                                  for c in range(n_outputs)], axis=1),
                        np.stack([np.bincount(st["node"], st["h"][:, c], 1 << depth)
                                  for c in range(n_outputs)], axis=1)) for st in state])
        leaves[m] = -lr * G / (H + l2)
    if best_m is not None:
        features[best_m:], thresholds[best_m:], leaves[best_m:] = -1, 0.0, 0.0
    return base, features, thresholds, leaves


def _rows(n, kind, seed, n_outputs=2):
    """Continuous, discrete and constant columns; the targets of ``kind``."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 5, n), rng.exponential(size=n),
                         np.zeros(n), rng.normal(size=n).round(1)])
    signal = X[:, 0] + (X[:, 1] > 2) - X[:, 2] + 0.5 * rng.normal(size=n)
    if kind == "softmax":
        target = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_outputs + 1)[1:-1]))
    elif kind in ("squared", "absolute_error"):
        target = np.column_stack([signal, X[:, 4] * 2][:n_outputs])
    else:  # poisson
        target = rng.poisson(np.exp(0.3 * signal))[:, None].astype(float)
    return X, target, rng.uniform(0.2, 3.0, n)


def _same(a, b):
    for x, y in zip(a, b):
        assert_array_equal(x, y)


CASES = [("softmax", 2), ("softmax", 4), ("squared", 1), ("squared", 2),
         ("absolute_error", 1), ("poisson", 1)]


@pytest.mark.parametrize("kind, n_outputs", CASES)
def test_one_site_grows_the_reference_trees_bit_for_bit(kind, n_outputs):
    X, target, w = _rows(500, kind, 0, n_outputs)
    tr, va = np.arange(400), np.arange(400, 500)
    kw = dict(loss=kind, n_trees=25, depth=3, n_outputs=n_outputs)
    # sample weights, per-tree feature subsets, a validation prefix shorter than all
    # trees (large steps overfit)
    mask = np.random.default_rng(1).random((25, 5)) < 0.7
    new = grow_oblivious_trees(X[tr], target[tr], w[tr], mask=mask, learning_rate=0.7,
                               validation=(X[va], target[va], w[va]), **kw)
    old = _reference_trees([(X[tr], target[tr], w[tr], (X[va], target[va], w[va]))],
                           mask=mask, lr=0.7, **kw)
    _same(new, old)
    assert 0 < (new[1] >= 0).any(axis=1).sum() < 25
    # unweighted, no validation rows, 16 bins
    new = grow_oblivious_trees(X, target, np.ones(500), max_bins=15, **kw)
    _same(new, _reference_trees([(X, target, np.ones(500), None)], max_bins=15, **kw))


@pytest.mark.parametrize("kind, n_outputs", [("softmax", 2), ("softmax", 3), ("squared", 1)])
def test_sites_grow_the_reference_trees_and_the_trees_of_their_union(kind, n_outputs):
    """Three sites: the packed histograms give the dense ones' trees bit for
    bit; with exact thresholds (few distinct values) they are the trees of
    one site with all the rows, up to the rounding of the sums."""
    X, target, w = _rows(600, kind, 2, n_outputs)
    X = X.round(0)  # at most max_bins + 1 distinct values: the same thresholds
    val = np.arange(600) % 5 == 0
    kw = dict(loss=kind, n_trees=20, depth=3, n_outputs=n_outputs)
    parts = [(X[r[~val[r]]], target[r[~val[r]]], w[r[~val[r]]],
              (X[r[val[r]]], target[r[val[r]]], w[r[val[r]]]))
             for r in np.array_split(np.arange(600), 3)]
    sites = LocalSites([BoostingSite(*p[:3], loss=kind, n_outputs=n_outputs, validation=p[3])
                        for p in parts])
    shared = grow_shared_trees(sites, **kw)
    _same(shared, _reference_trees(parts, **kw))
    # what they sent: fewer bytes than the dense histograms (and the same trees unpacked)
    dense = LocalSites([BoostingSite(*p[:3], loss=kind, n_outputs=n_outputs, validation=p[3])
                        for p in parts], pack=False)
    _same(grow_shared_trees(dense, **kw), shared)
    assert 0 < sites.bytes_received
    union = grow_oblivious_trees(X[~val], target[~val], w[~val], validation=(
        X[val], target[val], w[val]), **kw)
    assert_array_equal(shared[1], union[1])
    assert_array_equal(shared[2], union[2])
    assert_allclose(shared[3], union[3], rtol=1e-9, atol=1e-12)


def test_packed_histograms_are_the_histograms():
    X, target, w = _rows(300, "squared", 3, 1)
    site = BoostingSite(X, target, np.ones(300), loss="squared", n_outputs=1)
    edges = _merge_thresholds([site.summary(31)], 31)
    site.start(edges, np.zeros(1))
    site.add_tree(None)
    site.split(0, 10)
    site.split(1, 2)
    present = _boosting._bins_present(edges, site.n_bins)
    for left in (False, True):
        G, H = site.histograms(0, 5, 4, left)
        packed = site.packed_histograms(0, 5, 4, left)
        _same(_boosting._unpacked(packed, present, len(G)), (G, H))
        # unit weights, squared error: the Hessians are counts, sent as small integers
        assert packed[2].dtype == np.uint8 and packed[1].dtype == np.float64
        assert len(packed[1]) == (H > 0).any(axis=-1).sum() < G[..., 0].size
    G32 = site.packed_histograms(0, 5, 4, True, None, "float32")[1]
    assert G32.dtype == np.float32


def test_float32_histograms_and_the_bad_dtype():
    X, target, w = _rows(400, "softmax", 4)
    sites = [BoostingSite(X[r], target[r], w[r], loss="softmax", n_outputs=2)
             for r in np.array_split(np.arange(400), 2)]
    kw = dict(loss="softmax", n_trees=10, depth=3, n_outputs=2)
    exact, half = LocalSites(sites), LocalSites(sites)
    a = grow_shared_trees(exact, **kw)
    b = grow_shared_trees(half, histogram_dtype="float32", **kw)
    assert half.bytes_received < exact.bytes_received
    assert_array_equal(a[1], b[1])  # here no gain is within float32 rounding of another
    assert_allclose(a[3], b[3], rtol=1e-12)  # leaf sums in float64 either way
    with pytest.raises(ValueError, match="histogram_dtype"):
        grow_shared_trees(LocalSites(sites), histogram_dtype="float16", **kw)


@pytest.mark.parametrize("kernel", [True, False])
def test_cell_sums_are_the_bincount_sums(monkeypatch, kernel):
    if not kernel:  # the public scipy.sparse product, where the private kernel is missing
        monkeypatch.setattr(_boosting, "_csc_matvecs", None)
    rng = np.random.default_rng(0)
    cells = np.sort(rng.choice(40, size=(1000, 3)), axis=1) + np.arange(3) * 40
    cells[:, 0] = rng.integers(0, 2, 1000)  # long runs of one cell
    values = rng.normal(size=(1000, 4)) * 10.0 ** rng.integers(-8, 8, size=(1000, 4))
    out = _cell_sums(cells, values, 130)
    for i in range(4):
        assert_array_equal(out[:, i], np.bincount(cells.ravel(), np.repeat(values[:, i], 3), 130))
    assert _cell_sums(cells[:0], values[:0], 5).shape == (5, 4)


def test_cumsum_is_numpys():
    a = np.random.default_rng(0).normal(size=(3, 5, 70_000)) * 1e6
    assert_array_equal(_cumsum(a), a.cumsum(axis=-1))
    a.flags.writeable = False
    assert_array_equal(_cumsum(a[..., :10]), a[..., :10].cumsum(axis=-1))


@pytest.mark.parametrize("kind, n_outputs", CASES)
def test_gradients_and_validation_losses_are_the_losses(kind, n_outputs):
    rng = np.random.default_rng(5)
    _, target, w = _rows(300, kind, 5, n_outputs)
    raw = rng.normal(size=(n_outputs, 300)) * 3
    loss = as_loss(kind)
    onehot = None
    if kind == "softmax" and n_outputs == 2:
        onehot = (np.arange(2)[:, None] == target[None, :]) * 1.0
    stats = _gradients(loss, raw, target, w, onehot)
    g, h = loss.gradients(np.ascontiguousarray(raw.T), target, w)
    assert_array_equal(stats[:, 0::2], g)
    assert_array_equal(stats[:, 1::2], h)
    assert _mean_loss(loss, raw, target, w) == loss.mean(np.ascontiguousarray(raw.T), target, w)


def test_feature_blocks_grow_the_same_trees(monkeypatch):
    """Histograms in blocks of features (the client's, bounding its cells, and a
    site's, bounding its rows x features): the same trees."""
    X, target, w = _rows(300, "softmax", 6, 3)
    parts = [(X[r], target[r], w[r], None) for r in np.array_split(np.arange(300), 2)]
    # 256 bins: the client asks for one feature at a time; 8 bins: for all five, and a
    # site sums them two features at a time at the root (700 // 300 rows)
    for max_bins in (255, 7):
        kw = dict(loss="softmax", n_trees=8, depth=3, n_outputs=3, max_bins=max_bins)
        old = _reference_trees([(X, target, w, None)], **kw)
        shared_old = _reference_trees(parts, **kw)
        with monkeypatch.context() as patch:
            patch.setattr(_boosting, "_BLOCK_ENTRIES", 700)
            _same(grow_oblivious_trees(X, target, w, **kw), old)
            sites = [BoostingSite(*p[:3], loss="softmax", n_outputs=3) for p in parts]
            _same(grow_shared_trees(LocalSites(sites), **kw), shared_old)


@settings(max_examples=40, deadline=None)
@given(strategies.lists(strategies.sampled_from([0.0, -0.0, 1.5, -2.0, 3.25, 1e-300, 7.0])
                        | strategies.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60),
       strategies.integers(1, 8), strategies.booleans())
def test_the_summary_sorts_once_for_np_unique_and_np_quantile(values, max_bins, nan):
    """A site's per-feature summary (one sort for the distinct values and the quantiles)
    equals ``np.unique`` and ``np.quantile``, bit for bit, with repeated values, signed
    zeros and a feature holding a NaN (NumPy's own path)."""
    x = np.array(values, dtype=np.float64)
    X = np.stack([x, x[::-1].copy()], axis=1)
    if nan:
        X[0, 1] = np.nan
    site = BoostingSite(X, np.zeros(len(x), dtype=int), np.ones(len(x)), loss="softmax",
                        n_outputs=2)
    summary, n = site.summary(max_bins)
    assert n == len(x)
    levels = np.linspace(0, 1, max_bins + 2)
    for f, (distinct, quantiles) in enumerate(summary):
        expected = np.unique(X[:, f])
        if len(expected) <= max_bins + 1:
            assert_array_equal(distinct, expected)
            assert np.array_equal(np.signbit(distinct), np.signbit(expected))
        else:
            assert distinct is None
        assert_array_equal(quantiles, np.quantile(X[:, f], levels))

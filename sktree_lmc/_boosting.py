"""A gradient-boosted start of the trees (``split_init="boosting"``).

Before gradient descent, the ensemble is grown the way gradient-boosted trees
are (Friedman 2001; the histogram method of LightGBM and scikit-learn's
``HistGradientBoosting``): tree after tree, each one a Newton step on the
loss of the trees before it. Every tree is *oblivious* (CatBoost's symmetric
trees): one (feature, threshold) pair per depth level, chosen to maximize the
summed second-order gain over all the level's nodes, then one Newton leaf
value per leaf and output, shrunk by :data:`BOOSTING_LEARNING_RATE`. Splits
are searched on at most :data:`BOOSTING_MAX_BINS` quantile thresholds per
encoded feature, in histograms of gradients and Hessians over all nodes and
features at once (one ``np.bincount`` per level and output; no loop over rows
or candidate thresholds).

The grown trees become the soft trees' starting parameters: a level's split is
the axis-aligned logit ``slope * (threshold - x_f) / std(x_f)`` (left below
the threshold), sharp enough that the soft tree computes the boosted one
(:data:`BOOSTING_SLOPE`), on top of the uniform start of the weights, so the
oblique directions stay trainable. Non-oblivious perfect trees get the same
split at every node of a level (an oblivious tree is one of them). Gradient
descent then continues from this start.

Nothing here imports the estimators.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["boosted_start", "grow_oblivious_trees", "oblivious_output", "BOOSTING_ARCHITECTURES"]

#: Shrinkage of every tree's Newton step: the default of scikit-learn's
#: ``HistGradientBoosting`` and of XGBoost's ``eta`` is 0.1 and 0.3.
BOOSTING_LEARNING_RATE = 0.1
#: L2 penalty on the leaf values in the gain and the Newton steps (XGBoost's
#: default ``lambda``).
BOOSTING_L2 = 1.0
#: Thresholds per encoded feature (``HistGradientBoosting``'s ``max_bins``).
BOOSTING_MAX_BINS = 255
#: Rows the thresholds are computed from (``HistGradientBoosting`` bins on a
#: subsample of 200,000 rows too).
BOOSTING_BIN_ROWS = 200_000
#: Slope of a boosted split, per standard deviation of its feature: 10 % to
#: 90 % over 0.022 standard deviations, a hard threshold for all but the
#: rows at it. Measured on electricity and eye_movements (seed 0, 10,000
#: rows), the soft trees at slopes 20, 60 and 200 reached 81.1, 82.0 and
#: 82.4 % (electricity) of the boosted trees' 82.6 % before training.
BOOSTING_SLOPE = 200.0
#: Entries of the (rows x features) code block histogrammed at once.
_BLOCK_ENTRIES = 1 << 22
#: Architectures whose trees can hold an oblivious tree.
BOOSTING_ARCHITECTURES = ("oblivious", "non_oblivious")


def _thresholds(x, max_bins):
    """Candidate thresholds of one column: midpoints between its distinct
    values, or its quantiles when it has more than ``max_bins + 1``."""
    values = np.unique(x)
    if len(values) <= max_bins + 1:
        return (values[1:] + values[:-1]) / 2
    levels = np.linspace(0, 1, max_bins + 2)[1:-1]
    return np.unique(np.quantile(x, levels))


def _gradients(kind, raw, target, weight):
    """Gradient and Hessian (per row and output) of the loss at ``raw``.

    ``"softmax"``: cross-entropy of ``softmax(raw)`` with int targets; the
    diagonal Hessian ``p (1 - p)`` is scaled by ``C / (C - 1)`` (Friedman's
    factor; for two classes the leaves' logit difference then takes the exact
    Newton step). ``"squared"``: ``(raw - target)**2 / 2`` per output.
    """
    if kind == "softmax":
        z = raw - raw.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        C = raw.shape[1]
        g = p.copy()
        g[np.arange(len(target)), target] -= 1.0
        h = p * (1.0 - p) * (C / max(C - 1, 1))
    else:
        g = raw - target
        h = np.ones_like(raw)
    return g * weight[:, None], np.maximum(h, 1e-6) * weight[:, None]


def _base_score(kind, target, weight, n_outputs):
    """The constant start: log class shares (centered), or the weighted mean."""
    if kind == "softmax":
        share = np.bincount(target, weights=weight, minlength=n_outputs) / weight.sum()
        logp = np.log(np.maximum(share, 1e-12))
        return logp - logp.mean()
    return np.average(target, axis=0, weights=weight)


def _loss(kind, raw, target, weight):
    """Weighted mean loss of the raw outputs (cross-entropy or half squared error)."""
    if kind == "softmax":
        z = raw - raw.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        per_row = -logp[np.arange(len(target)), target]
    else:
        per_row = 0.5 * ((raw - target) ** 2).sum(axis=1)
    return float(np.average(per_row, weights=weight)) if weight.sum() > 0 else 0.0


def grow_oblivious_trees(X, target, weight, *, kind, n_trees, depth, n_outputs,
                         mask=None, learning_rate=BOOSTING_LEARNING_RATE, l2=BOOSTING_L2,
                         max_bins=BOOSTING_MAX_BINS, generator=None, validation=None):
    """Grow ``n_trees`` oblivious trees of ``depth`` levels by gradient boosting.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Encoded training rows.
    target : ndarray
        Int class indices of shape (n_samples,) (``kind="softmax"``) or float
        targets of shape (n_samples, n_outputs) (``kind="squared"``).
    weight : ndarray of shape (n_samples,)
        Sample weights (nonnegative).
    kind : {"softmax", "squared"}
    n_trees, depth, n_outputs : int
    mask : ndarray of bool of shape (n_trees, n_features) or None
        The features each tree may split on (None: all).
    learning_rate, l2 : float
        Shrinkage of the leaf values and their L2 penalty.
    max_bins : int
        Thresholds per feature.
    generator : torch.Generator or None
        Draws the rows the thresholds come from when there are more than
        :data:`BOOSTING_BIN_ROWS`.
    validation : tuple or None
        ``(X_val, target_val, weight_val)``, rows the trees are not grown on.
        All ``n_trees`` trees are grown, and the shortest prefix of them with
        the least loss on these rows is kept: the trees after it are dropped
        (feature -1 at every level, zero leaves). None: every tree is kept.

    Returns
    -------
    base : ndarray of shape (n_outputs,)
        The constant the trees add to.
    features : ndarray of int of shape (n_trees, depth)
        The feature of every level (-1: no split gains; the level sends
        every row left).
    thresholds : ndarray of shape (n_trees, depth)
        A row goes right at a level when its value is above the threshold.
    leaves : ndarray of shape (n_trees, 2**depth, n_outputs)
        Leaf values; leaf ``sum_d right_d * 2**(depth - 1 - d)``.
    """
    X = np.asarray(X, dtype=np.float64)
    n, F = X.shape
    weight = np.asarray(weight, dtype=np.float64)
    rows = np.arange(n)
    if n > BOOSTING_BIN_ROWS:
        rows = torch.randperm(n, generator=generator)[:BOOSTING_BIN_ROWS].numpy()
    edges = [_thresholds(X[rows, f], max_bins) for f in range(F)]
    n_bins = max(1, max((len(e) for e in edges), default=0) + 1)
    codes = np.empty((n, F), dtype=np.int32)
    for f in range(F):
        codes[:, f] = np.searchsorted(edges[f], X[:, f], side="left")
    # a split "after bin k" exists for k < len(edges[f]); others never win
    valid = np.arange(n_bins)[None, :] < np.array([len(e) for e in edges])[:, None]
    if mask is None:
        mask = np.ones((n_trees, F), dtype=bool)
    base = _base_score(kind, target, weight, n_outputs)
    raw = np.tile(base, (n, 1))
    features = np.full((n_trees, depth), -1, dtype=np.int64)
    thresholds = np.zeros((n_trees, depth))
    leaves = np.zeros((n_trees, 1 << depth, n_outputs))
    block = max(1, _BLOCK_ENTRIES // max(n, 1))
    if validation is not None:
        X_val, target_val, weight_val = validation
        X_val = np.asarray(X_val, dtype=np.float64)
        weight_val = np.asarray(weight_val, dtype=np.float64)
        raw_val = np.tile(base, (len(X_val), 1))
        best_loss, best_m = _loss(kind, raw_val, target_val, weight_val), 0
    for m in range(n_trees):
        g, h = _gradients(kind, raw, target, weight)
        node = np.zeros(n, dtype=np.int64)
        for d in range(depth):
            n_nodes = 1 << d
            gain = np.full((F, n_bins), -np.inf)
            for lo in range(0, F, block):
                hi = min(F, lo + block)
                width = hi - lo
                idx = ((node[:, None] * width + np.arange(width)[None, :]) * n_bins
                       + codes[:, lo:hi]).ravel()
                size = n_nodes * width * n_bins
                total = np.zeros((n_nodes, width, n_bins))
                for c in range(n_outputs):
                    G = np.bincount(idx, np.repeat(g[:, c], width), size)
                    H = np.bincount(idx, np.repeat(h[:, c], width), size)
                    GL = G.reshape(n_nodes, width, n_bins).cumsum(axis=2)
                    HL = H.reshape(n_nodes, width, n_bins).cumsum(axis=2)
                    GT, HT = GL[:, :, -1:], HL[:, :, -1:]
                    total += GL ** 2 / (HL + l2) + (GT - GL) ** 2 / (HT - HL + l2)
                gain[lo:hi] = total.sum(axis=0)
            gain[~valid] = -np.inf
            gain[~mask[m]] = -np.inf
            if not np.isfinite(gain).any():
                node = node * 2
                continue
            f, k = np.unravel_index(int(np.argmax(gain)), gain.shape)
            features[m, d], thresholds[m, d] = f, edges[f][k]
            node = node * 2 + (codes[:, f] > k)
        n_leaves = 1 << depth
        for c in range(n_outputs):
            G = np.bincount(node, g[:, c], n_leaves)
            H = np.bincount(node, h[:, c], n_leaves)
            leaves[m, :, c] = -learning_rate * G / (H + l2)
        raw += leaves[m][node]
        if validation is not None:
            raw_val += oblivious_output(X_val, 0.0, features[m:m + 1], thresholds[m:m + 1],
                                        leaves[m:m + 1])
            val_loss = _loss(kind, raw_val, target_val, weight_val)
            if val_loss < best_loss:
                best_loss, best_m = val_loss, m + 1
    if validation is not None:
        features[best_m:], thresholds[best_m:], leaves[best_m:] = -1, 0.0, 0.0
    return base, features, thresholds, leaves


def oblivious_output(X, base, features, thresholds, leaves):
    """Output of the trees of :func:`grow_oblivious_trees` on rows ``X``
    (hard thresholds; one vectorized pass per depth level).

    Returns
    -------
    raw : ndarray of shape (n_samples, n_outputs)
    """
    X = np.asarray(X, dtype=np.float64)
    M, D = features.shape
    leaf = np.zeros((len(X), M), dtype=np.int64)
    for d in range(D):
        f = features[:, d]
        right = (X[:, np.maximum(f, 0)] > thresholds[None, :, d]) & (f[None, :] >= 0)
        leaf = leaf * 2 + right
    return base + leaves[np.arange(M)[None, :], leaf].sum(axis=1)


def boosted_start(module, arch, X, target, weight, *, kind, mask=None, generator=None,
                  slope=BOOSTING_SLOPE, validation=None):
    """Set ``module``'s splits and leaves to gradient-boosted oblivious trees.

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        Freshly initialized; its parameters are changed in place (the
        additive table, when there is one, is left at its start).
    arch : TreeArchitecture
        ``"oblivious"`` or ``"non_oblivious"``.
    X : ndarray of shape (n_samples, F_enc)
        Encoded training rows (the validation rows excluded).
    target, weight, kind
        See :func:`grow_oblivious_trees`.
    mask : FeatureMask or None
        The features each tree may use.
    generator : torch.Generator or None
    slope : float, default=BOOSTING_SLOPE
        Slope of a split per standard deviation of its feature.
    validation : tuple or None
        Rows that choose how many trees to keep (see
        :func:`grow_oblivious_trees`); the trees after them keep the random
        splits ``module`` was initialized with and a constant output.

    Returns
    -------
    trees : tuple
        ``(base, features, thresholds, leaves)`` of :func:`grow_oblivious_trees`.
    """
    if arch.name not in BOOSTING_ARCHITECTURES:
        raise ValueError(
            f"split_init='boosting' supports the architectures {BOOSTING_ARCHITECTURES}, "
            f"got arch={arch.name!r}."
        )
    M, N, F = module.split_weight.shape
    C = module.leaf_value.shape[2]
    allowed = None if mask is None else mask.mask.cpu().numpy() > 0
    X = np.asarray(X, dtype=np.float64)
    base, feats, thr, leaves = grow_oblivious_trees(
        X, target, weight, kind=kind, n_trees=M, depth=arch.depth, n_outputs=C,
        mask=allowed, generator=generator, validation=validation)
    # the trees dropped on the validation rows keep their random splits (and
    # a constant output), for gradient descent to train
    dropped = (feats < 0).all(axis=1) & (leaves == 0).all(axis=(1, 2))
    std = X.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    level = _node_levels(arch)  # every node takes the split of its depth level
    f = feats[:, level]  # (M, N)
    split = f >= 0
    scale = np.where(split, slope / std[np.maximum(f, 0)], 0.0)
    with torch.no_grad():
        w = module.split_weight
        b = module.split_bias
        trees, nodes = np.nonzero(split)
        cols = f[trees, nodes]
        w[trees, nodes, cols] -= torch.as_tensor(scale[trees, nodes], dtype=w.dtype,
                                                 device=w.device)
        bias = np.where(split, scale * thr[:, level], 20.0)  # no split: every row left
        bias = torch.as_tensor(bias, dtype=b.dtype, device=b.device)
        keep = torch.as_tensor(dropped, device=b.device)
        b.copy_(torch.where(keep[:, None], b, bias))
        values = leaves + base[None, None, :] / M
        # structural leaf l of the architecture <- the oblivious leaf its path reaches
        module.leaf_value.copy_(torch.as_tensor(values[:, _leaf_index(arch)][:, arch.free_leaves],
                                                dtype=module.leaf_value.dtype,
                                                device=module.leaf_value.device))
    return base, feats, thr, leaves


def _node_levels(arch):
    """Depth level of every split node of ``arch``'s table."""
    if arch.name == "oblivious":
        return np.arange(arch.n_nodes)
    # perfect binary tree in breadth-first order: node i is at level floor(log2(i + 1))
    return np.floor(np.log2(np.arange(arch.n_nodes) + 1)).astype(np.int64)


def _leaf_index(arch):
    """The oblivious leaf (``sum_d right_d * 2**(D - 1 - d)``) of every
    structural leaf of ``arch``: the sides its path takes level by level."""
    code = arch.code  # (L, N): +1 left of the node, -1 right, 0 not on the path
    level = _node_levels(arch)
    D = arch.depth
    out = np.zeros(code.shape[0], dtype=np.int64)
    for n in range(arch.n_nodes):
        right = code[:, n] == -1
        out += np.where(right, 1 << (D - 1 - level[n]), 0)
    return out

"""Helpers shared by the symmetry and matching tests."""

import copy
import functools

import numpy as np

from sktree_lmc import SoftTreeEnsembleClassifier, TreeParams

N_FEATURES, N_CLASSES, N_TREES = 5, 3, 8


def random_params(arch, n_trees, n_features, n_outputs, rng, scale=1.0):
    """Gaussian parameters of ``n_trees`` trees of ``arch`` (splits scaled by ``scale``)."""
    return TreeParams(
        scale * rng.standard_normal((n_trees, arch.n_nodes, n_features)),
        scale * rng.standard_normal((n_trees, arch.n_nodes)),
        rng.standard_normal((n_trees, arch.n_free_leaves, n_outputs)),
    )


@functools.lru_cache(maxsize=None)
def _template(name, depth):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((30, N_FEATURES))
    y = np.arange(30) % N_CLASSES
    # numeric_encoding="none": the trees see X itself, so that parameters drawn for
    # N_FEATURES raw features fit the model and its predictions are theirs on X; no additive
    # term, so that the predictions are the trees' alone
    return SoftTreeEnsembleClassifier(
        arch=name, depth=depth, n_estimators=N_TREES, max_epochs=1, device="cpu", random_state=0,
        numeric_encoding="none", additive_bins=None,
    ).fit(X, y)


def model_with_params(name, depth, params):
    """A fitted classifier holding ``params`` (no training cost: a cached tiny fit), whose
    trees see the raw features (``numeric_encoding="none"``) and nothing else
    (``additive_bins=None``)."""
    return copy.deepcopy(_template(name, depth)).set_tree_params(params)

"""Helpers shared by several test modules: random tree parameters and cheap fitted models of
them (symmetry and matching tests), a small binary problem with tiny models, and small data."""

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


# -- a small binary problem and tiny models, shared by the validation-set, partial_fit,
#    dask-prediction, verbose, feature-importance and sharded-refit tests -------------------
def _binary_problem():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0)
    return X, y


X, Y = _binary_problem()
X_TR, X_VA, Y_TR, Y_VA = X[:300], X[300:], Y[:300], Y[300:]


def clf(**kw):
    """A FAST classifier (``random_state=0``) with ``kw`` on top."""
    from conftest import FAST

    return SoftTreeEnsembleClassifier(**{**FAST, "random_state": 0, **kw})


def reg(**kw):
    """A FAST regressor (``random_state=0``) with ``kw`` on top."""
    from conftest import FAST

    from sktree_lmc import SoftTreeEnsembleRegressor

    return SoftTreeEnsembleRegressor(**{**FAST, "random_state": 0, **kw})


def three_feature_binary_data(n=40):
    """``n`` rows of 3 Gaussian features and a linear binary label."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)


def mixed_frame(n, size_dtype=np.float64):
    """``n`` rows of mixed columns, as the export tests feed them: a numeric column (of
    ``size_dtype``) and a string column with missing values and rare categories, a pandas
    categorical with missing values, an integer-valued float column; and a binary target.
    Needs pandas."""
    import pandas as pd

    rng = np.random.RandomState(0)
    frame = pd.DataFrame({
        "size": rng.standard_normal(n).astype(size_dtype),
        "color": rng.choice(["red", "green", "blue", "violet", "teal"], n,
                            p=[0.4, 0.3, 0.2, 0.05, 0.05]).astype(object),
        "city": pd.Categorical(rng.choice(["Oslo", "Rome", "Lima"], n)),
        "age": rng.randint(18, 80, n).astype(float),
    })
    frame.loc[::9, "size"] = np.nan
    frame.loc[::11, "color"] = None
    frame.loc[::13, "city"] = np.nan
    y = ((frame["size"].fillna(0) > 0) ^ (frame["color"] == "red")).astype(int)
    return frame, y

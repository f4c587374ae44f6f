"""Persistence of fitted models: no torch object in the fitted state, and skops loading with
the documented list of trusted types."""

import pytest
import torch
from _helpers import three_feature_binary_data
from numpy.testing import assert_array_equal

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    merge_estimators,
    refit_leaves,
)

TINY = dict(n_estimators=4, max_epochs=2, device="cpu", random_state=0)


def _torch_objects(obj, path="est", seen=None):
    """Paths of the torch objects (device, dtype, tensor, ...) held anywhere in ``obj``."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if type(obj).__module__.split(".")[0] == "torch":
        return [path]
    items = []
    if isinstance(obj, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = [(f"{path}.{k}", v) for k, v in vars(obj).items()]
    return [p for sub, v in items for p in _torch_objects(v, sub, seen)]


def test_fitted_state_holds_no_torch_object():
    """With the default ``device="auto"`` no fitted attribute holds a torch object
    (``device_`` is a str): after fit, merge_estimators, refit_leaves, for both
    estimators and the sharded meta-estimator."""
    X, y = three_feature_binary_data(60)
    kw = dict(n_estimators=4, max_epochs=2, random_state=0)  # device="auto"
    a = SoftTreeEnsembleClassifier(**kw).fit(X, y)
    b = SoftTreeEnsembleClassifier(**{**kw, "random_state": 1}).fit(X, y)
    reg = SoftTreeEnsembleRegressor(**kw).fit(X, X[:, 1])
    sharded = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(n_estimators=4, max_epochs=2),
                                      n_shards=2, random_state=0).fit(X, y)
    models = [a, reg, merge_estimators(a, b), refit_leaves(a, X, y),
              refit_leaves(reg, X, X[:, 1]), sharded]
    for model in models:
        assert _torch_objects(model) == []
        assert isinstance(getattr(model, "device_", "cpu"), str)


def test_skops_loads_a_torch_device_parameter_with_the_documented_trusted_list(tmp_path):
    sio = pytest.importorskip("skops.io")
    X, y = three_feature_binary_data(60)
    est = SoftTreeEnsembleClassifier(**{**TINY, "device": torch.device("cpu")}).fit(X, y)
    path = tmp_path / "model.skops"
    sio.dump(est, path)
    trusted = ["sktree_lmc._estimators.SoftTreeEnsembleClassifier"]  # the documented list
    assert sio.get_untrusted_types(file=path) == trusted
    back = sio.load(path, trusted=trusted)
    assert back.get_params()["device"] == torch.device("cpu")
    assert_array_equal(back.predict_proba(X), est.predict_proba(X))

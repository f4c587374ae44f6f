"""One device policy for the whole package (sktree_lmc.utils._device): a torch.device is
accepted wherever a string is, and an unusable device gives the same clear error from
the estimators, the aligner, the merge layer and the matching functions."""

import copy

import numpy as np
import pytest
import torch
from sklearn.base import clone

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    interpolation_curve,
    merge_estimators,
    weight_matching,
)
from sktree_lmc.utils._device import prediction_device, resolve_device

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
NO_MPS = pytest.mark.skipif(
    getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
    reason="needs a machine without MPS",
)


@pytest.fixture
def pair(clf_data):
    return list(clf_data[:2])


@pytest.fixture
def XY(clf_data):
    return clf_data[2:]


def _entry_points(pair, X, Y):
    """Every public way to ask for a device, as ``device -> call``."""
    a, b = pair
    return {
        "estimator": lambda d: SoftTreeEnsembleClassifier(
            n_estimators=2, max_epochs=1, device=d).fit(X, Y),
        "aligner": lambda d: ModelAligner(device=d).fit(pair),
        "aligner, no invariances": lambda d: ModelAligner(invariances="none", device=d).fit(pair),
        "merge_estimators": lambda d: merge_estimators(a, b, aligner=ModelAligner(device=d)),
        "merge_estimators, list": lambda d: merge_estimators(
            pair, aligner=ModelAligner(invariances="none", device=d)),
        "interpolation_curve": lambda d: interpolation_curve(
            a, b, X, Y, lambdas=3, aligner=ModelAligner(device=d)),
        "weight_matching": lambda d: weight_matching(
            a.tree_params_, b.tree_params_, a.architecture_, device=d),
        "weight_matching, no invariances": lambda d: weight_matching(
            a.tree_params_, b.tree_params_, a.architecture_, invariances="none", device=d),
    }


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ValueError, match="device='bogus' is not a device torch understands"):
        resolve_device("bogus")
    with pytest.raises(TypeError, match="device must be a str or a torch.device"):
        resolve_device(3)


@NO_CUDA
@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 1)])
def test_cuda_without_cuda(device):
    with pytest.raises(ValueError, match="device=.*cuda.* was requested but CUDA is not avail"):
        resolve_device(device)
    with pytest.warns(UserWarning, match="CUDA is not available.*predicting on the CPU"):
        assert prediction_device(device) == torch.device("cpu")


@NO_MPS
def test_mps_without_mps():
    with pytest.raises(ValueError, match="device='mps' was requested but MPS is not available"):
        resolve_device("mps")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_index_beyond_the_visible_gpus():
    with pytest.raises(ValueError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


@pytest.mark.parametrize("device", ["bogus", "cuda", "mps", "meta", torch.device("meta")])
def test_the_same_error_everywhere(pair, XY, device):
    """Each entry point rejects an unusable device with the same ValueError (also when
    there is nothing to compute on it, e.g. without invariances)."""
    try:
        resolve_device(device)
    except ValueError as exc:
        expected = str(exc)
    else:
        pytest.skip(f"{device} is available here")
    for name, call in _entry_points(pair, *XY).items():
        with pytest.raises(ValueError) as info:
            call(device)
        assert expected in str(info.value), name


@pytest.mark.parametrize("device", ["meta", torch.device("meta")])
def test_a_device_without_data_is_refused(pair, XY, device):
    """Issue 20: ``device="meta"`` reached torch's "Tensor.item() cannot be called on
    meta tensors"; it is a ValueError naming ``device``, at fit and at prediction."""
    X, Y = XY
    with pytest.raises(ValueError, match="device='meta' holds no data"):
        resolve_device(device)
    with pytest.raises(ValueError, match="device='meta' holds no data"):
        prediction_device(device)
    with pytest.raises(ValueError, match="device='meta' holds no data"):
        SoftTreeEnsembleClassifier(n_estimators=2, max_epochs=1, device=device).fit(X, Y)
    est = copy.copy(pair[0]).set_params(device=device)  # fitted state kept
    with pytest.raises(ValueError, match="device='meta' holds no data"):
        est.predict(X)


def test_a_torch_device_is_accepted_wherever_a_string_is(pair, XY):
    X, Y = XY
    cpu = torch.device("cpu")
    for name, call in _entry_points(pair, X, Y).items():
        call(cpu)  # no error
    est = SoftTreeEnsembleClassifier(n_estimators=2, max_epochs=1, device=cpu,
                                     random_state=0).fit(X, Y)
    assert est.device_ == "cpu" and clone(est).device == cpu
    ref = SoftTreeEnsembleClassifier(n_estimators=2, max_epochs=1, device="cpu",
                                     random_state=0).fit(X, Y)
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))
    assert clone(ModelAligner(device=cpu)).device == cpu


def test_non_device_types_are_rejected(pair, XY):
    X, Y = XY
    with pytest.raises((TypeError, ValueError), match="device"):
        SoftTreeEnsembleClassifier(device=0).fit(X, Y)
    with pytest.raises((TypeError, ValueError), match="device"):
        ModelAligner(device=0).fit(pair)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_merging_non_finite_parameters_is_a_clear_error(pair, XY, bad):
    X, Y = XY
    a, b = pair
    params = b.get_tree_params()
    params.leaf_value[0, 0, 0] = bad
    broken = clone(b).fit(X, Y)
    broken.tree_params_ = params  # set_tree_params refuses non-finite values
    for call in (lambda: merge_estimators(a, broken),
                 lambda: merge_estimators([a, b, broken]),
                 lambda: interpolation_curve(a, broken, X, Y, lambdas=3),
                 lambda: ModelAligner(method="am").fit([broken, a], X)):
        with pytest.raises(ValueError, match="Estimator . has non-finite .* leaf_value"):
            call()

"""The encoded inputs travel as two arrays: the trees' features and the additive codes."""

import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal
from sklearn.datasets import make_classification

from sktree_lmc import SoftTreeEnsembleClassifier
from sktree_lmc.model._inputs import Inputs
from sktree_lmc.training._training import _FitTensors


def test_take_and_concatenate_keep_features_and_codes_row_aligned():
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    codes = np.arange(8, dtype=np.int32).reshape(4, 2)
    rows = Inputs(X, codes)
    part = rows.take(np.array([3, 1]))
    assert_array_equal(part.X, X[[3, 1]])
    assert_array_equal(part.codes, codes[[3, 1]])
    both = Inputs.concatenate([rows, part])
    assert both.n_rows == 6 and both.codes.dtype == np.int32
    assert_array_equal(both.codes[4:], codes[[3, 1]])
    plain = Inputs.concatenate([Inputs(X), Inputs(X[:1])])
    assert plain.codes is None and plain.n_rows == 5
    assert Inputs(X).take(slice(0, 2)).codes is None


def test_inputs_is_not_an_array_of_rows():
    with pytest.raises(TypeError):
        len(Inputs(np.zeros((3, 2))))


def test_the_estimators_encode_features_and_integer_codes_apart():
    X, y = make_classification(n_samples=120, n_features=4, random_state=0)
    est = SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=1, random_state=0,
                                     device="cpu").fit(X, y)
    rows = est._encoded_input(X)
    enc = est.encoder_
    assert rows.X.shape == (120, enc.n_features_out_) and rows.X.dtype == np.float32
    assert rows.codes.dtype == np.int32 and rows.codes.shape[0] == 120
    assert 0 <= rows.codes.min() and rows.codes.max() < enc.n_additive_
    data = _FitTensors.from_arrays(rows, np.zeros(120), np.ones(120), torch.device("cpu"))
    assert data.X.shape[1] == enc.n_features_out_ and data.codes.dtype == torch.int32
    assert data.codes.is_contiguous()
    batch = data.inputs(torch.tensor([5, 0]))
    assert_array_equal(batch.codes.numpy(), rows.codes[[5, 0]])
    no_table = SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=1, random_state=0,
                                          additive_bins=None, device="cpu").fit(X, y)
    assert no_table._encoded_input(X).codes is None

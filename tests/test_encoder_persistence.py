"""A standalone fitted ``TabularEncoder`` saves with skops needing only its own class trusted
(the additive term's bins are stored as plain arrays), and pickles and copies exactly."""

import copy
import pickle

import numpy as np
import pytest

from sktree_lmc import TabularEncoder

sio = pytest.importorskip("skops.io")

TRUSTED = ["sktree_lmc.encoding._encoding.TabularEncoder"]


@pytest.mark.parametrize("additive_bins", [None, 8])
def test_skops_round_trip_needs_only_the_encoder_class(additive_bins):
    X = np.random.default_rng(0).normal(size=(80, 3))
    enc = TabularEncoder(additive_bins=additive_bins).fit(X)
    data = sio.dumps(enc)
    assert sio.get_untrusted_types(data=data) == TRUSTED
    loaded = sio.loads(data, trusted=TRUSTED)
    np.testing.assert_array_equal(loaded.transform(X), enc.transform(X))
    assert loaded.additive_bins == additive_bins
    for other in (pickle.loads(pickle.dumps(enc)), copy.deepcopy(enc)):
        np.testing.assert_array_equal(other.transform(X), enc.transform(X))


def test_an_unfitted_encoder_round_trips():
    enc = TabularEncoder(n_bins=5)
    loaded = sio.loads(sio.dumps(enc), trusted=TRUSTED)
    assert loaded.get_params() == enc.get_params()

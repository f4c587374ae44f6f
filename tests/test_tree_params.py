"""TreeParams.nbytes counts every array, the additive table included."""

from dataclasses import fields

import numpy as np
import pytest

from sktree_lmc import TreeParams


@pytest.mark.parametrize("with_additive", [False, True])
def test_tree_params_nbytes_counts_every_array(with_additive):
    rng = np.random.RandomState(0)
    params = TreeParams(rng.randn(4, 3, 5), rng.randn(4, 3), rng.randn(4, 4, 2),
                        rng.randn(7, 2) if with_additive else None)
    arrays = [getattr(params, f.name) for f in fields(params)]
    expected = sum(a.nbytes for a in arrays if a is not None)
    assert params.nbytes == expected == sum(a.nbytes for a in params.arrays())
    assert params.nbytes == 4 * (60 + 12 + 32 + (14 if with_additive else 0))
    wide = params.astype(np.float64)  # the algebra keeps the dtype
    assert wide.nbytes == 2 * params.nbytes
    assert isinstance(params.nbytes, int)


def test_fitted_model_nbytes(clf_data):
    a = clf_data[0]
    p = a.tree_params_
    assert p.additive is not None
    assert p.nbytes == (p.split_weight.nbytes + p.split_bias.nbytes + p.leaf_value.nbytes
                        + p.additive.nbytes)

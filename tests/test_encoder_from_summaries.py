"""``TabularEncoder.from_summaries``: what it promises for quantile-normal sketches, and clear
errors for input that is not summaries.

From quantile sketches a quantile-normal encoder is an approximation, with a ``UserWarning``:
the quantile level it gives a value is within ``1 / (sketch_size - 1)`` of the exact fit's (the
documented bound, measured here). From exact summaries it equals ``fit`` and does not warn.
Anything other than a list of ``summarize`` dicts is a ``TypeError``.
"""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

from sktree_lmc import TabularEncoder
from sktree_lmc.encoding._encoding import summarize, to_columns

rng = np.random.default_rng(0)
X = np.c_[rng.lognormal(size=8000), rng.standard_t(2, size=8000)]
COLUMNS, CATEGORICAL = to_columns(X)


def _parts(sketch_size, k=4):
    return [summarize([c[i::k] for c in COLUMNS], CATEGORICAL, numeric_encoding="quantile_normal",
                      sketch_size=sketch_size) for i in range(k)]


@pytest.mark.parametrize("sketch_size", [11, 101, 1001])
def test_quantile_normal_from_sketches_warns_and_keeps_the_documented_bound(sketch_size):
    exact = TabularEncoder(numeric_encoding="quantile_normal").fit(X)
    with pytest.warns(UserWarning, match=r"quantile_normal.*approximate.*1 / \(sketch_size"):
        merged = TabularEncoder.from_summaries(_parts(sketch_size), CATEGORICAL,
                                               numeric_encoding="quantile_normal")
    levels = np.abs(norm.cdf(merged.transform(X)) - norm.cdf(exact.transform(X)))
    assert levels.max() <= 1.0 / (sketch_size - 1)


def test_quantile_normal_from_exact_summaries_equals_fit_without_warning():
    exact = TabularEncoder(numeric_encoding="quantile_normal").fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        merged = TabularEncoder.from_summaries(_parts(None), CATEGORICAL,
                                               numeric_encoding="quantile_normal")
    np.testing.assert_allclose(merged.transform(X), exact.transform(X), atol=1e-6)


@pytest.mark.parametrize("summaries, what", [
    ([1, 2], "item 0 is a int"),
    ("abc", "got a str"),
    (None, "got a NoneType"),
    ([{}], "item 0 is a dict without the 'columns'"),
    ({"columns": []}, "got a dict"),
])
def test_input_that_is_not_summaries_is_a_type_error(summaries, what):
    with pytest.raises(TypeError, match=rf"summaries must be a list.*{what}"):
        TabularEncoder.from_summaries(summaries, CATEGORICAL)

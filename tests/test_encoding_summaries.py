"""TabularEncoder.from_summaries: the encoder of rows that are never gathered in one place
(dask partitions), fitted from per-part summaries; exact where it can be, close elsewhere."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sktree_lmc.encoding._encoding import (
    SKETCH_SIZE,
    TabularEncoder,
    encoders_differ,
    summarize,
    to_columns,
)


def _parts(columns, n_parts, rng, sort_by=None):
    """Row index sets of ``n_parts`` parts: random, or by the order of a column
    (parts with different distributions, as data that arrives site by site)."""
    n = len(columns[0])
    order = rng.permutation(n) if sort_by is None else np.argsort(columns[sort_by],
                                                                  kind="stable")
    return np.array_split(order, n_parts)


def _from_parts(columns, categorical, parts, sketch_size=SKETCH_SIZE, **settings):
    settings = {"numeric_encoding": "piecewise_linear", "additive_bins": None, **settings}
    summaries = [summarize([c[p] for c in columns], categorical, sketch_size=sketch_size,
                           numeric_encoding=settings.get("numeric_encoding",
                                                         "piecewise_linear"),
                           n_bins=settings.get("n_bins", 16),
                           additive_bins=settings["additive_bins"])
                 for p in parts]
    return TabularEncoder.from_summaries(summaries, categorical, **settings)


def _mixed_frame(n, rng):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({
        "normal": rng.randn(n),
        "discrete": rng.randint(0, 6, n).astype(float),
        "color": rng.choice(["red", "green", "blue", "cyan", "gold"], n,
                            p=[0.4, 0.3, 0.15, 0.1, 0.05]),
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
        "lognormal": rng.lognormal(0.0, 1.0, n),
    })
    frame.loc[rng.rand(n) < 0.05, "normal"] = np.nan
    frame.loc[rng.rand(n) < 0.05, "color"] = None
    return frame


@pytest.mark.parametrize("encoding", ["piecewise_linear", "standard", "none",
                                      "quantile_normal"])
def test_one_exact_summary_is_fit(encoding):
    rng = np.random.RandomState(0)
    columns, categorical = to_columns(_mixed_frame(500, rng))
    fitted = TabularEncoder(encoding, 8, 3)._fit_columns(columns, categorical)
    summary = summarize(columns, categorical, numeric_encoding=encoding, n_bins=8)
    merged = TabularEncoder.from_summaries([summary], categorical, numeric_encoding=encoding,
                                           n_bins=8, max_categories=3)
    assert encoders_differ(fitted, merged) is None
    assert_array_equal(fitted.transform_columns(columns), merged.transform_columns(columns))


@pytest.mark.parametrize("encoding", ["piecewise_linear", "standard", "none"])
def test_summaries_of_small_parts_give_the_exact_encoder(encoding):
    """Parts of at most SKETCH_SIZE rows send their values: exact knots; categories,
    infrequent and missing flags from summed counts; merged moments."""
    rng = np.random.RandomState(1)
    frame = _mixed_frame(2400, rng)
    frame.loc[:100, "lognormal"] = np.nan  # missing in the first part only
    columns, categorical = to_columns(frame)
    exact = TabularEncoder(encoding, 16, 3, None)._fit_columns(columns, categorical)
    merged = _from_parts(columns, categorical, _parts(columns, 3, rng, sort_by=0),
                         numeric_encoding=encoding, n_bins=16, max_categories=3)
    assert_array_equal(merged.has_missing_, [True, False, True, False, True])
    assert_array_equal(merged.has_infrequent_, [False, False, True, False, False])
    assert list(merged.categories_[2]) == ["blue", "green", "red"]
    if encoding == "standard":  # Chan's update: equal up to rounding
        for j in np.flatnonzero(~categorical):
            assert merged.center_[j] == pytest.approx(exact.center_[j], rel=1e-12, abs=1e-12)
            assert merged.scale_[j] == pytest.approx(exact.scale_[j], rel=1e-12)
        # the exact encoder with the merged moments
        exact = TabularEncoder.from_dict({**exact.to_dict(), "center_": merged.center_,
                                          "scale_": merged.scale_})
    assert encoders_differ(exact, merged) is None


def test_sketched_knots_are_close_to_the_exact_ones():
    """Seven parts of about 8,600 rows each (more than SKETCH_SIZE): the knots come
    from the merged 1,001-level sketches. Measured over these distributions, random
    and skewed parts, n_bins 16 and 64: knots within 2.2e-4 of their quantile level
    (the exact knots' empirical CDF ranges vs the sketched ones'), values within
    3.2e-4 of the column's range (1.5e-2 for the median of a bimodal column, which
    falls in the empty gap between the modes, where the exact quantile is itself
    an interpolation across the gap; and for a discrete column's knots that fall
    between two adjacent values); discrete columns' knots exact."""
    rng = np.random.RandomState(0)
    n = 60000
    data = {
        "normal": rng.randn(n),
        "lognormal": rng.lognormal(0, 1.5, n),
        "uniform": rng.uniform(-5, 5, n),
        "cauchy": rng.standard_cauchy(n),
        "zero_inflated": np.where(rng.rand(n) < 0.4, 0.0, rng.exponential(size=n)),
        "bimodal": np.concatenate([rng.randn(n // 2) - 4, 0.3 * rng.randn(n - n // 2) + 3]),
        "discrete": rng.randint(0, 12, n).astype(float),
    }
    smooth = ["normal", "lognormal", "uniform", "cauchy", "zero_inflated"]
    columns = list(data.values())
    categorical = np.zeros(len(columns), dtype=bool)
    worst_level = worst_value = 0.0
    for sort_by in (None, 0):
        parts = _parts(columns, 7, rng, sort_by=sort_by)
        for n_bins in (16, 64):
            exact = TabularEncoder("piecewise_linear", n_bins)._fit_columns(columns, categorical)
            merged = _from_parts(columns, categorical, parts, n_bins=n_bins)
            assert_array_equal(merged.has_missing_, exact.has_missing_)
            for j, name in enumerate(data):
                a, b = exact.knots_[j], merged.knots_[j]
                assert len(a) == len(b), name
                assert a[0] == b[0] and a[-1] == b[-1]  # the minimum and maximum: exact
                if name == "discrete":
                    assert_array_equal(a, b)  # at most n_bins + 1 values: the values
                    continue
                x = np.sort(columns[j])
                ranges = [(np.searchsorted(x, k, "left") / n, np.searchsorted(x, k, "right") / n)
                          for k in (a, b)]
                level = np.max(np.maximum(0, np.maximum(ranges[1][0] - ranges[0][1],
                                                        ranges[0][0] - ranges[1][1])))
                worst_level = max(worst_level, level)
                assert level < 1e-3, name
                if name in smooth:
                    value = np.max(np.abs(a - b)) / (x[-1] - x[0])
                    worst_value = max(worst_value, value)
                    assert value < 1e-3, name
    assert worst_level > 0 and worst_value > 0  # the sketches are sketches


def test_sketch_summaries_are_small():
    rng = np.random.RandomState(0)
    x = rng.randn(50000)
    summary = summarize([x], np.array([False]), numeric_encoding="piecewise_linear",
                        sketch_size=SKETCH_SIZE, additive_bins=None)
    (col,) = summary["columns"]
    assert col["count"] == 50000 and "values" not in col and col["distinct"] is None
    assert col["quantiles"].shape == (SKETCH_SIZE,)
    assert col["quantiles"][0] == x.min() and col["quantiles"][-1] == x.max()
    with pytest.raises(ValueError, match="n_bins=16, the encoder has n_bins=8"):
        TabularEncoder.from_summaries([summary], np.array([False]), n_bins=8,
                                      numeric_encoding="piecewise_linear", additive_bins=None)
    with pytest.raises(ValueError, match="does not describe the given columns"):
        TabularEncoder.from_summaries([summary], np.array([True]),
                                      numeric_encoding="piecewise_linear", additive_bins=None)
    with pytest.raises(ValueError, match="infinity in column 'a'"):
        summarize([np.array([1.0, np.inf])], np.array([False]), names=["a"])


def test_categories_of_parts_that_cannot_be_compared_are_named():
    a = summarize([np.array(["x", "y"], dtype=object)], np.array([True]))
    b = summarize([np.array([1, 2], dtype=object)], np.array([True]))
    with pytest.raises(TypeError, match="Categorical column 'c' mixes values"):
        TabularEncoder.from_summaries([a, b], np.array([True]), names=["c"])


def test_quantile_normal_from_sketches_is_close_to_the_exact_transform():
    """Parts that send quantile sketches instead of their values: the transform
    is fitted on the merged sketch's quantiles, and its outputs stay within a
    few thousandths of the transform fitted on all values."""
    rng = np.random.RandomState(0)
    x = np.r_[rng.lognormal(size=30000), rng.normal(5, 1, size=20000)]
    parts = [x[:20000], x[20000:35000], x[35000:]]
    exact = TabularEncoder("quantile_normal", additive_bins=None)._fit_columns(
        [x], np.array([False]))
    summaries = [summarize([p], np.array([False]), numeric_encoding="quantile_normal",
                           sketch_size=SKETCH_SIZE) for p in parts]
    assert all("values" not in s["columns"][0] for s in summaries)  # sketches only
    merged = TabularEncoder.from_summaries(summaries, np.array([False]),
                                           numeric_encoding="quantile_normal")
    probe = np.quantile(x, np.linspace(0.001, 0.999, 500))
    a = merged.transform_columns([probe])[:, 0]
    b = exact.transform_columns([probe])[:, 0]
    assert 0 < np.max(np.abs(a - b)) < 0.02

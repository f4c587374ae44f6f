"""What ``TabularEncoder`` accepts and how: date and time columns (NaT, their unit), objects
that are not numbers, the order and range of ``additive_bins``, one additive bin per value, and
rows of zero weight."""

import datetime

import numpy as np
import pytest
from conftest import FAST
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from sktree_lmc import SoftTreeEnsembleRegressor, TabularEncoder
from sktree_lmc.encoding._encoding import (
    NUMERIC_ENCODINGS,
    encoders_differ,
    summarize,
    to_columns,
)

pd = pytest.importorskip("pandas")

#: Nanoseconds from 1900 to 2100: representable in [ns] and in [us].
_NS_RANGE = (-2208988800 * 10**9, 4102444800 * 10**9)


def _fit_transform(columns, categorical, **params):
    enc = TabularEncoder(**params)._fit_columns(columns, np.asarray(categorical))
    out = enc.transform_columns(columns)
    if enc.n_additive_:
        out = np.concatenate([out, enc.additive_codes(columns)], axis=1)
    return enc, out


# -- 1. NaT is a missing value ------------------------------------------------------------------
@pytest.mark.parametrize("source", ["numpy", "pandas", "pandas_tz"])
def test_nat_is_a_missing_value_of_a_datetime_column(source):
    stamps = np.array(["2020-01-01", "NaT", "2021-03-04T05:06:07", "2019-12-31", "NaT",
                       "2022-07-01T12:00:00.5"], dtype="datetime64[ns]")
    if source == "numpy":
        X = stamps.reshape(-1, 1)
    elif source == "pandas":
        X = pd.DataFrame({"t": stamps})
    else:
        X = pd.DataFrame({"t": pd.DatetimeIndex(stamps).tz_localize("UTC")
                          .tz_convert("America/New_York")})
    columns, categorical = to_columns(X)
    assert not categorical.any()
    x = columns[0]
    # NaT -> NaN (not -9.2e18); the instants -> seconds since the epoch, in UTC
    assert_array_equal(np.isnan(x), np.isnat(stamps))
    assert x[0] == 1577836800.0 and x[-1] == 1656676800.5
    for encoding in NUMERIC_ENCODINGS:
        enc, out = _fit_transform(columns, [False], numeric_encoding=encoding, n_bins=4,
                                  additive_bins=None)
        assert enc.has_missing_.tolist() == [True]
        missing = np.isnat(stamps)
        assert_array_equal(out[:, -1], missing)  # the missing indicator
        assert not out[missing, :-1].any()       # and zeros
        # the same encoder as for the seconds with NaN, the documented missing value
        secs = (stamps - np.datetime64(0, "s")) / np.timedelta64(1, "s")
        assert_array_equal(out, _fit_transform([secs], [False], numeric_encoding=encoding,
                                               n_bins=4, additive_bins=None)[1])
    # NaT passed to the encoder directly, at fit and at prediction time
    enc = TabularEncoder("standard")._fit_columns([stamps], np.array([False]))
    assert enc.has_missing_.tolist() == [True]
    assert_array_equal(enc.transform_columns([stamps[[1]]]), [[0.0, 1.0]])


def test_timedelta_columns_are_seconds_with_nat_missing():
    deltas = np.array([1, "NaT", 90, 3600], dtype="timedelta64[s]")
    for X in (pd.DataFrame({"d": deltas.astype("timedelta64[ns]")}), deltas.reshape(-1, 1)):
        x = to_columns(X)[0][0]
        assert_array_equal(x, [1.0, np.nan, 90.0, 3600.0])
    with pytest.raises(ValueError, match="Column 0 holds timedelta64 values with unit 'M'"):
        TabularEncoder()._fit_columns([np.array([1, 2], dtype="timedelta64[M]")], np.array([False]))


# -- 2. the unit of a datetime column does not matter -------------------------------------------
@settings(max_examples=25, deadline=None)
@given(micros=st.lists(st.integers(_NS_RANGE[0] // 1000, _NS_RANGE[1] // 1000), min_size=3,
                       max_size=40),
       nat=st.lists(st.booleans(), min_size=40, max_size=40),
       encoding=st.sampled_from(NUMERIC_ENCODINGS))
def test_datetime_encoding_does_not_depend_on_the_unit(micros, nat, encoding):
    """The same instants as ``[ns]`` (pandas 2) and ``[us]`` (pandas 3) encode to the same
    bits, as NumPy arrays and as DataFrame columns; time deltas likewise."""
    us = np.array(micros, dtype="datetime64[us]")
    us[np.array(nat[:len(us)])] = np.datetime64("NaT")
    ns = us.astype("datetime64[ns]")
    assert_array_equal(ns.astype("datetime64[us]"), us)  # the same instants
    settings_ = dict(numeric_encoding=encoding, n_bins=4, additive_bins=(4, 16))
    outs = []
    for values in (ns, us):
        for X in (values.reshape(-1, 1), pd.DataFrame({"t": values})):
            columns = to_columns(X)[0]
            outs.append((columns[0], _fit_transform(columns, [False], **settings_)[1]))
        outs.append((None, _fit_transform([values], [False], **settings_)[1]))  # as given
    for x, out in outs[1:]:
        assert_array_equal(out, outs[0][1])
        if x is not None:
            assert_array_equal(x, outs[0][0])
    td_us = (us - np.datetime64(0, "us")).astype("timedelta64[us]")
    assert_array_equal(to_columns(pd.DataFrame({"d": td_us}))[0][0],
                       to_columns(pd.DataFrame({"d": td_us.astype("timedelta64[ns]")}))[0][0])


def test_an_estimator_predicts_the_same_for_both_units():
    rng = np.random.RandomState(0)
    n = 120
    t = pd.Series(pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.randint(0, 10**7, n),
                                                               unit="s")).dt.as_unit("us")
    t[::7] = pd.NaT
    y = rng.normal(size=n)
    preds = []
    for unit in ("ns", "us"):
        X = pd.DataFrame({"t": t.dt.as_unit(unit), "x": np.arange(n) % 5})
        model = SoftTreeEnsembleRegressor(**{**FAST, "max_epochs": 2, "random_state": 0})
        preds.append(model.fit(X, y).predict(X))
        assert model.encoder_.has_missing_.tolist() == [True, False]
    assert_array_equal(preds[0], preds[1])


def test_coarse_units_and_time_zones_give_the_same_seconds():
    days = np.array(["2020-01-01", "NaT", "1969-07-20"], dtype="datetime64[D]")
    seconds = to_columns(days.reshape(-1, 1))[0][0]
    for unit in ("s", "ms", "us", "ns"):
        assert_array_equal(to_columns(days.astype(f"datetime64[{unit}]").reshape(-1, 1))[0][0],
                           seconds)
    naive = pd.DataFrame({"t": pd.to_datetime(["2020-01-01 10:00", None, "2021-06-01 00:00"])})
    aware = pd.DataFrame({"t": naive["t"].dt.tz_localize("UTC").dt.tz_convert("Asia/Tokyo")})
    assert_array_equal(to_columns(aware)[0][0], to_columns(naive)[0][0])


# -- 3. objects that are not numbers: errors that name the column -------------------------------
@pytest.mark.parametrize("values, what", [
    ([datetime.date(2020, 1, 1), datetime.date(2021, 1, 1), None], "of type date"),
    (pd.period_range("2020-01", periods=3, freq="M"), "of type Period"),
    ([[1, 2], [3, 4], [5, 6]], "of type list"),
    ([[1, 2], [3], None], "of type list"),
    # NumPy datetime64 objects: float() of one is a count of its unit
    (pd.Series([np.datetime64("2020-01-01"), np.datetime64("2021-01-01"), None], dtype=object),
     "of type datetime64"),
    ([1.5, "paris", None], "of type str"),
])
def test_values_that_are_not_numbers_in_a_numeric_column_name_it(values, what):
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0], "when": pd.Series(values)})
    assert X["when"].dtype.kind == "O"
    columns, categorical = to_columns(X)
    with pytest.raises((ValueError, TypeError),
                       match=f"Column 'when' is numeric but holds .*{what}"):
        TabularEncoder()._fit_columns(columns, np.array([False, False]), list(X.columns))
    rows = np.empty((3, 2), dtype=object)
    rows[:, 0], rows[:, 1] = 1.0, list(X["when"])
    with pytest.raises((ValueError, TypeError),
                       match=f"Column 1 is numeric but holds .*{what}"):
        TabularEncoder()._fit_columns(to_columns(rows)[0], np.array([False, False]))
    # at prediction time too
    enc = TabularEncoder()._fit_columns([np.arange(3.0)] * 2, np.array([False, False]),
                                        ["x", "when"])
    with pytest.raises((ValueError, TypeError),
                       match=f"Column 'when' is numeric but holds .*{what}"):
        enc.transform_columns(columns)


def test_lists_in_a_categorical_column_name_it():
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0], "tags": pd.Series([["a"], ["b", "c"], None])})
    columns = to_columns(X)[0]
    cat = np.array([False, True])
    with pytest.raises(TypeError, match="Categorical column 'tags' holds a value that cannot "
                                        r"be a category \(\['a'\], of type list"):
        TabularEncoder()._fit_columns(columns, cat, ["x", "tags"])
    with pytest.raises(TypeError, match="Categorical column 'tags' .*of type list"):
        summarize(columns, cat, names=["x", "tags"], sketch_size=2)
    # a list unseen in fit, at prediction time
    enc = TabularEncoder(additive_bins=4)._fit_columns(
        [np.arange(3.0), np.array(["a", "b", None], dtype=object)], cat, ["x", "tags"])
    for method in (enc.transform_columns, enc.additive_codes):
        with pytest.raises(TypeError, match="Categorical column 'tags' .*of type list"):
            method(columns)
    # dates and periods are categories when declared so
    for values in ([datetime.date(2020, 1, 1), datetime.date(2021, 1, 1), None],
                   pd.period_range("2020-01", periods=3, freq="M")):
        frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "when": pd.Series(values)})
        enc = TabularEncoder()._fit_columns(to_columns(frame)[0], cat, ["x", "when"])
        assert len(enc.categories_[1]) in (2, 3)


# -- 4. the order of additive_bins --------------------------------------------------------------
@pytest.mark.parametrize("orders", [((16, 64, 256), (256, 64, 16), [64, 256, 16]),
                                    ((4, 8), (8, 4))])
def test_the_order_of_additive_bins_does_not_change_the_encoder(orders):
    rng = np.random.RandomState(0)
    n = 500
    columns = [rng.normal(size=n), rng.choice(["a", "b", "c"], size=n).astype(object),
               np.round(rng.exponential(size=n) * 3)]
    cat = np.array([False, True, False])
    encs = [TabularEncoder(additive_bins=bins)._fit_columns(columns, cat) for bins in orders]
    ref = encs[0]
    for enc, bins in zip(encs, orders):
        assert enc.additive_bins == bins  # stored as given
        assert encoders_differ(ref, enc) is None
        assert_array_equal(enc.additive_steps_, ref.additive_steps_)
        assert_array_equal(enc.additive_row_steps(), ref.additive_row_steps())
        assert_array_equal(enc.additive_sources_, ref.additive_sources_)
        assert_array_equal(enc.additive_offsets_, ref.additive_offsets_)
        assert_array_equal(enc.additive_codes(columns), ref.additive_codes(columns))
        for a, b in zip(enc.additive_edges_, ref.additive_edges_):
            assert (a is None and b is None) or np.array_equal(a, b)
    # the categorical column learns at the coarsest resolution's step, 1
    assert ref.additive_steps_[list(ref.additive_sources_).index(1)] == 1.0
    # summaries computed with another order fit the same encoder
    parts = [summarize([c[:250] for c in columns], cat, additive_bins=orders[1]),
             summarize([c[250:] for c in columns], cat, additive_bins=orders[1])]
    merged = TabularEncoder.from_summaries(parts, cat, additive_bins=orders[0])
    assert encoders_differ(merged, ref) is None


# -- 5. the additive bins are quantile bins, as documented -------------------------------------
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 400), k=st.integers(1, 40),
       bins=st.sampled_from([2, 4, 16, 64, 300, 4096]))
def test_additive_edges_are_the_distinct_quantiles(seed, n, k, bins):
    """Few or many distinct values, the edges are the distinct inner quantiles of the
    present values (the docstring's rule; a 5-valued column gets many empty bins)."""
    rng = np.random.RandomState(seed)
    x = rng.choice(rng.normal(size=k) * 10, size=n) if k < 40 else rng.normal(size=n)
    x[rng.rand(n) < 0.1] = np.nan
    enc = TabularEncoder(additive_bins=bins)._fit_columns([x], np.array([False]))
    present = x[~np.isnan(x)]
    levels = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    expected = np.unique(np.quantile(present, levels)) if len(present) else np.zeros(0)
    assert_array_equal(enc.additive_edges_[0], expected)


# -- 6. every element of additive_bins is validated ---------------------------------------------
@pytest.mark.parametrize("bins, bad", [
    ((2**40,), "1099511627776 is outside \\[2, 65536\\]"),
    (2**40, "1099511627776 is outside"),
    ((16, 65537), "65537 is outside"),
    ([16, 1], "1 is outside"),
    ((16, 16.0), "16.0 is not an int"),
    ((True,), "True is not an int"),
    ((), "an empty sequence"),
    ((64, 16, 64), "repeats a value"),
])
def test_every_element_of_additive_bins_is_checked(bins, bad):
    columns, cat = [np.arange(10.0)], np.array([False])
    with pytest.raises(ValueError, match=f"additive_bins must be .*{bad}"):
        TabularEncoder(additive_bins=bins)._fit_columns(columns, cat)
    with pytest.raises(ValueError, match=f"additive_bins must be .*{bad}"):
        summarize(columns, cat, additive_bins=bins)


def test_the_largest_additive_bins_is_accepted():
    enc = TabularEncoder(additive_bins=(2**16, 2))._fit_columns([np.arange(10.0)],
                                                                np.array([False]))
    assert enc.additive_bins == (2**16, 2) and len(enc.additive_edges_) == 2


# -- 7. rows of zero weight ---------------------------------------------------------------------
def _weighted_data(rng, n):
    x = rng.normal(size=n)
    x[rng.rand(n) < 0.1] = np.nan
    city = rng.choice(["paris", "rome", "oslo"], size=n).astype(object)
    return [x, city, rng.exponential(size=n)], np.array([False, True, False])


@pytest.mark.parametrize("encoding", NUMERIC_ENCODINGS)
def test_rows_of_zero_weight_do_not_shape_the_encoder(encoding):
    rng = np.random.RandomState(0)
    columns, cat = _weighted_data(rng, 300)
    # rows of zero weight: outliers, a new category, the only missing values of column 2
    junk = [np.array([1e6, -1e6, 5.0]), np.array(["lima", "lima", "tokyo"], dtype=object),
            np.array([np.nan, 1e9, np.nan])]
    full = [np.r_[c, j] if c.dtype != object else np.concatenate([c, j])
            for c, j in zip(columns, junk)]
    weight = np.r_[rng.uniform(0.1, 3.0, size=300), np.zeros(3)]
    settings_ = dict(numeric_encoding=encoding, n_bins=8, max_categories=8,
                     additive_bins=(4, 16))
    clean = TabularEncoder(**settings_)._fit_columns(columns, cat)
    weighted = TabularEncoder(**settings_)._fit_columns(full, cat, sample_weight=weight)
    assert encoders_differ(weighted, clean) is None
    assert weighted.has_missing_.tolist() == [True, False, False]
    assert "lima" not in weighted.categories_[1].tolist()
    assert_array_equal(weighted.transform_columns(full), clean.transform_columns(full))
    assert_array_equal(weighted.additive_codes(full), clean.additive_codes(full))
    # the per-site path: summaries with the weights of their rows
    parts = [summarize([c[:150] for c in full], cat, numeric_encoding=encoding, n_bins=8,
                       additive_bins=(4, 16), sample_weight=weight[:150]),
             summarize([c[150:] for c in full], cat, numeric_encoding=encoding, n_bins=8,
                       additive_bins=(4, 16), sample_weight=weight[150:])]
    merged = TabularEncoder.from_summaries(parts, cat, **settings_)
    clean_parts = [summarize([c[:150] for c in columns], cat, numeric_encoding=encoding,
                             n_bins=8, additive_bins=(4, 16)),
                   summarize([c[150:] for c in columns], cat, numeric_encoding=encoding,
                             n_bins=8, additive_bins=(4, 16))]
    assert encoders_differ(merged, TabularEncoder.from_summaries(clean_parts, cat,
                                                                 **settings_)) is None
    # a part whose rows all weigh zero summarizes no row: it adds nothing
    empty = summarize([c[-3:] for c in full], cat, numeric_encoding=encoding, n_bins=8,
                      additive_bins=(4, 16), sample_weight=np.zeros(3))
    assert empty["n_rows"] == 0 and all(c["count"] == 0 for c in empty["columns"])
    with_empty = TabularEncoder.from_summaries(clean_parts + [empty], cat, **settings_)
    assert encoders_differ(with_empty, TabularEncoder.from_summaries(clean_parts, cat,
                                                                     **settings_)) is None


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(3, 200))
def test_positive_weights_leave_the_fit_unweighted(seed, n):
    """With every weight positive the fit is bit-identical to the fit without weights."""
    rng = np.random.RandomState(seed)
    columns, cat = _weighted_data(rng, n)
    weight = rng.uniform(1e-6, 10.0, size=n)
    for encoding in NUMERIC_ENCODINGS:
        a = TabularEncoder(encoding, 8, additive_bins=(4, 64))._fit_columns(columns, cat)
        b = TabularEncoder(encoding, 8, additive_bins=(4, 64))._fit_columns(columns, cat,
                                                                  sample_weight=weight)
        assert encoders_differ(a, b) is None
        assert_array_equal(a.transform_columns(columns), b.transform_columns(columns))
        assert_array_equal(a.additive_codes(columns), b.additive_codes(columns))


@pytest.mark.parametrize("weight, message", [
    (np.zeros(5), "zero for every row"),
    (np.r_[1.0, -1.0, 1.0, 1.0, 1.0], "finite and non-negative"),
    (np.r_[1.0, np.nan, 1.0, 1.0, 1.0], "finite and non-negative"),
    (np.ones(4), "shape \\(4,\\); the columns have 5 rows"),
])
def test_invalid_sample_weight_is_an_error(weight, message):
    with pytest.raises(ValueError, match=f"sample_weight .*{message}|{message}"):
        TabularEncoder()._fit_columns([np.arange(5.0)], np.array([False]), sample_weight=weight)

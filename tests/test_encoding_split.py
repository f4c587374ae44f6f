"""The encoder split in two (issue 44): the per-column encodings, one class per kind in one
table (``_column_encodings``), and the additive term's bins (``_additive_bins``), which
``TabularEncoder`` delegates to. The outputs are pinned to those of the encoder before the
split (computed with it on a small frame), and the encoder's loop over its columns is checked
against the kinds' own methods and against independent formulas."""

import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import TabularEncoder
from sktree_lmc.encoding._additive_bins import AdditiveBins
from sktree_lmc.encoding._column_encodings import (
    CATEGORICAL,
    NUMERIC_ENCODINGS,
    ColumnEncoding,
    _hat_features,
    _knots,
)
from sktree_lmc.encoding._encoding import encoders_differ, summarize, to_columns, union_additive_bins

nan = np.nan

TRAIN = pd.DataFrame({"a": [0.5, 1.5, nan, 3.0, 4.0, 10.0, 2.0, 1.5],
                      "b": ["x", "y", None, "x", "z", "x", "y", "w"],
                      "c": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]})
# a missing value where fit had none (c), an unseen category (q), values outside the range
NEW = pd.DataFrame({"a": [nan, -1.0, 2.5, 11.0], "b": ["q", None, "y", "x"],
                    "c": [nan, 0.0, 4.5, 9.0]})

# b: x and y kept (max_categories=2), the infrequent feature, the missing indicator
_B = [[0, 0, 1, 0], [0, 0, 0, 1], [0, 1, 0, 0], [1, 0, 0, 0]]
_THIRD, _TWO_THIRDS = 0.3333333432674408, 0.6666666865348816
#: Outputs of the encoder before the split (n_bins=3, max_categories=2, additive_bins=(4, 2)).
PINNED = {
    "piecewise_linear": {
        "widths": [5, 4, 4],
        "transform": [[0, 0, 0, 0, 1, *_B[0], 0, 0, 0, 0],
                      [1, 0, 0, 0, 0, *_B[1], 1, 0, 0, 0],
                      [0, _THIRD, _TWO_THIRDS, 0, 0, *_B[2], 0, 0.5, 0.5, 0],
                      [0, 0, 0, 1, 0, *_B[3], 0, 0, 0, 1]],
        "ramp": [-1.0, -0.33333333333333337, 0.33333333333333326, 1.0, nan, nan, nan, nan,
                 nan, -1.0, -0.33333333333333337, 0.33333333333333326, 1.0],
    },
    "quantile_normal": {
        "widths": [2, 4, 1],
        "transform": [[0, 1, *_B[0], 0], [-5.199337482452393, 0, *_B[1], -5.199337482452393],
                      [0.210428386926651, 0, *_B[2], 0],
                      [5.199337482452393, 0, *_B[3], 5.199337482452393]],
        "ramp": None,
    },
    "standard": {
        "widths": [2, 4, 1],
        "transform": [[0, 1, *_B[0], 0], [-1.4226163625717163, 0, *_B[1], -1.9639610052108765],
                      [-0.24112141132354736, 0, *_B[2], 0],
                      [2.628223419189453, 0, *_B[3], 1.9639610052108765]],
        "ramp": None,
    },
    "none": {
        "widths": [2, 4, 1],
        "transform": [[0, 1, *_B[0], 0], [-1, 0, *_B[1], 0], [2.5, 0, *_B[2], 4.5],
                      [11, 0, *_B[3], 9]],
        "ramp": None,
    },
}
PINNED_CODES = [[2, 5, 10, 15, 20], [0, 6, 8, 11, 16], [1, 4, 9, 13, 18], [1, 3, 9, 14, 19]]
PINNED_OFFSETS, PINNED_SOURCES = [0, 3, 8, 11, 16, 21], [0, 1, 2, 0, 2]
STATE_KEYS = sorted(["additive_bins", "additive_edges_", "additive_offsets_",
                     "additive_sources_", "additive_steps_", "categorical_", "categories_",
                     "center_", "dependence_", "feature_groups_", "has_infrequent_",
                     "has_missing_", "knots_", "max_categories", "n_additive_", "n_bins",
                     "n_features_in_", "n_features_out_", "names_", "numeric_encoding",
                     "quantile_transformers_", "scale_", "widths_"])


def _fit(encoding, X=TRAIN, additive_bins=(4, 2), **kw):
    columns, cat = to_columns(X)
    kw = {"n_bins": 3, "max_categories": 2, **kw}
    return TabularEncoder(encoding, additive_bins=additive_bins, **kw)._fit_columns(
        columns, cat, list(X.columns)), columns


def test_the_table_of_numeric_encodings():
    assert list(NUMERIC_ENCODINGS) == ["piecewise_linear", "quantile_normal", "standard", "none"]
    assert set(NUMERIC_ENCODINGS) == {"piecewise_linear", "quantile_normal", "standard", "none"}
    assert "standard" in NUMERIC_ENCODINGS and "one_hot" not in NUMERIC_ENCODINGS
    for name, kind in NUMERIC_ENCODINGS.items():
        assert issubclass(kind, ColumnEncoding) and kind.name == name
    assert issubclass(CATEGORICAL, ColumnEncoding)
    st.sampled_from(NUMERIC_ENCODINGS).validate()  # ordered: hypothesis samples from it
    with pytest.raises(ValueError, match=r"one of \('piecewise_linear', 'quantile_normal', "):
        summarize([np.arange(3.0)], [False], numeric_encoding="spline")


@pytest.mark.parametrize("encoding", list(NUMERIC_ENCODINGS))
def test_outputs_are_those_before_the_split(encoding):
    enc, _ = _fit(encoding)
    new, _ = to_columns(NEW)
    expected = PINNED[encoding]
    assert enc.widths_.tolist() == expected["widths"]
    out = enc.transform_columns(new)
    assert out.dtype == np.float32
    if encoding == "quantile_normal":  # scikit-learn's transform, not ours
        assert_allclose(out, expected["transform"], rtol=1e-6)
    else:
        assert_array_equal(out, np.asarray(expected["transform"], dtype=np.float32))
    assert_array_equal(enc.additive_codes(new), PINNED_CODES)
    ramp = enc.ramp_directions()
    if expected["ramp"] is None:
        assert ramp is None
    else:
        assert_array_equal(ramp, expected["ramp"])
    assert enc.additive_offsets_.tolist() == PINNED_OFFSETS
    assert enc.additive_sources_.tolist() == PINNED_SOURCES
    assert_array_equal(enc.additive_row_steps(), [1.0] * 11 + [np.sqrt(0.5)] * 10)
    assert sorted(enc.to_dict()) == STATE_KEYS  # the layout the estimators pickle


@pytest.mark.parametrize("encoding", list(NUMERIC_ENCODINGS))
def test_the_encoder_loops_over_its_columns_kinds(encoding):
    """Each column's block of features is its fitted column's transform of the column, its
    width the column's width plus the missing indicator, its export form the column's; each
    column holds its own state, which round-trips through plain data."""
    enc, _ = _fit(encoding)
    new, _ = to_columns(NEW)
    out = enc.transform_columns(new)
    offset = 0
    for j, column in enumerate(enc.column_encodings_):
        kind = CATEGORICAL if enc.categorical_[j] else NUMERIC_ENCODINGS[encoding]
        assert type(column) is kind
        state = column.state()
        assert set(state) == set(kind.state_keys)
        assert kind.from_state(state).difference(column, "c") is None
        width = column.width
        assert enc.widths_[j] == width + int(enc.has_missing_[j])
        block = np.zeros((len(new[j]), width), dtype=np.float32)
        missing = column.transform(new[j], enc.column_label(j), block)
        assert_array_equal(out[:, offset: offset + width], block)
        if enc.has_missing_[j]:
            assert_array_equal(out[:, offset + width], missing)
        offset += int(enc.widths_[j])
        assert enc._column_export(j) == column.export_form()
    assert offset == enc.n_features_out_


def test_the_additive_bins_are_their_own_object():
    enc, columns = _fit("standard")
    bins = enc.additive_term_
    assert isinstance(bins, AdditiveBins) and bins.additive_bins == (4, 2)
    assert enc.additive_edges_ is bins.edges_ and enc.additive_offsets_ is bins.offsets_
    assert enc.additive_sources_ is bins.sources_ and enc.additive_steps_ is bins.steps_
    assert enc.n_additive_ == bins.n_additive_ == 21
    assert bins.levels == (2, 4)
    assert_array_equal(bins.row_steps(), enc.additive_row_steps())
    assert_array_equal(enc.additive_codes(columns, 2, 6), bins.codes(
        columns, 2, 6, encodings=enc.column_encodings_, names=enc.names_))
    # without the term, and before fit (getattr(enc, "n_additive_", 0) as the estimators do)
    plain, _ = _fit("standard", additive_bins=None)
    assert plain.n_additive_ == 0 and plain.additive_offsets_ is None
    assert plain.additive_row_steps().shape == (0,)
    with pytest.raises(ValueError, match="no additive term"):
        plain.additive_codes(columns)
    unfitted = TabularEncoder(additive_bins=8)
    assert unfitted.additive_bins == 8 and getattr(unfitted, "n_additive_", 0) == 0
    unfitted.additive_bins = None
    assert unfitted.additive_term_.additive_bins is None


def test_state_round_trips_through_plain_dicts():
    enc, columns = _fit("quantile_normal")
    state = enc.to_dict()
    assert not any(isinstance(v, AdditiveBins) for v in state.values())
    back = TabularEncoder.from_dict(state)
    assert encoders_differ(enc, back) is None
    assert_array_equal(back.transform_columns(columns), enc.transform_columns(columns))
    assert_array_equal(back.additive_codes(columns), enc.additive_codes(columns))
    loaded = pickle.loads(pickle.dumps(enc))
    assert_array_equal(loaded.additive_codes(columns), enc.additive_codes(columns))
    # an unfitted encoder (the estimators' encoder parameter) keeps only its settings
    unfitted = TabularEncoder.from_dict(TabularEncoder("none", 4, 3, (8, 2)).to_dict())
    assert unfitted.to_dict() == {"numeric_encoding": "none", "n_bins": 4, "max_categories": 3,
                                  "additive_bins": (8, 2)}
    assert not hasattr(unfitted, "n_features_in_")
    # a pickled encoder holds plain types only (skops needs only TabularEncoder trusted)
    assert not any(isinstance(v, AdditiveBins) for v in enc.__getstate__().values())


def test_differences_and_union_of_bins_name_the_column():
    enc, columns = _fit("piecewise_linear")
    other, _ = _fit("piecewise_linear", X=TRAIN.iloc[:6])
    assert "knots of column 'a'" in encoders_differ(enc, other)
    std, _ = _fit("standard")
    std_other, _ = _fit("standard", X=TRAIN.iloc[1:])
    assert encoders_differ(std, std_other).startswith("the mean of column 'a'")
    none, _ = _fit("none", X=TRAIN.iloc[:7])
    none_other, _ = _fit("none", X=TRAIN.iloc[1:7])
    # n_bins only matters to the piecewise-linear encoding
    assert encoders_differ(none, _fit("none", X=TRAIN.iloc[:7], n_bins=5)[0]) is None
    assert encoders_differ(none, none_other, additive=False) is None
    assert "additive bins of column 'a'" in encoders_differ(none, none_other)
    union, rows = union_additive_bins([none, none_other])
    for enc_k, rows_k in zip((none, none_other), rows):  # each table on the union's bins
        assert_array_equal(rows_k[union.additive_codes(columns).astype(int)],
                           enc_k.additive_codes(columns))
    assert union.additive_term_ is not none.additive_term_


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 60),
       encoding=st.sampled_from(NUMERIC_ENCODINGS), n_bins=st.integers(1, 8),
       max_categories=st.integers(1, 4))
def test_features_follow_the_kinds_formulas(seed, n, encoding, n_bins, max_categories):
    """The features of a numeric and a categorical column, with missing values, equal the
    formulas of their kind computed here on the present values."""
    rng = np.random.RandomState(seed)
    x = np.round(rng.normal(size=n), int(rng.randint(0, 3)))
    x[rng.rand(n) < 0.2] = nan
    cats = rng.choice(np.array(["p", "q", "r", "s", "t", None], dtype=object), size=n)
    columns, cat = [x, cats], np.array([False, True])
    enc = TabularEncoder(encoding, n_bins, max_categories)._fit_columns(columns, cat)
    out = enc.transform_columns(columns)
    present = ~np.isnan(x)
    xp = x[present]
    num = out[:, : enc.widths_[0] - int(enc.has_missing_[0])]
    if encoding == "none":
        expected = xp[:, None]
    elif encoding == "standard":
        sd = xp.std() if xp.size else 0.0
        expected = ((xp - (xp.mean() if xp.size else 0.0)) / (sd if sd > 0 else 1.0))[:, None]
    elif encoding == "piecewise_linear":
        expected = _hat_features(xp, _knots(xp, n_bins))
    else:
        expected = num[present]  # scikit-learn's transform
        assert num.shape[1] == int(xp.size > 0)
    assert_allclose(num[present], np.asarray(expected, dtype=np.float32), rtol=1e-6, atol=1e-6)
    assert not num[~present].any()
    if enc.has_missing_[0]:
        assert_array_equal(out[:, enc.widths_[0] - 1], ~present)
    # one-hot: the most frequent categories (ties by sorted order), the infrequent feature
    block = out[:, enc.widths_[0]:]
    kept = enc.categories_[1].tolist()
    values, counts = np.unique([v for v in cats if v is not None], return_counts=True)
    order = sorted(zip(-counts, values))[:max_categories]
    assert kept == sorted(v for _, v in order)
    assert bool(enc.has_infrequent_[1]) == (len(values) > len(kept))
    for i, v in enumerate(cats):
        row = np.zeros(block.shape[1])
        if v is None:
            row[-1] = 1.0
        elif v in kept:
            row[kept.index(v)] = 1.0
        else:
            row[len(kept)] = 1.0
        assert_array_equal(block[i], row)

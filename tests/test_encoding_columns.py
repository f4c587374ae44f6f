"""The fitted columns of an encoder: one object per input column holding its own state
(``column_encodings_``), each kind's exact union with columns of its kind, and an encoder
assembled from fitted parts (``TabularEncoder.from_columns``) equal to the fitted one."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import TabularEncoder
from sktree_lmc.encoding._column_encodings import (
    COLUMN_KINDS,
    NUMERIC_ENCODINGS,
    ColumnEncoding,
    OneHotColumns,
    StackedColumns,
    column_state_lists,
    columns_from_state_lists,
    union_column,
)
from sktree_lmc.encoding._common_encoding import common_encoder
from sktree_lmc.encoding._encoding import encoders_differ


def _columns(rng, n):
    x = np.round(rng.standard_normal(n), 2)
    x[rng.rand(n) < 0.1] = np.nan
    cats = rng.choice(np.array(["p", "q", "r", "s", None], dtype=object), size=n)
    return [x, cats], np.array([False, True])


def _fit(encoding, columns, cat, **kw):
    return TabularEncoder(encoding, 6, 2, **kw)._fit_columns(columns, cat, ["x", "c"])


@pytest.mark.parametrize("encoding", list(NUMERIC_ENCODINGS))
def test_each_column_holds_its_state_and_the_encoder_is_its_columns(encoding):
    rng = np.random.RandomState(0)
    columns, cat = _columns(rng, 300)
    enc = _fit(encoding, columns, cat, additive_bins=(4, 16))
    assert [type(c) for c in enc.column_encodings_] == [NUMERIC_ENCODINGS[encoding],
                                                         OneHotColumns]
    # the per-column attributes are read from the columns
    lists = column_state_lists(enc.column_encodings_)
    for key in ("knots_", "center_", "scale_", "categories_"):
        assert len(getattr(enc, key)) == 2
        for a, b in zip(getattr(enc, key), lists[key]):
            assert a is b
    assert enc.categories_[1] is enc.column_encodings_[1].categories_
    assert enc.column_kinds_ is None
    with pytest.raises(AttributeError, match="stacked_"):
        enc.stacked_
    # the state lists give the columns back
    again = columns_from_state_lists(lists, [c.name for c in enc.column_encodings_])
    for a, b in zip(enc.column_encodings_, again):
        assert type(a) is type(b) and a.difference(b, "x") is None
    # an encoder assembled from the fitted parts is the fitted encoder
    built = TabularEncoder.from_columns(
        enc.column_encodings_, enc.has_missing_, categorical=enc.categorical_,
        additive=enc.additive_term_, names=enc.names_, numeric_encoding=encoding, n_bins=6,
        max_categories=2)
    assert encoders_differ(built, enc) is None
    assert built.get_params() == enc.get_params()
    rows, _ = _columns(rng, 50)
    assert_array_equal(built.transform_columns(rows), enc.transform_columns(rows))
    assert_array_equal(built.additive_codes(rows), enc.additive_codes(rows))
    assert sorted(built.to_dict()) == sorted(enc.to_dict())


def test_unfitted_encoder_has_no_columns():
    enc = TabularEncoder()
    assert enc.column_kinds_ is None
    assert not hasattr(enc, "column_encodings_") and not hasattr(enc, "knots_")


@pytest.mark.parametrize("kinds", [("piecewise_linear", "piecewise_linear"),
                                   ("standard", "standard"), ("none", "none"),
                                   ("quantile_normal", "quantile_normal"),
                                   ("standard", "piecewise_linear")])
def test_union_of_columns_reads_every_parent_exactly(kinds):
    """Each parent's features of present values are its maps applied to the union's
    sub-blocks, plus the offset: the union is exact column by column."""
    rng = np.random.RandomState(3)
    x = rng.standard_normal(400) * 3 + 1
    cat = np.array([False])
    parents = [TabularEncoder(kind, 5, additive_bins=None)._fit_columns([part], cat)
               .column_encodings_[0] for kind, part in zip(kinds, (x[:150], x[150:]))]
    union, maps = union_column(parents, "x")
    subs = union.sub_encodings()
    if len(subs) > 1:
        assert isinstance(union, StackedColumns)
    probe = np.concatenate([np.linspace(-15, 15, 61), x[:20]])
    blocks = [np.asarray(sub.features(probe), dtype=np.float64) for sub in subs]
    for parent, parent_maps in zip(parents, maps):
        own = [np.asarray(p.features(probe), dtype=np.float64) for p in parent.sub_encodings()]
        for block, m in zip(own, parent_maps):
            assert_allclose(block, blocks[m.sub] @ m.matrix.T + m.offset, atol=1e-6)


def test_union_of_categories_and_the_additive_rows():
    rng = np.random.RandomState(4)
    columns, cat = _columns(rng, 200)
    a = _fit("none", [c[:100] for c in columns], cat).column_encodings_[1]
    b = OneHotColumns(np.array(["p", "t"], dtype=object), True)
    (union,), maps = OneHotColumns.union([a, b], "c")
    assert list(union.categories_) == sorted(set(a.categories_) | {"p", "t"})
    assert union.has_infrequent_
    values = np.array(["p", "q", "r", "s", "t", "zz"], dtype=object)
    u = np.zeros((len(values), union.width), dtype=np.float32)
    union.transform(values, "c", u)
    for parent, m in zip((a, b), maps):
        own = np.zeros((len(values), parent.width), dtype=np.float32)
        parent.transform(values, "c", own)
        assert_array_equal(own, u @ m.matrix.T)
        rows = union.additive_rows(parent)
        assert len(rows) == union.width + 2  # and the missing and unseen rows


def test_registry_and_pickles_of_plain_data():
    assert set(COLUMN_KINDS) == {*NUMERIC_ENCODINGS, "one_hot", "stacked"}
    for name, kind in COLUMN_KINDS.items():
        assert issubclass(kind, ColumnEncoding) and kind.name == name
    rng = np.random.RandomState(5)
    columns, cat = _columns(rng, 300)
    encoders = [_fit("quantile_normal", [c[:150] for c in columns], cat),
                _fit("quantile_normal", [c[150:] for c in columns], cat)]
    union, _ = common_encoder(encoders)
    assert union.column_kinds_ == ["stacked", "one_hot"]
    assert list(union.stacked_) == [0]
    state = union.__getstate__()
    assert not any(isinstance(v, ColumnEncoding) for v in state.values())
    back = pickle.loads(pickle.dumps(union))
    assert encoders_differ(back, union) is None
    assert_array_equal(back.transform_columns(columns), union.transform_columns(columns))

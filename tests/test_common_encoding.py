"""The union of encoders fitted apart (issue 41): common_encoder, its translations,
stacked columns, their dict layout and export, matching_view and function_view."""

import copy

import numpy as np
import pytest
import torch
from conftest import FAST
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import SoftTreeEnsembleClassifier, TabularEncoder, export_module
from sktree_lmc.encoding._column_encodings import COLUMN_KINDS, NUMERIC_ENCODINGS, StackedColumns
from sktree_lmc.encoding._common_encoding import (
    UNIONS,
    common_encoder,
    feature_scales,
    function_view,
    matching_view,
    probe_columns,
)
from sktree_lmc.encoding._encoding import encoders_differ
from sktree_lmc.export._export import encoder_inputs, export_encoder
from sktree_lmc.merging._bridge import with_params
from sktree_lmc.model._params import TreeParams

KINDS = list(NUMERIC_ENCODINGS)
CATEGORIES = np.array(list("abcdefgh"), dtype=object)
CATEGORICAL = np.array([False, False, False, True])


def _data(rng, n):
    """Four columns: a continuous one with NaN, a discrete one (ties) with
    sentinel codes 96 and 98 on a few rows, a heavy-tailed one, a categorical
    one with NaN and rare categories."""
    x0 = rng.standard_normal(n) * 3 + 1
    x0[rng.rand(n) < 0.1] = np.nan
    x1 = np.round(rng.exponential(2.0, n))
    x2 = rng.standard_cauchy(n)
    p = np.array([0.3, 0.25, 0.2, 0.1, 0.06, 0.05, 0.03, 0.01])
    cat = rng.choice(CATEGORIES, n, p=p).astype(object)
    cat[rng.rand(n) < 0.08] = None
    sentinel = rng.rand(n) < 0.05  # drawn last: the other columns as without it
    x1[sentinel] = rng.choice([96.0, 98.0], int(sentinel.sum()))
    return [x0, x1, x2, cat]


def _rows(columns, idx):
    return [np.asarray(c)[idx] for c in columns]


def _parts(rng, columns, n_parts, split):
    """Row subsets of ``columns``: IID, skewed by column 0 (NaN last), or IID
    with a part that never sees NaN (its NaN rows dropped)."""
    n = len(columns[0])
    order = (np.argsort(np.nan_to_num(columns[0], nan=np.inf), kind="stable")
             if split == "skewed" else rng.permutation(n))
    parts = [_rows(columns, idx) for idx in np.array_split(order, n_parts)]
    if split == "no_nan":
        keep = ~np.isnan(parts[0][0]) & ~np.array([v is None for v in parts[0][3]])
        parts[0] = _rows(parts[0], keep)
    return parts


def _test_rows(rng, columns):
    """The training rows, then rows beyond every fitted range, missing values in
    every column, knots and categories hit exactly, an unseen category."""
    n_extra = 12
    x0 = np.array([-1e3, 1e3, np.nan, 0.0, 1e-9, -5, 5, 0.5, np.nan, 2, 3, 1])
    x1 = np.array([-10, 1e4, 0, np.nan, 1, 2, 3, 30, 4, np.nan, 0.5, 7])
    x2 = np.array([-1e6, 1e6, np.nan, 0, 1, -1, 50, -50, 0.1, 3, np.nan, 2])
    cat = np.array(["zz", None, "a", "h", "g", "b", "unseen", "c", "d", "e", "f", None],
                   dtype=object)
    extra = [x0, x1, x2, cat]
    assert all(len(c) == n_extra for c in extra)
    return [np.concatenate([np.asarray(c, dtype=e.dtype), e]) for c, e in zip(columns, extra)]


def _fit(parts, kinds, *, n_bins=8, max_categories=(4, 32), additive_bins=(4, 16)):
    return [TabularEncoder(kind, n_bins=n_bins, max_categories=max_categories[i % 2],
                           additive_bins=additive_bins)._fit_columns(part, CATEGORICAL)
            for i, (part, kind) in enumerate(zip(parts, kinds))]


def _check_exact(encoders, union, translations, rows, rng):
    """The pre-activation identity with random weights, and the additive one."""
    fu = union.transform_columns(rows).astype(np.float64)
    assert fu.shape == (len(rows[0]), union.n_features_out_)
    for enc, tr in zip(encoders, translations):
        fi = enc.transform_columns(rows).astype(np.float64)
        W = rng.standard_normal((3, 5, enc.n_features_out_)).astype(np.float32)
        b = rng.standard_normal((3, 5)).astype(np.float32)
        W_U, b_U = tr.weights(W, b)
        assert W_U.shape == (3, 5, union.n_features_out_) and W_U.dtype == np.float32
        assert b_U.shape == (3, 5) and b_U.dtype == np.float32
        got = np.einsum("mnf,rf->rmn", W_U.astype(np.float64), fu) + b_U
        want = np.einsum("mnf,rf->rmn", W.astype(np.float64), fi) + b
        scale = np.einsum("mnf,rf->rmn", np.abs(W.astype(np.float64)), np.abs(fi)) + np.abs(b)
        assert np.all(np.abs(got - want) <= 1e-5 * (scale + 1)), np.max(np.abs(got - want))
        assert_allclose(tr.features(fu), fi, rtol=1e-5, atol=1e-5)
        # the translation is block diagonal by input column
        if tr.matrix is not None:
            nz = np.argwhere(tr.matrix != 0)
            assert_array_equal(enc.feature_groups_[nz[:, 0]], union.feature_groups_[nz[:, 1]])
        if enc.additive_bins is None:
            assert tr.additive_rows is None
            continue
        table = rng.standard_normal(enc.n_additive_)
        assert tr.additive_rows.shape == (union.n_additive_,)
        codes_u = union.additive_codes(rows).astype(np.int64)
        codes_i = enc.additive_codes(rows).astype(np.int64)
        assert_array_equal(table[tr.additive_rows][codes_u].sum(axis=1),
                           table[codes_i].sum(axis=1))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       kinds=st.one_of(st.sampled_from(KINDS).map(lambda k: [k] * 3),
                       st.lists(st.sampled_from(KINDS), min_size=3, max_size=3)),
       n_parts=st.sampled_from([2, 3]), split=st.sampled_from(["iid", "skewed", "no_nan"]),
       n_bins=st.integers(2, 12), additive=st.booleans())
# a part without NaN whose heavy-tailed column's mean differs by far more than its scale from
# the other part's: a union centered on the means' mean put float32-losing shifts in the biases
@example(seed=21359258, kinds=["standard"] * 3, n_parts=2, split="no_nan", n_bins=2,
         additive=False)
def test_union_is_exact(seed, kinds, n_parts, split, n_bins, additive):
    """Every row, translated weights on the union give the parent's
    pre-activations; the union's additive rows give the parent's table."""
    rng = np.random.RandomState(seed)
    columns = _data(rng, int(rng.randint(60, 240)))
    parts = _parts(rng, columns, n_parts, split)
    encoders = _fit(parts, kinds[:n_parts], n_bins=n_bins,
                    additive_bins=(4, 16) if additive else None)
    union, translations = common_encoder(encoders)
    assert len(translations) == n_parts
    _check_exact(encoders, union, translations, _test_rows(rng, columns), rng)
    # the union's own invariants
    assert union.feature_groups_.shape == (union.n_features_out_,)
    for j in range(4):
        assert union.has_missing_[j] >= any(e.has_missing_[j] for e in encoders)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("split", ["iid", "skewed", "no_nan"])
def test_each_kind(kind, split):
    rng = np.random.RandomState(0)
    columns = _data(rng, 300)
    for n_parts in (2, 3):
        encoders = _fit(_parts(rng, columns, n_parts, split), [kind] * n_parts)
        union, translations = common_encoder(encoders)
        _check_exact(encoders, union, translations, _test_rows(rng, columns), rng)
        if kind == "quantile_normal":  # no exact union: the transforms side by side
            assert union.column_kinds_[:3] == ["stacked"] * 3
            assert union.column_kinds_[3] == "one_hot"
            assert union.widths_[2] == n_parts
        else:  # an exact union of the same kind
            assert union.column_kinds_ is None
            assert "column_kinds_" not in union.to_dict()
            assert "stacked_" not in union.to_dict()


def test_the_unions_per_kind():
    """What each kind's union is."""
    rng = np.random.RandomState(1)
    columns = _data(rng, 400)
    parts = _parts(rng, columns, 2, "skewed")
    pl = _fit(parts, ["piecewise_linear"] * 2)
    union, _ = common_encoder(pl)
    for j in range(3):
        assert_array_equal(union.knots_[j], np.unique(np.concatenate(
            [e.knots_[j] for e in pl])))
    # the categories: all of them, sorted, beyond max_categories; infrequent if any parent
    assert pl[0].has_infrequent_[3] and not pl[1].has_infrequent_[3]
    assert union.categories_[3].tolist() == sorted(
        set(pl[0].categories_[3].tolist()) | set(pl[1].categories_[3].tolist()))
    assert union.has_infrequent_[3]
    std = _fit(parts, ["standard"] * 2)
    union, (ta, tb) = common_encoder(std)
    # the center between the parents' where their shifts (c - m_i) / s_i are equal and opposite
    (m0, m1), (s0, s1) = ([e.center_[1] for e in std], [e.scale_[1] for e in std])
    assert union.center_[1] == pytest.approx((m0 * s1 + m1 * s0) / (s0 + s1))
    assert (union.center_[1] - m0) / s0 == pytest.approx(-(union.center_[1] - m1) / s1)
    assert union.scale_[1] == pytest.approx(np.mean([e.scale_[1] for e in std]))
    # the shift of a column without missing values needs the union's indicator
    assert not any(e.has_missing_[1] for e in std) and union.has_missing_[1]
    assert ta.offset is not None
    # equal centers and scales: no shift, no indicator
    one = TabularEncoder.from_dict({**std[1].to_dict(), "center_": list(std[0].center_),
                                    "scale_": list(std[0].scale_)})
    union, (ta, tb) = common_encoder([std[0], one])
    assert not union.has_missing_[1] and ta.offset is None and tb.offset is None
    assert set(UNIONS) == set(COLUMN_KINDS) - {"stacked"}


def test_equal_encoders_give_identity():
    rng = np.random.RandomState(2)
    columns = _data(rng, 200)
    for kind in KINDS:
        enc = _fit([columns], [kind])[0]
        twin = TabularEncoder.from_dict(copy.deepcopy(enc.to_dict()))
        union, translations = common_encoder([enc, twin, enc])
        assert union is enc
        W, b = rng.standard_normal((2, 3, enc.n_features_out_)), rng.standard_normal((2, 3))
        for tr in translations:
            assert tr.is_identity
            W_U, b_U = tr.weights(W, b)
            assert W_U is W and b_U is b
            assert_array_equal(tr.additive_rows, np.arange(enc.n_additive_))
        union, translations = common_encoder([enc])
        assert union is enc and translations[0].is_identity


def test_encoders_differing_in_additive_bins_only():
    """Same features, other additive edges: identity weights, the union's bins."""
    rng = np.random.RandomState(11)
    columns = _data(rng, 300)
    a, b = _fit(_parts(rng, columns, 2, "iid"), ["none"] * 2, max_categories=(32, 32))
    assert encoders_differ(a, b, additive=False) is None and encoders_differ(a, b)
    union, translations = common_encoder([a, b])
    assert union.n_features_out_ == a.n_features_out_
    assert all(tr.matrix is None and tr.is_identity for tr in translations)
    assert union.n_additive_ > a.n_additive_
    _check_exact([a, b], union, translations, _test_rows(rng, columns), rng)


def test_mixed_kinds_are_stacked():
    rng = np.random.RandomState(3)
    columns = _data(rng, 300)
    encoders = _fit(_parts(rng, columns, 3, "iid"),
                    ["standard", "piecewise_linear", "standard"])
    union, translations = common_encoder(encoders)
    assert union.numeric_encoding == "standard"
    assert union.column_kinds_ == ["stacked"] * 3 + ["one_hot"]
    sub = [kind for kind, _ in union.stacked_[0]]
    assert sub == ["standard", "piecewise_linear"]  # the two standard ones united
    assert union.widths_[0] == 1 + len(union.stacked_[0][1][1]["knots_"]) + 1
    _check_exact(encoders, union, translations, _test_rows(rng, columns), rng)
    assert union.ramp_directions() is None


def test_union_of_unions():
    rng = np.random.RandomState(4)
    columns = _data(rng, 300)
    a, b, c = _fit(_parts(rng, columns, 3, "skewed"), ["quantile_normal"] * 3)
    ab, _ = common_encoder([a, b])
    abc, (t_ab, t_c) = common_encoder([ab, c])
    assert abc.widths_[2] == 3  # the three transforms, each once
    again, _ = common_encoder([ab, a])  # a's transform is already in ab
    assert encoders_differ(again, ab) is None
    _check_exact([ab, c], abc, [t_ab, t_c], _test_rows(rng, columns), rng)


def test_dict_round_trip_and_encoder_methods():
    rng = np.random.RandomState(5)
    columns = _data(rng, 300)
    encoders = _fit(_parts(rng, columns, 2, "skewed"), ["quantile_normal", "piecewise_linear"])
    union, _ = common_encoder(encoders)
    rows = _test_rows(rng, columns)
    state = union.to_dict()
    assert state["column_kinds_"] == union.column_kinds_ and "stacked_" in state
    back = TabularEncoder.from_dict(copy.deepcopy(state))
    assert encoders_differ(back, union) is None
    assert_array_equal(back.transform_columns(rows), union.transform_columns(rows))
    assert_array_equal(back.additive_codes(rows), union.additive_codes(rows))
    chunks = np.concatenate([c for _, c, _ in union.encode_chunks(rows, chunk_rows=7)])
    assert_array_equal(chunks, union.transform_columns(rows))
    assert encoders_differ(union, encoders[0]) is not None
    assert encoders_differ(encoders[0], union) is not None
    assert not union.is_identity
    # a fitted encoder's layout has no per-column kinds
    assert "column_kinds_" not in encoders[0].to_dict()
    assert COLUMN_KINDS["stacked"] is StackedColumns
    # refitting a union's settings gives a plain encoder again
    refit = copy.deepcopy(union)._fit_columns(columns, CATEGORICAL)
    assert refit.column_kinds_ is None and "stacked_" not in vars(refit)


def test_export_of_a_union_encoder():
    rng = np.random.RandomState(6)
    columns = _data(rng, 300)
    encoders = _fit(_parts(rng, columns, 3, "skewed"),
                    ["quantile_normal", "piecewise_linear", "standard"])
    union, _ = common_encoder(encoders)
    assert "stacked" in union.column_kinds_
    rows = _test_rows(rng, columns)
    X = torch.tensor(encoder_inputs(union, rows))
    module = export_encoder(union)
    with torch.no_grad():
        got = module(X).numpy()
    assert got.dtype == np.float32
    assert_allclose(got, union.transform_columns(rows), rtol=1e-6, atol=1e-6)
    program = torch.export.export(module, (X[:16],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    with torch.no_grad():
        assert_allclose(program.module()(X).numpy(), got, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_onnx_export_of_a_union_encoder(tmp_path):
    """torch.onnx.export and onnxruntime on stacked columns (the portable normal
    quantile), any batch size: within a float32 rounding of ``transform``."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import importlib.util
    import warnings

    dynamo = importlib.util.find_spec("onnxscript") is not None  # torch >= 2.9's exporter
    rng = np.random.RandomState(6)
    columns = _data(rng, 300)
    encoders = _fit(_parts(rng, columns, 3, "skewed"),
                    ["quantile_normal", "piecewise_linear", "standard"])
    union, _ = common_encoder(encoders)
    rows = _test_rows(rng, columns)
    # the module's float32 input: the reference encodes the same float32 values
    rows = [c if j == 3 else c.astype(np.float32).astype(np.float64)
            for j, c in enumerate(rows)]
    X = encoder_inputs(union, rows).astype(np.float32)
    path = tmp_path / "encoder.onnx"
    # optimize=False: the exporter's graph rewrites (most of its time) are not what this checks
    kwargs = (dict(dynamic_shapes=({0: torch.export.Dim("batch")},), optimize=False) if dynamo
              else dict(dynamic_axes={"X": {0: "batch"}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(export_encoder(union), (torch.tensor(X[:16]),), str(path),
                          input_names=["X"], output_names=["F"], dynamo=dynamo, **kwargs)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"X": X})
    expected = union.transform_columns(rows)
    assert np.all(np.abs(out - expected) <= 2e-7 * np.maximum(np.abs(expected), 1))


def test_an_estimator_on_the_union():
    """A fitted classifier moved onto the union (weights, biases, additive table)
    predicts the same, in Python and exported."""
    rng = np.random.RandomState(7)
    columns = _data(rng, 400)
    X = np.empty((400, 4), dtype=object)
    for j, c in enumerate(columns):
        X[:, j] = c
    y = (np.nan_to_num(columns[0]) + columns[1] > 2).astype(int)
    half = np.argsort(np.nan_to_num(columns[0], nan=np.inf), kind="stable")
    kw = dict(FAST, categorical_features=[3], additive_bins=8, random_state=0)
    clfs = [SoftTreeEnsembleClassifier(**kw, numeric_encoding=kind).fit(X[idx], y[idx])
            for kind, idx in zip(["quantile_normal", "piecewise_linear"],
                                 np.array_split(half, 2))]
    union, translations = common_encoder([c.encoder_ for c in clfs])
    for clf, tr in zip(clfs, translations):
        p = clf.get_tree_params()
        W, b = tr.weights(p.split_weight, p.split_bias)
        moved = with_params(clf, TreeParams(W, b, p.leaf_value, p.additive[tr.additive_rows]),
                            encoder_=union)
        assert_allclose(moved.decision_function(X), clf.decision_function(X), atol=1e-5)
        with torch.no_grad():
            out = export_module(moved)(torch.tensor(encoder_inputs(union, columns))).numpy()
        assert_allclose(out, clf.decision_function(X), atol=1e-5)


def test_torch_weights():
    rng = np.random.RandomState(8)
    columns = _data(rng, 200)
    encoders = _fit(_parts(rng, columns, 2, "skewed"), ["standard"] * 2)
    union, (ta, _) = common_encoder(encoders)
    W = rng.standard_normal((2, 3, encoders[0].n_features_out_)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    W_t, b_t = ta.weights(torch.tensor(W), torch.tensor(b))
    W_n, b_n = ta.weights(W, b)
    assert isinstance(W_t, torch.Tensor) and W_t.dtype == torch.float32
    assert_array_equal(W_t.numpy(), W_n)
    assert_array_equal(b_t.numpy(), b_n)


def test_matching_view():
    rng = np.random.RandomState(9)
    columns = _data(rng, 300)
    encoders = _fit(_parts(rng, columns, 2, "iid"), ["quantile_normal"] * 2)
    union, (ta, tb) = common_encoder(encoders)
    P = matching_view(union)
    # the numeric columns' two transforms summed into one feature each
    numeric = int(encoders[0].widths_[:3].sum())
    assert_array_equal(encoders[0].widths_[:3], encoders[1].widths_[:3])
    assert P.shape == (union.n_features_out_, numeric + union.widths_[3])
    assert_array_equal(P.sum(axis=1), 1)
    # each parent's weights land where the other's do: the parents' own layout
    for enc, tr in zip(encoders, (ta, tb)):
        W = rng.standard_normal((1, 1, enc.n_features_out_))
        assert_allclose((tr.weights(W, np.zeros((1, 1)))[0] @ P)[..., :numeric],
                        W[..., :numeric])
    plain = _fit([columns], ["piecewise_linear"])[0]
    assert_array_equal(matching_view(plain), np.eye(plain.n_features_out_))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       kinds=st.lists(st.sampled_from(KINDS), min_size=2, max_size=3))
def test_function_view_inner_products_are_the_splits_functions_on_probe_rows(seed, kinds):
    """(W @ L) @ (V @ L).T is the mean over the probe rows of the products of the
    splits' per-column functions, for the union of encoders fitted apart (stacked
    columns, hat functions) and for one encoder."""
    rng = np.random.RandomState(seed % 2**31)
    columns = _data(rng, 300)
    encoders = _fit(_parts(rng, columns, len(kinds), "iid"), kinds)
    union, _ = common_encoder(encoders)
    for enc in (union, encoders[0]):
        L = function_view(enc, 512)
        assert L.shape == (enc.n_features_out_, enc.n_features_out_)
        probes = [np.zeros(512) if c is None else c for c in probe_columns(enc, 512)]
        X = enc.transform_columns(probes).astype(np.float64)
        W, V = rng.standard_normal((2, 6, enc.n_features_out_))
        # a missing indicator (zero on the probe rows) keeps a scale of 1 in the view
        indicators = np.flatnonzero(X.any(axis=0) == 0)
        W[:, indicators] = 0.0
        want = np.zeros((6, 6))
        for j in range(enc.n_features_in_):
            f = enc.feature_groups_ == j
            want += (X[:, f] @ W[:, f].T).T @ (X[:, f] @ V[:, f].T) / len(X)
        assert_allclose((W @ L) @ (V @ L).T, want, rtol=1e-6, atol=1e-8 * np.abs(want).max())
        # block diagonal by input column
        nz = np.argwhere(L != 0)
        assert_array_equal(enc.feature_groups_[nz[:, 0]], enc.feature_groups_[nz[:, 1]])


def test_function_view_of_single_feature_columns_is_feature_scales():
    """Columns of one feature (quantile-normal, standard) and one-hot columns (features
    never nonzero together): the view is diag(feature_scales) exactly, the scales weight
    matching used before the view; a stacked column's block is not diagonal."""
    rng = np.random.RandomState(11)
    columns = _data(rng, 400)
    for kind in ("quantile_normal", "standard"):
        enc = _fit([columns], [kind])[0]
        assert_array_equal(function_view(enc), np.diag(feature_scales(enc)))
    encoders = _fit(_parts(rng, columns, 2, "iid"), ["quantile_normal"] * 2)
    union, _ = common_encoder(encoders)
    L = function_view(union)
    assert_array_equal(np.diag(L @ L.T) > 0, True)
    stacked = np.flatnonzero(union.feature_groups_ == 0)[:2]  # the two sites' transforms
    assert L[stacked[0], stacked[1]] > 0
    # the two sites' transforms agree closely: their weights meet in the view
    w = np.zeros(union.n_features_out_)
    w[stacked[0]], v = 1.0, np.zeros(union.n_features_out_)
    v[stacked[1]] = 1.0
    cosine = (w @ L) @ (v @ L) / np.linalg.norm(w @ L) / np.linalg.norm(v @ L)
    assert 0.95 < cosine <= 1.0 + 1e-12


def test_incompatible_encoders():
    rng = np.random.RandomState(10)
    columns = _data(rng, 200)
    enc = _fit([columns], ["standard"])[0]
    fewer = TabularEncoder("standard")._fit_columns(columns[:3], CATEGORICAL[:3])
    with pytest.raises(ValueError, match="encoder 1 has 3 input columns, encoder 0 has 4"):
        common_encoder([enc, fewer])
    flipped = TabularEncoder("standard", additive_bins=8)._fit_columns(
        [columns[0], columns[1], columns[2], np.arange(200.0)], np.zeros(4, dtype=bool),
        names=["a", "b", "c", "d"])
    with pytest.raises(ValueError) as info:
        common_encoder([enc, flipped])
    message = str(info.value)
    for part in ("column names of encoder 1", "column 3 is categorical in encoder 0 and "
                 "numeric in encoder 1", "additive_bins is 8 in encoder 1 and (4, 16) in "
                 "encoder 0"):
        assert part in message
    with pytest.raises(ValueError, match="at least one"):
        common_encoder([])
    with pytest.raises(ValueError, match="others do not"):
        common_encoder([enc, None])
    assert common_encoder([None, None])[0] is None

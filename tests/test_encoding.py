"""The input encoding of the estimators (``encoder_``): raw, mixed and missing
tabular data in, and what merging requires of two models' encoders."""

import pickle

import numpy as np
import pytest
from conftest import FAST
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.compose import ColumnTransformer
from sklearn.datasets import make_classification
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import SplineTransformer, StandardScaler

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TabularEncoder,
    interpolation_curve,
    merge_estimators,
    refit_leaves,
)
from sktree_lmc.encoding._column_encodings import _hat_features, _knots
from sktree_lmc.encoding._encoding import encoders_differ, to_columns

pd = pytest.importorskip("pandas")

KW = {**FAST, "max_epochs": 4, "random_state": 0}


def clf(**kw):
    return SoftTreeEnsembleClassifier(**{**KW, **kw})


@pytest.fixture(scope="module")
def mixed():
    """A DataFrame with numeric, string, category and missing columns."""
    rng = np.random.RandomState(0)
    n = 300
    x0 = rng.normal(size=n) * 1000 + 5000  # a raw, large-valued column
    x1 = rng.exponential(size=n)
    city = rng.choice(["paris", "lyon", "nice", "lille"], size=n).astype(object)
    color = pd.Categorical(rng.choice(["red", "green", "blue"], size=n))
    x1_missing = x1.copy()
    x1_missing[rng.rand(n) < 0.1] = np.nan
    city[rng.rand(n) < 0.1] = None
    y = ((x0 > 5000) ^ (city == "paris")).astype(int)
    X = pd.DataFrame({"x0": x0, "x1": x1_missing, "city": city, "color": color,
                      "count": pd.array(rng.randint(0, 5, size=n), dtype="Int64")})
    X.loc[3, "count"] = pd.NA
    return X, y


# -- the piecewise-linear encoding ----------------------------------------------------------


def test_hat_features_are_scikit_learns_degree_1_splines():
    """On a continuous column (distinct quantile knots) the encoding is exactly
    SplineTransformer(degree=1) on the same knots, constant extrapolation."""
    rng = np.random.RandomState(0)
    x = rng.lognormal(size=500)
    knots = _knots(x, 16)
    assert len(knots) == 17
    spline = SplineTransformer(degree=1, knots=knots.reshape(-1, 1), extrapolation="constant")
    x_test = np.r_[x[:50], knots, x.min() - 5, x.max() + 5]
    expected = spline.fit(x.reshape(-1, 1)).transform(x_test.reshape(-1, 1))
    assert_allclose(_hat_features(x_test, knots), expected, atol=1e-6)


def test_discrete_columns_get_their_distinct_knots():
    x = np.repeat([0.0, 1.0, 2.0], [100, 5, 1])
    knots = _knots(x, 16)
    assert_array_equal(knots, [0.0, 1.0, 2.0])  # SplineTransformer would need 17
    feats = _hat_features(np.array([0.0, 0.5, 2.0]), knots)
    assert_allclose(feats, [[1, 0, 0], [0.5, 0.5, 0], [0, 0, 1]])
    assert _hat_features(np.ones(3), np.array([1.0])).shape == (3, 0)  # a constant column


@pytest.mark.parametrize("encoding", ["piecewise_linear", "quantile_normal", "standard", "none"])
def test_each_numeric_encoding_fits_raw_large_valued_features(encoding):
    X, y = make_classification(n_samples=400, n_features=5, random_state=0)
    X = X * 1e4 + 1e5
    est = clf(numeric_encoding=encoding, max_epochs=20).fit(X, y)
    width = {"piecewise_linear": 17, "quantile_normal": 1, "standard": 1, "none": 1}[encoding]
    assert est.encoder_.n_features_out_ == 5 * width
    assert est.tree_params_.split_weight.shape[2] == 5 * width
    if encoding != "none":  # the raw scale saturates every split of the identity encoding
        assert est.score(X, y) > 0.8


def test_the_identity_encoding_leaves_values_unchanged():
    X = np.random.RandomState(0).normal(size=(20, 3)) * 1e3
    est = clf(numeric_encoding="none").fit(X, np.arange(20) % 2)
    assert est.encoder_.is_identity
    # the trees' features; the additive term's bin codes (default additive_bins) apart
    n_tree_features = est.tree_params_.split_weight.shape[2]
    assert n_tree_features == 3
    assert_array_equal(est._encoded_input(X).X[:, :n_tree_features], X.astype(np.float32))


# -- mixed data, missing values, categories --------------------------------------------------


def test_dataframe_with_strings_categories_and_missing_values_fits_and_predicts(mixed):
    X, y = mixed
    est = clf(n_estimators=32, depth=3, max_epochs=60, early_stopping=False).fit(X, y)
    enc = est.encoder_
    assert_array_equal(enc.categorical_, [False, False, True, True, False])
    assert_array_equal(enc.has_missing_, [False, True, True, False, True])
    assert list(enc.categories_[2]) == ["lille", "lyon", "nice", "paris"]
    assert est.predict(X).shape == (len(X),)
    assert est.score(X, y) > 0.8  # needs both the raw x0 and the city column
    assert list(est.feature_names_in_) == list(X.columns)
    proba = est.predict_proba(X)
    assert np.isfinite(proba).all()


def test_unknown_categories_and_all_missing_columns_at_predict_time(mixed):
    X, y = mixed
    est = clf().fit(X, y)
    X_new = X.head(5).copy()
    X_new["city"] = ["tokyo", "rome", None, "paris", "oslo"]
    X_new["x0"] = np.nan  # no missing value in fit: encoded as zeros, no indicator
    X_new["x1"] = np.nan
    proba = est.predict_proba(X_new)
    assert np.isfinite(proba).all()
    groups = est.encoder_.feature_groups_
    encoded = est._encoded_input(X_new).X[:, : len(groups)]  # the trees' features
    city = encoded[:, groups == 2]
    # 4 categories and the missing indicator; unknown ones are all zeros (no infrequent
    # column: every category of fit was kept)
    assert_array_equal(city[0], 0) and assert_array_equal(city[1], 0)
    assert city[2, -1] == 1 and city[3, 3] == 1
    assert_array_equal(encoded[:, groups == 0], 0)
    assert_array_equal(encoded[:, groups == 1][:, -1], 1)  # x1's missing indicator


def test_rare_categories_share_the_infrequent_feature():
    rng = np.random.RandomState(0)
    cats = np.array([f"c{i}" for i in rng.zipf(1.5, size=500) % 50], dtype=object)
    X = pd.DataFrame({"c": cats, "x": rng.normal(size=500)})
    y = rng.randint(0, 2, size=500)
    est = clf(max_categories=5).fit(X, y)
    enc = est.encoder_
    assert len(enc.categories_[0]) == 5 and enc.has_infrequent_[0]
    rows = est._encoded_input(pd.DataFrame({"c": ["never-seen"], "x": [0.0]})).X
    assert rows[0, 5] == 1  # the infrequent feature


def test_column_order_and_names_are_checked(mixed):
    X, y = mixed
    est = clf().fit(X, y)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(X[X.columns[::-1]])
    with pytest.raises(ValueError, match="missing:\n- color\n- count"):
        est.predict(X.iloc[:, :3])
    with pytest.raises(ValueError, match="X has 3 features, but .* is expecting 5"):
        est.predict(X.iloc[:, :3].to_numpy())


def test_categorical_features_by_index_mask_and_name(mixed):
    X, y = mixed
    masks = [[2, 3], [False, False, True, True, False], ["city", "color"]]
    fitted = [clf(categorical_features=m).fit(X, y) for m in masks]
    for est in fitted:
        assert_array_equal(est.encoder_.categorical_, [False, False, True, True, False])
    assert_array_equal(fitted[0].predict_proba(X), fitted[2].predict_proba(X))
    # a numeric column declared categorical: one feature per value
    est = clf(categorical_features=[2, 3, 4]).fit(X, y)
    assert est.encoder_.categorical_[4] and len(est.encoder_.categories_[4]) == 5


@pytest.mark.parametrize("bad, match", [
    (["nope"], "does not have"),
    ([7], "outside"),
    ([True, False], "length 5"),
])
def test_bad_categorical_features(bad, match, mixed):
    X, y = mixed
    with pytest.raises(ValueError, match=match):
        clf(categorical_features=bad).fit(X, y)


def test_strings_in_a_numpy_object_array_are_categorical():
    X = np.array([["a", 1.0], ["b", 2.0], ["a", np.nan], ["c", 0.5]] * 10, dtype=object)
    y = np.array([0, 1, 0, 1] * 10)
    est = clf().fit(X, y)
    assert_array_equal(est.encoder_.categorical_, [True, False])
    assert est.predict(X).shape == (40,)


def test_a_string_in_a_numeric_column_is_a_clear_error(mixed):
    X, y = mixed
    est = clf(categorical_features=None)
    with pytest.raises(ValueError, match="Column 'city' is numeric but holds a value"):
        est.fit(X, y)


def test_missing_values_are_accepted_and_infinity_is_not():
    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    X[::7, 1] = np.nan
    est = clf().fit(X, y)
    assert est.encoder_.has_missing_.tolist() == [False, True, False, False]
    assert np.isfinite(est.predict_proba(X)).all()
    X[0, 2] = np.inf
    with pytest.raises(ValueError, match="infinity in column 2"):
        est.predict(X)


def test_predictions_do_not_depend_on_the_encoding_chunk(mixed, monkeypatch):
    X, y = mixed
    est = clf().fit(X, y)
    whole = est.predict_proba(X)
    monkeypatch.setattr("sktree_lmc.encoding._encoding.ENCODE_CHUNK_ROWS", 64)
    monkeypatch.setattr(TabularEncoder.encode_chunks, "__defaults__", (64, None, False, None))
    assert_array_equal(est.predict_proba(X), whole)


def test_encoded_models_pickle_with_their_encoder(mixed):
    X, y = mixed
    est = clf().fit(X, y)
    loaded = pickle.loads(pickle.dumps(est))
    assert isinstance(loaded.encoder_, TabularEncoder)
    assert encoders_differ(loaded.encoder_, est.encoder_) is None
    assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))


def test_to_columns_keeps_numeric_arrays_numeric():
    cols, cat = to_columns(np.arange(6.0).reshape(3, 2))
    assert not cat.any() and cols[0].dtype == np.float64


# -- merging encoded models and Pipelines ------------------------------------------------------


def test_models_fitted_on_the_same_rows_merge(mixed):
    X, y = mixed
    a, b = clf(random_state=1).fit(X, y), clf(random_state=2).fit(X, y)
    assert encoders_differ(a.encoder_, b.encoder_) is None
    for aligner in ("wm", "am", "naive"):
        merged = merge_estimators(a, b, aligner=aligner, X=X)
        assert merged.predict_proba(X).shape == (len(X), 2)
        assert encoders_differ(merged.encoder_, a.encoder_) is None
    assert_allclose(merge_estimators(a, b, lam=0.0).predict_proba(X), a.predict_proba(X),
                    atol=1e-6)
    curve = interpolation_curve(a, b, X, y, lambdas=3)
    assert curve.scores["accuracy"].shape == (3,)
    refitted = refit_leaves(merge_estimators(a, b), X, y, max_iter=5)
    assert refitted.predict(X).shape == (len(X),)


def test_models_with_different_encoders_merge_on_their_common_encoding(mixed):
    """Issue 41: encoders fitted on other rows, or with other settings, no longer stop a
    merge: the models are re-expressed on a common encoding, exactly (the endpoints are
    the models). Only a different n_bins / max_categories setting of the same rows too."""
    X, y = mixed
    a = clf(random_state=1).fit(X, y)
    pairs = [
        (a, clf(random_state=2).fit(X.iloc[:200], y[:200])),  # other quantiles
        (clf(random_state=1, numeric_encoding="piecewise_linear").fit(X, y),
         clf(random_state=2, numeric_encoding="piecewise_linear").fit(X.iloc[:200], y[:200])),
        (clf(random_state=1, numeric_encoding="piecewise_linear").fit(X, y),
         clf(random_state=2, numeric_encoding="piecewise_linear", n_bins=8).fit(X, y)),
        (a, clf(random_state=2, max_categories=2).fit(X, y)),  # other categories
        (a, clf(random_state=2, numeric_encoding="standard").fit(X, y)),  # other kinds
    ]
    for first, second in pairs:
        assert encoders_differ(first.encoder_, second.encoder_) is not None
        for lam, ref in ((0.0, first), (1.0, second)):
            assert_array_equal(merge_estimators(first, second, lam=lam).predict(X),
                               ref.predict(X))
    # n_bins is a setting of the piecewise-linear encoding only
    a8 = clf(random_state=2, n_bins=8).fit(X, y)
    assert encoders_differ(a.encoder_, a8.encoder_) is None
    # what no common encoding expresses is still an error
    with pytest.raises(ValueError, match="number of features"):
        ModelAligner().fit([a, clf(random_state=2).fit(X.iloc[:, :-1], y)])


def _pipe(seed, scaler=None, **kw):
    return make_pipeline(scaler or StandardScaler(),
                         clf(numeric_encoding="none", random_state=seed, **kw))


def test_pipelines_with_equal_preprocessing_merge_into_a_pipeline():
    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    a, b = _pipe(1).fit(X, y), _pipe(2).fit(X, y)
    merged = merge_estimators(a, b, lam=0.5)
    assert type(merged) is type(a) and merged.steps[0][1] is not a.steps[0][1]
    assert merged.predict(X).shape == (len(X),)
    assert_allclose(merge_estimators(a, b, lam=0.0).predict_proba(X), a.predict_proba(X),
                    atol=1e-6)
    # activation matching and curves see the preprocessed rows
    merged_am = merge_estimators(a, b, aligner="am", X=X)
    assert merged_am.score(X, y) > 0.5
    curve = interpolation_curve(a, b, X, y, lambdas=3, aligner="am")
    assert_allclose(curve.scores["accuracy"][[0, -1]],
                    [100 * a.score(X, y), 100 * b.score(X, y)])
    aligned = ModelAligner().fit_align([a, b])
    assert_allclose(aligned[1].predict_proba(X), b.predict_proba(X), atol=1e-5)
    refitted = refit_leaves(merged, X, y, max_iter=5)
    assert type(refitted) is type(a) and refitted.predict(X).shape == (len(X),)
    three = merge_estimators([a, b, merged], weights=[1, 1, 2])
    assert three.predict(X).shape == (len(X),)


def test_pipelines_with_different_preprocessing_do_not_merge():
    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    a = _pipe(1).fit(X, y)
    b = _pipe(2).fit(X[:150], y[:150])
    with pytest.raises(ValueError, match="differ in their preprocessing step 'standardscaler'"):
        merge_estimators(a, b)
    with pytest.raises(TypeError, match="Pipelines with Pipelines"):
        merge_estimators(a, clf().fit(X, y))
    ct = make_pipeline(ColumnTransformer([("s", StandardScaler(), [0, 1])]),
                       SoftTreeEnsembleRegressor(**KW)).fit(X, y.astype(float))
    with pytest.raises(ValueError, match="different steps|preprocessing"):
        merge_estimators(a, ct)


def test_piecewise_linear_splits_start_on_a_ramp_over_the_knots():
    """Each (tree, node, column) block of initial weights is c * linspace(-1, 1):
    the initial split thresholds a quantile-like transform of the value."""
    import torch

    X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    X[::5, 0] = np.nan  # a missing indicator, which keeps its own random weight
    est = clf(numeric_encoding="piecewise_linear").fit(X, y)
    from sktree_lmc.training._start import init_module

    module = init_module(est.architecture_, est.n_estimators, est.encoder_, 2,
                         torch.Generator().manual_seed(0), "cpu", leaf_init=est.leaf_init,
                         split_init=est.split_init)
    w = module.split_weight.detach().numpy()
    groups = est.encoder_.feature_groups_
    for j in range(4):
        cols = np.flatnonzero(groups == j)
        if j == 0:
            cols = cols[:-1]  # the indicator
        ramp = np.linspace(-1, 1, len(cols))
        block = w[:, :, cols]
        coef = block[:, :, -1:]
        assert_allclose(block, coef * ramp, atol=1e-6)
        assert np.abs(coef).max() > 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, 1.0, -2.5])),
                min_size=1, max_size=60),
       st.sampled_from([2, 3, 16, 17, 64, 4096]))
def test_sorted_quantiles_are_numpys_bit_for_bit(values, n_bins):
    from sktree_lmc.encoding._column_encodings import sorted_quantiles

    x = np.asarray(values)
    big = np.round(np.random.default_rng(len(values)).normal(size=10_000), 2)  # with ties
    for levels in (np.linspace(0.0, 1.0, n_bins + 1), np.linspace(0.0, 1.0, n_bins + 1)[1:-1]):
        assert_array_equal(sorted_quantiles(np.sort(x), levels), np.quantile(x, levels))
        assert_array_equal(sorted_quantiles(np.sort(big), levels), np.quantile(big, levels))


_any_float = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_any_float, st.floats(-1.0, 1.0), st.sampled_from([0.0, 1.0, -2.5])),
                min_size=1, max_size=200),
       st.lists(st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, 1.0, -2.5])),
                max_size=100),
       st.integers(1, 4), st.integers(0, 2**16))
@example(knots=[0.0, -0.0], values=[-0.0, 0.0], cells_per_knot=1, seed=0)  # signed zeros
def test_sorted_search_is_numpys_searchsorted(knots, values, cells_per_knot, seed):
    """The grid's search gives ``np.searchsorted(knots, x, side="right")`` for
    any sorted finite knots (repeated, subnormal, spanning float64's range)
    and any value (on a knot, next to one, infinite, out of range)."""
    from sktree_lmc.encoding._column_encodings import SortedSearch

    k = np.sort(np.asarray(knots, dtype=np.float64))
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # the neighbours of float64's largest knots
        near = [np.nextafter(k, np.inf), np.nextafter(k, -np.inf)]
        # values drawn between the extreme knots, when they differ (not 0.0 and -0.0) and
        # their distance is finite
        spread = np.isfinite(k[-1] - k[0]) and k[-1] > k[0]
    x = np.concatenate([np.asarray(values, dtype=np.float64), k, *near, [np.inf, -np.inf],
                        rng.uniform(k[0], k[-1], 200) if spread else []])
    search = SortedSearch(k, cells_per_knot)
    assert_array_equal(search(x), np.searchsorted(k, x, side="right"))
    # quantiles of heavy-tailed data: cells of many knots next to empty ones
    heavy = np.unique(np.quantile(np.exp(rng.normal(0, 4, 2000)), np.linspace(0, 1, 500)))
    probe = np.concatenate([heavy, np.nextafter(heavy, np.inf), np.exp(rng.normal(0, 4, 500))])
    assert_array_equal(SortedSearch(heavy, cells_per_knot)(probe),
                       np.searchsorted(heavy, probe, side="right"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e4, 1e4), st.sampled_from([0.0, 1.0, -2.5])),
                min_size=1, max_size=80),
       st.integers(0, 2**16))
def test_quantile_table_is_sklearns_quantile_transform(values, seed):
    """The vectorized quantile transform (one search, one gather) gives
    sklearn's normal scores, ties, bounds and out-of-range values included
    (within float64 rounding: an ulp of ``p`` near 0 or 1 moves ``ndtri(p)``
    by ~1e-11)."""
    from sklearn.preprocessing import QuantileTransformer

    from sktree_lmc.encoding._column_encodings import _quantile_table

    x = np.asarray(values)
    qt = QuantileTransformer(output_distribution="normal", n_quantiles=min(1000, len(x)),
                             subsample=None).fit(x[:, None])
    rng = np.random.default_rng(seed)
    q = qt.quantiles_[:, 0]
    probe = np.concatenate([x, q, q + 1e-8, q - 1e-8, np.nextafter(q, np.inf),
                            rng.uniform(x.min() - 1, x.max() + 1, 3000)])
    expected = qt.transform(probe[:, None])[:, 0]
    got, none = _quantile_table(qt)(probe)
    assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert none is None and _quantile_table(qt) is _quantile_table(qt)  # made once
    # with the additive term's edges in the same search: the same scores, and the bins
    edges = np.unique(np.round(rng.normal(size=int(rng.integers(1, 40))), 1) * x.std())
    scores, codes = _quantile_table(qt, edges)(probe)
    assert_array_equal(scores, got)
    assert_array_equal(codes, np.searchsorted(edges, probe, side="right"))


@pytest.mark.parametrize("additive_bins", [(16, 64, 4096), 32, (5, 7)])
def test_encode_equals_transform_and_codes(mixed, additive_bins):
    """``encode`` (one search per quantile column for its features and its
    additive bins) gives what ``transform_columns`` and ``additive_codes``
    give apart, with missing values, categories and resolutions that nest or
    not, for every code column or a subset."""
    rng = np.random.default_rng(0)
    X = mixed[0].copy()
    X["dense"] = np.round(rng.normal(size=len(X)), 1)  # ties on the quantiles
    enc = TabularEncoder("quantile_normal", additive_bins=additive_bins).fit(X)
    columns = to_columns(X)[0]
    J = len(enc.additive_sources_)
    for code_columns in (None, np.arange(0, J, 2)):
        for start, stop in ((0, None), (3, 17)):
            encoded, codes = enc.encode(columns, start, stop, code_columns=code_columns)
            assert_array_equal(encoded, enc.transform_columns(columns, start, stop))
            assert_array_equal(codes, enc.additive_codes(columns, start, stop,
                                                         code_columns=code_columns))
    assert TabularEncoder("quantile_normal", additive_bins=None).fit(X).encode(columns)[1] is None

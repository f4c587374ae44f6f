"""Issue 41, "A public shared encoder": ``TabularEncoder`` is a scikit-learn transformer.

It is fitted on ``X`` (an array or a DataFrame, as the estimators take it), transforms ``X``
into the trees' float32 features, names them, is a Pipeline step, and, fitted once, is the
shared encoding of models fitted apart (``encoder=``) that then merge at no extra feature
cost. The package's own callers use the column-array API (``_fit_columns``,
``transform_columns``), whose results are unchanged: the public fit of ``X`` is that fit of
``to_columns(X)``.
"""

import copy
import pickle

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TabularEncoder,
    merge_estimators,
)
from sktree_lmc.encoding._common_encoding import common_encoder
from sktree_lmc.encoding._encoding import (
    SKETCH_SIZE,
    check_categorical_features,
    encoders_differ,
    summarize,
    to_columns,
)

FAST = dict(n_estimators=4, depth=2, max_epochs=2, device="cpu")

#: check name -> (numeric encodings it applies to, reason it fails).
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        ("standard", "quantile_normal"),
        "The encoder's fit is unweighted: sample_weight only leaves the rows of zero weight "
        "out (of the quantiles, moments, categories, missing flags and additive bins, as "
        "the estimators' own encoder does), and every other row counts once. A weight of 2 "
        "is therefore not a repeated row: the mean and scale ('standard') and the "
        "quantiles ('quantile_normal') of the repeated rows differ. The piecewise-linear "
        "knots and 'none' pass on this check's 15 rows (at most n_bins + 1 distinct values "
        "per column: every value is a knot, repeated or not). The zero-weight half of the "
        "contract is check_sample_weights_invariance(kind=zeros), which passes.",
    ),
}

ENCODERS = [
    TabularEncoder(),
    TabularEncoder("standard"),
    TabularEncoder("quantile_normal"),
    TabularEncoder("none", additive_bins=8),
]


def expected_failed_checks(encoder):
    """The entries of :data:`EXPECTED_FAILED_CHECKS` that apply to ``encoder``."""
    return {check: reason for check, (encodings, reason) in EXPECTED_FAILED_CHECKS.items()
            if encoder.numeric_encoding in encodings}


@parametrize_with_checks(ENCODERS, expected_failed_checks=expected_failed_checks,
                         xfail_strict=True)
def test_sklearn_compatible_transformer(estimator, check):
    check(estimator)


def test_expected_failures_name_real_checks():
    from sklearn.utils.estimator_checks import _yield_all_checks

    names = {getattr(check, "func", check).__name__
             for check in _yield_all_checks(TabularEncoder("standard"), legacy=True)}
    for check, (_, reason) in EXPECTED_FAILED_CHECKS.items():
        assert check in names and len(reason) > 40, check


def _mixed(n=400, seed=0):
    """Numbers, a string column with missing values, a numeric column with NaN, datetimes."""
    rng = np.random.RandomState(seed)
    X = pd.DataFrame({
        "a": rng.normal(size=n),
        "city": rng.choice(["paris", "lyon", "nice", "brest", "lille"], size=n).astype(object),
        "c": rng.exponential(size=n),
        "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.randint(0, 900, n), unit="D"),
    })
    X.loc[rng.rand(n) < 0.2, "city"] = None
    X.loc[rng.rand(n) < 0.1, "c"] = np.nan
    y = ((X["a"] + (X["city"] == "paris") - 0.5 * X["c"].fillna(0)) > 0.3).astype(int)
    return X, y.to_numpy()


# -- the public fit is the estimators' fit of the column arrays -------------------------------
@pytest.mark.parametrize("encoding", ["piecewise_linear", "quantile_normal", "standard", "none"])
@pytest.mark.parametrize("categorical_features", ["from_dtype", [1], ["city", "a"],
                                                  [False, True, False, True]])
def test_fit_is_the_estimators_encoder(encoding, categorical_features):
    """``TabularEncoder(...).fit(X)`` is the encoder an estimator with the same settings fits
    inside ``fit``, and ``transform(X)`` the features its trees see (bit for bit)."""
    X, y = _mixed()
    settings = dict(numeric_encoding=encoding, n_bins=8, max_categories=3, additive_bins=(4, 16),
                    categorical_features=categorical_features)
    enc = TabularEncoder(**settings).fit(X)
    est = SoftTreeEnsembleClassifier(**FAST, **settings, random_state=0).fit(X, y)
    assert encoders_differ(enc, est.encoder_) is None
    columns, by_dtype = to_columns(X)
    assert_array_equal(enc.transform(X), est.encoder_.transform_columns(columns))
    assert_array_equal(enc.transform(X), est._encoded_input(X).X[:, :enc.n_features_out_])
    mask = check_categorical_features(categorical_features, 4, X.columns, by_dtype)
    assert_array_equal(enc.categorical_, mask)
    out = enc.transform(X)
    assert out.dtype == np.float32 and out.shape == (len(X), enc.n_features_out_)
    assert_array_equal(enc.feature_names_in_, ["a", "city", "c", "when"])
    assert enc.n_features_in_ == 4


def test_fit_transform_arrays_and_zero_weights():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(200, 3))
    X[rng.rand(200) < 0.1, 1] = np.nan
    enc = TabularEncoder(n_bins=4).fit(X)
    assert not hasattr(enc, "feature_names_in_") and enc.names_ is None
    assert_array_equal(enc.fit_transform(X), enc.transform(X))
    columns, categorical = to_columns(X)
    direct = TabularEncoder(n_bins=4)._fit_columns(columns, categorical)
    assert encoders_differ(enc, direct) is None
    assert_array_equal(enc.transform(X), direct.transform_columns(columns))
    # rows of zero weight are left out; other weights do not matter
    w = rng.randint(0, 3, 200).astype(float)
    weighted = TabularEncoder(n_bins=4).fit(X, sample_weight=w)
    assert encoders_differ(weighted, TabularEncoder(n_bins=4).fit(X[w > 0])) is None
    # a string NumPy array: its string columns are categorical
    S = np.array([["a", 1.0], ["b", 2.0], [None, 3.0], ["a", np.nan]], dtype=object)
    enc = TabularEncoder("piecewise_linear", n_bins=2).fit(S)
    assert enc.categorical_.tolist() == [True, False]
    assert enc.get_feature_names_out().tolist() == [
        "x0=a", "x0=b", "x0_missing", "x1_knot0", "x1_knot1", "x1_knot2", "x1_missing"]


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_errors_are_clear():
    X, _ = _mixed(50)
    with pytest.raises(NotFittedError):
        TabularEncoder().transform(X)
    with pytest.raises(NotFittedError):
        TabularEncoder().get_feature_names_out()
    enc = TabularEncoder().fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but TabularEncoder is expecting 4"):
        enc.transform(X.iloc[:, :3].to_numpy())
    with pytest.raises(ValueError, match="feature names should match"):
        enc.transform(X.rename(columns={"c": "d"}))
    with pytest.raises(ValueError, match="feature names should match"):
        enc.transform(X[["city", "a", "c", "when"]])
    with pytest.raises(ValueError, match="1D array|2D array"):
        enc.transform(X["a"].to_numpy())
    with pytest.raises(ValueError, match="X has no feature names"):
        TabularEncoder(categorical_features=["city"]).fit(X.to_numpy())
    with pytest.raises(ValueError, match="names columns that X does not have"):
        TabularEncoder(categorical_features=["town"]).fit(X)
    with pytest.raises(InvalidParameterError, match="n_bins"):
        TabularEncoder(n_bins=0).fit(X)
    with pytest.raises(InvalidParameterError, match="numeric_encoding"):
        TabularEncoder("spline").fit(X)
    with pytest.raises(ValueError, match="additive_bins"):
        TabularEncoder(additive_bins=(4, 4)).fit(X)
    with pytest.raises(ValueError, match="Column 'city' is numeric"):
        TabularEncoder(categorical_features=None).fit(X)


def test_tags():
    tags = TabularEncoder().__sklearn_tags__()
    assert tags.input_tags.allow_nan
    assert tags.transformer_tags.preserves_dtype == ["float32"]
    assert not tags.input_tags.categorical  # integer-coded categories only, in scikit-learn


# -- feature names ------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["piecewise_linear", "quantile_normal", "standard", "none"])
def test_one_unique_name_per_feature(encoding):
    X, _ = _mixed()
    enc = TabularEncoder(encoding, n_bins=4, max_categories=3).fit(X)
    names = enc.get_feature_names_out()
    assert len(names) == enc.n_features_out_ == enc.transform(X).shape[1]
    assert len(set(names)) == len(names) and names.dtype == object
    assert "city=infrequent" in names and "city_missing" in names and "c_missing" in names
    assert [n for n in names if n.startswith("city=")] == [
        f"city={c}" for c in enc.categories_[1]] + ["city=infrequent"]
    if encoding == "piecewise_linear":
        assert names[0] == "a_knot0" and "when_knot3" in names
    else:
        assert names[0] == "a" and "when" in names
    # every name belongs to its input column
    for name, group in zip(names, enc.feature_groups_):
        assert name.startswith(X.columns[group])
    # given input names; those of fit by default
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        enc.get_feature_names_out(["p", "q", "r", "s"])
    assert_array_equal(enc.get_feature_names_out(list(X.columns)), names)
    plain = TabularEncoder(encoding, n_bins=4).fit(X[["a", "c"]].to_numpy())
    assert plain.get_feature_names_out()[0] in ("x0", "x0_knot0")
    assert plain.get_feature_names_out(["u", "v"])[0] in ("u", "u_knot0")


def test_names_stay_unique_and_pandas_output():
    """A category called "infrequent" and a column called like a missing indicator."""
    X = pd.DataFrame({"k": ["infrequent", "a", "b", "a", None, "infrequent"],
                      "k_missing": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    enc = TabularEncoder("standard", max_categories=2).fit(X)
    names = enc.get_feature_names_out().tolist()
    assert enc.categories_[0].tolist() == ["a", "infrequent"] and enc.has_infrequent_[0]
    assert names == ["k=a", "k=infrequent", "k=infrequent__1", "k_missing", "k_missing__1"]
    out = enc.set_output(transform="pandas").transform(X)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == names
    assert_array_equal(out.to_numpy(), enc.set_output(transform="default").transform(X))


def test_stacked_columns_of_a_union_are_named():
    """A union of two quantile transforms stacks them: x_q_0, x_q_1."""
    X, _ = _mixed()
    a = TabularEncoder("quantile_normal").fit(X.iloc[:200])
    b = TabularEncoder("quantile_normal").fit(X.iloc[200:])
    union, _ = common_encoder([a, b])
    names = union.get_feature_names_out().tolist()
    assert len(names) == union.n_features_out_ == len(set(names))
    assert names[:2] == ["a_q_0", "a_q_1"] and "c_q_1" in names and "c_missing" in names
    assert union.transform(X).shape == (len(X), union.n_features_out_)
    assert union.column_kinds_ is not None  # the union's own kinds


# -- fit once, reuse ----------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["piecewise_linear", "quantile_normal"])
def test_fit_once_and_reuse_merges_at_no_extra_cost(encoding):
    X, y = _mixed()
    enc = TabularEncoder(encoding).fit(X)
    half = len(X) // 2
    a = SoftTreeEnsembleClassifier(**FAST, encoder=enc, random_state=0).fit(X[:half], y[:half])
    b = SoftTreeEnsembleClassifier(**FAST, encoder=enc, random_state=1).fit(X[half:], y[half:])
    assert encoders_differ(a.encoder_, b.encoder_) is None
    assert encoders_differ(a.encoder_, enc) is None
    merged = merge_estimators(a, b)
    F = enc.n_features_out_
    assert merged.encoder_.n_features_out_ == F
    assert merged.get_tree_params().split_weight.shape[2] == F
    assert merged.predict_proba(X).shape == (len(X), 2)
    # apart, each with its own encoder, the common encoding costs extra features
    own = [SoftTreeEnsembleClassifier(**FAST, numeric_encoding=encoding, additive_bins=None,
                                      random_state=s).fit(X[r], y[r])
           for s, r in ((0, slice(None, half)), (1, slice(half, None)))]
    assert merge_estimators(*own).encoder_.n_features_out_ > F
    # the given encoder is not refitted
    assert_array_equal(enc.transform(X), TabularEncoder(encoding).fit(X).transform(X))


def test_clone_keeps_a_fitted_encoder_fitted():
    X, y = _mixed()
    enc = TabularEncoder("piecewise_linear", n_bins=4).fit(X)
    est = SoftTreeEnsembleClassifier(**FAST, encoder=enc, random_state=0)
    cloned = clone(est)
    assert cloned.encoder is not enc and encoders_differ(cloned.encoder, enc) is None
    assert_array_equal(cloned.encoder.transform(X), enc.transform(X))
    assert_array_equal(cloned.fit(X, y).predict_proba(X), est.fit(X, y).predict_proba(X))
    # the copy is independent, and clone of the encoder itself keeps it fitted
    copied = clone(enc)
    copied.knots_[0][0] = -1e9
    assert enc.knots_[0][0] != -1e9
    # an unfitted encoder clones as scikit-learn's clone: the parameters, unfitted
    fresh = clone(TabularEncoder("standard", additive_bins=(4, 16), categorical_features=[1]))
    assert fresh.get_params() == {"numeric_encoding": "standard", "n_bins": 16,
                                  "max_categories": 32, "additive_bins": (4, 16),
                                  "categorical_features": [1]}
    assert not hasattr(fresh, "n_features_in_")
    # nested parameters of the estimator
    assert est.get_params()["encoder__n_bins"] == 4
    assert repr(est).startswith("SoftTreeEnsembleClassifier(")


def test_pickle_and_plain_dicts():
    X, y = _mixed()
    enc = TabularEncoder(n_bins=4, max_categories=3, additive_bins=8,
                         categorical_features=["city"]).fit(X)
    back = pickle.loads(pickle.dumps(enc))
    assert back.get_params() == enc.get_params()
    assert encoders_differ(back, enc) is None
    assert_array_equal(back.transform(X), enc.transform(X))
    assert_array_equal(back.get_feature_names_out(), enc.get_feature_names_out())
    assert_array_equal(back.additive_codes(to_columns(X)[0]), enc.additive_codes(to_columns(X)[0]))
    # to_dict keeps a non-default categorical_features, and the layout of the estimators'
    # encoders (the default) unchanged
    state = enc.to_dict()
    assert state["categorical_features"] == ["city"] and "feature_names_in_" not in state
    assert TabularEncoder.from_dict(copy.deepcopy(state)).get_params() == enc.get_params()
    est = SoftTreeEnsembleClassifier(**FAST, encoder=enc, random_state=0).fit(X, y)
    assert "categorical_features" not in SoftTreeEnsembleClassifier(**FAST).fit(
        X, y).encoder_.to_dict()
    loaded = pickle.loads(pickle.dumps(est))
    assert loaded.encoder.get_params() == enc.get_params()
    assert encoders_differ(loaded.encoder, enc) is None
    assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    # a state written before the parameter existed loads with its default
    old = TabularEncoder().fit(X).to_dict()
    assert "categorical_features" not in old
    assert TabularEncoder.from_dict(old).categorical_features == "from_dtype"


# -- a Pipeline step ----------------------------------------------------------------------------
def test_pipeline_with_strings_and_nan():
    X, y = _mixed()
    pipe = make_pipeline(TabularEncoder(max_categories=3), LogisticRegression(max_iter=500))
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.8
    assert pipe.predict(X.iloc[:5]).shape == (5,)
    enc = pipe[0]
    assert len(enc.get_feature_names_out()) == enc.n_features_out_
    assert_array_equal(pipe[:-1].get_feature_names_out(), enc.get_feature_names_out())
    X_new = X.iloc[:3].copy()
    X_new["city"] = ["rome", None, "paris"]  # an unseen category and a missing one
    assert pipe.predict_proba(X_new).shape == (3, 2)


# -- sites' summaries ---------------------------------------------------------------------------
def test_encoder_from_the_summaries_of_sites():
    """Each site summarizes its own rows (``summarize`` of the column arrays of
    ``to_columns``, with the mask of categorical columns that all sites share); the
    encoder fitted from the summaries is given as ``encoder=`` to every site's model."""
    X, y = _mixed(3000)
    sites = np.array_split(np.random.RandomState(0).permutation(len(X)), 3)
    names = list(X.columns)
    by_dtype = to_columns(X.iloc[:5])[1]  # the dtypes are the same at every site
    categorical = check_categorical_features("from_dtype", len(names), names, by_dtype)
    summaries = [summarize(to_columns(X.iloc[rows])[0], categorical, sketch_size=SKETCH_SIZE,
                           names=names) for rows in sites]
    enc = TabularEncoder.from_summaries(summaries, categorical, names)
    # at most SKETCH_SIZE rows per site: each sent its values, and the encoder is exact
    assert encoders_differ(enc, TabularEncoder().fit(X)) is None
    assert_array_equal(enc.feature_names_in_, names)
    assert_array_equal(enc.transform(X), TabularEncoder().fit(X).transform(X))
    models = [SoftTreeEnsembleClassifier(**FAST, encoder=enc, random_state=k).fit(
        X.iloc[rows], y[rows]) for k, rows in enumerate(sites)]
    merged = merge_estimators(models)
    assert merged.encoder_.n_features_out_ == enc.n_features_out_
    assert merged.predict_proba(X).shape == (len(X), 2)
    with pytest.raises(ValueError, match="feature names should match"):
        enc.transform(X.rename(columns={"a": "z"}))


# -- the package's callers never use the public fit and transform with columns -----------------
def test_internal_callers_use_the_column_api(monkeypatch):
    X, y = _mixed(200)
    shared = TabularEncoder(n_bins=4).fit(X)

    def refuse(self, *args, **kwargs):
        raise AssertionError("an internal caller used the public fit or transform")

    for method in ("fit", "transform", "fit_transform"):
        monkeypatch.setattr(TabularEncoder, method, refuse)
    for Est, target in ((SoftTreeEnsembleClassifier, y),
                        (SoftTreeEnsembleRegressor, X["a"].to_numpy())):
        for kw in ({}, {"encoder": shared}, {"additive_bins": 8}):
            est = Est(**FAST, random_state=0, **kw).fit(X, target)
            est.predict(X)
            merge_estimators(est, Est(**FAST, random_state=1, **kw).fit(X[::2], target[::2]))
    sharded = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**FAST), n_shards=2,
                                      random_state=0).fit(X, y)
    sharded.predict(X)

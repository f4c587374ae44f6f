"""Issue 41: models trained apart (each with its own encoder) merge, exactly at the endpoints."""

import os
import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from sklearn.metrics import log_loss

from sktree_lmc import (
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    export_module,
    interpolation_curve,
    merge_estimators,
    refit_leaves,
)

FAST = dict(n_estimators=8, depth=2, max_epochs=3, device="cpu")


def _mixed(n=600, seed=0):
    """A frame with numeric columns, a string column with NaN, a column with NaN."""
    rng = np.random.RandomState(seed)
    X = pd.DataFrame({
        "a": rng.normal(size=n),
        "b": rng.exponential(size=n),
        "city": rng.choice(["paris", "lyon", "nice", "brest", "lille"], size=n).astype(object),
        "c": rng.normal(size=n),
    })
    X.loc[rng.rand(n) < 0.2, "city"] = np.nan
    X.loc[rng.rand(n) < 0.1, "c"] = np.nan
    y = ((X["a"] + (X["city"] == "paris") - 0.5 * X["c"].fillna(0)) > 0.3).astype(int)
    return X, y.to_numpy()


def _sites(X, y, how):
    """Two sites: IID halves, or split by a string column (each lacks some of the other's
    categories; one site gets far more NaN)."""
    if how == "iid":
        idx = np.random.RandomState(1).permutation(len(y))
        return [idx[: len(y) // 2], idx[len(y) // 2:]]
    south = X["city"].isin(["nice", "lyon"]).to_numpy() | X["city"].isna().to_numpy()
    return [np.flatnonzero(south), np.flatnonzero(~south)]


@pytest.mark.parametrize("encoding", ["quantile_normal", "piecewise_linear", "standard", "none"])
@pytest.mark.parametrize("how", ["iid", "by_city"])
def test_models_of_other_rows_merge_and_reproduce_their_endpoints(encoding, how):
    X, y = _mixed()
    a_rows, b_rows = _sites(X, y, how)
    a = SoftTreeEnsembleClassifier(**FAST, numeric_encoding=encoding, random_state=0).fit(
        X.iloc[a_rows], y[a_rows])
    b = SoftTreeEnsembleClassifier(**FAST, numeric_encoding=encoding, random_state=1).fit(
        X.iloc[b_rows], y[b_rows])
    X_new = X.copy()
    X_new.loc[:20, "city"] = "unseen"  # a category no site saw
    for aligner in ("naive", "wm", "am"):
        for lam, ref in ((0.0, a), (1.0, b)):
            merged = merge_estimators(a, b, lam=lam, aligner=aligner, X=X)
            assert_allclose(merged.predict_proba(X_new), ref.predict_proba(X_new), atol=1e-6)
    mid = merge_estimators(a, b)
    proba = mid.predict_proba(X_new)
    assert np.isfinite(proba).all() and proba.shape == (len(X), 2)
    # the merge is an ordinary fitted estimator: pickles, refits, exports
    back = pickle.loads(pickle.dumps(mid))
    assert_allclose(back.predict_proba(X_new), proba, atol=1e-12)
    refit = refit_leaves(mid, X, y, max_iter=5)
    assert np.isfinite(refit.predict_proba(X_new)).all()
    # the parents' teachers split on their own features: dropped, and the refit fits the
    # labels (with the teachers evaluated on the common features it lost 20 points)
    assert mid.teacher_ is None
    assert log_loss(y, refit.predict_proba(X)) <= log_loss(y, mid.predict_proba(X)) + 1e-3


def test_merged_model_of_different_encoders_exports():
    X, y = _mixed()
    a_rows, b_rows = _sites(X, y, "by_city")
    a = SoftTreeEnsembleClassifier(**FAST, random_state=0).fit(X.iloc[a_rows], y[a_rows])
    b = SoftTreeEnsembleClassifier(**FAST, random_state=1).fit(X.iloc[b_rows], y[b_rows])
    merged = merge_estimators(a, b)
    module = export_module(merged)
    from sktree_lmc import encode_categories

    codes = encode_categories(merged, X)
    with torch.no_grad():
        out = module(torch.as_tensor(codes, dtype=torch.float64)).numpy()
    assert_allclose(out, merged.decision_function(X).reshape(out.shape), atol=1e-4)


def test_four_quarters_and_a_regressor_merge():
    X, y = _mixed(800)
    quarters = np.array_split(np.random.RandomState(2).permutation(len(y)), 4)
    models = [SoftTreeEnsembleClassifier(**FAST, random_state=k).fit(X.iloc[q], y[q])
              for k, q in enumerate(quarters)]
    merged = merge_estimators(models, weights=[len(q) for q in quarters])
    assert np.isfinite(merged.predict_proba(X)).all()
    yr = X["a"].to_numpy() * 2 + X["b"].to_numpy()
    regs = [SoftTreeEnsembleRegressor(**FAST, random_state=k).fit(X.iloc[q], yr[q])
            for k, q in enumerate(quarters[:2])]
    for lam, ref in ((0.0, regs[0]), (1.0, regs[1])):
        assert_allclose(merge_estimators(*regs, lam=lam).predict(X), ref.predict(X),
                        rtol=1e-5, atol=1e-5)
    curve = interpolation_curve(regs[0], regs[1], X, yr, lambdas=3)
    assert np.isfinite(curve.barrier("r2"))


def test_models_that_cannot_merge_name_every_difference():
    X, y = _mixed()
    a = SoftTreeEnsembleClassifier(**FAST, random_state=0).fit(X, y)
    other = SoftTreeEnsembleClassifier(**{**FAST, "depth": 3}, arch="non_oblivious",
                                       random_state=0).fit(X.drop(columns=["c"]), y)
    with pytest.raises(ValueError, match="architecture.*depth.*number of features.*feature "
                                         "names"):
        merge_estimators(a, other)
    three = SoftTreeEnsembleClassifier(**FAST, random_state=0).fit(X, (y + (X["a"] > 1)) % 3)
    with pytest.raises(ValueError, match="number of outputs.*classes"):
        merge_estimators(a, three)


@settings(max_examples=int(os.environ.get("SKTREE_LMC_APART_EXAMPLES", "12")), deadline=None)
@given(seed=st.integers(0, 2**16), encodings=st.lists(
    st.sampled_from(["quantile_normal", "piecewise_linear", "standard", "none"]),
    min_size=2, max_size=3), how=st.sampled_from(["iid", "by_city", "by_value"]),
    aligner=st.sampled_from(["naive", "wm"]))
def test_property_any_models_trained_apart_merge_exactly_at_their_endpoints(
        seed, encodings, how, aligner):
    """Models of any encodings (even different ones), fitted on any rows: the merge at a
    model's own weight 1 is that model, on rows with unseen categories and NaN."""
    X, y = _mixed(300, seed)
    rng = np.random.RandomState(seed)
    if how == "iid":
        parts = np.array_split(rng.permutation(len(y)), len(encodings))
    elif how == "by_value":
        parts = np.array_split(np.argsort(X["a"].to_numpy()), len(encodings))
    else:
        parts = _sites(X, y, "by_city") + [rng.permutation(len(y))[:100]]
    models = []
    for k, (encoding, rows) in enumerate(zip(encodings, parts)):
        if len(np.unique(y[rows])) < 2:
            return  # a site with one class: not a classifier's data
        models.append(SoftTreeEnsembleClassifier(
            **{**FAST, "max_epochs": 1}, numeric_encoding=encoding,
            random_state=k).fit(X.iloc[rows], y[rows]))
    X_new = X.copy()
    X_new.loc[:10, "city"] = "unseen"
    X_new.loc[20:30, "a"] = np.nan
    for k, model in enumerate(models):
        weights = np.eye(len(models))[k]
        merged = merge_estimators(models, weights=weights, aligner=aligner)
        assert_allclose(merged.predict_proba(X_new), model.predict_proba(X_new), atol=1e-5)

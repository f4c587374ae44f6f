"""The additive term (``additive_bins``): encoder codes, parameters, fit, predict, merge, refit."""

import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleModule,
    SoftTreeEnsembleRegressor,
    TabularEncoder,
    TreeParams,
    encode_categories,
    export_module,
    get_architecture,
    interpolation_curve,
    merge_estimators,
    random_ops,
    refit_leaves,
)
from sktree_lmc.encoding._encoding import encoders_differ, to_columns, union_additive_bins


def _frame(n=400, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=n)
    x[::9] = np.nan
    city = rng.choice(["paris", "rome", "oslo", "bern"], size=n).astype(object)
    city[::11] = None
    X = pd.DataFrame({"x": x, "z": rng.uniform(size=n), "city": pd.Categorical(city)})
    y = ((np.nan_to_num(x) > 0.3) ^ (city == "rome")).astype(int)
    return X, y


def _small(cls=SoftTreeEnsembleClassifier, **params):
    return cls(**{"n_estimators": 8, "depth": 2, "max_epochs": 5, "batch_size": 64,
                  "device": "cpu", "random_state": 0, "additive_bins": 8, **params})


# -- encoder -----------------------------------------------------------------------------------
def test_codes_bins_missing_categories_and_unseen():
    X, _ = _frame()
    columns, by_dtype = to_columns(X)
    enc = TabularEncoder("quantile_normal", additive_bins=4, max_categories=2)._fit_columns(
        columns, np.array([False, False, True]), list(X.columns))
    # numeric: 3 inner quantile edges -> 4 bins + a missing row; categorical: 2 kept
    # categories, the infrequent row, a missing row and an unseen row
    assert [len(e) for e in enc.additive_edges_[:2]] == [3, 3] and enc.additive_edges_[2] is None
    assert enc.additive_offsets_.tolist() == [0, 5, 10, 15] and enc.n_additive_ == 15
    new = pd.DataFrame({"x": [-10.0, 10.0, np.nan], "z": [0.5, 0.5, 0.5],
                        "city": pd.Categorical(["lima", None, enc.categories_[2][0]])})
    codes = enc.additive_codes(to_columns(new)[0])
    assert codes.dtype == np.int32
    assert codes[:, 0].tolist() == [0, 3, 4]       # lowest bin, highest bin, missing
    # unseen "lima" -> the infrequent row (as in the one-hot features); None -> missing
    assert codes[:, 2].tolist() == [12, 13, 10]


def test_unseen_category_without_infrequent_gets_a_row_of_its_own():
    columns = [np.array(["a", "b", "a", None], dtype=object)]
    enc = TabularEncoder(additive_bins=4)._fit_columns(columns, np.array([True]))
    assert enc.additive_offsets_.tolist() == [0, 4]  # a, b, missing, unseen
    codes = enc.additive_codes([np.array(["b", "zzz", None], dtype=object)])
    assert codes[:, 0].tolist() == [1, 3, 2]


def test_encoders_differ_names_the_additive_bins():
    X, _ = _frame()
    columns, _ = to_columns(X)
    cat = np.array([False, False, True])
    a = TabularEncoder(additive_bins=8)._fit_columns(columns, cat)
    assert encoders_differ(a, TabularEncoder(additive_bins=8)._fit_columns(columns, cat)) is None
    assert "additive_bins" in encoders_differ(a, TabularEncoder()._fit_columns(columns, cat))
    # the same encoding of the values ("none"), other rows: only the bins differ
    a = TabularEncoder("none", additive_bins=8)._fit_columns(columns, cat)
    other = TabularEncoder("none", additive_bins=8)._fit_columns([c[:200] for c in columns], cat)
    assert "additive bins of column 0" in encoders_differ(a, other)


def test_encoder_without_additive_term_refuses_codes():
    columns = [np.arange(5.0)]
    enc = TabularEncoder(additive_bins=None)._fit_columns(columns, np.array([False]))
    with pytest.raises(ValueError, match="no additive term"):
        enc.additive_codes(columns)
    assert TabularEncoder.from_dict(enc.to_dict()).n_additive_ == 0
    with pytest.raises(ValueError, match="additive_bins must be an int >= 2"):
        TabularEncoder(additive_bins=1)._fit_columns(columns, np.array([False]))


# -- parameters ----------------------------------------------------------------------------------
def _params(rng, additive=True, M=4, arch=None):
    arch = arch or get_architecture("oblivious", 2)
    return TreeParams(rng.randn(M, arch.n_nodes, 3), rng.randn(M, arch.n_nodes),
                      rng.randn(M, arch.n_free_leaves, 2),
                      rng.randn(5, 2) if additive else None)


def test_algebra_carries_the_table():
    rng = np.random.RandomState(0)
    p, q = _params(rng), _params(rng)
    np.testing.assert_allclose((p + q).additive, p.additive + q.additive)
    np.testing.assert_allclose((p - q).additive, p.additive - q.additive)
    np.testing.assert_allclose((2.0 * p).additive, 2 * p.additive)
    np.testing.assert_allclose(p.interpolate(q, 0.25).additive,
                               0.75 * p.additive + 0.25 * q.additive, rtol=1e-6)
    avg = TreeParams.weighted_average([p, q], [3, 1])
    np.testing.assert_allclose(avg.additive, 0.75 * p.additive + 0.25 * q.additive, rtol=1e-6)
    assert p.astype(np.float64).additive.dtype == np.float64
    assert p.copy().additive is not p.additive
    assert p.inner(q) == pytest.approx(
        _params(np.random.RandomState(0), additive=False).inner(
            TreeParams(q.split_weight, q.split_bias, q.leaf_value))
        + float(np.sum(p.additive * q.additive)), rel=1e-6)
    with pytest.raises(ValueError, match="Additive tables differ"):
        p + _params(rng, additive=False)
    with pytest.raises(ValueError, match="Inconsistent parameter shapes"):
        TreeParams(p.split_weight, p.split_bias, p.leaf_value, np.zeros((5, 3)))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), arch_name=st.sampled_from(
    ["oblivious", "non_oblivious", "decision_list", "decision_list_modified"]))
def test_symmetry_ops_keep_the_table_and_the_function(seed, arch_name):
    rng = np.random.RandomState(seed)
    arch = get_architecture(arch_name, 2)
    p = _params(rng, arch=arch)
    q = p.permute_trees(rng.permutation(p.n_trees)).apply_ops(
        random_ops(arch, p.n_trees, random_state=seed))
    np.testing.assert_array_equal(q.additive, p.additive)
    X = torch.as_tensor(rng.randn(16, 3), dtype=torch.float32)
    codes = torch.as_tensor(rng.randint(0, 5, (16, 2)), dtype=torch.int32)
    with torch.no_grad():
        out_p = SoftTreeEnsembleModule.from_params(arch, p)(X, codes)
        out_q = SoftTreeEnsembleModule.from_params(arch, q)(X, codes)
    torch.testing.assert_close(out_p, out_q, rtol=1e-5, atol=1e-5)


# -- estimators ----------------------------------------------------------------------------------
@pytest.mark.parametrize("bins", [8, (4, 16, 64)])
def test_fit_predict_dataframe_and_prediction_equals_training_forward(bins):
    X, y = _frame()
    clf = _small(additive_bins=bins).fit(X, y)
    table = clf.tree_params_.additive
    assert table.shape == (clf.encoder_.n_additive_, 2) and np.abs(table).max() > 0
    module = SoftTreeEnsembleModule.from_params(clf.architecture_, clf.tree_params_)
    with torch.no_grad():
        rows = clf._encoded_input(X)
        forward = module(torch.as_tensor(rows.X), torch.as_tensor(rows.codes)).numpy()
    np.testing.assert_allclose(clf._raw_output(X), forward, atol=1e-5)
    # tree_outputs stay the trees' own: their sum misses the additive term
    trees = clf.tree_outputs(X).sum(axis=1)
    assert not np.allclose(trees, forward, atol=1e-6)
    assert clf.predict(X.iloc[:3]).shape == (3,)
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def test_random_state_gives_identical_fits_and_warm_start_keeps_adam_on_the_table():
    X, y = _frame()
    a, b = _small().fit(X, y), _small().fit(X, y)
    np.testing.assert_array_equal(a.tree_params_.additive, b.tree_params_.additive)
    warm = _small(warm_start=True, max_epochs=2).fit(X, y)
    assert warm.optimizer_state_["exp_avg"].additive.shape == warm.tree_params_.additive.shape
    warm.fit(X, y)
    assert warm.n_epochs_ == 4
    warm.set_params(additive_bins=4)
    with pytest.raises(ValueError, match="additive_bins"):
        warm.fit(X, y)


def test_resolutions_give_code_columns_rows_and_steps():
    X, _ = _frame()
    columns, _ = to_columns(X)
    cat = np.array([False, False, True])
    enc = TabularEncoder(additive_bins=(4, 16), max_categories=2)._fit_columns(columns, cat)
    # every column at the first resolution, the numeric ones at the second too
    np.testing.assert_array_equal(enc.additive_sources_, [0, 1, 2, 0, 1])
    np.testing.assert_allclose(enc.additive_steps_, [1, 1, 1, 0.5, 0.5])
    sizes = np.diff(enc.additive_offsets_)
    assert sizes[0] == 4 + 1 and sizes[3] == 16 + 1  # bins and the missing row ("x")
    np.testing.assert_array_equal(enc.additive_row_steps(), np.repeat([1, 1, 1, .5, .5], sizes))
    codes = enc.additive_codes(columns)
    assert codes.shape == (len(X), 5)
    one = TabularEncoder(additive_bins=4, max_categories=2)._fit_columns(columns, cat)
    np.testing.assert_array_equal(codes[:, :3], one.additive_codes(columns))
    np.testing.assert_array_equal(one.additive_row_steps(), np.ones(one.n_additive_))
    with pytest.raises(ValueError, match="distinct ints >= 2"):
        TabularEncoder(additive_bins=(4, 4))._fit_columns(columns, cat)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(5, 300),
       levels=st.lists(st.integers(2, 300), min_size=2, max_size=4, unique=True),
       ties=st.booleans(), perturb=st.booleans())
def test_coarser_codes_from_the_finest_bins_equal_their_own_search(seed, n, levels, ties,
                                                                   perturb):
    """``additive_codes`` finds each numeric column's finest bins with one binary search and
    the coarser bins by a lookup when the coarser edges are among the finest ones, and falls
    back to a search per resolution when they are not (``perturb``): either way every code
    equals ``np.searchsorted(edges, x, side="right")``, on and next to every edge, outside
    the data and for missing values."""
    rng = np.random.RandomState(seed)
    x = rng.normal(size=n)
    if ties:
        x = np.round(x * 2) / 2
    x[rng.rand(n) < 0.1] = np.nan
    columns = [x, rng.uniform(size=n)]
    enc = TabularEncoder("none", additive_bins=tuple(levels))._fit_columns(
        columns, np.array([False] * 2))
    if perturb:  # a coarse edge that is no fine edge: that column takes the search per resolution
        c = int(np.argmin([len(e) for e in enc.additive_edges_]))
        enc.additive_edges_[c] = np.sort(enc.additive_edges_[c] + 1e-3)
    edges = np.concatenate(enc.additive_edges_)
    q = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                        [-1e30, 1e30, np.nan], rng.normal(size=50) * 3])
    queries = [q, q[::-1].copy()]
    codes = enc.additive_codes(queries)
    for c, j in enumerate(enc.additive_sources_):
        first, end = enc.additive_offsets_[c], enc.additive_offsets_[c + 1]
        expected = np.searchsorted(enc.additive_edges_[c], queries[j], side="right")
        expected[np.isnan(queries[j])] = end - first - 1
        np.testing.assert_array_equal(codes[:, c], first + expected)
    finest = enc._finest_additive_columns()
    subset = [all(np.isin(enc.additive_edges_[c], max(
        (enc.additive_edges_[d] for d in np.flatnonzero(enc.additive_sources_ == j)), key=len))
        .all() for c in np.flatnonzero(enc.additive_sources_ == j)) for j in (0, 1)]
    assert sorted(finest) == [j for j in (0, 1) if subset[j]]


def test_each_resolution_moves_by_its_step():
    """One Adam step (one minibatch, no averaging): every table value that moves moves by
    the table's rate times its resolution's factor, 1, 1/2 or 1/4 for (4, 16, 64) bins."""
    from sktree_lmc.training._training import ADDITIVE_LR_FACTOR

    X, y = _frame()
    lr = 0.01
    clf = _small(additive_bins=(4, 16, 64), max_epochs=1, batch_size=len(X), averaging=None,
                 early_stopping=False, lr_schedule="constant", learning_rate=lr).fit(X, y)
    moved = np.abs(clf.tree_params_.additive)
    steps = clf.encoder_.additive_row_steps()[:, None] * np.ones_like(moved)
    hit = moved > 0
    assert {0.25, 0.5, 1.0} <= set(np.unique(steps[hit]))
    np.testing.assert_allclose(moved[hit], ADDITIVE_LR_FACTOR * lr * steps[hit], rtol=1e-3)
    # a warm start begins from the same values
    from sktree_lmc.training._start import start_from_params

    module = start_from_params(clf.architecture_, clf.tree_params_, clf.encoder_, "cpu")
    np.testing.assert_array_equal(module.to_params().additive, clf.tree_params_.additive)
    assert module.additive_scale is not None


def test_table_learns_at_a_tenth_of_the_rate():
    from sktree_lmc.training._training import ADDITIVE_LR_FACTOR, make_optimizer

    module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), 4, 3, 2, n_additive=5)
    opt = make_optimizer(module, 0.02)
    assert [g["lr"] for g in opt.param_groups] == [0.02, ADDITIVE_LR_FACTOR * 0.02]
    assert torch.equal(module.additive, torch.zeros(5, 2))


def test_merge_averages_the_table_and_lam_zero_reproduces_a():
    X, y = _frame()
    a, b = _small().fit(X, y), _small(random_state=1).fit(X, y)
    np.testing.assert_allclose(merge_estimators(a, b, lam=0.0).predict_proba(X),
                               a.predict_proba(X), atol=1e-6)
    mid = merge_estimators(a, b, lam=0.5)
    np.testing.assert_allclose(mid.tree_params_.additive,
                               (a.tree_params_.additive + b.tree_params_.additive) / 2,
                               rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="additive_bins differs"):
        merge_estimators(a, _small(additive_bins=None).fit(X, y))


def _rows_with_ties_and_missing(n, rng):
    """A numeric column with ties, one with a missing value, and a categorical column with
    every category present: encoders of such frames differ only in their additive bins."""
    x = rng.randint(0, 6, size=n).astype(float) + rng.choice([0.0, 0.5], size=n)
    z = rng.normal(size=n)
    z[0] = np.nan
    city = np.array(["paris", "rome", "oslo"] * (n // 3 + 1), dtype=object)[:n]
    return [x, z, city]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_a=st.integers(6, 60), n_b=st.integers(6, 60),
       bins=st.integers(2, 16), resolutions=st.booleans())
def test_union_bins_keep_every_table_function(seed, n_a, n_b, bins, resolutions):
    rng = np.random.RandomState(seed)
    bins = (bins, 2 * bins + 1) if resolutions else bins
    cat = np.array([False, False, True])
    encs = [TabularEncoder("none", additive_bins=bins)._fit_columns(
        _rows_with_ties_and_missing(n, rng), cat) for n in (n_a, n_b)]
    assert encoders_differ(encs[0], encs[1], additive=False) is None
    union, rows = union_additive_bins(encs)
    # queries on and next to every edge, inside and outside the data, missing, unseen
    edges = np.concatenate([e for e in union.additive_edges_ if e is not None])
    q = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                        [-1e30, 1e30, np.nan], rng.normal(size=20) * 4])
    cities = rng.choice(["paris", "rome", "oslo", "tokyo", None], size=len(q)).astype(object)
    columns = [q, q[::-1].copy(), cities]
    union_codes = union.additive_codes(columns).astype(np.intp)
    for enc, r in zip(encs, rows):
        table = rng.normal(size=(enc.n_additive_, 2))
        own = table[enc.additive_codes(columns).astype(np.intp)].sum(axis=1)
        np.testing.assert_array_equal(table[r][union_codes].sum(axis=1), own)


def test_models_fitted_on_different_rows_merge_on_the_union_of_their_bins():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=600, n_features=4, random_state=0)
    a = _small(numeric_encoding="none").fit(X[:300], y[:300])
    b = _small(numeric_encoding="none", random_state=1).fit(X[300:], y[300:])
    assert "additive bins" in encoders_differ(a.encoder_, b.encoder_)
    for lam, end in ((0.0, a), (1.0, b)):  # the endpoints are the models themselves
        for aligner in ("wm", "naive"):
            np.testing.assert_allclose(
                merge_estimators(a, b, lam=lam, aligner=aligner).predict_proba(X),
                end.predict_proba(X), atol=1e-6)
    mid = merge_estimators(a, b)
    n_a, n_b = a.encoder_.n_additive_, b.encoder_.n_additive_
    assert max(n_a, n_b) < mid.encoder_.n_additive_ == len(mid.tree_params_.additive)
    assert (a.encoder_.n_additive_, b.encoder_.n_additive_) == (n_a, n_b)  # inputs untouched
    curve = interpolation_curve(a, b, X, y, lambdas=3)
    np.testing.assert_allclose(curve.scores["accuracy"][[0, -1]],
                               [100 * a.score(X, y), 100 * b.score(X, y)])
    c = _small(numeric_encoding="none", random_state=2).fit(X[150:450], y[150:450])
    assert merge_estimators([a, b, c]).predict(X).shape == (600,)
    refitted = refit_leaves(mid, X, y, max_iter=5)
    assert refitted.encoder_.n_additive_ == mid.encoder_.n_additive_
    # other encodings fitted on other rows merge too, on their common encoding (issue 41)
    q_a = _small().fit(X[:300], y[:300])
    q_b = _small(random_state=1).fit(X[300:], y[300:])
    np.testing.assert_allclose(merge_estimators(q_a, q_b, lam=0.0).predict_proba(X),
                               q_a.predict_proba(X), atol=1e-6)


def test_regressors_merge_in_one_target_scale():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + np.sin(3 * X[:, 1])
    a = _small(SoftTreeEnsembleRegressor).fit(X, y)
    b = _small(SoftTreeEnsembleRegressor, random_state=1).fit(X, 3 * y + 1)
    np.testing.assert_allclose(merge_estimators(a, b, lam=0.0).predict(X), a.predict(X),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(merge_estimators(a, b, lam=1.0).predict(X), b.predict(X),
                               rtol=1e-5, atol=1e-4)


def test_refit_leaves_keeps_the_table_and_lowers_the_objective():
    X, y = _frame()
    merged = merge_estimators(_small().fit(X, y), _small(random_state=1).fit(X, y))
    refitted, info = refit_leaves(merged, X, y, return_info=True)
    np.testing.assert_array_equal(refitted.tree_params_.additive, merged.tree_params_.additive)
    assert info["objective"] < info["objective_start"]
    # the objective counts the additive term: zeroing the table changes it
    no_table = merged.get_tree_params()
    no_table.additive = np.zeros_like(no_table.additive)
    other = refit_leaves(merged.set_tree_params(no_table), X, y, return_info=True)[1]
    assert other["objective_start"] != pytest.approx(info["objective_start"])


def test_bins_from_summaries_equal_fit_or_come_close_with_sketches():
    from sktree_lmc.encoding._encoding import summarize

    X, _ = _frame(n=3000)
    columns, _ = to_columns(X)
    cat = np.array([False, False, True])
    fitted = TabularEncoder("piecewise_linear", additive_bins=16)._fit_columns(columns, cat)
    halves = [[c[:1000] for c in columns], [c[1000:] for c in columns]]
    for sketch, exact in ((None, True), (101, False)):
        parts = [summarize(h, cat, numeric_encoding="piecewise_linear", sketch_size=sketch,
                           additive_bins=16) for h in halves]
        merged = TabularEncoder.from_summaries(parts, cat, numeric_encoding="piecewise_linear",
                                               additive_bins=16)
        for j in (0, 1):
            a, b = fitted.additive_edges_[j], merged.additive_edges_[j]
            if exact:
                np.testing.assert_array_equal(a, b)
            else:  # within a sketch step of the exact quantiles
                assert a.shape == b.shape and np.abs(a - b).max() < 0.05
        assert merged.n_additive_ == fitted.n_additive_
    with pytest.raises(ValueError, match="additive_bins"):
        TabularEncoder.from_summaries(parts, cat, numeric_encoding="piecewise_linear",
                                      additive_bins=8)
    # several resolutions: exact from the values, as fit
    parts = [summarize(h, cat, numeric_encoding="none", additive_bins=(4, 16)) for h in halves]
    merged = TabularEncoder.from_summaries(parts, cat, numeric_encoding="none",
                                           additive_bins=(4, 16))
    fitted = TabularEncoder("none", additive_bins=(4, 16))._fit_columns(columns, cat)
    assert encoders_differ(merged, fitted) is None


@pytest.mark.parametrize("bins", [8, (4, 16)])
def test_sharded_rounds_merge_the_table(bins):
    X, y = _frame(n=600)
    sharded = ShardedSoftTreeEnsemble(_small(max_epochs=30, additive_bins=bins), n_shards=2,
                                      n_rounds=2, random_state=0).fit(X, y)
    merged = sharded.merged_
    tables = [est.tree_params_.additive for est in sharded.estimators_]
    assert merged.tree_params_.additive.shape == tables[0].shape
    assert np.abs(merged.tree_params_.additive).max() > 0
    assert sharded.encoder_.n_additive_ == merged.encoder_.n_additive_
    full = _small(max_epochs=30).fit(X, y).score(X, y)
    assert sharded.score(X, y) > max(0.7, full - 0.1)


@pytest.mark.parametrize("max_categories, bins", [(2, 8), (32, 8), (2, (4, 16))])
def test_export_adds_the_table_like_the_estimator(max_categories, bins):
    # with and without "infrequent"; one and two resolutions
    X, y = _frame()
    clf = _small(max_categories=max_categories, numeric_encoding="piecewise_linear",
                 additive_bins=bins).fit(X, y)
    new = pd.DataFrame({"x": [np.nan, -50.0, 0.1, 50.0], "z": [0.1, np.nan, 0.5, 0.9],
                        "city": pd.Categorical(["lima", None, "rome", "oslo"])})
    module = export_module(clf)
    for rows in (X, new):
        with torch.no_grad():
            out = module(torch.as_tensor(encode_categories(clf, rows))).numpy()
        np.testing.assert_allclose(out, clf.decision_function(rows), rtol=0, atol=1e-5)
    export = getattr(getattr(torch, "export", None), "export", None)
    if export is not None:
        example = torch.as_tensor(encode_categories(clf, X.iloc[:16]))
        program = export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        with torch.no_grad():
            out = program.module()(torch.as_tensor(encode_categories(clf, new))).numpy()
        np.testing.assert_allclose(out, clf.decision_function(new), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_onnx_export_of_the_additive_term(tmp_path):
    """torch.onnx.export and onnxruntime (the ``export`` extra) with the table."""
    import warnings

    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.RandomState(0)
    X = rng.standard_normal((300, 4))
    X[::7, 0] = np.nan
    y = (np.nan_to_num(X[:, 0]) + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    clf = _small(depth=3, additive_bins=16).fit(X, y)
    X_test = np.vstack([X, rng.standard_normal((20, 4)) * 4]).astype(np.float32)
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(export_module(clf), (torch.tensor(X_test[:16]),), str(path),
                          input_names=["X"], output_names=["scores"], dynamo=True,
                          dynamic_shapes=({0: torch.export.Dim("batch")},),
                          optimize=False)  # its graph rewrites are most of the time
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"X": X_test})
    np.testing.assert_allclose(out, clf.decision_function(X_test.astype(np.float64)),
                               rtol=0, atol=1e-5)


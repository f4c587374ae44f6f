"""export_onnx / onnx_inputs: one self-contained ONNX file per fitted estimator,
run by onnxruntime, against the estimator's decision_function, predict_proba and
predict (every architecture and numeric encoding, categories as strings or codes,
missing values, the additive term, regressors with either link)."""

import os

import numpy as np
import pytest
from _helpers import mixed_frame
from conftest import FAST
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    encode_categories,
    export_onnx,
    onnx_inputs,
)
from sktree_lmc.model._forward import monomial_plan
from sktree_lmc.export._onnx import MAX_MONOMIAL_DEPTH, _category_strings

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ARCHS = ["oblivious", "non_oblivious", "decision_list", "decision_list_modified"]
ENCODINGS = ["piecewise_linear", "quantile_normal", "standard", "none"]
SETTINGS = dict(FAST, depth=3, random_state=0)
ATOL = 1e-5


def _data(n=120, seed=0):
    """Numeric rows with NaN in column 0 and ties in column 2; test rows beyond the
    training range (far beyond), on its values exactly, and missing in a column that
    had no missing value in fit."""
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, 4))
    X[:, 2] = np.round(2 * X[:, 2])  # a discrete column: repeated quantiles
    X[:, 3] = 50 + 10 * X[:, 3]
    X[::7, 0] = np.nan
    extra = rng.standard_normal((30, 4)) * 4
    extra[:5, 1] = np.nan
    extra[5:10] = X[:5]
    extra[10, 0], extra[11, 3], extra[12, 2] = 1e30, -1e30, 1e30
    y = (np.nan_to_num(X[:, 0]) + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    return X, np.vstack([X, extra]), y


def _session(est, tmp_path, **kwargs):
    path = export_onnx(est, tmp_path / "model.onnx", **kwargs)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _outputs(session, feed):
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feed)))


def _check_classifier(clf, session, X, **kwargs):
    out = _outputs(session, onnx_inputs(clf, X, **kwargs))
    assert_allclose(out["decision_function"], clf.decision_function(X), rtol=0, atol=ATOL)
    assert_allclose(out["predict_proba"], clf.predict_proba(X), rtol=0, atol=ATOL)
    # the labels agree wherever the decision is not within the tolerance of a tie
    scores = clf.decision_function(X)
    clear = (np.abs(scores) > ATOL if scores.ndim == 1 else
             -np.diff(np.sort(scores, axis=1)[:, -2:], axis=1)[:, 0] < -ATOL)
    assert clear.mean() > 0.9
    assert_array_equal(out["predict"][clear], clf.predict(X)[clear])
    return out


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_graph_matches_the_estimator(arch, encoding, tmp_path):
    X, X_test, y = _data()
    kw = dict(SETTINGS, arch=arch, numeric_encoding=encoding)
    for labels in (y > 0, y):  # binary, 3 classes
        clf = SoftTreeEnsembleClassifier(**kw).fit(X, labels)
        out = _check_classifier(clf, _session(clf, tmp_path), X_test)
        assert out["predict"].dtype == np.int64 and out["predict_proba"].dtype == np.float64
        assert out["decision_function"].shape == clf.decision_function(X_test).shape
    target = X[:, 1] - 0.5 * np.nan_to_num(X[:, 0])
    reg = SoftTreeEnsembleRegressor(**kw).fit(X, target)
    out = _outputs(_session(reg, tmp_path), {"X": X_test})
    assert out["predict"].shape == (len(X_test),)
    assert_allclose(out["predict"], reg.predict(X_test), rtol=0, atol=ATOL)


def test_graph_io_is_documented(tmp_path):
    X, _, y = _data()
    clf = SoftTreeEnsembleClassifier(**SETTINGS).fit(X, y)
    session = _session(clf, tmp_path)
    assert [(i.name, i.type, i.shape[1]) for i in session.get_inputs()] == [
        ("X", "tensor(double)", 4)]
    assert [(o.name, o.type) for o in session.get_outputs()] == [
        ("predict", "tensor(int64)"), ("predict_proba", "tensor(double)"),
        ("decision_function", "tensor(double)")]
    # any number of rows, none included
    for n in (1, 0):
        out = _outputs(session, {"X": X[:n]})
        assert out["predict_proba"].shape == (n, 3)
    with pytest.raises(Exception, match="(?i)dimension|shape"):
        session.run(None, {"X": X[:, :3]})


def test_one_self_contained_file(tmp_path):
    X, X_test, y = _data()
    clf = SoftTreeEnsembleClassifier(**dict(SETTINGS, n_estimators=32)).fit(X, y)
    folder = tmp_path / "out"
    folder.mkdir()
    path = export_onnx(clf, folder / "model.onnx")
    assert path == str(folder / "model.onnx")
    assert os.listdir(folder) == ["model.onnx"]
    model = onnx.load(path, load_external_data=False)
    assert not any(onnx.external_data_helper.uses_external_data(t)
                   for t in model.graph.initializer)
    onnx.checker.check_model(model, full_check=True)
    # moved elsewhere alone, it still loads and predicts
    moved = tmp_path / "moved.onnx"
    os.replace(path, moved)
    session = ort.InferenceSession(str(moved), providers=["CPUExecutionProvider"])
    assert_allclose(session.run(["decision_function"], {"X": X_test})[0],
                    clf.decision_function(X_test), rtol=0, atol=ATOL)


@pytest.fixture(scope="module")
def frame_clf():
    pd = pytest.importorskip("pandas")
    frame, y = mixed_frame(200)
    # additive_bins at two resolutions: the categorical columns' tables as well
    clf = SoftTreeEnsembleClassifier(**SETTINGS, max_categories=3,
                                     additive_bins=(4, 16)).fit(frame, y)
    new = pd.DataFrame({
        "size": [0.5, np.nan, 9.0, -9.0],
        "color": ["red", "purple", None, "violet"],  # unseen, missing, infrequent
        "city": pd.Categorical(["Lima", None, "Oslo", "Paris"]),
        "age": [np.nan, 30.0, 99.0, 1.0],
    })
    return clf, frame, new


def test_string_categories_and_missing_values(frame_clf, tmp_path):
    clf, frame, new = frame_clf
    assert clf.encoder_.has_infrequent_.tolist() == [False, True, False, False]
    assert clf.tree_params_.additive is not None
    session = _session(clf, tmp_path)
    assert [(i.name, i.type, i.shape[1]) for i in session.get_inputs()] == [
        ("X", "tensor(double)", 2), ("X_categorical", "tensor(string)", 2)]
    feed = onnx_inputs(clf, new)
    assert feed["X_categorical"].tolist() == [
        ["red", "Lima"], ["purple", ""], ["", "Oslo"], ["violet", "Paris"]]
    assert_array_equal(feed["X"], new[["size", "age"]].to_numpy())
    for rows in (frame, new):
        _check_classifier(clf, session, rows)
    # the serving side's own arrays: plain str arrays, missing as ""
    X_cat = np.array([["red", "Lima"], ["purple", ""], ["", "Oslo"], ["violet", "Paris"]])
    out = session.run(["decision_function"], {"X": feed["X"], "X_categorical": X_cat})[0]
    assert_allclose(out, clf.decision_function(new), rtol=0, atol=ATOL)


def test_category_codes_input(frame_clf, tmp_path):
    clf, frame, new = frame_clf
    session = _session(clf, tmp_path, categories="codes")
    assert [(i.name, i.shape[1]) for i in session.get_inputs()] == [("X", 4)]
    feed = onnx_inputs(clf, new, categories="codes")
    assert_array_equal(feed["X"], encode_categories(clf, new))
    for rows in (frame, new):
        _check_classifier(clf, session, rows, categories="codes")
    # any code that is not a category's is an unseen category
    other = feed["X"].copy()
    other[1, 1], other[3, 2] = 7.0, 0.5
    assert_array_equal(session.run(None, {"X": other})[2], session.run(None, feed)[2])


def test_labels_and_regressor_outputs(tmp_path):
    X, X_test, y = _data()
    names = np.array(["low", "mid", "high"])[y]
    clf = SoftTreeEnsembleClassifier(**SETTINGS).fit(X, names)
    out = _check_classifier(clf, _session(clf, tmp_path), X_test)
    assert out["predict"].dtype == object
    Y = np.column_stack([X[:, 1], 100 + 3 * X[:, 3]])
    reg = SoftTreeEnsembleRegressor(**SETTINGS).fit(X, Y)
    pred = _outputs(_session(reg, tmp_path), {"X": X_test})["predict"]
    assert pred.shape == (len(X_test), 2)
    assert_allclose(pred, reg.predict(X_test), rtol=1e-6, atol=ATOL)
    counts = np.random.RandomState(0).poisson(np.exp(0.5 * np.nan_to_num(X[:, 1])))
    poisson = SoftTreeEnsembleRegressor(**SETTINGS, loss="poisson").fit(X, counts)
    pred = _outputs(_session(poisson, tmp_path), {"X": X_test})["predict"]
    assert_allclose(pred, poisson.predict(X_test), rtol=1e-6, atol=ATOL)


def test_degenerate_columns(tmp_path):
    """Only categorical columns (a graph with string input only), with and without
    the additive term; a constant column and one missing throughout fit."""
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"a": rng.choice(list("xyz"), 150).astype(object),
                          "b": pd.Categorical(rng.choice([1, 2], 150))})
    frame.loc[::5, "a"] = None
    y = rng.randint(0, 2, 150)
    for bins in (None, 16):
        clf = SoftTreeEnsembleClassifier(**SETTINGS, additive_bins=bins).fit(frame, y)
        session = _session(clf, tmp_path)
        assert [i.name for i in session.get_inputs()] == ["X_categorical"]
        assert onnx_inputs(clf, frame.iloc[:2])["X_categorical"].tolist() == [
            ["", str(frame.b[0])], [frame.a[1], str(frame.b[1])]]  # row 0: missing
        _check_classifier(clf, session, frame)
    X = rng.standard_normal((150, 3))
    X[:, 1], X[:, 2] = 3.0, np.nan
    X_test = rng.standard_normal((40, 3)) * 3
    X_test[::3, 1], X_test[::4, 2], X_test[::5, 0] = 3.0, 1.0, np.nan
    for encoding in ENCODINGS:
        reg = SoftTreeEnsembleRegressor(**SETTINGS, numeric_encoding=encoding).fit(X, X[:, 0])
        out = _outputs(_session(reg, tmp_path), {"X": X_test})
        assert_allclose(out["predict"], reg.predict(X_test), rtol=0, atol=ATOL)


def test_deep_oblivious_trees_take_the_leaf_path(tmp_path):
    X, X_test, y = _data()
    depth = MAX_MONOMIAL_DEPTH + 1
    clf = SoftTreeEnsembleClassifier(**dict(SETTINGS, depth=depth)).fit(X, y)
    assert monomial_plan(clf.architecture_) is not None
    _check_classifier(clf, _session(clf, tmp_path), X_test)


def test_sharded_meta_estimator(tmp_path):
    X, X_test, y = _data()
    X, X_test = np.nan_to_num(X), np.nan_to_num(X_test)
    base = SoftTreeEnsembleClassifier(**SETTINGS, numeric_encoding="none")
    sharded = ShardedSoftTreeEnsemble(base, n_shards=2, random_state=0).fit(X, y)
    out = _outputs(_session(sharded, tmp_path), onnx_inputs(sharded, X_test))
    assert_allclose(out["decision_function"], sharded.decision_function(X_test),
                    rtol=0, atol=ATOL)


def test_stacked_columns_of_a_union_encoder(tmp_path):
    """A model moved onto the union of two encoders (stacked quantile and
    piecewise-linear columns) exports like the estimator predicts."""
    from sktree_lmc import TreeParams
    from sktree_lmc.encoding._common_encoding import common_encoder

    X, X_test, y = _data(200)
    kw = dict(SETTINGS, additive_bins=8)
    clfs = [SoftTreeEnsembleClassifier(**kw, numeric_encoding=kind).fit(X[part], y[part])
            for kind, part in zip(["quantile_normal", "piecewise_linear"],
                                  np.array_split(np.arange(len(X)), 2))]
    union, translations = common_encoder([c.encoder_ for c in clfs])
    assert "stacked" in union.column_kinds_
    p = clfs[0].get_tree_params()
    W, b = translations[0].weights(p.split_weight, p.split_bias)
    from sktree_lmc.merging._bridge import with_params

    moved = with_params(
        clfs[0],
        TreeParams(W, b, p.leaf_value, p.additive[translations[0].additive_rows]),
        encoder_=union)
    out = _outputs(_session(moved, tmp_path), {"X": X_test})
    assert_allclose(out["decision_function"], clfs[0].decision_function(X_test),
                    rtol=0, atol=ATOL)


def test_errors(tmp_path, frame_clf):
    X, _, y = _data()
    path = tmp_path / "model.onnx"
    with pytest.raises(NotFittedError):
        export_onnx(SoftTreeEnsembleClassifier(), path)
    pipe = make_pipeline(StandardScaler(), SoftTreeEnsembleClassifier(**SETTINGS))
    with pytest.raises(TypeError, match="Pipeline.*last step"):
        export_onnx(pipe.fit(np.nan_to_num(X), y), path)
    with pytest.raises(TypeError, match="export_onnx takes a fitted"):
        export_onnx(StandardScaler().fit(np.nan_to_num(X)), path)
    clf = SoftTreeEnsembleClassifier(**SETTINGS).fit(X, y)
    with pytest.raises(ValueError, match="categories must be"):
        export_onnx(clf, path, categories="onehot")
    with pytest.raises(ValueError, match="categories must be"):
        onnx_inputs(clf, X, categories="onehot")
    assert not path.exists()
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": np.arange(40.0), "c": ["", "a"] * 20})
    tricky = SoftTreeEnsembleClassifier(**SETTINGS).fit(frame, np.arange(40) % 2)
    with pytest.raises(ValueError, match="empty string"):
        export_onnx(tricky, path)
    export_onnx(tricky, path, categories="codes")  # the codes have no such ambiguity
    # categories whose str() coincide cannot be told apart as strings
    state = tricky.encoder_.to_dict()
    state["categories_"][1] = np.array(["a", "a"], dtype=object)
    enc = type(tricky.encoder_).from_dict(state)
    with pytest.raises(ValueError, match="not distinct as strings"):
        _category_strings(enc, 1)


def _float64_scores(model, X):
    """The model's decision values from a float64 forward (the estimator's encoding)."""
    import torch

    from sktree_lmc import SoftTreeEnsembleModule

    columns = model._input_columns(X)
    enc = model.encoder_
    features = enc.transform_columns(columns).astype(np.float64)
    codes = None
    if model.tree_params_.additive is not None:
        codes = torch.as_tensor(enc.additive_codes(columns))
    module = SoftTreeEnsembleModule.from_params(model.architecture_, model.tree_params_,
                                                "cpu").double()
    with torch.no_grad():
        out = module(torch.tensor(features, dtype=torch.float64), codes).numpy()
    return out[:, 1] - out[:, 0] if out.shape[1] == 2 else out


def test_default_sized_model_precision(tmp_path):
    """The default classifier (256 oblivious trees of depth 4, the additive term): the
    graph's decision_function is within 5e-6 of a float64 forward of the model (2.1e-6
    here), and so is the estimator's (its contraction of the 3,840 monomial terms is
    summed in float32 blocks added in float64), so the two agree within 1e-5."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=3000, n_features=12, random_state=0)
    clf = SoftTreeEnsembleClassifier(random_state=0, n_threads=1).fit(X[:2000], y[:2000])
    assert clf.n_estimators == 256
    X_test = X[2000:]
    out = _outputs(_session(clf, tmp_path), onnx_inputs(clf, X_test))
    reference = _float64_scores(clf, X_test)
    assert np.abs(out["decision_function"] - reference).max() < 5e-6
    assert np.abs(clf.decision_function(X_test) - reference).max() < 5e-6
    assert_allclose(out["decision_function"], clf.decision_function(X_test), rtol=0, atol=1e-5)
    assert_allclose(out["predict_proba"], clf.predict_proba(X_test), rtol=0, atol=5e-6)

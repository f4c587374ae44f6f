"""Deployment: export_module / encode_categories (torch.export, TorchScript, ONNX), and
loading fitted estimators with skops.io trusting only the public estimator classes."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from _helpers import mixed_frame, three_feature_binary_data
from conftest import FAST
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import QuantileTransformer, StandardScaler

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    encode_categories,
    export_module,
)
from sktree_lmc.export._export import _ndtri_portable, _QuantileNormalColumn

ARCHS = ["oblivious", "non_oblivious", "decision_list", "decision_list_modified"]
ENCODINGS = ["piecewise_linear", "quantile_normal", "standard", "none"]
SETTINGS = dict(FAST, depth=3, random_state=0)
ATOL = 1e-5
#: The tiny classifier of the exported module whose number of columns is checked.
TINY = dict(n_estimators=4, max_epochs=2, device="cpu", random_state=0)


def _data(n=120, seed=0):
    """Numeric training rows with NaN in column 0 and ties in column 2, and test rows
    that also go beyond the training range, hit knots exactly and miss values in a
    column that had none in fit. Values are float32 numbers, the module's input."""
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, 4))
    X[:, 2] = np.round(2 * X[:, 2])  # a discrete column: repeated quantiles
    X[:, 3] = 50 + 10 * X[:, 3]
    X[::7, 0] = np.nan
    X = X.astype(np.float32).astype(np.float64)
    extra = rng.standard_normal((30, 4)) * 4
    extra[:5, 1] = np.nan
    extra[5:10] = X[:5]
    extra = extra.astype(np.float32).astype(np.float64)
    y = (np.nan_to_num(X[:, 0]) + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    return X, np.vstack([X, extra]), y


def _run(module, X):
    with torch.no_grad():
        return module(torch.tensor(X)).to(torch.float64).numpy()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_module_matches_estimator(arch, encoding):
    X, X_test, y = _data()
    kw = dict(SETTINGS, arch=arch, numeric_encoding=encoding)
    for labels in (y > 0, y):  # binary, 3 classes
        clf = SoftTreeEnsembleClassifier(**kw).fit(X, labels)
        module = export_module(clf)
        assert not module.training
        assert all(p.dtype == torch.float32 for p in module.trees.buffers())
        out = _run(module, X_test)
        ref = clf.decision_function(X_test)
        assert out.shape == ref.shape
        assert_allclose(out, ref, rtol=0, atol=ATOL)
        # float32 input: the same values
        with torch.no_grad():
            out32 = module(torch.tensor(X_test, dtype=torch.float32)).numpy()
        assert_array_equal(out32, out.astype(np.float32))
    target = X[:, 1] - 0.5 * np.nan_to_num(X[:, 0])
    reg = SoftTreeEnsembleRegressor(**kw).fit(X, target)
    assert_allclose(_run(export_module(reg), X_test), reg.predict(X_test), rtol=0, atol=ATOL)


def test_module_encodes_like_the_encoder():
    X, X_test, y = _data()
    for encoding in ENCODINGS:
        clf = SoftTreeEnsembleClassifier(**SETTINGS, numeric_encoding=encoding).fit(X, y)
        with torch.no_grad():
            features = export_module(clf).encode(torch.tensor(X_test)).numpy()
        expected = clf.encoder_.transform_columns([X_test[:, j] for j in range(X.shape[1])])
        assert features.dtype == np.float32
        assert_array_equal(features, expected)


def test_multioutput_regressor():
    X, X_test, _ = _data()
    Y = np.column_stack([X[:, 1], 100 + 3 * X[:, 3]])
    reg = SoftTreeEnsembleRegressor(**SETTINGS).fit(X, Y)
    out = _run(export_module(reg), X_test)
    assert out.shape == (len(X_test), 2)
    # float32 outputs in the units of y (values near 250): a few float32 ulps
    assert_allclose(out, reg.predict(X_test), rtol=1e-6, atol=ATOL)


def test_quantile_column_matches_sklearn():
    """The torch QuantileTransformer (normal output) against sklearn's transform:
    ties, bounds (within 1e-7 of the extreme quantiles), exact quantiles,
    extrapolation; NaN is the column's missing value (zeros)."""
    rng = np.random.RandomState(1)
    x = np.concatenate([rng.standard_normal(300), np.zeros(40), np.full(10, 3.0)])
    for n_quantiles in (len(x), 50, 2):
        qt = QuantileTransformer(output_distribution="normal", n_quantiles=n_quantiles,
                                 subsample=None).fit(x.reshape(-1, 1))
        q = qt.quantiles_[:, 0]
        x_test = np.concatenate([
            x, q, q + 5e-8, q - 5e-8, q + 1e-6, [q[0] - 1, q[-1] + 1, -1e6, 1e6],
            rng.uniform(q[0], q[-1], 500),
        ])
        col = _QuantileNormalColumn(qt, has_missing=True)
        with torch.no_grad():
            got = col(torch.tensor(np.append(x_test, np.nan))).numpy()
        expected = qt.transform(x_test.reshape(-1, 1))[:, 0]
        assert_allclose(got[:-1, 0], expected, rtol=1e-14, atol=1e-14)
        assert_array_equal(got[:-1, 1], 0)
        assert_array_equal(got[-1], [0, 1])


def test_portable_ndtri():
    p = np.concatenate([
        [0.0, 1e-300, 1e-100, 1e-20, 1e-7, 0.01, np.exp(-2), 0.2, 0.5, 0.99,
         1 - np.exp(-2), 1 - 1e-7, 1 - 1e-12, 1.0, -0.5, 1.5, np.nan],
        np.random.RandomState(0).uniform(size=2000),
    ])
    got = _ndtri_portable(torch.tensor(p)).numpy()
    expected = torch.special.ndtri(torch.tensor(p)).numpy()
    assert_allclose(got, expected, rtol=1e-14, atol=1e-14, equal_nan=True)


@pytest.fixture(scope="module")
def frame_clf():
    pytest.importorskip("pandas")
    frame, y = mixed_frame(160, size_dtype=np.float32)
    clf = SoftTreeEnsembleClassifier(**SETTINGS, max_categories=3).fit(frame, y)
    return clf, frame


def test_dataframe_with_categories(frame_clf):
    pd = pytest.importorskip("pandas")
    clf, frame = frame_clf
    enc = clf.encoder_
    assert enc.categorical_.tolist() == [False, True, True, False]
    assert enc.has_infrequent_.tolist() == [False, True, False, False]
    new = pd.DataFrame({
        "size": [0.5, np.nan, 9.0, -9.0],
        "color": ["red", "purple", None, "violet"],  # unseen, missing, infrequent
        "city": pd.Categorical(["Lima", None, "Oslo", "Paris"]),
        "age": [np.nan, 30.0, 99.0, 1.0],
    })
    codes = encode_categories(clf, new)
    cats = enc.categories_
    assert codes[0, 1] == cats[1].tolist().index("red")
    assert codes[1, 1] == -1 and np.isnan(codes[2, 1]) and codes[3, 1] == -1
    assert codes[0, 2] == cats[2].tolist().index("Lima")
    assert np.isnan(codes[1, 2]) and codes[3, 2] == -1
    assert np.isnan(codes[0, 3]) and codes[1, 0] != codes[1, 0]
    module = export_module(clf)
    for rows in (frame, new):
        assert_allclose(_run(module, encode_categories(clf, rows)), clf.decision_function(rows),
                        rtol=0, atol=ATOL)
    # any code that is not a category's is an unseen category
    other = codes.copy()
    other[1, 1], other[3, 2] = 7.0, 0.5
    assert_array_equal(_run(module, other), _run(module, codes))
    # an object array works as well, and the names are checked as in predict
    with pytest.warns(UserWarning, match="feature names"):
        assert_array_equal(encode_categories(clf, new.to_numpy(dtype=object)), codes)
    with pytest.raises(ValueError, match="feature names"):
        encode_categories(clf, new[["age", "size", "color", "city"]])


def test_errors():
    X, _, y = _data()
    with pytest.raises(NotFittedError):
        export_module(SoftTreeEnsembleClassifier())
    pipe = make_pipeline(StandardScaler(), SoftTreeEnsembleClassifier(**SETTINGS))
    with pytest.raises(TypeError, match="Pipeline"):
        export_module(pipe.fit(np.nan_to_num(X), y))


def _require(torch_api, what):
    """Skip when this torch lacks an export API."""
    if torch_api is None:
        pytest.skip(f"torch {torch.__version__} has no {what}")


def _fitted(encoding="quantile_normal", labels=None):
    X, X_test, y = _data()
    clf = SoftTreeEnsembleClassifier(**SETTINGS, arch="non_oblivious",
                                     numeric_encoding=encoding).fit(X, y if labels is None
                                                                     else labels)
    return clf, X_test


@pytest.mark.parametrize("encoding", ["piecewise_linear", "quantile_normal"])
def test_torch_export(encoding):
    export = getattr(getattr(torch, "export", None), "export", None)
    _require(export, "torch.export.export")
    clf, X_test = _fitted(encoding)
    module = export_module(clf)
    example = torch.tensor(X_test[:16], dtype=torch.float32)
    try:
        program = export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    except Exception as exc:  # pragma: no cover - older torch versions
        if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 6):
            raise
        pytest.skip(f"torch.export.export fails in torch {torch.__version__}: {exc}")
    with torch.no_grad():
        out = program.module()(torch.tensor(X_test, dtype=torch.float32)).numpy()
    assert_allclose(out, clf.decision_function(X_test), rtol=0, atol=ATOL)


def test_torch_jit_trace():
    _require(getattr(getattr(torch, "jit", None), "trace", None), "torch.jit.trace")
    clf, X_test = _fitted()
    module = export_module(clf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchScript's deprecation notices
        traced = torch.jit.trace(module, (torch.tensor(X_test[:16], dtype=torch.float32),))
    with torch.no_grad():
        out = traced(torch.tensor(X_test, dtype=torch.float32)).numpy()  # another batch size
    assert_allclose(out, clf.decision_function(X_test), rtol=0, atol=ATOL)


@pytest.mark.slow
def test_onnx(tmp_path):
    """torch.onnx.export and onnxruntime (the ``export`` extra): 3 classes,
    quantile-normal encoding (the portable normal quantile), NaN, any batch size."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    try:
        import onnxscript  # noqa: F401  (the exporter of torch >= 2.9)
        dynamo = True
    except ImportError:
        dynamo = False
    X, X_test, y = _data()
    clf = SoftTreeEnsembleClassifier(**SETTINGS, arch="decision_list",
                                     numeric_encoding="quantile_normal").fit(X, y)
    module = export_module(clf)
    example = torch.tensor(X_test[:16], dtype=torch.float32)
    path = tmp_path / "model.onnx"
    # optimize=False: the exporter's graph rewrites (most of its time) are not what this checks
    kwargs = (dict(dynamic_shapes=({0: torch.export.Dim("batch")},), optimize=False) if dynamo
              else dict(dynamic_axes={"X": {0: "batch"}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), str(path), input_names=["X"],
                          output_names=["scores"], dynamo=dynamo, **kwargs)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"X": X_test.astype(np.float32)})
    assert out.shape == (len(X_test), 3)
    assert_allclose(out, clf.decision_function(X_test), rtol=0, atol=ATOL)


def test_sharded_export():
    X, X_test, y = _data()
    X, X_test = np.nan_to_num(X), np.nan_to_num(X_test)  # the meta-estimator takes no NaN
    base = SoftTreeEnsembleClassifier(**SETTINGS, numeric_encoding="none")
    sharded = ShardedSoftTreeEnsemble(base, n_shards=2, random_state=0).fit(X, y)
    assert_allclose(_run(export_module(sharded), X_test), sharded.decision_function(X_test),
                    rtol=0, atol=ATOL)
    assert_array_equal(encode_categories(sharded, X_test), X_test)


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def test_skops_trusted_types(tmp_path, frame_clf):
    """skops.io needs only the public estimator classes trusted: the fitted encoder
    (categories, quantile transformers), the architecture and parameters of the
    estimators, and the fitted aligner of the sharded meta-estimator are stored as
    plain types (the five types ShardedSoftTreeEnsemble needed are now two)."""
    sio = pytest.importorskip("skops.io")
    clf, frame = frame_clf
    X, X_test, y = _data()
    quantile = SoftTreeEnsembleRegressor(**SETTINGS, numeric_encoding="quantile_normal").fit(
        X, X[:, 1])
    base = SoftTreeEnsembleClassifier(**SETTINGS, numeric_encoding="none")
    sharded = ShardedSoftTreeEnsemble(base, n_shards=2, random_state=0).fit(np.nan_to_num(X), y)
    cases = [
        (clf, frame, [_name(SoftTreeEnsembleClassifier)]),
        (quantile, X_test, [_name(SoftTreeEnsembleRegressor)]),
        (sharded, np.nan_to_num(X_test),
         [_name(SoftTreeEnsembleClassifier), _name(ShardedSoftTreeEnsemble)]),
    ]
    for est, X_eval, trusted in cases:
        path = tmp_path / "model.skops"
        sio.dump(est, path)
        assert sorted(sio.get_untrusted_types(file=path)) == trusted
        back = sio.load(path, trusted=trusted)
        assert_array_equal(back.predict(X_eval), est.predict(X_eval))
        assert_allclose(_run(export_module(back), encode_categories(back, X_eval)),
                        _run(export_module(est), encode_categories(est, X_eval)))
    back = sio.load(path, trusted=trusted)
    assert type(back.aligner_) is type(sharded.aligner_)
    assert back.aligner_.alignments_ == sharded.aligner_.alignments_
    assert back.aligner_.n_iter_ == sharded.aligner_.n_iter_
    assert_array_equal(back.weights_, sharded.weights_)
    # pickle goes through the same state
    again = pickle.loads(pickle.dumps(sharded))
    assert again.aligner_.alignments_ == sharded.aligner_.alignments_
    aligned = again.aligner_.align(again.estimators_)[1].tree_params_
    expected = sharded.aligner_.align(sharded.estimators_)[1].tree_params_
    assert_array_equal(aligned.split_weight, expected.split_weight)
    assert_array_equal(aligned.leaf_value, expected.leaf_value)


@pytest.fixture(scope="module")
def exported():
    X, y = three_feature_binary_data()
    clf = SoftTreeEnsembleClassifier(**TINY).fit(X, y)
    return export_module(clf), X


def test_exported_module_refuses_another_number_of_columns(exported):
    module, X = exported
    Xt = torch.tensor(X, dtype=torch.float32)
    assert module(Xt).shape == (len(X),)
    with pytest.raises(ValueError, match=r"X has 4 column\(s\), but the exported module "
                                         r"expects 3"):
        module(torch.cat([Xt, Xt[:, :1]], dim=1))
    with pytest.raises(ValueError, match=r"X has 2 column\(s\), but the exported module "
                                         r"expects 3"):
        module(Xt[:, :2])
    with pytest.raises(ValueError, match=r"2-D tensor of shape \(n_samples, 3\), got 1 "):
        module(Xt[:, 0])
    with pytest.raises(ValueError, match="got 3 dimension"):
        module(Xt[:, :, None])
    with pytest.raises(TypeError, match="torch.Tensor of shape .* got ndarray"):
        module(np.hstack([X, X[:, :1]]))
    with pytest.raises(ValueError, match="4 column"):
        module.encode(torch.cat([Xt, Xt[:, :1]], dim=1))


def test_exported_graphs_keep_the_number_of_columns(exported):
    """torch.export resolves the check on the static number of columns (a guard of the
    program); torch.jit.trace records it as a reshape, without a TracerWarning."""
    module, X = exported
    Xt = torch.tensor(X, dtype=torch.float32)
    wide = torch.cat([Xt, Xt[:, :1]], dim=1)
    program = torch.export.export(module, (Xt[:16],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    with torch.no_grad():
        assert torch.equal(program.module()(Xt), module(Xt))
    with pytest.raises(Exception, match="3"):
        program.module()(wide)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(module, (Xt[:16],))
    assert not [w for w in caught if "Tracer" in type(w.message).__name__]
    with torch.no_grad():
        assert torch.equal(traced(Xt), module(Xt))
    with pytest.raises(RuntimeError, match=r"\[40, 3\]"):
        traced(wide)

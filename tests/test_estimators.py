"""Behaviour of SoftTreeEnsembleClassifier / SoftTreeEnsembleRegressor beyond sklearn's checks:
reproducibility, global state, composition with sklearn tools, persistence, labels, errors,
early stopping, progress display, parameter arrays and the regressor's targets."""

import pickle
import random
import subprocess
import sys
import textwrap
import warnings

import joblib
import numpy as np
import pytest
import torch
from conftest import FAST, PAPER_RECIPE
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_blobs, make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import QuantileTransformer
from sklearn.utils._param_validation import InvalidParameterError

from sktree_lmc import (
    ARCHITECTURES,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TreeParams,
    get_architecture,
    merge_estimators,
)

ARCHS = sorted(ARCHITECTURES)
#: conftest's FAST, trained a little longer: the score checks need fitted models
TRAINED = {**FAST, "learning_rate": 0.05, "max_epochs": 10, "random_state": 0}


@pytest.fixture(scope="module")
def binary():
    return make_classification(n_samples=200, n_features=6, n_informative=4, random_state=0)


@pytest.fixture(scope="module")
def blobs3():
    return make_blobs(n_samples=240, centers=3, n_features=4, cluster_std=1.0, random_state=0)


def clf(**kw):
    return SoftTreeEnsembleClassifier(**{**TRAINED, **kw})


def reg(**kw):
    return SoftTreeEnsembleRegressor(**{**TRAINED, **kw})


def assert_same_params(p, q):
    for f in ("split_weight", "split_bias", "leaf_value"):
        assert_array_equal(getattr(p, f), getattr(q, f))


# -- reproducibility and global state ------------------------------------------------------


@pytest.mark.parametrize(
    "arch, n_threads", [(arch, 1) for arch in ARCHS] + [("non_oblivious", 2)]
)
def test_random_state_gives_bit_identical_fits(arch, n_threads, binary):
    X, y = binary
    kw = dict(arch=arch, max_epochs=5, early_stopping=True, validation_fraction=0.2)
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        a, b = clf(**kw).fit(X, y), clf(**kw).fit(X, y)
    finally:
        torch.set_num_threads(previous)
    assert_same_params(a.tree_params_, b.tree_params_)
    assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.loss_curve_ == b.loss_curve_
    c = clf(**{**kw, "random_state": 1}).fit(X, y)
    assert not np.array_equal(a.tree_params_.split_weight, c.tree_params_.split_weight)


def test_random_state_instance_and_none(binary):
    X, y = binary
    a = clf(random_state=np.random.RandomState(3)).fit(X, y)
    b = clf(random_state=np.random.RandomState(3)).fit(X, y)
    assert_same_params(a.tree_params_, b.tree_params_)
    # None: fresh entropy, so two fits differ
    c, d = clf(random_state=None).fit(X, y), clf(random_state=None).fit(X, y)
    assert not np.array_equal(c.tree_params_.split_weight, d.tree_params_.split_weight)


@pytest.mark.parametrize("random_state", [0, None])
def test_fit_leaves_global_random_state_untouched(random_state, binary):
    X, y = binary
    seed, torch_state = torch.initial_seed(), torch.get_rng_state()
    np_state, py_state = np.random.get_state(), random.getstate()
    clf(random_state=random_state, early_stopping=True).fit(X, y).predict(X)
    reg(random_state=random_state).fit(X, X[:, 0]).predict(X)
    assert torch.initial_seed() == seed
    assert torch.equal(torch.get_rng_state(), torch_state)
    new_np_state = np.random.get_state()
    assert new_np_state[0] == np_state[0] and new_np_state[2:] == np_state[2:]
    assert_array_equal(new_np_state[1], np_state[1])
    assert random.getstate() == py_state


# -- composition with sklearn tools ----------------------------------------------------------


def test_pipeline_with_quantile_transformer(binary):
    X, y = binary
    X = np.exp(X)  # skewed features, which the transform normalizes
    pipe = make_pipeline(
        QuantileTransformer(n_quantiles=100, output_distribution="normal", random_state=0),
        clf(max_epochs=20, early_stopping=False, **PAPER_RECIPE),  # the paper's way
    ).fit(X, y)
    assert pipe.score(X, y) > 0.85
    assert pipe.predict_proba(X).shape == (len(X), 2)


@pytest.mark.slow  # starts two worker processes that import torch
def test_grid_search_over_arch_and_depth_in_parallel(binary):
    X, y = binary
    grid = GridSearchCV(
        clf(n_estimators=4, max_epochs=3),
        {"arch": ARCHS, "depth": [1, 2]},
        cv=2,
        n_jobs=2,
    ).fit(X, y)
    assert len(grid.cv_results_["params"]) == 8
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()
    assert grid.best_params_["arch"] in ARCHS
    assert grid.best_estimator_.architecture_.name == grid.best_params_["arch"]
    assert grid.best_estimator_.architecture_.depth == grid.best_params_["depth"]


def test_clone(binary):
    X, y = binary
    est = clf(arch="decision_list", depth=3).fit(X, y)
    fresh = clone(est)
    assert fresh.get_params() == est.get_params()
    assert not hasattr(fresh, "tree_params_")
    with pytest.raises(NotFittedError):
        fresh.predict(X)
    assert_same_params(fresh.fit(X, y).tree_params_, est.tree_params_)


# -- persistence and device ----------------------------------------------------------------


def _torch_objects(obj):
    return [k for k, v in vars(obj).items() if isinstance(v, (torch.Tensor, torch.nn.Module))]


@pytest.mark.parametrize("arch", ARCHS)
def test_fitted_state_is_numpy_with_documented_layout(arch, blobs3):
    X, y = blobs3
    est = clf(arch=arch, depth=3, numeric_encoding="none").fit(X, y)
    a = est.architecture_
    p = est.tree_params_
    assert _torch_objects(est) == []
    assert isinstance(p, TreeParams)
    for f in ("split_weight", "split_bias", "leaf_value"):
        assert type(getattr(p, f)) is np.ndarray and getattr(p, f).dtype == np.float32
    assert p.split_weight.shape == (8, a.n_nodes, 4)
    assert p.split_bias.shape == (8, a.n_nodes)
    assert p.leaf_value.shape == (8, a.n_free_leaves, 3)
    assert est.device_ == "cpu"
    assert est.n_outputs_ == 3 and est.n_features_in_ == 4


def test_pickle_and_joblib_round_trip(tmp_path, blobs3):
    X, y = blobs3
    est = clf(arch="oblivious").fit(X, y)
    expected = est.predict_proba(X)
    back = pickle.loads(pickle.dumps(est))
    assert_array_equal(back.predict_proba(X), expected)
    joblib.dump(est, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib")
    assert_array_equal(loaded.predict_proba(X), expected)
    assert_array_equal(loaded.predict(X), est.predict(X))
    assert _torch_objects(loaded) == []


def test_skops_round_trip_trusting_only_the_estimator_class(tmp_path, blobs3):
    """skops.io (safe loading) needs nothing trusted but the estimator's class."""
    import pandas as pd

    sio = pytest.importorskip("skops.io")
    X, y = blobs3
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    labels = np.array(["a", "b", "c"])[y]
    a, b = (clf(arch="decision_list", early_stopping=True, random_state=seed).fit(X, labels)
            for seed in (0, 1))
    fitted = [
        (a, X),
        (merge_estimators(a, b), X),
        (reg(arch="non_oblivious", depth=3).fit(frame, X[:, 0] - 2 * X[:, 1]), frame),
    ]
    for est, X_eval in fitted:
        path = tmp_path / "model.skops"
        sio.dump(est, path)
        cls = type(est)
        name = f"{cls.__module__}.{cls.__qualname__}"
        assert sio.get_untrusted_types(file=path) == [name]
        back = sio.load(path, trusted=[name])
        assert type(back) is cls
        assert back.architecture_ is get_architecture(est.arch, est.depth)  # rebuilt
        assert_same_params(back.tree_params_, est.tree_params_)
        assert back.get_params() == est.get_params()
        assert back.loss_curve_ == est.loss_curve_
        assert_array_equal(back.predict(X_eval), est.predict(X_eval))
        if hasattr(est, "classes_"):
            assert_array_equal(back.classes_, est.classes_)
            assert_array_equal(back.predict_proba(X_eval), est.predict_proba(X_eval))
        else:
            assert_array_equal(back.feature_names_in_, est.feature_names_in_)
            assert_array_equal(back.y_scale_, est.y_scale_)
        # dumping leaves the estimator itself untouched
        assert isinstance(est.tree_params_, TreeParams)


@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_pickles_of_another_version_are_refused(blobs3, Est):
    """Issue 44: a state written without this version's pickle format (an older
    layout: the TreeParams objects, or hyperparameters missing) is a clear error,
    never a model loaded with guessed defaults; this version's state round-trips."""
    from sklearn.base import BaseEstimator

    from sktree_lmc._persistence import FORMAT_KEY, PICKLE_FORMAT

    X, y = blobs3
    est = Est(n_estimators=4, max_epochs=2, device="cpu", random_state=0).fit(X, y)
    state = est.__getstate__()
    assert state[FORMAT_KEY] == PICKLE_FORMAT
    assert b"TreeParams" not in pickle.dumps(est)  # plain types only
    old = BaseEstimator.__getstate__(est)  # the object form of the first versions
    for bad in (old, {**state, FORMAT_KEY: PICKLE_FORMAT + 1},
                {k: v for k, v in state.items() if k != FORMAT_KEY}):
        back = Est.__new__(Est)
        with pytest.raises(ValueError, match=f"{Est.__name__} was pickled by .*pickle format"):
            back.__setstate__(bad)
    back = pickle.loads(pickle.dumps(est))
    assert back.get_params() == est.get_params()
    assert_array_equal(back.predict(X), est.predict(X))


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the CPU-only fallback")
def test_model_configured_for_cuda_predicts_on_a_cpu_only_machine(binary):
    """What a CPU-only machine sees of a model pickled after a GPU fit: the state is
    NumPy, the hyperparameter still says "cuda"; predictions fall back to the CPU."""
    X, y = binary
    est = clf().fit(X, y)
    expected = est.predict_proba(X)
    est.set_params(device="cuda")
    est.device_ = "cuda"
    back = pickle.loads(pickle.dumps(est))
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert_array_equal(back.predict_proba(X), expected)
    with pytest.raises(ValueError, match="CUDA is not available"):
        back.fit(X, y)


@pytest.mark.gpu
def test_model_fitted_on_gpu_loads_on_a_cpu_only_machine(tmp_path, binary):
    X, y = binary
    est = clf(device="cuda").fit(X, y)
    assert est.device_.startswith("cuda")
    assert _torch_objects(est) == []
    assert type(est.tree_params_.split_weight) is np.ndarray
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "expected.npy", est.predict_proba(X))
    joblib.dump(est, tmp_path / "model.joblib")
    script = textwrap.dedent(f"""
        import os, warnings
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        import joblib, numpy as np, torch
        assert not torch.cuda.is_available()
        est = joblib.load({str(tmp_path / "model.joblib")!r})
        X = np.load({str(tmp_path / "X.npy")!r})
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            proba = est.predict_proba(X)
        np.testing.assert_allclose(proba, np.load({str(tmp_path / "expected.npy")!r}),
                                   rtol=1e-6, atol=1e-9)
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


# -- labels ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "labels",
    [
        np.array(["cat", "dog", "emu"]),
        np.array([-7, -1, 3]),
        np.array([-3.0, 1.0, 2.0]),
        np.array(["no", "yes"]),
        np.array([False, True]),
    ],
    ids=["str", "negative-int", "float", "str-binary", "bool"],
)
def test_labels_of_any_type(labels, blobs3):
    X, y = blobs3
    if len(labels) == 2:
        y = np.minimum(y, 1)
    y_labels = labels[y]
    est = clf(max_epochs=15).fit(X, y_labels)
    assert_array_equal(est.classes_, np.sort(labels))
    pred = est.predict(X)
    assert pred.dtype == y_labels.dtype
    assert set(pred) <= set(labels)
    assert np.mean(pred == y_labels) > 0.85
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), len(labels))
    assert_allclose(proba.sum(axis=1), 1.0)
    assert_array_equal(est.classes_[proba.argmax(axis=1)], pred)
    scores = est.decision_function(X)
    assert scores.shape == ((len(X),) if len(labels) == 2 else (len(X), len(labels)))
    assert_allclose(np.exp(est.predict_log_proba(X)), proba, rtol=1e-10)


def test_non_integral_float_labels_are_a_regression_target(binary):
    X, y = binary
    with pytest.raises(ValueError, match="Unknown label type"):
        clf().fit(X, y + 0.5)


def test_multiclass_with_many_classes():
    X, y = make_blobs(n_samples=300, centers=5, n_features=5, random_state=1)
    est = clf(arch="non_oblivious", max_epochs=20).fit(X, y)
    assert est.n_outputs_ == 5 and est.tree_params_.n_outputs == 5
    assert est.score(X, y) > 0.9


def test_tree_outputs_sum_to_the_raw_output(blobs3):
    X, y = blobs3
    est = clf(arch="decision_list").fit(X, y)
    per_tree = est.tree_outputs(X)
    assert per_tree.shape == (len(X), 8, 3)
    log_p = est.predict_log_proba(X)
    # the trees' sum plus the additive term (default additive_bins), which no tree holds
    params = est.tree_params_
    codes = est._encoded_input(X).codes.astype(np.intp)
    raw = per_tree.sum(axis=1) + params.additive[codes].sum(axis=1)
    # the kernel computes in float32: the float64 sum of the float32 per-tree outputs equals
    # its float32 ensemble output up to float32 rounding
    assert_allclose(raw - np.log(np.exp(raw).sum(axis=1, keepdims=True)), log_p,
                    rtol=1e-5, atol=1e-6)


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_inf_in_X_is_rejected(bad, binary):
    X, y = binary
    X = X.copy()
    X[3, 2] = bad
    with pytest.raises(ValueError, match="infinity in column 2"):
        clf().fit(X, y)
    est = clf().fit(*binary)
    with pytest.raises(ValueError, match="infinity in column 2"):
        est.predict(X)


@pytest.mark.parametrize("value", [1e39, -3.5e38, 1e300])
def test_values_beyond_float32_are_rejected(value, binary):
    """Finite in float64 but infinite in float32 (the training precision),
    with the identity encoding (the other encodings bound their outputs)."""
    X, y = binary
    bad = X.copy()
    bad[5, 1] = value
    with pytest.raises(ValueError, match="X contains values beyond the float32 range"):
        clf(numeric_encoding="none").fit(bad, y)
    with pytest.raises(ValueError, match="X contains values beyond the float32 range"):
        reg(numeric_encoding="none").fit(bad, X[:, 0])
    est = clf(numeric_encoding="none").fit(X, y)
    with pytest.raises(ValueError, match="X contains values beyond the float32 range"):
        est.predict_proba(bad)
    with pytest.raises(ValueError, match="y contains values beyond the float32 range"):
        reg().fit(X, np.r_[value, X[1:, 0]])


def test_huge_target_spread_is_rejected_not_inf(binary):
    X, _ = binary
    with pytest.raises(ValueError, match="y contains values beyond the float32 range"):
        reg().fit(X, X[:, 0] * 1e160)
    # the largest spread float32 can hold still standardizes to finite numbers
    est = reg(max_epochs=2).fit(X, np.sign(X[:, 0]) * 3e38)
    assert np.isfinite(est.y_scale_).all() and np.isfinite(est.predict(X)).all()


@pytest.mark.parametrize("name", ["n_estimators", "depth", "batch_size", "max_epochs",
                                  "n_iter_no_change", "learning_rate", "tol"])
@pytest.mark.parametrize("make", [clf, reg], ids=["classifier", "regressor"])
def test_booleans_are_not_numbers(make, name, binary):
    X, y = binary
    for value in (True, np.True_):
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter.*Got (np.)?True"):
            make(**{name: value}).fit(X, y)


def test_wrong_feature_count_at_predict(binary):
    X, y = binary
    est = clf().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :-1])
    with pytest.raises(ValueError, match="features"):
        est.tree_outputs(np.hstack([X, X]))


def test_single_class_is_rejected(binary):
    X, _ = binary
    with pytest.raises(ValueError, match="class"):
        clf().fit(X, np.full(len(X), "only"))


@pytest.mark.parametrize(
    "params",
    [
        {"arch": "oblique"},
        {"depth": 0},
        {"depth": -1},
        {"depth": 1.5},
        {"n_estimators": 0},
        {"learning_rate": 0.0},
        {"batch_size": 0},
        {"max_epochs": 0},
        {"validation_fraction": 1.0},
        {"split_init": 0.0},
        {"split_init": -0.5},
        {"split_init": "uniform"},
    ],
    ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()),
)
@pytest.mark.parametrize("make", [clf, reg], ids=["classifier", "regressor"])
def test_invalid_hyperparameters(make, params, binary):
    X, y = binary
    with pytest.raises(InvalidParameterError, match=next(iter(params))):
        make(**params).fit(X, y)
    assert issubclass(InvalidParameterError, ValueError)


@pytest.mark.parametrize("device", ["gpu0", "cuda:x", "not a device", ""])
def test_invalid_device_string(device, binary):
    X, y = binary
    with pytest.raises(ValueError, match="device"):
        clf(device=device).fit(X, y)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_cuda(binary):
    with pytest.raises(ValueError, match="CUDA is not available"):
        clf(device="cuda").fit(*binary)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decision_function",
                                    "predict_log_proba", "tree_outputs", "get_tree_params"])
def test_unfitted_estimator_raises_not_fitted(method, binary):
    X, _ = binary
    with pytest.raises(NotFittedError):
        getattr(clf(), method)(*([X] if method != "get_tree_params" else []))
    with pytest.raises(NotFittedError):
        reg().predict(X)


def test_bad_sample_weights(binary):
    X, y = binary
    with pytest.raises(ValueError, match="(?i)negative"):
        clf().fit(X, y, sample_weight=np.r_[-1.0, np.ones(len(y) - 1)])
    with pytest.raises(ValueError, match="zero"):
        clf().fit(X, y, sample_weight=np.zeros(len(y)))


@pytest.mark.parametrize("make, params, X_scale, match", [
    (reg, {"learning_rate": 1e30, "early_stopping": False}, 1.0,
     "epoch 2: the training loss is inf"),
    (reg, {"learning_rate": 1e30, "early_stopping": True}, 1.0,
     "epoch 1: the validation loss is inf"),
], ids=["regressor-learning-rate", "regressor-validation"])
def test_diverging_training_stops_with_an_error_naming_the_epoch(make, params, X_scale, match):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(64, 4))
    y = X[:, 0] if make is reg else (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match=match) as info:
        make(**params, **PAPER_RECIPE, max_epochs=3).fit(np.sign(X) * X_scale, y)
    assert "lower learning_rate" in str(info.value)


@pytest.mark.parametrize("make", [clf, reg], ids=["classifier", "regressor"])
def test_finite_divergence_warns(make, binary):
    X, y = binary
    with pytest.warns(ConvergenceWarning, match="Training diverged.*lower learning_rate") as rec:
        make(learning_rate=1e6, max_epochs=3).fit(X, y)
    assert rec[0].filename == __file__  # points at the caller of fit


@pytest.mark.parametrize("leaf_init", ["tree", "ensemble"])
@pytest.mark.parametrize("make", [clf, reg], ids=["classifier", "regressor"])
def test_ordinary_fits_do_not_warn_of_divergence(make, leaf_init, binary):
    X, y = binary
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for arch in ARCHS:  # one epoch, a tiny rate: the loss stays at its initial value
            make(arch=arch, leaf_init=leaf_init, n_estimators=64, learning_rate=1e-6,
                 max_epochs=1).fit(X, y)


def test_an_outlier_target_is_not_taken_for_divergence():
    """The first batch alone is no reference: it may miss the rows that dominate the loss."""
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(30, 3)), 0.01 * rng.normal(size=30)
    y[-1] = 1e30  # the first batch's initial loss is about 0.03, the last epoch's about 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reg(batch_size=8, max_epochs=2).fit(X, y)


@pytest.mark.parametrize("scale", [1e-40, 3e38, 1e39, 1e300])
def test_the_scale_of_sample_weights_is_free(scale, binary):
    """Only weight ratios matter: uniform weights of any finite size, even
    beyond float32, fit the same model as no weights (no overflow to NaN)."""
    X, y = binary
    expected = clf().fit(X, y).tree_params_
    assert_same_params(
        clf().fit(X, y, sample_weight=np.full(len(y), scale)).tree_params_, expected
    )
    w = np.where(y == 1, 2.0, 1.0)
    assert_same_params(clf().fit(X, y, sample_weight=w * scale).tree_params_,
                       clf().fit(X, y, sample_weight=w).tree_params_)


# -- class weights ------------------------------------------------------------------------------


def test_classifier_and_regressor_share_their_hyperparameters():
    """The classifier and the regressor repeat the base __init__; the classifier adds
    class_weight and label_smoothing, the regressor its loss: no drift."""
    assert set(SoftTreeEnsembleClassifier().get_params()) - {"class_weight", "label_smoothing"} == (
        set(SoftTreeEnsembleRegressor().get_params()) - {"loss", "quantile"}
    )


def test_balanced_class_weight_raises_minority_recall():
    from sklearn.metrics import recall_score

    X, y = make_classification(n_samples=2000, n_features=6, n_informative=3, weights=[0.9],
                               flip_y=0.02, class_sep=0.6, random_state=0)
    X_tr, X_te, y_tr, y_te = X[:1000], X[1000:], y[:1000], y[1000:]
    recall = {
        cw: recall_score(y_te, clf(class_weight=cw, n_estimators=16).fit(X_tr, y_tr).predict(X_te))
        for cw in (None, "balanced")
    }
    assert (y_tr == 1).mean() < 0.15
    assert recall["balanced"] > recall[None] + 0.1, recall


def test_class_weight_is_a_per_class_sample_weight(blobs3):
    X, y = blobs3
    labels = np.array(["a", "b", "c"])[y]
    per_class = {"a": 1.0, "b": 3.0, "c": 0.5}
    w = np.array([per_class[label] for label in labels])
    expected = clf().fit(X, labels, sample_weight=w).tree_params_
    assert_same_params(clf(class_weight=per_class).fit(X, labels).tree_params_, expected)
    # missing classes weigh 1
    assert_same_params(clf(class_weight={"b": 3.0, "c": 0.5}).fit(X, labels).tree_params_,
                       expected)
    # combined with sample_weight: the product
    sw = np.random.RandomState(0).uniform(0.5, 2.0, len(y))
    assert_same_params(
        clf(class_weight=per_class).fit(X, labels, sample_weight=sw).tree_params_,
        clf().fit(X, labels, sample_weight=w * sw).tree_params_,
    )
    # "balanced" as in scikit-learn
    from sklearn.utils.class_weight import compute_sample_weight

    assert_same_params(
        clf(class_weight="balanced").fit(X[:100], labels[:100]).tree_params_,
        clf().fit(X[:100], labels[:100],
                  sample_weight=compute_sample_weight("balanced", labels[:100])).tree_params_,
    )


@pytest.mark.parametrize("class_weight, error, match", [
    ("auto", InvalidParameterError, "class_weight"),
    ([1.0, 2.0], InvalidParameterError, "class_weight"),
    ({5: 1.0}, ValueError, r"class_weight has labels \[5\] that are not classes"),
    ({0: -1.0}, ValueError, "class_weight values must be finite non-negative"),
    ({0: np.nan}, ValueError, "class_weight values must be finite non-negative"),
    ({0: True}, ValueError, "class_weight values must be finite non-negative"),
    ({0: 0.0, 1: 0.0}, ValueError, "sums to zero"),
])
def test_bad_class_weight(class_weight, error, match, binary):
    with pytest.raises(error, match=match):
        clf(class_weight=class_weight).fit(*binary)


# -- sample weights (the reason of the expected failure in test_common.py) -------------------


def _weights_and_repeats():
    rng = np.random.RandomState(42)
    X = rng.normal(size=(20, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=20) > 0).astype(int)
    sw = rng.randint(1, 4, size=20)
    return X, y, sw, X.repeat(sw, axis=0), y.repeat(sw)


def test_sample_weight_equals_repetition_within_one_minibatch():
    """Everything in one minibatch: the weighted mean loss is the mean loss over
    the repeated rows, so both fits agree up to float32 rounding."""
    X, y, sw, X_rep, y_rep = _weights_and_repeats()
    # the identity encoding: quantile knots of repeated rows differ (so do the additive
    # term's quantile bins: none here) and the uniform start of the splits:
    # split_init="data" draws thresholds from the rows, and repeated rows change the draw;
    # no teacher: its weights are relative (rescaled to a mean of 1), so against repeated
    # rows its L2 penalty weighs differently (test_boosting.py tests it with l2=0)
    kw = dict(batch_size=512, max_epochs=5, learning_rate=0.01, early_stopping=False,
              numeric_encoding="none", split_init="fan_in", additive_bins=None,
              teacher_weight=0.0)
    weighted = clf(**kw).fit(X, y, sample_weight=sw)
    repeated = clf(**kw).fit(X_rep, y_rep)
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-4, atol=1e-5)


def test_sample_weight_differs_from_repetition_with_minibatches():
    """With minibatches, repeating rows changes the number and content of the
    steps, so weights and repetitions give clearly different models."""
    X, y, sw, X_rep, y_rep = _weights_and_repeats()
    kw = dict(batch_size=8, max_epochs=5, learning_rate=0.01)
    weighted = clf(**kw).fit(X, y, sample_weight=sw)
    repeated = clf(**kw).fit(X_rep, y_rep)
    diff = np.abs(weighted.predict_proba(X) - repeated.predict_proba(X)).max()
    assert diff > 1e-3


def test_zero_weight_rows_do_not_move_the_regressor_targets():
    X, y = make_regression(n_samples=60, n_features=3, random_state=0)
    sw = np.r_[np.ones(50), np.zeros(10)]
    y = y.copy()
    y[50:] = 1e6  # outliers with zero weight
    est = reg().fit(X, y, sample_weight=sw)
    assert_allclose(est.y_mean_, [y[:50].mean()])
    assert_allclose(est.y_scale_, [y[:50].std()])


# -- early stopping and progress ---------------------------------------------------------------


@pytest.mark.parametrize("patience", [1, 2])
def test_early_stopping_stops_and_restores_the_best_epoch(patience):
    # Pure-noise labels: the validation loss soon stops improving.
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(200, 5)), rng.randint(0, 2, size=200)
    # a constant learning rate: fits with other max_epochs then share their first epochs
    kw = dict(early_stopping=True, validation_fraction=0.25, n_iter_no_change=patience,
              learning_rate=0.1, batch_size=32, lr_schedule="constant", warmup_fraction=0.0)
    a = clf(max_epochs=200, **kw).fit(X, y)
    assert a.n_epochs_ < 200
    assert len(a.validation_loss_curve_) == len(a.loss_curve_) == a.n_epochs_
    best = int(np.argmin(a.validation_loss_curve_))
    assert a.n_epochs_ - 1 - best == patience  # stopped after `patience` bad epochs
    # A fit that ends at the best epoch sees the same split and minibatches up to
    # there; its final parameters are what `a` must have restored.
    b = clf(max_epochs=best + 1, **kw).fit(X, y)
    assert b.validation_loss_curve_ == a.validation_loss_curve_[: best + 1]
    assert_same_params(a.tree_params_, b.tree_params_)


def test_without_early_stopping_all_epochs_run(binary):
    est = clf(max_epochs=4, early_stopping=False).fit(*binary)
    assert est.n_epochs_ == 4 and len(est.loss_curve_) == 4
    assert est.validation_loss_curve_ is None


@pytest.mark.parametrize("verbose", [1, 2])
def test_verbose_fit_writes_a_readable_log_when_redirected(verbose, binary, capsys):
    """stderr captured (not a terminal): a line of what ran before the first epoch
    (encoding, the teacher), one line per epoch and a closing line."""
    est = clf(max_epochs=3, verbose=verbose, early_stopping=True).fit(*binary)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == est.n_iter_ + 2
    assert lines[0].startswith("SoftTreeEnsembleClassifier: encoded ")
    for i, line in enumerate(lines[1:-1]):
        assert line.startswith(f"SoftTreeEnsembleClassifier epoch {i + 1}/3: loss ")
        assert "val_loss" in line and "elapsed" in line and "left <=" in line
    assert f"kept epoch {est.best_epoch_} (validation loss" in lines[-1]


def test_n_iter_and_the_kept_epoch_when_the_validation_loss_rises(binary, monkeypatch):
    """The validation loss falls until epoch 3 and rises after: with patience 3
    the fit stops after epoch 6 and keeps epoch 3, the parameters a 3-epoch
    fit ends with."""
    from sktree_lmc.training._training import ValidationLoss

    def make_losses():
        values = iter([1.0, 0.8, 0.7, 0.75, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4])

        def on_epoch_end(self, log):  # the validation loss of each epoch, scripted
            log.val_loss = next(values)
            self.curve.append(log.val_loss)
            return False

        return on_epoch_end

    kw = dict(early_stopping=True, n_iter_no_change=3, max_epochs=10, **PAPER_RECIPE)
    monkeypatch.setattr(ValidationLoss, "on_epoch_end", make_losses())
    est = clf(**kw).fit(*binary)
    assert est.n_iter_ == 6 and est.best_epoch_ == 3 and est.n_epochs_ == 6
    assert est.validation_score_ == [-1.0, -0.8, -0.7, -0.75, -0.9, -1.0]
    monkeypatch.setattr(ValidationLoss, "on_epoch_end", make_losses())
    three = clf(**{**kw, "max_epochs": 3}).fit(*binary)
    assert three.n_iter_ == 3 and three.best_epoch_ == 3
    assert_same_params(est.tree_params_, three.tree_params_)
    no_es = clf(max_epochs=4, early_stopping=False).fit(*binary)
    assert no_es.n_iter_ == no_es.best_epoch_ == 4 and no_es.validation_score_ is None


@pytest.mark.parametrize("scoring", ["accuracy", "roc_auc", None])
def test_early_stopping_on_a_scorer(scoring, binary):
    est = clf(max_epochs=6, early_stopping=True, scoring=scoring, n_iter_no_change=2).fit(*binary)
    scores = est.validation_score_
    assert len(scores) == est.n_iter_ and all(0 <= v <= 1 for v in scores)
    best = est.best_epoch_
    assert scores[best - 1] == max(scores[:best])


def test_early_stopping_on_a_regression_scorer():
    X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    est = reg(max_epochs=4, early_stopping=True, scoring="neg_mean_absolute_error").fit(X, y)
    assert all(v <= 0 for v in est.validation_score_)
    with pytest.raises(ValueError, match="nope"):
        reg(max_epochs=2, scoring="nope", early_stopping=True).fit(X, y)


def test_silent_by_default(binary, capsys):
    clf(max_epochs=2).fit(*binary)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# -- parameters as arrays ---------------------------------------------------------------------


def test_get_and_set_tree_params_round_trip(blobs3):
    X, y = blobs3
    est = clf(arch="oblivious").fit(X, y)
    expected = est.predict_proba(X)
    params = est.get_tree_params()
    params.leaf_value[:] = 0.0  # a copy: the model is unchanged
    params.additive[:] = 0.0
    assert_array_equal(est.predict_proba(X), expected)
    assert est.set_tree_params(params) is est
    assert_allclose(est.predict_proba(X), 1 / 3)  # all leaves and the table zero: uniform
    params.leaf_value[:] = 1.0  # set_tree_params stored a copy
    assert_allclose(est.predict_proba(X), 1 / 3)
    original = clf(arch="oblivious").fit(X, y).get_tree_params()
    est.set_tree_params(original)
    assert_array_equal(est.predict_proba(X), expected)


def test_set_tree_params_errors(blobs3):
    X, y = blobs3
    est = clf(depth=2).fit(X, y)
    p = est.get_tree_params()
    with pytest.raises(ValueError, match="do not match"):
        est.set_tree_params(TreeParams(p.split_weight[:4], p.split_bias[:4], p.leaf_value[:4]))
    with pytest.raises(ValueError, match="do not match"):
        est.set_tree_params(TreeParams(p.split_weight[:, :, :2], p.split_bias, p.leaf_value))
    with pytest.raises(ValueError, match="do not match"):
        est.set_tree_params(TreeParams(p.split_weight, p.split_bias, p.leaf_value[:, :, :2]))
    with pytest.raises(TypeError, match="TreeParams"):
        est.set_tree_params((p.split_weight, p.split_bias, p.leaf_value))
    with pytest.raises(NotFittedError):
        clf().set_tree_params(p)
    for name in ("split_weight", "split_bias", "leaf_value"):
        for bad in (np.nan, np.inf):
            q = p.copy()
            getattr(q, name).flat[0] = bad
            with pytest.raises(ValueError, match=f"params.{name} contains NaN or infinity"):
                est.set_tree_params(q)
    assert_same_params(est.tree_params_, p)  # unchanged by the refused calls


# -- regressor --------------------------------------------------------------------------------


def test_regressor_1d_and_column_targets():
    X, y = make_regression(n_samples=200, n_features=4, noise=1.0, random_state=0)
    est = reg(max_epochs=20).fit(X, y)
    assert est.predict(X).shape == (200,)
    assert est.n_outputs_ == 1 and est.y_mean_.shape == (1,)
    assert est.score(X, y) > 0.8
    col = reg(max_epochs=20).fit(X, y[:, None])
    assert col.predict(X).shape == (200, 1)
    assert_allclose(col.predict(X)[:, 0], est.predict(X))


def test_regressor_multioutput():
    X, Y = make_regression(n_samples=200, n_features=4, n_targets=3, noise=1.0, random_state=0)
    est = reg(arch="non_oblivious", max_epochs=20).fit(X, Y)
    assert est.predict(X).shape == (200, 3)
    assert est.tree_params_.n_outputs == 3
    assert est.score(X, Y) > 0.8


def test_regressor_standardizes_targets():
    """Training sees (y - mean) / scale, so an affine change of y gives the same model
    and affinely changed predictions, whatever the scale of y."""
    X, y = make_regression(n_samples=150, n_features=4, noise=1.0, random_state=0)
    base = reg().fit(X, y)
    shifted = reg().fit(X, 1e6 * y + 1e4)
    assert_allclose(shifted.y_mean_, 1e6 * base.y_mean_ + 1e4)
    assert_allclose(shifted.y_scale_, 1e6 * base.y_scale_)
    assert_allclose(shifted.tree_params_.leaf_value, base.tree_params_.leaf_value,
                    rtol=1e-3, atol=1e-4)
    assert_allclose(shifted.predict(X), 1e6 * base.predict(X) + 1e4, rtol=1e-3)
    constant = reg().fit(X, np.full(len(X), 7.0))
    assert_allclose(constant.y_scale_, [1.0])
    assert_allclose(constant.predict(X), 7.0, atol=0.5)

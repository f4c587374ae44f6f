"""Input validation of the public entry points, tested with random inputs (hypothesis), as a
new user would call them.

fit, predict, predict_proba, merge_estimators, interpolation_curve and
lmc_barrier are called with fuzzed shapes, dtypes, extreme and non-finite
values, DataFrames of numeric, string, category and missing columns, and odd
hyperparameters (the input encoding and the training recipe included). Every
call must either raise a ValueError or TypeError (NotFittedError and
InvalidParameterError are both) with a message, or return finite numbers: no
NaN parameters, NaN predictions or infinite barriers, and no raw error of
another type.

The models are tiny and ``max_examples`` modest, so that the module runs in
well under 30 s. To count outcomes over many more examples, run::

    SKTREE_LMC_FUZZ_EXAMPLES=1000 SKTREE_LMC_FUZZ_COUNTS=counts.json \\
        python -m pytest tests/test_input_validation.py -q -p no:cacheprovider

which records every call's outcome ("clear error", "success" or "other")
per entry point in ``counts.json`` instead of failing on the first "other";
with ``SKTREE_LMC_FUZZ_MESSAGES=1`` it also counts the error messages.
"""

import atexit
import collections
import json
import os

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    interpolation_curve,
    lmc_barrier,
    merge_estimators,
)

N_EXAMPLES = int(os.environ.get("SKTREE_LMC_FUZZ_EXAMPLES", "40"))
COUNTS_FILE = os.environ.get("SKTREE_LMC_FUZZ_COUNTS")
COUNTS = collections.defaultdict(collections.Counter)

if COUNTS_FILE:  # pragma: no cover - counting mode, run by hand

    @atexit.register
    def _write_counts():
        with open(COUNTS_FILE, "w") as f:
            json.dump(COUNTS, f, indent=1, sort_keys=True)

FUZZ = settings(
    max_examples=N_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Small, fast models; the fuzzed hyperparameters override these.
BASE = dict(n_estimators=2, depth=2, max_epochs=2, batch_size=8, device="cpu", random_state=0)
N_FEATURES = 3


class Other(AssertionError):
    """A call neither raised a clear error nor returned finite numbers."""


def outcome(entry, fn, check):
    """Call ``fn()``; a ValueError/TypeError with a message is a clear error,
    a result that passes ``check`` a success; anything else fails the test
    (or, when counting, is recorded as "other")."""
    try:
        result = fn()
    except (ValueError, TypeError) as exc:
        if str(exc).strip():
            COUNTS[entry]["clear error"] += 1
            if COUNTS_FILE and os.environ.get("SKTREE_LMC_FUZZ_MESSAGES"):  # pragma: no cover
                COUNTS[entry][f"{type(exc).__name__}: {str(exc)[:70]}"] += 1
            return None
        problem = f"{type(exc).__name__} without a message"
    except Exception as exc:  # the point is to catch everything else
        problem = f"raw {type(exc).__name__}: {exc}"
    else:
        problem = check(result)
        if problem is None:
            COUNTS[entry]["success"] += 1
            return result
    COUNTS[entry]["other"] += 1
    if COUNTS_FILE:  # pragma: no cover - counting mode
        COUNTS[entry][f"other: {problem[:120]}"] += 1
        return None
    raise Other(f"{entry}: {problem}")


def finite(array):
    return np.isfinite(np.asarray(array, dtype=np.float64)).all()


def check_fitted(est):
    p = est.tree_params_
    if not all(finite(a) for a in (p.split_weight, p.split_bias, p.leaf_value)):
        return "fit returned non-finite parameters"
    if not finite(est.loss_curve_):
        return f"non-finite loss curve {est.loss_curve_}"
    if hasattr(est, "y_scale_") and not (finite(est.y_scale_) and finite(est.y_mean_)):
        return "non-finite target standardization"
    return None


def check_predictions(pred):
    if pred.dtype.kind in "fc" and not finite(pred):
        return "non-finite predictions"
    return None


def check_proba(proba):
    if not finite(proba):
        return "non-finite probabilities"
    if not np.allclose(proba.sum(axis=1), 1.0):
        return "probabilities do not sum to 1"
    return None


# -- strategies ----------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1e-310, 3e38, -3.4e38, 1e39, -1e39, 1e300, np.nan, np.inf, -np.inf]
ODD = [None, True, "x", -1, 0, 2.5, np.nan]


def values():
    """Mostly ordinary floats, sometimes an extreme or non-finite one."""
    return st.one_of(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3),
                     st.sampled_from(SPECIAL))


@st.composite
def data_arrays(draw, n_rows=None):
    """X-like arrays: mostly ``(n, N_FEATURES)`` float64 of ordinary values, at
    times with one extreme or non-finite value, another shape or another dtype."""
    n = draw(st.sampled_from([12, 12, 30, 0, 1, 2])) if n_rows is None else n_rows
    shape = draw(st.sampled_from(
        [(n, N_FEATURES)] * 6 + [(n, 1), (n, 0), (n,), (n, N_FEATURES, 2)]
    ))
    array = draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    if array.size and draw(st.booleans()):
        array.flat[draw(st.integers(0, array.size - 1))] = draw(st.sampled_from(SPECIAL))
    dtype = draw(st.sampled_from(
        ["float64"] * 8 + ["float32", "float16", "int64", "bool", "complex128", "object"]
    ))
    if dtype == "object":  # strings mixed with numbers
        array = array.astype(object)
        if array.size:
            array.flat[0] = draw(st.sampled_from(["a", "1.5", None]))
        return array
    with np.errstate(all="ignore"):
        return array.astype(dtype)


def mostly(valid, odd):
    """A valid value about three times in four, else an odd one (hypothesis
    leans to the first options, so the valid ones come first)."""
    return st.sampled_from([True, True, True, False]).flatmap(
        lambda ok: st.sampled_from(valid if ok else odd)
    )


@st.composite
def targets(draw, n, classifier):
    """Targets of ``n`` rows, mostly valid for the estimator, at times not."""
    valid = ["int", "str", "float"] if classifier else ["continuous", "2d"]
    odd = ["continuous", "1class", "wrong length", "special"] + (
        [] if classifier else ["str", "huge"]
    )
    kind = draw(mostly(valid, odd))
    rng = np.random.RandomState(draw(st.integers(0, 3)))
    if kind == "int":
        y = rng.randint(0, draw(st.sampled_from([2, 3])), size=n)
    elif kind == "str":
        y = np.array(["no", "yes", "maybe"])[rng.randint(0, 3, size=n)]
    elif kind == "float":
        y = rng.randint(0, 2, size=n).astype(float)
    elif kind == "continuous":
        y = rng.normal(size=n) * draw(st.sampled_from([1.0, 1e-30, 1e30]))
    elif kind == "huge":
        y = rng.normal(size=n) * 1e160
    elif kind == "2d":
        y = rng.normal(size=(n, 2))
    elif kind == "1class":
        y = np.zeros(n, dtype=int)
    elif kind == "special":
        y = rng.randint(0, 2, size=n).astype(float)
        if n:
            y[0] = draw(st.sampled_from(SPECIAL))
    else:
        y = rng.randint(0, 2, size=max(n - 1, 0))
    return y


#: name -> (valid values, odd values) of the estimators' hyperparameters.
HYPERPARAMETERS = {
    "arch": (["oblivious", "non_oblivious", "decision_list", "decision_list_modified"],
             ["oblique", None, 3]),
    "n_estimators": ([1, 3, np.int32(2)], [0, -2, True, 2.0, "2", None]),
    "depth": ([1, 3], [0, True, 1.5, "2", None]),
    "leaf_init": (["tree", "ensemble"], ["zeros", None]),
    "split_init": (["fan_in", "data", "boosting", 0.45, 100.0, 1e30],
                   [1e39, 0.0, -1.0, np.nan, np.inf, True, "x", "DATA"]),
    "learning_rate": ([1e-3, 0.5, 1e6, 1e30], [1e38, 0.0, -1.0, np.nan, np.inf, True, "0.1"]),
    "batch_size": ([1, 5, 10**6], [0, -1, True, 2.0, None]),
    "max_epochs": ([1, 3], [0, True, 1.0, None]),
    "early_stopping": ([True, False, np.True_], [1, "yes", None]),
    "validation_fraction": ([0.1, 0.5, 0.99], [0.0, 1.0, np.nan, True]),
    "n_iter_no_change": ([1, 3], [0, True, 1.5]),
    "tol": ([0.0, 1e-4, 1e10], [-1.0, np.nan, np.inf, True]),
    "random_state": ([0, None, 2**31 - 1, np.random.RandomState(0)], [-1, "seed", 2**40]),
    "verbose": ([0], ["loud", -1]),
    "device": (["cpu", torch.device("cpu"), "auto"], ["cuda", "cuda:7", "mps", "bogus", None]),
    "n_threads": ([1, 2, None, -1], [0, True, 1.5, "all"]),
    # the input encoding
    "numeric_encoding": (["piecewise_linear", "quantile_normal", "standard", "none"],
                         ["spline", None, 1]),
    "n_bins": ([1, 2, 16, 1024], [0, 1025, True, 2.5, None]),
    "categorical_features": (["from_dtype", None, [0], [True, False, False], [], ["s"]],
                             ["all", [5], [-4], [[0]], ["nope"], [0.5], [True]]),
    "max_categories": ([1, 2, 32], [0, -1, True, 1.5]),
    # the training recipe
    "lr_schedule": (["cosine", "constant"], ["linear", None]),
    "warmup_fraction": ([0.0, 0.3, 0.99], [1.0, -0.1, np.nan, True]),
    "averaging": (["ema", "swa", None], ["mean", True]),
    "ema_decay": ([0.5, 0.995, 0.9999], [0.0, 1.0, np.nan, True]),
    "max_features": (["sqrt", "log2", 1, 2, 0.01, 0.5, 1.0, None],
                     [0, 0.0, 1.5, 10, "auto", True, -1]),
    "teacher_weight": ([0.0, 0.5, 0.999], [1.0, -0.1, np.nan, True, "0.5"]),
    "additive_bins": ([None, 2, 16, (2, 8), [16, 4]],
                      [0, 1, 1.5, True, "64", -3, (), (4, 4), (4, 1), (4, "16"), (2**40,)]),
    # scorers of early stopping, including ones returning what is not a number
    "scoring": (["loss", None],
                [lambda est, X, y: np.nan, lambda est, X, y: None,
                 lambda est, X, y: np.array([0.5, 0.6]), lambda est, X, y: "good", "nope"]),
}

#: Hyperparameters of the classifier only.
CLASSIFIER_HYPERPARAMETERS = {
    "label_smoothing": ([0.0, 0.1, 0.9], [1.0, -0.1, np.nan, True]),
    "class_weight": ([None, "balanced"], ["x", {5: 1.0}, {0: -1.0}, {0: np.nan}, [1, 2]]),
}


@st.composite
def hyperparameters(draw, classifier=False):
    """Up to four hyperparameters, each mostly set to a valid value."""
    pool = {**HYPERPARAMETERS, **(CLASSIFIER_HYPERPARAMETERS if classifier else {})}
    names = draw(st.lists(st.sampled_from(sorted(pool)), max_size=4, unique=True))
    return {name: draw(mostly(*pool[name])) for name in names}


#: Kinds of DataFrame columns: numeric, categorical by dtype, with missing values;
#: datetimes in several units, with NaT and a time zone, and object columns of
#: dates, Periods and lists (issue 44).
COLUMN_KINDS = ["float", "float_nan", "int", "nullable_int", "bool", "str", "str_none",
                "category", "category_nan", "all_missing", "constant", "mixed", "datetime",
                "datetime_us", "datetime_nat", "datetime_tz", "timedelta", "object_date",
                "period", "list"]


def data_column(kind, n, rng):
    """One DataFrame column of ``n`` rows of the given kind."""
    import pandas as pd

    if kind in ("float", "float_nan"):
        values = rng.normal(size=n)
        if kind == "float_nan" and n:
            values[rng.rand(n) < 0.3] = np.nan
        return pd.Series(values)
    if kind == "int":
        return pd.Series(rng.randint(-5, 5, size=n))
    if kind == "nullable_int":
        values = pd.array(rng.randint(0, 4, size=n), dtype="Int64")
        if n:
            values[0] = pd.NA
        return pd.Series(values)
    if kind == "bool":
        return pd.Series(rng.rand(n) < 0.5)
    letters = np.array(["a", "b", "c", "d"])[rng.randint(0, 4, size=n)]
    if kind == "str":
        return pd.Series(letters.astype(object))
    if kind == "str_none":
        values = letters.astype(object)
        if n:
            values[0] = None
        return pd.Series(values)
    if kind in ("category", "category_nan"):
        values = pd.Categorical(letters)
        if kind == "category_nan" and n:
            values[0] = np.nan
        return pd.Series(values)
    if kind == "all_missing":
        return pd.Series([np.nan] * n, dtype=float)
    if kind == "constant":
        return pd.Series(np.full(n, 7.0))
    if kind == "mixed":  # numbers and strings in one object column
        values = rng.normal(size=n).astype(object)
        if n:
            values[0] = "x"
        return pd.Series(values)
    dates = pd.Series(pd.date_range("2020-01-01", periods=n, freq="37h"))
    if kind == "datetime_us":
        return dates.astype("datetime64[us]")
    if kind == "datetime_nat":
        return dates.where(rng.rand(n) < 0.7)
    if kind == "datetime_tz":
        return dates.dt.tz_localize("Europe/Paris")
    if kind == "timedelta":
        return dates - dates.min() if n else pd.Series(pd.to_timedelta([]))
    if kind == "object_date":
        return pd.Series([d.date() for d in dates], dtype=object)
    if kind == "period":
        return pd.Series(pd.period_range("2020-01", periods=n, freq="M"))
    if kind == "list":
        return pd.Series([[i, i + 1] for i in range(n)], dtype=object)
    return dates


@st.composite
def data_frames(draw, n_rows=None):
    """DataFrames of ``N_FEATURES`` (or other numbers of) columns of mixed kinds,
    with string names, mostly."""
    import pandas as pd

    n = draw(st.sampled_from([12, 12, 30, 0, 1, 2])) if n_rows is None else n_rows
    n_cols = draw(st.sampled_from([N_FEATURES] * 4 + [1, 0]))
    kinds = draw(st.lists(st.sampled_from(COLUMN_KINDS), min_size=n_cols, max_size=n_cols))
    rng = np.random.RandomState(draw(st.integers(0, 3)))
    columns = {f"c{j}": data_column(kind, n, rng) for j, kind in enumerate(kinds)}
    if columns and draw(st.booleans()):  # the name of categorical_features=["s"]
        columns["s"] = columns.pop(next(iter(columns)))
    return pd.DataFrame(columns, index=np.arange(n))


def unseen_rows(X):
    """``X`` with its values changed the ways prediction-time data differ: unseen
    categories and missing values in columns that had none."""
    import pandas as pd

    X = X.copy()
    for name in X.columns:
        col = X[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            X[name] = col.cat.add_categories(["unseen"]).fillna("unseen")
        elif col.dtype == object:
            X[name] = col.where(np.arange(len(col)) % 2 == 0, "unseen")
        elif col.dtype.kind == "f":
            X[name] = col.where(np.arange(len(col)) % 2 == 0, np.nan)
    return X


def sample_weights(n):
    return mostly(
        [None, np.ones(n), np.arange(n) % 3 + 0.5, np.full(n, 3e38), np.full(n, 1e39),
         np.full(n, 1e-40), np.arange(n) % 2 * 1.0, np.full(n, 1e-310),
         np.r_[np.full(n // 2, 1e-310), np.ones(n - n // 2)]],
        [np.zeros(n), -np.ones(n), np.r_[np.nan, np.ones(max(n - 1, 0))],
         np.r_[np.inf, np.ones(max(n - 1, 0))], np.ones(n + 1), np.ones((n, 2)), "w"],
    )


# -- fixtures: a few fitted models ---------------------------------------------------------


@pytest.fixture(scope="module")
def models():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, N_FEATURES))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    out = {"X": X, "y": y, "y3": y3, "y_reg": X[:, 0] - X[:, 2]}
    for seed in (0, 1):
        out[f"clf{seed}"] = SoftTreeEnsembleClassifier(**{**BASE, "random_state": seed}).fit(X, y)
        out[f"reg{seed}"] = SoftTreeEnsembleRegressor(
            **{**BASE, "random_state": seed}).fit(X, out["y_reg"])
    out["clf_arch"] = SoftTreeEnsembleClassifier(**{**BASE, "arch": "decision_list"}).fit(X, y)
    out["clf_3class"] = SoftTreeEnsembleClassifier(**BASE).fit(X, y3)
    out["unfitted"] = SoftTreeEnsembleClassifier(**BASE)
    # a model of a DataFrame with numeric, missing, string and category columns
    import pandas as pd

    frame = pd.DataFrame({f"c{j}": data_column(kind, 40, rng) for j, kind in
                          enumerate(["float_nan", "str_none", "category"])})
    out["clf_frame"] = SoftTreeEnsembleClassifier(**BASE).fit(frame, y)
    return out


# -- the tests -----------------------------------------------------------------------------


@FUZZ
@given(data=st.data(), classifier=st.booleans(), frame=st.sampled_from([False, False, True]))
def test_fit_on_random_data_errs_clearly_or_fits_finite(data, classifier, frame):
    """Fuzzed hyperparameters (the input encoding and the training recipe included)
    on fuzzed arrays or DataFrames (numeric, string, category, missing columns)."""
    cls = SoftTreeEnsembleClassifier if classifier else SoftTreeEnsembleRegressor
    params = {**BASE, **data.draw(hyperparameters(classifier), label="hyperparameters")}
    X = data.draw(data_frames() if frame else data_arrays(), label="X")
    n = len(X) if np.ndim(X) else 0
    y = data.draw(targets(n, classifier), label="y")
    sample_weight = data.draw(sample_weights(n), label="sample_weight")
    est = outcome("fit", lambda: cls(**params).fit(X, y, sample_weight=sample_weight),
                  check_fitted)
    if est is not None:  # a fitted model predicts finite numbers on its training data
        X_pred = [X, unseen_rows(X)] if frame else [X]
        for Xp in X_pred:  # and on rows with unseen categories and missing values
            outcome("predict", lambda: est.predict(Xp), check_predictions)
            if classifier:
                outcome("predict_proba", lambda: est.predict_proba(Xp), check_proba)


def finite_floats():
    """Ordinary floats, or any finite float64 (hypothesis favours the extremes:
    the largest and smallest magnitudes, subnormals, -0.0)."""
    return st.one_of(st.floats(-3, 3), st.floats(allow_nan=False, allow_infinity=False))


@FUZZ
@given(
    X=hnp.arrays(np.float64, (12, N_FEATURES), elements=finite_floats()),
    y_reg=hnp.arrays(np.float64, 12, elements=finite_floats()),
    classifier=st.booleans(),
    arch=st.sampled_from(sorted(HYPERPARAMETERS["arch"][0])),
)
def test_fit_on_extreme_finite_values_is_finite(X, y_reg, classifier, arch):
    """Valid settings, finite data of any magnitude: a clear error or a finite model."""
    est = (SoftTreeEnsembleClassifier if classifier else SoftTreeEnsembleRegressor)(
        **{**BASE, "arch": arch})
    y = np.arange(12) % 2 if classifier else y_reg
    est = outcome("fit", lambda: est.fit(X, y), check_fitted)
    if est is not None:
        outcome("predict", lambda: est.predict(X), check_predictions)
        if classifier:
            outcome("predict_proba", lambda: est.predict_proba(X), check_proba)


@FUZZ
@given(data=st.data())
def test_predict_on_random_data_errs_clearly_or_is_finite(models, data):
    name = data.draw(st.sampled_from(["clf0", "clf_3class", "reg0", "unfitted", "clf_frame"]),
                     label="model")
    est = models[name]
    X = data.draw(st.one_of(data_arrays(), data_frames()), label="X")
    if (name == "clf_frame" and hasattr(X, "columns")
            and data.draw(st.booleans(), label="the fitted columns")):
        X.columns = [f"c{j}" for j in range(X.shape[1])]
    outcome("predict", lambda: est.predict(X), check_predictions)
    if name != "reg0":
        outcome("predict_proba", lambda: est.predict_proba(X), check_proba)


MODEL_NAMES = ["clf0", "clf1", "clf_arch", "clf_3class", "reg0", "reg1", "unfitted"]
NOT_MODELS = {"string": "abc", "none": None, "number": 3}


@st.composite
def model_pairs(draw, models):
    """Mostly two compatible models, at times any two of models and non-models."""
    names = st.sampled_from(MODEL_NAMES + sorted(NOT_MODELS))
    pair = draw(st.sampled_from([("clf0", "clf1"), ("reg0", "reg1"), None]))
    if pair is None:
        pair = (draw(names), draw(names))
    return tuple(models[n] if n in models else NOT_MODELS[n] for n in pair)


def some_of(options):
    """A dict of up to three of the keyword arguments, each from its pool."""
    @st.composite
    def draw_kwargs(draw):
        keys = draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True))
        return {key: draw(st.sampled_from(options[key])) for key in keys}

    return draw_kwargs()


def eval_data(models):
    return st.one_of(st.just(models["X"]), st.just(models["X"]),
                     data_arrays(), st.sampled_from([None, "abc", 3.0]))


#: Settings of a fuzzed ModelAligner (devices included: one validated device policy).
ALIGNER_SETTINGS = {
    "method": ["wm", "am", "am", "xx", None],
    "invariances": ["none", "perm", "all", "some"],
    "weighting": [True, False, "no"],
    "n_samples": [1, 7, 512, 0, True],
    "reference": [0, 1, 5, -1, True],
    "max_iter": [0, 3, -1, True],
    "tol": [0.0, 1e-3, -1.0, np.nan],
    "random_state": [0, None, "x"],
    "device": ["cpu", torch.device("cpu"), "cuda", "cuda:7", "mps", "bogus", "", None, 3],
}


@st.composite
def aligners(draw):
    """A shortcut string, an odd value, or a ModelAligner with fuzzed settings."""
    kind = draw(st.sampled_from(["shortcut", "aligner", "aligner", "odd"]))
    if kind == "shortcut":
        return draw(st.sampled_from(["wm", "am", "naive"]))
    if kind == "odd":
        return draw(st.sampled_from(["xx", "", "WM", None, 3, ModelAligner]))
    return ModelAligner(**draw(some_of(ALIGNER_SETTINGS)))


MERGE_KWARGS = {
    "lam": [0.0, 0.5, 1.0, 0.3, -0.1, 1.1, np.nan, True, "0.5", None],
    "weights": [None, [1, 1], [1, 3], [1, -1], [0, 0], [np.nan, 1], [1, 1, 1], "ab"],
}


@FUZZ
@given(data=st.data())
def test_merge_estimators_on_random_arguments_errs_clearly_or_is_finite(models, data):
    a, b = data.draw(model_pairs(models), label="models")
    as_list = data.draw(st.sampled_from([False, False, True]), label="list form")
    # lam with a list, or weights with two models, is a mistake too
    kwargs = data.draw(some_of(MERGE_KWARGS), label="kwargs")
    if data.draw(st.booleans(), label="with aligner"):
        kwargs["aligner"] = data.draw(aligners(), label="aligner")
    kwargs["X"] = data.draw(eval_data(models), label="X")
    X = models["X"]

    def check(merged):
        problem = check_fitted(merged)
        if problem is None:
            problem = check_predictions(merged.predict(X))
        return problem

    if as_list:
        outcome("merge_estimators", lambda: merge_estimators([a, b], **kwargs), check)
    else:
        outcome("merge_estimators", lambda: merge_estimators(a, b, **kwargs), check)


LAMBDAS = [2, 3, 0, 1, -1, True, 2.5, "abc", None, [0.0, 1.0], [1.0, 0.5, 0.0], [0.25, 0.75],
           [0.0, np.nan, 1.0], [[0, 1]], [], np.linspace(0, 1, 4)]


@FUZZ
@given(data=st.data())
def test_interpolation_curve_on_random_arguments_errs_clearly_or_is_finite(models, data):
    a, b = data.draw(model_pairs(models), label="models")
    X = data.draw(eval_data(models), label="X")
    n = len(X) if isinstance(X, np.ndarray) and X.ndim else 0
    regression = getattr(a, "_estimator_type", None) == "regressor"
    y = models["y_reg"] if regression else models["y"]
    if X is not models["X"] or data.draw(st.booleans(), label="other y"):
        y = data.draw(st.one_of(targets(n, not regression), st.sampled_from([None, "abc"])),
                      label="y")
    kwargs = {}
    if data.draw(st.booleans(), label="with lambdas"):
        kwargs["lambdas"] = data.draw(st.sampled_from(LAMBDAS), label="lambdas")
    if data.draw(st.booleans(), label="with aligner"):
        kwargs["aligner"] = data.draw(aligners(), label="aligner")
    if data.draw(st.booleans(), label="with X_align"):
        kwargs["X_align"] = data.draw(eval_data(models), label="X_align")

    def check(curve):
        for metric, scores in curve.scores.items():
            if not finite(scores):
                return f"non-finite {metric} along the curve: {scores}"
            if not np.isfinite(curve.barrier(metric)):
                return f"non-finite {metric} barrier"
        return None

    outcome("interpolation_curve", lambda: interpolation_curve(a, b, X, y, **kwargs), check)


@FUZZ
@given(
    values=st.one_of(
        hnp.arrays(np.float64, st.integers(0, 6), elements=st.floats(-100, 100)),
        hnp.arrays(np.float64, st.integers(0, 6), elements=values()),
        data_arrays(n_rows=3),
        st.sampled_from([None, "abc", 3.0, [[1.0, 2.0]], ["a", "b"]]),
    ),
    lambdas=st.one_of(
        st.none(), st.none(),
        hnp.arrays(np.float64, st.integers(0, 6), elements=st.one_of(
            st.sampled_from([0.0, 1.0]), st.floats(0, 1), st.sampled_from(SPECIAL))),
        st.sampled_from(ODD + ["abc", [1.0, 0.0], [[0.0, 1.0]]]),
    ),
    greater_is_better=st.sampled_from([True, False, np.True_, "yes", None, 1]),
)
def test_lmc_barrier_on_random_values_errs_clearly_or_is_finite(values, lambdas, greater_is_better):
    def check(barrier):
        if not isinstance(barrier, float) or not np.isfinite(barrier) or barrier < 0:
            return f"barrier {barrier!r} is not a finite non-negative float"
        return None

    outcome("lmc_barrier",
            lambda: lmc_barrier(values, lambdas, greater_is_better=greater_is_better), check)


# -- merge weights and the aligner's settings: clear errors, no overflow ---------------------


@pytest.mark.parametrize(
    "weights, error, match",
    [
        (["x", "y"], TypeError, "weights must be real numbers.*'x'"),
        ([1j, 1.0], TypeError, "weights must be real numbers.*complex"),
        ([True, False], TypeError, "weights must be real numbers.*bool"),
        ([True, 1.0], TypeError, "weights must be real numbers.*bool"),
        ([None, 1.0], TypeError, "weights must be real numbers"),
        ([1.0, 2.0, 3.0], ValueError, r"weights must have one entry per model \(2\)"),
        ([1.0, [2.0, 3.0]], ValueError, "weights must be a 1-D array-like"),
        ([np.nan, 1.0], ValueError, "weights must be finite, non-negative"),
        ([np.inf, 1.0], ValueError, "weights must be finite, non-negative"),
        ([-1.0, 2.0], ValueError, "weights must be finite, non-negative"),
        ([0, 0], ValueError, "not all zero"),
    ],
)
def test_merge_weights_are_validated(clf_data, weights, error, match):
    """Regression: string weights gave numpy's "could not convert string to float"."""
    a, b = clf_data[:2]
    with pytest.raises(error, match=match):
        merge_estimators([a, b], weights=weights)
    with pytest.raises(error, match=match):
        ModelAligner().fit([a, b], weights=weights)


def test_huge_merge_weights_do_not_overflow(clf_data):
    a, b, X, _ = clf_data
    merged = merge_estimators([a, b], weights=[1e308, 1e308], aligner="naive")
    expected = merge_estimators([a, b], weights=[1, 1], aligner="naive")
    np.testing.assert_allclose(merged.predict_proba(X), expected.predict_proba(X))


def test_aligned_params_refuses_other_estimators(clf_data):
    """Regression: ``ModelAligner.aligned_params`` applied the alignments to models it was
    not fitted on, and to a list of the wrong length (zip silently truncated)."""
    a, b, X, y = clf_data
    c = SoftTreeEnsembleClassifier(**{**a.get_params(), "random_state": 3}).fit(X, y)
    aligner = ModelAligner().fit([a, b])
    assert len(aligner.aligned_params([a, b])) == 2
    with pytest.raises(ValueError, match="Estimator 1 is not the one the aligner was fitted on"):
        aligner.aligned_params([a, c])
    with pytest.raises(ValueError, match="Estimator 0 is not the one"):
        aligner.aligned_params([b, a])
    for wrong in ([a], [a, b, c]):
        with pytest.raises(ValueError, match=r"fitted on 2 estimators, got \d.*aligned_params"):
            aligner.aligned_params(wrong)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(tol=-1), "ModelAligner's 'tol' parameter must be"),
        (dict(max_iter=True), "ModelAligner's 'max_iter' parameter must be"),
        (dict(method="xx"), "ModelAligner's 'method' parameter must be"),
        (dict(reference=5), r"ModelAligner\(reference=5\) but only 2 estimators"),
    ],
)
def test_aligner_errors_name_the_aligner(clf_data, params, match):
    """Regression: through merge_estimators the errors of ModelAligner's own settings said
    "The 'tol' parameter of merge_estimators", which has no such parameter."""
    a, b, X, y = clf_data
    calls = [
        lambda al: al.fit([a, b]),
        lambda al: merge_estimators(a, b, aligner=al),
        lambda al: merge_estimators([a, b], aligner=al),
        lambda al: interpolation_curve(a, b, X, y, lambdas=3, aligner=al),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=match) as info:
            call(ModelAligner(**params))
        assert "merge_estimators" not in str(info.value)
        assert "interpolation_curve" not in str(info.value)


# -- constant columns: a model with no feature ---------------------------------------------


@pytest.mark.parametrize("classifier", [True, False])
def test_all_constant_columns_give_a_constant_model(classifier):
    """The piecewise-linear encoding drops constant columns; with every column constant
    the trees have no feature at all (F = 0). ``split_init="fan_in"`` divided by
    ``sqrt(0)`` (a raw ZeroDivisionError); now the splits are their biases alone and the
    model predicts one value for every row, and still merges."""
    X = np.zeros((12, N_FEATURES))
    y = np.arange(12) % 2 if classifier else np.linspace(-1, 1, 12)
    cls = SoftTreeEnsembleClassifier if classifier else SoftTreeEnsembleRegressor
    a, b = (cls(**{**BASE, "n_estimators": 4, "random_state": s,
                   "numeric_encoding": "piecewise_linear"}).fit(X, y) for s in (0, 1))
    assert a.encoder_.n_features_out_ == 0
    assert a.tree_params_.split_weight.shape[2] == 0
    pred = a.predict(np.r_[X, np.ones((2, N_FEATURES))])
    assert (pred == pred[0]).all()
    merged = merge_estimators(a, b, X=X)
    assert finite(merged.predict(X).astype(float))


# -- checkpoints, merges of teacher and no-teacher models, verbose streams -------------------


@pytest.fixture(scope="module")
def checkpoint_file(tmp_path_factory):
    """A checkpoint of 2 rounds, the meta-estimator's settings and its data."""
    from sktree_lmc import ShardedSoftTreeEnsemble

    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, N_FEATURES))
    y = (X[:, 0] > 0).astype(int)
    path = tmp_path_factory.mktemp("ckpt") / "rounds.ckpt"
    params = dict(estimator=SoftTreeEnsembleClassifier(**BASE), n_shards=2, n_rounds=2,
                  random_state=0)
    ShardedSoftTreeEnsemble(**params, checkpoint=path).fit(X, y)
    return path, params, X, y


@FUZZ
@given(how=st.sampled_from(["truncate", "flip", "append", "zero", "header"]),
       where=st.floats(0, 1, exclude_max=True), change=st.sampled_from([{}, {"n_rounds": 3},
                                                                       {"n_shards": 3}]))
def test_resume_from_damaged_or_other_checkpoints_is_a_clear_error(
        checkpoint_file, tmp_path_factory, how, where, change):
    """A damaged checkpoint file, or one of other settings, is a clear error naming what
    is wrong; never a raw error nor a model of the wrong configuration."""
    from sktree_lmc import ShardedSoftTreeEnsemble

    path, params, X, y = checkpoint_file
    raw = bytearray(path.read_bytes())
    i = int(where * len(raw))
    if how == "truncate":
        raw = raw[:i]
    elif how == "flip":
        raw[i] ^= 1 << (i % 8)
    elif how == "append":
        raw += b"x"
    elif how == "zero":
        raw[i:i + 16] = bytes(len(raw[i:i + 16]))
    else:
        raw = raw.replace(b'"version": 1', b'"version": 2', 1)
    damaged = tmp_path_factory.mktemp("damaged") / "rounds.ckpt"
    damaged.write_bytes(bytes(raw))
    est = ShardedSoftTreeEnsemble(**{**params, **change})
    if bytes(raw) == path.read_bytes() and not change:  # no damage (zeros over zeros)
        assert est.fit(X, y, resume_from=damaged).n_rounds_ == 2
        return
    with pytest.raises(ValueError, match="resume_from|n_shards"):
        est.fit(X, y, resume_from=damaged)


@FUZZ
@given(data=st.data())
def test_teacher_and_no_teacher_merges_are_order_independent(models, data):
    """A model trained with a teacher merged with one trained without (any order,
    lam, refit or not): finite predictions that do not depend on the order."""
    from sktree_lmc import refit_leaves

    X, y = models["X"], models["y"]
    teacher = data.draw(st.sampled_from([0.0, 0.5, 0.9]), label="teacher_weight")
    other = SoftTreeEnsembleClassifier(**{**BASE, "teacher_weight": teacher,
                                          "random_state": 1}).fit(X, y)
    a = models["clf0"]
    lam = data.draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]), label="lam")
    ab = outcome("merge", lambda: refit_leaves(
        merge_estimators(a, other, lam=lam, aligner="naive"), X, y), check_fitted)
    ba = outcome("merge", lambda: refit_leaves(
        merge_estimators(other, a, lam=1 - lam, aligner="naive"), X, y), check_fitted)
    if ab is not None and ba is not None:
        np.testing.assert_allclose(ab.predict_proba(X), ba.predict_proba(X), atol=1e-5)


class _Unwritable:
    """A stream whose write or flush fails, or that has neither."""

    def __init__(self, fails):
        self.fails = fails

    def write(self, text):
        if self.fails == "write":
            raise OSError("broken pipe")
        return len(text)

    def flush(self):
        if self.fails == "flush":
            raise ValueError("I/O operation on closed file")


@FUZZ
@given(stream=st.sampled_from(["closed", "write", "flush", "none", "object"]),
       verbose=st.sampled_from([1, 2, 3]), sharded=st.booleans())
def test_verbose_fit_runs_on_odd_stderr_streams(models, monkeypatch_module, stream, verbose,
                                                sharded):
    """verbose fits with a closed, failing, missing or not-a-stream stderr: the fit runs."""
    import io
    import sys

    from sktree_lmc import ShardedSoftTreeEnsemble

    if stream == "closed":
        target = io.StringIO()
        target.close()
    elif stream in ("write", "flush"):
        target = _Unwritable(stream)
    else:
        target = None if stream == "none" else object()
    X, y = models["X"], models["y"]
    est = SoftTreeEnsembleClassifier(**{**BASE, "verbose": verbose})
    if sharded:
        est = ShardedSoftTreeEnsemble(est, n_shards=2, random_state=0, verbose=verbose)
    monkeypatch_module.setattr(sys, "stderr", target)
    try:
        fitted = outcome("fit", lambda: est.fit(X, y), lambda e: None)
    finally:
        monkeypatch_module.undo()
    assert fitted is not None


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp

"""The collaborators the front hands its argument to do their whole job in one call: the
objective checks and encodes a fit's targets and weights, one function checks and splits the
input of every fit and prediction, the encoding gives an input as rows and columns at once and
fits an encoder from an estimator's settings, a boosting site is built from its fit's objective,
the merge decides the task once, and the in-memory leaf refit is the public one's."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils.class_weight import compute_sample_weight

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor, refit_leaves
from sktree_lmc._validation import checked_columns
from sktree_lmc.encoding._encoding import (
    TabularEncoder,
    as_rows,
    check_categorical_features,
    encoders_differ,
    fit_encoding,
    rows_and_columns,
    to_columns,
)
from sktree_lmc.merging._bridge import check_compatible
from sktree_lmc.merging._refit import refit_in_memory
from sktree_lmc.training._boosting import BoostingSite
from sktree_lmc.training._objective import objective_from_params, rescaled_weights

pd = pytest.importorskip("pandas")

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 3))
LABELS = np.where(X[:, 0] > 0.5, "b", "a")
TARGETS = X[:, 1] * 3.0 + 10.0
TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)


def _objective(estimator):
    return objective_from_params(estimator.get_params(deep=False),
                                 classifier=is_classifier(estimator))


def test_training_targets_checks_weighs_and_encodes_the_targets_at_once():
    objective = _objective(SoftTreeEnsembleClassifier(class_weight="balanced"))
    weight = np.linspace(1.0, 2.0, len(LABELS))
    y, target, w, n_outputs = objective.training_targets(LABELS, weight, X)
    assert_array_equal(y, LABELS)
    assert_array_equal(objective.classes, ["a", "b"])
    assert_array_equal(target, (LABELS == "b").astype(np.int64))
    assert_array_equal(w, rescaled_weights(weight * compute_sample_weight("balanced", LABELS)))
    assert n_outputs == 2


def test_training_targets_standardizes_a_regressors_targets():
    objective = _objective(SoftTreeEnsembleRegressor())
    y, target, w, n_outputs = objective.training_targets(TARGETS, None, X)
    assert n_outputs == 1 and w.dtype == np.float64 and np.all(w == 1.0)
    assert abs(float(np.mean(target))) < 1e-5
    assert_array_equal(objective.shared_units(target)[:, 0].round(4), TARGETS.round(4))


@pytest.mark.parametrize("class_weight, weight, message", [
    ({"a": 0.0, "b": 0.0}, np.ones(60), "sums to zero"),
    (None, np.ones(59), "sample_weight"),
    (None, None, "inconsistent numbers of samples")])
def test_training_targets_errors(class_weight, weight, message):
    objective = _objective(SoftTreeEnsembleClassifier(class_weight=class_weight))
    rows = X if weight is not None else X[:59]
    with pytest.raises(ValueError, match=message):
        objective.training_targets(LABELS, weight, rows)


def test_rows_and_columns_gives_the_rows_and_the_columns_of_one_check():
    frame = pd.DataFrame({"x": X[:, 0], "c": LABELS})
    rows, columns, by_dtype = rows_and_columns(frame)
    assert rows is frame and as_rows(frame) is frame
    expected, expected_kinds = to_columns(frame)
    assert_array_equal(by_dtype, expected_kinds)
    for a, b in zip(columns, expected):
        assert_array_equal(a, b)
    rows, columns, by_dtype = rows_and_columns(X.tolist())
    assert isinstance(rows, np.ndarray) and rows.shape == X.shape
    assert_array_equal(np.column_stack(columns), X) and not by_dtype.any()
    with pytest.raises(ValueError, match="Expected 2D array"):
        rows_and_columns(X[:, 0])


def test_fit_encoding_fits_the_encoder_of_an_estimators_settings():
    frame = pd.DataFrame({"x": X[:, 0], "c": LABELS})
    columns, by_dtype = to_columns(frame)
    settings = SoftTreeEnsembleClassifier(n_bins=4).get_params(deep=False)
    encoder = fit_encoding(columns, by_dtype, ["x", "c"], settings=settings)
    mask = check_categorical_features("from_dtype", 2, ["x", "c"], by_dtype)
    direct = TabularEncoder(settings["numeric_encoding"], 4, settings["max_categories"],
                            settings["additive_bins"])._fit_columns(columns, mask, ["x", "c"])
    assert encoders_differ(encoder, direct) is None
    with pytest.raises(ValueError, match="categorical_features"):
        fit_encoding(columns, by_dtype, settings=dict(settings, categorical_features="bad"))


def test_checked_columns_sets_or_checks_the_features():
    class Holder(BaseEstimator):
        pass

    holder = Holder()
    frame = pd.DataFrame({"x": X[:, 0], "z": X[:, 1]})
    columns, _ = checked_columns(holder, frame, reset=True)
    assert holder.n_features_in_ == 2 and list(holder.feature_names_in_) == ["x", "z"]
    assert len(columns) == 2
    with pytest.raises(ValueError, match="feature names"):
        checked_columns(holder, frame[["x"]], reset=False)


def test_a_boosting_site_of_a_fit_is_in_the_shared_units():
    objective = _objective(SoftTreeEnsembleRegressor())
    _, target, w, n_outputs = objective.training_targets(TARGETS, None, X)
    site = BoostingSite.of_fit(objective, X, target, w, n_outputs=n_outputs,
                               validation=(X[:5], target[:5], w[:5]))
    assert_array_equal(site.target, objective.shared_units(target))
    assert_array_equal(site.validation[1], objective.shared_units(target[:5]))
    assert site.loss is objective.loss


def test_check_compatible_decides_the_task():
    a, b = (SoftTreeEnsembleClassifier(**dict(TINY, random_state=s)).fit(X, LABELS)
            for s in (0, 1))
    assert check_compatible([a, b]) is True
    r, s = (SoftTreeEnsembleRegressor(**dict(TINY, random_state=k)).fit(X, TARGETS)
            for k in (0, 1))
    assert check_compatible([r, s]) is False


def test_refit_in_memory_is_refit_leaves_on_rows_in_memory():
    model = SoftTreeEnsembleClassifier(**TINY).fit(X, LABELS)
    public, info = refit_leaves(model, X, LABELS, max_iter=20, return_info=True)
    own, own_info = refit_in_memory(model, X, LABELS, max_iter=20)
    assert_array_equal(own.tree_params_.leaf_value, public.tree_params_.leaf_value)
    assert own_info == info

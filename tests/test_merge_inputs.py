"""What merging checks of its inputs and keeps consistent: non-finite parameters (the additive
table included) are refused, ``ModelAligner.aligned_params`` holds the additive tables the merge
averages, the merged model's refit objective does not depend on the order of the models, the
hyperparameters kept, and regressors of 1-D and 2-D targets are not merged."""

import copy

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TreeParams,
    activation_matching,
    interpolation_curve,
    merge_estimators,
    refit_leaves,
    weight_matching,
)
from sktree_lmc.merging._bridge import with_params
from sktree_lmc.encoding._encoding import encoders_differ
from sktree_lmc.merging._nway import align_many

TINY = dict(n_estimators=4, depth=2, max_epochs=2, batch_size=64, device="cpu")
ARRAYS = ("split_weight", "split_bias", "leaf_value", "additive")


@pytest.fixture(scope="module")
def data():
    return make_classification(n_samples=200, n_features=5, random_state=0)


@pytest.fixture(scope="module")
def pair(data):
    """A classifier trained with a teacher (the default teacher_weight=0.75) and one
    trained on the labels alone, both with the default additive table."""
    X, y = data
    a = SoftTreeEnsembleClassifier(**TINY, random_state=0, teacher_weight=0.75).fit(X, y)
    b = SoftTreeEnsembleClassifier(**TINY, random_state=1, teacher_weight=0.0).fit(X, y)
    assert a.teacher_ and b.teacher_ is None
    assert a.tree_params_.additive is not None and b.tree_params_.additive is not None
    return a, b


@pytest.fixture(scope="module")
def other_bins(data):
    """Two models whose additive bins alone differ (numeric_encoding="none", other rows)."""
    X, y = data
    kw = dict(TINY, numeric_encoding="none", teacher_weight=0.0)
    a = SoftTreeEnsembleClassifier(**kw, random_state=0).fit(X[:100], y[:100])
    b = SoftTreeEnsembleClassifier(**kw, random_state=1).fit(X[100:], y[100:])
    assert encoders_differ(a.encoder_, b.encoder_) is not None
    assert encoders_differ(a.encoder_, b.encoder_, additive=False) is None
    return a, b


def _with(model, name, index, value):
    """A copy of ``model`` whose array ``name`` holds ``value`` at flat ``index``, set
    directly on ``tree_params_`` (``set_tree_params`` refuses non-finite values)."""
    broken = copy.deepcopy(model)
    getattr(broken.tree_params_, name).ravel()[index] = value
    return broken


# ----------------------------------------------------------------------------
# 1. NaN or infinite parameters, the additive table included, are refused
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ARRAYS)
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_parameters_are_refused_naming_model_and_array(pair, data, name, value):
    X, y = data
    a, b = pair
    broken = _with(b, name, 3, value)
    match = f"Estimator 1 has non-finite .* in {name}"
    with pytest.raises(ValueError, match=match):
        merge_estimators(a, broken)
    with pytest.raises(ValueError, match=match):
        merge_estimators(a, broken, aligner="naive")
    with pytest.raises(ValueError, match=match):
        ModelAligner().fit([a, broken])
    with pytest.raises(ValueError, match=match):
        interpolation_curve(a, broken, X, y, lambdas=3, aligner="naive")
    with pytest.raises(ValueError, match=f"Estimator 2 has non-finite .* in {name}"):
        merge_estimators([a, b, broken], aligner="naive")
    with pytest.raises(ValueError, match=f"Estimator 0 has non-finite .* in {name}"):
        merge_estimators(broken, a)


def test_nan_set_in_the_additive_table_after_the_alignment_is_refused(pair):
    """The additive table was neither checked nor part of the fingerprint, so an aligner
    fitted on finite models aligned (and merged) a model whose table held NaN."""
    a, b = pair
    aligner = ModelAligner().fit([a, b])
    broken = copy.deepcopy(b)
    broken.tree_params_.additive[0, 0] = np.nan
    for call in (aligner.aligned_params, aligner.align,
                 lambda models: merge_estimators(*models, aligner=aligner)):
        with pytest.raises(ValueError, match="Estimator 1 .* additive"):
            call([a, broken])


def test_matching_functions_refuse_non_finite_parameters(pair):
    a, b = pair
    pa, pb = a.tree_params_, _with(b, "additive", 0, np.nan).tree_params_
    arch = a.architecture_
    with pytest.raises(ValueError, match="params_b has non-finite .* in additive"):
        weight_matching(pa, pb, arch)
    with pytest.raises(ValueError, match="params_a has non-finite .* in additive"):
        weight_matching(pb, pa, arch, invariances="none")
    outputs = np.zeros((3, pa.n_trees, pa.n_outputs))
    with pytest.raises(ValueError, match="params_b has non-finite .* in additive"):
        activation_matching(outputs, outputs, pa, pb, arch)
    with pytest.raises(ValueError, match="Model 1 has non-finite .* in additive"):
        align_many([pa, pb], arch)
    with pytest.raises(ValueError, match="Model 2 has non-finite .* in leaf_value"):
        align_many([pa, pa, _with(b, "leaf_value", 1, -np.inf).tree_params_], arch,
                   invariances="none")


# ----------------------------------------------------------------------------
# 2. aligned_params and the additive table
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("models", ["pair", "other_bins"])
def test_aligned_params_hold_the_tables_the_merge_averages(request, models):
    """aligned_params returns every array, the additive table included, in the basis of
    the merge (for bins that differ, the union of the bins): averaging them gives the
    merged parameters exactly."""
    a, b = request.getfixturevalue(models)
    aligner = ModelAligner().fit([a, b])
    pa, pb = aligner.aligned_params([a, b])
    merged = merge_estimators(a, b, lam=0.3, aligner=aligner)
    assert pa.additive is not None and pb.additive is not None
    assert pa.additive.shape == pb.additive.shape == merged.tree_params_.additive.shape
    expected = TreeParams.weighted_average([pa, pb], [0.7, 0.3])
    for name in ARRAYS:
        assert_array_equal(getattr(merged.tree_params_, name), getattr(expected, name),
                           err_msg=name)
    if models == "pair":  # same bins: the tables as they are (no symmetry acts on them)
        assert_array_equal(pa.additive, a.tree_params_.additive)
        assert_array_equal(pb.additive, b.tree_params_.additive)
    else:  # on the union of both models' bins, as the merge uses
        assert len(pa.additive) > len(a.tree_params_.additive)
    for lam, p in ((0.0, pa), (1.0, pb)):  # the endpoints of the merge: the tables as is
        endpoint = merge_estimators(a, b, lam=lam, aligner=aligner).tree_params_
        assert_array_equal(endpoint.additive, p.additive)


def test_aligned_params_refuse_a_model_whose_table_alone_differs(pair):
    """The fingerprint that recognizes the models of ``fit`` ignored the additive table:
    a model whose table alone differed was taken for the fitted one."""
    a, b = pair
    aligner = ModelAligner().fit([a, b])
    other = copy.deepcopy(b)
    other.tree_params_.additive[:] += 1.0
    with pytest.raises(ValueError, match="Estimator 1 is not the one the aligner was fitted"):
        aligner.aligned_params([a, other])
    with pytest.raises(ValueError, match="Estimator 1 is not the one the aligner was fitted"):
        aligner.align([a, other])
    # merge_estimators aligns again rather than reusing the aligner of other models
    merged = merge_estimators(a, other, aligner=aligner)
    assert_allclose(merged.tree_params_.additive,
                    0.5 * (a.tree_params_.additive + other.tree_params_.additive))


# ----------------------------------------------------------------------------
# 3. The merged model's refit does not depend on the order of the models
# ----------------------------------------------------------------------------


def test_refit_of_merge_with_and_without_teacher_is_order_independent(pair, data):
    """refit_leaves(merge(a, b)) and refit_leaves(merge(b, a)) differed by up to 0.31 in
    probability: model 0's teacher_weight and teacher_ set the refit targets. The naive
    aligner makes the merged parameters themselves order independent (weight matching
    aligns b to a or a to b, another basis), so the test isolates the refit objective."""
    X, y = data
    a, b = pair
    ab = merge_estimators(a, b, lam=0.5, aligner="naive")
    ba = merge_estimators(b, a, lam=0.5, aligner="naive")
    assert_array_equal(ab.predict_proba(X), ba.predict_proba(X))  # same parameters
    assert_allclose(refit_leaves(ab, X, y).predict_proba(X),
                    refit_leaves(ba, X, y).predict_proba(X), rtol=0, atol=1e-6)
    for merged, parent in ((ab, a), (ba, b)):  # the weighted mean of the models' objectives
        assert merged.objective_.teacher_weight == 0.5 * 0.75
        assert merged.get_params() == parent.get_params()  # the hyperparameters: model 0's
        assert len(merged.teacher_) == 1
        assert all(np.array_equal(x, t) for x, t in zip(merged.teacher_[0], a.teacher_[0]))


def test_merge_endpoints_refit_as_the_models(pair, data):
    X, y = data
    a, b = pair
    for lam, model in ((0.0, a), (1.0, b)):
        merged = merge_estimators(a, b, lam=lam, aligner="naive")
        assert merged.objective_.teacher_weight == (0.75 if lam == 0 else 0.0)
        assert merged.get_params() == a.get_params()
        assert (merged.teacher_ is None) == (lam == 1)
        assert_allclose(refit_leaves(merged, X, y).predict_proba(X),
                        refit_leaves(model, X, y).predict_proba(X), rtol=0, atol=1e-6)


def test_refit_of_merge_of_other_label_smoothing_is_order_independent(pair, data):
    """label_smoothing, the other hyperparameter of the refit objective, came from model
    0 as well; the merge takes the weighted mean of the objectives."""
    X, y = data
    a, b = pair
    smooth = clone(b).set_params(label_smoothing=0.2).fit(X, y)  # a fitted objective of 0.2
    ab = merge_estimators(a, smooth, lam=0.5, aligner="naive")
    ba = merge_estimators(smooth, a, lam=0.5, aligner="naive")
    assert_allclose(refit_leaves(ab, X, y).predict_proba(X),
                    refit_leaves(ba, X, y).predict_proba(X), rtol=0, atol=1e-6)
    # a's is label_smoothing="auto"'s on its 200 rows: 0.02 (no early stopping)
    assert a.label_smoothing == "auto" and a.label_smoothing_ == 0.02
    for merged in (ab, ba):
        assert merged.objective_.label_smoothing == pytest.approx(0.11)
        # sum_i w_i (1 - s_i) t_i / (1 - s) = 0.5 * 0.98 * 0.75 / 0.89
        assert merged.objective_.teacher_weight == pytest.approx(0.5 * 0.98 * 0.75 / 0.89)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_merged_refit_objective_is_the_weighted_mean_of_the_models(pair, data, smoothing):
    """At the merged parameters, the merged model's refit objective is the weighted mean
    of the objectives of its models (cross-entropy is linear in its target)."""
    X, y = data
    a, b = pair
    b = clone(b).set_params(label_smoothing=smoothing).fit(X, y)
    merged = merge_estimators(a, b, lam=0.3, aligner="naive")

    def start(model):
        info = refit_leaves(model, X, y, max_iter=1, return_info=True)[1]
        return info["objective_start"]

    as_a, as_b = (with_params(m, merged.tree_params_) for m in (a, b))
    assert start(merged) == pytest.approx(0.7 * start(as_a) + 0.3 * start(as_b), rel=1e-5)


def test_models_that_agree_keep_model_0_hyperparameters(pair):
    a, b = pair
    other = copy.deepcopy(a)
    *head, leaves = a.teacher_[0]  # another teacher: other leaf values
    other.teacher_ = [(*head, leaves + 1.0)]
    merged = merge_estimators(a, other, lam=0.3, aligner="naive")
    assert merged.get_params() == a.get_params()
    assert len(merged.teacher_) == 2  # the refit mixes in both teachers, as before
    unteached = merge_estimators(b, copy.deepcopy(b), aligner="naive")
    assert unteached.get_params() == b.get_params() and unteached.teacher_ is None


def test_regressors_fitted_on_1d_and_2d_targets_are_not_merged():
    """The merged model predicted the shape of model 0's targets: (n,) or (n, 1)."""
    X, y = make_regression(n_samples=100, n_features=4, random_state=0)
    kw = dict(TINY, additive_bins=None)
    flat = SoftTreeEnsembleRegressor(**kw, random_state=0).fit(X, y)
    column = SoftTreeEnsembleRegressor(**kw, random_state=1).fit(X, y.reshape(-1, 1))
    for models, match in (((flat, column), r"1-D y'? \(model 0\) vs '?2-D y'? \(model 1\)"),
                          ((column, flat), r"2-D y'? \(model 0\) vs '?1-D y'? \(model 1\)")):
        with pytest.raises(ValueError, match=match):
            merge_estimators(*models, aligner="naive")

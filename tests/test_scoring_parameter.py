"""``scoring``: a scorer that does not apply to the estimator is a clear ``ValueError`` at fit,
naming ``scoring``, before any training (a classification metric for a regressor, or a name
scikit-learn does not know)."""

import numpy as np
import pytest

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)
X = np.random.default_rng(0).normal(size=(60, 2))


@pytest.mark.parametrize("scoring", ["accuracy", "roc_auc", "neg_log_loss", "f1"])
@pytest.mark.parametrize("early_stopping", [True, False])
def test_a_classification_scorer_for_a_regressor_is_refused(scoring, early_stopping):
    reg = SoftTreeEnsembleRegressor(scoring=scoring, early_stopping=early_stopping, **TINY)
    with pytest.raises(ValueError, match=rf"scoring='{scoring}'.*for classifiers"):
        reg.fit(X, X[:, 0])
    assert not hasattr(reg, "tree_params_")


@pytest.mark.parametrize("scoring", ["r2", "neg_mean_squared_error", "neg_mean_poisson_deviance"])
def test_regression_scorers_fit(scoring):
    reg = SoftTreeEnsembleRegressor(scoring=scoring, early_stopping=True, **TINY)
    reg.fit(X, np.abs(X[:, 0]) + 0.1)
    assert reg.validation_score_ is not None


@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_an_unknown_scorer_name_is_refused_at_fit(Est):
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match=r"scoring='nope'.*not a valid scoring"):
        Est(scoring="nope", **TINY).fit(X, y)

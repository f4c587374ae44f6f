"""The user's validation rows (``fit(X, y, X_val=..., y_val=...)``): checked as the training
rows are, with messages that name ``X_val`` / ``y_val``.

``y_val`` needs only be in the loss's domain (all-zero Poisson counts are valid validation
targets, though not valid training targets), and raw ``X_val`` passed through a Pipeline whose
earlier steps change the width is an error naming ``X_val`` (those steps do not transform it).
"""

import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0, early_stopping=True)

rng = np.random.default_rng(0)
X = rng.normal(size=(100, 4))
COUNTS = rng.poisson(np.exp(X[:, 0])).astype(float)
LABELS = (X[:, 0] > 0).astype(int)


def test_all_zero_poisson_y_val_is_accepted():
    model = SoftTreeEnsembleRegressor(loss="poisson", **TINY)
    model.fit(X, COUNTS, X_val=X[:10], y_val=np.zeros(10))
    assert np.all(np.isfinite(model.validation_loss_curve_))


def test_all_zero_poisson_y_is_still_refused_for_training():
    with pytest.raises(ValueError, match=r"sum is positive; y sums to 0"):
        SoftTreeEnsembleRegressor(loss="poisson", **TINY).fit(X, np.zeros(len(X)))


@pytest.mark.parametrize("Est, y, y_val, pattern", [
    (SoftTreeEnsembleRegressor, COUNTS, -np.ones(10), r"y_val has negative values"),
    (SoftTreeEnsembleRegressor, COUNTS, np.full(10, np.nan), r"Input y_val contains NaN"),
    (SoftTreeEnsembleRegressor, COUNTS, np.ones((10, 2)), r"y_val has 2 targets"),
    (SoftTreeEnsembleRegressor, COUNTS, np.ones(9), r"X_val and y_val: .*inconsistent"),
    (SoftTreeEnsembleClassifier, LABELS, np.full(10, 7), r"y_val contains labels"),
])
def test_y_val_problems_name_y_val(Est, y, y_val, pattern):
    loss = dict(loss="poisson") if Est is SoftTreeEnsembleRegressor else {}
    with pytest.raises(ValueError, match=pattern):
        Est(**TINY, **loss).fit(X, y, X_val=X[:10], y_val=y_val)


def test_x_val_of_another_width_names_x_val():
    with pytest.raises(ValueError, match=r"X_val has 3 features.*fitted on X of 4 features"):
        SoftTreeEnsembleClassifier(**TINY).fit(X, LABELS, X_val=X[:10, :3], y_val=LABELS[:10])


def test_raw_x_val_through_a_pipeline_names_x_val_and_says_it_is_not_transformed():
    pipe = make_pipeline(PCA(2), SoftTreeEnsembleClassifier(**TINY))
    with pytest.raises(ValueError, match=r"X_val has 4 features.*not transformed"):
        pipe.fit(X, LABELS, softtreeensembleclassifier__X_val=X[:10],
                 softtreeensembleclassifier__y_val=LABELS[:10])
    # transformed by the earlier steps, as documented, it fits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X_val = make_pipeline(PCA(2)).fit(X).transform(X[:10])
    pipe.fit(X, LABELS, softtreeensembleclassifier__X_val=X_val,
             softtreeensembleclassifier__y_val=LABELS[:10])
    assert pipe[-1].do_early_stopping_

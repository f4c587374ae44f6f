"""The ``encoder`` parameter: a fitted model keeps its own copy as ``encoder_``.

Refitting (or otherwise changing) the ``TabularEncoder`` object given as ``encoder`` after
``fit`` must not move the fitted model's predictions; models given the same encoder still
merge (their encoders compare equal by state, not by identity).
"""

import numpy as np
import pytest

from sktree_lmc import (
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
    TabularEncoder,
    merge_estimators,
)
from sktree_lmc.encoding._encoding import encoders_differ

TINY = dict(n_estimators=4, depth=2, max_epochs=2, random_state=0)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    X_other = rng.normal(size=(120, 3)) * 10 + 5
    return X, y, X_other


@pytest.mark.parametrize("Est", [SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor])
def test_refitting_the_given_encoder_leaves_the_model_unchanged(data, Est):
    X, y, X_other = data
    enc = TabularEncoder().fit(X)
    model = Est(encoder=enc, **TINY).fit(X, y)
    before = model.predict(X) if Est is SoftTreeEnsembleRegressor else model.predict_proba(X)
    assert model.encoder_ is not enc
    assert encoders_differ(model.encoder_, enc) is None
    enc.fit(X_other)  # the user reuses their object
    assert encoders_differ(model.encoder_, enc) is not None
    after = model.predict(X) if Est is SoftTreeEnsembleRegressor else model.predict_proba(X)
    np.testing.assert_array_equal(after, before)


def test_models_given_one_encoder_still_merge(data):
    X, y, _ = data
    enc = TabularEncoder().fit(X)
    a = SoftTreeEnsembleClassifier(encoder=enc, **TINY).fit(X[:60], y[:60])
    b = SoftTreeEnsembleClassifier(encoder=enc, **{**TINY, "random_state": 1}).fit(X[60:], y[60:])
    merged = merge_estimators(a, b)
    assert merged.predict_proba(X).shape == (len(X), 2)


def test_warm_start_with_the_same_encoder_object_refitted_is_refused(data):
    X, y, X_other = data
    enc = TabularEncoder().fit(X)
    model = SoftTreeEnsembleClassifier(encoder=enc, warm_start=True, **TINY).fit(X, y)
    enc.fit(X_other)
    with pytest.raises(ValueError, match="encoder given differs"):
        model.fit(X, y)

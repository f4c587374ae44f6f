"""A deep model whose gradient-boosted teacher (or boosted start) would be too deep: the
error names the setting that removes it (``teacher_weight=0``, ``split_init``), and the model
fits without it."""

import numpy as np
import pytest

from sktree_lmc import SoftTreeEnsembleClassifier

X = np.random.default_rng(0).normal(size=(60, 2))
Y = (X[:, 0] > 0).astype(int)
DEEP = dict(arch="decision_list", depth=20, n_estimators=4, max_epochs=2, random_state=0)


def test_a_deep_decision_list_with_a_teacher_names_teacher_weight():
    with pytest.raises(ValueError, match=r"depth=20.*teacher_weight=0"):
        SoftTreeEnsembleClassifier(teacher_weight=0.5, **DEEP).fit(X, Y)


def test_a_deep_boosted_start_names_split_init():
    with pytest.raises(ValueError, match=r"split_init='boosting'"):
        SoftTreeEnsembleClassifier(teacher_weight=0, split_init="boosting", **DEEP).fit(X, Y)


def test_a_deep_decision_list_without_a_teacher_fits():
    clf = SoftTreeEnsembleClassifier(teacher_weight=0, **DEEP).fit(X, Y)
    assert clf.predict(X).shape == Y.shape

"""The multiclass rules of the defaults: the teacher grows more trees with more classes, and
``early_stopping="auto"`` holds out a validation split only above 10,000 rows of more than
two classes (binary classification and regression keep their rules)."""

import numpy as np
import pytest
from sklearn.datasets import make_classification

from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor
from sktree_lmc.training._plan import (
    EARLY_STOPPING_AUTO_ROWS,
    EARLY_STOPPING_AUTO_ROWS_MULTICLASS,
    TEACHER_TREES_MAX_FACTOR,
    auto_early_stopping,
    teacher_trees,
)


@pytest.mark.parametrize("n_classes, expected", [(0, 256), (2, 256), (3, 768), (4, 1024),
                                                 (10, 256 * TEACHER_TREES_MAX_FACTOR)])
def test_teacher_trees_grow_with_the_classes_up_to_the_cap(n_classes, expected):
    assert teacher_trees(256, n_classes) == expected


def test_auto_early_stopping_waits_for_more_rows_with_several_classes():
    n = EARLY_STOPPING_AUTO_ROWS + 1
    assert auto_early_stopping(n, False, 0) and auto_early_stopping(n, False, 2)
    assert not auto_early_stopping(n, False, 3)
    assert not auto_early_stopping(EARLY_STOPPING_AUTO_ROWS_MULTICLASS, False, 5)
    assert auto_early_stopping(EARLY_STOPPING_AUTO_ROWS_MULTICLASS + 1, False, 5)
    assert auto_early_stopping(100, True, 5)  # the user's validation rows: always


def _fit(est, y, X):
    return est.set_params(n_estimators=8, max_epochs=1, device="cpu", random_state=0).fit(X, y)


def test_multiclass_fit_uses_the_multiclass_rules_and_binary_and_regression_do_not():
    X, y = make_classification(n_samples=EARLY_STOPPING_AUTO_ROWS + 500, n_classes=3,
                               n_informative=5, random_state=0)
    multi = _fit(SoftTreeEnsembleClassifier(), y, X)
    assert not multi.do_early_stopping_ and multi.label_smoothing_ > 0
    assert multi.teacher_[0][1].shape[0] == 8 * 3
    binary = _fit(SoftTreeEnsembleClassifier(), y % 2, X)
    assert binary.do_early_stopping_ and binary.label_smoothing_ == 0
    assert binary.teacher_[0][1].shape[0] == 8
    # a regression of three outputs is not a classification of three classes
    reg = _fit(SoftTreeEnsembleRegressor(teacher_weight=0.5), np.c_[y, y, y].astype(float), X)
    assert reg.do_early_stopping_ and reg.teacher_[0][1].shape[0] == 8

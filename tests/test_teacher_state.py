"""``teacher_`` (kept so that ``refit_leaves`` solves the training objective) is checked
against the model before use: a teacher with another number of outputs, other shapes or
features beyond the encoded ones is a ``ValueError`` naming ``teacher_``, not a broadcast."""

import numpy as np
import pytest

from sktree_lmc import SoftTreeEnsembleClassifier, refit_leaves

X = np.random.default_rng(0).normal(size=(80, 3))
Y = (X[:, 0] > 0).astype(int)


@pytest.fixture(scope="module")
def taught():
    return SoftTreeEnsembleClassifier(n_estimators=4, depth=2, max_epochs=2, teacher_weight=0.5,
                                      random_state=0).fit(X, Y)


def _tampered(model, teacher):
    import copy

    new = copy.deepcopy(model)
    new.teacher_ = [teacher]
    return new


def test_the_untouched_teacher_refits(taught):
    assert refit_leaves(taught, X, Y).predict(X).shape == Y.shape


@pytest.mark.parametrize("outputs", [1, 4])
def test_a_teacher_with_another_number_of_outputs_is_refused(taught, outputs):
    base, features, thresholds, leaves = taught.teacher_[0]
    teacher = (np.resize(base, outputs), features, thresholds,
               np.resize(leaves, leaves.shape[:2] + (outputs,)))
    with pytest.raises(ValueError, match=r"teacher_\[0\].*n_outputs_=2"):
        refit_leaves(_tampered(taught, teacher), X, Y)


def test_a_teacher_splitting_on_unknown_features_is_refused(taught):
    base, features, thresholds, leaves = taught.teacher_[0]
    teacher = (base, features + 1000, thresholds, leaves)
    with pytest.raises(ValueError, match=r"teacher_\[0\] splits on features outside"):
        refit_leaves(_tampered(taught, teacher), X, Y)


def test_a_teacher_of_other_shapes_is_refused(taught):
    base, features, thresholds, leaves = taught.teacher_[0]
    with pytest.raises(ValueError, match=r"teacher_\[0\].*oblivious trees"):
        refit_leaves(_tampered(taught, (base, features, thresholds, leaves[:, :3])), X, Y)
    with pytest.raises(ValueError, match=r"teacher_\[0\] must be a tuple"):
        refit_leaves(_tampered(taught, (base, features)), X, Y)

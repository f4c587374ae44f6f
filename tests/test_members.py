"""``n_members``: the trees cut into members, each trained on its own loss as a whole model.

The fitted model is still the sum of all trees, so everything downstream of training
(prediction, symmetry ops, merging, export) is unchanged; only the training objective is."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import FAST
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification, make_regression

from sktree_lmc import (
    ARCHITECTURES,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleModule,
    SoftTreeEnsembleRegressor,
    get_architecture,
    merge_estimators,
)
from sktree_lmc.model._forward import member_of_trees
from sktree_lmc.model._inputs import Inputs
from sktree_lmc.training._training import _member_loss

X, Y = make_classification(n_samples=200, n_features=5, n_informative=3, n_classes=3,
                           n_clusters_per_class=1, random_state=0)


@pytest.mark.parametrize("n_trees, n_members", [(8, 1), (8, 2), (8, 8), (10, 4), (7, 3)])
def test_members_are_consecutive_groups_of_balanced_size(n_trees, n_members):
    member = member_of_trees(n_trees, n_members)
    assert member.shape == (n_trees,)
    assert np.all(np.diff(member) >= 0)  # consecutive trees
    sizes = np.bincount(member, minlength=n_members)
    assert sizes.min() >= 1 and sizes.max() - sizes.min() <= 1


@pytest.mark.parametrize("n_members", [0, 9])
def test_member_of_trees_refuses_members_without_trees(n_members):
    with pytest.raises(ValueError, match="every member needs a tree"):
        member_of_trees(8, n_members)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
@pytest.mark.parametrize("n_members", [1, 3, 4])
def test_member_outputs_scale_each_group_and_average_to_the_forward(arch, n_members):
    gen = torch.Generator().manual_seed(0)
    module = SoftTreeEnsembleModule(get_architecture(arch, 3), n_trees=12, n_features=5,
                                    n_outputs=2, generator=gen)
    x = torch.randn(17, 5, generator=gen)
    members = module.member_outputs(x, n_members)
    assert members.shape == (17, n_members, 2)
    trees = module.tree_outputs(x)  # (B, M, C)
    member = torch.as_tensor(member_of_trees(12, n_members))
    for k in range(n_members):
        expected = n_members * trees[:, member == k].sum(dim=1)
        torch.testing.assert_close(members[:, k], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(members.mean(dim=1), module(x), rtol=1e-5, atol=1e-6)


def test_member_outputs_add_the_additive_term_to_every_member():
    gen = torch.Generator().manual_seed(1)
    module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), n_trees=6, n_features=3,
                                    n_outputs=2, generator=gen, n_additive=4)
    with torch.no_grad():
        module.additive.copy_(torch.randn(4, 2, generator=gen))
    x, codes = torch.randn(5, 3, generator=gen), torch.randint(0, 4, (5, 2), dtype=torch.int32)
    members = module.member_outputs(x, 3, codes=codes)
    without = module.member_outputs(x, 3)
    extra = module.additive_term(codes)
    torch.testing.assert_close(members, without + extra[:, None, :])
    torch.testing.assert_close(members.mean(dim=1), module(x, codes), rtol=1e-5, atol=1e-6)


def test_the_member_loss_is_the_mean_of_each_members_loss_and_its_gradient_flows():
    gen = torch.Generator().manual_seed(2)
    module = SoftTreeEnsembleModule(get_architecture("non_oblivious", 2), n_trees=6,
                                    n_features=4, n_outputs=3, generator=gen)
    x = torch.randn(9, 4, generator=gen)
    y = torch.randint(0, 3, (9,), generator=gen)

    def ce(out, t):
        return F.cross_entropy(out, t, reduction="none")

    loss = _member_loss(module, ce, Inputs(x), y, 2)
    trees = module.tree_outputs(x)
    by_member = [ce(2 * trees[:, 3 * k:3 * k + 3].sum(1), y) for k in range(2)]
    torch.testing.assert_close(loss, (by_member[0] + by_member[1]) / 2)
    loss.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
               for p in (module.split_weight, module.split_bias, module.leaf_value))
    # one member is the ensemble's own loss
    torch.testing.assert_close(_member_loss(module, ce, Inputs(x), y, 1), ce(module(x), y))


def test_soft_targets_are_repeated_per_member():
    gen = torch.Generator().manual_seed(3)
    module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), n_trees=4, n_features=3,
                                    n_outputs=2, generator=gen)
    x = torch.randn(6, 3, generator=gen)
    soft = torch.softmax(torch.randn(6, 2, generator=gen), dim=1)

    def ce(out, t):
        return F.cross_entropy(out, t, reduction="none")

    members = module.member_outputs(x, 4)
    expected = torch.stack([ce(members[:, k], soft) for k in range(4)], 1).mean(1)
    torch.testing.assert_close(_member_loss(module, ce, Inputs(x), soft, 4), expected)


def test_members_change_training_but_not_what_the_model_is():
    base = dict(FAST, n_estimators=8, max_epochs=4, random_state=0, teacher_weight=0.0,
                additive_bins=None)
    one = SoftTreeEnsembleClassifier(**base).fit(X, Y)
    four = SoftTreeEnsembleClassifier(**base, n_members=4).fit(X, Y)
    # the same start and minibatches, another objective: other parameters
    assert not np.allclose(one.tree_params_.leaf_value, four.tree_params_.leaf_value)
    # the model is the sum of all its trees, as always (not one member's output)
    assert_allclose(four.tree_outputs(X).sum(axis=1), four.decision_function(X), rtol=1e-5,
                    atol=1e-5)
    # bit-identical refits on the CPU
    again = SoftTreeEnsembleClassifier(**base, n_members=4).fit(X, Y)
    assert_array_equal(again.tree_params_.leaf_value, four.tree_params_.leaf_value)
    # and members merge like any model
    other = SoftTreeEnsembleClassifier(**{**base, "random_state": 1}, n_members=4).fit(X, Y)
    merged = merge_estimators(four, other, lam=0.5)
    assert merged.n_members == 4 and merged.predict(X).shape == (len(X),)


def test_members_with_the_default_recipe_the_teacher_and_the_regressor():
    clf = SoftTreeEnsembleClassifier(**dict(FAST, n_estimators=8, max_epochs=3), n_members=8,
                                     random_state=0).fit(X, Y)
    assert np.isfinite(clf.loss_curve_).all() and clf.score(X, Y) > 0.5
    Xr, yr = make_regression(n_samples=150, n_features=4, random_state=0)
    reg = SoftTreeEnsembleRegressor(**dict(FAST, n_estimators=6, max_epochs=3), n_members=3,
                                    random_state=0).fit(Xr, yr)
    assert np.isfinite(reg.loss_curve_).all()
    assert np.isfinite(reg.predict(Xr)).all()


def test_more_members_than_trees_is_a_clear_error():
    with pytest.raises(ValueError, match="n_members=9 is more than n_estimators=8"):
        SoftTreeEnsembleClassifier(**FAST, n_members=9).fit(X, Y)
    with pytest.raises(ValueError, match="n_members"):
        SoftTreeEnsembleClassifier(**FAST, n_members=0).fit(X, Y)

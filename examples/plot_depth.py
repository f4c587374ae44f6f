"""
The effect of depth
===================

Depth changes three things: the size of each tree, the number of symmetry
ops that matching has to search, and (in the paper, Figures 6 and 9) the
barrier, which grows with depth. This example first computes size and search
cost from the architecture tables, then measures barriers of small ensembles
of depth 1 to 4.
"""

# %%
# Size and search cost
# --------------------
# Both follow from :func:`~sktree_lmc.get_architecture` without training
# anything: the number of parameters of one tree (10 features, 2 classes, as
# for the MagicTelescope data below) and the number of symmetry ops of one
# tree, i.e. the candidates weight matching compares for every pair of trees.
import matplotlib.pyplot as plt
import numpy as np

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    get_architecture,
    interpolation_curve,
)
from sktree_lmc.datasets import load_magic_small, make_paper_preprocessor, paper_split

archs = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]
all_depths = np.arange(1, 9)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
for arch in archs:
    tables = [get_architecture(arch, int(d)) for d in all_depths]
    ax0.plot(all_depths, [t.n_params_per_tree(10, 2) for t in tables], marker="o", label=arch)
    ax1.plot(all_depths, [t.n_ops for t in tables], marker="o", label=arch)
for ax, title in [(ax0, "parameters per tree"), (ax1, "symmetry ops per tree")]:
    ax.set_yscale("log")
    ax.set_xlabel("depth D")
    ax.set_title(title)
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# A non-oblivious tree has :math:`2^{2^D - 1}` flip patterns (more than
# :math:`10^{38}` at depth 7); the package finds the best one exactly with a
# dynamic program instead of enumerating them. Oblivious trees have
# :math:`2^D D!` ops, enumerated. The modified decision list has a single op,
# the identity, at every depth: only the trees are permuted.
#
# Barriers of small models
# ------------------------
# For oblivious trees and modified decision lists of depth 1 to 4, two
# ensembles of 32 trees are trained from different seeds and the test-accuracy
# barrier is measured naively, after tree permutation, and (oblivious trees)
# after all invariances, with weight matching.
X, y = load_magic_small(return_X_y=True)
X_train, X_test, y_train, y_test = paper_split(X, y)
pre = make_paper_preprocessor().fit(X_train)
X_train, X_test = pre.transform(X_train), pre.transform(X_test)

depths = [1, 2, 3, 4]
settings = {"oblivious": ["none", "perm", "all"], "decision_list_modified": ["none", "perm"]}
barrier = {}
for arch, invariances in settings.items():
    for depth in depths:
        # the recipe is pinned (early stopping, no warm-up, uniform feature
        # draws), so that the numbers the text discusses do not move with the
        # package's defaults
        params = dict(arch=arch, depth=depth, n_estimators=32, max_epochs=10,
                      early_stopping=True, warmup_fraction=0.0,
                      feature_selection="uniform")
        a = SoftTreeEnsembleClassifier(random_state=0, **params).fit(X_train, y_train)
        b = SoftTreeEnsembleClassifier(random_state=1, **params).fit(X_train, y_train)
        for inv in invariances:
            aligner = ModelAligner(invariances=inv)
            curve = interpolation_curve(a, b, X_test, y_test, lambdas=11, aligner=aligner)
            barrier.setdefault((arch, inv), []).append(curve.barrier("accuracy"))
        print(f"{arch:23s} D={depth}  test accuracy {a.score(X_test, y_test):.3f}  barriers "
              + "  ".join(f"{inv} {barrier[(arch, inv)][-1]:.2f}" for inv in invariances))

# sphinx_gallery_thumbnail_number = 2
labels = {"none": "naive", "perm": "tree permutation", "all": "all invariances"}
styles = {"none": ":", "perm": "--", "all": "-"}
fig, ax = plt.subplots(figsize=(7, 4.2))
for (arch, inv), values in barrier.items():
    ax.plot(depths, values, marker="o", ls=styles[inv],
            color="C1" if arch == "oblivious" else "C3",
            label=f"{arch.replace('_', ' ')}: {labels[inv]}")
ax.set_xticks(depths)
ax.set_xlabel("depth D")
ax.set_ylabel("test accuracy barrier (points)")
ax.set_title("Barriers of pairs of 32-tree ensembles (weight matching)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# The naive barriers of these small models are already small, below 1.5
# points (0.2 to 0.5 for the oblivious trees): the default recipe brings two
# models of the same rows close. Its teacher (soft targets from boosted trees)
# and its additive term (which has no symmetry, and which both models learn
# alike) do it: measured once outside this example, the same depth-2 pair
# trained with ``teacher_weight=0, additive_bins=None`` had a naive barrier
# of 3.6 points, and 0 after aligning. Here, aligning the trees removes what
# is left at depths 1 to 3 (to 0 for the oblivious trees, to at most 0.4
# points for the modified decision lists), but not at depth 4, where the
# aligned barriers (0.4 to 0.75) are no lower than the naive ones (0.2 and
# 0.73). With ensembles this small and a 1,500-row test set (one test sample
# is 0.07 points), these differences are within the noise of a single pair
# of models; the growth of the barrier with depth reported by the paper
# appears with 256 trees trained with its recipe, averaged over many
# datasets and seeds. What depth changes for certain is the cost: the
# parameters and ops above. Hence the paper's advice (:ref:`choosing`):
# shallow perfect trees, with more trees rather than deeper ones, for the
# lowest barriers, and modified decision lists when matching must stay cheap
# at any depth. The claims of this paragraph, checked:
for (arch, inv), values in barrier.items():
    assert max(values) < 1.5, (arch, inv, values)
    if inv != "none":
        naive = barrier[(arch, "none")]
        assert all(values[i] <= naive[i] for i in range(3)), (arch, inv, values, naive)
        assert max(values) <= 1.0, (arch, inv, values)

"""
Grid search over architectures
==============================

The estimators are ordinary scikit-learn estimators, so the architecture and
the depth are hyperparameters like any other: here
:class:`~sklearn.model_selection.GridSearchCV` cross-validates the four
architectures at depths 2 and 3, inside a pipeline that applies the paper's
preprocessing to each training fold.
"""

# %%
# The search
# ----------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline

from sktree_lmc import SoftTreeEnsembleClassifier
from sktree_lmc.datasets import load_magic_small, make_paper_preprocessor, paper_split

X, y = load_magic_small(return_X_y=True)
X_train, X_test, y_train, y_test = paper_split(X, y)

pipe = make_pipeline(
    make_paper_preprocessor(),
    SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, random_state=0),
)
archs = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]
depths = [2, 3]
grid = {"softtreeensembleclassifier__arch": archs, "softtreeensembleclassifier__depth": depths}
search = GridSearchCV(pipe, grid, cv=StratifiedKFold(3, shuffle=True, random_state=0))
search.fit(X_train, y_train)

print("best:", search.best_params_)
print(f"cross-validated accuracy {search.best_score_:.3f}, "
      f"test accuracy {search.score(X_test, y_test):.3f}")

# %%
# All results
# -----------
# ``cv_results_`` holds the mean and spread of the validation accuracy of
# every combination.
res = search.cv_results_
scores = np.array(res["mean_test_score"]).reshape(len(archs), len(depths))
errors = np.array(res["std_test_score"]).reshape(len(archs), len(depths))
for i, arch in enumerate(archs):
    cells = "  ".join(f"D={d}: {scores[i, j]:.3f}" for j, d in enumerate(depths))
    print(f"{arch:24s} {cells}")

fig, ax = plt.subplots(figsize=(7.5, 3.8))
width = 0.38
x = np.arange(len(archs))
for j, depth in enumerate(depths):
    ax.bar(x + (j - 0.5) * width, 100 * scores[:, j], width, yerr=100 * errors[:, j],
           capsize=3, label=f"depth {depth}")
ax.set_xticks(x, [a.replace("_", " ") for a in archs])
ax.set_ylim(100 * scores.min() - 5, 100 * scores.max() + 3)
ax.set_ylabel("cross-validated accuracy (%)")
ax.set_title("16 trees, 10 epochs, 3-fold cross-validation")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

# %%
# With these tiny ensembles the architectures are within a few points of each
# other. Accuracy is only half of the choice when models are to be merged:
# see :ref:`choosing` for the trade-off between cheap matching (modified
# decision lists) and low barriers (perfect trees).

"""Training: what a fit minimises and how it steps.

Lives here: the losses and links per task (``_losses``), the fit's plan and recipe
(``_plan``), the epochs, early stopping and averaging (``_training``), the optimizer
(``_adam``), the numba engine's training step without autograd (``_fast_step``, compiled
in ``_step_numba``), the gradient-boosted teacher and start (``_boosting``; with the numba
engine a tree's levels compiled in ``_boosting_numba``) and the model's start (``_start``).

May import: ``sktree_lmc.model``, ``sktree_lmc.encoding``, ``sktree_lmc.utils``. Nothing
here imports the estimators.
"""


__all__: list = []

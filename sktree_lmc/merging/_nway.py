"""N-way alignment: ``K`` ensembles in one common basis.

``K`` fitted ensembles live in ``K`` different bases: each one is only defined
up to a permutation of its trees and a symmetry op per tree. To average them,
every model ``i`` gets an alignment ``A_i`` (see
:class:`~sktree_lmc.Alignment`) that maps it into one common basis, and the
merged parameters are ``sum_i w_i A_i(theta_i)``.

With weight matching the alignments maximize the total pairwise similarity of
the aligned models,

.. math:: J(A_1, \\dots, A_K) = \\sum_{i < j} w_i w_j \\langle A_i\\theta_i,
          A_j\\theta_j\\rangle_W ,

the inner product being the node-weighted one of weight matching. Since the
ops preserve norms, ``J`` is, up to a constant, the squared norm of the merged
parameters: the better the models agree, the less averaging shrinks them.

:func:`align_many` maximizes ``J`` by block coordinate ascent:

1. **initialization** (the usual baseline): align every model to a reference
   model (model 0 by default), ``K - 1`` pairwise matchings;
2. **refinement sweeps**: for ``i = 0, ..., K-1`` in turn, re-align the
   *original* model ``i`` to the weighted sum of the other aligned models
   (leave-one-out target), which is exactly the maximization of ``J`` over
   ``A_i`` with the others fixed (one linear assignment over trees plus the
   exact best op of every matched pair);
3. stop when a sweep changes no alignment, or improves ``J`` by less than
   ``tol`` (relative, default 0.1%), or after ``max_iter`` sweeps.

Every step maximizes ``J`` exactly over one block, so ``J`` never decreases
and the procedure stops after finitely many sweeps. For activation matching
``J`` is the same sum with the per-tree outputs on the same rows in place of
the parameters (outputs do not change under ops, only under tree
permutations), and the op of each matched pair is chosen by weighted
parameter similarity, as in :func:`~sktree_lmc.activation_matching`.

Cost: the initialization is ``K - 1`` pairwise matchings, each sweep ``K``
matchings (a sweep that changes nothing is the one that proves convergence);
one matching costs ``O(M^2 P)`` for the similarity table (``P`` parameters
per tree, times the size of the op group for "all" invariances) plus
``O(M^3)`` for the linear assignment. Keeping the running weighted sum makes
each leave-one-out target ``O(M P)``. ``max_iter=0`` gives the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from ._matching import activation_matching, weight_matching
from ..model._params import check_finite_params

__all__ = ["MultiAlignment", "align_many"]


@dataclass
class MultiAlignment:
    """Result of :func:`align_many`.

    Attributes
    ----------
    alignments : list of Alignment
        ``alignments[i].apply(params_i)`` expresses model ``i`` in the common
        basis.
    weights : ndarray of shape (K,)
        Model weights, normalized to sum to one.
    n_iter : int
        Refinement sweeps run (0 for the reference-only baseline).
    converged : bool
        Whether the last sweep changed no alignment or improved the objective
        by at most ``tol``; False when ``max_iter`` stopped the refinement.
    objective : list of float
        The objective ``||sum_i w_i A_i(theta_i)||^2`` (node-weighted
        parameters, or tree outputs for activation matching) after the
        initialization and after every sweep; it never decreases.
    n_matchings : int
        Pairwise matchings (linear assignments) computed in all.
    """

    alignments: list
    weights: np.ndarray
    n_iter: int = 0
    converged: bool = True
    objective: list = field(default_factory=list)
    n_matchings: int = 0


def _check_weights(weights, n_models):
    """Model weights validated and normalized to sum to one (uniform when None).

    Parameters
    ----------
    weights : array-like of shape (n_models,) or None
        Real, finite, non-negative numbers (not booleans), not all zero.
    n_models : int
        Number of models.

    Returns
    -------
    w : ndarray of shape (n_models,)
        The weights divided by their sum.

    Raises
    ------
    TypeError
        If a weight is not a real number (a string, a complex number, a
        boolean, None).
    ValueError
        If there is not one weight per model, or a weight is not finite or
        negative, or all are zero.
    """
    if weights is None:
        return np.full(n_models, 1.0 / n_models)
    try:
        w = np.asarray(weights)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise ValueError(
            f"weights must be a 1-D array-like of {n_models} real numbers (one per model): {exc}"
        ) from None
    if w.shape != (n_models,):
        raise ValueError(
            f"weights must have one entry per model ({n_models}), got shape {w.shape}."
        )
    items = list(w) if w.dtype.kind == "O" or isinstance(weights, np.ndarray) else list(weights)
    bad = [v for v in items
           if isinstance(v, (bool, np.bool_)) or not isinstance(v, (Real, np.number))
           or isinstance(v, (complex, np.complexfloating))]
    if bad or w.dtype.kind not in "iufO":
        shown = bad[0] if bad else w.dtype
        raise TypeError(
            f"weights must be real numbers (one per model), got {shown!r} "
            f"({type(bad[0]).__name__ if bad else 'dtype ' + str(w.dtype)})."
        )
    w = w.astype(np.float64)
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError(f"weights must be finite, non-negative and not all zero, got {w!r}.")
    w = w / w.max()  # no overflow of the sum
    return w / w.sum()


def align_many(params, arch, weights=None, *, method="wm", invariances="all", outputs=None,
               max_iter=20, reference=0, weighting=True, tol=1e-3, device="cpu",
               progress=None, start=None):
    """Align ``K`` ensembles into one common basis (N-way matching).

    Block coordinate ascent on the total pairwise similarity of the aligned
    models: align every model to a reference, then repeatedly re-align each
    model to the weighted sum of the others until no alignment changes. See
    the module docstring of :mod:`sktree_lmc.merging._nway` for the objective and the
    cost. This is the procedure behind :class:`~sktree_lmc.ModelAligner`,
    which validates the settings (they are not validated again here); the
    loop is written once for both methods over a "space" (parameters for
    weight matching, parameters and tree outputs for activation matching)
    using the algebra of :class:`~sktree_lmc.TreeParams`.

    Parameters
    ----------
    params : sequence of TreeParams
        ``K >= 2`` parameter sets of the same shape.
    arch : TreeArchitecture
        Their architecture.
    weights : array-like of shape (K,), default=None
        Non-negative model weights (normalized here); uniform when None.
    method : {"wm", "am"}, default="wm"
        Weight matching, or activation matching on ``outputs``.
    invariances : {"none", "perm", "all"}, default="all"
        Symmetries searched; ``"none"`` returns identity alignments.
    outputs : sequence of ndarray of shape (n_samples, M, C), default=None
        Per-tree outputs of every model on the same rows (``method="am"``).
    max_iter : int, default=20
        Maximum number of refinement sweeps; ``0`` aligns every model to the
        reference only (the baseline).
    reference : int, default=0
        Model used by the initialization; its basis is (usually) the final one.
    weighting : bool, default=True
        Node weighting of the similarities.
    tol : float, default=1e-3
        A sweep whose relative objective gain is at most ``tol`` ends the
        refinement: the gains shrink quickly (on K=8 random ensembles of
        M=1024 trees: +8.1%, +1.3%, +0.4%, +0.2%, ... per sweep), and
        ``tol=0`` runs until no alignment changes (or ``max_iter``).
    device : str or torch.device, default="cpu"
        Torch device of the similarity computations.
    progress : callable, default=None
        Called as ``progress(sweep, objective)`` after the initial alignment
        (sweep 0) and after every refinement sweep.
    start : {None, "identity"}, default=None
        ``"identity"``: try the models as they are (every alignment the
        identity) before the initialization, for models that continued from
        one common model (the rounds of sharded training after the first).
        One sweep from the identity checks it with the sweeps' own stopping
        rule: if it changes no alignment or improves the objective by at most
        ``tol`` (relative), its result is returned (``K`` matchings instead of
        the ``K - 1`` of the initialization plus at least the ``K`` of the
        sweep that proves convergence); otherwise (models in other bases) the
        usual initialization and sweeps run as without ``start``. Needs
        ``max_iter >= 1``.

    Returns
    -------
    MultiAlignment
        The alignments, normalized weights and the history of the objective.

    Raises
    ------
    ValueError
        If fewer than two models are given, their shapes differ, or a
        parameter array of one of them (the additive table included) holds
        NaN or an infinity (the message names the model and the array).

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import TreeParams, get_architecture, random_ops
    >>> from sktree_lmc.merging._nway import align_many
    >>> arch = get_architecture("oblivious", 2)
    >>> rng = np.random.RandomState(0)
    >>> p = TreeParams(rng.randn(32, 2, 5), rng.randn(32, 2), rng.randn(32, 4, 2))
    >>> copies = [p] + [p.permute_trees(rng.permutation(32)).apply_ops(random_ops(arch, 32, s))
    ...                 for s in range(3)]
    >>> res = align_many(copies, arch)
    >>> merged = TreeParams.weighted_average(
    ...     [al.apply(q) for al, q in zip(res.alignments, copies)], res.weights)
    >>> bool(np.allclose(merged.leaf_value, p.leaf_value)), res.converged
    (True, True)
    """
    params = list(params)
    K = len(params)
    if K < 2:
        raise ValueError(f"Need at least two models, got {K}.")
    for i, p in enumerate(params):
        if p.shape_signature != params[0].shape_signature:
            raise ValueError(
                "Models differ in shape (trees, nodes, features, leaves, outputs): "
                f"{params[0].shape_signature} (model 0) vs {p.shape_signature} (model {i})."
            )
        check_finite_params(p, f"Model {i}")
    w = _check_weights(weights, K)
    identity = weight_matching(params[reference], params[reference], arch, invariances="none")
    if invariances == "none":
        return MultiAlignment([identity] * K, w, 0, True, [], 0)
    if method == "am":
        if outputs is None or len(outputs) != K:
            raise ValueError("Activation matching needs the tree outputs of every model.")
        space = _OutputSpace(params, outputs, arch, invariances, weighting, device)
    else:
        space = _ParamSpace(params, arch, invariances, weighting, device)

    n_checked = 0
    if start == "identity" and max_iter >= 1:
        # 0. the models as they are: one sweep proves the identity a fixed point
        alignments = [identity] * K
        aligned = [space.aligned(i, identity) for i in range(K)]
        total = _weighted_sum(w, aligned)
        history = [space.objective(total)]
        total, changed = _sweep(space, w, alignments, aligned, total)
        history.append(space.objective(total))
        n_checked = K
        if not changed or history[1] - history[0] <= tol * abs(history[0]):
            # the sweeps' own stopping rule: the identity (or the sweep's small
            # improvement of it) is where the refinement would stop
            if progress is not None:
                progress(0, history[0])
                progress(1, history[1])
            return MultiAlignment(alignments, w, 1, True, history, n_checked)
    # 1. initialization: every model aligned to the reference
    ref = space.aligned(reference, identity)
    alignments = [identity if i == reference else space.match(ref, i) for i in range(K)]
    n_matchings = n_checked + K - 1
    aligned = [space.aligned(i, al) for i, al in enumerate(alignments)]
    total = _weighted_sum(w, aligned)
    history = [space.objective(total)]
    n_iter, converged = 0, max_iter == 0
    if progress is not None:
        progress(0, history[-1])
    # 2. refinement sweeps (Gauss-Seidel): re-align model i to the sum of the others
    for n_iter in range(1, max_iter + 1):
        total, changed = _sweep(space, w, alignments, aligned, total)
        n_matchings += K
        history.append(space.objective(total))
        if progress is not None:
            progress(n_iter, history[-1])
        if not changed or history[-1] - history[-2] <= tol * abs(history[-2]):
            converged = True
            break
    return MultiAlignment(alignments, w, n_iter, converged, history, n_matchings)


def _sweep(space, w, alignments, aligned, total):
    """One refinement sweep (Gauss-Seidel): re-align every model ``i`` in turn to
    the weighted sum of the others, updating ``alignments`` and ``aligned`` in
    place. Returns the new weighted sum and whether any alignment changed."""
    changed = False
    for i in range(len(alignments)):
        others = _axpy(total, -w[i], aligned[i])
        new = space.match(others, i)
        if new != alignments[i]:
            changed = True
            alignments[i], aligned[i] = new, space.aligned(i, new)
            total = _axpy(others, w[i], aligned[i])
    return total, changed


def _weighted_sum(weights, vectors):
    """``sum_i weights[i] * vectors[i]`` of tuples of vectors, part by part."""
    total = tuple(weights[0] * part for part in vectors[0])
    for wi, vec in zip(weights[1:], vectors[1:]):
        total = _axpy(total, wi, vec)
    return total


def _axpy(total, alpha, vec):
    """``total + alpha * vec`` for tuples of vectors (TreeParams or arrays)."""
    return tuple(t + alpha * v for t, v in zip(total, vec))


class _ParamSpace:
    """Weight matching: a model is its parameters (float64), the objective is
    the squared node-weighted norm of the weighted sum."""

    def __init__(self, params, arch, invariances, weighting, device):
        self.params = params
        self.arch = arch
        self.node_weights = arch.node_weights if weighting else None
        self.kw = dict(invariances=invariances, weighting=weighting, device=device)

    def aligned(self, i, alignment):
        return (alignment.apply(self.params[i]).astype(np.float64),)

    def match(self, target, i):
        """Alignment of model ``i`` maximizing its inner product with ``target``."""
        return weight_matching(target[0].astype(np.float32), self.params[i], self.arch, **self.kw)

    def objective(self, total):
        return total[0].inner(total[0], self.node_weights)


class _OutputSpace(_ParamSpace):
    """Activation matching: trees are paired by their outputs (which ops do
    not change), ops chosen on the parameters; the objective is the squared
    norm of the weighted sum of the tree outputs."""

    def __init__(self, params, outputs, arch, invariances, weighting, device):
        super().__init__(params, arch, invariances, weighting, device)
        self.outputs = [np.asarray(o, dtype=np.float64) for o in outputs]

    def aligned(self, i, alignment):
        return super().aligned(i, alignment) + (self.outputs[i][:, alignment.tree_perm],)

    def match(self, target, i):
        return activation_matching(target[1], self.outputs[i], target[0].astype(np.float32),
                                   self.params[i], self.arch, **self.kw)

    def objective(self, total):
        return float(np.sum(total[1] ** 2))

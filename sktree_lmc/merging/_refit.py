"""Re-solving the leaf values of a fitted ensemble with its splits frozen.

The output of a soft tree ensemble is linear in its leaf values:
``f(x) = Phi(x) @ Theta`` with ``Phi(x)`` the ``M * L`` leaf-routing
probabilities of ``x`` (they depend on the splits only) and ``Theta`` the
``(M * L, C)`` leaf values. With the splits frozen, the training loss is
therefore a convex function of the leaves: a multinomial logistic regression
(classifier) or a least-squares problem (regressor, in the standardized
target units the estimator trains in) on the features ``Phi``. A small L2
penalty makes it strictly convex.

:func:`refit_leaves` solves it with scipy's L-BFGS-B, starting from the
current leaves. The features are computed in row chunks (bounded memory) and
kept up to ``cache_size`` MiB: in float64 when all of them fit, else
in float32 (half the bytes; every evaluation computes in float64 on them), and
the chunks beyond the budget are recomputed per evaluation (matrix-free). Deep
trees and many rows never build the full ``n x (M * L)`` matrix at once, and the
cost grows smoothly with the rows instead of jumping when the matrix outgrows
the budget (recomputing the features is most of an evaluation: on 10,000 rows
and 256 trees of depth 4, 191 CPU s for a refit that took 14 s with them kept).

The objective is a sum over rows, so it is computed site by site: one
function, :func:`_chunk_terms`, gives a chunk's loss sum, gradient sum and
weight sum; :class:`_Rows` sums it over the chunks of one site's rows, and
:func:`_combine` turns the sites' sums into the weighted mean plus the
penalty. Locally there is one site (:class:`_LeafObjective`); with dask input
every partition is a site on its worker (:class:`_FederatedLeafObjective`),
and only leaf values and gradient sums travel.
"""

from __future__ import annotations

import copy
from numbers import Integral, Real

import numpy as np
import torch
from scipy.optimize import minimize
from sklearn.base import is_regressor
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import HasMethods, validate_params
from sklearn.utils.validation import (
    _check_sample_weight,
    _num_samples,
    check_array,
    check_is_fitted,
)

from ._bridge import rewrap, split_pipelines, transform_rows, with_params
from ..utils._device import prediction_device
from .._estimators import _BaseSoftTreeEnsemble
from ..federation._dask import (
    WORKER_TIMEOUT,
    DaskSession,
    aligned_partitions,
    is_dask_collection,
)
from ..model._forward import SoftTreeEnsembleModule
from ..model._params import TreeParams
from ..utils._progress import ProgressLog
from ..training._training import _as_tensor
from .._validation import _MAX_SCALE, _check_float32_range, _NumberInterval, encoded_input

__all__ = ["refit_leaves"]

#: Bytes (float64) of one chunk of leaf-probability features, computed and
#: used at once: on the CPU, chunks that stay in its cache. Measured (1
#: thread, 10,000 rows of 4,096 features, a binary loss): the objective on
#: float32 features cast per chunk of 256 rows (8 MiB) took 0.052 s per
#: evaluation, per chunk of 1,024 rows 0.12 s, and on float64 features in
#: chunks of 1,024 rows 0.059 s; computing the features (256 trees of depth
#: 4) took 0.12 s per 10,000 rows in chunks of 256 rows, 0.16-0.26 s in chunks
#: of 1,024.
_CHUNK_BYTES = {"cpu": 8 * 2**20, "cuda": 32 * 2**20}


class _FittedEnsemble(HasMethods):
    """The ``estimator`` of :func:`refit_leaves`: a soft tree ensemble, a
    :class:`~sktree_lmc.ShardedSoftTreeEnsemble` or a Pipeline (its error
    names only public classes). A :class:`HasMethods`, the kind of
    constraint of scikit-learn's that takes objects, with its test replaced."""

    def __init__(self):
        super().__init__(["predict"])

    def is_satisfied_by(self, val):
        return isinstance(val, (_BaseSoftTreeEnsemble, Pipeline)) or _is_merging(val)

    def __str__(self):
        return ("a SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor, "
                "ShardedSoftTreeEnsemble or Pipeline ending in a soft tree ensemble")


def _is_merging(estimator):
    """Whether ``estimator`` is a meta-estimator that predicts with a merged
    model (:class:`~sktree_lmc.ShardedSoftTreeEnsemble`, which imports this
    module): it has ``_with_merged(model)``, its copy with another merged model."""
    return callable(getattr(type(estimator), "_with_merged", None))


def _check_targets(estimator, y):
    """``y`` as an array checked as ``fit`` checks it: finite, and for a
    regressor real, within float32's range (the model's precision) and in its
    loss's domain (Poisson: ``y >= 0``, Gamma: ``y > 0``)."""
    if is_regressor(estimator):
        if np.iscomplexobj(y):
            raise ValueError("y must be real regression targets, got complex values.")
        try:
            y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        except (TypeError, ValueError) as exc:
            if "y" in str(exc).split():
                raise
            raise ValueError(f"y must be real regression targets: {exc}") from None
        _check_float32_range(y, "y")
        # the domain as fit checks it, row by row (a partition may hold only zeros)
        estimator.objective_.loss.check_domain(y.reshape(len(y), -1))
        return y
    return check_array(y, ensure_2d=False, dtype=None, input_name="y")


def _chunk_terms(loss_fn, phi, target, weight, theta, *, transposed=False, offset=None):
    """The terms of one chunk of rows: ``(sum_i w_i loss(phi_i theta, y_i),
    gradient of that sum w.r.t. theta (shape (C, M * L)), sum_i w_i)``.

    ``phi`` are the chunk's leaf probabilities ``(B, M * L)`` (float64; column
    ``m * L + l`` as ``leaf_value.reshape(M * L, C)``), or ``(M * L, B)`` with
    ``transposed=True`` (as the routing computes them; used for features
    recomputed at every evaluation, whose transposition would cost more than
    the slower products it saves); ``theta`` the leaf values ``(M * L, C)``
    (float64); ``offset`` the chunk's additive term ``(B, C)`` (fixed: only the
    leaves are refitted), or None. The only place where the objective is
    computed: locally and on dask workers alike.
    """
    out = phi.T @ theta if transposed else phi @ theta
    if offset is not None:
        out = out + offset
    out.requires_grad_(True)
    loss = (loss_fn(out, target) * weight).sum()
    (g_out,) = torch.autograd.grad(loss, out)
    # (C, M*L): fast layouts on CPUs
    grad = (phi @ g_out).T if transposed else g_out.T.contiguous() @ phi
    return float(loss.detach()), grad, float(weight.sum())


class _Rows:
    """The rows of one site (all rows locally, one partition on a dask worker):
    encoded inputs, encoded targets and weights, with the model's splits.

    :meth:`terms` sums :func:`_chunk_terms` over row chunks. The leaf-probability
    features are computed on the first call and kept up to ``cache_bytes``
    (per site): all of them in float64 when they
    fit, else as many leading chunks as fit in float32; the other chunks are
    recomputed at every call.
    """

    def __init__(self, estimator, X, target, weight, device, cache_bytes):
        params = estimator.tree_params_
        M, L, C = params.leaf_value.shape
        self.shape = (M, L, C)
        self.loss_fn = estimator.objective_.loss
        self.device = device
        self.module = SoftTreeEnsembleModule.from_params(
            estimator.architecture_, params, device
        ).double()
        self.X = X.X
        # the additive term (fixed while the leaves are refitted) of every row
        self.offset = None
        if params.additive is not None:
            codes = torch.as_tensor(X.codes, device=device)
            with torch.no_grad():
                self.offset = self.module.additive_term(codes)  # float64, as the module
        self.target = target.to(device)
        self.weight = torch.as_tensor(weight, dtype=torch.float64, device=device)
        chunk_bytes = _CHUNK_BYTES["cuda" if torch.device(device).type == "cuda" else "cpu"]
        self.chunk = max(1, chunk_bytes // (8 * M * L))
        n_chunks = -(-X.n_rows // self.chunk)
        full = X.n_rows * M * L * 8 <= cache_bytes
        self.cache_dtype = torch.float64 if full else torch.float32
        self.n_cached = n_chunks if full else min(
            n_chunks, int(cache_bytes) // (self.chunk * M * L * 4))
        self.cached = None

    @property
    def n_rows(self):
        return self.X.shape[0]

    def scaled(self, scale):
        """A copy whose weights are divided by ``scale`` (shares the rest)."""
        other = copy.copy(self)
        other.weight = self.weight / scale
        return other

    def _starts(self):
        return range(0, self.X.shape[0], self.chunk)

    def _features(self, start):
        """Leaf probabilities of rows ``start:start+chunk``, transposed: shape
        ``(M * L, B)`` (tree-major: row ``m * L + l``, as
        ``leaf_value.reshape(M * L, C)``). From the routing's ``(L, M, B)``
        layout this is a copy of contiguous rows of ``B``; a copy straight to
        ``(B, M * L)`` is strided and cost more than the routing itself (65
        against 14 ms for 1,024 rows, 256 trees of depth 4)."""
        xb = _as_tensor(self.X[start : start + self.chunk], torch.float64, self.device)
        with torch.inference_mode():
            mu = self.module._routing_probabilities(xb)  # (L, M, B)
        # the copy, made out of inference mode, is a normal tensor
        return mu.permute(1, 0, 2).reshape(-1, mu.shape[2])

    def _kept(self, start):
        """A chunk's features as kept: ``(B, M * L)`` in the cache's dtype (the
        layout of the fastest products, transposed once)."""
        return self._features(start).to(self.cache_dtype).T.contiguous()

    def terms(self, theta_flat):
        """``(loss sum, gradient sum (M * L * C,) float64 ndarray, weight sum)``
        of these rows at the leaf values ``theta_flat``."""
        M, L, C = self.shape
        theta = torch.as_tensor(np.asarray(theta_flat, dtype=np.float64), device=self.device)
        theta = theta.reshape(M * L, C)
        if self.cached is None:
            self.cached = [self._kept(s) for s in list(self._starts())[: self.n_cached]]
        total, weight_sum = 0.0, 0.0
        grad = torch.zeros((C, M * L), dtype=torch.float64, device=self.device)
        for i, start in enumerate(self._starts()):
            kept = i < len(self.cached)
            phi = self.cached[i].to(torch.float64) if kept else self._features(start)
            stop = start + (phi.shape[0] if kept else phi.shape[1])
            offset = None if self.offset is None else self.offset[start:stop]
            loss, g, w = _chunk_terms(self.loss_fn, phi, self.target[start:stop],
                                      self.weight[start:stop], theta, transposed=not kept,
                                      offset=offset)
            total += loss
            weight_sum += w
            grad += g
        return total, grad.T.cpu().numpy().ravel(), weight_sum


def _combine(terms, theta_flat, alpha):
    """The objective and its gradient from the sites' ``terms``: the weighted
    mean loss plus the L2 penalty."""
    theta = np.asarray(theta_flat, dtype=np.float64)
    total = sum(t[0] for t in terms)
    grad = np.sum([t[1] for t in terms], axis=0)
    weight_sum = sum(t[2] for t in terms)
    value = total / weight_sum + 0.5 * alpha * float(np.dot(theta, theta))
    return value, grad / weight_sum + alpha * theta


class _LeafObjective:
    """``f(Theta) = sum_i w_i loss(Phi_i Theta, y_i) / sum_i w_i + alpha/2 ||Theta||^2``,
    with its gradient, evaluated chunk by chunk in float64 on rows held here."""

    def __init__(self, estimator, X, target, weight, alpha, device, cache_bytes):
        self.alpha = float(alpha)
        self.rows = _Rows(estimator, X, target, weight, device, cache_bytes)

    def _terms(self, theta_flat):
        return [self.rows.terms(theta_flat)]

    def __call__(self, theta_flat):
        return _combine(self._terms(theta_flat), theta_flat, self.alpha)

    def close(self):
        pass


# ----------------------------------------------------------------------------
# dask input: the rows stay on the workers
# ----------------------------------------------------------------------------


def _partition_rows(k, model, X, y, w, cache_bytes):
    """Partition ``k``'s :class:`_Rows`, built on its worker (``model`` is
    ``(estimator, pipeline head or None)``); None for an empty partition."""
    estimator, head = model
    try:
        if _num_samples(y) == 0 and _num_samples(X) == 0:
            return None
        X = encoded_input(estimator, transform_rows(head, X))
        y = _check_targets(estimator, y)
        if len(y) != X.n_rows:
            raise ValueError(f"X has {X.n_rows} rows but y has {len(y)}: the partitions "
                             "of X, y (and sample_weight) must match.")
        target = torch.as_tensor(estimator.objective_.refit_targets(
            X.X, y, estimator.encoder_.n_features_out_))
        w = _partition_weights(w, X.n_rows)
        return _Rows(estimator, X, target, w, prediction_device(estimator.device), cache_bytes)
    except Exception as exc:
        message = f"Partition {k} failed in refit_leaves: {type(exc).__name__}: {exc}"
        try:
            new = type(exc)(message)
        except Exception:  # pragma: no cover - exotic exception signatures
            new = RuntimeError(message)
        raise new from exc


def _partition_weights(w, n_rows):
    """A partition's sample weights checked as ``_check_sample_weight`` checks
    them, except that all zeros is fine (other partitions may hold the weight;
    the client checks the total)."""
    if w is None:
        return np.ones(n_rows)
    w = check_array(w, ensure_2d=False, dtype=np.float64, input_name="sample_weight")
    if w.shape != (n_rows,):
        raise ValueError(f"sample_weight.shape == {w.shape}, expected {(n_rows,)}!")
    if np.any(w < 0):
        raise ValueError("Negative values in data passed to sample_weight")
    return w


def _rows_max_weight(rows):
    return 0.0 if rows is None else float(rows.weight.max())


def _rows_scaled(rows, scale):
    return None if rows is None else rows.scaled(scale)


def _rows_terms(rows, theta_flat):
    """What a worker sends back per evaluation: two floats and the gradient
    sum, ``M * L * C`` float64 values, whatever the number of rows."""
    if rows is None:
        return 0.0, np.zeros(np.size(theta_flat)), 0.0
    return rows.terms(theta_flat)


class _FederatedLeafObjective(_LeafObjective):
    """:class:`_LeafObjective` on dask partitions: the model is sent to the
    workers once; every evaluation sends the leaf values to each partition's
    worker and receives its loss, gradient and weight sums.

    The work goes through a :class:`~sktree_lmc.federation._dask.DaskSession`
    (as the federated rounds' does): after ``worker_timeout`` seconds without
    any worker, or when a partition's task is lost with its workers, a
    :class:`~sktree_lmc.federation._dask.WorkerLostError` names
    ``refit_leaves``, what was running and the unfinished partitions, and
    everything the refit submitted is cancelled.
    """

    def __init__(self, estimator, head, X, y, sample_weight, *, alpha, cache_bytes,
                 worker_timeout=WORKER_TIMEOUT):
        self.session = session = DaskSession("refit_leaves", self._lost_message,
                                             worker_timeout=worker_timeout, unit="partition")
        parts = aligned_partitions(X, y, sample_weight)
        self.n_parts = P = len(parts[0])
        self.alpha = float(alpha)
        # The model travels once (a fresh key, never shared with another call's
        # data); the partitions are computed on the workers and every partition's
        # rows are encoded and kept there.
        model = session.send((estimator, head), "sending the model to the workers",
                             names=range(P))
        xf, yf, wf = session.partitions(parts)
        rows = [session.submit(_partition_rows, k, model, xf[k], yf[k],
                               wf[k] if wf else None, cache_bytes)
                for k in range(P)]
        del parts, xf, yf, wf
        w_max = max(self._gather([session.submit(_rows_max_weight, r) for r in rows],
                                 "encoding the partitions on the workers"), default=0.0)
        if not w_max > 0:
            raise ValueError("sample_weight sums to zero: there is nothing to fit.")
        # only ratios matter; no overflow (as for rows held here)
        self.parts = [session.submit(_rows_scaled, r, w_max) for r in rows]
        # The model stays on the workers until close(): scattered data has no task
        # to recompute it from, and without it the rows of a partition lost with its
        # worker could not be recomputed elsewhere (their tasks would be cancelled).
        self.model = model
        del rows

    @property
    def client(self):
        return self.session.client

    def _lost_message(self, what, unfinished, why):
        """The message of the :class:`~sktree_lmc.federation._dask.WorkerLostError`
        raised while ``what`` runs."""
        return (f"refit_leaves stopped while {what}: {why}; partition(s) {unfinished} "
                f"of {self.n_parts} did not finish. The leaves were not refitted: call "
                "refit_leaves again when the cluster has workers.")

    def _gather(self, futures, what):
        """The results of ``futures`` (one per partition, in order), or a
        :class:`~sktree_lmc.federation._dask.WorkerLostError` naming ``what`` was running."""
        return self.session.gather(futures, what)

    def _terms(self, theta_flat):
        return self._gather([self.session.submit(_rows_terms, r, theta_flat)
                             for r in self.parts],
                            "computing the loss and gradient sums of the partitions")

    def close(self):
        self.session.cancel(self.parts)
        self.parts, self.model = [], None


@validate_params(
    {
        "estimator": [_FittedEnsemble()],
        "X": ["array-like"],
        "y": ["array-like"],
        "sample_weight": ["array-like", None],
        "alpha": [_NumberInterval(Real, 0, _MAX_SCALE, closed="both")],
        "max_iter": [_NumberInterval(Integral, 1, None, closed="left")],
        "tol": [_NumberInterval(Real, 0, 1, closed="both")],
        "cache_size": [_NumberInterval(Real, 0, None, closed="left")],
        "return_info": ["boolean"],
        "verbose": ["verbose"],
        "worker_timeout": [_NumberInterval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def refit_leaves(estimator, X, y, sample_weight=None, *, alpha=1e-4, max_iter=500, tol=3e-6,
                 cache_size=256, return_info=False, verbose=0, worker_timeout=WORKER_TIMEOUT):
    """Re-solve the leaf values of a fitted ensemble, with its splits frozen.

    The ensemble's output is linear in its leaf values, so with the splits
    fixed its training loss (weighted by ``sample_weight``; in standardized
    units for a regressor) is convex in the leaves. This solves

    .. math:: \\min_\\Theta \\; \\frac{\\sum_i w_i\\,\\ell(\\Phi(x_i)\\Theta, y_i)}
              {\\sum_i w_i} + \\frac{\\alpha}{2}\\lVert\\Theta\\rVert^2

    with scipy's L-BFGS from the current leaves (never ending above them),
    ``Phi(x)`` being the ``M * L`` leaf-routing probabilities of ``x``. A
    classifier trained with a teacher is refitted to the targets it was
    trained on. Use it after a merge, whose averaged leaves are not the best
    ones for the averaged splits. A dask ``X`` (with a running
    ``dask.distributed`` client) is refitted federated: the partitions stay
    on their workers and send loss and gradient sums. See
    ``docs/sharded.md``, "Refitting the leaves" and "Federated leaf refit".

    Parameters
    ----------
    estimator : SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor, \
            ShardedSoftTreeEnsemble or Pipeline
        A fitted ensemble (not modified); of a sharded one, ``merged_``.
    X : array-like of shape (n_samples, n_features), dask array or DataFrame
        Rows on which the leaves are re-solved (a dask collection: federated).
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        Labels among ``estimator.classes_``, or regression targets (as in
        ``fit``); a dask collection partitioned like a dask ``X``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative per-sample weights (a dask collection with a dask ``X``).
    alpha : float in [0, 1e30], default=1e-4
        L2 penalty on the leaf values (``0``: none, not strictly convex).
    max_iter : int >= 1, default=500
        Maximum L-BFGS iterations (an int; ``True`` is refused).
    tol : float in [0, 1], default=3e-6
        Tolerance on the objective decrease per iteration, relative to
        ``max(objective, 1)`` (``ftol`` of L-BFGS-B). The default stops
        where the test accuracy no longer moves, within the time of one fit
        (see ``docs/benchmarks.md``, "The refit's tolerance"); the problem
        is ill-conditioned, and ``tol=0`` runs to the unique optimum (raise
        ``max_iter``).
    cache_size : float >= 0, default=256
        Memory in MiB (per partition for dask input) for the leaf-probability
        features ``Phi`` (``n * M * L`` values), as in :class:`sklearn.svm.SVC`:
        kept in float64 when they all fit, else as many row chunks as fit in
        float32, the others recomputed at every evaluation (``0``: all). The
        default model needs 33 MiB per 1,000 rows in float64.
    return_info : bool, default=False
        Also return a dict with ``objective_start``, ``objective`` (of the
        leaves as stored), ``n_iter``, ``converged`` and ``message``.
    verbose : int, default=0
        ``1``: progress over the iterations (a bar on a terminal, else a line
        per iteration); ``2``: lines even on a terminal.
    worker_timeout : float > 0, default=60.0
        Dask input only: seconds to wait while no worker is alive before a
        ``WorkerLostError`` (as :class:`ShardedSoftTreeEnsemble`'s).

    Returns
    -------
    refitted : estimator
        A new fitted estimator with the same splits and the re-solved leaves;
        for a :class:`ShardedSoftTreeEnsemble`, a copy whose ``merged_`` is
        refitted (the shard models unchanged).
    info : dict
        Only when ``return_info=True``.

    See Also
    --------
    merge_estimators : Align and average fitted ensembles.
    ShardedSoftTreeEnsemble : Sharded training, with ``refit_leaves=True``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators, refit_leaves
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (0, 1))
    >>> merged = merge_estimators(a, b)
    >>> refitted, info = refit_leaves(merged, X, y, return_info=True)
    >>> bool(info["objective"] <= info["objective_start"])
    True
    """
    options = dict(alpha=alpha, max_iter=max_iter, tol=tol, cache_size=cache_size,
                   verbose=verbose)
    if _is_merging(estimator):
        return _refit_sharded(estimator, X, y, sample_weight, return_info=return_info,
                              worker_timeout=worker_timeout, **options)
    final, head = estimator, None
    if isinstance(estimator, Pipeline):
        (final,), head = split_pipelines([estimator])
    # where the rows are is decided here, once: on the workers (the head transforms each
    # partition there), or in memory
    if is_dask_collection(X):
        refitted, info = _refit_federated(final, head, X, y, sample_weight,
                                          worker_timeout=worker_timeout, **options)
    else:
        refitted, info = refit_in_memory(final, transform_rows(head, X), y, sample_weight,
                                         **options)
    refitted = rewrap(estimator, refitted)
    return (refitted, info) if return_info else refitted


def _refit_sharded(sharded, X, y, sample_weight, *, return_info, **options):
    """:func:`refit_leaves` of a :class:`ShardedSoftTreeEnsemble`: a copy of
    it whose ``merged_`` is the refitted merged model."""
    check_is_fitted(sharded, "merged_")
    refitted, info = refit_leaves(sharded.merged_, X, y, sample_weight, return_info=True,
                                  **options)
    new = sharded._with_merged(refitted)
    return (new, info) if return_info else new


def _local_objective(estimator, X, y, sample_weight, alpha, cache_bytes, *, probabilities=None):
    X = encoded_input(estimator, X)
    if probabilities is not None:  # a classifier's soft targets, as they are
        target = torch.as_tensor(np.asarray(probabilities, dtype=np.float64))
        if target.shape != (X.n_rows, estimator.tree_params_.leaf_value.shape[2]):
            raise ValueError(f"probabilities of shape {tuple(target.shape)} do not match the "
                             f"{X.n_rows} rows and the model's outputs.")
    else:
        y = _check_targets(estimator, y)
        if len(y) != X.n_rows:
            raise ValueError(f"X has {X.n_rows} rows but y has {len(y)}.")
        target = torch.as_tensor(estimator.objective_.refit_targets(
                X.X, y, estimator.encoder_.n_features_out_))
    sample_weight = _check_sample_weight(
        sample_weight, X.X, dtype=np.float64, ensure_non_negative=True
    )
    if not sample_weight.max(initial=0.0) > 0:
        raise ValueError("sample_weight sums to zero: there is nothing to fit.")
    sample_weight = sample_weight / sample_weight.max()  # only ratios matter; no overflow
    device = prediction_device(estimator.device)
    return _LeafObjective(estimator, X, target, sample_weight, alpha, device, cache_bytes)


def refit_in_memory(estimator, X, y, sample_weight=None, *, probabilities=None, alpha=1e-4,
                    max_iter=500, tol=3e-6, cache_size=256, verbose=0):
    """:func:`refit_leaves` of a soft tree ensemble on rows held in memory (not a
    dask collection; the defaults are :func:`refit_leaves`'): ``(refitted,
    info)``. The merge's distillation calls it on its own rows; a classifier's
    ``probabilities`` ``(n_rows, n_classes)`` (with ``y=None``) are then the
    targets of its cross-entropy, as they are (the objective's teachers and
    smoothing not applied)."""
    check_is_fitted(estimator, "tree_params_")
    objective = _local_objective(estimator, X, y, sample_weight, alpha, int(cache_size * 2**20),
                                 probabilities=probabilities)
    return _solved(estimator, objective, max_iter=max_iter, tol=tol, verbose=verbose)


def _refit_federated(estimator, head, X, y, sample_weight, *, alpha, max_iter, tol, cache_size,
                     verbose, worker_timeout):
    """:func:`refit_leaves` of a soft tree ensemble on a dask collection ``X``
    (``head``: a pipeline's preprocessing, applied on the workers):
    ``(refitted, info)``."""
    check_is_fitted(estimator, "tree_params_")
    for name, value in (("y", y), ("sample_weight", sample_weight)):
        if value is not None and not is_dask_collection(value):
            raise TypeError(f"X is a dask collection, so {name} must be one too (partitioned "
                            f"like X), got {type(value).__name__}.")
    objective = _FederatedLeafObjective(estimator, head, X, y, sample_weight, alpha=alpha,
                                        cache_bytes=int(cache_size * 2**20),
                                        worker_timeout=worker_timeout)
    return _solved(estimator, objective, max_iter=max_iter, tol=tol, verbose=verbose)


def _solved(estimator, objective, *, max_iter, tol, verbose):
    """:func:`_solve`, the ``objective`` closed after it (its dask session's data)."""
    try:
        return _solve(estimator, objective, max_iter=max_iter, tol=tol, verbose=verbose)
    finally:
        objective.close()


def _solve(estimator, objective, *, max_iter, tol, verbose):
    params = estimator.tree_params_
    start = params.leaf_value.astype(np.float64).ravel()
    f_start, _ = objective(start)
    if not np.isfinite(f_start):
        raise ValueError(
            f"The objective of the current leaves is not finite ({f_start}); the estimator's "
            "parameters or the data (X, y, sample_weight) overflow."
        )
    log = ProgressLog("refit_leaves", max_iter, verbose, unit="iteration")
    iteration = [0]

    def report(intermediate_result):
        log.step(iteration[0], objective=float(intermediate_result.fun))
        iteration[0] += 1

    result = minimize(
        objective, start, jac=True, method="L-BFGS-B",
        options={"maxiter": max_iter, "ftol": tol, "gtol": tol / 10},
        callback=report if verbose else None,
    )
    leaves = result.x.reshape(params.leaf_value.shape).astype(params.leaf_value.dtype)
    f_new, _ = objective(leaves.astype(np.float64).ravel())
    if not f_new <= f_start:  # rounding, or a solver failure: keep the current leaves
        leaves, f_new = params.leaf_value.copy(), f_start
    log.close(f"objective {f_start:.6g} -> {f_new:.6g} in {int(result.nit)} iterations")
    refitted = with_params(estimator, TreeParams(params.split_weight, params.split_bias, leaves,
                                                 params.additive))
    info = {"objective_start": f_start, "objective": f_new, "n_iter": int(result.nit),
            "converged": bool(result.success), "message": str(result.message)}
    return refitted, info

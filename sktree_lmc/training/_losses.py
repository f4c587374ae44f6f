"""The loss of each task, one object that serves every use of it.

A :class:`Loss` is the one definition of a task's objective (the role of
scikit-learn's ``_loss`` objects in ``HistGradientBoosting*``). It serves:

- the torch training loss, per row (``loss(output, target)``): the epoch
  loop, early stopping's validation loss, the leaf refit
  (:func:`~sktree_lmc.refit_leaves`) and the federated rounds' losses;
- the NumPy gradients and Hessians of the gradient-boosted trees (the
  teacher and ``split_init="boosting"``, :mod:`._boosting`), their
  initial prediction from the summed targets, and their validation loss;
- the teacher's mixing into the training targets (``teacher_weight``) and
  into the refit's targets.

The NumPy objective of the boosting is the torch one without label smoothing
and, for squared error, half the summed (not the mean) squared error per row:
the same minimizer and the same Newton steps; ``tests/test_losses.py`` checks
the gradients against torch's autograd of the training loss.

Nothing here imports the estimators.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import softmax
from scipy.special import xlogy as scipy_xlogy

__all__: list = []

#: float32's smallest normal number: the smallest Gamma target (relative to the
#: mean, and absolute) the training precision represents.
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def weighted_mean(per_row, weight):
    """Weighted mean NumPy loss of the rows (0 for no weight): every
    :meth:`Loss.mean`."""
    return float(np.average(per_row, weights=weight)) if weight.sum() > 0 else 0.0


class IdentityLink:
    """The raw output is the (standardized) prediction."""

    name = "identity"

    def inverse(self, raw, xp=np):
        """The prediction of a raw output (NumPy or torch)."""
        return raw

    def standardized_trees(self, base, leaves, mean, scale):
        """Boosted trees grown on the targets in their own units, in the units
        of targets standardized by ``mean`` and ``scale``."""
        return (base - mean) / scale, leaves / scale

    def merged_scale(self, means, scales, weights):
        """``(mean, scale, factors)`` of a merge: the weighted means of the
        models' standardizations, and the factor per model that expresses its
        raw output in the merged scale."""
        scale = sum(w * s for w, s in zip(weights, scales))
        mean = sum(w * m for w, m in zip(weights, means))
        return mean, scale, [s / scale for s in scales]

    def merge_correction(self, ensemble, merged, *, data=False):
        """The factor of a merged model's scale that undoes what averaging raw
        outputs does to its predictions ``merged`` against the models'
        averaged predictions ``ensemble`` (on the same rows, 2-D; ``data``:
        whether the rows are the data's or probe rows): None, the identity
        link averages predictions themselves."""
        return None

    def calibrated(self, mean, scale, target, prediction, weight):
        """``(mean, scale)`` of a fitted standardization after which the
        predictions' weighted sum over some rows is their targets'
        ``target`` (per output), from their sum ``prediction`` under
        ``(mean, scale)`` and the rows' total weight ``weight``: the
        identity link shifts every prediction by the mean residual."""
        return mean + (target - prediction) / weight, scale


class LogLink(IdentityLink):
    """The prediction is ``exp`` of the raw output; a scale of the targets is
    a shift of the raw output by its log."""

    name = "log"

    def inverse(self, raw, xp=np):
        return xp.exp(raw)

    def standardized_trees(self, base, leaves, mean, scale):
        return base - np.log(scale), leaves

    def merged_scale(self, means, scales, weights):
        """The weighted geometric mean of the scales: the merge's raw output
        is then the weighted mean of the models' (each model's shift by
        ``log(scale_i / scale)`` averages to zero), so the merged prediction
        is the weighted geometric mean of theirs, exact at the endpoints."""
        log_scale = sum(w * np.log(s) for w, s in zip(weights, scales))
        ones = [np.ones_like(np.asarray(s, dtype=np.float64)) for s in scales]
        return np.zeros_like(log_scale), np.exp(log_scale), ones

    def merge_correction(self, ensemble, merged, *, data=False):
        """Averaging log outputs gives each row the weighted geometric mean of
        the models' predictions, below their arithmetic mean (``ensemble``),
        and the merge's shrinkage of the outputs lowers the mean prediction
        further. On rows of the data (``data=True``) the factor, per output, is
        the ratio of the ensemble's mean prediction to the merge's: the merged
        model then keeps the ensemble's mean over the data, as a log-link model
        fitted there keeps the targets' (on counts, DoctorVisits, 2 and 4 IID
        sites, 3 seeds: within the sites' own 5 % of the data's mean, where
        the log-space gap left it 11-17 % low). On probe rows, drawn from the
        encoders' summaries rather than the data, the rows of largest
        predictions may lie off the data and would set such a ratio: the
        factor is then the gap's mean in log space. Rows
        where a prediction is 0 or not finite are left out."""
        ok = np.isfinite(ensemble) & np.isfinite(merged) & (ensemble > 0) & (merged > 0)
        if data:
            num = np.where(ok, ensemble, 0.0).sum(axis=0)
            den = np.where(ok, merged, 0.0).sum(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = num / den
            return np.where(np.isfinite(factor) & (factor > 0), factor, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = np.log(ensemble) - np.log(merged)
        gap = np.where(ok, gap, np.nan)
        with warnings.catch_warnings():  # an output with no usable row: factor 1
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.exp(np.nan_to_num(np.nanmean(gap, axis=0), nan=0.0))

    def calibrated(self, mean, scale, target, prediction, weight):
        """The log link scales every prediction by ``target / prediction``
        (positive sums: the caller checks)."""
        return mean, scale * (target / prediction)


class Loss:
    """The objective of one task (see the module docstring)."""

    #: Name of the loss (what errors and docs call it).
    name = None

    #: How a raw output becomes a prediction (:class:`IdentityLink`, :class:`LogLink`).
    link = IdentityLink()

    def check_domain(self, y, name="y"):
        """Raise a ``ValueError`` naming ``name`` for targets outside the
        loss's domain (each row on its own: also a part of the rows, as a
        validation set or the rows of a leaf refit)."""

    def check_target(self, y, name="y"):
        """Raise a ``ValueError`` for training targets outside the loss's
        domain (:meth:`check_domain`) or that it cannot standardize."""
        self.check_domain(y, name)

    def standardization(self, y, weight):
        """``(mean, scale)`` per output of the targets ``y`` (2-D, float64)
        under row weights: the regressor fits ``(y - mean) / scale``."""
        self.check_target(y)
        mean = np.average(y, axis=0, weights=weight)
        scale = np.sqrt(np.average((y - mean) ** 2, axis=0, weights=weight))
        return mean, np.where(scale > 0, scale, 1.0)

    def __call__(self, output, target):  # pragma: no cover - abstract
        """Per-row training loss of the raw ``output`` (torch, differentiable)."""
        raise NotImplementedError

    def gradients(self, raw, target, weight):  # pragma: no cover - abstract
        """NumPy gradient and (diagonal) Hessian per row and output at ``raw``,
        times the row weights (the Hessian at least ``1e-6`` per row)."""
        raise NotImplementedError

    def mean(self, raw, target, weight):  # pragma: no cover - abstract
        """Weighted mean NumPy loss of ``raw`` (0 for no weight)."""
        raise NotImplementedError

    def target_sums(self, target, weight, n_outputs):  # pragma: no cover - abstract
        """``(sum, weight sum)`` of the weighted targets, the sufficient
        statistics of :meth:`initial_prediction` (summed over sites)."""
        raise NotImplementedError

    def initial_prediction(self, total, weight_sum):  # pragma: no cover - abstract
        """The constant raw output that minimizes the loss, from the sums of
        :meth:`target_sums`."""
        raise NotImplementedError

    def histogram_outputs(self, n_outputs):
        """Outputs whose gradient histograms a boosting site must send (the
        others follow from them)."""
        return n_outputs

    def teacher_targets(self, raw):  # pragma: no cover - abstract
        """What a teacher's raw outputs contribute to the training targets."""
        raise NotImplementedError

    def mix(self, target, teacher, rows, teacher_weight, n_outputs):  # pragma: no cover
        """The training targets: ``target`` mixed on ``rows`` with the
        teacher's :meth:`teacher_targets` ``teacher`` (one per row of
        ``rows``) at ``teacher_weight``."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self), tuple(sorted(vars(self).items()))))


class CrossEntropy(Loss):
    """Cross-entropy of ``softmax(output)`` with class indices or class
    probabilities (the teacher's soft targets), with ``label_smoothing``.

    Parameters
    ----------
    label_smoothing : float, default=0.0
        Smoothing of the training loss (torch's); the boosting's Newton
        steps are of the unsmoothed loss.
    """

    name = "softmax"

    def __init__(self, label_smoothing=0.0):
        self.label_smoothing = float(label_smoothing)

    def __call__(self, output, target):
        return F.cross_entropy(output, target, reduction="none",
                               label_smoothing=self.label_smoothing)

    def gradients(self, raw, target, weight):
        """``p - onehot`` and the diagonal Hessian ``p (1 - p)`` scaled by
        ``C / (C - 1)`` (Friedman's factor; for two classes the leaves' logit
        difference then takes the exact Newton step)."""
        z = raw - raw.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        C = raw.shape[1]
        g = p.copy()
        g[np.arange(len(target)), target] -= 1.0
        h = p * (1.0 - p) * (C / max(C - 1, 1))
        return g * weight[:, None], np.maximum(h, 1e-6) * weight[:, None]

    def mean(self, raw, target, weight):
        z = raw - raw.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        per_row = -logp[np.arange(len(target)), target]
        return weighted_mean(per_row, weight)

    def target_sums(self, target, weight, n_outputs):
        return (np.bincount(target, weights=weight, minlength=n_outputs), float(weight.sum()))

    def initial_prediction(self, total, weight_sum):
        """The centred log class frequencies."""
        logp = np.log(np.maximum(total / weight_sum, 1e-12))
        return logp - logp.mean()

    def histogram_outputs(self, n_outputs):
        """Two classes: the first output's (the two gradients are opposite,
        the Hessians equal)."""
        return 1 if n_outputs == 2 else n_outputs

    def teacher_targets(self, raw):
        """The teacher's class probabilities."""
        return softmax(raw, axis=1)

    def mix(self, target, teacher, rows, teacher_weight, n_outputs):
        """One-hot labels, float32, mixed with the teacher's probabilities."""
        soft = np.eye(n_outputs, dtype=np.float32)[target]
        tw = float(teacher_weight)
        soft[rows] = (1 - tw) * soft[rows] + tw * teacher
        return soft


class SquaredError(Loss):
    """Squared error, averaged over the outputs of a row (training); the
    boosting minimizes half the summed squared error, the same minimizer."""

    name = "squared"

    def __call__(self, output, target):
        return ((output - target) ** 2).mean(dim=1)

    def gradients(self, raw, target, weight):
        g = raw - target
        h = np.ones_like(raw)
        return g * weight[:, None], np.maximum(h, 1e-6) * weight[:, None]

    def mean(self, raw, target, weight):
        per_row = 0.5 * ((raw - target) ** 2).sum(axis=1)
        return weighted_mean(per_row, weight)

    def target_sums(self, target, weight, n_outputs):
        return ((weight[:, None] * target).sum(axis=0), float(weight.sum()))

    def initial_prediction(self, total, weight_sum):
        """The weighted mean target."""
        return total / weight_sum

    def teacher_targets(self, raw):
        """The teacher's predictions."""
        return raw

    def mix(self, target, teacher, rows, teacher_weight, n_outputs):
        """The targets, float32, mixed with the teacher's predictions."""
        mixed = np.array(target, dtype=np.float32, copy=True)
        tw = float(teacher_weight)
        mixed[rows] = (1 - tw) * mixed[rows] + tw * teacher
        return mixed


class AbsoluteError(SquaredError):
    """Absolute error, averaged over the outputs of a row (training; the
    conditional median). The boosting takes Newton-like steps on it with the
    gradient's sign and a unit Hessian (as scikit-learn's gradient boosting
    does before its median line search), from the weighted mean target (the
    median is not a sum over sites)."""

    name = "absolute_error"

    def __call__(self, output, target):
        return (output - target).abs().mean(dim=1)

    def gradients(self, raw, target, weight):
        g = np.sign(raw - target)
        h = np.ones_like(raw)
        return g * weight[:, None], h * weight[:, None]

    def mean(self, raw, target, weight):
        per_row = np.abs(raw - target).sum(axis=1)
        return weighted_mean(per_row, weight)

    def standardization(self, y, weight):
        """Robust: the weighted median and the mean absolute deviation from it."""
        self.check_target(y)
        mean = np.array([_weighted_median(c, weight) for c in y.T])
        scale = np.average(np.abs(y - mean), axis=0, weights=weight)
        return mean, np.where(scale > 0, scale, 1.0)


def _weighted_median(values, weights):
    """The smallest value with at least half the total weight at or below it."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, 0.5 * cum[-1])])


class Quantile(AbsoluteError):
    """The pinball loss of the ``quantile`` level (the conditional quantile):
    ``quantile * (y - f)`` above the output, ``(1 - quantile) * (f - y)``
    below, averaged over the outputs of a row. ``quantile=0.5`` is half the
    absolute error. The boosting steps as :class:`AbsoluteError`'s, with the
    pinball loss's gradient.

    Parameters
    ----------
    quantile : float in (0, 1)
        The level of the quantile.
    """

    name = "quantile"

    def __init__(self, quantile=0.5):
        self.quantile = float(quantile)

    def __call__(self, output, target):
        diff = target - output
        return torch.maximum(self.quantile * diff, (self.quantile - 1) * diff).mean(dim=1)

    def gradients(self, raw, target, weight):
        g = np.where(target > raw, -self.quantile, 1 - self.quantile)
        return g * weight[:, None], np.ones_like(raw) * weight[:, None]

    def mean(self, raw, target, weight):
        diff = target - raw
        per_row = np.maximum(self.quantile * diff, (self.quantile - 1) * diff).sum(axis=1)
        return weighted_mean(per_row, weight)

    def __repr__(self):
        return f"Quantile(quantile={self.quantile!r})"


class _LogLinkLoss(SquaredError):
    """A loss of a positive target with the log link: the prediction is
    ``exp(raw)``. Subclasses give the half deviance ``_deviance(raw, y)`` in
    torch and NumPy (zero at ``raw = log y``) and its derivatives."""

    link = LogLink()

    def _half_deviance(self, raw, target, xp):  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, output, target):
        return self._half_deviance(output, target, torch).mean(dim=1)

    def mean(self, raw, target, weight):
        per_row = self._half_deviance(raw, target, np).sum(axis=1)
        return weighted_mean(per_row, weight)

    def standardization(self, y, weight):
        """No centre, and the weighted mean target as the scale: the model
        fits ``y / scale`` (a shift of the raw output by ``log(scale)``)."""
        self.check_target(y)
        scale = np.average(y, axis=0, weights=weight)
        return np.zeros(y.shape[1]), np.where(scale > 0, scale, 1.0)

    def initial_prediction(self, total, weight_sum):
        """The log of the weighted mean target."""
        return np.log(np.maximum(total / weight_sum, 1e-12))

    def teacher_targets(self, raw):
        """The teacher's predictions (``exp`` of its raw outputs)."""
        return np.exp(raw)


def _xlogy(x, y, xp):
    """``x * log(y)``, 0 where ``x == 0`` (NumPy or torch)."""
    return xp.xlogy(x, y) if xp is torch else scipy_xlogy(x, y)


class Poisson(_LogLinkLoss):
    """Half the Poisson deviance with the log link (counts, rates):
    ``exp(f) - y f + y log(y) - y``, averaged over the outputs of a row. The
    targets must be non-negative, and not all zero."""

    name = "poisson"

    def _half_deviance(self, raw, target, xp):
        return xp.exp(raw) - target * raw + _xlogy(target, target, xp) - target

    def gradients(self, raw, target, weight):
        mu = np.exp(raw)
        return (mu - target) * weight[:, None], np.maximum(mu, 1e-6) * weight[:, None]

    def check_domain(self, y, name="y"):
        if np.any(y < 0):
            raise ValueError(
                f"loss='poisson' needs non-negative targets; {name} has negative values.")

    def check_target(self, y, name="y"):
        self.check_domain(y, name)
        if not np.all(np.sum(y, axis=0) > 0):
            raise ValueError(
                f"loss='poisson' needs targets whose sum is positive; {name} sums to 0.")


class Gamma(_LogLinkLoss):
    """Half the Gamma deviance with the log link (positive, skewed amounts):
    ``y exp(-f) + f - log(y) - 1``, averaged over the outputs of a row. The
    targets must be positive."""

    name = "gamma"

    def _half_deviance(self, raw, target, xp):
        return target * xp.exp(-raw) + raw - xp.log(target) - 1

    def gradients(self, raw, target, weight):
        ratio = target * np.exp(-raw)
        return (1 - ratio) * weight[:, None], np.maximum(ratio, 1e-6) * weight[:, None]

    def check_domain(self, y, name="y"):
        if not np.all(y > 0):
            raise ValueError(f"loss='gamma' needs positive targets; {name} has values <= 0.")
        if np.any(y < _FLOAT32_TINY):
            raise ValueError(
                f"loss='gamma' needs targets the training precision (float32) represents: "
                f"{name} has values below {_FLOAT32_TINY:.3g}, float32's smallest normal "
                f"number (smallest: {np.min(y):.3g}). Rescale {name} (its unit).")

    def check_target(self, y, name="y"):
        self.check_domain(y, name)
        # the model fits y / mean(y): its smallest must stay a float32 number
        if np.any(np.min(y, axis=0) / np.max(y, axis=0) < _FLOAT32_TINY):
            raise ValueError(
                f"loss='gamma' needs targets the training precision (float32) represents "
                f"relative to their mean: {name}'s smallest value is less than "
                f"{_FLOAT32_TINY:.3g} times its largest. Clip the smallest values of {name}.")


#: The losses by name.
LOSSES = {cls.name: cls for cls in (CrossEntropy, SquaredError, AbsoluteError, Quantile,
                                    Poisson, Gamma)}


def as_loss(loss):
    """A :class:`Loss` from itself or its name (``"softmax"``, ``"squared"``,
    ``"absolute_error"``, ``"quantile"``, ``"poisson"``, ``"gamma"``)."""
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str) and loss in LOSSES:
        return LOSSES[loss]()
    raise ValueError(f"loss must be a Loss or one of {sorted(LOSSES)}, got {loss!r}.")

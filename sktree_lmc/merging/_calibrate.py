"""A merged regressor's mean set from one number per site: the mean calibration.

A merge without rows keeps its models' ensemble's mean only as well as the
probe rows stand for the data (``merge_estimators``' link correction), and
the ensemble's own mean over the training rows is off where the sites
predict each other's rows off (Poisson counts, 2 IID halves: up to 5 %). The
data's mean is the sum of the sites' target sums over their weight; the
merged model's mean over the data is the sum of its predictions' sums over
the sites' rows. Each site computes both sums on its own rows
(:func:`prediction_sums`, a few numbers: no row leaves the site), and
:func:`calibrate_mean` sets the merged model's target scale so that its
predictions sum to the targets' over all the rows: the log link's factor
(``loss="poisson"``, ``"gamma"``) or the identity link's shift
(``loss="squared_error"``).

This module uses the estimators' public predictions and their fitted
objective (``objective_``), and of the merge's glue only ``rewrap`` (a
Pipeline's last step replaced).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ._bridge import rewrap

__all__ = ["PredictionSums", "calibrate_mean", "has_mean_loss", "prediction_sums"]

#: Losses whose prediction is the target's mean (the calibration's premise), by their names
#: in the regressor's ``loss`` parameter and in the fitted objective.
_MEAN_LOSSES = {"squared": "squared_error", "poisson": "poisson", "gamma": "gamma"}


@dataclasses.dataclass(frozen=True)
class PredictionSums:
    """What one site reports for :func:`calibrate_mean`: sums over its rows.

    Made by :func:`prediction_sums`; sites' sums add up with ``+`` or
    :meth:`total`.

    Parameters
    ----------
    weight : float
        The rows' total sample weight (their number when unweighted).
    target : ndarray of shape (n_outputs,)
        The weighted sum of the targets.
    prediction : ndarray of shape (n_outputs,)
        The weighted sum of the model's predictions.
    model : str
        A fingerprint of the model that predicted (its parameters and target
        scale): :func:`calibrate_mean` refuses sums of another model.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import SoftTreeEnsembleRegressor, PredictionSums, prediction_sums
    >>> X = np.random.RandomState(0).normal(size=(100, 3)); y = X[:, 0] + 2.0
    >>> model = SoftTreeEnsembleRegressor(n_estimators=4, max_epochs=2).fit(X, y)
    >>> sums = [prediction_sums(model, X[:60], y[:60]), prediction_sums(model, X[60:], y[60:])]
    >>> PredictionSums.total(sums).weight
    100.0
    """

    weight: float
    target: np.ndarray
    prediction: np.ndarray
    model: str

    def __add__(self, other):
        if not isinstance(other, PredictionSums):
            return NotImplemented
        if other.model != self.model:
            raise ValueError("These sums were computed with different models; every site "
                             "must predict with the same (merged) model.")
        return PredictionSums(self.weight + other.weight, self.target + other.target,
                              self.prediction + other.prediction, self.model)

    @classmethod
    def total(cls, sums):
        """The sum of the sites' sums.

        Parameters
        ----------
        sums : sequence of PredictionSums
            One per site, all computed with the same model.

        Returns
        -------
        total : PredictionSums
            Their sum.
        """
        sums = list(sums)
        if not sums or not all(isinstance(s, PredictionSums) for s in sums):
            raise TypeError("sums must be a PredictionSums or a non-empty sequence of them "
                            "(what prediction_sums returns at each site).")
        total = sums[0]
        for s in sums[1:]:
            total = total + s
        return total


def _regressor(estimator, what):
    """The soft tree regressor of ``estimator`` (a Pipeline's last step),
    fitted, with a loss whose prediction is a mean."""
    final = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    if "merged_" in vars(final) and "objective_" not in vars(final):
        raise TypeError(f"{what} takes a soft tree regressor: a fitted ShardedSoftTreeEnsemble "
                        "calibrates its merged model itself (pass its merged_ to recalibrate "
                        "that on other rows).")
    check_is_fitted(final, "objective_")
    objective = final.objective_
    loss = getattr(objective, "loss", None)
    if loss is None or not hasattr(objective, "y_scale"):
        raise TypeError(f"{what} needs a fitted SoftTreeEnsembleRegressor (or a Pipeline "
                        f"ending in one), got {type(final).__name__}.")
    if loss.name not in _MEAN_LOSSES:
        raise ValueError(
            f"{what} sets the mean of the predictions, which a model fitted with "
            f"loss={getattr(final, 'loss', loss.name)!r} does not predict; it applies to "
            f"loss='squared_error', 'poisson' and 'gamma'.")
    return final


def has_mean_loss(estimator):
    """Whether ``estimator`` (fitted) is a regressor whose loss predicts the
    mean, the models :func:`calibrate_mean` calibrates."""
    loss = getattr(getattr(estimator, "objective_", None), "loss", None)
    return (loss is not None and hasattr(estimator.objective_, "y_scale")
            and loss.name in _MEAN_LOSSES)


def _fingerprint(final):
    """A digest of the regressor's parameters and target standardization."""
    digest = hashlib.sha1()
    params = final.tree_params_
    arrays = [params.split_weight, params.split_bias, params.leaf_value, params.additive,
              final.objective_.y_mean, final.objective_.y_scale]
    for array in arrays:
        if array is not None:
            digest.update(np.ascontiguousarray(np.asarray(array, dtype=np.float64)).tobytes())
    return digest.hexdigest()


def prediction_sums(estimator, X, y, sample_weight=None):
    """Sums over one site's rows that :func:`calibrate_mean` combines.

    Runs where the rows are (a site, a shard, a dask worker): only the
    returned sums leave it.

    Parameters
    ----------
    estimator : fitted SoftTreeEnsembleRegressor or Pipeline
        The model to calibrate (a merged one, say), with
        ``loss="squared_error"``, ``"poisson"`` or ``"gamma"``.
    X : array-like of shape (n_samples, n_features)
        The site's rows.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Their targets.
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights (None: 1 each).

    Returns
    -------
    sums : PredictionSums
        The rows' total weight, and the weighted sums of the targets and of
        the model's predictions, per output.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import SoftTreeEnsembleRegressor, prediction_sums
    >>> X = np.random.RandomState(0).normal(size=(100, 3)); y = X[:, 0] + 2.0
    >>> model = SoftTreeEnsembleRegressor(n_estimators=4, max_epochs=2).fit(X, y)
    >>> sums = prediction_sums(model, X, y)
    >>> sums.weight, bool(np.isclose(sums.target[0], y.sum()))
    (100.0, True)
    """
    final = _regressor(estimator, "prediction_sums")
    y2 = np.asarray(y, dtype=np.float64)
    if y2.ndim == 1:
        y2 = y2[:, None]
    if y2.ndim != 2 or y2.shape[1] != final.n_outputs_:
        raise ValueError(f"y has {y2.shape[1] if y2.ndim == 2 else y2.shape} outputs; the "
                         f"model predicts {final.n_outputs_}.")
    if not np.all(np.isfinite(y2)):
        raise ValueError("y contains NaN or infinite values.")
    prediction = np.asarray(estimator.predict(X), dtype=np.float64).reshape(len(y2), -1) \
        if len(y2) else np.zeros((0, y2.shape[1]))
    if sample_weight is None:
        w = np.ones(len(y2))
    else:
        w = column_or_1d(np.asarray(sample_weight, dtype=np.float64))
        if len(w) != len(y2) or np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError("sample_weight must hold one finite, non-negative weight per row "
                             f"of y ({len(y2)}).")
    return PredictionSums(float(w.sum()), w @ y2, w @ prediction, _fingerprint(final))


def calibrate_mean(estimator, sums):
    """The model with its mean prediction set to the targets' mean.

    The mean is over the rows the sums were computed on. A merge of regressors trained apart keeps their ensemble's mean only
    approximately (see :func:`merge_estimators`); with one :func:`prediction_sums`
    per site, computed with the merged model on that site's rows, the calibrated
    model's predictions sum to the targets' over all the sites' rows, exactly.
    ``loss="poisson"`` and ``"gamma"`` (the log link) multiply every prediction by
    one factor per output, ``loss="squared_error"`` shifts it by one
    amount: the ranking of the rows, and so the deviance's shape, is kept.

    Parameters
    ----------
    estimator : fitted SoftTreeEnsembleRegressor or Pipeline
        The model the sums were computed with.
    sums : PredictionSums or sequence of PredictionSums
        One per site (added up), or their total.

    Returns
    -------
    calibrated : estimator or Pipeline
        A new fitted model (``estimator`` is unchanged) whose ``y_mean_``
        (identity link) or ``y_scale_`` (log link) is set from the sums.

    Raises
    ------
    TypeError
        If ``estimator`` is not a fitted regressor, or ``sums`` not
        :class:`PredictionSums`.
    ValueError
        If the sums were computed with another model, their weight is not
        positive, or (log link) a target or prediction sum is not positive.

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import (SoftTreeEnsembleRegressor, calibrate_mean, merge_estimators,
    ...                         prediction_sums)
    >>> rng = np.random.RandomState(0)
    >>> X = rng.normal(size=(400, 3)); y = rng.poisson(np.exp(X[:, 0]))
    >>> sites = [SoftTreeEnsembleRegressor(loss="poisson", n_estimators=8, max_epochs=5,
    ...                                    random_state=k).fit(X[k::2], y[k::2])
    ...          for k in (0, 1)]
    >>> merged = merge_estimators(sites)
    >>> sums = [prediction_sums(merged, X[k::2], y[k::2]) for k in (0, 1)]
    >>> calibrated = calibrate_mean(merged, sums)
    >>> bool(np.isclose(calibrated.predict(X).mean(), y.mean()))
    True
    """
    final = _regressor(estimator, "calibrate_mean")
    total = sums if isinstance(sums, PredictionSums) else PredictionSums.total(sums)
    if total.model != _fingerprint(final):
        raise ValueError("These sums were computed with another model: compute them with "
                         "prediction_sums(model, ...) of the model you calibrate.")
    if not total.weight > 0:
        raise ValueError(f"The sums' total weight is {total.weight}; it must be positive.")
    objective = final.objective_
    link = objective.loss.link
    target = np.asarray(total.target, dtype=np.float64)
    prediction = np.asarray(total.prediction, dtype=np.float64)
    if link.name == "log" and not (np.all(target > 0) and np.all(prediction > 0)):
        raise ValueError(
            f"loss={getattr(final, 'loss', objective.loss.name)!r} scales the predictions "
            f"by the ratio of the sums, which must be positive (targets {target}, "
            f"predictions {prediction}).")
    mean, scale = link.calibrated(np.asarray(objective.y_mean, dtype=np.float64),
                                  np.asarray(objective.y_scale, dtype=np.float64),
                                  target, prediction, total.weight)
    new = copy.deepcopy(final)
    new.objective_ = objective.replace(y_mean=mean, y_scale=scale)
    return rewrap(estimator, new)

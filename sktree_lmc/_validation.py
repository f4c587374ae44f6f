"""Checks of the estimators' inputs and settings, shared by the package.

Parameter constraints that scikit-learn's validation lacks (numbers that are
not booleans), the float32 range of the training precision, the seeds of
private generators, and the checks of what a fit receives besides its data
(scores of a scorer, ``partial_fit``'s classes, a given encoder).

Nothing here imports the estimators.
"""

from __future__ import annotations

import copy
import re
from numbers import Real

import numpy as np
import torch
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import (
    _check_sample_weight,
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from .encoding._encoding import TabularEncoder, encoders_differ, fit_encoding, to_columns
from .model._inputs import Inputs
from .training._objective import FLOAT32_MAX as _FLOAT32_MAX
from .training._objective import check_float32_range as _check_float32_range  # noqa: F401
from .training._objective import rescaled_weights as _rescaled_weights
from .training._training import _validation_split

__all__: list = []


class _NumberInterval(Interval):
    """An :class:`~sklearn.utils._param_validation.Interval` that rejects
    booleans: ``batch_size=True`` is a mistake, not ``batch_size=1``."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


#: Upper bound of ``learning_rate`` and ``split_init``: larger values overflow
#: float32 in Adam's first step (``learning_rate / (1 - beta1)``) or in the
#: initialization itself.
_MAX_SCALE = 1e30


def _torch_seed(random_state, offset=0):
    """A seed for a private :class:`torch.Generator`, without touching global state.

    An int or a ``RandomState`` instance gives a reproducible seed (sklearn's
    convention); ``None`` draws fresh entropy from the operating system rather
    than from NumPy's global generator, so that ``fit`` never advances
    ``np.random``'s state (nor torch's: only private generators are used).
    A nonzero ``offset`` (the epochs already run by a warm-started fit) mixes
    into the seed, so that a continued fit does not replay the minibatch
    order of the first one.
    """
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    rng = check_random_state(random_state)
    seed = int(rng.randint(np.iinfo(np.int32).max))
    if offset:
        seed = int(np.random.SeedSequence([seed, int(offset)]).generate_state(1)[0])
    return seed


def _check_score(value, scoring):
    """A validation score as a finite float, or a ValueError naming the scorer
    (a scorer returning NaN, None, an array or a string would otherwise end
    early stopping silently or in a raw error)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.ndarray)):
        raise ValueError(
            f"scoring={scoring!r} returned {value!r} ({type(value).__name__}); early "
            "stopping needs a finite number."
        )
    array = np.asarray(value)
    if array.ndim != 0 or not np.issubdtype(array.dtype, np.number):
        raise ValueError(
            f"scoring={scoring!r} returned an array of shape {array.shape}; early stopping "
            "needs a single finite number."
        )
    if not np.isfinite(array):
        raise ValueError(
            f"scoring={scoring!r} returned {float(array)} on the validation rows; early "
            "stopping needs a finite number (use a scorer defined on every split, or "
            "scoring='loss')."
        )
    return float(array)


def _check_classes(classes):
    """``partial_fit``'s ``classes``: sorted unique labels, at least two, none
    of them missing (NaN or None)."""
    classes = np.asarray(classes)
    if classes.ndim != 1:
        raise ValueError(f"classes must be one-dimensional, got shape {classes.shape}.")
    missing = [c for c in classes.tolist() if c is None or (isinstance(c, float) and c != c)]
    if missing:
        raise ValueError(f"classes contains a missing value ({missing[0]!r}); a class must "
                         "be a label, not NaN or None.")
    classes = np.unique(classes)
    if len(classes) < 2:
        raise ValueError(
            f"Classifier can't train when only one class is present: classes={classes.tolist()}."
        )
    return classes


def _check_given_encoder(encoder, columns, names):
    """A deep copy of a fitted :class:`TabularEncoder` given to a fit (the
    ``encoder`` parameter, or a sharded fit's shared encoder), checked against
    the training columns: their count, and their names when both have them.
    The copy becomes the model's ``encoder_``: refitting the user's object
    later does not change the fitted model."""
    if not isinstance(encoder, TabularEncoder):
        raise TypeError(f"encoder must be a fitted TabularEncoder, got {type(encoder).__name__}.")
    if not hasattr(encoder, "n_features_in_"):
        raise ValueError("encoder must be a fitted TabularEncoder (fit it, or build it with "
                         "TabularEncoder.from_summaries); it is not fitted.")
    if encoder.n_features_in_ != len(columns):
        raise ValueError(
            f"The encoder given expects {encoder.n_features_in_} columns, got {len(columns)}."
        )
    enc_names = getattr(encoder, "names_", None)
    if names is not None and enc_names is not None and list(enc_names) != list(names):
        differ = [str(a) for a, b in zip(names, enc_names) if a != b]
        raise ValueError(
            f"The encoder given was fitted on other columns: X's columns {differ[:5]} differ "
            "from the encoder's feature names."
        )
    return copy.deepcopy(encoder)


# -- the input of a fitted estimator -----------------------------------------------------------
def named_error(exc, name, new_name):
    """The message of ``exc`` (about ``name``: scikit-learn's checks say "y"
    or "X") with ``name`` as a word replaced by ``new_name`` (``y_val``),
    and the rows that disagree in number named."""
    message = re.sub(rf"\b{name}\b", new_name, str(exc))
    if "inconsistent numbers of samples" in message:
        message = f"X_val and y_val: {message}"
    return message


def check_encoded(X):
    """Check encoded rows: finite in float32 (the training precision)."""
    if not np.isfinite(X).all():
        raise ValueError(
            "X contains values beyond the float32 range (largest magnitude "
            f"> {_FLOAT32_MAX:.3g}); the model trains in float32. Rescale X first, "
            "or use a numeric_encoding other than 'none'."
        )
    return X


def encoded_rows(encoder, columns):
    """The encoded rows of ``columns``: an :class:`Inputs` of the trees'
    features (checked) and the additive term's codes (None without one),
    each its own array (:meth:`TabularEncoder.encode`; the codes made
    row-major here, as training gathers them by rows)."""
    X, codes = encoder.encode(columns)
    return Inputs(check_encoded(X), None if codes is None else np.ascontiguousarray(codes))


def checked_columns(estimator, X, y="no_validation", *, reset):
    """``X`` split into columns for the encoder, with the mask of those
    categorical by dtype (:func:`~sktree_lmc.encoding._encoding.to_columns`:
    first, for scikit-learn's errors of a 1-D or empty ``X``, before the
    features are counted), and checked against ``estimator`` (``validate_data``:
    its number and names of features, set when ``reset``; ``y``, when given,
    for the error of a missing one): the input of every fit and prediction."""
    columns, by_dtype = to_columns(X)
    validate_data(estimator, X, y, reset=reset, skip_check_array=True)
    return columns, by_dtype


def input_columns(estimator, X):
    """Prediction input ``X`` validated against the fitted ``estimator``
    (feature count and names), split into columns for its encoder."""
    check_is_fitted(estimator, "tree_params_")
    return checked_columns(estimator, X, reset=False)[0]


def encoded_input(estimator, X):
    """``X`` validated and encoded by the fitted ``estimator``'s encoder: an
    :class:`Inputs` of the trees' float32 features ``(n_samples,
    n_encoded_features)`` and the additive term's int32 codes (None
    without one)."""
    return encoded_rows(estimator.encoder_, input_columns(estimator, X))


def fit_encoder(columns, by_dtype, names=None, *, given=None, sample_weight=None, params):
    """The input encoder fitted on the training columns (named ``names``;
    rows of zero ``sample_weight`` left out) with the encoding settings of
    the hyperparameters ``params`` (``get_params()``), or the fitted one
    ``given`` (checked against the columns)."""
    if given is not None:
        return _check_given_encoder(given, columns, names)
    return fit_encoding(columns, by_dtype, names, settings=params, sample_weight=sample_weight)


def validation_rows(estimator, objective, y, target, validation):
    """The user's validation rows checked against the fit of ``estimator``
    (features, labels or targets) and encoded with its encoder: ``(X_val,
    y_val, target_val, sample_weight_val)``, the targets in the encoding of
    ``target`` (``objective``'s)."""
    try:
        columns = to_columns(validation.X)[0]
    except ValueError as exc:
        raise ValueError(named_error(exc, "X", "X_val")) from None
    if len(columns) != estimator.n_features_in_:
        raise ValueError(
            f"X_val has {len(columns)} features, but this estimator is fitted on X of "
            f"{estimator.n_features_in_} features (its encoder's input). In a Pipeline, X_val "
            "(passed as "
            "fit(X, y, <step>__X_val=...)) is not transformed by the steps before this "
            "estimator: pass it transformed by them, pipeline[:-1].transform(X_val)."
        )
    try:
        validate_data(estimator, validation.X, reset=False, skip_check_array=True)
    except ValueError as exc:
        raise ValueError(named_error(exc, "X", "X_val")) from None
    X_val = encoded_rows(estimator.encoder_, columns)
    try:  # y_val need only be in the loss's domain (all-zero Poisson counts are valid)
        y_val = objective.check_y(validation.y, name="y_val", training=False)
        check_consistent_length(X_val.X, y_val)
        target_val = np.asarray(objective.fitted_targets(y_val), dtype=target.dtype)
    except ValueError as exc:
        raise ValueError(named_error(exc, "y", "y_val")) from None
    try:
        weight = _check_sample_weight(validation.sample_weight, X_val.X, dtype=np.float64,
                                      ensure_non_negative=True)
    except ValueError as exc:  # scikit-learn's message names sample_weight
        raise ValueError(f"sample_weight_val: {exc}") from None
    weight = _rescaled_weights(weight * objective.validation_weights(y, y_val))
    if not weight.sum() > 0:
        raise ValueError(
            "sample_weight_val (times class_weight, for a classifier) sums to zero: "
            "there is nothing to validate on."
        )
    return X_val, y_val, target_val, weight


def fit_rows(estimator, X, y, sample_weight, *, objective, warm=False, plan):
    """Validate the training data of ``estimator``'s fit and encode it
    (with its fitted ``encoder_`` when ``warm``, else with an encoder fitted
    here, or the fitted one of ``plan`` or of the ``encoder`` parameter);
    ``objective`` checks and encodes the targets. Returns the encoded ``X``
    (an :class:`Inputs`: the trees' features and the additive codes),
    the validated ``y``, the encoded target, the float64 sample weights (times
    the class weights), the number of outputs and the encoder. With ``warm``, the data must match the fitted
    model (features, classes or targets)."""
    # y goes to validate_data for its error on y=None
    columns, by_dtype = checked_columns(estimator, X, y, reset=not warm)
    # float64 and unscaled: the gradient-boosted trees (split_init="boosting", the
    # teacher) rescale them to a mean of 1 over the rows of all shards (a rescaling
    # here would differ per shard), and _FitTensors to a largest weight of 1.
    y, target, sample_weight, n_outputs = objective.training_targets(
        y, sample_weight, columns[0] if columns else X, warm=warm, classes=plan.classes)
    encoder = estimator.encoder_ if warm else None
    if not warm:  # rows of zero weight do not shape the encoder
        params = estimator.get_params(deep=False)
        given = plan.encoder if plan.encoder is not None else params["encoder"]
        encoder = fit_encoder(
            columns, by_dtype, getattr(estimator, "feature_names_in_", None), given=given,
            sample_weight=sample_weight, params=params)
    X = encoded_rows(encoder, columns)
    return X, y, target, sample_weight, n_outputs, encoder


def check_warm_start(estimator, continued, plan):
    """Whether a fit of ``estimator`` continues from the fitted parameters (``continued``
    and fitted); raises a clear error when the hyperparameters (or the
    encoder of ``plan`` or of ``encoder``) no longer describe them."""
    if not (continued and hasattr(estimator, "tree_params_")):
        return False
    fitted = (estimator.architecture_.name, estimator.architecture_.depth, estimator.tree_params_.n_trees)
    wanted = (estimator.arch, estimator.depth, estimator.n_estimators)
    if fitted != wanted:
        raise ValueError(
            "warm_start=True continues from the fitted parameters, but (arch, depth, "
            f"n_estimators) changed from {fitted} to {wanted}. Set warm_start=False to "
            "fit a new model."
        )
    enc = estimator.encoder_
    given = plan.encoder if plan.encoder is not None else estimator.encoder
    if given is not None:
        if encoders_differ(enc, given):
            raise ValueError(
                "warm_start=True continues with the fitted input encoding, but the "
                f"encoder given differs from it: {encoders_differ(enc, given)}. Set "
                "warm_start=False to fit a new model."
            )
        return True
    fitted = (enc.numeric_encoding, enc.n_bins, enc.max_categories,
              enc.additive_bins)
    wanted = (estimator.numeric_encoding, estimator.n_bins, estimator.max_categories, estimator.additive_bins)
    if fitted != wanted:
        raise ValueError(
            "warm_start=True continues with the fitted input encoding, but "
            f"(numeric_encoding, n_bins, max_categories, additive_bins) changed from "
            f"{fitted} to {wanted}. Set warm_start=False to fit a new model."
        )
    return True


def split_rows(estimator, X_raw, y, arrays, *, generator, recipe, plan, objective):
    """The rows of ``estimator``'s fit and their roles: ``((X, target, sample_weight,
    train_idx, val_idx), scored)`` from the encoded ``arrays`` ``(X, target,
    sample_weight)`` (``X``: an :class:`Inputs`). Without ``plan.validation``, early stopping holds out
    ``validation_fraction`` of the training rows (one draw from
    ``generator``, or from a generator of ``plan.split_seed``); with it,
    the user's validation rows, encoded with the fitted encoder, are
    appended after the training rows, which all train. ``scored``: a
    function that returns the raw validation rows ``(X, y,
    sample_weight)`` a ``scoring`` other than ``"loss"`` is computed on."""
    X, target, sample_weight = arrays
    validation = plan.validation
    if validation is None:
        if plan.split_seed is not None:
            generator = torch.Generator().manual_seed(plan.split_seed)
        train_idx, val_idx = _validation_split(
            X.n_rows, estimator.validation_fraction if recipe.early_stopping else None,
            generator, sample_weight)

        def scored():  # indexed only when a scorer needs the raw rows
            return _safe_indexing(X_raw, val_idx), _safe_indexing(y, val_idx), None

        return (X, target, sample_weight, train_idx, val_idx), scored
    X_val, y_val, target_val, weight_val = validation_rows(estimator, objective, y, target,
                                                           validation)
    n, n_val = X.n_rows, X_val.n_rows
    # the validation weights on the training weights' scale: the largest weight
    # over all rows (which _FitTensors divides by) is the training rows' own
    weight_val = weight_val * (sample_weight.max() / weight_val.max())
    return ((Inputs.concatenate([X, X_val]), np.concatenate([target, target_val]),
             np.concatenate([sample_weight, weight_val]), np.arange(n),
             np.arange(n, n + n_val)),
            lambda: (validation.X, y_val, validation.sample_weight))

"""Checks of the estimators' inputs and settings, shared by the package.

Parameter constraints that scikit-learn's validation lacks (numbers that are
not booleans), the float32 range of the training precision, the seeds of
private generators, and the checks of what a fit receives besides its data
(scores of a scorer, ``partial_fit``'s classes, a given encoder).

Nothing here imports the estimators.
"""

from __future__ import annotations

import copy
from numbers import Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval

from .encoding._encoding import TabularEncoder

__all__: list = []


class _NumberInterval(Interval):
    """An :class:`~sklearn.utils._param_validation.Interval` that rejects
    booleans: ``batch_size=True`` is a mistake, not ``batch_size=1``."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Upper bound of ``learning_rate`` and ``split_init``: larger values overflow
#: float32 in Adam's first step (``learning_rate / (1 - beta1)``) or in the
#: initialization itself.
_MAX_SCALE = 1e30


def _check_float32_range(array, name):
    """Raise a ValueError if ``array`` (finite, validated) holds values that
    float32, the training precision, cannot represent (they would become
    infinite and turn every parameter into NaN)."""
    if array.size and np.abs(array).max() > _FLOAT32_MAX:
        raise ValueError(
            f"{name} contains values beyond the float32 range (largest magnitude "
            f"{np.abs(array).max():.3g} > {_FLOAT32_MAX:.3g}); the model trains in float32. "
            f"Rescale {name} first."
        )


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


#: Sample weights whose largest lies outside ``[2**-_WEIGHT_EXPONENT,
#: 2**_WEIGHT_EXPONENT]`` are rescaled (see :func:`_rescaled_weights`).
_WEIGHT_EXPONENT = 64


def _rescaled_weights(sample_weight):
    """``sample_weight`` (float64, non-negative) multiplied by a power of two
    that brings its largest value into ``[0.5, 1)`` when that value is below
    ``2**-64`` or above ``2**64``, else as it is. Only the ratios of the
    weights matter, and a power of two keeps them exactly; subnormal weights
    (``1e-310``) would otherwise overflow ``1 / sum`` in the gradient-boosted
    teacher's rescaling and end the fit in a NaN loss."""
    largest = float(sample_weight.max(initial=0.0))
    if largest > 0 and not 2.0 ** -_WEIGHT_EXPONENT <= largest <= 2.0 ** _WEIGHT_EXPONENT:
        exponent = np.frexp(largest)[1]
        return np.ldexp(sample_weight, -exponent)
    return sample_weight

"""Measuring linear mode connectivity: interpolation curves and barriers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, r2_score
from sklearn.utils.validation import _num_samples

from ._bridge import check_compatible, combine, split_pipelines, transform_rows
from ._merge import ModelAligner, check_aligner, fit_aligner
from .._validation import _check_float32_range

__all__ = ["InterpolationCurve", "InterpolationCurveDisplay", "interpolation_curve", "lmc_barrier"]

#: Metrics computed along a curve, and whether higher is better.
CLASSIFIER_METRICS = {"accuracy": True, "log_loss": False}
REGRESSOR_METRICS = {"r2": True, "mse": False}


def _as_real_array(values, name):
    """``values`` as a float64 array; a TypeError names ``name`` unless they
    are real numbers (booleans, complex numbers and strings are not)."""
    try:
        array = np.asarray(values)
    except ValueError as exc:  # ragged nested sequences
        raise TypeError(f"{name} must be an array of real numbers: {exc}") from None
    if array.dtype.kind == "O":
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an array of real numbers: {exc}") from None
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an array of real numbers, got dtype {array.dtype}.")
    return array.astype(np.float64)


def _check_lambdas(lambdas, n_values=None):
    """Validated interpolation weights: a 1-D float array of distinct finite
    values in [0, 1] that contains both endpoints 0 and 1, in any order.

    ``n_values``, when given, is the length the array must have (that of the
    curve's values).
    """
    if isinstance(lambdas, str):
        raise TypeError(f"lambdas must be an array of numbers, got the string {lambdas!r}.")
    lam = _as_real_array(lambdas, "lambdas")
    if lam.ndim != 1:
        raise ValueError(f"lambdas must be a 1-D array, got an array of shape {lam.shape}.")
    if n_values is not None and len(lam) != n_values:
        raise ValueError(
            f"lambdas and values must have the same length, got {len(lam)} and {n_values}."
        )
    if not np.isfinite(lam).all():
        raise ValueError("lambdas must be finite; got NaN or infinity.")
    if lam.min(initial=0.0) < 0 or lam.max(initial=0.0) > 1:
        raise ValueError(f"lambdas must lie in [0, 1], got values from {lam.min()} to {lam.max()}.")
    if not (np.any(lam == 0) and np.any(lam == 1)):
        raise ValueError(
            "lambdas must contain both endpoints 0 and 1 (the barrier is measured against "
            "the straight line between the two models)."
        )
    if len(np.unique(lam)) != len(lam):
        raise ValueError("lambdas must not contain repeated values.")
    return lam


def _curve_lambdas(lambdas):
    """The ``lambdas`` of :func:`interpolation_curve`: an int ``n >= 2`` gives
    ``n`` evenly spaced points in [0, 1]; an array is checked by
    :func:`_check_lambdas`."""
    if isinstance(lambdas, (bool, np.bool_)):
        raise TypeError(f"lambdas must be an int >= 2 or an array of numbers, got {lambdas!r}.")
    if isinstance(lambdas, Integral):
        if lambdas < 2:
            raise ValueError(
                f"lambdas must be at least 2 (the two endpoints), got lambdas={lambdas}."
            )
        return np.linspace(0.0, 1.0, int(lambdas))
    if np.ndim(lambdas) == 0 and not isinstance(lambdas, str):
        raise TypeError(
            f"lambdas must be an int >= 2 or an array of numbers in [0, 1], got {lambdas!r}."
        )
    return _check_lambdas(lambdas)


def lmc_barrier(values, lambdas=None, *, greater_is_better=True):
    """The barrier of an interpolation curve (Eq. 1 of the paper).

    With ``C(lam)`` the metric of the model interpolated at ``lam`` (``lam=0``
    one endpoint, ``lam=1`` the other), the barrier is::

        max over lam of  (1 - lam) C(0) + lam C(1) - C(lam)     (higher is better)
        max over lam of  C(lam) - (1 - lam) C(0) - lam C(1)     (lower is better)

    i.e. how far the curve dips below (rises above, for a loss) the straight
    line between its endpoints. It is 0 at the endpoints, so never negative.

    Parameters
    ----------
    values : array-like of shape (n_lambdas,) or InterpolationCurve
        Metric along the curve; or a curve, whose ``accuracy`` (classifier) or
        ``r2`` (regressor) values are used.
    lambdas : array-like of shape (n_lambdas,), default=None
        Interpolation weights of ``values``: distinct values in [0, 1], in any
        order, that include both endpoints 0 and 1; evenly spaced from 0 to 1
        when None.
    greater_is_better : bool, default=True
        False for losses, where the subtraction is reversed.

    Returns
    -------
    barrier : float
        The largest gap to the straight line, at least 0, in the units of
        ``values`` (percentage points for the accuracies of a curve, which
        are in percent).

    Raises
    ------
    ValueError
        If ``values`` is not a finite 1-D curve of at least two points, or
        ``lambdas`` does not match it (see above).

    Examples
    --------
    >>> from sktree_lmc import lmc_barrier
    >>> lmc_barrier([80.0, 70.0, 84.0])  # midpoint 82 expected, 70 observed
    12.0
    >>> lmc_barrier([0.4, 0.9, 0.5], greater_is_better=False)
    0.45
    >>> lmc_barrier([84.0, 70.0, 80.0], lambdas=[1.0, 0.5, 0.0])  # any order
    12.0
    """
    if isinstance(values, InterpolationCurve):
        metric = "accuracy" if "accuracy" in values.scores else "r2"
        return values.barrier(metric)
    if not isinstance(greater_is_better, (bool, np.bool_)):
        raise TypeError(f"greater_is_better must be a bool, got {greater_is_better!r}.")
    values = _as_real_array(values, "values")
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(
            f"values must be a 1-D curve with at least two points, got shape {values.shape}."
        )
    if not np.isfinite(values).all():
        raise ValueError("values must be finite; the curve contains NaN or infinity.")
    if lambdas is None:
        lambdas = np.linspace(0.0, 1.0, len(values))
    lambdas = _check_lambdas(lambdas, len(values))
    start, end = values[lambdas == 0][0], values[lambdas == 1][0]
    line = (1 - lambdas) * start + lambdas * end
    with np.errstate(over="ignore", invalid="ignore"):
        gap = line - values if greater_is_better else values - line
    barrier = float(max(gap.max(), 0.0))
    if not np.isfinite(barrier):
        raise ValueError("values are too large: the barrier overflows float64.")
    return _round_to_scale(barrier, float(np.abs(values).max()))


def _round_to_scale(barrier, scale):
    """``barrier`` rounded to 12 significant digits of ``scale`` (the largest
    ``|value|`` of the curve), which removes the rounding noise of the
    straight line (e.g. a flat curve gives exactly 0, ``0.45`` is not
    ``0.44999999999999996``) at any scale: a fixed 12 decimals rounded every
    barrier of a curve whose values are below about 1e-12 to 0. Python's
    ``round`` is exact, and does not overflow for huge values."""
    if barrier == 0.0 or scale == 0.0:
        return barrier
    return round(barrier, 12 - math.floor(math.log10(scale)))


@dataclass
class InterpolationCurve:
    """Metrics of the models interpolated between two aligned ensembles.

    Returned by :func:`interpolation_curve`.

    Parameters
    ----------
    lambdas : ndarray of shape (n_lambdas,)
        Interpolation weights of the second model.
    scores : dict of str to ndarray of shape (n_lambdas,)
        Metric name to values: ``accuracy`` **in percent** (0-100, where
        the estimators' ``score`` gives a fraction) and ``log_loss`` for
        classifiers, ``r2`` and ``mse`` for regressors (as ``score``). The
        barriers of :meth:`barrier` are in the same units: accuracy barriers
        in percentage points.
    greater_is_better : dict of str to bool
        Direction of each metric.
    method, invariances : str
        How the second model was aligned.
    aligner : ModelAligner or None
        The fitted aligner (its ``alignments_[1]`` maps the second model onto
        the first).

    Examples
    --------
    >>> import numpy as np
    >>> from sktree_lmc import InterpolationCurve
    >>> curve = InterpolationCurve(np.linspace(0, 1, 3), {"accuracy": np.array([80.0, 75.0, 82.0])},
    ...                            {"accuracy": True})
    >>> curve.barrier("accuracy")  # the line is at 81 for lambda=0.5
    6.0
    """

    lambdas: np.ndarray
    scores: dict
    greater_is_better: dict
    method: str = "wm"
    invariances: str = "all"
    aligner: object = field(default=None, repr=False)

    def barrier(self, metric="accuracy"):
        """Barrier (Eq. 1) of ``metric`` along the curve.

        Parameters
        ----------
        metric : str, default="accuracy"
            A key of ``scores``.

        Returns
        -------
        float
            See :func:`lmc_barrier`; in the units of ``scores[metric]``
            (percentage points for ``"accuracy"``).
        """
        if metric not in self.scores:
            raise ValueError(f"Unknown metric {metric!r}; available: {sorted(self.scores)}.")
        return lmc_barrier(
            self.scores[metric], self.lambdas, greater_is_better=self.greater_is_better[metric]
        )


def interpolation_curve(a, b, X, y, *, lambdas=25, aligner="wm", X_align=None):
    """Evaluate the models on the segment between ``a`` and ``b`` aligned to ``a``.

    ``b`` is aligned once (see :class:`ModelAligner`); the model at ``lam`` has
    parameters ``(1 - lam) * a + lam * aligned(b)``.

    Parameters
    ----------
    a, b : fitted soft tree ensembles, or Pipelines ending with one
        Two compatible models (Pipelines with equal preprocessing, see
        :func:`merge_estimators`).
    X : array-like of shape (n_samples, n_features)
        Evaluation data.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Evaluation targets.
    lambdas : int or array-like, default=25
        Number of evenly spaced points in [0, 1] (at least 2; 25 as in the
        paper), or the points themselves: distinct values in [0, 1] that
        include 0 and 1, in any order.
    aligner : {"wm", "am", "naive"} or ModelAligner, default="wm"
        How ``b`` is aligned to ``a``, as in :func:`merge_estimators`. An
        aligner already fitted on ``[a, b]``, such as ``curve.aligner`` of an
        earlier curve, is reused: one alignment, several evaluation sets.
    X_align : array-like, default=None
        Data for activation matching; defaults to ``X``. Pass training data
        to keep test data out of the alignment.

    Returns
    -------
    InterpolationCurve
        The metrics at every ``lambdas`` point (accuracy in percent, unlike
        the fraction of ``score``; barriers in percentage points), and the
        fitted aligner.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, interpolation_curve
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=10, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> curve = interpolation_curve(a, b, X, y, lambdas=5)
    >>> curve.scores["accuracy"].shape, curve.barrier("accuracy") >= 0
    ((5,), True)
    >>> naive = interpolation_curve(a, b, X, y, lambdas=5, aligner="naive")
    >>> naive.invariances
    'none'
    >>> again = interpolation_curve(a, b, X[:100], y[:100], lambdas=5, aligner=curve.aligner)
    >>> again.aligner is curve.aligner  # the alignment is reused, not recomputed
    True
    """
    (a, b), head = split_pipelines([a, b])
    classifier = check_compatible([a, b])
    if X is None or y is None:
        raise ValueError(
            "interpolation_curve needs evaluation data: X and y must not be None."
        )
    try:
        if isinstance(X, (str, bytes)):
            raise TypeError
        n_rows = _num_samples(X)
    except TypeError:
        raise TypeError(
            f"X must be an array-like of shape (n_samples, n_features), got a {type(X).__name__}."
        ) from None
    if not classifier:
        if n_rows < 2:
            raise ValueError("X needs at least 2 samples for the r2 score of a regressor's curve.")
        if np.asarray(y).dtype.kind in "iuf":  # others are left to the scores' own checks
            _check_float32_range(np.asarray(y, dtype=np.float64), "y")
    lambdas = _curve_lambdas(lambdas)
    X_align = transform_rows(head, X if X_align is None else X_align)
    X = transform_rows(head, X)
    aligner = fit_aligner(aligner, [a, b], X_align)
    pa, pb = aligner.aligned_params([a, b])
    metrics = CLASSIFIER_METRICS if classifier else REGRESSOR_METRICS
    scores = {name: np.empty(len(lambdas)) for name in metrics}
    for i, lam in enumerate(lambdas):
        model = combine([a, b], [pa, pb], [1 - lam, lam], classifier=classifier)
        if classifier:
            proba = model.predict_proba(X)
            pred = model.classes_[proba.argmax(axis=1)]
            scores["accuracy"][i] = 100.0 * accuracy_score(y, pred)
            scores["log_loss"][i] = log_loss(y, proba, labels=model.classes_)
        else:
            pred = model.predict(X)
            scores["r2"][i] = r2_score(y, pred)
            scores["mse"][i] = mean_squared_error(y, pred)
    return InterpolationCurve(lambdas, scores, dict(metrics), aligner.method,
                              aligner.invariances, aligner)


class InterpolationCurveDisplay:
    """Plot of one or several interpolation curves, in the scikit-learn display style.

    Parameters
    ----------
    curves : dict of str to InterpolationCurve
        Label to curve.
    metric : str, default="accuracy"
        Metric to plot.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes of the plot.
    figure_ : matplotlib Figure
        Figure of the plot.
    lines_ : list of matplotlib Line2D
        One line per curve.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sktree_lmc import SoftTreeEnsembleClassifier, InterpolationCurveDisplay
    >>> X, y = make_classification(n_samples=200, random_state=0)
    >>> a, b = (SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=5, device="cpu",
    ...                                    random_state=s).fit(X, y) for s in (1, 2))
    >>> import matplotlib
    >>> matplotlib.use("Agg")  # no window: the figure is drawn off screen
    >>> disp = InterpolationCurveDisplay.from_estimators(
    ...     a, b, X, y, aligners=["naive", "wm"], lambdas=5)
    >>> [line.get_label().split(" (barrier")[0] for line in disp.lines_]
    ['naive (no alignment)', 'WM all invariances']
    >>> disp.ax_.get_ylabel()
    'accuracy (%)'
    """

    def __init__(self, curves, metric="accuracy"):
        self.curves = curves
        self.metric = metric

    def plot(self, ax=None, **line_kwargs):
        """Draw the curves.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure is created when None.
        **line_kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.plot`.

        Returns
        -------
        self : InterpolationCurveDisplay
            The display, with ``ax_``, ``figure_`` and ``lines_`` set.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise ImportError(
                "InterpolationCurveDisplay needs matplotlib: pip install matplotlib"
            ) from exc
        if ax is None:
            _, ax = plt.subplots()
        self.lines_ = []
        for label, curve in self.curves.items():
            barrier = curve.barrier(self.metric)
            (line,) = ax.plot(
                curve.lambdas, curve.scores[self.metric], marker="o", markersize=3,
                label=f"{label} (barrier {barrier:.3g})", **line_kwargs,
            )
            self.lines_.append(line)
        ax.set_xlabel(r"$\lambda$ (weight of model B)")
        ylabel = {"accuracy": "accuracy (%)"}.get(self.metric, self.metric)
        ax.set_ylabel(ylabel)
        ax.legend()
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimators(cls, a, b, X, y, *, aligners=None, metric="accuracy", ax=None,
                        **kwargs):
        """Compute the curves of ``a`` and ``b`` for several aligners and plot them.

        Parameters
        ----------
        a, b : fitted soft tree ensembles
            The two models.
        X, y : array-like
            Evaluation data.
        aligners : sequence of ("wm", "am", "naive" or ModelAligner), or dict, default=None
            One curve per aligner (see :func:`interpolation_curve`), labelled
            by its method and invariances, or a dict of label to aligner.
            None compares the invariance sets of weight matching:
            ``("naive", ModelAligner(invariances="perm"), "wm")``.
        metric : str, default="accuracy"
            Metric to plot.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs : dict
            Passed to :func:`interpolation_curve` (``lambdas``, ``X_align``).

        Returns
        -------
        display : InterpolationCurveDisplay
            The display, already plotted.
        """
        if aligners is None:
            aligners = ("naive", ModelAligner(invariances="perm"), "wm")
        if not isinstance(aligners, dict):
            aligners = {_label(check_aligner(al)): al for al in aligners}
        curves = {
            label: interpolation_curve(a, b, X, y, aligner=al, **kwargs)
            for label, al in aligners.items()
        }
        return cls(curves, metric=metric).plot(ax=ax)


def _label(aligner):
    """Legend label of an aligner: its method and invariances; naive averaging
    (no invariance) involves no matching method, so its label names none."""
    if aligner.invariances == "none":
        return "naive (no alignment)"
    names = {"perm": "tree permutation", "all": "all invariances"}
    return f"{aligner.method.upper()} {names[aligner.invariances]}"

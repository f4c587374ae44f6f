"""The device policy of the package: one place that turns a ``device`` setting
into a :class:`torch.device`.

Every ``device`` argument of the package (the estimators' hyperparameter,
:class:`~sktree_lmc.ModelAligner` and through it the merge layer, the
matching functions) accepts a string or a :class:`torch.device` and goes
through :func:`resolve_device` (fitting, aligning) or
:func:`prediction_device` (prediction of a fitted model), so that the same
settings give the same errors everywhere:

- ``"auto"`` is CUDA when available, else the CPU;
- a string torch does not parse, or another type, is a ``ValueError``
  (``TypeError`` for a non-string) naming ``device``;
- a CUDA device on a machine without CUDA (or an index beyond the visible
  GPUs), or ``"mps"`` without MPS, is a ``ValueError`` naming ``device``;
- a device that holds no data (``"meta"``: tensors with shapes only) is a
  ``ValueError`` naming ``device``, for fitting and prediction alike.
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["DEVICE_CONSTRAINT", "prediction_device", "resolve_device"]

#: ``_parameter_constraints`` entry of a ``device`` hyperparameter.
DEVICE_CONSTRAINT = [str, torch.device]

#: Device types whose tensors hold no data (shapes and dtypes only): nothing
#: can be fitted or predicted there.
_DATALESS = ("meta",)


def _parse(device):
    """``device`` as a :class:`torch.device` (``"auto"`` resolved), unchecked
    for availability; a device that holds no data is refused."""
    dev = _parse_name(device)
    if dev.type in _DATALESS:
        raise ValueError(
            f"device={_show(device)} holds no data (tensors on it have shapes but no "
            "values), so nothing can be fitted or predicted there; use 'cpu', 'cuda', "
            "'mps' or 'auto'."
        )
    return dev


def _parse_name(device):
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a str or a torch.device, got {type(device).__name__}: {device!r}."
        )
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(
            f"device={device!r} is not a device torch understands (for example 'cpu', "
            f"'cuda', 'cuda:1', 'mps' or 'auto'): {exc}"
        ) from None


def _unavailable(dev):
    """Why ``dev`` cannot be used on this machine, or None."""
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return "CUDA is not available"
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            return f"only {torch.cuda.device_count()} CUDA device(s) are visible"
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return "MPS is not available"
    return None


def resolve_device(device):
    """Turn a ``device`` setting into a :class:`torch.device` usable here.

    Parameters
    ----------
    device : str or torch.device
        ``"auto"`` (CUDA when available, else the CPU), a device string
        (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ...) or a device.

    Returns
    -------
    torch.device
        The device.

    Raises
    ------
    TypeError
        If ``device`` is neither a string nor a :class:`torch.device`.
    ValueError
        If the string is not a device torch understands, the device holds no
        data (``"meta"``), or it is not available on this machine.
    """
    dev = _parse(device)
    reason = _unavailable(dev)
    if reason is not None:
        raise ValueError(f"device={_show(device)} was requested but {reason} on this machine.")
    return dev


def prediction_device(device):
    """Device for prediction: like :func:`resolve_device`, but a GPU device
    that is not available falls back to the CPU with a warning, so that a
    model fitted on a GPU predicts after being loaded on a CPU-only machine.

    Parameters
    ----------
    device : str or torch.device
        The ``device`` hyperparameter of the fitted model.

    Returns
    -------
    torch.device
        The device to predict on.

    Raises
    ------
    TypeError, ValueError
        As :func:`resolve_device`, for a setting that names no device.
    """
    dev = _parse(device)
    reason = _unavailable(dev)
    if reason is not None:
        warnings.warn(
            f"device={_show(device)} but {reason} on this machine; predicting on the CPU.",
            UserWarning,
            stacklevel=4,
        )
        return torch.device("cpu")
    return dev


def _show(device):
    return repr(device) if isinstance(device, str) else repr(str(device))

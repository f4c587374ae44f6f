"""The device policy of the package: one place that turns a ``device`` setting
into a :class:`torch.device`."""

from __future__ import annotations

import warnings

import torch

__all__ = ["prediction_device", "resolve_device"]


def resolve_device(device):
    """Turn the ``device`` hyperparameter into a :class:`torch.device`.

    ``"auto"`` picks ``"cuda"`` when available, else ``"cpu"``.

    Raises
    ------
    ValueError
        If the string is not a device torch understands, or CUDA is requested
        but not available.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"Invalid device={device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available.")
    return dev


def prediction_device(device):
    """Device for prediction: the ``device`` hyperparameter, or the CPU (with a
    warning) when it names CUDA on a machine without it, so that a model
    fitted on a GPU predicts after being loaded on a CPU-only machine.

    Raises
    ------
    ValueError
        If the string is not a device torch understands.
    """
    if device != "auto":
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"Invalid device={device!r}: {exc}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            warnings.warn(
                f"device={device!r} but CUDA is not available on this machine; "
                "predicting on the CPU.",
                UserWarning,
                stacklevel=4,
            )
            return torch.device("cpu")
    return resolve_device(device)

"""The state of federated rounds, and its checkpoint file.

:class:`RoundState` is everything :func:`~sktree_lmc._federated.run_rounds`
carries from one round to the next: the rounds run, the shard estimators
(with their Adam states), the merged model and its aligner, the history, the
server's momentum, the round-level early stopping and which shards took part
when. After every round it is handed to ``checkpoint`` as a plain dict
(:meth:`RoundState.to_dict`, versioned, with the configuration it was
written under) or written to a file (:func:`write_checkpoint`), and
``resume_from`` reads it back (:func:`read_checkpoint`), refusing with a
clear error a file that is truncated or altered (a SHA-256 of the payload is
checked before anything is unpickled) and a state written for another
configuration (every differing setting is named).

Nothing here imports the estimators.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import joblib
import numpy as np

__all__: list = []

#: What a checkpoint is (the ``format`` key) and the version of its layout.
CHECKPOINT_FORMAT = "sktree_lmc.ShardedSoftTreeEnsemble.rounds"
CHECKPOINT_VERSION = 1
#: The first line of a checkpoint file; a JSON header line follows, then the payload.
_MAGIC = b"SKTREE_LMC_CHECKPOINT\n"

#: Settings that may differ between the fit that wrote a checkpoint and the one
#: resuming from it: where and how verbosely it runs, not what it computes.
RESUMABLE_CHANGES = frozenset({
    "checkpoint", "verbose", "n_jobs", "worker_timeout",
    "estimator__verbose", "estimator__n_threads", "estimator__device",
})


def _plain(value):
    """A setting as a comparable plain value: numbers, strings, booleans and
    None as they are, anything else as its :func:`joblib.hash` (arrays,
    encoders, aligner objects)."""
    if value is None or isinstance(value, (bool, str, Integral, Real)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, (tuple, list)) and all(
            v is None or isinstance(v, (bool, str, Integral, Real)) for v in value):
        return [v.item() if isinstance(v, np.generic) else v for v in value]
    return "hash:" + joblib.hash(value)


def config_of(meta_estimator):
    """The configuration a checkpoint is written under: the meta-estimator's
    deep parameters (nested estimators by their own parameters), as plain
    values, without those of :data:`RESUMABLE_CHANGES`."""
    params = meta_estimator.get_params(deep=True)
    return {name: _plain(value) for name, value in sorted(params.items())
            if name not in RESUMABLE_CHANGES and not hasattr(value, "get_params")
            and not callable(value)}


@dataclass
class RoundState:
    """The state of the federated rounds after round ``round``.

    Attributes
    ----------
    round : int
        Rounds completed.
    shards : list
        Every shard's estimator (or its handle), with its Adam state.
    merged : estimator or None
        The merged model of the last round.
    aligner : ModelAligner or None
        The aligner fitted by the last round's merge.
    history : list of dict
        One entry per round (see ``ShardedSoftTreeEnsemble.history_``).
    server : tuple
        ``(velocity, previous, alignment)`` of the server's momentum step.
    best : tuple
        ``(validation loss, merged model, aligner)`` of the best round so far
        (round-level early stopping).
    no_improve : int
        Rounds in a row without a better validation loss.
    participation : list of tuple or None
        Per shard, ``(round, position in that round's merge)`` of the last
        round it took part in (None: never).
    config : dict
        The configuration the rounds run under (:func:`config_of`).
    """

    round: int = 0
    shards: list = field(default_factory=list)
    merged: Any = None
    aligner: Any = None
    history: list = field(default_factory=list)
    server: tuple = (None, None, None)
    best: tuple = (np.inf, None, None)
    no_improve: int = 0
    participation: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    _KEYS = ("round", "shards", "merged", "aligner", "history", "server", "best",
             "no_improve", "participation", "config")

    def to_dict(self):
        """The state as a plain dict, with its ``format`` and ``version``."""
        out = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION}
        out.update({key: getattr(self, key) for key in self._KEYS})
        return out

    @classmethod
    def from_dict(cls, state, source="resume_from"):
        """The state of :meth:`to_dict`, checked: a ValueError naming
        ``source`` when it is not a checkpoint of this version."""
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(
                f"{source} is not a checkpoint of ShardedSoftTreeEnsemble (a file written by "
                "its checkpoint parameter, or the dict given to a checkpoint callable)."
            )
        if state.get("version") != CHECKPOINT_VERSION:
            raise ValueError(
                f"{source} is a checkpoint of version {state.get('version')!r}; this version "
                f"of sktree_lmc reads version {CHECKPOINT_VERSION} only."
            )
        missing = [key for key in cls._KEYS if key not in state]
        if missing:
            raise ValueError(f"{source} is an incomplete checkpoint: it lacks {missing}.")
        out = cls(**{key: state[key] for key in cls._KEYS})
        if not (isinstance(out.round, Integral) and out.round >= 1
                and isinstance(out.shards, list) and len(out.history) == out.round
                and len(out.participation) == len(out.shards)):
            raise ValueError(f"{source} is an inconsistent checkpoint (round {out.round!r}, "
                             f"{len(out.history)} history entries).")
        return out

    def check_resumable(self, config, n_rounds, source="resume_from"):
        """A ValueError naming every setting that differs from ``config``
        (and the round when it is beyond ``n_rounds``)."""
        differ = [f"{name}: {self.config.get(name, '<absent>')!r} in the checkpoint, "
                  f"{config.get(name, '<absent>')!r} now"
                  for name in sorted(set(self.config) | set(config))
                  if self.config.get(name, "<absent>") != config.get(name, "<absent>")]
        if differ:
            raise ValueError(
                f"{source} was written by a fit with other settings; resuming would mix two "
                "configurations. Differences: " + "; ".join(differ) + "."
            )
        if not 1 <= self.round <= n_rounds:
            raise ValueError(
                f"{source} is the checkpoint of round {self.round}, outside the "
                f"n_rounds={n_rounds} of this fit."
            )


def write_checkpoint(state, path):
    """Write ``state`` (a :class:`RoundState` or its dict) to ``path``
    atomically: a reader never sees a half-written file. The file holds a
    magic line, a JSON header (format, version, round, payload length and
    SHA-256) and the payload (joblib's pickle of the state's dict)."""
    if isinstance(state, RoundState):
        state = state.to_dict()
    buffer = io.BytesIO()
    joblib.dump(state, buffer)
    payload = buffer.getvalue()
    header = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
              "round": int(state["round"]), "length": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest()}
    path = os.fspath(path)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(_MAGIC + json.dumps(header).encode() + b"\n" + payload)
    os.replace(tmp, path)


def read_checkpoint(resume_from):
    """The :class:`RoundState` of ``resume_from``: a file written by
    :func:`write_checkpoint`, a dict of :meth:`RoundState.to_dict`, or a
    :class:`RoundState`. A missing, truncated or altered file is a
    ValueError naming the file and what is wrong with it."""
    if isinstance(resume_from, RoundState):
        return resume_from
    if isinstance(resume_from, dict):
        return RoundState.from_dict(resume_from)
    path = os.fspath(resume_from)
    source = f"resume_from file {path!r}"
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ValueError(f"{source} cannot be read: {exc}.") from exc
    if not raw.startswith(_MAGIC):
        raise ValueError(f"{source} is not a checkpoint of ShardedSoftTreeEnsemble (it does "
                         "not start with the checkpoint header).")
    head, sep, payload = raw[len(_MAGIC):].partition(b"\n")
    try:
        header = json.loads(head.decode()) if sep else None
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or not {"length", "sha256", "version"} <= set(header):
        raise ValueError(f"{source} has a damaged header: the file is corrupted.")
    if header["version"] != CHECKPOINT_VERSION:
        raise ValueError(f"{source} is a checkpoint of version {header['version']!r}; this "
                         f"version of sktree_lmc reads version {CHECKPOINT_VERSION} only.")
    if len(payload) != header["length"]:
        raise ValueError(f"{source} is truncated or padded: its payload has {len(payload)} "
                         f"bytes, its header says {header['length']}.")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise ValueError(f"{source} is corrupted: the checksum of its payload does not match "
                         "its header (the file was altered after it was written).")
    try:
        state = joblib.load(io.BytesIO(payload))
    except Exception as exc:  # pragma: no cover - a payload that passed its checksum
        raise ValueError(f"{source} cannot be unpickled: {type(exc).__name__}: {exc}.") from exc
    return RoundState.from_dict(state, source)

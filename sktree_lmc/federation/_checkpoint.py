"""The state of federated rounds, and its checkpoint file.

:class:`RoundState` is everything :func:`~sktree_lmc.federation._federated.run_rounds`
carries from one round to the next: the rounds run, the shard estimators
(with their Adam states), the merged model and its aligner, the history, the
server's momentum, the round-level early stopping and which shards took part
when. After every round it is handed to ``checkpoint`` as a plain dict
(:meth:`RoundState.to_dict`, versioned, with the configuration it was
written under) or written to a file (:func:`write_checkpoint`), and
``resume_from`` reads it back (:func:`read_checkpoint`), refusing with a
clear error a file that is truncated or altered (a SHA-256 of the payload is
checked first) and a state written for another configuration (every
differing setting is named).

A checkpoint file cannot run code when it is read. Its payload is plain data
saved with :func:`torch.save` and read with ``torch.load(...,
weights_only=True)`` (dicts, lists, tuples, numbers, strings, bytes and
tensors only): NumPy arrays are stored as their bytes with their dtype and
shape (object arrays as lists of plain values), and objects as the name of
their class and their state, rebuilt only for the classes the reader trusts
(``trusted``: the package's estimators, aligner, parameter and alignment
types, and scikit-learn's ``QuantileTransformer`` of the quantile
encoding); a file that names any other type is refused before anything is
built. The checksum only detects damage (anyone can recompute it): it is
not a signature. A state whose objects are not of these types (a callable
``scoring``, say) cannot be written to a file; a ``checkpoint`` callable
receives it in memory.

Nothing here imports the estimators: the callers give the trusted classes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import joblib
import numpy as np
import torch

__all__: list = []

#: What a checkpoint is (the ``format`` key) and the version of its layout.
CHECKPOINT_FORMAT = "sktree_lmc.ShardedSoftTreeEnsemble.rounds"
CHECKPOINT_VERSION = 1
#: The version of the checkpoint file (its header): 1 was a pickle (not read:
#: loading it could run code), 2 plain data read with ``weights_only=True``.
FILE_VERSION = 2
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


def rows_fingerprint(X, y, sample_weight=None):
    """A fingerprint of the training rows in their order: :func:`joblib.hash`
    of the values (a permutation of the rows changes it), or for dask
    collections their deterministic dask token (computed from how they are
    built, without reading the partitions)."""
    if any(type(v).__module__.partition(".")[0] in ("dask", "dask_expr")
           for v in (X, y, sample_weight)):
        from dask.base import tokenize

        return "dask:" + tokenize(X, y, sample_weight)
    return "hash:" + joblib.hash((X, y, sample_weight))


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
                and isinstance(out.shards, list) and isinstance(out.history, list)
                and isinstance(out.participation, list)
                and len(out.history) == out.round
                and len(out.participation) == len(out.shards)):
            raise ValueError(f"{source} is an inconsistent checkpoint (round {out.round!r}, "
                             f"{_length(out.history)} history entries).")
        out._check_entries(source)
        return out

    def _check_entries(self, source):
        """A ValueError naming ``source`` and the entry when an entry is not
        of its kind (an edited state): the models fitted soft tree
        ensembles, the aligner fitted, the server and best states triples."""
        def fail(what, value):
            kind = _KINDS[what.partition("[")[0]]
            raise ValueError(f"{source} is an altered checkpoint: {what} is "
                             f"{type(value).__name__} {_short(value)}, not {kind}.")

        for k, shard in enumerate(self.shards):
            if not _is_fitted_model(shard):
                fail(f"shards[{k}]", shard)
        if not _is_fitted_model(self.merged):
            fail("merged", self.merged)
        if self.aligner is not None and not hasattr(self.aligner, "alignments_"):
            fail("aligner", self.aligner)
        if not (isinstance(self.server, (tuple, list)) and len(self.server) == 3):
            fail("server", self.server)
        if not (isinstance(self.best, (tuple, list)) and len(self.best) == 3
                and isinstance(self.best[0], Real)
                and (self.best[1] is None or _is_fitted_model(self.best[1]))):
            fail("best", self.best)
        if not (isinstance(self.no_improve, Integral) and self.no_improve >= 0):
            fail("no_improve", self.no_improve)
        for k, entry in enumerate(self.history):
            if not isinstance(entry, dict):
                fail(f"history[{k}]", entry)
        for k, entry in enumerate(self.participation):
            if not (entry is None or (isinstance(entry, (tuple, list)) and len(entry) == 2)):
                fail(f"participation[{k}]", entry)
        if not isinstance(self.config, dict):
            fail("config", self.config)

    def check_resumable(self, config, n_rounds, source="resume_from"):
        """A ValueError naming every setting that differs from ``config``
        (and the round when it is beyond ``n_rounds``, or the rows when
        their fingerprint ``config["rows"]`` differs: other rows, or the
        same rows in another order)."""
        differ = [f"{name}: {self.config.get(name, '<absent>')!r} in the checkpoint, "
                  f"{config.get(name, '<absent>')!r} now"
                  for name in sorted((set(self.config) | set(config)) - {"rows"})
                  if self.config.get(name, "<absent>") != config.get(name, "<absent>")]
        if differ:
            raise ValueError(
                f"{source} was written by a fit with other settings; resuming would mix two "
                "configurations. Differences: " + "; ".join(differ) + "."
            )
        written, now = self.config.get("rows"), config.get("rows")
        if written is not None and now is not None and written != now:
            raise ValueError(
                f"{source} was written by a fit on other data: the training rows (X, y and "
                "sample_weight, in their order) differ from the checkpoint's. Resume with the "
                "rows of the interrupted fit, in the same order (the shards are drawn by "
                "position)."
            )
        if not 1 <= self.round <= n_rounds:
            raise ValueError(
                f"{source} is the checkpoint of round {self.round}, outside the "
                f"n_rounds={n_rounds} of this fit."
            )


# -- the plain-data payload ---------------------------------------------------------------------
#: The generators of numpy.random whose state a checkpoint may hold.
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def qualified_name(cls):
    """``module.QualName`` of a class: how a checkpoint names it."""
    return f"{cls.__module__}.{cls.__qualname__}"


def to_plain(obj, trusted, where="state"):
    """``obj`` as plain data that ``torch.load(weights_only=True)`` reads:
    every dict becomes ``{"__dict__": [(key, value), ...]}``, an array
    ``{"__ndarray__": bytes, "dtype", "shape"}`` (``"__objects__"``: a
    list, for object arrays), an object of a ``trusted`` class (a dict of
    qualified name to class) ``{"__object__": name, "state": ...}``. A
    ``TypeError`` naming ``where`` (the path in the state) for anything
    else."""
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "O":
            return {"__objects__": [to_plain(v, trusted, f"{where}[...]")
                                    for v in obj.ravel().tolist()],
                    "shape": tuple(obj.shape)}
        if obj.dtype.kind == "V":
            raise TypeError(f"A checkpoint cannot store the structured array at {where}.")
        return {"__ndarray__": np.ascontiguousarray(obj).tobytes(), "dtype": obj.dtype.str,
                "shape": tuple(obj.shape)}
    if isinstance(obj, np.generic):
        return {"__scalar__": to_plain(np.asarray(obj), trusted, where)}
    if isinstance(obj, dict):
        return {"__dict__": [(to_plain(k, trusted, f"{where} key"),
                              to_plain(v, trusted, f"{where}[{k!r}]")) for k, v in obj.items()]}
    if isinstance(obj, list):
        return [to_plain(v, trusted, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return tuple(to_plain(v, trusted, f"{where}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, (set, frozenset)):
        return {"__set__": [to_plain(v, trusted, f"{where} item") for v in obj]}
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, torch.device):
        return {"__device__": str(obj)}
    if isinstance(obj, np.dtype):
        return {"__dtype__": obj.str}
    if isinstance(obj, np.random.RandomState):
        return {"__random_state__": to_plain(obj.get_state(), trusted, where)}
    if isinstance(obj, np.random.Generator):
        state = obj.bit_generator.state
        if state.get("bit_generator") not in _BIT_GENERATORS:
            raise TypeError(f"A checkpoint cannot store the generator at {where}.")
        return {"__generator__": to_plain(state, trusted, where)}
    name = qualified_name(type(obj))
    if trusted.get(name) is not type(obj):
        raise TypeError(
            f"A checkpoint file holds plain data and the package's own types only; it cannot "
            f"store the {name} at {where}. Use a checkpoint callable to keep such a state in "
            "memory, or settings of plain types (a scorer's name rather than a function)."
        )
    getstate = getattr(obj, "__getstate__", None)
    state = getstate() if getstate is not None else vars(obj)
    return {"__object__": name, "state": to_plain(state, trusted, f"{where}.{name}")}


def from_plain(data, trusted, source="resume_from"):
    """The objects of :func:`to_plain`; a ``ValueError`` naming ``source``
    for a type that is not ``trusted`` (nothing of it is built)."""
    if isinstance(data, list):
        return [from_plain(v, trusted, source) for v in data]
    if isinstance(data, tuple):
        return tuple(from_plain(v, trusted, source) for v in data)
    if not isinstance(data, dict):
        return data  # a plain value, or a tensor
    try:
        if "__dict__" in data:
            return {from_plain(k, trusted, source): from_plain(v, trusted, source)
                    for k, v in data["__dict__"]}
        if "__ndarray__" in data:
            dtype = np.dtype(str(data["dtype"]))
            if dtype.kind in "OV":
                raise ValueError(f"an array of dtype {dtype}")
            return np.frombuffer(data["__ndarray__"], dtype=dtype).reshape(
                tuple(data["shape"])).copy()
        if "__objects__" in data:
            values = [from_plain(v, trusted, source) for v in data["__objects__"]]
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out.reshape(tuple(data["shape"]))
        if "__scalar__" in data:
            return from_plain(data["__scalar__"], trusted, source)[()]
        if "__set__" in data:
            return set(from_plain(data["__set__"], trusted, source))
        if "__device__" in data:
            return torch.device(str(data["__device__"]))
        if "__dtype__" in data:
            return np.dtype(str(data["__dtype__"]))
        if "__random_state__" in data:
            rs = np.random.RandomState()
            rs.set_state(from_plain(data["__random_state__"], trusted, source))
            return rs
        if "__generator__" in data:
            state = from_plain(data["__generator__"], trusted, source)
            name = state.get("bit_generator")
            if name not in _BIT_GENERATORS:
                raise ValueError(f"a generator {name!r}")
            bit_generator = getattr(np.random, name)()
            bit_generator.state = state
            return np.random.Generator(bit_generator)
        if "__object__" in data:
            name = data["__object__"]
            cls = trusted.get(name)
            if cls is None:
                raise ValueError(f"the type {name!r}, which a checkpoint never holds")
            state = from_plain(data["state"], trusted, source)
            obj = cls.__new__(cls)
            if getattr(cls, "__setstate__", None) is not getattr(object, "__setstate__", None):
                obj.__setstate__(state)
            else:
                obj.__dict__.update(state)
            return obj
    except ValueError as exc:
        if str(exc).startswith(source):
            raise
        raise ValueError(f"{source} holds {exc}: refused (a checkpoint holds plain data and "
                         "the package's own types only).") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{source} has a malformed payload ({type(exc).__name__}: {exc}): "
                         "the file is not a checkpoint of this package.") from None
    raise ValueError(f"{source} has a malformed payload (an unknown entry "
                     f"{sorted(map(str, data))[:3]}): the file is not a checkpoint of this "
                     "package.")


#: What every entry of a :class:`RoundState` is (its error messages).
_KINDS = {"shards": "a fitted soft tree ensemble", "merged": "a fitted soft tree ensemble",
          "aligner": "a fitted ModelAligner or None",
          "server": "a triple (velocity, previous, alignment)",
          "best": "a triple (loss, model or None, aligner)",
          "no_improve": "a non-negative int", "history": "a dict",
          "participation": "None or a pair (round, position)", "config": "a dict"}


def _is_fitted_model(value):
    """Whether ``value`` is (like) a fitted soft tree ensemble."""
    return hasattr(value, "tree_params_") and hasattr(value, "get_params")


def _length(value):
    return len(value) if hasattr(value, "__len__") else repr(value)


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def write_checkpoint(state, path, trusted):
    """Write ``state`` (a :class:`RoundState` or its dict) to ``path``
    atomically: a reader never sees a half-written file, and no temporary
    file is left behind, also when writing fails. The file holds a magic
    line, a JSON header (format, file version, round, payload length and
    SHA-256) and the payload: the state as plain data (:func:`to_plain`
    of the ``trusted`` classes) saved by :func:`torch.save`. ``path`` must
    be a file, not a directory: a ``ValueError`` before anything is
    written."""
    if isinstance(state, RoundState):
        state = state.to_dict()
    path = os.fspath(path)
    check_checkpoint_path(path)
    buffer = io.BytesIO()
    torch.save(to_plain(state, trusted), buffer)
    payload = buffer.getvalue()
    header = {"format": CHECKPOINT_FORMAT, "version": FILE_VERSION,
              "round": int(state["round"]), "length": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest()}
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(_MAGIC + json.dumps(header).encode() + b"\n" + payload)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp) and not os.path.isdir(tmp):
            os.remove(tmp)


def check_checkpoint_path(path, name="checkpoint"):
    """A ``ValueError`` naming ``name`` when ``path`` is an existing
    directory, or its temporary file ``<path>.tmp`` is one (a checkpoint is
    one file, written beside itself)."""
    path = os.fspath(path)
    for candidate in (path, f"{path}.tmp"):
        if os.path.isdir(candidate):
            raise ValueError(
                f"{name}={path!r}: {candidate!r} is a directory; {name} takes the path of the "
                "checkpoint file (for example 'rounds.ckpt' inside a directory), written "
                "atomically through a temporary file '<path>.tmp' beside it."
            )


def read_checkpoint(resume_from, trusted):
    """The :class:`RoundState` of ``resume_from``: a file written by
    :func:`write_checkpoint`, a dict of :meth:`RoundState.to_dict`, or a
    :class:`RoundState`. A missing, truncated or altered file is a
    ValueError naming the file and what is wrong with it; the file's payload
    is read as plain data (``weights_only=True``) and only the ``trusted``
    classes are rebuilt, so a crafted file cannot run code."""
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
    if header["version"] != FILE_VERSION:
        raise ValueError(
            f"{source} is a checkpoint file of version {header['version']!r}; this version of "
            f"sktree_lmc reads version {FILE_VERSION} only (version 1 files are pickles, which "
            "are not loaded: loading one could run code). Fit again to write a new one.")
    if len(payload) != header["length"]:
        raise ValueError(f"{source} is truncated or padded: its payload has {len(payload)} "
                         f"bytes, its header says {header['length']}.")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise ValueError(f"{source} is corrupted: the checksum of its payload does not match "
                         "its header (the file was altered after it was written).")
    try:
        with warnings.catch_warnings():  # torch's notes on a foreign pickle protocol
            warnings.simplefilter("ignore")
            data = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a payload that is not plain data
        raise ValueError(
            f"{source} is not plain data and is refused without being loaded (a checkpoint "
            f"holds dicts, lists, numbers, strings, bytes and tensors only): "
            f"{type(exc).__name__}: {str(exc)[:300]}") from None
    return RoundState.from_dict(from_plain(data, trusted, source), source)

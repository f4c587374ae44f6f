"""Checkpoint files of ``ShardedSoftTreeEnsemble`` cannot run code when read.

The payload is plain data read with ``torch.load(..., weights_only=True)``, and only the
package's own types (and the encoder's ``QuantileTransformer``) are rebuilt: a crafted file with
a valid header and checksum, whose payload is a pickle that would run code or that names another
type, is refused without running anything; so is a file of the former pickle format. A
``checkpoint`` that is a directory is refused before the fit, and no temporary file is left.
"""

import hashlib
import io
import json
import os
import pickle

import joblib
import numpy as np
import pandas as pd
import pytest
import torch

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)
from sktree_lmc.federation._checkpoint import _MAGIC, FILE_VERSION, to_plain, write_checkpoint

TINY = dict(n_estimators=4, depth=2, max_epochs=2, early_stopping=False)
rng = np.random.default_rng(0)
X = rng.normal(size=(80, 3))
Y = (X[:, 0] > 0).astype(int)
ROUNDS = dict(n_shards=2, n_rounds=2, random_state=0)


def _file(payload, version=FILE_VERSION):
    header = {"format": "sktree_lmc.ShardedSoftTreeEnsemble.rounds", "version": version,
              "round": 1, "length": len(payload),
              "sha256": hashlib.sha256(payload).hexdigest()}
    return _MAGIC + json.dumps(header).encode() + b"\n" + payload


class _WritesAFile:
    """A pickle payload that, if unpickled, creates a file."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def _resume(path):
    est = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS)
    return est.fit(X, Y, resume_from=path)


@pytest.mark.parametrize("saver", ["pickle", "torch_save", "joblib"])
def test_a_crafted_payload_with_a_valid_checksum_is_refused_without_running(tmp_path, saver):
    target = tmp_path / "pwned"
    bomb = {"round": 1, "shards": [_WritesAFile(str(target))]}
    if saver == "pickle":
        payload = pickle.dumps(bomb)
    elif saver == "torch_save":
        buffer = io.BytesIO()
        torch.save(bomb, buffer)
        payload = buffer.getvalue()
    else:
        buffer = io.BytesIO()
        joblib.dump(bomb, buffer)
        payload = buffer.getvalue()
    path = tmp_path / "crafted.ckpt"
    path.write_bytes(_file(payload))
    with pytest.raises(ValueError, match=r"not plain data and is refused without being loaded"):
        _resume(path)
    assert not target.exists()


def test_a_former_pickle_checkpoint_is_refused_without_running(tmp_path):
    target = tmp_path / "pwned"
    payload = pickle.dumps({"round": 1, "shards": [_WritesAFile(str(target))]})
    path = tmp_path / "old.ckpt"
    path.write_bytes(_file(payload, version=1))
    with pytest.raises(ValueError, match=r"version 1.*pickles, which are not loaded"):
        _resume(path)
    assert not target.exists()


def test_a_plain_payload_naming_another_type_is_refused(tmp_path):
    buffer = io.BytesIO()
    torch.save({"__object__": "os.system", "state": {"__dict__": [("cmd", "true")]}}, buffer)
    path = tmp_path / "other_type.ckpt"
    path.write_bytes(_file(buffer.getvalue()))
    with pytest.raises(ValueError, match=r"the type 'os.system', which a checkpoint never"):
        _resume(path)


def test_a_regressor_with_categories_and_quantiles_round_trips(tmp_path):
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1],
                          "c": np.where(X[:, 2] > 0, "up", "down")})
    y = X[:, 0] * 2.0
    base = SoftTreeEnsembleRegressor(numeric_encoding="quantile_normal", additive_bins=4,
                                     random_state=np.random.RandomState(3), **TINY)
    kw = dict(n_shards=2, n_rounds=3, random_state=0, server_momentum=0.5)
    whole = ShardedSoftTreeEnsemble(base, **kw).fit(frame, y)
    path = tmp_path / "rounds.ckpt"
    states = []

    def first_two(state):
        if state["round"] <= 2:
            write_checkpoint(state, path, _types())
            states.append(state["round"])

    ShardedSoftTreeEnsemble(base, **kw, checkpoint=first_two).fit(frame, y)
    # the file holds round 2: its payload is plain data
    raw = path.read_bytes()
    payload = raw[len(_MAGIC):].partition(b"\n")[2]
    torch.load(io.BytesIO(payload), weights_only=True)
    resumed = ShardedSoftTreeEnsemble(base, **kw).fit(frame, y, resume_from=path)
    np.testing.assert_array_equal(resumed.predict(frame), whole.predict(frame))


def _types():
    from sktree_lmc.federation._sharded import checkpoint_types

    return checkpoint_types()


def test_a_state_of_other_types_cannot_be_written(tmp_path):
    with pytest.raises(TypeError, match=r"cannot store the builtins.function at state"):
        to_plain({"round": 1, "scoring": lambda est, X, y: 0.0}, _types())
    path = tmp_path / "rounds.ckpt"
    with pytest.raises(TypeError, match="cannot store"):
        write_checkpoint({"round": 1, "f": print}, path, _types())
    assert os.listdir(tmp_path) == []  # neither the file nor its temporary file


def test_a_checkpoint_directory_is_refused_before_fitting(tmp_path):
    directory = tmp_path / "ckpts"
    directory.mkdir()
    est = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS,
                                  checkpoint=directory)
    with pytest.raises(ValueError, match=r"checkpoint=.*is a directory.*path of the checkpoint"):
        est.fit(X, Y)
    assert not hasattr(est, "merged_")
    assert sorted(os.listdir(tmp_path)) == ["ckpts"]  # no 'ckpts.tmp' left behind
    assert os.listdir(directory) == []


def test_a_checkpoint_file_is_written_without_leftovers(tmp_path):
    path = tmp_path / "rounds.ckpt"
    ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS,
                            checkpoint=path).fit(X, Y)
    assert os.listdir(tmp_path) == ["rounds.ckpt"]

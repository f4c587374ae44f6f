"""Hand-edited or incomplete states are clear errors, not AttributeErrors at first use.

- a pickled estimator (or sharded meta-estimator) state missing a parameter or a fitted
  attribute is a ``ValueError`` naming what is missing;
- a resumed round state whose entries are not of their kind (``shards=[None, None]``,
  ``merged="model"``, ...) is a ``ValueError`` naming the entry;
- a checkpoint resumed on the same rows in another order is refused like other rows (the
  fingerprint of the rows covers their order: the shards are drawn by position).
"""

import pickle
import warnings

import numpy as np
import pytest

from sktree_lmc import (
    ShardedSoftTreeEnsemble,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleRegressor,
)

TINY = dict(n_estimators=4, depth=2, max_epochs=2, early_stopping=False, random_state=0)
rng = np.random.default_rng(0)
X = rng.normal(size=(80, 3))
Y = (X[:, 0] > 0).astype(int)
ROUNDS = dict(n_shards=2, n_rounds=2, random_state=0)


def _restored(model, drop):
    state = model.__getstate__()
    del state[drop]
    new = type(model).__new__(type(model))
    new.__setstate__(state)
    return new


@pytest.mark.parametrize("Est, drop", [
    (SoftTreeEnsembleClassifier, "depth"), (SoftTreeEnsembleClassifier, "objective_"),
    (SoftTreeEnsembleClassifier, "architecture_"), (SoftTreeEnsembleRegressor, "objective_"),
    (SoftTreeEnsembleRegressor, "learning_rate"),
])
def test_a_pickled_state_missing_an_entry_names_it(Est, drop):
    y = Y if Est is SoftTreeEnsembleClassifier else X[:, 0]
    model = Est(**TINY).fit(X, y)
    with pytest.raises(ValueError, match=rf"state lacks \['{drop}'\].*edited or is incomplete"):
        _restored(model, drop)


def test_an_unfitted_state_needs_only_the_parameters():
    model = pickle.loads(pickle.dumps(SoftTreeEnsembleClassifier(**TINY)))
    assert model.get_params() == SoftTreeEnsembleClassifier(**TINY).get_params()


@pytest.fixture(scope="module")
def round_states():
    states = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS,
                                checkpoint=states.append).fit(X, Y)
    return states


def test_a_sharded_state_missing_the_merged_model_names_it(round_states):
    sharded = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS).fit(X, Y)
    with pytest.raises(ValueError, match=r"lacks \['merged_'\]"):
        _restored(sharded, "merged_")


@pytest.mark.parametrize("edit, entry", [
    (dict(shards=[None, None]), r"shards\[0\] is NoneType"),
    (dict(merged="model"), r"merged is str 'model'"),
    (dict(aligner="aligner"), r"aligner is str"),
    (dict(server=(1,)), r"server is tuple"),
    (dict(best=None), r"best is NoneType"),
    (dict(no_improve=-1), r"no_improve is int"),
    (dict(participation=[None, "x"]), r"participation\[1\] is str"),
])
def test_an_altered_round_state_names_the_entry(round_states, edit, entry):
    state = {**round_states[0], **edit}
    est = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS)
    with pytest.raises(ValueError, match=rf"altered checkpoint: {entry}"):
        est.fit(X, Y, resume_from=state)


def test_resuming_on_the_same_rows_in_another_order_is_refused(round_states, tmp_path):
    perm = np.random.default_rng(1).permutation(len(X))
    est = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(**TINY), **ROUNDS)
    with pytest.raises(ValueError, match=r"other data: the training rows .* in their order"):
        est.fit(X[perm], Y[perm], resume_from=round_states[0])
    # the same rows in the same order resume
    assert est.fit(X, Y, resume_from=round_states[0]).n_rounds_ == 2

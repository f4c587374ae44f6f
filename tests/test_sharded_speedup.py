"""ShardedSoftTreeEnsemble(round_speedup=True): under-trained rounds train faster, and a
sped-up round that makes the merged model worse is dropped and retried."""

import numpy as np
import pytest
from conftest import FAST
from sklearn.datasets import make_classification

import sktree_lmc.federation._federated as federated
from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleClassifier
from sktree_lmc.federation._checkpoint import RoundState
from sktree_lmc.federation._federated import RoundSettings, RoundsSpeedup, RoundsValidation

X, Y = make_classification(n_samples=600, n_features=6, n_informative=4, random_state=0)


def _base(**kw):
    return SoftTreeEnsembleClassifier(**{**FAST, "early_stopping": True, "max_epochs": 2, **kw})


class _Changes:
    """Shards whose paired change of the validation loss is given."""

    def __init__(self, change, error):
        self.change, self.error = change, error

    def validation_loss(self, merged, minus=None):
        assert minus is not None
        return self.change, self.error


def _step(change, sped, history=()):
    state = RoundState(shards=[], participation=[], history=[*history, {"round": 2}])
    settings = RoundSettings(n_rounds=5, validation=RoundsValidation(1e-4, 2),
                             speedup=RoundsSpeedup(0.3, 0.1, 3))
    dropped = federated._speedup_step(_Changes(change, 0.01), state, object(), settings, sped)
    return dropped, state.history[-1]


def test_speedup_starts_after_a_clear_improvement_only():
    assert _step(-0.05, False) == (False, {"round": 2, "sped_up": False, "speedup_next": True})
    # within two standard errors of the change: the estimator's pace
    assert not _step(-0.015, False)[1]["speedup_next"]
    # a sped-up round that does not make the model worse goes on sped up
    assert _step(0.0, True) == (False, {"round": 2, "sped_up": True, "speedup_next": True})


def test_speedup_drops_a_round_that_makes_the_model_worse_and_stops():
    dropped, entry = _step(0.05, True)
    assert dropped and entry["speedup_dropped"] and "speedup_next" not in entry
    # after a dropped round, no round is sped up again, however clear the improvement
    assert not _step(-0.5, False, history=[{"speedup_dropped": True}])[1]["speedup_next"]


def test_sped_up_rounds_train_longer_at_a_higher_learning_rate():
    kw = dict(n_shards=4, n_rounds=4, random_state=0)
    sped = ShardedSoftTreeEnsemble(_base(), **kw).fit(X, Y)
    plain = ShardedSoftTreeEnsemble(_base(), round_speedup=False, **kw).fit(X, Y)
    flags = [h.get("sped_up") for h in sped.history_]
    assert flags[0] is None and flags[1] is False and any(flags[2:])  # clearly under-trained
    assert all("sped_up" not in h for h in plain.history_)
    n_sped = sum(bool(f) for f in flags)
    # shard batch 64 / 4 = 16: sqrt(64 / 16) = 2 times the estimator's learning rate,
    # three times the local epochs
    rate = _base().learning_rate
    assert all(m.learning_rate == pytest.approx(2 * rate) for m in sped.estimators_)
    assert all(m.n_epochs_ == 2 * (4 - n_sped) + 3 * 2 * n_sped for m in sped.estimators_)
    assert all(m.n_epochs_ == 2 * 4 and m.learning_rate == rate for m in plain.estimators_)
    # the rounds before the first sped-up one are the same fit
    assert sped.history_[1]["validation_loss"] == plain.history_[1]["validation_loss"]


@pytest.mark.filterwarnings("ignore:Training diverged")
def test_a_dropped_round_is_retried_from_where_it_started(monkeypatch):
    est = ShardedSoftTreeEnsemble(_base(), n_shards=4, n_rounds=5, random_state=0)
    # a learning rate far too high for the sped-up rounds: the first one is dropped
    monkeypatch.setattr(ShardedSoftTreeEnsemble, "_speedup",
                        lambda self, validation: RoundsSpeedup(50.0, _base().learning_rate, 3))
    starts = []
    run = federated._round_inputs

    def spy(clones, state, r, sampled, settings, sped_up=False):
        starts.append((r, state.merged, sped_up))
        return run(clones, state, r, sampled, settings, sped_up)

    monkeypatch.setattr(federated, "_round_inputs", spy)
    est.fit(X, Y)
    drops = [i for i, h in enumerate(est.history_) if h.get("speedup_dropped")]
    assert len(drops) == 1
    d = drops[0]
    assert est.history_[d]["sped_up"] and not any(h.get("sped_up") for h in est.history_[d + 1:])
    # the round after the dropped one starts from the model the dropped one started from
    assert starts[d + 1][1] is starts[d][1] and not starts[d + 1][2]
    # the model kept is never the dropped round's
    assert est.history_[d]["validation_loss"] > min(h["validation_loss"] for h in est.history_)
    assert np.isfinite(est.predict_proba(X)).all()

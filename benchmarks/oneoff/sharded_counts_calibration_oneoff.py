"""Sharded Poisson regressors on count data: the merged model's mean before and after its calibration.

``ShardedSoftTreeEnsemble(SoftTreeEnsembleRegressor(loss="poisson", random_state=seed), n_shards=4)``
with one round (a one-shot merge of 4 IID shards) and with 10 rounds (``max_epochs=15``, the
rounds' protocol) on the count datasets of ``merge_apart_counts_oneoff`` (50 % training splits,
seeds 0-2). The fit's last step, ``calibrate_mean`` from one ``prediction_sums`` per shard, is
recorded on its way in, so one fit gives the merged model before (``raw_``) and after (``cal_``)
it: the mean prediction over the training rows as a ratio to the targets' mean, and the test
mean Poisson deviance; HGB(``loss="poisson"``) and the full-data model beside them.

    python benchmarks/oneoff/sharded_counts_calibration_oneoff.py doctorvisits,rwm1984,nmes1988 > OUT.jsonl
"""
import json
import os
import sys
import warnings

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_poisson_deviance as mpd
from sklearn.model_selection import train_test_split

import sktree_lmc.federation._sharded as sharded
from sktree_lmc import ShardedSoftTreeEnsemble, SoftTreeEnsembleRegressor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from merge_apart_counts_oneoff import load_counts  # noqa: E402

torch.set_num_threads(1)
warnings.simplefilter("ignore")
SEEN = []
_calibrate = sharded.calibrate_mean


def _recording(model, sums):
    SEEN.append(model)
    return _calibrate(model, sums)


sharded.calibrate_mean = _recording


def main(names):
    for name in names:
        X, y = load_counts(name)
        for seed in (0, 1, 2):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed)
            hgb = HistGradientBoostingRegressor(loss="poisson", categorical_features="from_dtype",
                                                random_state=seed).fit(Xtr, ytr)
            full = SoftTreeEnsembleRegressor(loss="poisson", random_state=seed).fit(Xtr, ytr)
            for rounds in (1, 10):
                extra = {"max_epochs": 15} if rounds > 1 else {}
                est = SoftTreeEnsembleRegressor(loss="poisson", random_state=seed, **extra)
                SEEN.clear()
                fitted = ShardedSoftTreeEnsemble(est, n_shards=4, n_rounds=rounds,
                                                 random_state=seed).fit(Xtr, ytr)
                raw, cal = SEEN[-1], fitted.merged_
                row = dict(set=name, seed=seed, rounds=rounds,
                           raw_tr=raw.predict(Xtr).mean() / ytr.mean(),
                           cal_tr=cal.predict(Xtr).mean() / ytr.mean(),
                           dev_raw=mpd(yte, raw.predict(Xte)), dev_cal=mpd(yte, cal.predict(Xte)),
                           dev_full=mpd(yte, full.predict(Xte)),
                           dev_hgb=mpd(yte, np.clip(hgb.predict(Xte), 1e-12, None)))
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                  for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(","))

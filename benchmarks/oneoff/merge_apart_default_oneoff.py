"""Four default classifiers fitted apart on IID quarters, merged by the default and the plain merge.

The measurement behind "Merges of models trained apart, on data the merge was not tuned on"
(docs/benchmarks.md): for each dataset and seed, the 10,000 / 10,000 split of
``benchmarks.bench_apart`` (``bench_accuracy.split``, not stratified), its IID quarters
(``bench_apart.sites("iid", 4, ...)``), and site ``k`` fitting the default classifier with
``random_state=1000 * seed + k`` and its own encoder (``bench_apart``'s "apart" protocol).
Prints one JSON line per (dataset, seed): the mean site, the sites' ensemble (probabilities
averaged with the row counts), ``merge_estimators(models, weights=rows)`` (the default:
``distill="auto"``) with the aligner it kept, and the plain merge (``distill=False``), with
their seconds.

    python benchmarks/oneoff/merge_apart_default_oneoff.py credit,electricity 0,1,2 > OUT.jsonl

Site models are cached in ``benchmarks/results/apart_default`` (git ignores it). The seven
datasets are read from ``$SKTREE_LMC_DATA``, credit from ``../shared/data/robustness``.
"""
import sys, json, os, warnings, time, numpy as np, joblib, torch
torch.set_num_threads(1); warnings.simplefilter("ignore")
from benchmarks.bench_accuracy import load, split
from benchmarks.bench_apart import sites, _site_seed
from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators
CACHE = "benchmarks/results/apart_default"
os.makedirs(CACHE, exist_ok=True)
names = sys.argv[1].split(","); seeds = [int(s) for s in sys.argv[2].split(",")]
for name in names:
    X_all, y_all = load("raw", name)
    for seed in seeds:
        X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, seed, False)
        parts = sites("iid", 4, X, y, seed)
        models = []
        for k, idx in enumerate(parts):
            p = f"{CACHE}/{name}_{seed}_iid4_{k}.joblib"
            if os.path.exists(p):
                m = joblib.load(p)
            else:
                m = SoftTreeEnsembleClassifier(random_state=_site_seed("apart", seed, k), device="cpu").fit(X[idx], y[idx]); joblib.dump(m, p)
            models.append(m)
        w = [len(i) for i in parts]
        P = [m.predict_proba(Xt) for m in models]; ens = np.average(P, axis=0, weights=w)
        acc = lambda Q: 100 * np.mean(models[0].classes_[Q.argmax(1)] == yt)
        t = time.perf_counter(); d = merge_estimators(models, weights=w); td = time.perf_counter() - t
        t = time.perf_counter(); p_ = merge_estimators(models, weights=w, distill=False); tp = time.perf_counter() - t
        print(json.dumps(dict(data=name, seed=seed, site=round(np.mean([acc(q) for q in P]), 2), ens=round(acc(ens), 2),
              default=round(100 * d.score(Xt, yt), 2), aligner=d.merge_report_.aligner, plain=round(100 * p_.score(Xt, yt), 2),
              default_s=round(td, 1), plain_s=round(tp, 1), flagged=bool(d.merge_report_.flagged))), flush=True)

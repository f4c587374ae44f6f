"""Levers on the default classifier's gap to HGB on california (binary), seeds 0-2, and on
electricity and MagicTelescope (seed 0): depth, trees, epochs, learning rate, teacher weight,
max_features=1.0, patience; test accuracy and fit CPU seconds, HGB in the same run. One JSON
line per dataset and seed (docs/_static/benchmarks/accuracy/california_levers.jsonl).

    SKTREE_LMC_DATA=<Tabular-Benchmark folder> python benchmarks/oneoff/california_levers_oneoff.py
"""
import json, time, torch, warnings
warnings.simplefilter("ignore")
torch.set_num_threads(1)
from sklearn.ensemble import HistGradientBoostingClassifier
from sktree_lmc import SoftTreeEnsembleClassifier
from benchmarks.bench_accuracy import load, split
variants = {"default": {}, "depth5": dict(depth=5), "depth6": dict(depth=6), "trees512": dict(n_estimators=512),
            "epochs300": dict(max_epochs=300), "lr5e-2": dict(learning_rate=5e-2), "teacher0.5": dict(teacher_weight=0.5),
            "teacher0.9": dict(teacher_weight=0.9), "maxfeat1": dict(max_features=1.0), "patience": dict(n_iter_no_change=30)}
for name in ["california", "electricity", "MagicTelescope"]:
    X, y = load("raw", name)
    for seed in ([0, 1, 2] if name == "california" else [0]):
        Xtr, Xte, ytr, yte = split(X, y, 10000, 10000, seed, True)
        hgb = 100 * HistGradientBoostingClassifier(random_state=seed).fit(Xtr, ytr).score(Xte, yte)
        out = {"data": name, "seed": seed, "hgb": round(hgb, 2)}
        for v, p in variants.items():
            t = time.process_time()
            m = SoftTreeEnsembleClassifier(random_state=seed, **p).fit(Xtr, ytr)
            out[v] = round(100 * m.score(Xte, yte), 2); out[v + "_s"] = round(time.process_time() - t, 1)
        print(json.dumps(out), flush=True)

"""One-off (backs the closing note of issue "Regression and multiclass as good as binary"): max_features=1.0 on the narrow datasets: WM test barrier of two models (seeds 1, 2; 11 lambdas on
2,000 test rows) beside the default's (same settings), and the default merge of 4 IID sites (seed 0)
against their ensemble, beside the default estimator's.

    SKTREE_LMC_DATA=<Tabular-Benchmark folder> python benchmarks/oneoff/max_features_merging_oneoff.py
"""
import json, numpy as np, torch, warnings
warnings.simplefilter("ignore")
torch.set_num_threads(1)
from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators, interpolation_curve
from benchmarks.bench_accuracy import load, split
from benchmarks.bench_apart import sites, _site_seed
for name in ["Diabetes130US", "MagicTelescope", "bank-marketing", "california", "electricity"]:
    X, y = load("raw", name)
    n = len(y); n_train = min(10_000, n // 2); n_test = min(10_000, n - n_train)
    Xtr, Xte, ytr, yte = split(X, y, n_train, n_test, 0, True)
    ev = np.random.RandomState(0).choice(len(yte), 2000, replace=False)
    out = {"data": name}
    for tag, params in (("default", {}), ("maxfeat1", dict(max_features=1.0))):
        a = SoftTreeEnsembleClassifier(random_state=1, **params).fit(Xtr, ytr)
        b = SoftTreeEnsembleClassifier(random_state=2, **params).fit(Xtr, ytr)
        curve = interpolation_curve(a, b, Xte[ev], yte[ev], lambdas=11, aligner="wm", X_align=Xtr)
        out[f"{tag}_barrier"] = round(float(curve.barrier("accuracy")), 3)
        Xs, Xt2, ys, yt2 = split(X, y, 10_000, 10_000, 0, False)
        parts = sites("iid", 4, Xs, ys, 0)
        models = [SoftTreeEnsembleClassifier(random_state=_site_seed("apart", 0, k), **params).fit(Xs[i], ys[i]) for k, i in enumerate(parts)]
        w = [len(i) for i in parts]
        P = np.average([m.predict_proba(Xt2) for m in models], axis=0, weights=w)
        out[f"{tag}_site"] = round(100 * np.mean([m.score(Xt2, yt2) for m in models]), 2)
        out[f"{tag}_ens"] = round(100 * np.mean(models[0].classes_[P.argmax(1)] == yt2), 2)
        out[f"{tag}_merge"] = round(100 * merge_estimators(models, weights=w).score(Xt2, yt2), 2)
    print(json.dumps(out), flush=True)

"""Size and prediction speed of a merge of K default classifiers fitted apart (K = 2, 4, 8, 16).

Models fitted apart have their own encoders; their merge runs on the union of the encoders
(``common_encoder``): every numeric column's quantile-normal transforms of the K models side
by side (K features where one model has 1), the union of the categories and of the additive
bins. This measures what that costs: for IID parts of the 10,000 training rows of a dataset
(``bench_accuracy.split``, seed 0), one default ``SoftTreeEnsembleClassifier`` per part, their
weight-matching merge without distillation (``merge_estimators(models, aligner="wm",
distill=False)``; distillation changes the leaf values, not the size); the merged model's
encoded features, parameters and pickled bytes against one site model's, and the rows per
second of ``predict_proba`` on the 10,000 test rows (one thread; site model and merge
alternated, medians of 5), with the merge's test accuracy beside the sites' ensemble.

    python benchmarks/oneoff/merged_size_oneoff.py electricity 2,4,8,16 > OUT.jsonl
"""
import json, pickle, sys, time, warnings
import numpy as np, torch
torch.set_num_threads(1); warnings.simplefilter("ignore")
from benchmarks.bench_accuracy import load, split
from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators

name = sys.argv[1]
X_all, y_all = load("raw", name)
X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, 0, False)
for K in [int(k) for k in sys.argv[2].split(",")]:
    parts = np.array_split(np.random.RandomState(0).permutation(len(y)), K)
    models = [SoftTreeEnsembleClassifier(random_state=k).fit(X[i], y[i]) for k, i in enumerate(parts)]
    merged = merge_estimators(models, weights=[len(i) for i in parts], aligner="wm", distill=False)
    one = models[0]
    rates = {"site": [], "merged": []}
    for r in range(5):
        for label, m in (("site", one), ("merged", merged)) if r % 2 == 0 else (("merged", merged), ("site", one)):
            t = time.perf_counter(); m.predict_proba(Xt); rates[label].append(len(Xt) / (time.perf_counter() - t))
    size = lambda m: sum(np.asarray(a).size for a in (m.tree_params_.split_weight, m.tree_params_.split_bias,
                                                      m.tree_params_.leaf_value) + ((m.tree_params_.additive,) if m.tree_params_.additive is not None else ()))
    P = np.mean([m.predict_proba(Xt) for m in models], axis=0)
    print(json.dumps(dict(
        data=name, K=K, features_site=int(one.encoder_.n_features_out_), features_merged=int(merged.encoder_.n_features_out_),
        params_site=int(size(one)), params_merged=int(size(merged)),
        bytes_site=len(pickle.dumps(one)), bytes_merged=len(pickle.dumps(merged)),
        rows_per_s_site=round(float(np.median(rates["site"]))), rows_per_s_merged=round(float(np.median(rates["merged"]))),
        speed_ratio=round(float(np.median(rates["merged"]) / np.median(rates["site"])), 3),
        acc_merged=round(100 * merged.score(Xt, yt), 2), acc_ensemble=round(100 * np.mean(one.classes_[P.argmax(1)] == yt), 2))), flush=True)

"""A binary classifier's teacher with more trees: accuracy beside HGB, the WM barrier, 4-site merges.

The teacher of a classification grows ``teacher_trees(n_estimators, n_classes)`` boosted trees
(``sktree_lmc.training._plan``); for two classes, ``n_estimators``. This one-off multiplies that
by ``factor`` for every task (a monkeypatch of ``sktree_lmc.training._fit.teacher_trees``)
and measures both axes (issue 63, binary california):

* ``accuracy NAMES SEEDS FACTORS``: the default classifier's test accuracy per factor beside
  ``HistGradientBoostingClassifier()`` (``bench_accuracy.split``, 10,000 / 10,000 stratified,
  seed s for the split and ``random_state``), with the fit's seconds;
* ``barrier NAMES FACTORS``: the WM test barrier of two default models (seeds ``$PAIR``,
  default ``1,2``) on 2,000 test rows, 11 lambdas (``interpolation_curve``, aligned on the
  training rows), with the endpoints' accuracies;
* ``apart NAMES SEEDS FACTOR``: four default classifiers on IID quarters (the protocol of
  ``merge_apart_default_oneoff.py``), their ensemble and the default merge.

    python benchmarks/oneoff/binary_teacher_trees_oneoff.py accuracy california,electricity 0,1,2 1,2,4
    PAIR=3,4 python benchmarks/oneoff/binary_teacher_trees_oneoff.py barrier electricity 1,2
    python benchmarks/oneoff/binary_teacher_trees_oneoff.py apart california 0 2
"""
import json, os, sys, time, warnings
import numpy as np, torch
torch.set_num_threads(1); warnings.simplefilter("ignore")
from sklearn.ensemble import HistGradientBoostingClassifier
from benchmarks.bench_accuracy import load, split
from benchmarks.bench_apart import _site_seed, sites
from sktree_lmc import SoftTreeEnsembleClassifier, interpolation_curve, lmc_barrier, merge_estimators
import sktree_lmc.training._fit as fit_module

REAL = fit_module.teacher_trees


def factor(f):
    fit_module.teacher_trees = (lambda n, c=0: int(n) * f) if f != 1 else REAL


mode, names = sys.argv[1], sys.argv[2].split(",")
ints = lambda a: [int(v) for v in a.split(",")]
for name in names:
    X_all, y_all = load("raw", name)
    if mode == "accuracy":
        for seed in ints(sys.argv[3]):
            X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, seed, True)
            out = dict(data=name, seed=seed, hgb=round(100 * HistGradientBoostingClassifier(
                random_state=seed).fit(X, y).score(Xt, yt), 2))
            for f in ints(sys.argv[4]):
                factor(f)
                t = time.perf_counter()
                m = SoftTreeEnsembleClassifier(random_state=seed).fit(X, y)
                out[f"x{f}"] = round(100 * m.score(Xt, yt), 2)
                out[f"x{f}_s"] = round(time.perf_counter() - t, 1)
            print(json.dumps(out), flush=True)
    elif mode == "barrier":
        pair = ints(os.environ.get("PAIR", "1,2"))
        n = len(y_all); n_train = min(10_000, n // 2)
        X, Xt, y, yt = split(X_all, y_all, n_train, min(10_000, n - n_train), 0, True)
        ev = np.random.RandomState(0).choice(len(yt), min(2000, len(yt)), replace=False)
        out = dict(data=name, pair=pair)
        for f in ints(sys.argv[3]):
            factor(f)
            a, b = (SoftTreeEnsembleClassifier(random_state=s).fit(X, y) for s in pair)
            curve = interpolation_curve(a, b, Xt[ev], yt[ev], lambdas=11, aligner="wm", X_align=X)
            out[f"x{f}_barrier"] = round(float(lmc_barrier(curve)), 3)
            out[f"x{f}_ends"] = [round(100 * a.score(Xt, yt), 2), round(100 * b.score(Xt, yt), 2)]
        print(json.dumps(out), flush=True)
    else:
        f = int(sys.argv[4]); factor(f)
        for seed in ints(sys.argv[3]):
            X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, seed, False)
            parts = sites("iid", 4, X, y, seed)
            models = [SoftTreeEnsembleClassifier(random_state=_site_seed("apart", seed, k)).fit(
                X[i], y[i]) for k, i in enumerate(parts)]
            w = [len(i) for i in parts]
            P = [m.predict_proba(Xt) for m in models]
            ens = np.average(P, axis=0, weights=w)
            acc = lambda Q: round(100 * np.mean(models[0].classes_[Q.argmax(1)] == yt), 2)
            d = merge_estimators(models, weights=w)
            print(json.dumps(dict(data=name, seed=seed, factor=f, site=round(np.mean([acc(q) for q in P]), 2),
                                  ens=acc(ens), default=round(100 * d.score(Xt, yt), 2),
                                  aligner=d.merge_report_.aligner)), flush=True)
    factor(1)

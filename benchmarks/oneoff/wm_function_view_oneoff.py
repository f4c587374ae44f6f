"""Weight matching through the features' function view vs the scaled, summed view (issue 60).

Site models as ``merge_apart_default_oneoff.py`` (same split, IID quarters, seeds
``1000 * seed + k``, own encoders, the same cache ``benchmarks/results/apart_default``). Per
(dataset, seed), test accuracy (%) of: the mean site, the sites' ensemble (probabilities
averaged with the row counts), the plain weight-matching merge
(``aligner="wm", distill=False``), the plain activation-matching merge (``ModelAligner(
method="am", random_state=0)`` on the 2,048 probe rows that ``aligner="auto"`` uses,
``distill=False``) and the default merge (``aligner="auto"``, ``distill="auto"``, with the
aligner it kept), each with the merge report's disagreement and its seconds. ``--same``
instead fits two default classifiers on the same rows (site 0's quarter, seeds
``1000 * seed`` and ``1000 * seed + 1``, one encoder; cached as ``*_same_*``) and prints
their plain WM midpoint merge's accuracy and a hash of its test probabilities (the same
encoder: the function view must leave the alignment as it was). ``--pwl`` fits every model
with ``numeric_encoding="piecewise_linear"`` instead (cached as ``*_pwl_*``): columns of
several overlapping hat features, where the function view differs even for one encoder.
``--feature`` gives the sites ``bench_apart.sites("feature", 4, ...)`` (skewed by the first
column, 80 % concentration) instead of IID quarters (cached as ``*_feature4_*``): sites whose
quantile transforms of a column differ more.

Run once with the code to measure and once with the code before (``PYTHONPATH`` picks the
package; ``--label NAME`` is the ``code`` the output records, ``new`` by default):

    PYTHONPATH=. nice -n 19 python benchmarks/oneoff/wm_function_view_oneoff.py credit,electricity 0,1 > new.jsonl
    PYTHONPATH=<checkout before>:. nice -n 19 python benchmarks/oneoff/wm_function_view_oneoff.py credit 0,1 --label main > main.jsonl
    PYTHONPATH=. nice -n 19 python benchmarks/oneoff/wm_function_view_oneoff.py credit 0 --same
    PYTHONPATH=. nice -n 19 python benchmarks/oneoff/wm_function_view_oneoff.py credit 0 --same --pwl

JSON lines in ``docs/_static/benchmarks/apart_scaled/wm_function_view.jsonl``.
"""
import hashlib
import json
import os
import sys
import time
import warnings

import joblib
import numpy as np
import torch

torch.set_num_threads(1)
warnings.simplefilter("ignore")
from benchmarks.bench_accuracy import load, split  # noqa: E402
from benchmarks.bench_apart import _site_seed, sites  # noqa: E402
from sktree_lmc import ModelAligner, SoftTreeEnsembleClassifier, merge_estimators  # noqa: E402
from sktree_lmc.merging._bridge import own_models  # noqa: E402
from sktree_lmc.merging._report import members_probe_rows  # noqa: E402

CACHE = "benchmarks/results/apart_default"
os.makedirs(CACHE, exist_ok=True)
CODE = sys.argv[sys.argv.index("--label") + 1] if "--label" in sys.argv else "new"
PWL = "--pwl" in sys.argv
TAG, SETTINGS = ("_pwl", dict(numeric_encoding="piecewise_linear")) if PWL else ("", {})
SITES = "feature" if "--feature" in sys.argv else "iid"


def _cached(path, fit):
    if os.path.exists(path):
        return joblib.load(path)
    model = fit()
    joblib.dump(model, path)
    return model


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t, 1)


def apart(name, seed, X, y, Xt, yt):
    parts = sites(SITES, 4, X, y, seed)
    models = [_cached(f"{CACHE}/{name}_{seed}{TAG}_{SITES}4_{k}.joblib",
                      lambda: SoftTreeEnsembleClassifier(random_state=_site_seed("apart", seed, k),
                                                         device="cpu", **SETTINGS).fit(X[idx], y[idx]))
              for k, idx in enumerate(parts)]
    w = [len(i) for i in parts]
    P = [m.predict_proba(Xt) for m in models]
    acc = lambda Q: round(100 * np.mean(models[0].classes_[Q.argmax(1)] == yt), 2)  # noqa: E731
    out = dict(data=name, seed=seed, code=CODE, pwl=PWL, sites=SITES, site=round(np.mean([acc(q) for q in P]), 2),
               ens=acc(np.average(P, axis=0, weights=w)))
    probe = members_probe_rows(own_models(models), np.asarray(w, float) / sum(w))
    runs = {"wm": dict(aligner="wm", distill=False),
            "am": dict(aligner=ModelAligner(method="am", random_state=0), X=probe, distill=False),
            "auto": {}}
    for key, kwargs in runs.items():
        merged, seconds = _timed(lambda: merge_estimators(models, weights=w, **kwargs))
        out[key] = round(100 * merged.score(Xt, yt), 2)
        out[f"{key}_dis"] = round(float(merged.merge_report_.disagreement), 4)
        out[f"{key}_s"] = seconds
    out["auto_aligner"] = merged.merge_report_.aligner
    return out


def same(name, seed, X, y, Xt, yt):
    idx = sites("iid", 4, X, y, seed)[0]
    a, b = (_cached(f"{CACHE}/{name}_{seed}{TAG}_same_{k}.joblib",
                    lambda: SoftTreeEnsembleClassifier(random_state=1000 * seed + k, device="cpu",
                                                       **SETTINGS).fit(X[idx], y[idx]))
            for k in (0, 1))
    merged, seconds = _timed(lambda: merge_estimators(a, b, aligner="wm", distill=False))
    P = merged.predict_proba(Xt)
    return dict(data=name, seed=seed, code=CODE, pwl=PWL, same_encoder=True,
                a=round(100 * a.score(Xt, yt), 2), b=round(100 * b.score(Xt, yt), 2),
                wm=round(100 * merged.score(Xt, yt), 2),
                wm_dis=round(float(merged.merge_report_.disagreement), 4), wm_s=seconds,
                proba_sha=hashlib.sha1(np.ascontiguousarray(P).tobytes()).hexdigest()[:12])


def main():
    names, seeds = sys.argv[1].split(","), [int(s) for s in sys.argv[2].split(",")]
    run = same if "--same" in sys.argv else apart
    for name in names:
        X_all, y_all = load("raw", name)
        for seed in seeds:
            X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, seed, False)
            print(json.dumps(run(name, seed, X, y, Xt, yt)), flush=True)


if __name__ == "__main__":
    main()

"""Default classifiers fitted apart on K IID parts of the training rows, merged three ways.

The measurement behind "Merges of models trained apart, on data the merge was not tuned on"
(docs/benchmarks.md): ``credit`` (the robustness set) and the seven Tabular-Benchmark datasets,
10,000 training rows (half the rows for data of fewer than 16,000 rows; credit: 10,000 of
16,714) and up to 10,000 test rows, stratified, split by ``seed``; the training rows split into K IID
parts by ``RandomState(seed).permutation``; site ``k`` fits
``SoftTreeEnsembleClassifier(random_state=100 * seed + k)`` on its part with its own encoder.
Per (dataset, seed): the mean site, the sites' ensemble (probabilities averaged), and the
merges of ``merge_estimators``: weight matching on raw coefficients (``wm_raw``, the paper's),
weight matching in the features' units (``wm``, the default ``scale_features=True``),
activation matching on the training rows (``am``), and the default ``aligner="auto"`` (no
rows: probe rows from the encoders), with its report.

    python benchmarks/oneoff/merge_apart_sites_oneoff.py fit credit 4 0
    python benchmarks/oneoff/merge_apart_sites_oneoff.py merge OUT.jsonl 4 0,1,2 credit ...
    python benchmarks/oneoff/merge_apart_sites_oneoff.py auto OUT.jsonl 4 0,1,2 credit ...

Site models are cached in ``benchmarks/results/apart_sites`` (git ignores it). The seven
datasets are read from ``$SKTREE_LMC_DATA``, credit from ``../shared/data/robustness``.
"""
import json
import sys
import time
import warnings
from pathlib import Path

import joblib
import numpy as np
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: benchmarks
from sktree_lmc import (
    MergeQualityWarning,
    ModelAligner,
    SoftTreeEnsembleClassifier,
    merge_estimators,
)

def data(seed=0, name="credit"):
    from benchmarks._common import frame

    f = frame(name)
    X, y = f.drop(columns=["target"]).to_numpy(np.float64), f["target"].to_numpy()
    n = len(y); ntr = 10000 if n >= 16000 else n // 2; nte = min(10000, n - ntr)
    return train_test_split(X, y, train_size=ntr, test_size=nte, random_state=seed, stratify=y)

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "benchmarks" / "results" / "apart_sites"


def sites(name="credit", K=4, seed=0, cache=CACHE):
    Xtr, Xte, ytr, yte = data(seed, name)
    Path(cache).mkdir(parents=True, exist_ok=True)
    parts = np.array_split(np.random.RandomState(seed).permutation(len(ytr)), K)
    models = []
    for k, idx in enumerate(parts):
        p = Path(cache) / f"{name}_K{K}_s{seed}_{k}.joblib"
        if p.exists():
            models.append(joblib.load(p)); continue
        t = time.time()
        m = SoftTreeEnsembleClassifier(random_state=100 * seed + k).fit(Xtr[idx], ytr[idx])
        print(f"site {k}: {time.time()-t:.0f}s acc {m.score(Xte, yte):.4f}", flush=True)
        joblib.dump(m, p); models.append(m)
    return models, (Xtr, Xte, ytr, yte), parts




def merge(argv):
    """Mean site, ensemble, wm_raw, wm, am (JSON lines, resumable)."""
    out = Path(argv[1]); K = int(argv[2]); seeds = [int(s) for s in argv[3].split(",")]
    names = argv[4:]
    done = {(r["data"], r["K"], r["seed"]) for r in map(json.loads, out.open())} if out.exists() else set()
    for seed in seeds:
        for name in names:
            if (name, K, seed) in done: continue
            models, (Xtr, Xte, ytr, yte), parts = sites(name, K, seed)
            w = [len(p) for p in parts]
            acc = [m.score(Xte, yte) for m in models]
            P = np.average([m.predict_proba(Xte) for m in models], axis=0, weights=w)
            rec = dict(data=name, K=K, seed=seed, mean_site=float(np.mean(acc)),
                       ensemble=float(np.mean(models[0].classes_[P.argmax(1)] == yte)))
            for key, al in [("wm_raw", ModelAligner(scale_features=False)), ("wm", "wm"), ("am", "am")]:
                t = time.time()
                m = merge_estimators(models, aligner=al, X=Xtr, weights=w) if K > 2 else \
                    merge_estimators(models[0], models[1], aligner=al, X=Xtr)
                rec[key] = float(m.score(Xte, yte)); rec[key + "_s"] = round(time.time() - t, 1)
            print(json.dumps(rec), flush=True)
            with out.open("a") as f: f.write(json.dumps(rec) + "\n")


def auto(argv):
    """The default merge (aligner='auto', no rows) and raw WM's report."""
    out = Path(argv[1]); K = int(argv[2]); seeds = [int(s) for s in argv[3].split(",")]
    names = argv[4:]
    done = {(r["data"], r["seed"]) for r in map(json.loads, out.open())} if out.exists() else set()
    for seed in seeds:
        for name in names:
            if (name, seed) in done: continue
            models, (Xtr, Xte, ytr, yte), parts = sites(name, K, seed)
            rec = dict(data=name, K=K, seed=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("always", MergeQualityWarning)
                t = time.time(); m = merge_estimators(models); rec["auto_s"] = round(time.time() - t, 1)
                rec.update(auto=float(m.score(Xte, yte)), auto_aligner=m.merge_report_.aligner,
                           candidates=m.merge_report_.candidates, auto_flagged=m.merge_report_.flagged)
                raw = merge_estimators(models, aligner=ModelAligner(scale_features=False))
                rec.update(wm_raw_disagreement=raw.merge_report_.disagreement, wm_raw_flagged=raw.merge_report_.flagged)
            print(json.dumps(rec), flush=True)
            with out.open("a") as f: f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[1:]
    if command == "fit":
        sites(args[1], int(args[2]), int(args[3]))
    else:
        {"merge": merge, "auto": auto}[command](args)

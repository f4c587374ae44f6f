"""4 IID sites of default classifiers on a multiclass set (digits) and mixed data (strings + NaN),
merged by the default (no rows) against the sites and their ensemble; 3 seeds."""
import sys, json, warnings, numpy as np
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: benchmarks
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators, ModelAligner
from benchmarks.bench_accuracy import load
warnings.simplefilter("ignore")
def run(name, X, y, seed, K=4):
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed, stratify=y)
    parts = np.array_split(np.random.RandomState(seed).permutation(len(ytr)), K)
    take = (lambda A, i: A.iloc[i]) if hasattr(Xtr, "iloc") else (lambda A, i: A[i])
    models = [SoftTreeEnsembleClassifier(random_state=100 * seed + k).fit(take(Xtr, i), ytr[i]) for k, i in enumerate(parts)]
    acc = [m.score(Xte, yte) for m in models]
    P = np.mean([m.predict_proba(Xte) for m in models], axis=0)
    ens = np.mean(models[0].classes_[P.argmax(1)] == yte)
    m = merge_estimators(models)
    raw = merge_estimators(models, aligner=ModelAligner(scale_features=False))
    rec = dict(data=name, seed=seed, mean_site=float(np.mean(acc)), ensemble=float(ens), auto=float(m.score(Xte, yte)),
               aligner=m.merge_report_.aligner, disagreement=m.merge_report_.disagreement, flagged=m.merge_report_.flagged,
               wm_raw=float(raw.score(Xte, yte)))
    print(json.dumps(rec), flush=True)
Xd, yd = load_digits(return_X_y=True)
Xm, ym = load("mixed", "electricity")
idx = np.random.RandomState(0).choice(len(ym), 20000, replace=False)
Xm, ym = Xm.iloc[idx].reset_index(drop=True), ym[idx]
for seed in [0, 1, 2]:
    run("digits", Xd, yd, seed)
    run("electricity_mixed", Xm, ym, seed)

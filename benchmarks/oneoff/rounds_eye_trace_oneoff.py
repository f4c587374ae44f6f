"""Per-round trace of the federated rounds on eye_movements (issue 62): where the gap to the
full-data model comes from.

The protocol of ``benchmarks/bench_rounds.py`` (8 IID shards x 10 rounds of
``SoftTreeEnsembleClassifier(random_state=s, max_epochs=15)`` against the full-data
``SoftTreeEnsembleClassifier(random_state=s)``), with the round-level early stopping's patience
raised to 100 (all 10 rounds run; the model returned is still the kept one, the last round within
one standard error of the best validation loss). After every round (a ``checkpoint`` callable):
the merged model's test accuracy and log-loss, the validation loss the rounds use, the shard
models' mean test accuracy and log-loss and their ensemble's (mean of probabilities). Once per
seed: the full-data model (cached in ``$SKTREE_LMC_CACHE`` when that is set) and the
default estimator fitted on one shard's rows (a random eighth of the training rows) alone.

    python benchmarks/oneoff/rounds_eye_trace_oneoff.py LABEL SEEDS [ROUNDS_KW_JSON [EST_KW_JSON]] [--datasets a,b]

``LABEL`` names the variant, e.g. ``base``, ``tw0`` with ``'{}' '{"teacher_weight": 0}'``.
JSON lines in ``docs/_static/benchmarks/rounds/eye_trace.jsonl``.
"""
import json, os, sys, time, warnings
from pathlib import Path
import torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import joblib
import numpy as np
from sklearn.metrics import log_loss
from benchmarks.bench_rounds import load_split
from sktree_lmc import SoftTreeEnsembleClassifier, ShardedSoftTreeEnsemble
import sktree_lmc.federation._sharded as S

OUT = ROOT / "docs/_static/benchmarks/rounds/eye_trace.jsonl"
args = [a for a in sys.argv[1:] if not a.startswith("--")]
label, seeds = args[0], [int(s) for s in args[1].split(",")]
rounds_kw = json.loads(args[2]) if len(args) > 2 else {}
est_kw = json.loads(args[3]) if len(args) > 3 else {}
datasets = ["eye_movements"]
for a in sys.argv[1:]:
    if a.startswith("--datasets="):
        datasets = a.split("=", 1)[1].split(",")
force = os.environ.get("TRACE_FORCE", "1") == "1"
orig = S.ShardedSoftTreeEnsemble._rounds_validation


def patched(self, base, epochs, validation):
    v = orig(self, base, epochs, validation)
    return v._replace(patience=100) if hasattr(v, "_replace") else type(v)(v.tol, 100, v.rows)


if force:
    S.ShardedSoftTreeEnsemble._rounds_validation = patched


def metrics(proba, y, classes):
    return (round(100 * float(np.mean(classes[proba.argmax(1)] == y)), 2),
            round(float(log_loss(y, proba, labels=classes)), 4))


def emit(row):
    print(json.dumps(row), flush=True)
    with open(OUT, "a") as f:
        f.write(json.dumps(row) + "\n")


for name in datasets:
    for seed in seeds:
        Xtr, Xte, ytr, yte = load_split(name, seed)
        folder = os.environ.get("SKTREE_LMC_CACHE")
        cache = Path(folder) / f"{name}_{seed}.joblib" if folder else None
        if cache is not None and cache.exists():
            full, full_s = joblib.load(cache)
        else:
            t = time.process_time()
            full = SoftTreeEnsembleClassifier(random_state=seed).fit(Xtr, ytr)
            full_s = time.process_time() - t
        classes = full.classes_
        fa, fl = metrics(full.predict_proba(Xte), yte, classes)
        base = dict(label=label, dataset=name, seed=seed, rounds_kw=rounds_kw, est_kw=est_kw)
        if label == "base":
            rng = np.random.default_rng(seed)
            idx = rng.permutation(len(ytr))[: len(ytr) // 8]
            one = SoftTreeEnsembleClassifier(random_state=seed).fit(Xtr[idx], ytr[idx])
            oa, ol = metrics(one.predict_proba(Xte), yte, classes)
            one15 = SoftTreeEnsembleClassifier(random_state=seed, max_epochs=15).fit(Xtr[idx], ytr[idx])
            o15a, o15l = metrics(one15.predict_proba(Xte), yte, classes)
            emit(dict(base, kind="reference", full_acc=fa, full_logloss=fl, full_epochs=int(
                getattr(full, "n_iter_", -1)), one_shard_acc=oa, one_shard_logloss=ol,
                one_shard_15ep_acc=o15a, one_shard_15ep_logloss=o15l, shard_rows=len(idx)))
        trace = []

        def ckpt(state):
            merged = state["merged"]
            pm = merged.predict_proba(Xte)
            ma, ml = metrics(pm, yte, classes)
            ps = [s.predict_proba(Xte) for s in state["shards"]]
            sm = [metrics(p, yte, classes) for p in ps]
            ea, el = metrics(np.mean(ps, axis=0), yte, classes)
            h = state["history"][-1]
            trace.append(dict(round=len(state["history"]), merged_acc=ma, merged_logloss=ml,
                              shard_mean_acc=round(float(np.mean([a for a, _ in sm])), 2),
                              shard_mean_logloss=round(float(np.mean([l for _, l in sm])), 4),
                              shard_ens_acc=ea, shard_ens_logloss=el,
                              val_loss=None if h.get("validation_loss") is None
                              else round(float(h["validation_loss"]), 4),
                              sped_up=h.get("sped_up"), dropped=h.get("speedup_dropped")))
            print(json.dumps(trace[-1]), flush=True)

        t = time.process_time()
        est = SoftTreeEnsembleClassifier(random_state=seed, max_epochs=15, **est_kw)
        kw = dict(dict(n_shards=8, split="iid", n_rounds=10), **rounds_kw)
        r = ShardedSoftTreeEnsemble(est, random_state=seed, checkpoint=ckpt, **kw).fit(Xtr, ytr)
        ra, rl = metrics(r.predict_proba(Xte), yte, classes)
        emit(dict(base, kind="rounds", forced_all_rounds=force, full_acc=fa, full_logloss=fl,
                  rounds_acc=ra, rounds_logloss=rl, gap=round(ra - fa, 2),
                  n_rounds=int(r.n_rounds_), secs=round(time.process_time() - t, 1), trace=trace))

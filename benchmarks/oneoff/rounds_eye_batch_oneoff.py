"""Issue 62: is eye_movements' rounds gap the shards' small minibatches? The full-data
``SoftTreeEnsembleClassifier(random_state=s)`` at ``batch_size`` 64 (the rounds' shard batch of
8 shards, ``shard_batch_size="auto"``) and 512 (the default), on ``bench_rounds.load_split``.

    python benchmarks/oneoff/rounds_eye_batch_oneoff.py SEEDS [BATCHES] [DATASET] [EST_KW_JSON]

JSON lines appended to ``docs/_static/benchmarks/rounds/eye_trace.jsonl`` (``kind="full_batch"``).
"""
import json, sys, time, warnings
from pathlib import Path
import torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import numpy as np
from sklearn.metrics import log_loss
from benchmarks.bench_rounds import load_split
from sktree_lmc import SoftTreeEnsembleClassifier

OUT = ROOT / "docs/_static/benchmarks/rounds/eye_trace.jsonl"
seeds = [int(s) for s in sys.argv[1].split(",")]
batches = [int(b) for b in sys.argv[2].split(",")] if len(sys.argv) > 2 else [64]
# optional 4th argument: JSON of more estimator parameters (e.g. the rounds' budget:
# '{"max_epochs": 50, "early_stopping": false}')
extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
name = sys.argv[3] if len(sys.argv) > 3 else "eye_movements"
for seed in seeds:
    Xtr, Xte, ytr, yte = load_split(name, seed)
    for b in batches:
        t = time.process_time()
        m = SoftTreeEnsembleClassifier(random_state=seed, batch_size=b, **extra).fit(Xtr, ytr)
        p = m.predict_proba(Xte)
        row = dict(kind="full_batch", dataset=name, seed=seed, batch_size=b, extra=extra,
                   acc=round(100 * float(np.mean(m.classes_[p.argmax(1)] == yte)), 2),
                   logloss=round(float(log_loss(yte, p)), 4), epochs=int(m.n_iter_), label_smoothing=float(m.label_smoothing_),
                   secs=round(time.process_time() - t, 1))
        print(json.dumps(row), flush=True)
        with open(OUT, "a") as f:
            f.write(json.dumps(row) + "\n")

"""Multiclass federated rounds against the full-data fit: the sharded teacher's trees.

``ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(random_state=s, max_epochs=15),
n_shards=8, split="iid", n_rounds=10, random_state=s)`` on the ``benchmarks.bench_tasks``
splits of digits and hpc (seeds 0-2), against ``SoftTreeEnsembleClassifier(random_state=s)``
on all training rows (LABEL ``full``). Run once with the code before the sharded teachers
followed ``teacher_trees`` (LABEL ``base``, PYTHONPATH at a checkout of 6af2afd) and once
after (``new``); JSON lines in ``docs/_static/benchmarks/rounds/multiclass_teacher.jsonl``.

    PYTHONPATH=<checkout> python benchmarks/oneoff/rounds_multiclass_oneoff.py LABEL digits,hpc 0,1,2
"""
import sys, json, time, warnings, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
sys.path.append(str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from benchmarks.bench_tasks import DATASETS, split
from sktree_lmc import SoftTreeEnsembleClassifier, ShardedSoftTreeEnsemble
label = sys.argv[1]
for name in sys.argv[2].split(","):
    ds = DATASETS[name]; X, y = ds.load()
    for seed in [int(s) for s in sys.argv[3].split(",")]:
        Xtr, Xte, ytr, yte = split(ds, X, y, seed)
        t = time.process_time()
        if label == "full":
            m = SoftTreeEnsembleClassifier(random_state=seed).fit(Xtr, ytr)
            print(json.dumps(dict(code=label, set=name, seed=seed, full=round(100 * m.score(Xte, yte), 2),
                                  secs=round(time.process_time() - t, 1))), flush=True)
            continue
        r = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(random_state=seed, max_epochs=15),
                                    n_shards=8, split="iid", n_rounds=10, random_state=seed).fit(Xtr, ytr)
        print(json.dumps(dict(code=label, set=name, seed=seed, rounds=round(100 * r.score(Xte, yte), 2),
                              n_rounds=int(r.n_rounds_), secs=round(time.process_time() - t, 1))), flush=True)

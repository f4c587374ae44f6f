"""Federated rounds with a proximal term (FedProx): is eye_movements' gap the shards' drift?

Every local fit of the rounds adds ``mu / 2 * ||theta - theta_0||^2`` to its loss, ``theta_0``
the parameters it starts from (the round's merged model; the shared start in round 1), on
the torch engine (the autograd step is patched; ``mu=0`` is the plain step). The protocol of
``benchmarks/bench_rounds.py``: 8 IID shards x 10 rounds of
``SoftTreeEnsembleClassifier(random_state=s, max_epochs=15)``. JSON lines in
``docs/_static/benchmarks/rounds/fedprox_eye_seed0.jsonl``.

    SKTREE_LMC_ENGINE=torch python benchmarks/oneoff/rounds_fedprox_oneoff.py MU eye_movements 0
"""
import sys, json, time, warnings, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
sys.path.append(str(__import__("pathlib").Path(__file__).resolve().parents[2]))
import sktree_lmc.training._training as T
import sktree_lmc.training._fit as F
from benchmarks.bench_rounds import load_split
from sktree_lmc import SoftTreeEnsembleClassifier, ShardedSoftTreeEnsemble
from sklearn.metrics import log_loss
MU = float(sys.argv[1])
ANCHOR = {}
orig_train, orig_step = F.train, T._train_step

def train(module, *a, **k):
    ANCHOR["p"] = [p.detach().clone() for p in module.parameters()]
    try:
        return orig_train(module, *a, **k)
    finally:
        ANCHOR.clear()

def step(module, optimizer, loss_fn, data, idx, **kwargs):
    """The package's autograd step, each row's loss plus the proximal term: the weighted
    mean of the rows' losses gains the term itself."""
    def with_prox(output, target):
        per_row = loss_fn(output, target)
        if MU > 0 and "p" in ANCHOR:
            per_row = per_row + 0.5 * MU * sum(((p - q) ** 2).sum() for p, q in
                                                zip(module.parameters(), ANCHOR["p"]))
        return per_row
    return orig_step(module, optimizer, with_prox, data, idx, **kwargs)

F.train = train
T._train_step = step
for name in sys.argv[2].split(","):
    for seed in [int(s) for s in sys.argv[3].split(",")]:
        Xtr, Xte, ytr, yte = load_split(name, seed)
        t = time.process_time()
        r = ShardedSoftTreeEnsemble(SoftTreeEnsembleClassifier(random_state=seed, max_epochs=15),
                                    n_shards=8, split="iid", n_rounds=10, random_state=seed).fit(Xtr, ytr)
        print(json.dumps(dict(mu=MU, set=name, seed=seed, rounds=round(100 * r.score(Xte, yte), 2),
                              logloss=round(log_loss(yte, r.predict_proba(Xte)), 5),
                              n_rounds=int(r.n_rounds_), secs=round(time.process_time() - t, 1))), flush=True)

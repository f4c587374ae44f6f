"""How the shards optimize locally (issue 62): levers on eye_movements' federated rounds.

The protocol of ``benchmarks/bench_rounds.py`` (8 IID shards x 10 rounds of
``SoftTreeEnsembleClassifier(random_state=s, max_epochs=15)`` against the full-data
``SoftTreeEnsembleClassifier(random_state=s)``), all 10 rounds forced as in
``rounds_eye_trace_oneoff.py`` (patience 100; the model returned is still the kept one).
Levers, patched privately here (the library is unchanged):

- ``base``: the default.
- ``adam_mv``: from round 2 on every shard starts its round from one Adam state, the
  average (by merge weight) of all shards' first and second moments, each mapped into the
  merged basis first, instead of its own.
- ``adam_v``: its own first moment, the averaged second moment (one Adam scaling shared).
- ``adam_v_m0``: the averaged second moment, the first moment reset to 0.
- ``fedadam``: FedAdam: the server applies Adam (b1 0.9, b2 0.99, bias-corrected) to the
  averaged delta of the round, per tensor at the step size of the round's averaged delta
  (its RMS, times ``FEDADAM_LR``, default 1), tau 1e-3 of that.
- ``tw1``: the shards distill the shared teacher alone (``teacher_weight=1``) in the rounds.
- ``torch_base``: the default on the torch engine (``SKTREE_LMC_ENGINE=torch``), the
  reference of ``scaffold``.
- ``scaffold``: SCAFFOLD's control variates (torch engine; from round 2 on): before its
  local fit every shard's full-batch gradient ``g_k`` of its training loss at the merged
  model is taken (a first pass), and every local step adds ``c - g_k`` to its gradient
  (``c``: the row-weighted mean of the ``g_k``), so that the local steps follow the
  gradient of all shards' rows rather than of the shard's own, to first order.
- ``scaffold_tree``: the same, the additive table left out of the correction (its rare bins
  get a constant corrected gradient that Adam turns into full-size steps);
  ``scaffold_half``: the correction times 0.5; ``scaffold_tree_half``: both.
- ``noadd``: ``additive_bins=None`` for the full model *and* the rounds (is the additive
  term's per-shard fit the gap?); the full model is refitted for it.

    python benchmarks/oneoff/rounds_eye_adam_oneoff.py LEVER SEEDS [--datasets=a,b]

JSON lines in ``docs/_static/benchmarks/rounds/eye_adam.jsonl`` (a (lever, dataset, seed)
already there is skipped: resumable). ``$SKTREE_LMC_CACHE``: folder of cached full models
(``{dataset}_{seed}.joblib``, as the trace writes them).
"""
import copy, json, os, sys, time, warnings
from pathlib import Path
import torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
if sys.argv[1] == "torch_base" or sys.argv[1].startswith("scaffold"):
    os.environ["SKTREE_LMC_ENGINE"] = "torch"
import joblib
import numpy as np
from sklearn.metrics import log_loss
from benchmarks.bench_rounds import load_split
from sktree_lmc import SoftTreeEnsembleClassifier, ShardedSoftTreeEnsemble
from sktree_lmc.model._params import TreeParams
from sktree_lmc.merging._matching import _align_optimizer_state, weight_matching
import sktree_lmc.federation._sharded as S
import sktree_lmc.federation._federated as F

OUT = Path(os.environ.get("EYE_ADAM_OUT", ROOT / "docs/_static/benchmarks/rounds/eye_adam.jsonl"))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
lever, seeds = args[0], [int(s) for s in args[1].split(",")]
datasets = ["eye_movements"]
for a in sys.argv[1:]:
    if a.startswith("--datasets="):
        datasets = a.split("=", 1)[1].split(",")
FORCE = os.environ.get("TRACE_FORCE", "1") == "1"
rounds_kw, est_kw, full_kw = {}, {}, {}

# -- round-level early stopping forced off (all 10 rounds), as the trace -------------------
orig_validation = S.ShardedSoftTreeEnsemble._rounds_validation


def forced(self, base, epochs, validation):
    v = orig_validation(self, base, epochs, validation)
    return v._replace(patience=100)


if FORCE:
    S.ShardedSoftTreeEnsemble._rounds_validation = forced

# -- (a) one Adam state / scaling shared by all shards -------------------------------------
orig_round_inputs = F._round_inputs


def _avg(params_list, w):
    total = None
    for p, wk in zip(params_list, w):
        term = p.astype(np.float64) * float(wk)
        total = term if total is None else total + term
    return total


def shared_adam_inputs(mode):
    def patched(clones, state, r, sampled, settings, sped_up=False):
        estimators, starts, sent = orig_round_inputs(clones, state, r, sampled, settings,
                                                     sped_up=sped_up)
        if r == 0:
            return estimators, starts, sent
        aligned, keep = [], []
        for est, start in zip(estimators, starts):
            st = getattr(est, "optimizer_state_", None)
            if start.keep_optimizer and st is not None:
                aligned.append(st if start.alignment is None
                               else _align_optimizer_state(st, start.alignment))
                keep.append(True)
            else:
                aligned.append(None)
                keep.append(False)
        have = [a for a in aligned if a is not None]
        if not have:
            return estimators, starts, sent
        w = np.full(len(have), 1.0 / len(have))
        m_avg = TreeParams(*_avg([a["exp_avg"] for a in have], w).arrays())
        v_avg = TreeParams(*_avg([a["exp_avg_sq"] for a in have], w).arrays())
        step = int(np.max([a["step"] for a in have]))
        new_est, new_starts = [], []
        for est, start, own in zip(estimators, starts, aligned):
            if own is None:
                new_est.append(est)
                new_starts.append(start)
                continue
            if mode == "mv":
                m = m_avg
            elif mode == "v":
                m = own["exp_avg"]
            else:  # "v_m0"
                m = TreeParams(*(np.zeros_like(a) for a in m_avg.arrays()))
            e = copy.copy(est)
            e.optimizer_state_ = {"step": step, "exp_avg": m, "exp_avg_sq": v_avg}
            new_est.append(e)
            new_starts.append(start._replace(alignment=None))  # already in the merged basis
        return new_est, new_starts, sent

    return patched


# -- (b) FedAdam on the server --------------------------------------------------------------
FEDADAM_LR = float(os.environ.get("FEDADAM_LR", "1"))


def fedadam_step(merged_params, previous, velocity, momentum, learning_rate, arch):
    b1, b2 = 0.9, 0.99
    alignment = weight_matching(previous, merged_params, arch)
    delta = alignment.apply(merged_params).astype(np.float64) - previous
    d = delta.arrays()
    if velocity is None:
        m = [np.zeros_like(a) for a in d]
        v = [np.zeros_like(a) for a in d]
        t = 0
    else:
        m, v, t = velocity
    t += 1
    prev = previous.astype(np.float64).arrays()
    new_arrays, m2, v2 = [], [], []
    for a, mi, vi, p in zip(d, m, v, prev):
        mi = b1 * mi + (1 - b1) * a
        vi = b2 * vi + (1 - b2) * a * a
        mhat, vhat = mi / (1 - b1 ** t), vi / (1 - b2 ** t)
        scale = float(np.sqrt(np.mean(a * a))) if a.size else 0.0
        step = FEDADAM_LR * scale * mhat / (np.sqrt(vhat) + 1e-3 * scale + 1e-30)
        new_arrays.append(p + step)
        m2.append(mi)
        v2.append(vi)
    return TreeParams(*new_arrays), (m2, v2, t), alignment


# -- (c) SCAFFOLD's control variates (torch engine) -------------------------------------
import sktree_lmc.training._fit as FIT
import sktree_lmc.training._training as T
from sktree_lmc.training._plan import FitPlan
SC = {"phase": None, "k": None, "grads": {}, "corr": {}, "cur": None}


class _GradDone(Exception):
    pass


orig_train, orig_step, orig_local_fit = FIT.train, T._train_step, F._LocalShards.fit


def sc_train(module, optimizer, loss_fn, data, train_idx, **kw):
    if SC["phase"] == "grad":
        idx = torch.as_tensor(train_idx, device=data.X.device)
        inputs, target, w = data.rows(idx)
        module.train()
        per_row = T._member_loss(module, loss_fn, inputs, target, kw.get("n_members", 1))
        loss = (per_row * w).sum() / w.sum().clamp_min(1e-12)
        names, params = zip(*module.named_parameters())
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        SC["grads"][SC["k"]] = ([torch.zeros_like(p) if g is None or n in SC_SKIP
                                 else g.detach().clone()
                                 for n, p, g in zip(names, params, grads)], float(w.sum()))
        raise _GradDone("gradient taken")
    SC["cur"] = SC["corr"].get(SC["k"]) if SC["phase"] == "train" else None
    try:
        return orig_train(module, optimizer, loss_fn, data, train_idx, **kw)
    finally:
        SC["cur"] = None


def sc_step(module, optimizer, loss_fn, data, idx, **kw):
    corr = SC["cur"]
    if corr is None:
        return orig_step(module, optimizer, loss_fn, data, idx, **kw)

    def corrected(output, target):
        linear = sum((c * p).sum() for c, p in zip(corr, module.parameters()))
        return loss_fn(output, target) + linear  # every row: the mean gains the term

    return orig_step(module, optimizer, corrected, data, idx, **kw)


def sc_local_fit(self, estimators, starts, indices):
    if not starts or isinstance(starts[0], FitPlan):
        return orig_local_fit(self, estimators, starts, indices)
    SC["phase"], SC["grads"] = "grad", {}
    for k, est, start in zip(indices, estimators, starts):
        SC["k"] = k
        try:
            F._shard_fit(k, est, self.data[k], start)
        except Exception as exc:
            if not isinstance(exc.__cause__, _GradDone):
                raise
    total = sum(w for _, w in SC["grads"].values())
    first = next(iter(SC["grads"].values()))[0]
    c = [sum(SC["grads"][k][0][i] * SC["grads"][k][1] for k in SC["grads"]) / total
         for i in range(len(first))]
    SC["corr"] = {k: [SC_SCALE * (ci - gi) for ci, gi in zip(c, g)]
                  for k, (g, _) in SC["grads"].items()}
    SC["phase"] = "train"
    try:
        out = []
        for k, est, start in zip(indices, estimators, starts):
            SC["k"] = k
            out.append(F._shard_fit(k, est, self.data[k], start))
        return out
    finally:
        SC["phase"], SC["corr"] = None, {}


SC_SKIP = ("additive",) if lever.startswith("scaffold_tree") else ()
SC_SCALE = 0.5 if lever.endswith("_half") else 1.0
if lever.startswith("scaffold"):
    FIT.train, T._train_step, F._LocalShards.fit = sc_train, sc_step, sc_local_fit

if lever in ("adam_mv", "adam_v", "adam_v_m0"):
    F._round_inputs = shared_adam_inputs(lever[len("adam_"):])
elif lever == "fedadam":
    F._server_step = fedadam_step
    rounds_kw = {"server_momentum": 0.9}  # turns the server's step on (the patched step's b1)
elif lever == "tw1":
    est_kw = {"teacher_weight": 1.0}
elif lever == "noadd":
    est_kw = full_kw = {"additive_bins": None}
elif lever not in ("base", "torch_base") and not lever.startswith("scaffold"):
    raise SystemExit(f"unknown lever {lever}")


def metrics(proba, y, classes):
    return (round(100 * float(np.mean(classes[proba.argmax(1)] == y)), 2),
            round(float(log_loss(y, proba, labels=classes)), 4))


done = set()
if OUT.exists():
    for line in OUT.read_text().splitlines():
        d = json.loads(line)
        done.add((d["lever"], d["dataset"], d["seed"]))

for name in datasets:
    for seed in seeds:
        if (lever, name, seed) in done:
            print("skip", lever, name, seed)
            continue
        Xtr, Xte, ytr, yte = load_split(name, seed)
        folder = os.environ.get("SKTREE_LMC_CACHE")
        suffix = "" if not full_kw else "_" + "_".join(f"{k}-{v}" for k, v in full_kw.items())
        cache = Path(folder) / f"{name}_{seed}{suffix}.joblib" if folder else None
        if cache is not None and cache.exists():
            full, full_s = joblib.load(cache)
        else:
            t = time.process_time()
            full = SoftTreeEnsembleClassifier(random_state=seed, **full_kw).fit(Xtr, ytr)
            full_s = time.process_time() - t
            if cache is not None:
                joblib.dump((full, full_s), cache)
        classes = full.classes_
        fa, fl = metrics(full.predict_proba(Xte), yte, classes)
        trace = []

        def ckpt(state):
            ma, ml = metrics(state["merged"].predict_proba(Xte), yte, classes)
            sm = [metrics(s.predict_proba(Xte), yte, classes) for s in state["shards"]]
            h = state["history"][-1]
            trace.append(dict(round=len(state["history"]), merged_acc=ma, merged_logloss=ml,
                              shard_mean_logloss=round(float(np.mean([l for _, l in sm])), 4),
                              train_loss=round(float(h["train_loss"]), 4),
                              val_loss=None if h.get("validation_loss") is None
                              else round(float(h["validation_loss"]), 4)))
            print(json.dumps(trace[-1]), flush=True)

        t = time.process_time()
        est = SoftTreeEnsembleClassifier(random_state=seed, max_epochs=15, **est_kw)
        kw = dict(dict(n_shards=8, split="iid", n_rounds=10), **rounds_kw)
        r = ShardedSoftTreeEnsemble(est, random_state=seed, checkpoint=ckpt, **kw).fit(Xtr, ytr)
        ra, rl = metrics(r.predict_proba(Xte), yte, classes)
        row = dict(lever=lever, dataset=name, seed=seed, forced_all_rounds=FORCE,
                   rounds_kw=rounds_kw, est_kw=est_kw, full_kw=full_kw,
                   full_acc=fa, full_logloss=fl, rounds_acc=ra, rounds_logloss=rl,
                   gap=round(ra - fa, 2), n_rounds=int(r.n_rounds_),
                   secs=round(time.process_time() - t, 1), trace=trace)
        print(json.dumps(row), flush=True)
        with open(OUT, "a") as f:
            f.write(json.dumps(row) + "\n")

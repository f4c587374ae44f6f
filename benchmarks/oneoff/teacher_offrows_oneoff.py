"""One-off screen of issue 63 (multiclass ``hpc`` at -1.5 points to HistGradientBoosting): does
the soft-tree student follow its gradient-boosted teacher better *between* the training rows
when it is also trained on extra rows labelled only by the teacher? Not maintained; patches
private internals (``sktree_lmc.training._fit.start_model``).

After the library's ``start_model`` (the teacher grown on the training rows, the distilled
targets built), the patch appends ``ratio * n_train`` extra rows to the fit's encoded inputs,
their targets the teacher's class probabilities only (no labels), their weight the training
rows' mean weight, and adds them to ``train_idx`` (the early-stopping validation rows stay
the real held-out ones). VARIANTs (``name`` or ``name:ratio``):

* ``default``: no extra row (the library as it is);
* ``probe``: rows drawn from the fitted encoder's column distributions joined by its Gaussian
  copula (``probe_columns(encoder, m, joint=True)``, seed = the fit's seed);
* ``shuffle``: a training row with each column replaced, with probability 0.3, by the same
  column of another random training row;
* ``noise``: a training row whose numeric columns move by N(0, 0.3^2) in normal-score space
  (its empirical quantile level among the training rows -> probit + noise -> back through the
  training column's quantiles); categorical columns kept;
* ``hgb``: HistGradientBoostingClassifier(categorical_features="from_dtype") for reference.

Per (dataset, seed, variant), one JSON line: test/train accuracy (%), test log-loss, the
teacher's test accuracy, the student-teacher agreement on the test and training rows, fit
seconds (one thread). Run from the repository root::

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/oneoff/teacher_offrows_oneoff.py \\
        --datasets hpc --seeds 0 1 2 --variants default probe shuffle noise hgb \\
        --out docs/_static/benchmarks/tasks/teacher_offrows_oneoff.jsonl

``--datasets california`` reads the Tabular-Benchmark's binary ``california`` file through
``benchmarks.bench_accuracy`` (``SKTREE_LMC_DATA``).
"""
import argparse, json, sys, time, warnings
from pathlib import Path

import numpy as np, torch
from scipy.special import ndtr, ndtri

torch.set_num_threads(1)
warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks import bench_tasks as bt
from sktree_lmc.encoding._encoding import to_columns
from sktree_lmc.encoding._common_encoding import probe_columns
from sktree_lmc.model._inputs import Inputs
from sktree_lmc._validation import encoded_input, encoded_rows
import sktree_lmc.training._fit as _fit

CURRENT = {}  # the raw training frame, the estimator, the variant of the fit under way
_library_start_model = _fit.start_model


def _frame_take(X, rows):
    return X.iloc[rows].reset_index(drop=True) if hasattr(X, "iloc") else X[rows]


def extra_columns(kind, m, X_fit, train_idx, encoder, rng, seed):
    """The raw columns (``to_columns`` form) of ``m`` extra rows of ``kind``."""
    if kind == "probe":
        cols = probe_columns(encoder, m, random_state=seed, joint=True)
        return [np.zeros(m) if c is None else c for c in cols]
    cols = [c[train_idx] for c in to_columns(X_fit)[0]]
    n = len(train_idx)
    base = rng.integers(n, size=m)
    out = [c[base].copy() for c in cols]
    if kind == "shuffle":
        for j, c in enumerate(cols):
            swap = rng.random(m) < 0.3
            out[j][swap] = c[rng.integers(n, size=int(swap.sum()))]
        return out
    if kind == "noise":
        for j, c in enumerate(cols):
            if c.dtype == object or encoder.categorical_[j]:
                continue
            ok = np.isfinite(c)
            ref = np.sort(c[ok])
            v = out[j]
            fin = np.isfinite(v)
            # mid-rank quantile level of each value among the training values
            lo = np.searchsorted(ref, v[fin], "left"); hi = np.searchsorted(ref, v[fin], "right")
            u = (0.5 * (lo + hi) + 0.5) / (len(ref) + 1)
            z = ndtri(u) + 0.3 * rng.standard_normal(fin.sum())
            v[fin] = np.quantile(ref, np.clip(ndtr(z), 0, 1))
        return out
    raise ValueError(kind)


def start_model(state, objective, encoder, module, mask, teacher=None):
    boosted, target = _library_start_model(state, objective, encoder, module, mask, teacher)
    kind, ratio = CURRENT.get("kind"), CURRENT.get("ratio", 1.0)
    if kind in (None, "default") or not objective.teachers:
        return boosted, target
    X_fit = CURRENT["X_fit"]
    assert state.inputs.n_rows == len(X_fit), "user validation rows: not handled"
    n_tr = len(state.train_idx)
    m = int(round(ratio * n_tr))
    rng = np.random.default_rng(1000 + CURRENT["seed"])
    cols = extra_columns(kind, m, X_fit, state.train_idx, encoder, rng, CURRENT["seed"])
    extra = encoded_rows(encoder, cols)
    t = objective.teachers[0]
    probs = objective.loss.teacher_targets(t.output(np.asarray(extra.X, dtype=np.float64)))
    n = state.inputs.n_rows
    sw = np.asarray(state.sample_weight, dtype=np.float64)
    state.inputs = Inputs.concatenate([state.inputs, extra])
    target = np.concatenate([target, probs.astype(target.dtype)])
    state.sample_weight = np.concatenate([sw, np.full(m, sw[state.train_idx].mean())])
    state.train_idx = np.concatenate([state.train_idx, np.arange(n, n + m)])
    return boosted, target


_fit.start_model = start_model


def load(name, seed):
    if name == "california":
        from benchmarks import bench_accuracy as ba
        import inspect
        data = ba.load_dataset(name) if hasattr(ba, "load_dataset") else ba.load(name)
        return ba.split(*data, seed) if len(inspect.signature(ba.split).parameters) > 2 \
            else ba.split(data, seed)
    ds = bt.DATASETS[name]
    X, y = ds.load()
    return bt.split(ds, X, y, seed)


def scores(est, X, y):
    from sklearn.metrics import log_loss
    proba = est.predict_proba(X)
    pred = np.asarray(est.classes_)[proba.argmax(1)]
    return 100 * float(np.mean(pred == np.asarray(y))), float(log_loss(y, proba, labels=est.classes_)), proba


def run_one(name, seed, variant):
    Xtr, Xte, ytr, yte = load(name, seed)
    kind, _, ratio = variant.partition(":")
    if kind == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier
        est = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)
    else:
        from sktree_lmc import SoftTreeEnsembleClassifier
        est = SoftTreeEnsembleClassifier(random_state=seed, device="cpu")
    CURRENT.clear()
    CURRENT.update(kind=kind, ratio=float(ratio or 1.0), X_fit=Xtr, seed=seed)
    t0 = time.process_time()
    est.fit(Xtr, ytr)
    fit_s = time.process_time() - t0
    CURRENT.clear()
    acc, ll, p_te = scores(est, Xte, yte)
    tr_acc, _, p_tr = scores(est, Xtr, ytr)
    row = dict(dataset=name, seed=seed, variant=variant, test_acc=round(acc, 3),
               test_logloss=round(ll, 5), train_acc=round(tr_acc, 3), fit_cpu_s=round(fit_s, 2))
    if kind != "hgb":
        teacher = est.objective_.teachers[0]
        cls = np.asarray(est.classes_)
        t_te = teacher.output(np.asarray(encoded_input(est, Xte).X, np.float64)).argmax(1)
        t_tr = teacher.output(np.asarray(encoded_input(est, Xtr).X, np.float64)).argmax(1)
        row.update(teacher_test_acc=round(100 * float(np.mean(cls[t_te] == np.asarray(yte))), 3),
                   agree_test=round(100 * float(np.mean(p_te.argmax(1) == t_te)), 2),
                   agree_train=round(100 * float(np.mean(p_tr.argmax(1) == t_tr)), 2),
                   epochs=int(est.n_iter_))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["hpc"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", default=["default", "probe", "shuffle", "noise", "hgb"])
    ap.add_argument("--out", default="docs/_static/benchmarks/tasks/teacher_offrows_oneoff.jsonl")
    a = ap.parse_args()
    done = set()
    if Path(a.out).exists():
        done = {(r["dataset"], r["seed"], r["variant"])
                for r in map(json.loads, Path(a.out).read_text().splitlines())}
    for name in a.datasets:
        for seed in a.seeds:
            for variant in a.variants:
                if (name, seed, variant) in done:
                    continue
                row = run_one(name, seed, variant)
                print(json.dumps(row), flush=True)
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

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
* ``copy``: training rows drawn again as they are (the control: more steps on teacher-only
  targets, no new point);
* ``hgb``: HistGradientBoostingClassifier(categorical_features="from_dtype") for reference.

Per (dataset, seed, variant), one JSON line: test/train accuracy (%), test log-loss, the
teacher's test accuracy, the student-teacher agreement on the test and training rows, fit
seconds (one thread). Run from the repository root::

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/oneoff/teacher_offrows_oneoff.py \\
        --datasets hpc --seeds 0 1 2 --variants default probe shuffle noise hgb \\
        --out docs/_static/benchmarks/tasks/teacher_offrows_oneoff.jsonl

``--datasets digits_merge_axis`` runs ``bench_merge_axis.measure_split`` on digits (two full
fits and their merge, four IID quarter fits and their 4-way merge), every fit of the variant.
``--datasets california`` reads the Tabular-Benchmark's binary ``california`` file through
``benchmarks.bench_accuracy`` (``SKTREE_LMC_DATA``). (The encoder, hence the probe rows'
marginals and copula, is fitted before the early-stopping hold-out: on california the probe
rows know the held-out rows' feature distribution, never their labels.)

Result (2026-12-07, test accuracy, mean of seeds; paired difference to default +- s.e.):
hpc (6 seeds) default 83.15, probe 83.62 (+0.46 +- 0.20), probe:3 83.76 (+0.60 +- 0.31),
probe:8 83.51, copy:3 82.97, shuffle/noise (3 seeds) no gain, HGB 84.54, teacher 84.67;
digits/kershaw/diamonds_cut/california (3 seeds) probe:3 +0.06/+0.03/-0.20/+0.16; digits merge
axis: single fits +0.4..0.9, 4-way merge 95.33 vs 95.40. No default changed.
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
import sktree_lmc._estimators as _est

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
    if kind == "copy":
        return out
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
    target = np.concatenate([target, probs.astype(target.dtype).reshape((m,) + target.shape[1:])])
    state.sample_weight = np.concatenate([sw, np.full(m, sw[state.train_idx].mean())])
    state.train_idx = np.concatenate([state.train_idx, np.arange(n, n + m)])
    return boosted, target


_fit.start_model = start_model
_library_fit_rows = _est.fit_rows


def fit_rows(estimator, X, *args, **kwargs):
    """The library's, noting the raw training rows and the seed of the fit under way."""
    if CURRENT.get("kind") is not None:
        CURRENT.update(X_fit=X, seed=int(estimator.random_state or 0))
    return _library_fit_rows(estimator, X, *args, **kwargs)


_est.fit_rows = fit_rows


def load(name, seed):
    if name == "california":  # binary; bench_accuracy's load and split (10,000 / 10,000)
        from benchmarks import bench_accuracy as ba
        X, y = ba.load("binary", name)
        return ba.split(X, y, 10_000, 10_000, seed, True)
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
    CURRENT.update(kind=kind, ratio=float(ratio or 1.0))
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
        def label(raw):  # a binary teacher has one output (the logit)
            return (raw[:, 0] > 0).astype(int) if raw.shape[1] == 1 else raw.argmax(1)

        t_te = label(teacher.output(np.asarray(encoded_input(est, Xte).X, np.float64)))
        t_tr = label(teacher.output(np.asarray(encoded_input(est, Xtr).X, np.float64)))
        row.update(teacher_test_acc=round(100 * float(np.mean(cls[t_te] == np.asarray(yte))), 3),
                   agree_test=round(100 * float(np.mean(p_te.argmax(1) == t_te)), 2),
                   agree_train=round(100 * float(np.mean(p_tr.argmax(1) == t_tr)), 2),
                   epochs=int(est.n_iter_))
    return row


def run_merge(seed, variant):
    """``bench_merge_axis.measure_split`` on digits (``bench_shapes``' split of ``seed``) with
    every fit (two full, four IID quarters) of ``variant``."""
    from benchmarks.bench_merge_axis import measure_split
    from benchmarks.bench_shapes import SHAPES, _split
    shape = SHAPES["digits"]
    X, y = shape.load("digits")
    kind, _, ratio = variant.partition(":")
    CURRENT.clear()
    CURRENT.update(kind=kind, ratio=float(ratio or 1.0))
    t0 = time.process_time()
    record = measure_split(*_split(shape, X, y, seed, False), {}, seed)
    CURRENT.clear()
    return dict(dataset="digits_merge_axis", seed=seed, variant=variant, **record,
                cpu_s=round(time.process_time() - t0, 1))


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
                row = (run_merge(seed, variant) if name == "digits_merge_axis"
                       else run_one(name, seed, variant))
                print(json.dumps(row), flush=True)
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

"""The merge axis of a change to the training recipe, in one short run.

For each dataset (10,000 training and 10,000 test rows, or halves; split seed ``--seed``,
0 by default, stratified) and each recipe of ``--variants`` (``VARIANTS``: keyword arguments
of the default ``SoftTreeEnsembleClassifier``):

* two models on all training rows (``random_state`` 0 and 1), their test accuracy, the
  accuracy of their weight-matching merge (``merge_estimators(a, b)``) and the barrier
  (mean endpoint accuracy minus the merge's);
* four models on IID quarters of the training rows (``random_state`` 10-13; each fits its
  own encoder), the accuracy of their 4-way merge weighted by rows, and the recovery:
  ``(merge - mean site) / (mean full model - mean site)``;
* the first epoch's training loss of the two full models (the overshoot of the first steps).

With ``--seed s`` the quarters are drawn with ``RandomState(s)`` and every ``random_state``
above is ``100 * s`` more; seed 0 is the measurement as it always was.

One JSON line per (dataset, variant) is printed and appended to ``--out``.

Run from the repository root::

    python -m benchmarks.bench_merge_axis --datasets MagicTelescope eye_movements \\
        bank-marketing --variants prev auto_w0 auto_w0.05 auto_w0.01
    python -m benchmarks.bench_merge_axis --smoke    # seconds, for the tests
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "merge_axis" / "merge_axis.jsonl"

#: Recipes compared: ``prev`` is the default before ``early_stopping="auto"``.
VARIANTS = {
    "prev": dict(early_stopping=True, warmup_fraction=0.0),
    "auto_w0": dict(early_stopping="auto", warmup_fraction=0.0),
    "auto_w0.01": dict(early_stopping="auto", warmup_fraction=0.01),
    "auto_w0.05": dict(early_stopping="auto", warmup_fraction=0.05),
    # the trees' columns drawn by the teacher's gains (the default) or alike
    "fs_auto": dict(feature_selection="auto"),
    "fs_uniform": dict(feature_selection="uniform"),
    # piecewise-linear features for the splits instead of the quantile-normal ones
    "ple": dict(numeric_encoding="piecewise_linear"),
    # half of the splits started as sharp thresholds on the training rows (issue 42)
    "split_data": dict(split_init="data"),
    # every split started sharper: U(-10, 10) weights and biases instead of U(+-1/sqrt(F))
    "split_10": dict(split_init=10.0),
    # label smoothing at AUTO_LABEL_SMOOTHING on the fits without early stopping (the sites;
    # the default since issue 42), and none (the default before)
    "ls_auto": dict(label_smoothing="auto"),
    "ls_off": dict(label_smoothing=0.0),
}


def measure(name, variant, n_train=10_000, extra=None, seed=0):
    """One (dataset, variant) record of seed ``seed`` (see :func:`measure_split`)."""
    from .bench_accuracy import load, split

    X_tr, X_te, y_tr, y_te = split(*load("raw", name), n_train, n_train, seed, True)
    params = {**VARIANTS[variant], **(extra or {})}
    record = measure_split(X_tr, X_te, y_tr, y_te, params, seed)
    return {"dataset": name, "variant": variant, **({"seed": seed} if seed else {}), **record}


def measure_split(X_tr, X_te, y_tr, y_te, params, seed=0):
    """The merge axis of the default classifier with ``params`` on one train/test split: the
    record's fields after ``dataset`` and ``variant``. Seed ``s`` draws the quarters with
    ``RandomState(s)`` and adds ``100 * s`` to every model's ``random_state``."""
    from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators

    n = len(y_tr)
    quarters = np.array_split(np.random.RandomState(seed).permutation(n), 4)

    def model(state):
        return SoftTreeEnsembleClassifier(random_state=100 * seed + state, device="cpu",
                                          **params)

    def acc(m):
        return 100 * m.score(X_te, y_te)

    def rows(X, q):  # a NumPy array's or a DataFrame's rows q
        return X.iloc[q] if hasattr(X, "iloc") else X[q]

    a, b = model(0).fit(X_tr, y_tr), model(1).fit(X_tr, y_tr)
    full = [acc(a), acc(b)]
    merged = acc(merge_estimators(a, b))
    sites = [model(10 + k).fit(rows(X_tr, q), rows(y_tr, q)) for k, q in enumerate(quarters)]
    site_acc = float(np.mean([acc(s) for s in sites]))
    merge4 = acc(merge_estimators(sites, weights=[len(q) for q in quarters]))
    gap = np.mean(full) - site_acc
    return {"n_train": n,
            "epoch1_loss": [round(a.loss_curve_[0], 3), round(b.loss_curve_[0], 3)],
            "full": [round(f, 2) for f in full], "wm2": round(merged, 2),
            "barrier": round(float(np.mean(full) - merged), 2), "sites": round(site_acc, 2),
            "merge4": round(merge4, 2),
            "recovery": round(float((merge4 - site_acc) / gap), 3) if gap else None,
            "site_epochs": [s.n_iter_ for s in sites]}


def main(argv=None):
    import torch

    from .bench_accuracy import append_json_line

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["MagicTelescope"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--seed", type=int, default=0,
                        help="split seed; models' random_state + 100 * seed (default 0)")
    parser.add_argument("--smoke", action="store_true", help="seconds: 600 rows, tiny models")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n_train, extra = 10_000, None
    if args.smoke:
        n_train, extra = 600, {"n_estimators": 8, "max_epochs": 2}
        args.datasets, args.variants = args.datasets[:1], args.variants[:2]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for name in args.datasets:
        for variant in args.variants:
            record = measure(name, variant, n_train, extra, args.seed)
            records.append(record)
            append_json_line(args.out, record)
    return records


if __name__ == "__main__":
    main()

"""The tolerance of ``refit_leaves`` after a merge of two default models.

For each dataset (10,000 training and test rows, or halves; split seed 0, stratified), two
default ``SoftTreeEnsembleClassifier`` models (``random_state`` 0 and 1) are merged with
weight matching, and the merge's leaves are refitted on the training rows at each ``--tols``
value. Per tolerance: CPU seconds of the refit (``time.process_time``, one thread), its
L-BFGS iterations and the test accuracy, beside the CPU seconds of one default fit (model 0)
and the accuracies of the two models and of their merge. One JSON line per dataset is printed
and appended to ``--out``.

Run from the repository root::

    python -m benchmarks.bench_refit_tol --datasets MagicTelescope electricity \\
        bank-marketing california
    python -m benchmarks.bench_refit_tol --smoke    # seconds, for the tests
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "refit_tol" / "refit_tol.jsonl"


def measure(name, tols, n_train=10_000, extra=None):
    """One dataset's record."""
    from sktree_lmc import SoftTreeEnsembleClassifier, merge_estimators, refit_leaves

    from .bench_accuracy import load, split

    X_tr, X_te, y_tr, y_te = split(*load("raw", name), n_train, n_train, 0, True)
    n = len(y_tr)
    params = dict(device="cpu", **(extra or {}))
    start = time.process_time()
    a = SoftTreeEnsembleClassifier(random_state=0, **params).fit(X_tr, y_tr)
    fit_s = time.process_time() - start
    b = SoftTreeEnsembleClassifier(random_state=1, **params).fit(X_tr, y_tr)
    merged = merge_estimators(a, b)

    def acc(m):
        return round(100 * m.score(X_te, y_te), 2)

    record = {"dataset": name, "n_train": n, "fit_cpu_s": round(fit_s, 2), "a": acc(a),
              "b": acc(b), "merge": acc(merged), "refit": {}}
    for tol in tols:
        start = time.process_time()
        refitted, info = refit_leaves(merged, X_tr, y_tr, tol=tol, return_info=True)
        record["refit"][f"{tol:g}"] = {"cpu_s": round(time.process_time() - start, 2),
                                       "n_iter": int(info["n_iter"]), "accuracy": acc(refitted)}
    return record


def main(argv=None):
    import torch

    from .bench_accuracy import append_json_line

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["MagicTelescope", "electricity"])
    parser.add_argument("--tols", nargs="+", type=float, default=[1e-7, 3e-6, 1e-5])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="seconds: 300 rows, tiny models")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n_train, extra = 10_000, None
    if args.smoke:
        n_train, extra = 300, {"n_estimators": 8, "max_epochs": 2}
        args.datasets = args.datasets[:1]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for name in args.datasets:
        record = measure(name, args.tols, n_train, extra)
        records.append(record)
        append_json_line(args.out, record)
    return records


if __name__ == "__main__":
    main()

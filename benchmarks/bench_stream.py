"""``partial_fit`` on a stream against one ``fit`` on the same rows.

The training rows of a Tabular-Benchmark dataset (10,000, or half of a smaller dataset;
split seed 0, stratified) arrive as ``--chunks`` chunks in a fixed order; each pass calls
``partial_fit`` once per chunk, ``--passes`` times. After every pass the test accuracy is
recorded, for each learning rate of ``--learning-rates`` (the default classifier otherwise,
``random_state=0``), beside one default ``fit`` on all the rows. One JSON line per
(dataset, policy) is printed and appended to ``--out``.

Run from the repository root::

    python -m benchmarks.bench_stream --datasets MagicTelescope electricity
    python -m benchmarks.bench_stream --smoke    # seconds, for the tests
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "stream" / "stream.jsonl"


def run(datasets, learning_rates, chunks, passes, n_train, out, smoke=False):
    """Measure every (dataset, policy); return the records."""
    import torch

    from sktree_lmc import SoftTreeEnsembleClassifier

    from .bench_accuracy import append_json_line, load, split

    torch.set_num_threads(1)
    extra = {"n_estimators": 8, "max_epochs": 2} if smoke else {}
    records = []
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in datasets:
        X_tr, X_te, y_tr, y_te = split(*load("raw", name), n_train, n_train, 0, True)
        one = SoftTreeEnsembleClassifier(random_state=0, device="cpu", **extra).fit(X_tr, y_tr)
        records.append({"dataset": name, "policy": "one fit", "n_train": len(y_tr),
                        "accuracy": [round(100 * one.score(X_te, y_te), 2)],
                        "epochs": one.n_iter_})
        parts = np.array_split(np.arange(len(y_tr)), chunks)
        classes = np.unique(y_tr)
        for lr in learning_rates:
            model = SoftTreeEnsembleClassifier(random_state=0, device="cpu", learning_rate=lr,
                                               **extra)
            accuracy = []
            with warnings.catch_warnings():  # the first chunk's encoding warning
                warnings.simplefilter("ignore", UserWarning)
                for _ in range(passes):
                    for rows in parts:
                        model.partial_fit(X_tr[rows], y_tr[rows], classes=classes)
                    accuracy.append(round(100 * model.score(X_te, y_te), 2))
            records.append({"dataset": name, "policy": f"partial_fit learning_rate={lr:g}",
                            "n_train": len(y_tr), "accuracy": accuracy,
                            "epochs": model.n_iter_})
        for record in records[-1 - len(learning_rates):]:
            append_json_line(out, record)
    return records


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["MagicTelescope", "electricity"])
    parser.add_argument("--learning-rates", nargs="+", type=float, default=[3e-2, 1e-2, 3e-3])
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--passes", type=int, default=8)
    parser.add_argument("--n-train", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="seconds: 300 rows, tiny models")
    args = parser.parse_args(argv)
    if args.smoke:
        args.datasets, args.learning_rates, args.passes, args.n_train = (
            args.datasets[:1], [3e-2], 2, 300)
    return run(args.datasets, args.learning_rates, args.chunks, args.passes, args.n_train,
               args.out, smoke=args.smoke)


if __name__ == "__main__":
    main()

"""One-off script of docs/benchmarks_archive.md, "Label smoothing and calibration" (issue 42); not
maintained.

Test accuracy and log-loss of ``SoftTreeEnsembleClassifier(label_smoothing=EPS)`` (the
default otherwise), or of ``HistGradientBoostingClassifier()`` for EPS ``hgb``, on
bench_shapes' splits, one thread. Also the log-loss split into the rows predicted right and
wrong (each a sum over its rows divided by all test rows) and the mean top probability.
Appends JSON lines to OUT. The ``uci`` shapes need ``$SKTREE_LMC_UCI_DATA``; ``ONLY`` (comma
separated dataset names) restricts a shape's datasets.

Usage: python label_smoothing_calibration_oneoff.py SHAPES SEEDS EPS OUT
  e.g. ... digits 0,1,2 0,0.02,0.05,hgb calibration.jsonl
"""
import json, os, sys, warnings
from pathlib import Path

import numpy as np, torch
from threadpoolctl import threadpool_limits
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import log_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks.bench_shapes import SHAPES, _split
from sktree_lmc import SoftTreeEnsembleClassifier


def main():
    torch.set_num_threads(1)
    shapes, seeds, eps_list, out = sys.argv[1].split(","), sys.argv[2].split(","), \
        sys.argv[3].split(","), sys.argv[4]
    only = os.environ.get("ONLY")
    with open(out, "a") as fh:
        for name in shapes:
            shape = SHAPES[name]
            for d in [d for d in shape.datasets() if not only or d in only.split(",")]:
                X, y = shape.load(d)
                for seed in map(int, seeds):
                    X_tr, X_te, y_tr, y_te = _split(shape, X, y, seed, False)
                    for eps in eps_list:
                        with threadpool_limits(1), warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est = (HistGradientBoostingClassifier(random_state=seed)
                                   if eps == "hgb" else SoftTreeEnsembleClassifier(
                                       random_state=seed, device="cpu",
                                       label_smoothing=float(eps)))
                            P = est.fit(X_tr, y_tr).predict_proba(X_te)
                        idx = np.searchsorted(est.classes_, y_te)
                        p_true = P[np.arange(len(y_te)), idx]
                        right = P.argmax(1) == idx
                        row = dict(shape=name, dataset=d, seed=seed, eps=eps,
                                   accuracy=100 * right.mean(),
                                   log_loss=log_loss(y_te, P, labels=est.classes_),
                                   ll_correct=float(-np.log(p_true[right]).sum() / len(y_te)),
                                   ll_wrong=float(-np.log(p_true[~right]).sum() / len(y_te)),
                                   mean_pmax=float(P.max(1).mean()))
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()
                        print(row, flush=True)


if __name__ == "__main__":
    main()

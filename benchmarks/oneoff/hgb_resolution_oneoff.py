"""One-off script of docs/benchmarks_archive.md, "What HGB's lead on the 5-class targets is made of"
(issue 42); not maintained.

HistGradientBoostingClassifier on bench_shapes' ``classes_5`` targets (seed 0, 10,000 /
10,000 rows), with its structure restricted (interaction constraints, shallower trees, fewer
bins), and with one column at a time coarsened to its 16 training quantile bins. Writes
``docs/_static/benchmarks/multiclass/hgb_resolution.csv``. Usage: python hgb_resolution_oneoff.py
"""
import csv, sys, warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks.bench_shapes import SHAPES, _split
from sklearn.ensemble import HistGradientBoostingClassifier

VARIANTS = [("default", {}), ("no_interactions", {"interaction_cst": "no_interactions"}),
            ("pairwise", {"interaction_cst": "pairwise"}), ("max_iter=500", {"max_iter": 500}),
            ("max_depth=2,max_iter=500", {"max_depth": 2, "max_iter": 500}),
            ("max_depth=3,max_iter=500", {"max_depth": 3, "max_iter": 500}),
            ("max_bins=32", {"max_bins": 32}), ("max_bins=16", {"max_bins": 16})]


def fit_score(X_tr, X_te, y_tr, y_te, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HistGradientBoostingClassifier(random_state=0, **params).fit(X_tr, y_tr)
    return (100 * np.mean(model.predict(X_te) == y_te), 100 * np.mean(model.predict(X_tr) == y_tr))


def main():
    shape = SHAPES["classes_5"]
    out = (Path(__file__).resolve().parents[2] / "docs" / "_static" / "benchmarks" / "multiclass"
           / "hgb_resolution.csv")
    with open(out, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["dataset", "variant", "test", "train"])
        for name in shape.datasets():
            X, y = shape.load(name)
            X_tr, X_te, y_tr, y_te = _split(shape, np.asarray(X, dtype=float), y, 0, False)
            rows = [(v, *fit_score(X_tr, X_te, y_tr, y_te, **p)) for v, p in VARIANTS]
            for j in range(X_tr.shape[1]):  # column j coarsened to 16 quantile bins
                edges = np.unique(np.quantile(X_tr[:, j], np.linspace(0, 1, 17)[1:-1]))
                A, B = X_tr.copy(), X_te.copy()
                A[:, j], B[:, j] = np.searchsorted(edges, A[:, j]), np.searchsorted(edges, B[:, j])
                rows.append((f"column {j} ({len(np.unique(X_tr[:, j]))} values) in 16 bins",
                             *fit_score(A, B, y_tr, y_te)))
            for variant, test, train in rows:
                writer.writerow([name, variant, f"{test:.2f}", f"{train:.2f}"])
                print(f"{name:28s} {variant:40s} test {test:6.2f} train {train:6.2f}", flush=True)


if __name__ == "__main__":
    main()

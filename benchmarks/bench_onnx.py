"""ONNX export of the default classifier: export time, file, agreement, onnxruntime speed.

The default ``SoftTreeEnsembleClassifier`` (256 oblivious trees of depth 4, quantile-normal
encoding, the additive term; ``random_state=0``, one thread) is fitted on 5,000 rows of
``make_classification(n_samples=10000, n_features=12, random_state=0)``; ``export_onnx``
writes it, timed, and the folder is checked to hold that one file. onnxruntime (one
intra-op thread, as the estimator's ``n_threads=1``) then predicts the other 5,000 rows:

- agreement: the largest absolute differences of ``decision_function`` and
  ``predict_proba`` (and the share of equal labels), against the estimator and against a
  float64 forward of the same model (``SoftTreeEnsembleModule`` in double precision, which
  tells the float32 rounding of each);
- speed: ``--rounds`` alternating calls of ``predict_proba`` (the estimator) and of the
  whole graph (all three outputs), rows/s from the fastest call of each and their ratio
  (medians beside them).

The numbers are printed and written as one JSON object to ``--out``
(``benchmarks/results/onnx.json`` by default).

Run from the repository root::

    python -m benchmarks.bench_onnx
    python -m benchmarks.bench_onnx --smoke    # seconds, for the tests
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "onnx.json"


def float64_scores(model, X):
    """The model's logits from a float64 forward (encoding as the estimator's)."""
    import torch

    from sktree_lmc import SoftTreeEnsembleModule

    columns = model._input_columns(X)
    enc = model.encoder_
    features = torch.tensor(enc.transform_columns(columns), dtype=torch.float64)
    codes = None
    if model.tree_params_.additive is not None:
        codes = torch.as_tensor(enc.additive_codes(columns), dtype=torch.long)
    module = SoftTreeEnsembleModule.from_params(model.architecture_, model.tree_params_,
                                                "cpu").double()
    with torch.no_grad():
        return module(features, codes).numpy()


def measure(n_samples=10_000, n_features=12, rounds=7, params=None, folder=None):
    """Fit, export and compare; returns the dictionary of numbers."""
    import onnxruntime as ort
    from scipy.special import softmax
    from sklearn.datasets import make_classification

    from sktree_lmc import SoftTreeEnsembleClassifier, export_onnx, onnx_inputs

    X, y = make_classification(n_samples=n_samples, n_features=n_features, random_state=0)
    half = n_samples // 2
    X_fit, y_fit, X_test = X[:half], y[:half], X[half:]
    model = SoftTreeEnsembleClassifier(random_state=0, n_threads=1, **(params or {}))
    start = time.perf_counter()
    model.fit(X_fit, y_fit)
    fit_s = time.perf_counter() - start

    folder = Path(folder or tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    start = time.perf_counter()
    export_onnx(model, path)
    export_s = time.perf_counter() - start
    files = sorted(os.listdir(folder))

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    start = time.perf_counter()
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - start
    feed = onnx_inputs(model, X_test)
    label, proba, scores = session.run(None, feed)

    est_scores = model.decision_function(X_test)
    est_proba = model.predict_proba(X_test)
    ref = float64_scores(model, X_test)
    ref_scores = ref[:, 1] - ref[:, 0] if ref.shape[1] == 2 else ref
    est_time, ort_time = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        model.predict_proba(X_test)
        est_time.append(time.perf_counter() - start)
        start = time.perf_counter()
        session.run(None, feed)
        ort_time.append(time.perf_counter() - start)
    n = len(X_test)
    return {
        "rows_fit": half, "rows_predict": n, "n_features": n_features,
        "n_estimators": model.n_estimators, "arch": model.arch, "depth": model.depth,
        "numeric_encoding": model.numeric_encoding, "fit_s": fit_s,
        "export_s": export_s, "files": files, "file_bytes": path.stat().st_size,
        "session_s": session_s,
        "max_abs_diff_decision": float(np.abs(scores - est_scores).max()),
        "max_abs_diff_proba": float(np.abs(proba - est_proba).max()),
        "labels_equal": float(np.mean(label == model.predict(X_test))),
        "onnx_vs_float64": float(np.abs(scores - ref_scores).max()),
        "estimator_vs_float64": float(np.abs(est_scores - ref_scores).max()),
        "proba_vs_float64": float(np.abs(proba - softmax(ref, axis=1)).max()),
        "estimator_rows_per_s": n / min(est_time), "onnx_rows_per_s": n / min(ort_time),
        "estimator_rows_per_s_median": n / float(np.median(est_time)),
        "onnx_rows_per_s_median": n / float(np.median(ort_time)),
        "speed_ratio": min(est_time) / min(ort_time),
        "load_average": os.getloadavg()[0], "machine": platform.processor() or platform.machine(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--smoke", action="store_true",
                        help="seconds: 1,000 rows, 8 trees, 2 epochs")
    args = parser.parse_args(argv)
    n_samples, params = 10_000, None
    if args.smoke:
        n_samples, params, args.rounds = 1_000, {"n_estimators": 8, "max_epochs": 2}, 2
    with tempfile.TemporaryDirectory() as folder:
        res = measure(n_samples=n_samples, rounds=args.rounds, params=params, folder=folder)
    print(f"fit {res['fit_s']:.1f} s; export_onnx {res['export_s']:.2f} s -> {res['files']} "
          f"({res['file_bytes'] / 1e6:.2f} MB), session {res['session_s']:.2f} s")
    print(f"max |onnx - estimator|: decision_function {res['max_abs_diff_decision']:.2e}, "
          f"predict_proba {res['max_abs_diff_proba']:.2e}, labels equal "
          f"{res['labels_equal']:.4f}; against a float64 forward: onnx "
          f"{res['onnx_vs_float64']:.2e}, estimator {res['estimator_vs_float64']:.2e}")
    print(f"{res['rows_predict']:,} rows: estimator {res['estimator_rows_per_s']:,.0f} rows/s, "
          f"onnxruntime {res['onnx_rows_per_s']:,.0f} rows/s (1 thread each; ratio "
          f"{res['speed_ratio']:.2f}; medians {res['estimator_rows_per_s_median']:,.0f} / "
          f"{res['onnx_rows_per_s_median']:,.0f}); load {res['load_average']:.1f}", flush=True)
    if not args.smoke:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main()

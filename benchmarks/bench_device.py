"""The default fit and prediction on a GPU against the CPU: the prepared run of issue 43.

For each training size of ``--rows`` (default 10,000 and 100,000), the default classifier
(``random_state=0``) is fitted on the same rows once per device of ``--devices`` (default: the
CPU, and ``cuda`` when ``torch.cuda.is_available()``), and every fitted model predicts the
same ``--test-rows`` rows on its own device. HistGradientBoosting fits the same rows in the
same run. On the CPU the estimator runs ``--cpu-threads`` threads (default: every core the
process may use), as does HGB; on a GPU, the same.

Per (rows, device) one JSON line (printed, and appended to ``--out`` as soon as it is
measured, so that a run cut short keeps what it measured; the slowest fit, the CPU's on the
largest size, comes last):

* ``fit_s`` (wall), ``fit_cpu_s`` (process CPU time), ``epochs``, ``s_per_epoch``;
* ``accuracy`` (%) on the test rows, ``predict_rows_per_s`` (``predict_proba``, wall);
* ``hgb_fit_s``, ``hgb_accuracy``, and ``fit_over_hgb`` (``fit_s / hgb_fit_s``);
* on a GPU, ``max_abs_diff_same_model``: the largest absolute difference between the
  probabilities that the CPU-fitted model of the same size predicts on the CPU and on this
  device (one fitted model, two kernels: float32 rounding only), and ``accuracy_cpu_fit``,
  the CPU fit's accuracy beside this device's fit's (two fits differ in rounding from the
  first step on, so their accuracies differ by noise, not by a bug).

Data: ``make_classification(rows + test_rows, n_features=20, n_informative=15,
n_redundant=5, random_state=0)`` (``bench_shapes``' 20-column data), split into the first
``rows`` and the last ``test_rows`` rows, or a shared dataset (``--data electricity``),
split by ``bench_accuracy.split`` (then at most its rows).

Run from the repository root, on the machine with the GPU::

    python -m benchmarks.bench_device --out $OUT/device.jsonl
    python -m benchmarks.bench_device --smoke    # seconds, on any machine, for the tests
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "device" / "device.jsonl"
#: Model settings of ``--smoke`` (every other setting is the default's).
SMOKE_PARAMS = {"n_estimators": 8, "max_epochs": 2}


def _data(name, rows, test_rows):
    """Training and test rows: ``(X_train, X_test, y_train, y_test)``."""
    if name == "synthetic":
        from ._common import synthetic

        X, y = synthetic(20, rows + test_rows)
        return X[:rows], X[rows:], y[:rows], y[rows:]
    from .bench_accuracy import load, split

    return split(*load("raw", name), rows, test_rows, 0, True)


def _timed_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of short smoke fits
        wall, cpu = time.perf_counter(), time.process_time()
        model.fit(X, y)
        return time.perf_counter() - wall, time.process_time() - cpu


def _timed_proba(model, X):
    start = time.perf_counter()
    proba = model.predict_proba(X)
    return proba, len(X) / (time.perf_counter() - start)


def measure(data, rows, devices, test_rows, threads, params=None):
    """One record per device of ``devices`` for ``rows`` training rows (see the module doc)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from sktree_lmc import SoftTreeEnsembleClassifier

    X_tr, X_te, y_tr, y_te = _data(data, rows, test_rows)
    hgb = HistGradientBoostingClassifier(random_state=0)
    hgb_fit_s = _timed_fit(hgb, X_tr, y_tr)[0]
    hgb_accuracy = 100 * hgb.score(X_te, y_te)
    records, cpu_model = [], None
    for device in devices:
        model = SoftTreeEnsembleClassifier(random_state=0, device=device, n_threads=threads,
                                           **(params or {}))
        # the fit ends with its state copied to the CPU, and the probabilities are NumPy
        # arrays: both timings end when the device is done
        fit_s, fit_cpu_s = _timed_fit(model, X_tr, y_tr)
        proba, rate = _timed_proba(model, X_te)
        record = {
            "data": data, "rows": rows, "test_rows": len(X_te), "device": device,
            "device_name": _device_name(device), "threads": threads,
            "fit_s": round(fit_s, 3), "fit_cpu_s": round(fit_cpu_s, 3),
            "epochs": int(model.n_epochs_), "s_per_epoch": round(fit_s / model.n_epochs_, 4),
            "accuracy": round(100 * float(np.mean(model.classes_[proba.argmax(1)] == y_te)), 3),
            "predict_rows_per_s": round(rate),
            "hgb_fit_s": round(hgb_fit_s, 3), "hgb_accuracy": round(hgb_accuracy, 3),
            "fit_over_hgb": round(fit_s / hgb_fit_s, 1),
            "load": round(os.getloadavg()[0], 2),
        }
        if device == "cpu":
            cpu_model, cpu_proba = model, proba
        elif cpu_model is not None:
            # the same fitted model on the other kernels: rounding only
            on_device = _timed_proba(cpu_model.set_params(device=device), X_te)[0]
            cpu_model.set_params(device="cpu")
            record["max_abs_diff_same_model"] = float(np.max(np.abs(on_device - cpu_proba)))
            record["accuracy_cpu_fit"] = records[0]["accuracy"]
        records.append(record)
    return records


def _device_name(device):
    import torch

    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return platform.processor() or platform.machine()


def default_devices():
    """The CPU, and ``cuda`` when torch sees a GPU."""
    import torch

    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _jobs(rows, devices):
    """``(rows, devices)`` in the order they run: for each size its GPU fits first and the
    CPU's last but for the smallest size, whose CPU fit comes first (the reference of the
    agreement columns); the largest size's CPU fit, the slowest, ends the run."""
    gpus = [d for d in devices if d != "cpu"]
    has_cpu = "cpu" in devices
    jobs = []
    for i, n in enumerate(sorted(rows)):
        if has_cpu and i == 0:
            jobs.append((n, ["cpu"] + gpus))
        else:
            jobs.append((n, gpus))
    if has_cpu:
        jobs += [(n, ["cpu"]) for n in sorted(rows)[1:]]
    return jobs


def summary(records):
    """Lines of text: per size and device, the fit's seconds against HGB's and the CPU's."""
    cpu = {r["rows"]: r["fit_s"] for r in records if r["device"] == "cpu"}
    lines = []
    for r in sorted(records, key=lambda r: (r["rows"], r["device"] != "cpu")):
        versus = f", {cpu[r['rows']] / r['fit_s']:.2f}x the CPU's speed" if (
            r["device"] != "cpu" and r["rows"] in cpu) else ""
        lines.append(f"{r['rows']:>9,} rows, {r['device']}: fit {r['fit_s']:.1f} s "
                     f"({r['epochs']} epochs, {r['fit_over_hgb']}x HGB's {r['hgb_fit_s']:.2f} s"
                     f"{versus}), accuracy {r['accuracy']:.2f} (HGB {r['hgb_accuracy']:.2f}), "
                     f"predict {r['predict_rows_per_s']:,} rows/s")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="synthetic",
                        help="'synthetic' (make_classification, 20 columns) or a shared dataset")
    parser.add_argument("--rows", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--test-rows", type=int, default=10_000)
    parser.add_argument("--devices", nargs="+", default=None,
                        help="default: cpu, and cuda when available")
    parser.add_argument("--cpu-threads", type=int, default=None,
                        help="threads of the CPU fits (default: every core the process may use)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="seconds: 600 rows, tiny models")
    args = parser.parse_args(argv)
    params = None
    if args.smoke:
        args.rows, args.test_rows, params = [300, 600], 300, SMOKE_PARAMS
    devices = args.devices or default_devices()
    threads = args.cpu_threads or len(os.sched_getaffinity(0))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # a GPU's first fit pays for CUDA's start-up (context, kernels): a tiny fit first
    for device in devices:
        if device != "cpu":
            measure(args.data, 300, [device], 300, threads, SMOKE_PARAMS)
    records = []
    for rows, devs in _jobs(args.rows, devices):
        for record in measure(args.data, rows, devs, args.test_rows, threads, params):
            records.append(record)
            line = json.dumps(record)
            print(line, flush=True)
            with open(args.out, "a") as f:
                f.write(line + "\n")
    for line in summary(records):
        print(line)
    return records


if __name__ == "__main__":
    main()

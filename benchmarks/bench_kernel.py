"""The fused CPU training kernel (numba) against the torch path, beside HGB (issue 43).

Three measurements, in one process, one thread unless said otherwise:

1. **Fits.** The default ``SoftTreeEnsembleClassifier`` on 10,000 / 10,000 rows of each
   dataset (``bench_accuracy.split``, seed 0), with the torch engine and with the numba
   engine (``sktree_lmc.training_engine``), and ``HistGradientBoostingClassifier`` before
   them (one OpenMP thread, ``threadpoolctl``): fit CPU seconds (``time.process_time``), their ratios to HGB's, test accuracy and
   epochs. The engines alternate which goes first from round to round.
2. **The training step.** The default model's shapes (oblivious trees of depth 4, 256
   trees, 512 rows, two outputs) on ``--features`` random features, each tree keeping the
   features ``max_features=0.5`` keeps (the others' weights are zero, as a feature mask
   leaves them): the forward and backward pass of the trees (``module(X).backward(g)``),
   medians over alternating repetitions, and its rate in GFLOP/s against a single-thread
   float32 ``torch.mm`` of 1024 x 1024 matrices measured in the same process; and the
   numba engine's step with two threads. FLOPs are
   counted analytically, per row and tree, for the arithmetic of the forward pass: the
   splits' products ``2 N F_kept`` (multiply and add per kept feature and node), one per
   sigmoid ``N``, one product per routing position that has a parent (``P - roots``) and
   ``2 L C`` for the leaf contraction; the backward pass counts twice the forward (the
   usual convention; this is the count of ``docs/benchmarks.md``, "The training step's
   profile", with the features the masks keep).
3. **Threads.** The numba engine's fit on the first dataset with ``n_threads=2`` and with
   ``n_threads=1``: wall time, alternating. (Beside another busy process, two threads are
   far slower than one, with either engine: ``sktree_lmc.utils._threads``.)

The machine's load average (``os.getloadavg``) is printed before and after: the machine is
shared, so read the ratios (measured side by side) rather than the seconds.

Run from the repository root::

    python -m benchmarks.bench_kernel --datasets electricity california
    python -m benchmarks.bench_kernel --engines numba --skip step threads --rounds 3
    python -m benchmarks.bench_kernel --smoke    # seconds, for the tests
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np


def _fit(make, X_tr, y_tr, X_te, y_te, wall=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make()
        start = time.perf_counter() if wall else time.process_time()
        model.fit(X_tr, y_tr)
        seconds = (time.perf_counter() if wall else time.process_time()) - start
    accuracy = 100.0 * float(np.mean(model.predict(X_te) == y_te))
    return model, seconds, accuracy


def measure_fits(name, rounds=1, n_train=10_000, params=None, seed=0,
                 engines=("torch", "numba")):
    """Fit CPU seconds, test accuracy and epochs of HGB and the ``engines`` on ``name``."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from sktree_lmc import SoftTreeEnsembleClassifier, training_engine

    from .bench_accuracy import load, split

    X_tr, X_te, y_tr, y_te = split(*load("raw", name), n_train, n_train, seed, True)
    for engine in engines:  # warm up: imports, the compiled kernels
        with training_engine(engine):
            _fit(lambda: SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=1),
                 X_tr[:300], y_tr[:300], X_te[:10], y_te[:10])
    _fit(lambda: HistGradientBoostingClassifier(max_iter=5), X_tr[:300], y_tr[:300],
         X_te[:10], y_te[:10])
    rows = {"hgb": [], **{engine: [] for engine in engines}}
    for r in range(rounds):
        _, seconds, acc = _fit(lambda: HistGradientBoostingClassifier(random_state=seed),
                               X_tr, y_tr, X_te, y_te)
        rows["hgb"].append((seconds, acc, ""))
        for engine in engines if r % 2 == 0 else engines[::-1]:
            with training_engine(engine):
                model, seconds, acc = _fit(
                    lambda: SoftTreeEnsembleClassifier(random_state=seed, device="cpu",
                                                       **(params or {})),
                    X_tr, y_tr, X_te, y_te)
            rows[engine].append((seconds, acc, model.n_iter_))
    out = {}
    for key, values in rows.items():
        seconds = float(np.median([v[0] for v in values]))
        out[key] = {"fit_cpu_s": seconds, "accuracy": values[0][1], "epochs": values[0][2],
                    "fit_cpu_s_all": [round(v[0], 3) for v in values]}
    for key in engines:
        out[key]["ratio_to_hgb"] = out[key]["fit_cpu_s"] / out["hgb"]["fit_cpu_s"]
    return out


def matmul_gflops(repeats=15, size=1024):
    """Single-thread float32 ``torch.mm`` rate of ``size``-square matrices, GFLOP/s (median)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * size**3 / float(np.median(times)) / 1e9


def step_flops(arch, n_trees, kept_features, n_outputs, rows):
    """Analytic FLOPs of one forward and backward pass (see the module docstring)."""
    # the routing positions: every node of the binary tree but its root, 2 (L_struct - 1),
    # less the pruned fixed-zero leaves; all but the root's two children are products
    pruned = arch.n_leaves - arch.n_free_leaves
    products = max(0, 2 * (arch.n_leaves - 1) - pruned - 2)
    N, L = arch.n_nodes, arch.n_free_leaves
    forward = 2 * N * kept_features + N + products + 2 * L * n_outputs
    return 3 * forward * n_trees * rows


def measure_step(n_features=7, n_trees=256, depth=4, rows=512, n_outputs=2, repeats=30,
                 arch_name="oblivious", seed=0):
    """Median seconds of the trees' forward and backward pass per engine, and the FLOPs."""
    import torch

    from sktree_lmc import SoftTreeEnsembleModule, get_architecture, training_engine

    arch = get_architecture(arch_name, depth)
    gen = torch.Generator().manual_seed(seed)
    module = SoftTreeEnsembleModule(arch, n_trees, n_features, n_outputs, generator=gen)
    kept = max(1, int(0.5 * n_features))  # as max_features=0.5
    with torch.no_grad():  # each tree keeps ``kept`` random features, as max_features=0.5
        order = torch.argsort(torch.rand(n_trees, n_features, generator=gen), dim=1)
        mask = torch.zeros(n_trees, n_features)
        mask.scatter_(1, order[:, :kept], 1.0)
        module.split_weight.mul_(mask[:, None, :])
    X = torch.randn(rows, n_features, generator=gen)
    grad = torch.randn(rows, n_outputs, generator=gen) / rows

    def step():
        for p in module.parameters():
            p.grad = None
        module(X).backward(grad)

    variants = {"torch": ("torch", 1), "numba": ("numba", 1), "numba_2_threads": ("numba", 2)}
    times = {name: [] for name in variants}
    previous = torch.get_num_threads()

    def run(name):
        engine, threads = variants[name]
        torch.set_num_threads(threads)
        try:
            with training_engine(engine):
                start = time.perf_counter()
                step()
                return time.perf_counter() - start
        finally:
            torch.set_num_threads(previous)

    for name in variants:  # warm up (and compile)
        run(name)
    for r in range(repeats):
        for name in list(variants) if r % 2 == 0 else list(variants)[::-1]:
            times[name].append(run(name))
    flops = step_flops(arch, n_trees, kept, n_outputs, rows)
    return {name: float(np.median(t)) for name, t in times.items()}, flops


def measure_threads(name, rounds=1, n_train=10_000, params=None, seed=0):
    """Median wall seconds of the numba engine's fit with 1 and 2 threads."""
    from sktree_lmc import SoftTreeEnsembleClassifier, training_engine

    from .bench_accuracy import load, split

    X_tr, X_te, y_tr, y_te = split(*load("raw", name), n_train, n_train, seed, True)
    for threads in (1, 2):  # warm up: load the compiled kernels, start the threads
        with training_engine("numba"):
            _fit(lambda: SoftTreeEnsembleClassifier(n_estimators=8, max_epochs=1,
                                                    n_threads=threads),
                 X_tr[:300], y_tr[:300], X_te[:10], y_te[:10])
    wall = {1: [], 2: []}
    for r in range(rounds):
        for threads in (1, 2) if r % 2 == 0 else (2, 1):
            with training_engine("numba"):
                _, seconds, _ = _fit(
                    lambda: SoftTreeEnsembleClassifier(random_state=seed, device="cpu",
                                                       n_threads=threads, **(params or {})),
                    X_tr, y_tr, X_te, y_te, wall=True)
            wall[threads].append(seconds)
    return {t: float(np.median(v)) for t, v in wall.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["electricity", "california"])
    parser.add_argument("--rounds", type=int, default=1, help="fits per engine and dataset")
    parser.add_argument("--thread-rounds", type=int, default=1)
    parser.add_argument("--features", type=int, default=7, help="features of the step")
    parser.add_argument("--skip", nargs="*", default=[], choices=["fits", "step", "threads"])
    parser.add_argument("--engines", nargs="+", default=["torch", "numba"],
                        choices=["torch", "numba"], help="the engines of the fits")
    parser.add_argument("--out", default=None, help="append the results as a JSON line")
    parser.add_argument("--smoke", action="store_true", help="seconds: 300 rows, tiny models")
    args = parser.parse_args(argv)
    n_train, params, step_kw = 10_000, None, {}
    if args.smoke:
        n_train, params = 300, {"n_estimators": 8, "max_epochs": 2}
        step_kw = {"n_trees": 8, "rows": 64, "repeats": 2}
        args.datasets, args.rounds, args.thread_rounds = args.datasets[:1], 1, 1
    from sktree_lmc import training_engine

    with training_engine("numba"):  # an ImportError without numba, before any fit
        pass
    results = {"load_before": os.getloadavg(), "fits": {}}
    print(f"load average before: {results['load_before']}")
    import torch
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    limits = threadpool_limits(limits=1)  # HGB's OpenMP and the BLAS: one thread too
    try:
        if "step" not in args.skip:
            seconds, flops = measure_step(args.features, **step_kw)
            rate = matmul_gflops(3 if args.smoke else 15)
            results["step"] = {"seconds": seconds, "flops": flops, "matmul_gflops": rate}
            print(f"training step ({flops / 1e6:.1f} MFLOP; torch.mm {rate:.1f} GFLOP/s):")
            for engine, s in seconds.items():
                gflops = flops / s / 1e9
                print(f"  {engine:6s} {1e3 * s:7.2f} ms  {gflops:6.1f} GFLOP/s  "
                      f"{100 * gflops / rate:5.1f} % of the matmul rate")
        if "fits" not in args.skip:
            for name in args.datasets:
                res = results["fits"][name] = measure_fits(name, args.rounds, n_train, params,
                                                           engines=tuple(args.engines))
                print(f"{name}: HGB {res['hgb']['fit_cpu_s']:.2f} s, "
                      f"{res['hgb']['accuracy']:.2f} %")
                for engine in args.engines:
                    r = res[engine]
                    print(f"  {engine:6s} fit {r['fit_cpu_s']:7.2f} s = "
                          f"{r['ratio_to_hgb']:6.1f} x HGB, {r['accuracy']:.2f} %, "
                          f"{r['epochs']} epochs")
    finally:
        limits.restore_original_limits()
        torch.set_num_threads(previous)
    if "threads" not in args.skip:
        wall = results["threads"] = measure_threads(args.datasets[0], args.thread_rounds,
                                                    n_train, params)
        print(f"{args.datasets[0]} numba fit wall: 1 thread {wall[1]:.2f} s, 2 threads "
              f"{wall[2]:.2f} s, speed-up {wall[1] / wall[2]:.2f}")
    results["load_after"] = os.getloadavg()
    print(f"load average after: {results['load_after']}")
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(results, default=float) + "\n")
    return results


if __name__ == "__main__":  # pragma: no cover
    main()

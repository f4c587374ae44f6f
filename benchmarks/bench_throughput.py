"""Training and prediction throughput, and fits on a busy machine.

Throughput (the default mode) measures samples per second of

* ``train``: one optimization step on a minibatch (forward, cross-entropy,
  backward, Adam step), as in :meth:`SoftTreeEnsembleClassifier.fit`;
* ``predict``: the module's forward pass alone under ``torch.inference_mode``,
  same batch;
* ``fit`` (estimator): :meth:`SoftTreeEnsembleClassifier.fit`, one epoch over
  ``--n-rows`` rows, validation and set-up included;
* ``predict_proba`` (estimator): rows per second of
  :meth:`SoftTreeEnsembleClassifier.predict_proba` on ``--n-predict`` rows, end
  to end (validation, the inference kernel
  :func:`~sktree_lmc.model._forward.predict_chunked`, softmax);

for every architecture at ``M`` trees, depths ``D``, ``F`` features and batch
size ``B`` on the CPU with the torch thread counts ``--threads``, for up to
three formulations of the same model (``train`` and ``predict`` only):

* ``vectorized``: the package's kernel (:class:`SoftTreeEnsembleModule`);
* ``logspace``: the earlier vectorized formulation, one matmul for the split
  logits, then ``exp(logsigmoid([z, -z]) @ R)`` with the routing matrix ``R``;
* ``loop``: a plain Python loop over per-tree modules (what one writes first).

Every configuration is timed in ``--repeats`` windows of at least
``--min-time`` seconds and the best window is kept, which filters out some of
the noise of other processes sharing the machine. ``--clock process`` times
with the CPU time of this process instead of the wall clock: on a busy machine
that measures what one thread achieves while it runs (use it with 1 thread
only; with 2 threads it adds up both threads' time, spinning included).

``--busy`` runs the busy-machine comparison instead: a busy-loop process is
pinned to one core (``--busy-core``, default the last CPU) and, for every
architecture at ``--depths``, fits on ``--n-rows`` rows (one epoch) are timed
alternately (the one-thread settings in alternating order), ``--repeats`` times each,
for three settings (``--variants``):

* ``default``: the estimator as configured by default (``n_threads=1``);
* ``one_thread``: ``n_threads=1`` given explicitly;
* ``torch_threads``: ``n_threads=None`` with torch at one thread per CPU,
  torch's own default and the estimators' behaviour before ``n_threads``.

It reports the medians and the ratios to ``one_thread``; the acceptance
criterion is ``default / one_thread <= 1.25``.

``--ratio`` measures ``predict_proba`` rows/s against training samples/s of the
same configuration alternately, ``--repeats`` rounds of one window each, and
reports medians (the acceptance criterion is a ratio of at least 3 at M=256,
D=2, F=44, one thread).

Tables are printed as Markdown and written as CSV to ``--out`` (default
``benchmarks/results/``, git-ignored), one row per finished configuration.

Usage::

    python -m benchmarks.bench_throughput                  # throughput, D in {2, 4, 6}
    python -m benchmarks.bench_throughput --threads 1 --clock process
    python -m benchmarks.bench_throughput --busy --depths 2 4
    python -m benchmarks.bench_throughput --ratio --depths 2 --clock process
    python -m benchmarks.bench_throughput --smoke          # a tiny run, for the tests
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sktree_lmc import (
    ARCHITECTURES,
    SoftTreeEnsembleClassifier,
    SoftTreeEnsembleModule,
    get_architecture,
)
from sktree_lmc.datasets import PAPER_TRAINING

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
KERNELS = ("vectorized", "logspace", "loop")


class LogSpaceEnsemble(SoftTreeEnsembleModule):
    """The log-space formulation: ``mu = exp(logsigmoid([z, -z]) @ R)``."""

    def __init__(self, arch, n_trees, n_features, n_outputs, generator=None):
        super().__init__(arch, n_trees, n_features, n_outputs, generator=generator)
        self.register_buffer("routing", torch.from_numpy(arch.routing_matrix()))

    def forward(self, X):
        M, N, Fdim = self.split_weight.shape
        z = torch.addmm(self.split_bias.reshape(-1), X, self.split_weight.reshape(M * N, Fdim).T)
        z = z.view(X.shape[0], M, N)
        mu = torch.exp(F.logsigmoid(torch.cat([z, -z], dim=-1)) @ self.routing)
        L, C = self.leaf_value.shape[1:]
        return mu.reshape(X.shape[0], M * L) @ self.leaf_value.reshape(M * L, C)


class _LoopTree(nn.Module):
    """One soft tree, its leaf probabilities as products along the paths of the table."""

    def __init__(self, arch, split_weight, split_bias, leaf_value):
        super().__init__()
        self.split_weight = nn.Parameter(split_weight.detach().clone())
        self.split_bias = nn.Parameter(split_bias.detach().clone())
        self.leaf_value = nn.Parameter(leaf_value.detach().clone())
        self.paths = [
            [(n, int(arch.code[leaf, n])) for n in range(arch.n_nodes) if arch.code[leaf, n]]
            for leaf in arch.free_leaves
        ]

    def forward(self, X):
        s = torch.sigmoid(X @ self.split_weight.T + self.split_bias)
        out = 0.0
        for j, path in enumerate(self.paths):
            mu = torch.ones(X.shape[0], dtype=X.dtype)
            for n, c in path:
                mu = mu * (s[:, n] if c == 1 else 1 - s[:, n])
            out = out + mu[:, None] * self.leaf_value[j]
        return out


class LoopEnsemble(nn.Module):
    """A plain Python loop over ``M`` per-tree modules."""

    def __init__(self, arch, n_trees, n_features, n_outputs, generator=None):
        super().__init__()
        ref = SoftTreeEnsembleModule(arch, n_trees, n_features, n_outputs, generator=generator)
        self.trees = nn.ModuleList(
            _LoopTree(arch, ref.split_weight[m], ref.split_bias[m], ref.leaf_value[m])
            for m in range(n_trees)
        )

    def forward(self, X):
        out = 0.0
        for tree in self.trees:
            out = out + tree(X)
        return out


MODULES = {"vectorized": SoftTreeEnsembleModule, "logspace": LogSpaceEnsemble, "loop": LoopEnsemble}


CLOCKS = {"wall": time.perf_counter, "process": time.process_time}


def _best_rate(fn, batch_size, min_time, repeats, clock=time.perf_counter):
    """Best samples/s of ``fn`` (one batch per call) over ``repeats`` timing windows."""
    fn()  # warm-up
    fn()
    best = 0.0
    for _ in range(repeats):
        calls, start = 0, clock()
        while True:
            fn()
            calls += 1
            elapsed = clock() - start
            if elapsed >= min_time:
                break
        best = max(best, calls * batch_size / max(elapsed, 1e-9))
    return best


def measure(kernel, arch_name, depth, n_trees, n_features, batch_size, n_classes, min_time,
            repeats, clock="wall", seed=0):
    """Training and prediction throughput (samples/s) of one configuration.

    Returns
    -------
    dict
        ``{"train": samples_per_s, "predict": samples_per_s}``.
    """
    gen = torch.Generator().manual_seed(seed)
    arch = get_architecture(arch_name, depth)
    module = MODULES[kernel](arch, n_trees, n_features, n_classes, generator=gen)
    X = torch.randn(batch_size, n_features, generator=gen)
    y = torch.randint(0, n_classes, (batch_size,), generator=gen)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-2)

    def train_step():
        loss = F.cross_entropy(module(X), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def predict_step():
        with torch.inference_mode():
            module(X)

    timer = CLOCKS[clock]
    return {
        "train": _best_rate(train_step, batch_size, min_time, repeats, timer),
        "predict": _best_rate(predict_step, batch_size, min_time, repeats, timer),
    }


def synthetic_data(n_rows, n_features, n_classes, seed=0):
    """Gaussian features and labels of a random linear model (float32, int64)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    y = np.argmax(X @ rng.standard_normal((n_features, n_classes)), axis=1)
    return X, y


def _estimator(arch_name, depth, n_trees, batch_size, **params):
    """One epoch of the paper's training (``PAPER_TRAINING``), so that the rates measured do
    not move with the package's defaults."""
    return SoftTreeEnsembleClassifier(
        arch=arch_name, n_estimators=n_trees, depth=depth, batch_size=batch_size, max_epochs=1,
        device="cpu", random_state=0, **{**PAPER_TRAINING, **params},
    )


def measure_estimator(arch_name, depth, n_trees, n_features, batch_size, n_classes, n_rows,
                      n_predict, min_time, repeats, clock="wall"):
    """Estimator-level throughput: ``fit`` samples/s (one epoch) and ``predict_proba`` rows/s.

    The estimator runs with ``n_threads=None``, i.e. with the thread count set by the caller
    (:func:`run` sets it per configuration).
    """
    X, y = synthetic_data(max(n_rows, n_predict), n_features, n_classes)
    est = _estimator(arch_name, depth, n_trees, batch_size, n_threads=None)
    timer = CLOCKS[clock]
    fit = _best_rate(lambda: est.fit(X[:n_rows], y[:n_rows]), n_rows, min_time, repeats, timer)
    Xp = X[:n_predict]
    proba = _best_rate(lambda: est.predict_proba(Xp), n_predict, min_time, repeats, timer)
    return {"fit": fit, "predict_proba": proba}


def _load():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else ""


def run(archs, depths, threads, kernels, n_trees, n_features, batch_size, n_classes, min_time,
        repeats, clock="wall", progress=print, n_rows=4096, n_predict=20000, estimator=True,
        csv_path=None):
    """Measure every configuration; returns a list of row dicts.

    With ``csv_path``, each row is appended to that CSV as soon as it is measured.
    """
    rows = []
    old_threads = torch.get_num_threads()
    try:
        for n_threads in threads:
            torch.set_num_threads(n_threads)
            for arch_name in archs:
                for depth in depths:
                    row = {
                        "threads": n_threads, "arch": arch_name, "depth": depth,
                        "n_trees": n_trees, "n_features": n_features, "batch_size": batch_size,
                        "clock": clock,
                    }
                    for kernel in kernels:
                        rates = measure(kernel, arch_name, depth, n_trees, n_features,
                                        batch_size, n_classes, min_time, repeats, clock)
                        row[f"train_{kernel}"] = rates["train"]
                        row[f"predict_{kernel}"] = rates["predict"]
                    if estimator:
                        rates = measure_estimator(arch_name, depth, n_trees, n_features,
                                                  batch_size, n_classes, n_rows, n_predict,
                                                  min_time, repeats, clock)
                        row["fit"] = rates["fit"]
                        row["predict_proba"] = rates["predict_proba"]
                        if "vectorized" in kernels:
                            row["proba_over_train"] = row["predict_proba"] / row[
                                "train_vectorized"]
                    row["load_avg_1min"] = _load()
                    rows.append(row)
                    if csv_path is not None:
                        write_csv(rows, csv_path)
                    progress(
                        f"threads={n_threads} {arch_name} D={depth}: "
                        + ", ".join(f"{k} {v:,.0f}/s" for k, v in row.items()
                                    if k.startswith(("train", "predict", "fit")))
                    )
    finally:
        torch.set_num_threads(old_threads)
    return rows


def markdown_table(rows, kernels):
    """Rows as a Markdown table (samples/s, thousands separators)."""
    cols = ["threads", "arch", "D"]
    for phase in ("train", "predict"):
        cols += [f"{phase} {k}" for k in kernels]
        if "loop" in kernels and "vectorized" in kernels:
            cols.append(f"{phase} speed-up vs loop")
    estimator = bool(rows) and "fit" in rows[0]
    if estimator:
        cols += ["fit", "predict_proba"]
        if "vectorized" in kernels:
            cols.append("predict_proba / train")
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        cells = [str(r["threads"]), r["arch"], str(r["depth"])]
        for phase in ("train", "predict"):
            cells += [f"{r[f'{phase}_{k}']:,.0f}" for k in kernels]
            if "loop" in kernels and "vectorized" in kernels:
                cells.append(f"{r[f'{phase}_vectorized'] / r[f'{phase}_loop']:.0f}x")
        if estimator:
            cells += [f"{r['fit']:,.0f}", f"{r['predict_proba']:,.0f}"]
            if "vectorized" in kernels:
                cells.append(f"{r['proba_over_train']:.1f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_csv(rows, path):
    """Write the rows (plus the torch version and platform) as CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {"torch": torch.__version__, "machine": platform.machine(),
             "cpu_count": os.cpu_count()}
    fields = list(rows[0]) + list(extra)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, **extra})


# -- predict_proba versus training, interleaved ------------------------------------------------


def ratio_interleaved(archs, depths, n_trees, n_features, batch_size, n_classes, n_predict,
                      min_time, rounds, clock="process", progress=print, csv_path=None,
                      n_threads=1):
    """``predict_proba`` rows/s over training samples/s, measured alternately.

    Each of ``rounds`` rounds times one window of training steps (as in :func:`measure`) and
    one window of :meth:`SoftTreeEnsembleClassifier.predict_proba` calls on ``n_predict`` rows
    of a fitted model of the same configuration; the medians over rounds and the median of
    the per-round ratios are reported. Alternating puts both under the same load. Both run
    with ``n_threads`` torch threads (restored afterwards).
    """
    old_threads = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        return _ratio_rows(archs, depths, n_trees, n_features, batch_size, n_classes, n_predict,
                           min_time, rounds, clock, progress, csv_path, n_threads)
    finally:
        torch.set_num_threads(old_threads)


def _ratio_rows(archs, depths, n_trees, n_features, batch_size, n_classes, n_predict,
                min_time, rounds, clock, progress, csv_path, n_threads):
    timer = CLOCKS[clock]
    rows = []
    for arch_name in archs:
        for depth in depths:
            gen = torch.Generator().manual_seed(0)
            arch = get_architecture(arch_name, depth)
            module = SoftTreeEnsembleModule(arch, n_trees, n_features, n_classes, generator=gen)
            Xb = torch.randn(batch_size, n_features, generator=gen)
            yb = torch.randint(0, n_classes, (batch_size,), generator=gen)
            optimizer = torch.optim.Adam(module.parameters(), lr=1e-2)

            def train_step():
                loss = F.cross_entropy(module(Xb), yb)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

            X, y = synthetic_data(max(n_predict, 4096), n_features, n_classes)
            est = _estimator(arch_name, depth, n_trees, batch_size, n_threads=n_threads)
            est.fit(X[:4096], y[:4096])
            Xp = X[:n_predict]
            train, proba = [], []
            for _ in range(rounds):
                train.append(_best_rate(train_step, batch_size, min_time, 1, timer))
                proba.append(_best_rate(lambda: est.predict_proba(Xp), n_predict, min_time, 1,
                                        timer))
            row = {"arch": arch_name, "depth": depth, "n_trees": n_trees, "rounds": rounds,
                   "clock": clock, "threads": n_threads, "train": statistics.median(train),
                   "predict_proba": statistics.median(proba),
                   "ratio": statistics.median(p / t for p, t in zip(proba, train)),
                   "ratio_min": min(p / t for p, t in zip(proba, train)),
                   "load_avg_1min": _load()}
            rows.append(row)
            if csv_path is not None:
                write_csv(rows, csv_path)
            progress(f"ratio {arch_name} D={depth}: train {row['train']:,.0f}/s, predict_proba "
                     f"{row['predict_proba']:,.0f}/s, ratio {row['ratio']:.2f} "
                     f"(min {row['ratio_min']:.2f})")
    return rows


def ratio_table(rows):
    """The interleaved rows as a Markdown table."""
    cols = ["arch", "D", "train (samples/s)", "predict_proba (rows/s)", "ratio (median)",
            "ratio (min)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join([
            r["arch"], str(r["depth"]), f"{r['train']:,.0f}", f"{r['predict_proba']:,.0f}",
            f"{r['ratio']:.2f}", f"{r['ratio_min']:.2f}"]) + " |")
    return "\n".join(lines)


# -- the busy-machine comparison ---------------------------------------------------------------

BUSY_VARIANTS = ("default", "one_thread", "torch_threads")


def _spin():  # pragma: no cover - runs in the busy process
    while True:
        pass


def start_busy_process(core):
    """A process spinning on one core (pinned to ``core`` where the OS allows it)."""
    proc = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    proc.start()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(proc.pid, {core})
    return proc


def _top_processes(n=6):
    """The processes using the most CPU (``ps``), to say what else was running."""
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):  # pragma: no cover
        return ""
    return "; ".join(" ".join(line.split()) for line in out.splitlines()[1 : n + 1])


def busy_comparison(archs, depths, n_trees, n_features, batch_size, n_classes, n_rows, repeats,
                    busy_core=None, progress=print, csv_path=None, variants=BUSY_VARIANTS):
    """Fit times with one core kept busy: default, one thread and torch's thread count.

    Variants are timed alternately (``repeats`` rounds of one fit each; the one-thread
    variants in alternating order) so that changes in the machine's load hit all of them
    alike. ``variants`` selects a subset (``one_thread`` is always needed for the ratios).
    Returns one row per configuration with the median seconds per variant and the ratios to
    ``one_thread``.
    """
    X, y = synthetic_data(n_rows, n_features, n_classes)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    core = cpus[-1] if busy_core is None else busy_core
    torch_default = len(cpus)
    settings = {"default": {}, "one_thread": {"n_threads": 1},
                "torch_threads": {"n_threads": None}}
    rows = []
    old_threads = torch.get_num_threads()
    busy = start_busy_process(core) if busy_core != -1 else None
    try:
        torch.set_num_threads(torch_default)
        for arch_name in archs:
            for depth in depths:
                load_before = _load()
                times = {v: [] for v in variants}
                for v in variants:  # warm-up, small
                    _estimator(arch_name, depth, n_trees, batch_size, **settings[v]).fit(
                        X[:batch_size], y[:batch_size])
                for r in range(repeats):
                    # the multi-threaded variant first, then the others in an order that
                    # alternates between rounds: each one-thread variant follows it equally often
                    order = [v for v in ("torch_threads",) if v in variants] + [
                        v for v in ("default", "one_thread")[:: 1 if r % 2 == 0 else -1]
                        if v in variants]
                    for v in order:
                        est = _estimator(arch_name, depth, n_trees, batch_size, **settings[v])
                        start = time.perf_counter()
                        est.fit(X, y)
                        times[v].append(time.perf_counter() - start)
                        assert torch.get_num_threads() == torch_default
                med = {v: statistics.median(t) for v, t in times.items()}
                med.update({v: float("nan") for v in BUSY_VARIANTS if v not in med})
                row = {"arch": arch_name, "depth": depth, "n_trees": n_trees, "n_rows": n_rows,
                       "repeats": repeats, "torch_default_threads": torch_default,
                       "busy_core": core if busy is not None else ""}
                row.update({f"{v}_s": med[v] for v in BUSY_VARIANTS})
                row["default_over_one"] = med["default"] / med["one_thread"]
                row["torch_threads_over_one"] = med["torch_threads"] / med["one_thread"]
                row["load_avg_before"], row["load_avg_after"] = load_before, _load()
                row["top_processes"] = _top_processes()
                rows.append(row)
                if csv_path is not None:
                    write_csv(rows, csv_path)
                progress(
                    f"busy {arch_name} D={depth}: "
                    + ", ".join(f"{v} {med[v]:.2f}s" for v in BUSY_VARIANTS)
                    + f"; default/one {row['default_over_one']:.2f}, "
                    f"torch/one {row['torch_threads_over_one']:.1f}"
                )
    finally:
        torch.set_num_threads(old_threads)
        if busy is not None:
            busy.terminate()
            busy.join()
    return rows


def busy_table(rows):
    """The busy-machine rows as a Markdown table (median seconds, ratios)."""
    cols = ["arch", "D", "default (s)", "one thread (s)", "torch threads (s)",
            "default / one", "torch threads / one", "load before/after"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join([
            r["arch"], str(r["depth"]), f"{r['default_s']:.2f}", f"{r['one_thread_s']:.2f}",
            f"{r['torch_threads_s']:.2f}", f"{r['default_over_one']:.2f}",
            f"{r['torch_threads_over_one']:.1f}",
            f"{r['load_avg_before']:.1f}/{r['load_avg_after']:.1f}",
        ]) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes and timings, to check that the script runs")
    parser.add_argument("--busy", action="store_true",
                        help="the busy-machine comparison instead of the throughput table")
    parser.add_argument("--ratio", action="store_true",
                        help="predict_proba / training throughput, measured alternately")
    parser.add_argument("--variants", nargs="+", default=list(BUSY_VARIANTS),
                        choices=BUSY_VARIANTS, help="settings timed by --busy")
    parser.add_argument("--busy-core", type=int, default=None,
                        help="core of the busy-loop process (default: the last CPU; "
                             "-1: no busy process)")
    parser.add_argument("--archs", nargs="+", default=sorted(ARCHITECTURES),
                        choices=sorted(ARCHITECTURES))
    parser.add_argument("--depths", nargs="+", type=int, default=None,
                        help="default: 2 4 6 (throughput), 2 4 (--busy)")
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--kernels", nargs="+", default=["vectorized"], choices=KERNELS)
    parser.add_argument("--no-estimator", action="store_true",
                        help="skip the estimator-level fit and predict_proba columns")
    parser.add_argument("--n-estimators", type=int, default=256, help="trees M")
    parser.add_argument("--n-features", type=int, default=44, help="features F")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--n-classes", type=int, default=2)
    parser.add_argument("--n-rows", type=int, default=None,
                        help="rows per fit (default 4096; 5000 with --busy)")
    parser.add_argument("--n-predict", type=int, default=20000,
                        help="rows per predict_proba call")
    parser.add_argument("--min-time", type=float, default=0.5,
                        help="seconds per timing window")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timing windows (best kept); fits per variant with --busy")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall clock, or this process's CPU time (1 thread only)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the CSV")
    args = parser.parse_args(argv)
    if args.depths is None:
        args.depths = [2, 4] if args.busy else [2, 4, 6]
    if args.n_rows is None:
        args.n_rows = 5000 if args.busy else 4096
    if args.smoke:
        args.depths = [1, 2]
        args.kernels = list(KERNELS) if not args.busy else args.kernels
        args.n_estimators, args.n_features, args.batch_size = 4, 5, 16
        args.min_time, args.n_rows, args.n_predict = 0.0, 64, 100
        args.repeats = 1
        if args.busy:
            args.archs = args.archs[:1]
    if args.ratio:
        path = args.out / ("ratio_smoke.csv" if args.smoke else f"ratio_{args.clock}.csv")
        rows = ratio_interleaved(args.archs, args.depths, args.n_estimators, args.n_features,
                                 args.batch_size, args.n_classes, args.n_predict, args.min_time,
                                 args.repeats, args.clock, csv_path=path,
                                 n_threads=args.threads[0])
        print(f"\npredict_proba versus training, alternately ({args.repeats} rounds, "
              f"M={args.n_estimators}, F={args.n_features}, {args.n_predict} rows per call, "
              f"{args.clock} clock, {args.threads[0]} thread(s))\n")
        print(ratio_table(rows))
        print(f"\nwrote {path}")
        return rows
    if args.busy:
        stem = "busy_smoke" if args.smoke else f"busy_{args.n_rows}"
        path = args.out / f"{stem}.csv"
        rows = busy_comparison(args.archs, args.depths, args.n_estimators, args.n_features,
                               args.batch_size, args.n_classes, args.n_rows, args.repeats,
                               busy_core=args.busy_core, csv_path=path,
                               variants=tuple(args.variants))
        print(f"\nFit on a busy machine (one busy-loop process; M={args.n_estimators}, "
              f"F={args.n_features}, {args.n_rows} rows, 1 epoch, medians of {args.repeats})\n")
        print(busy_table(rows))
        print(f"\nwrote {path}")
        return rows

    stem = "throughput_smoke" if args.smoke else f"throughput_{args.clock}"
    path = args.out / f"{stem}.csv"
    rows = run(args.archs, args.depths, args.threads, args.kernels, args.n_estimators,
               args.n_features, args.batch_size, args.n_classes, args.min_time, args.repeats,
               args.clock, n_rows=args.n_rows, n_predict=args.n_predict,
               estimator=not args.no_estimator, csv_path=path)
    table = markdown_table(rows, args.kernels)
    title = (
        f"Throughput in samples/s (M={args.n_estimators}, F={args.n_features}, "
        f"batch {args.batch_size}, {args.n_classes} classes, torch {torch.__version__}, "
        f"{os.cpu_count()} CPUs, {args.clock} clock; train = forward + backward + Adam step)"
    )
    print(f"\n{title}\n\n{table}")
    print(f"\nwrote {path}")
    return rows


if __name__ == "__main__":
    main()

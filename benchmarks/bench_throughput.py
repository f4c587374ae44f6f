"""Training and prediction throughput of the soft tree ensemble kernels.

Measures samples per second of

* ``train``: one optimization step on a minibatch (forward, cross-entropy,
  backward, Adam step), as in :meth:`SoftTreeEnsembleClassifier.fit`;
* ``predict``: the forward pass alone under ``torch.inference_mode``,

for every architecture at ``M`` trees, depths ``D``, ``F`` features and batch
size ``B`` on the CPU with 1 and 2 torch threads, for three formulations of the
same model:

* ``vectorized``: the package's kernel (:class:`SoftTreeEnsembleModule`);
* ``logspace``: the earlier vectorized formulation, one matmul for the split
  logits, then ``exp(logsigmoid([z, -z]) @ R)`` with the routing matrix ``R``;
* ``loop``: a plain Python loop over per-tree modules (what one writes first).

Every configuration is timed in ``--repeats`` windows of at least
``--min-time`` seconds and the best window is kept, which filters out some of
the noise of other processes sharing the machine. ``--clock process`` times
with the CPU time of this process instead of the wall clock: on a busy machine
that measures what one thread achieves while it runs (use it with 1 thread
only; with 2 threads it adds up both threads' time, spinning included). The
table is printed as Markdown and written as CSV to ``--out`` (default
``benchmarks/results/``, git-ignored).

Usage::

    python -m benchmarks.bench_throughput                  # the full table (~10 minutes)
    python -m benchmarks.bench_throughput --threads 1 --clock process
    python -m benchmarks.bench_throughput --smoke          # a tiny run, for the tests
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from sktree_lmc import ARCHITECTURES, SoftTreeEnsembleModule, get_architecture

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


def run(archs, depths, threads, kernels, n_trees, n_features, batch_size, n_classes, min_time,
        repeats, clock="wall", progress=print):
    """Measure every configuration; returns a list of row dicts."""
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
                    row["load_avg_1min"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else ""
                    rows.append(row)
                    progress(
                        f"threads={n_threads} {arch_name} D={depth}: "
                        + ", ".join(f"train {k} {row[f'train_{k}']:,.0f}/s" for k in kernels)
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
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        cells = [str(r["threads"]), r["arch"], str(r["depth"])]
        for phase in ("train", "predict"):
            cells += [f"{r[f'{phase}_{k}']:,.0f}" for k in kernels]
            if "loop" in kernels and "vectorized" in kernels:
                cells.append(f"{r[f'{phase}_vectorized'] / r[f'{phase}_loop']:.0f}x")
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes and timings, to check that the script runs")
    parser.add_argument("--archs", nargs="+", default=sorted(ARCHITECTURES),
                        choices=sorted(ARCHITECTURES))
    parser.add_argument("--depths", nargs="+", type=int, default=[2, 3, 4])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--n-estimators", type=int, default=256, help="trees M")
    parser.add_argument("--n-features", type=int, default=44, help="features F")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--n-classes", type=int, default=2)
    parser.add_argument("--min-time", type=float, default=0.5,
                        help="seconds per timing window")
    parser.add_argument("--repeats", type=int, default=5, help="timing windows (best kept)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall clock, or this process's CPU time (1 thread only)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the CSV")
    args = parser.parse_args(argv)
    if args.smoke:
        args.depths, args.threads = [1, 2], [1]
        args.n_estimators, args.n_features, args.batch_size = 4, 5, 16
        args.min_time, args.repeats = 0.0, 1

    rows = run(args.archs, args.depths, args.threads, args.kernels, args.n_estimators,
               args.n_features, args.batch_size, args.n_classes, args.min_time, args.repeats,
               args.clock)
    table = markdown_table(rows, args.kernels)
    title = (
        f"Throughput in samples/s (M={args.n_estimators}, F={args.n_features}, "
        f"batch {args.batch_size}, {args.n_classes} classes, torch {torch.__version__}, "
        f"{os.cpu_count()} CPUs, {args.clock} clock; train = forward + backward + Adam step)"
    )
    print(f"\n{title}\n\n{table}")
    stem = "throughput_smoke" if args.smoke else f"throughput_{args.clock}"
    path = args.out / f"{stem}.csv"
    write_csv(rows, path)
    print(f"\nwrote {path}")
    return rows


if __name__ == "__main__":
    main()

"""Speed of weight matching (WM) and activation matching (AM).

For every architecture at depths 2 and 3 and ``M`` in {256, 1024, 4096} trees
(``F = 44`` features, ``C = 2`` outputs, random parameters), one alignment of a
model ``b`` to a model ``a`` with ``invariances="all"`` is timed in its parts:

* ``outputs``: AM only, the per-tree outputs of both models on ``n_samples=512`` rows;
* ``table``: the ``M x M`` tree similarity table (WM: :func:`pairwise_tree_similarity`,
  the maximum over the symmetry group, exact DP for non-oblivious trees;
  AM: inner products of flattened per-tree outputs);
* ``ops``: :func:`best_ops_for_pairs` on the ``M`` matched pairs;
* ``assignment``: :func:`scipy.optimize.linear_sum_assignment` on the table (for AM
  in the equivalent form ``-|o_a - o_b|^2 / 2``, as the library does: several times
  faster on these near-rank-deficient tables).

``similarity = outputs + table + ops`` is everything but the assignment; ``CPU`` is
the process CPU time of the whole alignment (all threads; less sensitive than the
wall-clock times to other jobs on a shared machine). A last
row times non-oblivious WM at depth 6 (``2**63`` flip patterns per tree) with
``M = 256``.

Run from the repository root::

    python -m benchmarks.bench_alignment            # the full grid (a few minutes on 2 cores)
    python -m benchmarks.bench_alignment --smoke    # a tiny grid, seconds

It prints a Markdown table and writes a CSV to ``benchmarks/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from sktree_lmc import (
    ARCHITECTURES,
    SoftTreeEnsembleModule,
    TreeParams,
    best_ops_for_pairs,
    get_architecture,
    pairwise_tree_similarity,
)

ARCHS = tuple(ARCHITECTURES)
RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = ("method", "arch", "depth", "M", "outputs_s", "table_s", "ops_s", "similarity_s",
           "assignment_s", "total_s", "cpu_s")


def random_params(arch, M, F, C, rng):
    """Parameters at the scale of the default initialization."""
    return TreeParams(
        rng.uniform(-1, 1, (M, arch.n_nodes, F)) / np.sqrt(F),
        rng.uniform(-1, 1, (M, arch.n_nodes)) / np.sqrt(F),
        rng.uniform(-1, 1, (M, arch.n_free_leaves, C)) / np.sqrt(arch.n_free_leaves),
    )


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def time_alignment(method, arch_name, depth, M, *, F=44, C=2, n_samples=512, seed=0):
    """Time one alignment of ``b`` to ``a``; returns a dict of the columns."""
    arch = get_architecture(arch_name, depth)
    rng = np.random.RandomState(seed)
    pa, pb = random_params(arch, M, F, C, rng), random_params(arch, M, F, C, rng)
    cpu0 = time.process_time()
    outputs_s = 0.0
    if method == "wm":
        S, table_s = _timed(lambda: pairwise_tree_similarity(pa, pb, arch, invariances="all"))
    else:
        X = torch.as_tensor(rng.standard_normal((n_samples, F)), dtype=torch.float32)

        def outputs():
            with torch.inference_mode():
                return [SoftTreeEnsembleModule.from_params(arch, p).tree_outputs(X).numpy()
                        for p in (pa, pb)]

        (oa, ob), outputs_s = _timed(outputs)

        def table():
            a = torch.as_tensor(oa, dtype=torch.float64).permute(1, 0, 2).reshape(M, -1)
            b = torch.as_tensor(ob, dtype=torch.float64).permute(1, 0, 2).reshape(M, -1)
            return (a @ b.T).numpy(), (a * a).sum(1).numpy(), (b * b).sum(1).numpy()

        (S, norms_a, norms_b), table_s = _timed(table)
    # the library's call: scipy's linear_sum_assignment (on the equivalent -|a-b|^2/2
    # form for AM, as activation_matching does)
    cost = S if method == "wm" else S - 0.5 * norms_a[:, None] - 0.5 * norms_b[None, :]
    (_, perm), assignment_s = _timed(lambda: linear_sum_assignment(cost, maximize=True))
    ops_s = 0.0
    if arch.n_ops > 1:
        _, ops_s = _timed(lambda: best_ops_for_pairs(pa, pb.permute_trees(perm), arch))
    similarity_s = outputs_s + table_s + ops_s
    return dict(method=method, arch=arch_name, depth=depth, M=M, outputs_s=outputs_s,
                table_s=table_s, ops_s=ops_s, similarity_s=similarity_s,
                assignment_s=assignment_s, total_s=similarity_s + assignment_s,
                cpu_s=time.process_time() - cpu0)


def grid(smoke=False):
    if smoke:
        configs = [(m, a, 2, 16) for m in ("wm", "am") for a in ARCHS]
        return configs + [("wm", "non_oblivious", 6, 8)]
    configs = [
        (m, a, d, M)
        for M in (256, 1024, 4096) for d in (2, 3) for a in ARCHS for m in ("wm", "am")
    ]
    return configs + [("wm", "non_oblivious", 6, 256)]


def markdown(rows):
    head = ("method", "arch", "D", "M", "outputs (s)", "table (s)", "ops (s)",
            "similarity (s)", "assignment (s)", "total (s)", "CPU (s)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        vals = [r["method"].upper(), r["arch"], str(r["depth"]), str(r["M"])] + [
            f"{r[k]:.3f}" for k in COLUMNS[4:]
        ]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny grid (seconds), for tests")
    parser.add_argument("--out", type=Path, default=None,
                        help="CSV path (default benchmarks/results/bench_alignment[_smoke].csv)")
    parser.add_argument("--max-m", type=int, default=None, help="skip configs with more trees")
    args = parser.parse_args(argv)

    out = args.out or RESULTS / ("bench_alignment_smoke.csv" if args.smoke
                                 else "bench_alignment.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"# Alignment timings: torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
          f"load average {os.getloadavg()[0]:.1f} at start; "
          "F=44, C=2, invariances='all', AM on 512 rows. Times are wall-clock seconds; "
          "CPU is the process CPU time of the whole alignment (all threads)\n", flush=True)
    rows = []
    t_start = time.perf_counter()
    time_alignment("wm", "oblivious", 2, 8)  # warm-up (imports, thread pools)
    for method, arch, depth, M in grid(args.smoke):
        if args.max_m and M > args.max_m:
            continue
        rows.append(time_alignment(method, arch, depth, M))
        r = rows[-1]
        print(f"  {method} {arch} D={depth} M={M}: similarity {r['similarity_s']:.3f} s, "
              f"assignment {r['assignment_s']:.3f} s", flush=True)
        with open(out, "w", newline="") as fh:  # rewritten after each row: partial runs count
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    print()
    print(markdown(rows))
    print(f"\nCSV: {out}; {time.perf_counter() - t_start:.0f} s in all, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    return rows


if __name__ == "__main__":
    main()

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

``--depth`` runs the depth grid instead: weight matching with ``invariances="all"``
(``weight_matching``: table, assignment, ops of the matched pairs) of oblivious trees at
``D = 2..10`` and non-oblivious trees at ``D = 2..12``, ``M`` in {64, 256}, ``F = 16`` (the
issue's setting), each timed (wall and CPU), with its objective (the sum of the matched
similarities) and, for oblivious trees through depth 7, that objective relative to the exact
optimum (the table assembled from blocks that ``pairwise_tree_similarity`` computes exactly,
then the assignment; non-oblivious matching is exact by construction). A configuration beyond
reach records the error the library raises (with its estimate). ``--exhaustive`` compares
the search with brute force on sampled pairs at depth 7; ``--one ARCH D M`` times one
configuration and reports the peak memory.

Run from the repository root::

    python -m benchmarks.bench_alignment            # the full grid (a few minutes on 2 cores)
    python -m benchmarks.bench_alignment --smoke    # a tiny grid, seconds
    python -m benchmarks.bench_alignment --depth    # the depth grid (long: in the background)

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


DEPTH_COLUMNS = ("arch", "depth", "M", "F", "wall_s", "cpu_s", "score", "exact_score",
                 "fraction", "error")
#: Tree pairs whose table ``pairwise_tree_similarity`` computes exactly at depth D >= 7:
#: ``pairs * 4**D <= 2**24`` (see its docstring; through depth 6 every table is exact).
EXACT_TABLE_BUDGET = 2 ** 24
#: Oblivious depths whose exact objective is computed (exhaustive search of every table
#: entry: about 160 s on one core at depth 7 with M=256).
EXACT_REFERENCE_DEPTH = 7


def weighted(params, arch):
    """Split parameters scaled by sqrt(node weight) and leaves, float64 tensors."""
    theta = np.concatenate([params.split_weight, params.split_bias[:, :, None]], axis=2)
    theta = theta * np.sqrt(arch.node_weights)[None, :, None]
    return (torch.as_tensor(theta, dtype=torch.float64),
            torch.as_tensor(params.leaf_value, dtype=torch.float64))


def subset(params, idx):
    return TreeParams(params.split_weight[idx], params.split_bias[idx], params.leaf_value[idx])


def exact_oblivious_score(pa, pb, arch):
    """Exact WM objective of oblivious trees: the table assembled from blocks small
    enough for ``pairwise_tree_similarity`` to be exact, then the assignment."""
    M = pa.n_trees
    rows = max(1, min(M, int(np.sqrt(EXACT_TABLE_BUDGET // 4 ** arch.depth))))
    S = np.empty((M, M))
    for i in range(0, M, rows):
        for j in range(0, M, rows):
            ia, ib = np.arange(i, min(i + rows, M)), np.arange(j, min(j + rows, M))
            S[i:i + rows, j:j + rows] = pairwise_tree_similarity(subset(pa, ia), subset(pb, ib),
                                                                 arch)
    r, c = linear_sum_assignment(S, maximize=True)
    return float(S[r, c].sum())


def time_depth(arch_name, depth, M, *, F=16, C=2, seed=0):
    """One weight matching at depth; returns a dict of ``DEPTH_COLUMNS``.

    A request the library refuses (non-oblivious, estimated above 15 min on
    one core) records its error, which quotes the estimate.
    """
    from sktree_lmc import weight_matching

    arch = get_architecture(arch_name, depth)
    row = dict(arch=arch_name, depth=depth, M=M, F=F, wall_s="", cpu_s="", score="",
               exact_score="", fraction="", error="")
    rng = np.random.RandomState(seed)
    pa, pb = random_params(arch, M, F, C, rng), random_params(arch, M, F, C, rng)
    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        al = weight_matching(pa, pb, arch)
    except ValueError as exc:
        row["error"] = str(exc)
        return row
    row.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - cpu0)
    (ta, la), (tm, lm) = weighted(pa, arch), weighted(al.apply(pb), arch)
    row["score"] = float((ta * tm).sum() + (la * lm).sum())
    if arch_name == "oblivious" and depth <= EXACT_REFERENCE_DEPTH:
        row["exact_score"] = exact_oblivious_score(pa, pb, arch)
        row["fraction"] = row["score"] / row["exact_score"]
    elif arch_name == "non_oblivious":  # the dynamic program is exact
        row["exact_score"], row["fraction"] = row["score"], 1.0
    return row


def leaf_perms(perm, sign, depth):
    """Old leaf at each new leaf for oblivious ops ``(perm, sign)``, shape (U, 2**D)."""
    bits = (torch.arange(1 << depth)[:, None] >> torch.arange(depth - 1, -1, -1)) & 1
    old_bits = bits[None] ^ (sign < 0).long()[:, None, :]
    return (old_bits << (depth - 1 - perm)[:, None, :]).sum(dim=2)


def exhaustive_oblivious(theta_a, leaves_a, theta_b, leaves_b):
    """Max over all ``2**D * D!`` ops of every aligned pair, by brute force."""
    import itertools

    M, D, _ = theta_a.shape
    G = torch.bmm(theta_a, theta_b.transpose(1, 2))
    signs = 1.0 - 2.0 * ((torch.arange(1 << D)[:, None] >> torch.arange(D)) & 1).double()
    best = torch.full((M,), -np.inf, dtype=torch.float64)
    for order in itertools.permutations(range(D)):
        lp = leaf_perms(torch.tensor(order).repeat(len(signs), 1), signs, D)
        node = (G[:, torch.arange(D), torch.tensor(order)][:, None, :] * signs).sum(2)
        leaf = torch.einsum("mlc,mulc->mu", leaves_a, leaves_b[:, lp])
        best = torch.maximum(best, (node + leaf).max(dim=1).values)
    return best


def exhaustive_check(n_pairs=16, depth=7, seed=0, models=None, M=64):
    """Fractions of the brute-force maximum reached on sampled pairs at ``depth``.

    Ensembles of ``M = 64`` trees, whose weight-matching table at depth 7 is too
    large to be exact: its entries are the seeds of the search. Pairs (tree ``m``
    of ``a``, tree ``m`` of ``b``), ``m < n_pairs``, of random ensembles (at the
    scale of the default initialization, and all-``N(0, 1)`` ones whose leaf term
    weighs more) and, when ``models`` (two fitted estimators of that depth) are
    given, the first pairs that weight matching forms between them. For each pair:
    the table entry (``pairwise_tree_similarity``) and the score of the op chosen
    for the matched pair (``best_ops_for_pairs``), divided by the brute-force maximum.
    """
    from sktree_lmc import weight_matching

    arch = get_architecture("oblivious", depth)
    rng = np.random.RandomState(seed)

    def gaussian():  # every parameter N(0, 1), F=4: the leaf term weighs much more
        return TreeParams(rng.standard_normal((M, depth, 4)), rng.standard_normal((M, depth)),
                          rng.standard_normal((M, 1 << depth, 2)))

    sets = [("random F=44", random_params(arch, M, 44, 2, rng),
             random_params(arch, M, 44, 2, rng)),
            ("random N(0,1) F=4", gaussian(), gaussian())]
    if models is not None:
        fa, fb = (m.tree_params_ for m in models)
        sets.append(("fitted", fa, fb.permute_trees(weight_matching(fa, fb, arch).tree_perm)))
    rows = []
    for name, pa, pb in sets:
        idx = np.arange(min(n_pairs, pa.n_trees))
        table = np.diag(pairwise_tree_similarity(pa, pb, arch))[idx]
        _, chosen = best_ops_for_pairs(subset(pa, idx), subset(pb, idx), arch)
        ta, la = weighted(subset(pa, idx), arch)
        tb, lb = weighted(subset(pb, idx), arch)
        ref = exhaustive_oblivious(ta, la, tb, lb).numpy()
        for what, val in (("table entry (seed)", table), ("op of matched pair", chosen)):
            frac = val / ref
            rows.append(dict(pairs=name, depth=depth, n=len(idx), M=pa.n_trees, value=what,
                             min_fraction=float(frac.min()), mean_fraction=float(frac.mean())))
            print(rows[-1], flush=True)
    return rows


def depth_grid(smoke=False):
    if smoke:
        return [("oblivious", 7, 8), ("non_oblivious", 7, 8)]
    # non-oblivious at depth 12 with M=256 is refused by the library (its estimate recorded)
    return ([("oblivious", d, M) for M in (64, 256) for d in range(2, 11)]
            + [("non_oblivious", d, M) for M in (64, 256) for d in range(2, 13)])


def depth_markdown(rows):
    """Markdown table of the depth grid (one row per configuration)."""
    lines = ["| arch | D | M | wall (s) | CPU (s) | objective / exact | note |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        def num(key, fmt):
            return format(float(r[key]), fmt) if r[key] not in ("", None) else "-"

        lines.append(f"| {r['arch']} | {r['depth']} | {r['M']} | {num('wall_s', '.2f')} | "
                     f"{num('cpu_s', '.2f')} | {num('fraction', '.6f')} | {r['error'][:90]} |")
    return "\n".join(lines)


def run_depth(out, smoke=False, max_m=None, archs=None):
    rows = []
    for arch, depth, M in depth_grid(smoke):
        if (max_m and M > max_m) or (archs and arch not in archs):
            continue
        rows.append(time_depth(arch, depth, M))
        r = rows[-1]
        print(f"  {arch} D={depth} M={M}: wall {r['wall_s'] or 0:.2f} s, cpu {r['cpu_s'] or 0:.2f}"
              f" s, fraction {r['fraction']} {r['error'][:80]}", flush=True)
        with open(out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=DEPTH_COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    print(depth_markdown(rows))
    return rows


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
    parser.add_argument("--depth", action="store_true",
                        help="the depth grid (oblivious D=2..10, non-oblivious D=2..12)")
    parser.add_argument("--depth-archs", nargs="+", default=None,
                        choices=["oblivious", "non_oblivious"],
                        help="with --depth: only these architectures")
    parser.add_argument("--exhaustive", action="store_true",
                        help="fractions of the brute-force optimum on sampled pairs at D=7")
    parser.add_argument("--models", nargs=2, type=Path, default=None,
                        help="with --exhaustive: two joblib files of fitted depth-7 models "
                             "(as cached by benchmarks.bench_depth)")
    parser.add_argument("--one", nargs=3, metavar=("ARCH", "DEPTH", "M"), default=None,
                        help="time one configuration of the depth grid, without the skip rule, "
                             "and report the peak resident memory")
    args = parser.parse_args(argv)
    if args.one:
        import resource

        torch.set_num_threads(1)
        row = time_depth(args.one[0], int(args.one[1]), int(args.one[2]))
        row["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(row)
        return row
    if args.exhaustive:
        torch.set_num_threads(1)
        models = None
        if args.models:
            import joblib

            models = [joblib.load(p)[0] for p in args.models]
        return exhaustive_check(n_pairs=4 if args.smoke else 16, models=models)
    if args.depth:
        out = args.out or RESULTS / ("bench_alignment_depth_smoke.csv" if args.smoke
                                     else "bench_alignment_depth.csv")
        out.parent.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(1)
        return run_depth(out, args.smoke, args.max_m, args.depth_archs)

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

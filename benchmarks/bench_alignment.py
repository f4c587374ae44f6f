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
``D = 2..10`` and non-oblivious trees at ``D = 2..12``, ``M`` in {64, 256}, ``F = 16``
(the issue's setting), each timed (wall and CPU), with its objective (the sum of the
matched similarities) and, for oblivious trees, that objective relative to the exact
optimum where it can be afforded (the exact table by branch and bound, then the
assignment) and the fraction of matched pairs whose op the branch and bound certified.
A configuration beyond reach records the error the library raises (with its estimate).

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
                 "fraction", "certified", "error")


def exact_oblivious_score(pa, pb, arch):
    """Exact WM objective of oblivious trees: exact table (branch and bound) + assignment."""
    from sktree_lmc._matching import _level_search, _tensors

    ta, la = _tensors(pa, arch, True, "cpu")
    tb, lb = _tensors(pb, arch, True, "cpu")
    M = len(ta)
    ia, ib = torch.arange(M).repeat_interleave(M), torch.arange(M).repeat(M)
    S = np.empty(M * M)
    for s in range(0, M * M, 256):
        sl = slice(s, s + 256)
        S[sl] = _level_search(ta[ia[sl]], la[ia[sl]], tb[ib[sl]], lb[ib[sl]], arch)[2].numpy()
    S = S.reshape(M, M)
    rows, cols = linear_sum_assignment(S, maximize=True)
    return float(S[rows, cols].sum())


def time_depth(arch_name, depth, M, *, F=16, C=2, seed=0, exact_budget=2 ** 27,
               max_dp_seconds=120.0):
    """One weight matching at depth; returns a dict of ``DEPTH_COLUMNS``.

    Non-oblivious configurations whose estimated time (:func:`sktree_lmc._matching.dp_cost`)
    exceeds ``max_dp_seconds`` are skipped with the estimate in ``error``, unless the
    library itself refuses them (then its error is recorded).
    """
    from sktree_lmc import weight_matching
    from sktree_lmc._matching import MAX_DP_SECONDS, _tensors, dp_cost
    from sktree_lmc._oblivious import oblivious_search

    arch = get_architecture(arch_name, depth)
    row = dict(arch=arch_name, depth=depth, M=M, F=F, wall_s="", cpu_s="", score="",
               exact_score="", fraction="", certified="", error="")
    if arch_name == "non_oblivious":
        est = dp_cost(arch, M * M)[0] + dp_cost(arch, M)[0]
        if max_dp_seconds < est <= MAX_DP_SECONDS:
            row["error"] = f"skipped here: estimated {est:.0f} s on one core"
            return row
    rng = np.random.RandomState(seed)
    pa, pb = random_params(arch, M, F, C, rng), random_params(arch, M, F, C, rng)
    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        al = weight_matching(pa, pb, arch)
    except ValueError as exc:
        row["error"] = str(exc)
        return row
    row.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - cpu0)
    moved = al.apply(pb)
    ta, la = _tensors(pa, arch, True, "cpu")
    tm, lm = _tensors(moved, arch, True, "cpu")
    row["score"] = float((ta * tm).sum() + (la * lm).sum())
    if arch_name == "oblivious":
        tb, lb = _tensors(pb.permute_trees(al.tree_perm), arch, True, "cpu")
        *_, cert = oblivious_search(torch.bmm(ta, tb.transpose(1, 2)), la, lb)
        row["certified"] = float(cert.double().mean())
        if M * M * 4 ** depth <= exact_budget:
            row["exact_score"] = exact_oblivious_score(pa, pb, arch)
            row["fraction"] = row["score"] / row["exact_score"]
    else:  # the dynamic program is exact
        row["exact_score"], row["fraction"] = row["score"], 1.0
    return row


def exhaustive_oblivious(theta_a, leaves_a, theta_b, leaves_b):
    """Max over all ``2**D * D!`` ops of every aligned pair, by brute force."""
    import itertools

    from sktree_lmc._oblivious import leaf_perm

    M, D, _ = theta_a.shape
    G = torch.bmm(theta_a, theta_b.transpose(1, 2))
    signs = 1.0 - 2.0 * ((torch.arange(1 << D)[:, None] >> torch.arange(D)) & 1).double()
    best = torch.full((M,), -np.inf, dtype=torch.float64)
    for order in itertools.permutations(range(D)):
        lp = leaf_perm(torch.tensor(order).repeat(len(signs), 1), signs, D)
        node = (G[:, torch.arange(D), torch.tensor(order)][:, None, :] * signs).sum(2)
        leaf = torch.einsum("mlc,mulc->mu", leaves_a, leaves_b[:, lp])
        best = torch.maximum(best, (node + leaf).max(dim=1).values)
    return best


def exhaustive_check(n_pairs=16, depth=7, seed=0, models=None):
    """Fractions of the brute-force maximum reached on sampled pairs at ``depth``.

    Pairs are (tree ``m`` of ``a``, tree ``m`` of ``b``) of random ensembles (at
    the scale of the default initialization, and all-``N(0, 1)`` ones whose leaf
    term weighs more) and, when ``models`` (two fitted estimators of that depth)
    are given, the pairs that weight matching forms between fitted ones. Returns rows with the
    fraction of the seed (the value a large weight-matching table holds) and of
    the full search (the op chosen for matched pairs), min and mean.
    """
    from sktree_lmc._matching import _tensors
    from sktree_lmc._oblivious import oblivious_search

    arch = get_architecture("oblivious", depth)
    rng = np.random.RandomState(seed)
    def gaussian():  # every parameter N(0, 1), F=4: the leaf term weighs much more
        return TreeParams(rng.standard_normal((n_pairs, depth, 4)),
                          rng.standard_normal((n_pairs, depth)),
                          rng.standard_normal((n_pairs, 1 << depth, 2)))

    sets = [("random F=44", random_params(arch, n_pairs, 44, 2, rng),
             random_params(arch, n_pairs, 44, 2, rng)),
            ("random N(0,1) F=4", gaussian(), gaussian())]
    if models is not None:  # the pairs weight matching forms
        from sktree_lmc import weight_matching

        fa, fb = (m.tree_params_ for m in models)
        sets.append(("fitted", fa, fb.permute_trees(weight_matching(fa, fb, arch).tree_perm)))
    rows = []
    for name, pa, pb in sets:
        idx = np.arange(min(n_pairs, pa.n_trees))
        ta, la = _tensors(pa, arch, True, "cpu")
        tb, lb = _tensors(pb, arch, True, "cpu")
        ta, la, tb, lb = ta[idx], la[idx], tb[idx], lb[idx]
        ref = exhaustive_oblivious(ta, la, tb, lb)
        G = torch.bmm(ta, tb.transpose(1, 2))
        *_, seed_score, _ = oblivious_search(G, la, lb, exact=False, max_iter=0)
        *_, score, cert = oblivious_search(G, la, lb)
        for what, val in (("seed (table)", seed_score), ("search (matched ops)", score)):
            frac = (val / ref).numpy()
            rows.append(dict(pairs=name, depth=depth, n=len(idx), value=what,
                             min_fraction=float(frac.min()), mean_fraction=float(frac.mean()),
                             certified=float(cert.double().mean())))
            print(rows[-1], flush=True)
    return rows


def depth_grid(smoke=False):
    if smoke:
        return [("oblivious", 7, 8), ("non_oblivious", 7, 8)]
    return ([("oblivious", d, M) for M in (64, 256) for d in range(2, 11)]
            + [("non_oblivious", d, M) for M in (64, 256) for d in range(2, 13)])


def depth_markdown(rows):
    """Markdown table of the depth grid (one row per configuration)."""
    lines = ["| arch | D | M | wall (s) | CPU (s) | objective / exact | certified ops | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def num(key, fmt):
            return format(float(r[key]), fmt) if r[key] not in ("", None) else "-"

        lines.append(f"| {r['arch']} | {r['depth']} | {r['M']} | {num('wall_s', '.2f')} | "
                     f"{num('cpu_s', '.2f')} | {num('fraction', '.6f')} | "
                     f"{num('certified', '.3f')} | {r['error'][:90]} |")
    return "\n".join(lines)


def run_depth(out, smoke=False, max_m=None):
    rows = []
    for arch, depth, M in depth_grid(smoke):
        if max_m and M > max_m:
            continue
        rows.append(time_depth(arch, depth, M))
        r = rows[-1]
        print(f"  {arch} D={depth} M={M}: wall {r['wall_s'] or 0:.2f} s, cpu {r['cpu_s'] or 0:.2f}"
              f" s, fraction {r['fraction']}, certified {r['certified']} {r['error'][:80]}",
              flush=True)
        with open(out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=DEPTH_COLUMNS)
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
        row = time_depth(args.one[0], int(args.one[1]), int(args.one[2]),
                         max_dp_seconds=float("inf"))
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
        return run_depth(out, args.smoke, args.max_m)

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

"""Prototype for issue 18: the default soft trees plus a learned additive term on fine bins.

A screen, not a feature: it asks whether a generalized additive term (one learned value per
quantile bin of every numeric column, summed over the columns and added to the trees' logits)
closes part of the gap to HistGradientBoosting where the soft trees underfit (electricity,
eye_movements, california, bank-marketing: training accuracy close to test accuracy, far below
HGB's). HistGradientBoosting with ``max_depth=1`` (an additive model on 255 bins, no
interaction) is already above the default soft trees on electricity, eye_movements and
bank-marketing, which is what suggested it.

The model is written here with public building blocks only, in one training loop that follows
the estimator's default recipe:

* input: the estimator's own encoder (``SoftTreeEnsembleClassifier().encoder_``, the default
  quantile-normal encoding), fitted on the training rows;
* trees: ``SoftTreeEnsembleModule`` with the default architecture (256 oblivious trees of
  depth 4), half of the input columns per tree (the split weights of the others held at zero);
* training: Adam at 1e-2, minibatches of 512, cosine decay over at most 150 epochs, an
  exponential moving average of the weights (0.995, with the estimator's warm-up) as the model
  that is evaluated and kept, early stopping on the validation loss of 10 % of the training
  rows (patience 10, tol 1e-4), the best epoch restored;
* ``additive`` (``additive16``, ``additive255``): the same plus ``0.1 * sum_j A[j,
  bin_j(x)]`` in the logits, with 64 (16, 255) quantile bins per numeric column (edges from
  the training rows), ``A`` initialized at zero and trained with the trees. The factor 0.1
  makes the table's effective Adam step 1e-3: at the trees' 1e-2 it overfits (seed 0 and 1:
  MagicTelescope -2.7 and -3.4 points, default-of-credit-card-clients -1.8 and -1.6 against
  ``base``). ``additive_step3e-4`` and ``additive_step3e-3``: 64 bins, factors 0.03 and 0.3.
  ``additive_multi``: three tables summed, of 16, 64 and 256 bins per column (coarse bins
  for the smooth part, fine ones for sharp thresholds), factor 0.1 each;
  ``additive_multi_taper``: the same with factors 0.1, 0.05 and 0.025 (the step shrinks as
  ``1 / sqrt(bins)``: a bin of a finer table holds fewer rows, so its gradient is noisier);
  ``additive_pairs``: ``additive_multi_taper`` plus a table per pair of columns on their
  16-bin codes (16 x 16 cells, a GA2M-style interaction term), factor 0.025 (256 cells).

Models per (dataset, seed): ``hgb`` (``HistGradientBoostingClassifier(random_state=s)``),
``default`` (``SoftTreeEnsembleClassifier(random_state=s)``, the package), ``base`` (this
loop without the additive term: checks that the loop reproduces the package), ``additive``,
``additive16``. Protocol of ``bench_accuracy``: 10,000/10,000 stratified rows (halves when
smaller), seeds 0, 1, 2, raw features, one thread. One CSV row per (dataset, seed, model),
appended; a rerun resumes.

Run from the repository root::

    SKTREE_LMC_DATA=../shared/data/tabular_benchmark python -m benchmarks.bench_additive
    python -m benchmarks.bench_additive --report     # Markdown table of the CSV
    python -m benchmarks.bench_additive --smoke      # bundled data, tiny models, seconds
    python -m benchmarks.bench_additive --barriers --models base additive

``--barriers``: one pair of models per dataset (model seeds 1 and 2, the rows of split seed 0)
for ``base`` and ``additive``; test-accuracy barrier over lambda in {0.25, 0.5, 0.75} of naive
interpolation and after weight matching of the trees (all invariances, weighted); the additive
tables have no symmetry and are interpolated as they are. CSV ``additive_barriers.csv``.
"""

from __future__ import annotations

import argparse
import copy
import csv
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "additive"
MODELS = ("hgb", "default", "base", "additive", "additive16", "additive255", "additive_step3e-4",
          "additive_step3e-3", "additive_multi", "additive_multi_taper", "additive_pairs")
FIELDS = ["dataset", "seed", "model", "test", "train", "epochs", "fit_cpu_s", "commit"]
#: (bins per numeric column, scale of the additive term) per model of this loop.
ADDITIVE = {"base": None, "additive": (64, 0.1), "additive16": (16, 0.1),
            "additive255": (255, 0.1), "additive_step3e-4": (64, 0.03),
            "additive_step3e-3": (64, 0.3), "additive_multi": ((16, 64, 256), 0.1),
            "additive_multi_taper": ((16, 64, 256), (0.1, 0.05, 0.025)),
            "additive_pairs": ((16, 64, 256), (0.1, 0.05, 0.025), 16)}


def bin_codes(X_train, X, n_bins):
    """Global bin index of every cell (column ``j``'s bins after those of columns ``< j``)
    for quantile edges of ``X_train``, and the number of bins in all. A tuple ``n_bins``
    gives one table per resolution: the codes of each, side by side, with global indices."""
    if isinstance(n_bins, tuple):
        parts, total = [], 0
        for b in n_bins:
            codes, n = bin_codes(X_train, X, b)
            parts.append(codes + total)
            total += n
        return np.hstack(parts), total
    codes, offset = np.empty(X.shape, dtype=np.int64), 0
    for j in range(X.shape[1]):
        edges = _edges(X_train[:, j], n_bins)
        codes[:, j] = offset + np.searchsorted(edges, X[:, j], side="right")
        offset += len(edges) + 1
    return codes, offset


def _edges(x_train, n_bins):
    """Distinct inner ``n_bins``-quantile edges of a training column."""
    return np.unique(np.quantile(x_train, np.linspace(0.0, 1.0, n_bins + 1)[1:-1]))


def fit_loop(Z, codes, y, n_codes, n_outputs, seed, additive, *, n_trees=256, depth=4,
             max_epochs=150, batch_size=512, lr=1e-2, decay=0.995, patience=10, tol=1e-4,
             code_scale=None):
    """Train trees (+ the additive table when ``additive``) as described in the module
    docstring; returns ``(predict(Z, codes) -> logits, epochs run)``; ``predict.model`` is
    the trained module (``.trees``, ``.table``) and ``predict.scale`` the table's factor."""
    import torch
    import torch.nn as nn
    from torch.optim.swa_utils import AveragedModel

    from sktree_lmc import SoftTreeEnsembleModule, get_architecture

    gen = torch.Generator().manual_seed(seed)
    F = Z.shape[1]
    # the factor of every code column (a tuple: one per resolution, codes side by side)
    scales = additive[1] if additive else 0.0
    scales = scales if isinstance(scales, tuple) else (scales,)
    scale = (torch.tensor(scales, dtype=torch.float32).repeat_interleave(
        codes.shape[1] // len(scales))[:, None] if code_scale is None
        else torch.as_tensor(code_scale, dtype=torch.float32)[:, None])

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.trees = SoftTreeEnsembleModule(get_architecture("oblivious", depth), n_trees,
                                                F, n_outputs, generator=gen)
            self.table = nn.Parameter(torch.zeros(n_codes, n_outputs)) if additive else None

        def forward(self, z, c):
            out = self.trees(z)
            return out if self.table is None else out + (scale * self.table[c]).sum(1)

    model = Model()
    k = max(1, int(0.5 * F))
    mask = (torch.rand((n_trees, F), generator=gen).argsort(1) < k).float()[:, None, :]
    with torch.no_grad():
        model.trees.split_weight.mul_(mask)
    n = len(y)
    perm = torch.randperm(n, generator=gen)
    val, train = perm[: n // 10], perm[n // 10:]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    total = max_epochs * math.ceil(len(train) / batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))

    @torch.no_grad()
    def ema(averaged, current, num):
        d = min(decay, (1.0 + int(num)) / (10.0 + int(num)))  # the estimator's warm-up
        torch._foreach_lerp_(averaged, current, 1.0 - d)

    avg = AveragedModel(model, multi_avg_fn=ema, use_buffers=False)
    loss_fn = nn.CrossEntropyLoss()
    Zt, Ct, yt = (torch.as_tensor(Z, dtype=torch.float32), torch.as_tensor(codes),
                  torch.as_tensor(y))
    best, best_state, bad, epoch = math.inf, None, 0, 0
    for epoch in range(1, max_epochs + 1):
        order = train[torch.randperm(len(train), generator=gen)]
        for i in range(0, len(order), batch_size):
            idx = order[i: i + batch_size]
            loss = loss_fn(model(Zt[idx], Ct[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            model.trees.split_weight.grad.mul_(mask)
            opt.step()
            sched.step()
            avg.update_parameters(model)
        with torch.no_grad():
            v = loss_fn(avg.module(Zt[val], Ct[val]), yt[val]).item()
        if v < best - tol:
            best, best_state, bad = v, copy.deepcopy(avg.module.state_dict()), 0
        else:
            bad += 1
            if bad >= patience:
                break
    final = avg.module
    final.load_state_dict(best_state)

    @torch.no_grad()
    def predict(Z_new, codes_new):
        return final(torch.as_tensor(Z_new, dtype=torch.float32),
                     torch.as_tensor(codes_new)).numpy()

    predict.model, predict.scale = final, scale
    return predict, epoch


def encode(model, X_tr, X_te, y_tr, seed):
    """Classes, label indices, (features, bin codes) of the training and test rows, and the
    number of bins, for a model of this loop."""
    from sktree_lmc import SoftTreeEnsembleClassifier

    classes, y_idx = np.unique(y_tr, return_inverse=True)
    encoder = SoftTreeEnsembleClassifier(n_estimators=1, max_epochs=1, random_state=seed,
                                         device="cpu").fit(X_tr, y_tr).encoder_
    additive = ADDITIVE[model]
    n_bins = additive[0] if additive else 1
    n_codes = bin_codes(X_tr, X_tr, n_bins)[1]
    out = []
    for X in (X_tr, X_te):
        codes = bin_codes(X_tr, X, n_bins)[0]
        if additive and len(additive) == 3:  # pair tables on the coarse codes
            pairs, n_codes = pair_codes(X_tr, X, additive[2], n_codes)
            codes = np.hstack([codes, pairs])
        out.append((encoder.transform_columns([X[:, j] for j in range(X.shape[1])]), codes))
    return classes, y_idx, out[0], out[1], n_codes


def pair_codes(X_train, X, n_bins, offset):
    """Global codes of a table per pair of columns ``i < j``: cell ``(bin_i, bin_j)`` of the
    ``n_bins``-quantile codes, after the ``offset`` rows of the one-column tables; and the
    number of rows in all."""
    edges = [_edges(X_train[:, j], n_bins) for j in range(X.shape[1])]
    sizes = [len(e) + 1 for e in edges]
    # each column's bin, from 0
    local = np.stack([np.searchsorted(e, X[:, j], side="right") for j, e in enumerate(edges)],
                     axis=1)
    out = []
    for i in range(X.shape[1]):
        for j in range(i + 1, X.shape[1]):
            out.append(offset + local[:, i] * sizes[j] + local[:, j])
            offset += sizes[i] * sizes[j]
    return np.stack(out, axis=1), offset


def code_scales(model, n_columns, n_pair_columns):
    """The factor of every code column of ``additive_pairs``: the resolutions', then the
    pairs' (None for the other models: one factor per resolution, side by side)."""
    additive = ADDITIVE[model]
    if not additive or len(additive) != 3:
        return None
    singles = np.repeat(additive[1], n_columns)
    return np.r_[singles, np.full(n_pair_columns, additive[1][-1])]


def pair_barriers(model, X_tr, X_te, y_tr, y_te, seeds=(1, 2), lams=(0.25, 0.5, 0.75),
                  smoke=False):
    """Test-accuracy barriers between two models of this loop (model seeds ``seeds``, the
    same rows): naive interpolation and after weight matching of the trees (all
    invariances); the additive tables are interpolated as they are (they have no symmetry).
    The barrier is ``max over lam of (1 - lam) acc(0) + lam acc(1) - acc(lam)``."""
    import torch

    from sktree_lmc import SoftTreeEnsembleModule, get_architecture, weight_matching

    classes, y_idx, (Z_tr, C_tr), (Z_te, C_te), n_codes = encode(model, X_tr, X_te, y_tr,
                                                                 seeds[0])
    kw = {"n_trees": 8, "max_epochs": 2} if smoke else {}
    fits = [fit_loop(Z_tr, C_tr, y_idx, n_codes, len(classes), s, ADDITIVE[model], **kw)[0]
            for s in seeds]
    arch = get_architecture("oblivious", 4)
    pa, pb = (f.model.trees.to_params() for f in fits)
    tables = [None if f.model.table is None else f.model.table.detach() for f in fits]
    Z, C = torch.as_tensor(Z_te, dtype=torch.float32), torch.as_tensor(C_te)

    @torch.no_grad()
    def accuracy(params, lam):
        out = SoftTreeEnsembleModule.from_params(arch, params)(Z)
        if tables[0] is not None:
            out = out + (fits[0].scale * ((1 - lam) * tables[0] + lam * tables[1])[C]).sum(1)
        return 100 * np.mean(classes[out.argmax(1).numpy()] == y_te)

    end = (accuracy(pa, 0.0), accuracy(pb, 1.0))
    result = {"acc_a": end[0], "acc_b": end[1]}
    for name, inv in (("naive", "none"), ("wm", "all")):
        aligned = weight_matching(pa, pb, arch, invariances=inv).apply(pb)
        result[name] = max((1 - lam) * end[0] + lam * end[1]
                           - accuracy(pa.interpolate(aligned, lam), lam) for lam in lams)
    return result


def measure(model, X_tr, X_te, y_tr, y_te, seed, smoke):
    """(test %, train %, epochs, fit CPU s) of ``model`` on one split."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from sktree_lmc import SoftTreeEnsembleClassifier

    small = {"n_estimators": 8, "max_epochs": 2} if smoke else {}
    t0 = time.process_time()
    if model in ("hgb", "default"):
        est = (HistGradientBoostingClassifier(random_state=seed, max_iter=10 if smoke else 100)
               if model == "hgb" else
               SoftTreeEnsembleClassifier(random_state=seed, device="cpu", **small))
        est.fit(X_tr, y_tr)
        cpu = time.process_time() - t0
        return (100 * est.score(X_te, y_te), 100 * est.score(X_tr, y_tr),
                getattr(est, "n_epochs_", ""), cpu)
    classes, y_idx, (Z_tr, C_tr), (Z_te, C_te), n_codes = encode(model, X_tr, X_te, y_tr, seed)
    kw = {"n_trees": 8, "max_epochs": 2} if smoke else {}
    n_pairs = C_tr.shape[1] - len(np.atleast_1d(ADDITIVE[model][0])) * X_tr.shape[1] if (
        ADDITIVE[model]) else 0
    kw["code_scale"] = code_scales(model, X_tr.shape[1], n_pairs)
    predict, epochs = fit_loop(Z_tr, C_tr, y_idx, n_codes, len(classes), seed, ADDITIVE[model],
                               **kw)
    cpu = time.process_time() - t0
    acc = [100 * np.mean(classes[predict(Z, C).argmax(1)] == y)
           for Z, C, y in ((Z_te, C_te, y_te), (Z_tr, C_tr, y_tr))]
    return acc[0], acc[1], epochs, cpu


def _rows(name, smoke):
    """Features and labels of dataset ``name`` (the bundled sample in ``smoke``) and the
    training and test rows to split (``None``: the protocol's)."""
    if smoke:
        from sktree_lmc.datasets import load_magic_small

        X, y = load_magic_small(return_X_y=True)
        return np.asarray(X, dtype=np.float64), y, 300
    from .bench_accuracy import load

    return (*load("raw", name), None)


def _done(out_csv, keys):
    """The ``keys`` tuples of the rows already in ``out_csv`` (for resuming)."""
    from .bench_accuracy import read_rows

    return {tuple(r[k] for k in keys) for r in read_rows(out_csv)}


def _append(out_csv, fields, row):
    new = not out_csv.exists()
    with open(out_csv, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fields)
        if new:
            writer.writeheader()
        writer.writerow(row)
    print(row, flush=True)


def run(out_csv, datasets, models, seeds, smoke=False, n_train=10_000):
    import torch
    from threadpoolctl import threadpool_limits

    from .bench_accuracy import git_commit, split

    torch.set_num_threads(1)
    done = _done(out_csv, ("dataset", "seed", "model"))
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    for name in datasets:
        X, y, n_smoke = _rows(name, smoke)
        n_tr, n_te = (n_smoke, n_smoke) if n_smoke else (n_train, 10_000)
        for seed in seeds:
            X_tr, X_te, y_tr, y_te = split(X, y, n_tr, n_te, seed, True)
            for model in models:
                if (name, str(seed), model) in done:
                    continue
                with threadpool_limits(1):
                    test, train, epochs, cpu = measure(model, X_tr, X_te, y_tr, y_te, seed,
                                                       smoke)
                _append(out_csv, FIELDS, {
                    "dataset": name, "seed": seed, "model": model, "test": f"{test:.2f}",
                    "train": f"{train:.2f}", "epochs": epochs, "fit_cpu_s": f"{cpu:.1f}",
                    "commit": commit})


BARRIER_FIELDS = ["dataset", "model", "acc_a", "acc_b", "naive", "wm", "commit"]


def run_barriers(out_csv, datasets, models, smoke=False):
    """One pair (model seeds 1 and 2) per dataset and model on the rows of split seed 0."""
    import torch
    from threadpoolctl import threadpool_limits

    from .bench_accuracy import git_commit, split

    torch.set_num_threads(1)
    done = _done(out_csv, ("dataset", "model"))
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    for name in datasets:
        X, y, n_smoke = _rows(name, smoke)
        n = n_smoke or 10_000
        X_tr, X_te, y_tr, y_te = split(X, y, n, n, 0, True)
        for model in models:
            if model not in ADDITIVE or (name, model) in done:
                continue
            with threadpool_limits(1):
                res = pair_barriers(model, X_tr, X_te, y_tr, y_te, smoke=smoke)
            _append(out_csv, BARRIER_FIELDS, {"dataset": name, "model": model,
                                              "commit": git_commit(),
                                              **{k: f"{v:.2f}" for k, v in res.items()}})


def report(out_csv):
    """Markdown table: mean test accuracy per dataset and model, and the gaps."""
    with open(out_csv) as fh:
        rows = list(csv.DictReader(fh))
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]

    def mean(d, m, col="test"):
        v = [float(r[col]) for r in rows if r["dataset"] == d and r["model"] == m]
        return (float(np.mean(v)), len(v)) if v else (math.nan, 0)

    head = models + [f"{m} - base" for m in models if m.startswith("additive")]
    lines = ["| dataset | seeds | " + " | ".join(head) + " |", "|---" * (len(head) + 2) + "|"]
    cols = {m: [] for m in head}
    for d in datasets:
        vals = {m: mean(d, m)[0] for m in models}
        for m in head:
            if m.endswith(" - base"):
                vals[m] = vals[m.split(" ")[0]] - vals.get("base", math.nan)
            cols[m].append(vals[m])
        lines.append(f"| {d} | {mean(d, models[0])[1]} | "
                     + " | ".join(f"{vals[m]:+.2f}" if m.endswith(" - base") else f"{vals[m]:.2f}"
                                  for m in head) + " |")
    lines.append("| mean | | " + " | ".join(f"{np.mean(cols[m]):.2f}" for m in head) + " |")
    text = "\n".join(lines)
    print(text)
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--n-train", type=int, default=10_000,
                        help="training rows (test rows stay 10,000; the CSV name carries it "
                             "when it is not 10,000)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--barriers", action="store_true",
                        help="barriers of one pair per dataset (naive and weight matching) "
                             "instead of the accuracy table")
    args = parser.parse_args(argv)
    stem = "additive_barriers" if args.barriers else "additive"
    if args.n_train != 10_000:
        stem += f"_n{args.n_train}"
    out_csv = args.out / (stem + ("_smoke.csv" if args.smoke else ".csv"))
    if args.barriers:
        from sktree_lmc.datasets import TABULAR_BENCHMARK

        datasets = ["MagicTelescope"] if args.smoke else args.datasets or list(TABULAR_BENCHMARK)
        run_barriers(out_csv, datasets, args.models, smoke=args.smoke)
        return 0
    if args.report:
        report(out_csv)
        return 0
    if args.smoke:
        run(out_csv, ["MagicTelescope"], args.models, [0], smoke=True)
        return 0
    from sktree_lmc.datasets import TABULAR_BENCHMARK

    run(out_csv, args.datasets or list(TABULAR_BENCHMARK), args.models, args.seeds,
        n_train=args.n_train)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

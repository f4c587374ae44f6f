"""Tables (Markdown) and figures (PNG) from the raw CSV files of a benchmark run.

``write_report(out)`` reads ``<out>/raw/*/{barriers,models,hgb}.csv`` and writes
``<out>/report/report.md`` with tables in the layout of the paper's Tables 2-4
and 6-12, each next to the paper's numbers (``benchmarks/paper_numbers.csv``),
the split-data table, timings, the merged CSVs and the figures.

Means and standard deviations: for a per-dataset cell, mean and (population)
standard deviation over seed pairs; for an average over datasets (Tables 2-4),
the barrier is first averaged over the datasets for each seed pair, then mean
and standard deviation are taken over the pairs, as the paper does ("standard
deviations of 5 executions").
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

PAPER_CSV = Path(__file__).resolve().parents[1] / "paper_numbers.csv"
ARCH_NAMES = {
    "non_oblivious": "Non-Oblivious Tree",
    "oblivious": "Oblivious Tree",
    "decision_list": "Decision List",
    "decision_list_modified": "Decision List (Modified)",
    "mlp": "MLP",
}
#: Paper table of per-dataset barriers for (arch, method).
PER_DATASET_TABLE = {
    ("non_oblivious", "wm"): 6, ("non_oblivious", "am"): 7,
    ("oblivious", "wm"): 8, ("oblivious", "am"): 9,
    ("decision_list", "wm"): 10, ("decision_list", "am"): 11,
    ("decision_list_modified", "wm"): 10, ("decision_list_modified", "am"): 11,
}
INV_NAMES = {"none": "Naive", "perm": "Perm", "all": "Ours (all)"}


def _read_all(out, name):
    frames = [pd.read_csv(p) for p in sorted(Path(out).glob(f"raw/*/{name}"))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _lr_str(x):
    return f"{float(x):.0e}"


def load_results(out):
    """``(barriers, models, hgb)`` data frames of a run folder (learning rates as "1e-02")."""
    bar, models = _read_all(out, "barriers.csv"), _read_all(out, "models.csv")
    for df in (bar, models):
        if not df.empty:
            df["lr"] = df["lr"].map(_lr_str)
    if not bar.empty:  # two processes on one dataset could append a configuration twice
        bar = bar.drop_duplicates(["experiment", "dataset", "arch", "depth", "n_estimators",
                                   "epochs", "pair", "method", "invariances", "split"])
    if not models.empty:
        models = models.drop_duplicates(["experiment", "dataset", "arch", "depth",
                                         "n_estimators", "lr", "epochs", "seed"])
    return bar, models, _read_all(out, "hgb.csv")


def load_paper():
    return pd.read_csv(PAPER_CSV, keep_default_na=False)


def _ms(values, digits=2):
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return "–"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def _pms(mean, std, digits=2):
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "—"
    if std in ("", None) or (isinstance(std, float) and np.isnan(std)):
        return f"{float(mean):.{digits}f}"
    return f"{float(mean):.{digits}f} ± {float(std):.{digits}f}"


def _paper_value(paper, **where):
    sel = paper
    for k, v in where.items():
        sel = sel[sel[k].astype(str) == str(v)]
    if len(sel) == 0:
        return None, None
    r = sel.iloc[0]
    return float(r["mean"]), (float(r["std"]) if r["std"] != "" else None)


def _md(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- tables --------------------------------------------------------------------------------
def accuracy_table(bar, models, hgb, paper, depth=2, M=256):
    """Issue 2 / Table 12: training accuracy per dataset and architecture, with test accuracy."""
    lmc = bar[(bar.experiment == "lmc") & (bar.depth == depth) & (bar.n_estimators == M)]
    if lmc.empty:
        return "(no results yet)"
    rows = []
    for (ds, arch, depth, M), g in lmc.groupby(["dataset", "arch", "depth", "n_estimators"]):
        lr = g.lr.iloc[0]
        seeds = set(g.seed_a) | set(g.seed_b)
        m = models[(models.experiment == "lmc") & (models.dataset == ds) & (models.arch == arch)
                   & (models.depth == depth) & (models.n_estimators == M)]
        pm = m[(m.lr.astype(str) == str(lr)) & m.seed.isin(seeds)]
        sel = m[m.seed == 1].set_index(m[m.seed == 1].lr.astype(str))
        grid = " / ".join(f"{sel.loc[k, 'train_acc']:.2f}" if k in sel.index else "–"
                          for k in ["1e-02", "1e-03", "1e-04"])
        p_train, _ = _paper_value(paper, table=12, dataset=ds, arch=arch, metric="accuracy")
        tr = pm.train_acc.astype(float)
        h = hgb[hgb.dataset == ds] if not hgb.empty else hgb
        rows.append([
            ds, ARCH_NAMES[arch], lr, grid, _ms(tr), _pms(p_train, None, 3),
            f"{tr.mean() - p_train:+.2f}" if p_train is not None else "–",
            _ms(pm.test_acc.astype(float)), len(pm),
            f"{h.train_acc.iloc[0]:.2f}" if len(h) else "–",
            f"{h.test_acc.iloc[0]:.2f}" if len(h) else "–",
        ])
    header = ["Dataset", "Architecture", "lr", "train acc (seed 1) at 1e-2 / 1e-3 / 1e-4",
              "train acc", "paper (Table 12)", "diff", "test acc", "models", "HGB train",
              "HGB test"]
    return _md(header, rows)


def _per_pair_dataset_mean(df, value):
    """Average ``value`` over datasets for each pair; returns the per-pair means."""
    return df.groupby("pair")[value].apply(lambda s: s.astype(float).mean()).values


def averaged_table(bar, paper, method, depth=2, M=256):
    """Tables 3 (WM) / 4 (AM): barriers and accuracies averaged over datasets."""
    tno = 3 if method == "wm" else 4
    lmc = bar[(bar.experiment == "lmc") & (bar.depth == depth) & (bar.n_estimators == M)]
    if lmc.empty:
        return "(no results yet)"
    datasets = sorted(lmc.dataset.unique())
    header = ["Architecture", "source"] + [f"{s} {INV_NAMES[i]}" for s in ("Train", "Test")
                                           for i in ("none", "perm", "all")]
    header.insert(5, "Train acc")
    header.append("Test acc")
    rows = []
    for arch in ARCH_NAMES:
        g = lmc[(lmc.arch == arch) & (lmc.method == method)]
        if g.empty:
            continue
        complete = g.groupby("pair").dataset.nunique()
        full_pairs = complete[complete == len(datasets)].index
        g = g[g.pair.isin(full_pairs)]
        ours, paper16, paper7, check = [], [], [], []
        for split in ("train", "test"):
            for inv in ("none", "perm", "all"):
                s = g[(g.split == split) & (g.invariances == inv)]
                v = _per_pair_dataset_mean(s, "barrier")
                ours.append(_ms(v) if len(v) else "–")
                pm, ps = _paper_value(paper, table=tno, arch=arch, method=method,
                                      invariances=inv, split=split, metric="barrier")
                paper16.append(_pms(pm, ps))
                p7 = paper[(paper.table.astype(str) == str(PER_DATASET_TABLE[(arch, method)]))
                           & (paper.arch == arch) & (paper.invariances == inv)
                           & (paper.split == split) & paper.dataset.isin(datasets)]
                paper7.append(f"{p7['mean'].astype(float).mean():.2f}" if len(p7) else "—")
                if split == "test" and pm is not None and len(v):
                    check.append(abs(v.mean() - pm) <= 2 * ps)
            s = g[(g.split == split) & (g.invariances == "none")]
            acc = s.groupby("pair").apply(
                lambda t: np.mean(np.r_[t.acc_a.astype(float), t.acc_b.astype(float)]),
                include_groups=False).values
            ours.append(_ms(acc))
            am, asd = _paper_value(paper, table=tno, arch=arch, split=split, metric="accuracy")
            paper16.append(_pms(am, asd))
            paper7.append("—")
        name = ARCH_NAMES[arch]
        rows.append([name, f"ours ({len(datasets)} datasets, {len(full_pairs)} pairs)"] + ours)
        rows.append(["", f"paper Table {tno} (16 datasets, 5 pairs)"] + paper16)
        rows.append(["", f"paper Tables 6-11, same {len(datasets)} datasets (mean)"] + paper7)
        if check:
            rows.append(["", "test barriers within paper mean ± 2 std"]
                        + [""] * 4 + ["yes" if c else "**no**" for c in check]
                        + [""] * (3 - len(check)) + [""])
    return _md(header, rows)


def per_dataset_table(bar, paper, arch, method, depth=2, M=256):
    """Tables 6-11: barriers per dataset, ours (paper) with mean ± std over pairs."""
    tno = PER_DATASET_TABLE[(arch, method)]
    g = bar[(bar.experiment == "lmc") & (bar.arch == arch) & (bar.method == method)
            & (bar.depth == depth) & (bar.n_estimators == M)]
    if g.empty:
        return "(no results yet)"
    header = ["Dataset", "pairs"] + [f"{s} {INV_NAMES[i]}" for s in ("Train", "Test")
                                     for i in ("none", "perm", "all")]
    rows = []
    for ds, d in g.groupby("dataset"):
        row = [ds, d.pair.nunique()]
        for split in ("train", "test"):
            for inv in ("none", "perm", "all"):
                v = d[(d.split == split) & (d.invariances == inv)].barrier.astype(float)
                pm, ps = _paper_value(paper, table=tno, dataset=ds, arch=arch, method=method,
                                      invariances=inv, split=split, metric="barrier")
                row.append(f"{_ms(v)} ({_pms(pm, ps)})")
        rows.append(row)
    return _md(header, rows)


def split_table(bar):
    """Figure 8 in numbers: does the merged split-data model beat both single models on test?"""
    s = bar[(bar.experiment == "split") & (bar.split == "test")]
    if s.empty:
        return "(not run)"
    rows = []
    for (ds, arch, method), d in s.groupby(["dataset", "arch", "method"]):
        a = d[d.invariances == "none"].acc_a.astype(float)
        b = d[d.invariances == "none"].acc_b.astype(float)
        ref = d.acc_ref.astype(float)
        cells = [ds, ARCH_NAMES[arch], method.upper(), d.pair.nunique(), _ms(a), _ms(b)]
        for inv in ("none", "perm", "all"):
            cells.append(_ms(d[d.invariances == inv].acc_mid.astype(float)))
        best_single = np.maximum(a.values, b.values)
        merged = d[d.invariances == "all"].acc_mid.astype(float).values
        wins = int(np.sum(merged > best_single))
        cells += [_ms(d[d.invariances == "all"].acc_best.astype(float)), _ms(ref),
                  f"{'yes' if merged.mean() > best_single.mean() else 'no'} ({wins}/{len(merged)})"]
        rows.append(cells)
    header = ["Dataset", "Architecture", "method", "pairs", "model A (80/20)", "model B (20/80)",
              "merged λ=.5 naive", "merged λ=.5 perm", "merged λ=.5 all", "best λ (all)",
              "full-data model", "merged (all, λ=.5) beats both? (pairs)"]
    return _md(header, rows)


def mlp_table(bar, paper):
    """Table 2: MLP (naive / perm WM) next to the trees (WM) on the datasets the MLP ran on."""
    m = bar[(bar.experiment == "mlp") & (bar.split == "test")]
    if m.empty:
        return "(not run)"
    datasets = sorted(m.dataset.unique())
    rows = []
    for depth, d in m.groupby("depth"):
        v = {inv: _per_pair_dataset_mean(d[d.invariances == inv], "barrier")
             for inv in ("none", "perm")}
        acc = d[d.invariances == "none"].groupby("pair").apply(
            lambda t: np.mean(np.r_[t.acc_a.astype(float), t.acc_b.astype(float)]),
            include_groups=False).values
        pn = _paper_value(paper, table=2, arch="mlp", depth=depth, invariances="none")
        pp = _paper_value(paper, table=2, arch="mlp", depth=depth, invariances="perm")
        pa = _paper_value(paper, table=2, arch="mlp", depth=depth, metric="accuracy")
        rows.append([f"MLP (lr {', '.join(sorted(d.lr.unique()))})", depth,
                     f"{_ms(v['none'])} ({_pms(*pn)})",
                     f"{_ms(v['perm'])} ({_pms(*pp)})", "—", f"{_ms(acc)} ({_pms(*pa)})"])
    t = bar[(bar.experiment == "lmc") & (bar.split == "test") & (bar.method == "wm")
            & bar.dataset.isin(datasets) & bar.arch.isin(["non_oblivious", "oblivious"])
            & (bar.n_estimators == m.n_estimators.iloc[0])]
    for (arch, depth), d in t.groupby(["arch", "depth"]):
        if d.dataset.nunique() < len(datasets):
            continue  # only depths that ran on every dataset of the MLP
        pairs = sorted(set.intersection(*[set(g.pair) for _, g in d.groupby("dataset")]))
        d = d[d.pair.isin(pairs[:m.pair.nunique()])]
        cells = [f"{ARCH_NAMES[arch]} (lr {', '.join(sorted(d.lr.unique()))})", depth]
        for inv in ("none", "perm", "all"):
            p = _paper_value(paper, table=2, arch=arch, depth=depth, invariances=inv)
            cells.append(f"{_ms(_per_pair_dataset_mean(d[d.invariances == inv], 'barrier'))} "
                         f"({_pms(*p)})")
        acc = d[d.invariances == "none"].groupby("pair").apply(
            lambda t: np.mean(np.r_[t.acc_a.astype(float), t.acc_b.astype(float)]),
            include_groups=False).values
        pa = _paper_value(paper, table=2, arch=arch, depth=depth, metric="accuracy")
        cells.append(f"{_ms(acc)} ({_pms(*pa)})")
        rows.append(cells)
    header = ["Model", "D", "test barrier Naive", "test barrier Perm (WM)", "test barrier Ours",
              "test acc"]
    return (f"Datasets: {', '.join(datasets)}; {m.pair.nunique()} seed pairs for every row; "
            "paper (16 datasets, 5 pairs) in parentheses.\n\n"
            + _md(header, rows))


def timing_table(bar, models):
    rows = []
    for (exp, arch, depth, M), m in models.groupby(["experiment", "arch", "depth",
                                                    "n_estimators"]):
        ft = m.fit_time_s.astype(float)
        rows.append([exp, ARCH_NAMES.get(arch, arch), depth, M, len(m), f"{ft.mean():.1f}",
                     f"{ft.sum() / 60:.1f}"])
    out = _md(["experiment", "model", "D", "M (width)", "models fitted",
               "fit time per model (s)", "total fit time (min)"], rows)
    rows = []
    b = bar.drop_duplicates(["experiment", "dataset", "arch", "depth", "n_estimators", "pair",
                             "method", "invariances", "split"])
    first = b[b.split == "train"]  # alignment time is recorded once per (config, split)
    main = first[(first.depth == 2) | (first.arch == "mlp")]
    main = main[(main.n_estimators == 256)]
    for (arch, method, inv), d in main.groupby(["arch", "method", "invariances"]):
        rows.append([ARCH_NAMES.get(arch, arch), method.upper(), inv, len(d),
                     f"{1000 * d.align_time_s.astype(float).mean():.1f}"])
    out += "\n\nAlignment time per model pair (trees: D=2, M=256; MLP: width 256):\n\n"
    out += _md(["model", "method", "invariances", "pairs", "align time (ms)"], rows)
    total_fit = models.fit_time_s.astype(float).sum()
    total_align = first.align_time_s.astype(float).sum()
    total_eval = b.eval_time_s.astype(float).sum()
    out += (f"\n\nTotals: {len(models)} models, fit {total_fit / 60:.1f} min; alignment "
            f"{total_align:.1f} s; curve evaluation ({len(b)} curves x 25 points) "
            f"{total_eval / 60:.1f} min; sum {(total_fit + total_align + total_eval) / 60:.1f} "
            "min of compute (two processes ran in parallel, so wall-clock time was shorter).")
    return out


def _sweep_data(bar, var, fixed, fval):
    """Test/train rows of a sweep over ``var``, restricted to the datasets and pairs that ran
    at every value (so that every point averages the same datasets and pairs)."""
    d = bar[(bar.experiment == "lmc") & (bar[fixed] == fval)]
    if d[var].nunique() < 2:
        return None
    values = sorted(d[var].unique())
    keep = None
    for v in values:
        k = set(map(tuple, d[d[var] == v][["dataset", "arch", "pair"]].values))
        keep = k if keep is None else keep & k
    idx = d[["dataset", "arch", "pair"]].apply(tuple, axis=1).isin(keep)
    return d[idx]


def sweep_table(bar, paper):
    """Barrier versus depth (M=256) and number of trees (D=2), when the run swept them."""
    parts = []
    for var, fixed, fval in (("depth", "n_estimators", 256), ("n_estimators", "depth", 2)):
        d = _sweep_data(bar, var, fixed, fval)
        if d is None or d.empty:
            continue
        d = d[d.split == "test"]
        values = sorted(d[var].unique())
        rows = []
        for (arch, method, inv), g in d.groupby(["arch", "method", "invariances"]):
            if method == "am" and inv == "none":
                continue
            label = "Naive" if inv == "none" else f"{method.upper()} {inv}"
            rows.append([ARCH_NAMES[arch], label, ", ".join(sorted(g.dataset.unique())),
                         g.pair.nunique()]
                        + [_ms(_per_pair_dataset_mean(g[g[var] == v], "barrier"))
                           for v in values])
        parts.append(f"Test barrier versus {var} ({fixed}={fval}; same datasets and pairs at "
                     "every value):\n\n"
                     + _md(["Architecture", "alignment", "datasets", "pairs"]
                           + [f"{var}={v}" for v in values], rows))
    return "\n\n".join(parts) if parts else "(not run)"


# -- figures -------------------------------------------------------------------------------
def _curves(d):
    c = np.array([[float(x) for x in s.split(";")] for s in d.curve])
    return c.mean(axis=0), c.std(axis=0)


def plot_curves(bar, fig_dir, experiment="lmc", split="test"):
    """Figure 7 (and 8 with ``experiment="split"``) style interpolation curves per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    e = bar[(bar.experiment == experiment) & (bar.split == split) & (bar.depth == 2)]
    styles = [("wm", "none", "Naive", "k", "-"), ("wm", "perm", "WM Perm", "tab:blue", "--"),
              ("wm", "all", "WM Ours", "tab:blue", "-"), ("am", "perm", "AM Perm", "tab:orange",
                                                          "--"),
              ("am", "all", "AM Ours", "tab:orange", "-")]
    for arch, a in e.groupby("arch"):
        datasets = sorted(a.dataset.unique())
        n = len(datasets)
        cols = min(4, n)
        rows = int(np.ceil(n / cols))
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
        for ax, ds in zip(axes.flat, datasets):
            d = a[a.dataset == ds]
            for method, inv, label, color, ls in styles:
                s = d[(d.method == method) & (d.invariances == inv)]
                if s.empty:
                    continue
                mean, std = _curves(s)
                lam = np.linspace(0, 1, len(mean))
                ax.plot(lam, mean, color=color, ls=ls, label=label, lw=1.2)
                ax.fill_between(lam, mean - std, mean + std, color=color, alpha=0.12)
            if experiment == "split" and d.acc_ref.notna().any():
                ax.axhline(d.acc_ref.astype(float).mean(), color="red", ls="--", lw=1,
                           label="full data")
            ax.set_title(ds, fontsize=9)
            ax.set_xlabel("λ", fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        axes[0, 0].set_ylabel(f"{split} accuracy (%)", fontsize=8)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
        title = "split data (80/20 vs 20/80)" if experiment == "split" else "same data"
        fig.suptitle(f"{ARCH_NAMES[arch]}, D=2, M={int(d.n_estimators.iloc[0])}: {split} "
                     f"accuracy along the interpolation\n({title}; mean ± std over pairs)",
                     fontsize=9)
        fig.tight_layout(rect=(0, 0.06, 1, 0.95))
        p = Path(fig_dir) / f"{experiment}_curves_{arch}_{split}.png"
        fig.savefig(p, dpi=72)
        plt.close(fig)
        paths.append(p)
    return paths


def plot_sweeps(bar, fig_dir):
    """Figures 6 and 9: barrier versus depth and versus number of trees."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    lmc = bar[bar.experiment == "lmc"]
    for var, fixed, fval in (("depth", "n_estimators", 256), ("n_estimators", "depth", 2)):
        d = _sweep_data(lmc, var, fixed, fval)
        if d is None or d.empty:
            continue
        archs = sorted(d.arch.unique())
        fig, axes = plt.subplots(1, len(archs), figsize=(3.5 * len(archs), 3), squeeze=False)
        for ax, arch in zip(axes[0], archs):
            for (method, inv), g in d[d.arch == arch].groupby(["method", "invariances"]):
                if method == "am" and inv == "none":
                    continue
                for split, ls in (("train", "-"), ("test", "--")):
                    s = g[g.split == split]
                    xs = sorted(s[var].unique())
                    m = [s[s[var] == x].groupby("pair").barrier.mean().mean() for x in xs]
                    sd = [s[s[var] == x].groupby("pair").barrier.mean().std(ddof=0) for x in xs]
                    ax.errorbar(xs, m, yerr=sd, ls=ls, marker="o", ms=3,
                                label=f"{'Naive' if inv == 'none' else method.upper() + ' ' + inv}"
                                      f" {split}")
            ax.set_title(ARCH_NAMES[arch], fontsize=9)
            ax.set_xlabel(var)
            if var == "n_estimators":
                ax.set_xscale("log", base=2)
        axes[0, 0].set_ylabel("barrier (accuracy points)")
        axes[0, -1].legend(fontsize=6)
        fig.tight_layout()
        p = Path(fig_dir) / f"sweep_{var}.png"
        fig.savefig(p, dpi=72)
        plt.close(fig)
        paths.append(p)
    return paths


def write_report(out, figures_dir=None, figures_link=None, max_pairs=None):
    """Write ``<out>/report/report.md`` (tables) and the figures; return the Markdown path.

    ``figures_link`` is the folder name used in the Markdown image links
    (default: the path of ``figures_dir`` relative to the report).
    """
    out = Path(out)
    rep = out / "report"
    rep.mkdir(parents=True, exist_ok=True)
    fig_dir = Path(figures_dir) if figures_dir else rep
    fig_dir.mkdir(parents=True, exist_ok=True)
    bar, models, hgb = load_results(out)
    if max_pairs is not None and not bar.empty:  # e.g. report 3 pairs while more are running
        bar = bar[bar.pair < max_pairs]
        seeds = {s for p in range(max_pairs) for s in (2 * p + 1, 2 * p + 2)}
        models = models[models.seed.isin(seeds)]
    paper = load_paper()
    if bar.empty:
        (rep / "report.md").write_text("No results yet.\n")
        return rep / "report.md"
    bar.drop(columns=["curve"]).to_csv(rep / "barriers.csv", index=False)
    bar.to_csv(rep / "barriers_with_curves.csv", index=False)
    models.to_csv(rep / "models.csv", index=False)
    if not hgb.empty:
        hgb.to_csv(rep / "hgb.csv", index=False)
    link = figures_link if figures_link is not None else os.path.relpath(fig_dir, rep)
    figs = (plot_curves(bar, fig_dir, "lmc", "test") + plot_curves(bar, fig_dir, "split", "test")
            + plot_sweeps(bar, fig_dir))
    parts = ["## Accuracy (Issue 2, paper Table 12)\n",
             "Training accuracy of the models at the chosen learning rate (mean ± std over the "
             "models of the seed pairs), the paper's value (Table 12, parentheses), test "
             "accuracy, and HistGradientBoostingClassifier (default parameters) on the same "
             "split. The learning rate is chosen by the training accuracy of the seed-1 model; "
             "the column 'train acc (seed 1)' lists it for each rate of the grid.\n",
             accuracy_table(bar, models, hgb, paper)]
    for method, tno in (("wm", 3), ("am", 4)):
        parts += [f"\n## Barriers averaged over datasets, {method.upper()} (paper Table {tno})\n",
                  averaged_table(bar, paper, method)]
    for arch in ARCH_NAMES:
        if arch == "mlp":
            continue
        for method in ("wm", "am"):
            tno = PER_DATASET_TABLE[(arch, method)]
            parts += [f"\n## {ARCH_NAMES[arch]}, {method.upper()}: barrier per dataset "
                      f"(paper Table {tno} in parentheses)\n",
                      per_dataset_table(bar, paper, arch, method)]
    parts += ["\n## Split-data experiment (paper Figure 8)\n", split_table(bar),
              "\n## MLP baseline (paper Table 2)\n", mlp_table(bar, paper),
              "\n## Depth and number-of-trees sweeps (paper Figures 6 and 9)\n",
              sweep_table(bar, paper),
              "\n## Timings\n", timing_table(bar, models),
              "\n## Figures\n"]
    parts += [f"![{p.stem}]({link}/{p.name})" for p in figs]
    md = rep / "report.md"
    md.write_text("\n".join(parts) + "\n")
    return md


BEGIN_MARK = "<!-- BEGIN GENERATED by `python -m benchmarks.lmc --report-only --docs ...` -->"
END_MARK = "<!-- END GENERATED -->"


def environment():
    """Machine and versions, as Markdown bullet points."""
    import platform
    import subprocess

    import sklearn
    import torch

    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent).stdout.strip()
    except OSError:  # pragma: no cover
        commit = ""
    return "\n".join([
        f"- CPU: {model or platform.processor()} ({os.cpu_count()} cores visible), "
        f"device {'cuda' if torch.cuda.is_available() else 'cpu'}",
        f"- Python {platform.python_version()}, torch {torch.__version__}, scikit-learn "
        f"{sklearn.__version__}, numpy {np.__version__}, pandas {pd.__version__}",
        f"- report generated at commit {commit}",
    ])


def write_docs(out, docs_path, figures_dir, max_pairs=None):
    """Regenerate the generated block of ``docs_path`` from the run in ``out``.

    Text outside the markers is kept; figures go to ``figures_dir`` and the
    merged CSV files (without the curves) beside them.
    """
    docs_path = Path(docs_path)
    figures_dir = Path(figures_dir)
    md = write_report(out, figures_dir=figures_dir,
                      figures_link=os.path.relpath(figures_dir, docs_path.parent),
                      max_pairs=max_pairs)
    rep = Path(out) / "report"
    for name in ("barriers.csv", "models.csv", "hgb.csv"):
        if (rep / name).exists():
            (figures_dir / f"lmc_{name}").write_text((rep / name).read_text())
    block = (f"{BEGIN_MARK}\n\n### Environment of the report\n\n{environment()}\n\n"
             + md.read_text() + f"\n{END_MARK}")
    text = docs_path.read_text() if docs_path.exists() else "# Benchmarks\n\n"
    if BEGIN_MARK in text and END_MARK in text:
        head, rest = text.split(BEGIN_MARK, 1)
        tail = rest.split(END_MARK, 1)[1]
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    docs_path.write_text(text)
    return docs_path

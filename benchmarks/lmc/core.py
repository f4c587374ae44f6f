"""Data, model cache, interpolation and the experiments of the LMC benchmark.

Everything here follows Section 4.1 of the paper (see ``docs/benchmarks.md``):
``paper_split`` (10,000/10,000 rows, halves below 20,000), the normal quantile
preprocessor fitted on the training rows, Adam, batch 512, 50 epochs, learning
rate chosen from a grid by the training accuracy of the seed-1 model, seed pairs
(1, 2), (3, 4), ..., and 25 interpolation points.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

import joblib
import numpy as np

from sktree_lmc import (
    ModelAligner,
    SoftTreeEnsembleClassifier,
    interpolation_curve,
    make_shards,
)
from sktree_lmc.datasets import (
    PAPER_TRAINING,
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

#: The seed pairs of the paper, in order.
SEED_PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
#: Learning-rate grid of the paper.
LR_GRID = (1e-2, 1e-3, 1e-4)
#: Alignment configurations: naive interpolation (the same for WM and AM), then the rest.
INVARIANCES = ("none", "perm", "all")
#: Name of the bundled small dataset usable without SKTREE_LMC_DATA (smoke mode).
SMALL = "magic_small"

BARRIER_FIELDS = [
    "experiment", "dataset", "arch", "depth", "n_estimators", "lr", "epochs", "pair",
    "seed_a", "seed_b", "method", "invariances", "split", "n_rows", "barrier",
    "barrier_log_loss", "acc_a", "acc_b", "acc_mid", "acc_best", "lam_best", "acc_ref",
    "align_time_s", "eval_time_s", "curve",
]
MODEL_FIELDS = [
    "experiment", "dataset", "arch", "depth", "n_estimators", "lr", "epochs", "seed",
    "role", "n_train", "train_acc", "test_acc", "fit_time_s", "cached",
]


def default_data_home():
    """``$SKTREE_LMC_DATA``, else ``<repo>/../shared/data/tabular_benchmark``."""
    env = os.environ.get("SKTREE_LMC_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tabular_benchmark"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- data -------------------------------------------------------------------------------------
_DATA_CACHE = {}


def load_split(name, *, n_train=10_000, n_test=10_000, split_seed=0, data_home=None):
    """The paper's split of dataset ``name``, preprocessed (float32).

    Returns ``X_train, X_test, y_train, y_test``; the preprocessor is fitted
    on the training rows only.
    """
    key = (name, n_train, n_test, split_seed, str(data_home))
    if key not in _DATA_CACHE:
        if name == SMALL:
            X, y = load_magic_small(return_X_y=True)
        else:
            X, y = load_tabular_benchmark(name, data_home=data_home or default_data_home(),
                                          return_X_y=True)
        X_tr, X_te, y_tr, y_te = paper_split(X, y, n_train=n_train, n_test=n_test,
                                             random_state=split_seed)
        pre = make_paper_preprocessor(n_quantiles=min(1000, len(X_tr))).fit(X_tr)
        _DATA_CACHE[key] = (
            pre.transform(X_tr).astype(np.float32),
            pre.transform(X_te).astype(np.float32),
            np.asarray(y_tr),
            np.asarray(y_te),
        )
    return _DATA_CACHE[key]


# -- CSV helpers -------------------------------------------------------------------------------
def read_csv(path):
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def append_rows(path, rows, fields):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerows(rows)
        f.flush()


def fmt_lr(lr):
    return f"{lr:.0e}"


# -- models ------------------------------------------------------------------------------------
class ModelStore:
    """Fits soft tree ensembles once and caches them with joblib.

    Models live in ``<out>/models/<dataset>/<tag>_<arch>_D<depth>_M<M>_lr<lr>_s<seed>_e<epochs>
    .joblib`` with their fit time (the tag carries ``leaf_init`` unless it is ``"tree"``, the
    setting of the first runs, and ``split_init`` unless it is ``"fan_in"``); every model used
    is logged once to
    ``<out>/raw/<dataset>/models.csv``.
    """

    def __init__(self, out, *, device="cpu", batch_size=512, verbose=0, leaf_init="tree",
                 split_init="fan_in"):
        self.out = Path(out)
        self.leaf_init = leaf_init
        self.split_init = split_init
        self.device = device
        self.batch_size = batch_size
        self.verbose = verbose
        self._logged = {}

    def _logged_keys(self, dataset):
        if dataset not in self._logged:
            rows = read_csv(self.out / "raw" / dataset / "models.csv")
            self._logged[dataset] = {
                (r["experiment"], r["arch"], r["depth"], r["n_estimators"], r["lr"], r["epochs"],
                 r["seed"]) for r in rows
            }
        return self._logged[dataset]

    def get(self, dataset, arch, depth, M, lr, seed, epochs, X, y, X_test, y_test, *,
            experiment="lmc", role=""):
        """Return ``(model, fit_time_s)``, fitting and caching on a miss."""
        tag = experiment if self.leaf_init == "tree" else f"{experiment}-{self.leaf_init}"
        if self.split_init != "fan_in":
            tag += f"-split{self.split_init:g}"
        path = (self.out / "models" / dataset
                / f"{tag}_{arch}_D{depth}_M{M}_lr{fmt_lr(lr)}_s{seed}_e{epochs}.joblib")
        cached = path.exists()
        if cached:
            blob = joblib.load(path)
            model, fit_time = blob["model"], blob["fit_time_s"]
        else:
            model = SoftTreeEnsembleClassifier(
                arch=arch, n_estimators=M, depth=depth, learning_rate=lr,
                batch_size=self.batch_size, max_epochs=epochs, device=self.device,
                random_state=seed, verbose=self.verbose, leaf_init=self.leaf_init,
                **{**PAPER_TRAINING, "split_init": self.split_init},
            )
            t0 = time.perf_counter()
            model.fit(X, y)
            fit_time = time.perf_counter() - t0
            path.parent.mkdir(parents=True, exist_ok=True)
            joblib.dump({"model": model, "fit_time_s": fit_time}, path)
            log(f"fit {dataset} {experiment} {arch} D={depth} M={M} lr={fmt_lr(lr)} "
                f"seed={seed}: {fit_time:.1f}s")
        key = (experiment, arch, str(depth), str(M), fmt_lr(lr), str(epochs), str(seed))
        logged = self._logged_keys(dataset)
        if key not in logged:
            append_rows(self.out / "raw" / dataset / "models.csv", [{
                "experiment": experiment, "dataset": dataset, "arch": arch, "depth": depth,
                "n_estimators": M, "lr": fmt_lr(lr), "epochs": epochs, "seed": seed,
                "role": role, "n_train": len(y),
                "train_acc": f"{100 * model.score(X, y):.3f}",
                "test_acc": f"{100 * model.score(X_test, y_test):.3f}",
                "fit_time_s": f"{fit_time:.3f}", "cached": int(cached),
            }], MODEL_FIELDS)
            logged.add(key)
        return model, fit_time


def select_lr(store, dataset, arch, depth, M, epochs, lrs, data, seed=1):
    """Learning rate of the grid whose ``seed`` model has the best training accuracy.

    The model at the chosen rate doubles as the seed-``seed`` model of the
    first pair. Returns ``(lr, {lr: train_acc})``.
    """
    X_tr, X_te, y_tr, y_te = data
    accs = {}
    for lr in lrs:
        model, _ = store.get(dataset, arch, depth, M, lr, seed, epochs, X_tr, y_tr, X_te, y_te,
                             role="lr_selection")
        accs[lr] = model.score(X_tr, y_tr)
    best = max(lrs, key=lambda lr: (accs[lr], lr))
    return best, accs


# -- interpolation -----------------------------------------------------------------------------
def interpolate_pair(a, b, splits, *, n_lambdas=25, methods=("wm", "am"), X_align=None,
                     n_samples=512, align_seed=0, device="cpu", ref=None):
    """Curves of every alignment configuration between ``a`` and ``b``.

    ``splits`` maps a split name to ``(X, y)``; every configuration is aligned
    once (on ``X_align``) and its curve evaluated on every split with
    :func:`~sktree_lmc.interpolation_curve`, reusing the fitted aligner. Naive
    interpolation is computed once and reported under every method. ``ref``
    maps a split name to a reference accuracy stored in ``acc_ref``.

    Returns a list of row dicts (without the experiment/config columns).
    """
    configs = [("naive", "none")] + [(m, inv) for m in methods for inv in INVARIANCES[1:]]
    rows = []
    for method, inv in configs:
        t0 = time.perf_counter()
        aligner = ModelAligner(method="wm" if method == "naive" else method, invariances=inv,
                               n_samples=n_samples, random_state=align_seed, device=device)
        aligner.fit([a, b], X_align)
        align_time = time.perf_counter() - t0
        for split, (X, y) in splits.items():
            t0 = time.perf_counter()
            curve = interpolation_curve(a, b, X, y, lambdas=n_lambdas, aligner=aligner)
            eval_time = time.perf_counter() - t0
            acc, lambdas = curve.scores["accuracy"], curve.lambdas
            best = int(np.argmax(acc))
            row = {
                "invariances": inv, "split": split, "n_rows": len(y),
                "barrier": f"{curve.barrier('accuracy'):.4f}",
                "barrier_log_loss": f"{curve.barrier('log_loss'):.5f}",
                "acc_a": f"{acc[0]:.3f}", "acc_b": f"{acc[-1]:.3f}",
                "acc_mid": f"{acc[n_lambdas // 2]:.3f}", "acc_best": f"{acc[best]:.3f}",
                "lam_best": f"{lambdas[best]:.4f}",
                "acc_ref": "" if ref is None or split not in ref else f"{ref[split]:.3f}",
                "align_time_s": f"{align_time:.4f}", "eval_time_s": f"{eval_time:.3f}",
                "curve": ";".join(f"{v:.3f}" for v in acc),
            }
            for m in (methods if method == "naive" else [method]):
                rows.append(dict(row, method=m))
    return rows


# -- experiments -------------------------------------------------------------------------------
def _done_keys(path):
    return {(r["experiment"], r["arch"], r["depth"], r["n_estimators"], r["epochs"], r["pair"])
            for r in read_csv(path)}


def _pending_pairs(path, experiment, arch, depth, M, epochs, pairs, progress):
    """Yield ``(pair, seed_a, seed_b)`` for the pairs without rows in ``path`` yet.

    A rerun resumes: pairs already recorded are skipped. ``progress`` (a tqdm bar or
    ``None``) advances once per pair, skipped or run.
    """
    done = _done_keys(path)
    for p in range(pairs):
        if (experiment, arch, str(depth), str(M), str(epochs), str(p)) not in done:
            yield (p, *SEED_PAIRS[p])
        if progress is not None:
            progress.update(1)


def _append_pair_rows(path, rows, *, experiment, dataset, arch, depth, M, lr, epochs, pair,
                      seed_a, seed_b):
    base = {"experiment": experiment, "dataset": dataset, "arch": arch, "depth": depth,
            "n_estimators": M, "lr": fmt_lr(lr), "epochs": epochs, "pair": pair,
            "seed_a": seed_a, "seed_b": seed_b}
    append_rows(path, [dict(base, **r) for r in rows], BARRIER_FIELDS)


def run_lmc(store, out, dataset, arch, depth, M, epochs, pairs, lrs, data, *, methods,
            n_lambdas=25, progress=None):
    """Barriers of ``pairs`` seed pairs for one configuration (Tables 3, 4, 6-11)."""
    path = Path(out) / "raw" / dataset / "barriers.csv"
    X_tr, X_te, y_tr, y_te = data
    lr, _ = select_lr(store, dataset, arch, depth, M, epochs, lrs, data)
    for p, sa, sb in _pending_pairs(path, "lmc", arch, depth, M, epochs, pairs, progress):
        a, _ = store.get(dataset, arch, depth, M, lr, sa, epochs, X_tr, y_tr, X_te, y_te,
                         role="pair")
        b, _ = store.get(dataset, arch, depth, M, lr, sb, epochs, X_tr, y_tr, X_te, y_te,
                         role="pair")
        t0 = time.perf_counter()
        rows = interpolate_pair(a, b, {"train": (X_tr, y_tr), "test": (X_te, y_te)},
                                n_lambdas=n_lambdas, methods=methods, X_align=X_tr,
                                align_seed=sa)
        _append_pair_rows(path, rows, experiment="lmc", dataset=dataset, arch=arch,
                          depth=depth, M=M, lr=lr, epochs=epochs, pair=p, seed_a=sa,
                          seed_b=sb)
        test = {(r["method"], r["invariances"]): r["barrier"] for r in rows
                if r["split"] == "test"}
        log(f"{dataset} {arch} D={depth} M={M} pair {p}: test barriers "
            + " ".join(f"{m}/{i}={v}" for (m, i), v in sorted(test.items()))
            + f" ({time.perf_counter() - t0:.1f}s)")


def run_split(store, out, dataset, arch, depth, M, epochs, pairs, lrs, data, *, methods,
              n_lambdas=25, frac=0.8, progress=None):
    """Split-data experiment (Figure 8): models on disjoint class-skewed halves."""
    path = Path(out) / "raw" / dataset / "barriers.csv"
    X_tr, X_te, y_tr, y_te = data
    lr, _ = select_lr(store, dataset, arch, depth, M, epochs, lrs, data)
    # disjoint class-skewed halves (Figure 8): A gets ``frac`` of class 0 and ``1 - frac`` of
    # class 1, B the rest; the split depends on random_state only, not on the training seeds
    ia, ib = make_shards(y_tr, 2, "class_skewed", skew=frac, random_state=0)
    for p, sa, sb in _pending_pairs(path, "split", arch, depth, M, epochs, pairs, progress):
        full, _ = store.get(dataset, arch, depth, M, lr, sa, epochs, X_tr, y_tr, X_te, y_te,
                            role="pair")
        a, _ = store.get(dataset, arch, depth, M, lr, sa, epochs, X_tr[ia], y_tr[ia], X_te, y_te,
                         experiment="split", role="split_a")
        b, _ = store.get(dataset, arch, depth, M, lr, sb, epochs, X_tr[ib], y_tr[ib], X_te, y_te,
                         experiment="split", role="split_b")
        ref = {"train": 100 * full.score(X_tr, y_tr), "test": 100 * full.score(X_te, y_te)}
        rows = interpolate_pair(a, b, {"train": (X_tr, y_tr), "test": (X_te, y_te)},
                                n_lambdas=n_lambdas, methods=methods, X_align=X_tr,
                                align_seed=sa, ref=ref)
        _append_pair_rows(path, rows, experiment="split", dataset=dataset, arch=arch,
                          depth=depth, M=M, lr=lr, epochs=epochs, pair=p, seed_a=sa,
                          seed_b=sb)
        t = [r for r in rows if r["split"] == "test" and r["method"] == methods[-1]
             and r["invariances"] == "all"][0]
        log(f"split {dataset} {arch} pair {p}: test acc A={t['acc_a']} B={t['acc_b']} "
            f"merged({methods[-1]}, all, lam=.5)={t['acc_mid']} full={ref['test']:.2f}")


def run_hgb(out, dataset, data):
    """HistGradientBoostingClassifier on the same split (a reference for Issue 2)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    path = Path(out) / "raw" / dataset / "hgb.csv"
    if read_csv(path):
        return
    X_tr, X_te, y_tr, y_te = data
    t0 = time.perf_counter()
    hgb = HistGradientBoostingClassifier(random_state=0).fit(X_tr, y_tr)
    fit_time = time.perf_counter() - t0
    append_rows(path, [{
        "dataset": dataset, "train_acc": f"{100 * hgb.score(X_tr, y_tr):.3f}",
        "test_acc": f"{100 * hgb.score(X_te, y_te):.3f}", "fit_time_s": f"{fit_time:.3f}",
    }], ["dataset", "train_acc", "test_acc", "fit_time_s"])

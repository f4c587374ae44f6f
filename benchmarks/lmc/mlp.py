"""MLP baseline of Table 2: ReLU MLP of width M, permutation weight matching (Git Re-Basin).

The MLP has ``depth`` hidden layers of ``width`` units (``depth=1``: one
hidden layer), trained like the trees (Adam, cross-entropy, batch 512, the
same epochs and learning-rate grid). Two MLPs are aligned by weight matching
over the hidden units, by coordinate descent over the layers as in
Ainsworth et al. (2023), "Git Re-Basin", Algorithm 1: each step solves one
linear assignment for one layer given the permutations of its neighbours,
until no step improves the objective.
"""

from __future__ import annotations

import time
from pathlib import Path

import joblib
import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from sktree_lmc import lmc_barrier

from .core import (
    BARRIER_FIELDS,
    MODEL_FIELDS,
    SEED_PAIRS,
    append_rows,
    fmt_lr,
    log,
    read_csv,
)


def fit_mlp(X, y, *, width=256, depth=1, lr=1e-2, epochs=50, batch_size=512, seed=0):
    """Train an MLP; returns its layers as a list of ``(W (out, in), b (out,))`` arrays."""
    classes = np.unique(y)
    target = torch.as_tensor(np.searchsorted(classes, y), dtype=torch.long)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sizes = [X.shape[1]] + [width] * depth + [len(classes)]
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        order = torch.randperm(len(Xt), generator=gen)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            loss = loss_fn(net(Xt[idx]), target[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return {
        "layers": [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
                   for m in net if isinstance(m, torch.nn.Linear)],
        "classes": classes,
    }


def mlp_proba(model, X):
    h = np.asarray(X, dtype=np.float32)
    layers = model["layers"]
    for i, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0)
    h = h - h.max(axis=1, keepdims=True)
    e = np.exp(h)
    return e / e.sum(axis=1, keepdims=True)


def mlp_score(model, X, y):
    pred = model["classes"][mlp_proba(model, X).argmax(axis=1)]
    return float(np.mean(pred == y))


def permute(layers, perms):
    """Apply hidden-unit permutations ``perms[l]`` (one per hidden layer) to ``layers``."""
    out = []
    for k, (W, b) in enumerate(layers):
        if k < len(perms):
            W, b = W[perms[k]], b[perms[k]]
        if k > 0:
            W = W[:, perms[k - 1]]
        out.append((W, b))
    return out


def weight_matching(layers_a, layers_b, *, max_iter=100, seed=0):
    """Permutations of ``b``'s hidden units that maximize the inner product with ``a``.

    Returns ``perms`` such that ``permute(layers_b, perms)`` computes the same
    function as ``b`` and is close to ``a`` in parameter space.
    """
    n_hidden = len(layers_a) - 1
    perms = [np.arange(layers_a[k][0].shape[0]) for k in range(n_hidden)]
    rng = np.random.RandomState(seed)
    for _ in range(max_iter):
        improved = False
        for k in rng.permutation(n_hidden):
            Wa, ba = layers_a[k]
            Wb, bb = layers_b[k]
            if k > 0:
                Wb = Wb[:, perms[k - 1]]
            S = Wa @ Wb.T + np.outer(ba, bb)
            Wa_next = layers_a[k + 1][0]
            Wb_next = layers_b[k + 1][0]
            if k + 1 < n_hidden:
                Wb_next = Wb_next[perms[k + 1]]
            S = S + Wa_next.T @ Wb_next
            old = S[np.arange(len(perms[k])), perms[k]].sum()
            _, col = linear_sum_assignment(S, maximize=True)
            new = S[np.arange(len(col)), col].sum()
            if new > old + 1e-9:
                perms[k] = col
                improved = True
        if not improved:
            break
    return perms


def _interp(la, lb, lam):
    return [((1 - lam) * Wa + lam * Wb, (1 - lam) * ba + lam * bb)
            for (Wa, ba), (Wb, bb) in zip(la, lb)]


def run_mlp(out, dataset, depth, width, epochs, pairs, lrs, data, *, n_lambdas=25):
    """Naive and permutation (WM) barriers of MLP pairs; rows in ``barriers.csv``."""
    out = Path(out)
    X_tr, X_te, y_tr, y_te = data
    path = out / "raw" / dataset / "barriers.csv"
    logged = {(r["experiment"], r["arch"], r["depth"], r["n_estimators"], r["lr"], r["epochs"],
               r["seed"]) for r in read_csv(out / "raw" / dataset / "models.csv")}

    def get(lr, seed, role):
        name = f"mlp_D{depth}_W{width}_lr{fmt_lr(lr)}_s{seed}_e{epochs}.joblib"
        p = out / "models" / dataset / name
        cached = p.exists()
        if cached:
            blob = joblib.load(p)
        else:
            t0 = time.perf_counter()
            model = fit_mlp(X_tr, y_tr, width=width, depth=depth, lr=lr, epochs=epochs, seed=seed)
            blob = {"model": model, "fit_time_s": time.perf_counter() - t0}
            p.parent.mkdir(parents=True, exist_ok=True)
            joblib.dump(blob, p)
            log(f"fit {dataset} mlp D={depth} W={width} lr={fmt_lr(lr)} seed={seed}: "
                f"{blob['fit_time_s']:.1f}s")
        key = ("mlp", "mlp", str(depth), str(width), fmt_lr(lr), str(epochs), str(seed))
        if key not in logged:
            m = blob["model"]
            append_rows(out / "raw" / dataset / "models.csv", [{
                "experiment": "mlp", "dataset": dataset, "arch": "mlp", "depth": depth,
                "n_estimators": width, "lr": fmt_lr(lr), "epochs": epochs, "seed": seed,
                "role": role, "n_train": len(y_tr),
                "train_acc": f"{100 * mlp_score(m, X_tr, y_tr):.3f}",
                "test_acc": f"{100 * mlp_score(m, X_te, y_te):.3f}",
                "fit_time_s": f"{blob['fit_time_s']:.3f}", "cached": int(cached),
            }], MODEL_FIELDS)
            logged.add(key)
        return blob["model"]

    accs = {lr: mlp_score(get(lr, 1, "lr_selection"), X_tr, y_tr) for lr in lrs}
    lr = max(lrs, key=lambda v: (accs[v], v))
    done = {(r["experiment"], r["depth"], r["n_estimators"], r["epochs"], r["pair"])
            for r in read_csv(path)}
    lambdas = np.linspace(0, 1, n_lambdas)
    for p in range(pairs):
        if ("mlp", str(depth), str(width), str(epochs), str(p)) in done:
            continue
        sa, sb = SEED_PAIRS[p]
        a, b = get(lr, sa, "pair"), get(lr, sb, "pair")
        rows = []
        for inv in ("none", "perm"):
            t0 = time.perf_counter()
            lb = b["layers"]
            if inv == "perm":
                lb = permute(lb, weight_matching(a["layers"], lb, seed=sa))
            align_time = time.perf_counter() - t0
            for split, (X, y) in {"train": (X_tr, y_tr), "test": (X_te, y_te)}.items():
                t0 = time.perf_counter()
                acc = np.array([100 * mlp_score({"layers": _interp(a["layers"], lb, lam),
                                                 "classes": a["classes"]}, X, y)
                                for lam in lambdas])
                best = int(np.argmax(acc))
                rows.append({
                    "experiment": "mlp", "dataset": dataset, "arch": "mlp", "depth": depth,
                    "n_estimators": width, "lr": fmt_lr(lr), "epochs": epochs, "pair": p,
                    "seed_a": sa, "seed_b": sb, "method": "wm", "invariances": inv,
                    "split": split, "n_rows": len(y), "barrier": f"{lmc_barrier(acc, lambdas):.4f}",
                    "barrier_log_loss": "", "acc_a": f"{acc[0]:.3f}", "acc_b": f"{acc[-1]:.3f}",
                    "acc_mid": f"{acc[n_lambdas // 2]:.3f}", "acc_best": f"{acc[best]:.3f}",
                    "lam_best": f"{lambdas[best]:.4f}", "acc_ref": "",
                    "align_time_s": f"{align_time:.4f}",
                    "eval_time_s": f"{time.perf_counter() - t0:.3f}",
                    "curve": ";".join(f"{v:.3f}" for v in acc),
                })
        append_rows(path, rows, BARRIER_FIELDS)
        log(f"mlp {dataset} D={depth} pair {p}: test barriers "
            + " ".join(f"{r['invariances']}={r['barrier']}" for r in rows if r["split"] == "test"))

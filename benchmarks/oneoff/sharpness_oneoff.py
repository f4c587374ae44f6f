"""One-off script of docs/benchmarks_archive.md, "Sharper splits" (issue 42); not maintained.

It patches private internals (the split start, the optimizer groups, the teacher targets)
through environment variables: FANIN_S (bound S/sqrt(F)), MIX_S (per-tree scale), SPLIT_LR
(split learning-rate factor), PAIRS (pair codes), OOF (out-of-fold teacher), ONLY (dataset
filter). Usage: python sharpness_oneoff.py NAME JSON_PARAMS SHAPES [SEEDS].
"""
import json, math, os, sys, time, warnings
from pathlib import Path

import numpy as np, torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks.bench_shapes import SHAPES, _split
from sktree_lmc import SoftTreeEnsembleClassifier
from sklearn.ensemble import HistGradientBoostingClassifier


def patch_split_lr(factor):
    """Train the split weights and biases at ``factor`` times the learning rate: the
    library's optimizer with its first group (splits and leaves) cut in two."""
    import sktree_lmc._estimators as _e
    import sktree_lmc.training._training as _t
    library = _t.make_optimizer

    def make_optimizer(module, learning_rate):
        optimizer = library(module, learning_rate)
        first = optimizer.param_groups[0]
        optimizer.param_groups[0:1] = [
            {**first, "params": [module.split_weight, module.split_bias],
             "lr": factor * first["lr"]},
            {**first, "params": [module.leaf_value]}]
        return optimizer
    _t.make_optimizer = _e.make_optimizer = make_optimizer


def main():
    torch.set_num_threads(1)
    if os.environ.get("FANIN_S"):
        import sktree_lmc.model._forward as _f
        _orig = _f.split_init_bound
        S = float(os.environ["FANIN_S"])
        _f.split_init_bound = lambda si, n: S / math.sqrt(max(n, 1)) if si == "fan_in" else _orig(si, n)
    if os.environ.get("MIX_S"):
        import sktree_lmc.model._forward as _f
        _init = _f.SoftTreeEnsembleModule.__init__
        hi = math.log(float(os.environ["MIX_S"]))
        def __init__(self, arch, n_trees, n_features, n_outputs, generator=None, **kw):
            _init(self, arch, n_trees, n_features, n_outputs, generator=generator, **kw)
            u = torch.rand(n_trees, generator=generator)
            s = torch.exp(u * hi)
            with torch.no_grad():
                self.split_weight.mul_(s[:, None, None]); self.split_bias.mul_(s[:, None])
        _f.SoftTreeEnsembleModule.__init__ = __init__
    if os.environ.get("SPLIT_LR"):
        patch_split_lr(float(os.environ["SPLIT_LR"]))
    if os.environ.get("OOF"):
        import sktree_lmc._estimators as _e
        from sktree_lmc.training._boosting import grow_oblivious_trees, oblivious_output
        from sktree_lmc.training._start import boosting_validation
        K = int(os.environ["OOF"])
        def _distilled_targets(self, X, target, split, teacher_weight, trees):
            train_idx, val_idx = split
            F = self.encoder_.n_features_out_
            self.teacher_ = [tuple(np.asarray(a) for a in trees)]
            C = trees[3].shape[2]
            sw = np.ones(len(target))
            out = np.empty((len(train_idx), C))
            perm = np.random.RandomState(0).permutation(len(train_idx))
            for fold in np.array_split(perm, K):
                rest = np.setdiff1d(perm, fold)
                t = grow_oblivious_trees(np.asarray(X[train_idx[rest], :F], dtype=np.float64), target[train_idx[rest]],
                    sw[train_idx[rest]], loss=self._loss, n_trees=self.n_estimators, depth=self.depth, n_outputs=C,
                    generator=torch.Generator().manual_seed(0),
                    validation=boosting_validation(X, target, sw, val_idx, F))
                out[fold] = oblivious_output(np.asarray(X[train_idx[fold], :F], dtype=np.float64), *t)
            return self._mix_targets(target, out, train_idx, teacher_weight)
        _e._BaseSoftTreeEnsemble._distilled_targets = _distilled_targets
    name = sys.argv[1]; params = json.loads(sys.argv[2])
    shapes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["classes_5"]
    seeds = [int(s) for s in sys.argv[4].split(",")] if len(sys.argv) > 4 else [0]
    for sh in shapes:
        shape = SHAPES[sh]
        for d in [d for d in shape.datasets() if os.environ.get('ONLY', '') in d]:
            X, y = shape.load(d)
            for seed in seeds:
                Xtr, Xte, ytr, yte = _split(shape, X, y, seed, False)
                if os.environ.get("PAIRS"):
                    nb = int(os.environ["PAIRS"])
                    def bins(col_tr, col):
                        e = np.unique(np.quantile(col_tr, np.linspace(0, 1, nb + 1)[1:-1]))
                        return np.searchsorted(e, col, side="right")
                    Btr = np.stack([bins(Xtr[:, j], Xtr[:, j]) for j in range(Xtr.shape[1])], 1)
                    Bte = np.stack([bins(Xtr[:, j], Xte[:, j]) for j in range(Xtr.shape[1])], 1)
                    pairs = [(a, b) for a in range(Xtr.shape[1]) for b in range(a + 1, Xtr.shape[1])]
                    Xtr = np.hstack([Xtr, np.stack([Btr[:, a] * nb + Btr[:, b] for a, b in pairs], 1)])
                    Xte = np.hstack([Xte, np.stack([Bte[:, a] * nb + Bte[:, b] for a, b in pairs], 1)])
                with threadpool_limits(1), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if name == "hgb":
                        est = HistGradientBoostingClassifier(random_state=seed)
                    else:
                        est = SoftTreeEnsembleClassifier(random_state=seed, device="cpu", **params)
                    t = time.process_time(); est.fit(Xtr, ytr); t = time.process_time() - t
                te = (est.predict(Xte) == yte).mean() * 100; tr = (est.predict(Xtr) == ytr).mean() * 100
                ep = getattr(est, "n_iter_", "")
                print(f"{name:12s} {sh:10s} {d:28s} s{seed} test {te:6.2f} train {tr:6.2f} ep {ep} t {t:5.1f}", flush=True)


if __name__ == "__main__":
    main()

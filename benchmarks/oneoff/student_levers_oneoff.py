"""One-off script of docs/benchmarks_archive.md, "What HGB's lead on the 5-class targets is made of"
(issue 42); not maintained. Patches private internals.

The default classifier on bench_shapes' ``classes_5`` target electricity/nswdemand (seed 0),
changed by MODE:

- ``coarse J``: column J of the data replaced by its 16 training quantile bins;
- ``sharpen``: the fitted splits' weights and biases multiplied by s = 1, 2, 4, 8, then the
  leaves refitted (``refit_leaves``) on the training rows;
- ``grow G``: the split weights and biases multiplied by G after every epoch (a temperature
  that falls during training; early stopping restores the best epoch as usual);
- ``per_class N``: N trees, tree m feeding only class m mod 5 (the other leaf values masked
  in the forward and zeroed after the fit), as HistGradientBoosting grows a tree per class.

Usage: python student_levers_oneoff.py MODE [ARG]. Prints test and training accuracy.
"""
import copy, sys, warnings
from pathlib import Path

import numpy as np, torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks.bench_shapes import SHAPES, _split
from sktree_lmc import SoftTreeEnsembleClassifier, refit_leaves
import sktree_lmc.model._forward as _f
import sktree_lmc.training._training as _t


def class_mask(leaf_value):
    M, _, C = leaf_value.shape
    mask = torch.zeros(M, 1, C, dtype=leaf_value.dtype)
    mask[torch.arange(M), 0, torch.arange(M) % C] = 1
    return mask


def patch_per_class():
    library = _f.SoftTreeEnsembleModule.forward

    def forward(self, X, codes=None):
        M, L, C = self.leaf_value.shape
        if C == 1:
            return library(self, X, codes)
        pi = (self.leaf_value * class_mask(self.leaf_value)).transpose(0, 1).reshape(L * M, C)
        out = _f._Ensemble.apply(self._split_logits(X), pi, self._steps)
        extra = self._additive_output(codes)
        return out if extra is None else out + extra
    _f.SoftTreeEnsembleModule.forward = forward


def patch_grow(factor):
    library = _t._run_epoch

    def run_epoch(module, *args, **kwargs):
        loss = library(module, *args, **kwargs)
        with torch.no_grad():
            module.split_weight.mul_(factor)
            module.split_bias.mul_(factor)
        return loss
    _t._run_epoch = run_epoch


def main():
    torch.set_num_threads(1)
    mode, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    shape = SHAPES["classes_5"]
    X, y = shape.load("electricity/nswdemand")
    X_tr, X_te, y_tr, y_te = _split(shape, np.asarray(X, dtype=float), y, 0, False)
    params = {}
    if mode == "coarse":
        j = int(arg)
        edges = np.unique(np.quantile(X_tr[:, j], np.linspace(0, 1, 17)[1:-1]))
        X_tr[:, j], X_te[:, j] = np.searchsorted(edges, X_tr[:, j]), np.searchsorted(edges, X_te[:, j])
    elif mode == "grow":
        patch_grow(float(arg))
    elif mode == "per_class":
        patch_per_class()
        params["n_estimators"] = int(arg)
    acc = lambda est, A, b: round(100 * float(np.mean(est.predict(A) == b)), 2)
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = SoftTreeEnsembleClassifier(random_state=0, device="cpu", **params).fit(X_tr, y_tr)
        if mode == "per_class":
            lv = est.tree_params_.leaf_value
            est.tree_params_.leaf_value = lv * class_mask(torch.as_tensor(lv)).numpy()
        print(mode, arg, "test", acc(est, X_te, y_te), "train", acc(est, X_tr, y_tr), flush=True)
        if mode == "sharpen":
            for s in (1, 2, 4, 8):
                sharp = copy.deepcopy(est)
                sharp.tree_params_.split_weight = sharp.tree_params_.split_weight * s
                sharp.tree_params_.split_bias = sharp.tree_params_.split_bias * s
                refit = refit_leaves(sharp, X_tr, y_tr)
                print(f"sharpen s={s}: before the refit {acc(sharp, X_te, y_te)}, refitted test "
                      f"{acc(refit, X_te, y_te)} train {acc(refit, X_tr, y_tr)}", flush=True)


if __name__ == "__main__":
    main()

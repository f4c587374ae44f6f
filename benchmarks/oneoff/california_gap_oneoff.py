"""Issue 63: what california's gap to HGB is made of, the teacher or the student. Binary
california (bench_accuracy's split, 10k/10k) and its regression twin california_medinc
(bench_tasks' split), seeds 0-2: training and test scores of HGB, of the default model (the
student), of its gradient-boosted teacher alone (``objective_.teachers[0]`` on the encoded
rows), their agreement, and oracles that swap the teacher: the student distilled from HGB's
outputs instead (``hgb_teacher``; its ``teacher_*`` fields are those of the boosted teacher
the fit grew and did not use), or from a boosted teacher of depth 6 (``teacher_depth6``).
On the regression target ``default`` is the regressor's default (no teacher) and the teacher
variants set ``teacher_weight=0.75``; a variant ``name=value;...`` sets those parameters.
One JSON line per task, seed and variant (``docs/_static/benchmarks/tasks/california_gap.jsonl``).

    SKTREE_LMC_DATA=<Tabular-Benchmark folder> python benchmarks/oneoff/california_gap_oneoff.py \
        [--variants default hgb_teacher ...] [--out FILE]
"""
import argparse
import json
import time
import warnings

import numpy as np
import torch

warnings.simplefilter("ignore")
torch.set_num_threads(1)

from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor  # noqa: E402

import sktree_lmc.training._fit as fit_mod  # noqa: E402
from sktree_lmc import SoftTreeEnsembleClassifier, SoftTreeEnsembleRegressor  # noqa: E402
from sktree_lmc._validation import encoded_input  # noqa: E402
from sktree_lmc.training._objective import Objective  # noqa: E402
from benchmarks import bench_accuracy, bench_tasks  # noqa: E402

#: The teacher override of the current fit: None, ("hgb", raw outputs of the fit's rows) or
#: ("grow", dict(depth=..., n_trees=...)).
CURRENT = {}
_distilled = Objective.distilled
_grow = fit_mod.grow_oblivious_trees
_feature_gains = fit_mod.feature_gains


def distilled(self, X, target, rows, teacher_weight, teacher):
    if CURRENT.get("hgb") is not None:
        self.teachers = [teacher]
        return self.mix(target, CURRENT["hgb"][rows], rows, teacher_weight)
    return _distilled(self, X, target, rows, teacher_weight, teacher)


def grow(*args, **kwargs):
    kwargs.update(CURRENT.get("grow", {}))
    if "depth" in CURRENT.get("grow", {}):
        kwargs["gains"] = CURRENT["gains"] = np.zeros((kwargs["n_trees"], kwargs["depth"]))
    return _grow(*args, **kwargs)


def gains_of(features, gains, n_features):
    return _feature_gains(features, CURRENT.get("gains", gains), n_features)


Objective.distilled = distilled
fit_mod.grow_oblivious_trees = grow
fit_mod.feature_gains = gains_of

VARIANTS = {
    "default": {},
    "hgb_teacher": {"hgb": True},
    "teacher_depth6": {"grow": dict(depth=6)},
}


def data(task, seed):
    if task == "binary":
        X, y = bench_accuracy.load("raw", "california")
        return bench_accuracy.split(X, y, 10000, 10000, seed, True)
    ds = bench_tasks.DATASETS["california_medinc"]
    X, y = ds.load()
    return bench_tasks.split(ds, X, y, seed)


def teacher_scores(est, Xtr, Xte, ytr, yte, task):
    teacher = est.objective_.teachers[0]
    out = {"teacher_trees_kept": int(len(teacher.features))}
    for name, X, y in (("train", Xtr, ytr), ("test", Xte, yte)):
        raw = teacher.output(np.asarray(encoded_input(est, X).X, np.float64))
        if task == "binary":
            pred = np.asarray(est.classes_)[raw.argmax(1)]
            out[f"teacher_{name}"] = round(100 * float(np.mean(pred == np.asarray(y))), 3)
            out[f"agree_{name}"] = round(100 * float(np.mean(pred == est.predict(X))), 2)
        else:
            from sklearn.metrics import r2_score
            obj = est.objective_
            pred = raw[:, 0] * float(obj.y_scale[0]) + float(obj.y_mean[0])
            out[f"teacher_{name}"] = round(float(r2_score(y, pred)), 5)
    return out


def run(task, seed, variant):
    Xtr, Xte, ytr, yte = data(task, seed)
    cls, hgb_cls = ((SoftTreeEnsembleClassifier, HistGradientBoostingClassifier) if task == "binary"
                    else (SoftTreeEnsembleRegressor, HistGradientBoostingRegressor))
    spec = VARIANTS.get(variant)
    row = {"task": task, "seed": seed, "variant": variant}
    if variant == "hgb":
        est = hgb_cls(random_state=seed)
        t0 = time.process_time()
        est.fit(Xtr, ytr)
    else:
        params = {} if spec is not None else bench_tasks.parse_variant(variant)
        est = cls(random_state=seed, device="cpu", **params)
        if task == "regression" and spec:
            est.set_params(teacher_weight=0.75)
        CURRENT.clear()
        if spec and spec.get("hgb"):
            hgb = hgb_cls(random_state=seed).fit(Xtr, ytr)
            if task == "binary":
                f = hgb.decision_function(Xtr)
                CURRENT["hgb"] = np.c_[np.zeros_like(f), f]
            else:  # the regressor's targets are standardized
                p = hgb.predict(Xtr)
                CURRENT["hgb"] = ((p - ytr.mean()) / ytr.std())[:, None]
        if spec and "grow" in spec:
            CURRENT["grow"] = spec["grow"]
        t0 = time.process_time()
        est.fit(Xtr, ytr)
        CURRENT.clear()
    row["fit_s"] = round(time.process_time() - t0, 2)
    scale = 100 if task == "binary" else 1
    row["train"] = round(scale * est.score(Xtr, ytr), 5)
    row["test"] = round(scale * est.score(Xte, yte), 5)
    if variant != "hgb":
        row["epochs"] = int(est.n_iter_)
        if est.objective_.teachers:
            row.update(teacher_scores(est, Xtr, Xte, ytr, yte, task))
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="+", default=["binary", "regression"])
    parser.add_argument("--variants", nargs="+", default=["hgb", "default", "hgb_teacher"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    for task in args.tasks:
        for seed in args.seeds:
            for variant in args.variants:
                row = run(task, seed, variant)
                print(json.dumps(row), flush=True)
                if args.out:
                    with open(args.out, "a") as fh:
                        fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

"""Issue 63: general levers of the student (the soft trees) screened on binary california and
checked on the seven datasets and on the merging axis. A variant is the default classifier with
the settings ``"a=1;b=(16, 64)"`` (``bench_tasks.parse_variant``; ``default``: none).

* ``accuracy NAMES SEEDS VARIANT...``: test and training accuracy and fit CPU seconds of each
  variant beside ``HistGradientBoostingClassifier()`` (``bench_accuracy.split``, 10,000 /
  10,000 stratified, seed s for the split and ``random_state``);
* ``barrier NAMES VARIANT...``: the WM test barrier of two models of seeds ``$PAIR`` (default
  ``1,2``) on 2,000 test rows, 11 lambdas, aligned on the training rows (split seed 0);
* ``apart NAMES SEEDS VARIANT...``: four models on IID quarters (``bench_apart.sites``),
  their ensemble and the default merge (``merge_estimators``).

Besides the estimator's parameters a variant may hold ``masks=...`` (the soft trees' columns
taken from the teacher's trees instead of ``FeatureMask.guided``'s draw; the draw still runs
first, so the generator moves on as in the default fit, then one more draw picks the teacher
trees) and ``temp=T`` (the teacher's outputs divided by ``T``), both monkeypatches.
One JSON line per measurement on stdout
(``docs/_static/benchmarks/tasks/california_student.jsonl``).

    SKTREE_LMC_DATA=<Tabular-Benchmark folder> python benchmarks/oneoff/california_student_oneoff.py \
        accuracy california 0,1,2 default "max_features=0.75"
"""
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

torch.set_num_threads(1)
warnings.simplefilter("ignore")

from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402

from benchmarks.bench_accuracy import load, split  # noqa: E402
from benchmarks.bench_apart import _site_seed, sites  # noqa: E402
from benchmarks.bench_tasks import parse_variant  # noqa: E402
from sktree_lmc import (SoftTreeEnsembleClassifier, interpolation_curve, lmc_barrier,  # noqa: E402
                        merge_estimators)
import sktree_lmc.training._fit as fit_module  # noqa: E402
import sktree_lmc.training._training as training  # noqa: E402
from sktree_lmc.training._objective import Teacher  # noqa: E402

#: ``masks="tree"`` / ``"tree_all"`` in a variant: each soft tree's columns are those of one
#: teacher tree (drawn by its total gain): its ``guided_count`` strongest, or all of them;
#: ``"tree_order"``: soft tree i takes all the columns of teacher tree i (no draw; cycled over
#: the teacher trees with a gain).
MASKS = {}
_feature_gains = fit_module.feature_gains
_guided = training.FeatureMask.guided.__func__


def feature_gains(features, gains, n_features):
    MASKS["trees"] = (np.asarray(features).copy(), np.asarray(gains, dtype=np.float64).copy())
    return _feature_gains(features, gains, n_features)


def guided(cls, generator, n_trees, groups, gains, max_features, device, **kwargs):
    out = _guided(cls, generator, n_trees, groups, gains, max_features, device, **kwargs)
    if out is None or MASKS.get("kind") is None or "trees" not in MASKS:
        return out
    groups = np.asarray(groups)
    n_inputs = int(groups.max()) + 1
    features, tree_gains = MASKS["trees"]
    used = features >= 0
    per_tree = np.zeros((len(features), n_inputs))  # gain of every input column per teacher tree
    rows = np.repeat(np.arange(len(features)), features.shape[1]).reshape(features.shape)
    np.add.at(per_tree, (rows[used], groups[features[used]]), tree_gains[used])
    weight = per_tree.sum(0)
    k = training.guided_count(max_features, training.effective_count(weight),
                              int((weight > 0).sum()))
    total = per_tree.sum(1)
    if MASKS["kind"] == "tree_order":  # soft tree i: the columns of teacher tree i (cycled)
        live = np.flatnonzero(total > 0)
        pick = live[np.arange(n_trees) % len(live)]
    else:
        pick = torch.multinomial(torch.as_tensor(total / total.sum()), n_trees,
                                 replacement=True, generator=generator).numpy()
    chosen = np.zeros((n_trees, n_inputs), dtype=bool)
    for i, t in enumerate(pick):
        order = np.argsort(-per_tree[t], kind="stable")
        order = order[per_tree[t][order] > 0]
        chosen[i, order[:k] if MASKS["kind"] == "tree" else order] = True
    mask = torch.as_tensor(chosen[:, groups], dtype=torch.float32, device=device)
    return cls(mask, out.additive, out.note)


fit_module.feature_gains = feature_gains
training.FeatureMask.guided = classmethod(guided)

#: ``temp=T`` in a variant: the teacher's raw outputs divided by ``T`` before they become the
#: student's targets (a distillation temperature; 1 by default).
_output = Teacher.output


def output(self, X):
    return _output(self, X) / MASKS.get("temp", 1.0)


Teacher.output = output


def model(variant, seed):
    params = {} if variant == "default" else parse_variant(variant)
    MASKS["kind"] = params.pop("masks", None)
    MASKS["temp"] = float(params.pop("temp", 1.0))
    return SoftTreeEnsembleClassifier(random_state=seed, device="cpu", **params)


def ints(text):
    return [int(v) for v in text.split(",")]


def main():
    mode, names = sys.argv[1], sys.argv[2].split(",")
    for name in names:
        X_all, y_all = load("raw", name)
        if mode == "accuracy":
            for seed in ints(sys.argv[3]):
                X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, seed, True)
                for variant in sys.argv[4:]:
                    if variant == "hgb":
                        m, t = HistGradientBoostingClassifier(random_state=seed), time.process_time()
                    else:
                        m, t = model(variant, seed), time.process_time()
                    m.fit(X, y)
                    out = dict(mode=mode, data=name, seed=seed, variant=variant,
                               fit_s=round(time.process_time() - t, 2),
                               test=round(100 * m.score(Xt, yt), 2),
                               train=round(100 * m.score(X, y), 2),
                               epochs=getattr(m, "n_iter_", None))
                    print(json.dumps(out), flush=True)
        elif mode == "barrier":
            pair = ints(os.environ.get("PAIR", "1,2"))
            n = len(y_all)
            n_train = min(10_000, n // 2)
            X, Xt, y, yt = split(X_all, y_all, n_train, min(10_000, n - n_train), 0, True)
            ev = np.random.RandomState(0).choice(len(yt), min(2000, len(yt)), replace=False)
            for variant in sys.argv[3:]:
                a, b = (model(variant, s).fit(X, y) for s in pair)
                curve = interpolation_curve(a, b, Xt[ev], yt[ev], lambdas=11, aligner="wm",
                                            X_align=X)
                print(json.dumps(dict(mode=mode, data=name, pair=pair, variant=variant,
                                      barrier=round(float(lmc_barrier(curve)), 3),
                                      ends=[round(100 * a.score(Xt, yt), 2),
                                            round(100 * b.score(Xt, yt), 2)])), flush=True)
        else:
            for seed in ints(sys.argv[3]):
                X, Xt, y, yt = split(X_all, y_all, 10_000, 10_000, seed, False)
                parts = sites("iid", 4, X, y, seed)
                for variant in sys.argv[4:]:
                    models = [model(variant, _site_seed("apart", seed, k)).fit(X[i], y[i])
                              for k, i in enumerate(parts)]
                    w = [len(i) for i in parts]
                    P = [m.predict_proba(Xt) for m in models]
                    ens = np.average(P, axis=0, weights=w)

                    def acc(Q):
                        return round(100 * np.mean(models[0].classes_[Q.argmax(1)] == yt), 2)

                    merged = merge_estimators(models, weights=w)
                    print(json.dumps(dict(mode=mode, data=name, seed=seed, variant=variant,
                                          site=round(float(np.mean([acc(q) for q in P])), 2),
                                          ens=acc(ens),
                                          merged=round(100 * merged.score(Xt, yt), 2),
                                          aligner=merged.merge_report_.aligner)), flush=True)


if __name__ == "__main__":
    main()

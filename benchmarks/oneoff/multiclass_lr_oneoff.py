"""One-off script of issue 63 (multiclass within 1.0 point of HistGradientBoosting); not
maintained. Measured the levers of the multiclass student on ``bench_tasks``' multiclass
sets, among them a rule that trained fits of more than 2 classes at half of
``learning_rate`` (``MULTICLASS_LEARNING_RATE_FACTOR`` in ``sktree_lmc.training._plan``,
commit 0ce28c0, reverted: on hpc seeds 3-5 it lost what it gained on seeds 0-2). Where that
rule is in the code, this script switches it off (factor 1.0) so that a variant's
``learning_rate`` is the rate it trains at; elsewhere the assignment does nothing.

Usage, from the repository root::

    python benchmarks/oneoff/multiclass_lr_oneoff.py tasks OUT.jsonl -- BENCH_TASKS_ARGS...
    python benchmarks/oneoff/multiclass_lr_oneoff.py merge LABEL "PARAMS" SEED
    python benchmarks/oneoff/multiclass_lr_oneoff.py teacher DATASET SEED...

``tasks``: ``python -m benchmarks.bench_tasks`` with the rule off and the teacher's trees
kept at ``256 * min(n_classes, 4)`` whatever the student's ``n_estimators`` (so that an
``n_estimators`` variant scales the student alone), e.g. ``tasks OUT.jsonl --
--datasets hpc --models default "learning_rate=0.015" "n_estimators=512"``
(``tasks_multiclass_lr_screen.jsonl`` in ``docs/_static/benchmarks/tasks/``).

``merge``: ``merge_axis_digits_oneoff.py``'s measurement (two models on digits, their WM
merge and barrier; four models on IID quarters and their 4-way merge) with the settings
``PARAMS`` (a Python dict literal), e.g. ``merge lr0.015 "{'learning_rate': 0.015}" 0``;
prints one JSON line (``merge_axis_digits_multiclass_lr.jsonl``).

``teacher``: the default's teacher predicting alone (the argmax of its raw outputs on the
encoded rows; the student trained for one epoch, which the teacher does not depend on):
training and test accuracy per seed (``teacher_alone`` rows of
``tasks_multiclass_lr_more_seeds.jsonl``).
"""
import ast
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
import sktree_lmc.training._fit as _fit  # noqa: E402
import sktree_lmc.training._plan as _plan  # noqa: E402

_plan.MULTICLASS_LEARNING_RATE_FACTOR = 1.0  # the rule off (where it is): variants set the rate
_teacher_trees = _plan.teacher_trees


def _fixed_teacher(n_estimators, n_classes=0):
    return _teacher_trees(256 if n_classes > 2 else n_estimators, n_classes)


def _teacher_alone(name, seeds):
    import numpy as np
    from threadpoolctl import threadpool_limits

    from benchmarks.bench_tasks import DATASETS, make_model, split
    from sktree_lmc._validation import encoded_input
    from sktree_lmc.training._objective import Teacher

    dataset = DATASETS[name]
    X, y = dataset.load()
    for seed in seeds:
        X_tr, X_te, y_tr, y_te = split(dataset, X, y, seed)
        with threadpool_limits(1):
            est = make_model("default", dataset, seed).set_params(max_epochs=1).fit(X_tr, y_tr)
        teacher = Teacher.of(est.teacher_[0])
        scores = []
        for rows, labels in ((X_tr, y_tr), (X_te, y_te)):
            raw = teacher.output(np.asarray(encoded_input(est, rows).X, dtype=np.float64))
            scores.append(round(100 * float(np.mean(est.classes_[raw.argmax(1)] == labels)), 2))
        print(json.dumps({"dataset": name, "seed": seed, "model": "teacher_alone",
                          "train_score": scores[0], "test_score": scores[1],
                          "n_trees": int(teacher.leaves.shape[0])}))


def main():
    torch.set_num_threads(1)
    what, args = sys.argv[1], sys.argv[2:]
    if what == "teacher":
        _teacher_alone(args[0], [int(a) for a in args[1:]])
        return
    if what == "tasks":
        from benchmarks.bench_tasks import main as bench_tasks

        _fit.teacher_trees = _fixed_teacher
        out, rest = args[0], args[args.index("--") + 1:]
        bench_tasks(["--out", out, *rest])
        return
    from benchmarks.bench_merge_axis import measure_split
    from benchmarks.bench_shapes import SHAPES, _split

    label, params, seed = args[0], ast.literal_eval(args[1]), int(args[2])
    shape = SHAPES["digits"]
    X, y = shape.load("digits")
    record = measure_split(*_split(shape, X, y, seed, False), params, seed)
    print(json.dumps({"dataset": "digits", "variant": label, "params": repr(params),
                      "seed": seed, **record}))


if __name__ == "__main__":
    main()

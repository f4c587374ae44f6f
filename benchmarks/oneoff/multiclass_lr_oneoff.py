"""One-off script of issue 63 (multiclass within 1.0 point of HistGradientBoosting); not
maintained. Measured what made ``MULTICLASS_LEARNING_RATE_FACTOR`` (a fit of more than 2
classes trains at half of ``learning_rate``) the default, with the rule switched off
(``sktree_lmc.training._plan.MULTICLASS_LEARNING_RATE_FACTOR = 1.0``) so that a variant's
``learning_rate`` is the rate it trains at, as before the rule.

Usage, from the repository root::

    python benchmarks/oneoff/multiclass_lr_oneoff.py tasks OUT.jsonl -- BENCH_TASKS_ARGS...
    python benchmarks/oneoff/multiclass_lr_oneoff.py merge LABEL "PARAMS" SEED

``tasks``: ``python -m benchmarks.bench_tasks`` with the rule off and the teacher's trees
kept at ``256 * min(n_classes, 4)`` whatever the student's ``n_estimators`` (so that an
``n_estimators`` variant scales the student alone), e.g. ``tasks /tmp/hpc.jsonl --
--datasets hpc --models default "learning_rate=0.015" "n_estimators=512"``
(``tasks_multiclass_lr_screen.jsonl`` in ``docs/_static/benchmarks/tasks/``).

``merge``: ``merge_axis_digits_oneoff.py``'s measurement (two models on digits, their WM
merge and barrier; four models on IID quarters and their 4-way merge) with the settings
``PARAMS`` (a Python dict literal), e.g. ``merge lr0.015 "{'learning_rate': 0.015}" 0``;
prints one JSON line (``merge_axis_digits_multiclass_lr.jsonl``).
"""
import ast
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
import sktree_lmc.training._fit as _fit  # noqa: E402
import sktree_lmc.training._plan as _plan  # noqa: E402

_plan.MULTICLASS_LEARNING_RATE_FACTOR = 1.0  # the rule off: variants set the rate
_teacher_trees = _plan.teacher_trees


def _fixed_teacher(n_estimators, n_classes=0):
    return _teacher_trees(256 if n_classes > 2 else n_estimators, n_classes)


def main():
    torch.set_num_threads(1)
    what, args = sys.argv[1], sys.argv[2:]
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

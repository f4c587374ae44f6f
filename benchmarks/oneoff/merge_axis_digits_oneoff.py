"""One-off script of docs/benchmarks_archive.md, "Label smoothing on small data" (issue 42); not
maintained. ``bench_merge_axis``'s measurement (``measure_split``) on ``load_digits``
(``bench_shapes``' split of seed SEED, 0 by default): two models on all training rows
(``random_state`` 0, 1, plus 100 * SEED), their weight-matching merge and barrier; four models
on IID quarters (``random_state`` 10-13, plus 100 * SEED) and their 4-way merge.

Usage: python merge_axis_digits_oneoff.py VARIANT [SEED], VARIANT "ls_off"
(``label_smoothing=0.0``, the default before issue 42), "ls_auto" (``label_smoothing="auto"``,
the default since: 0.05 on these fits until "Label smoothing and calibration", 0.02 since),
"ls0.02" or "ls0.05" (those values). Prints one JSON line.
"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks.bench_merge_axis import measure_split  # noqa: E402
from benchmarks.bench_shapes import SHAPES, _split  # noqa: E402


def main():
    torch.set_num_threads(1)
    variant = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    params = {"ls_off": {"label_smoothing": 0.0}, "ls_auto": {"label_smoothing": "auto"},
              "ls0.02": {"label_smoothing": 0.02}, "ls0.05": {"label_smoothing": 0.05}}[variant]
    shape = SHAPES["digits"]
    X, y = shape.load("digits")
    record = measure_split(*_split(shape, X, y, seed, False), params, seed)
    print(json.dumps({"dataset": "digits", "variant": variant,
                      **({"seed": seed} if seed else {}), **record}))


if __name__ == "__main__":
    main()

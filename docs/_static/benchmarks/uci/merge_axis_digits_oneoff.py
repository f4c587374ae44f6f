"""One-off script of docs/benchmarks.md, "Label smoothing on small data" (issue 42); not
maintained. ``bench_merge_axis``'s measurement (``measure_split``) on ``load_digits``
(``bench_shapes``' split, seed 0): two models on all training rows (``random_state`` 0, 1),
their weight-matching merge and barrier; four models on IID quarters (``random_state``
10-13) and their 4-way merge.

Usage: python merge_axis_digits_oneoff.py VARIANT, VARIANT "default" or "ls_auto"
(``label_smoothing="auto"``). Prints one JSON line.
"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository's root
from benchmarks.bench_merge_axis import measure_split  # noqa: E402
from benchmarks.bench_shapes import SHAPES, _split  # noqa: E402


def main():
    torch.set_num_threads(1)
    variant = sys.argv[1]
    params = {"default": {}, "ls_auto": {"label_smoothing": "auto"}}[variant]
    shape = SHAPES["digits"]
    X, y = shape.load("digits")
    record = measure_split(*_split(shape, X, y, 0, False), params)
    print(json.dumps({"dataset": "digits", "variant": variant, **record}))


if __name__ == "__main__":
    main()

"""One-off: bench_merge_axis.measure with the split weights and biases at a multiple of the
learning rate (docs/benchmarks_archive.md, "Sharper splits"; issue 42). Not maintained.

Usage: python merge_axis_split_lr_oneoff.py DATASET FACTOR
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from sharpness_oneoff import patch_split_lr  # noqa: E402 (this script's folder)
from benchmarks.bench_merge_axis import measure  # noqa: E402

patch_split_lr(float(sys.argv[2]))
r = measure(sys.argv[1], "fs_auto")
r["variant"] = f"split_lr_x{sys.argv[2]}"
print(json.dumps(r), flush=True)

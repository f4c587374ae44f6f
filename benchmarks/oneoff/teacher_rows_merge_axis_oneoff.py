"""Issue 63: the merge axis of ``teacher_rows`` on two multiclass sets, before (0) and after
(the default ``"auto"``: 3x the training rows with more than two classes).

``bench_merge_axis.measure_split`` (two models on all training rows, their weight-matching
merge and barrier; four models on IID quarters and their 4-way merge against the sites' mean
and the full models) with ``PARAMS`` on:

* ``digits``: ``bench_shapes``' digits split of the seed (as ``merge_axis_digits_oneoff.py``
  and ``teacher_offrows_oneoff.py``);
* ``hpc``: ``bench_tasks``' hpc split of the seed (4 classes, two string columns).

One JSON line per (dataset, seed, variant) appended to ``--out``; a rerun skips those there.
Run from the repository root::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/oneoff/teacher_rows_merge_axis_oneoff.py \\
        --datasets digits hpc --seeds 0 1 2 \\
        --out docs/_static/benchmarks/tasks/teacher_rows_merge_axis.jsonl
"""
import argparse, json, sys, time, warnings
from pathlib import Path

import torch

torch.set_num_threads(1)
warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks import bench_tasks as bt
from benchmarks.bench_merge_axis import measure_split

VARIANTS = {"teacher_rows=0": {"teacher_rows": 0}, "default": {}}


def split(name, seed):
    if name == "digits":
        from benchmarks.bench_shapes import SHAPES, _split
        shape = SHAPES["digits"]
        return _split(shape, *shape.load("digits"), seed, False)
    ds = bt.DATASETS[name]
    return bt.split(ds, *ds.load(), seed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["digits", "hpc"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--out", type=Path,
                    default=Path("docs/_static/benchmarks/tasks/teacher_rows_merge_axis.jsonl"))
    a = ap.parse_args()
    done = set()
    if a.out.exists():
        done = {(r["dataset"], r["seed"], r["variant"])
                for r in map(json.loads, a.out.read_text().splitlines())}
    for seed in a.seeds:
        for name in a.datasets:
            for variant in a.variants:
                if (name, seed, variant) in done:
                    continue
                t0 = time.process_time()
                record = measure_split(*split(name, seed), VARIANTS[variant], seed)
                row = dict(dataset=name, seed=seed, variant=variant, **record,
                           cpu_s=round(time.process_time() - t0, 1))
                print(json.dumps(row), flush=True)
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

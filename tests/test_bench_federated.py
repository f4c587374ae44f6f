"""``benchmarks/bench_federated.py`` (issue 19's goal on dask input) runs end to end."""

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    """``benchmarks.bench_federated``, skipping when benchmarks/ is not in this checkout."""
    if not (ROOT / "benchmarks" / "bench_federated.py").is_file():
        pytest.skip("benchmarks/ is not part of this checkout")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks import bench_federated

    return bench_federated


def test_federated_smoke_runs_resumes_and_reports(tmp_path, capsys):
    pytest.importorskip("distributed")
    bench = _bench()
    from benchmarks.bench_accuracy import default_data_home

    if not (default_data_home() / "MagicTelescope.csv.gz").is_file():
        pytest.skip("the Tabular-Benchmark data (SKTREE_LMC_DATA) is not available")
    bench.main(["--smoke", "--out", str(tmp_path), "--ks", "2", "--splits", "iid",
                "--workers", "1"])
    with open(tmp_path / "federated_smoke.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["dataset"], r["split"], r["K"]) for r in rows] == [("MagicTelescope", "iid", "2")]
    row = rows[0]
    assert int(row["rounds"]) == 2 and int(row["bytes_rounds"]) > 0
    assert 40 <= float(row["refit"]) <= 100 and 40 <= float(row["full"]) <= 100
    out = capsys.readouterr().out
    assert "| iid | MagicTelescope | 2 | 1 |" in out and "Goal met in" in out


def test_federated_csv_names_the_teacher_weight_and_learning_rate():
    import argparse

    bench = _bench()
    args = argparse.Namespace(smoke=False, rounds=10, numeric_encoding=None, split_init=None,
                              shard_init=None, server_momentum=None, teacher_weight=0.75,
                              learning_rate=None, additive_bins="default")
    # the default's local epochs per round ("auto": 45 for 150 epochs and 10 rounds), teacher,
    # learning rate and additive bins name the file as if given
    bins = "16-64-256-1024-4096"
    default = ("federated_local_epochs_45_teacher_weight_0.75_learning_rate_0.03_"
               f"additive_bins_{bins}.csv")
    assert bench.csv_name(args) == default
    args.teacher_weight = None
    assert bench.csv_name(args) == default
    args.learning_rate = 0.03
    assert bench.csv_name(args) == default
    args.local_epochs = 45
    assert bench.csv_name(args) == default
    args.local_epochs = 30
    assert bench.csv_name(args) == default.replace("_45_", "_30_")
    # 15, what "auto" gave first: no suffix, the files of the runs before it
    args.local_epochs = 15
    assert bench.csv_name(args) == (
        f"federated_teacher_weight_0.75_learning_rate_0.03_additive_bins_{bins}.csv")
    # 1e-2, the default before 3e-2: no suffix, the files of the runs before it
    args.learning_rate = 0.01
    assert bench.csv_name(args) == f"federated_teacher_weight_0.75_additive_bins_{bins}.csv"
    args.teacher_weight = 0.0  # no teacher: no suffix, the file of the runs before it
    assert bench.csv_name(args) == f"federated_additive_bins_{bins}.csv"
    args.additive_bins = (16, 64, 256)  # the default before: the files of the runs before it
    assert bench.csv_name(args) == "federated_additive_bins_16-64-256.csv"
    args.additive_bins = "default"
    args.split_init, args.max_features = "boosting", bench.max_features_arg("none")
    assert bench.csv_name(args) == (
        f"federated_split_init_boosting_max_features_none_additive_bins_{bins}.csv")

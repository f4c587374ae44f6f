"""The LMC benchmark harness (benchmarks/lmc) in smoke mode, so that it cannot rot."""

import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from benchmarks.lmc.cli import main  # noqa: E402
from benchmarks.lmc.core import read_csv  # noqa: E402
from benchmarks.lmc.mlp import fit_mlp, mlp_proba, permute, weight_matching  # noqa: E402
from sktree_lmc import make_shards  # noqa: E402


def test_smoke_run_is_complete_and_resumable(tmp_path):
    out = tmp_path / "lmc"
    assert main(["--smoke", "--out", str(out)]) == 0
    rows = read_csv(out / "raw" / "magic_small" / "barriers.csv")
    experiments = {r["experiment"] for r in rows}
    assert experiments == {"lmc", "split", "mlp"}
    lmc = [r for r in rows if r["experiment"] == "lmc"]
    # 2 architectures x 1 pair x 2 methods x 3 invariances x 2 splits
    assert len(lmc) == 24
    for r in lmc:
        assert float(r["barrier"]) >= 0
        assert len(r["curve"].split(";")) == 5
    # naive interpolation is shared by WM and AM
    naive = {(r["arch"], r["split"], r["method"]): r["barrier"] for r in lmc
             if r["invariances"] == "none"}
    for (arch, split, _), value in naive.items():
        assert naive[(arch, split, "wm")] == naive[(arch, split, "am")] == value
    models = read_csv(out / "raw" / "magic_small" / "models.csv")
    assert {m["role"] for m in models} >= {"lr_selection", "pair", "split_a", "split_b"}
    report = (out / "report" / "report.md").read_text()
    for title in ("paper Table 12", "paper Table 3", "paper Table 4", "paper Table 8",
                  "Split-data", "MLP baseline", "Timings"):
        assert title in report
    assert list((out / "report").glob("*.png"))
    # a rerun reuses the cached models and skips the finished configurations
    assert main(["--smoke", "--out", str(out), "--no-report"]) == 0
    assert len(read_csv(out / "raw" / "magic_small" / "barriers.csv")) == len(rows)
    assert len(read_csv(out / "raw" / "magic_small" / "models.csv")) == len(models)


def test_split_data_halves_are_disjoint_and_skewed():
    """The halves of the split-data experiment (make_shards, as run_split calls it)."""
    y = np.repeat([0, 1], [100, 60])
    a, b = make_shards(y, 2, "class_skewed", skew=0.8, random_state=0)
    assert len(np.intersect1d(a, b)) == 0 and len(a) + len(b) == len(y)
    assert (y[a] == 0).sum() == 80 and (y[a] == 1).sum() == 12
    assert (y[b] == 0).sum() == 20 and (y[b] == 1).sum() == 48
    a2, _ = make_shards(y, 2, "class_skewed", skew=0.8, random_state=0)
    np.testing.assert_array_equal(a, a2)


def test_mlp_weight_matching_recovers_a_permuted_copy():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 5).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = fit_mlp(X, y, width=16, depth=2, lr=1e-2, epochs=3, seed=0)
    perms = [rng.permutation(16), rng.permutation(16)]
    shuffled = permute(model["layers"], perms)
    np.testing.assert_allclose(mlp_proba({**model, "layers": shuffled}, X), mlp_proba(model, X),
                               rtol=1e-5, atol=1e-6)
    found = weight_matching(model["layers"], shuffled)
    for (Wa, ba), (Wb, bb) in zip(model["layers"], permute(shuffled, found)):
        np.testing.assert_array_equal(Wa, Wb)
        np.testing.assert_array_equal(ba, bb)

"""Smoke test of the README's main job (the ``sktree-lmc`` command)."""

import re

from sktree_lmc.__main__ import main


def test_main_job_runs_on_bundled_data(capsys):
    assert main(["--n-estimators", "8", "--max-epochs", "3", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "dataset magic_small: 1500 train / 1500 test rows" in out
    rows = re.findall(r"^\s+(none|perm|all)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["none", "perm", "all"]
    for _, acc, barrier, _ in rows:
        assert 0.0 <= float(acc) <= 100.0
        assert float(barrier) >= 0.0

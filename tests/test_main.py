"""Smoke test of the README's main job (the ``sktree-lmc`` command)."""

import re

import pytest

from sktree_lmc.__main__ import main


@pytest.mark.parametrize("protocol", ["default", "paper"])
def test_main_job_runs_on_bundled_data(protocol, capsys):
    argv = ["--n-estimators", "8", "--max-epochs", "3", "--device", "cpu", "--protocol", protocol]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dataset magic_small: 1500 train / 1500 test rows" in out
    assert f"({'raw' if protocol == 'default' else 'paper'} features)" in out
    assert ("encoding=none" in out) == (protocol == "paper")
    rows = re.findall(r"^\s+(none|perm|all)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["none", "perm", "all"]
    for _, acc, barrier, _ in rows:
        assert 0.0 <= float(acc) <= 100.0
        assert float(barrier) >= 0.0

"""Shared pytest set-up for sktree_lmc.

- Points ``SKTREE_LMC_DATA`` at ``<repo root>/../shared/data/tabular_benchmark`` when that folder
  exists and the variable is not set already (CI lays ``shared/`` beside its clone of the repo).
- Skips tests marked ``gpu`` when PyTorch sees no CUDA device.
"""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "tabular_benchmark"

if not os.environ.get("SKTREE_LMC_DATA") and SHARED_DATA.is_dir():
    os.environ["SKTREE_LMC_DATA"] = str(SHARED_DATA)


@pytest.fixture
def tabular_data_home():
    """The folder of the Tabular-Benchmark files; skips the test when there is none."""
    folder = os.environ.get("SKTREE_LMC_DATA")
    if not folder or not Path(folder).is_dir():
        pytest.skip(
            "Tabular-Benchmark data not found: set SKTREE_LMC_DATA or put shared/ beside the repo "
            f"(looked for {SHARED_DATA})"
        )
    return Path(folder)


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
        for item in gpu_items:
            item.add_marker(skip)

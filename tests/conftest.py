"""Shared pytest set-up for sktree_lmc.

- Points ``SKTREE_LMC_DATA`` at ``<repo root>/../shared/data/tabular_benchmark`` when that folder
  exists and the variable is not set already (CI lays ``shared/`` beside its clone of the repo).
- Skips tests marked ``gpu`` when PyTorch sees no CUDA device.
- Runs torch on one intra-op thread: the tests' tensors are small, and on the 2-core CI machine
  extra threads (and GridSearchCV/joblib workers each starting their own) only oversubscribe.
  Worker processes inherit it through ``OMP_NUM_THREADS``.
"""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "tabular_benchmark"

if not os.environ.get("SKTREE_LMC_DATA") and SHARED_DATA.is_dir():
    os.environ["SKTREE_LMC_DATA"] = str(SHARED_DATA)

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


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

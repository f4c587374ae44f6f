"""Shared pytest set-up for sktree_lmc.

- Points ``SKTREE_LMC_DATA`` at ``<repo root>/../shared/data/tabular_benchmark`` when that folder
  exists and the variable is not set already (CI lays ``shared/`` beside its clone of the repo).
- Skips tests marked ``gpu`` when PyTorch sees no CUDA device.
- Runs torch on one intra-op thread: the tests' tensors are small, and on the 2-core CI machine
  extra threads (and GridSearchCV/joblib workers each starting their own) only oversubscribe.
  Worker processes inherit it through ``OMP_NUM_THREADS``.
- Hypothesis runs derandomized under ``CI=true`` (profile ``"ci"``: every run draws the same
  examples, so a green CI run means the same thing twice; the examples that once failed are kept
  as explicit ``@example``s); elsewhere the default profile searches anew each run.
- ``FAST``: the settings of the tiny, quickly fitted models of the tests (``from conftest import
  FAST``; a module that needs better-trained models overrides what it must, visibly), and shared
  fitted models, fitted once per session: ``clf_data`` (two 3-class classifiers and their data)
  and ``clf_pair`` / ``magic`` (two binary classifiers on MagicTelescope rows). Tests must not
  modify these models (use ``copy.deepcopy`` or ``clone`` first).
"""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "tabular_benchmark"

if not os.environ.get("SKTREE_LMC_DATA") and SHARED_DATA.is_dir():
    os.environ["SKTREE_LMC_DATA"] = str(SHARED_DATA)

os.environ.setdefault("OMP_NUM_THREADS", "1")
# scikit-learn's check_array_api_input (numpy namespace) runs only with this set; the
# estimators take NumPy input, which it checks.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() == "true":
    _hypothesis_settings.load_profile("ci")

# Imported after the variables above: torch reads OMP_NUM_THREADS and scipy SCIPY_ARRAY_API
# when first imported.
from sktree_lmc.datasets import PAPER_TRAINING  # noqa: E402

#: Hyperparameters of the tiny models the tests fit: fast, CPU, a few epochs.
FAST = dict(n_estimators=8, depth=2, max_epochs=3, batch_size=64, device="cpu")

#: The training of the paper (and of versions before the input encoding and the
#: recipe): raw inputs, constant learning rate, the last weights, every feature; without
#: ``early_stopping``, which the tests set themselves.
PAPER_RECIPE = {k: v for k, v in PAPER_TRAINING.items() if k != "early_stopping"}


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


@pytest.fixture(scope="session")
def clf_data():
    """Two FAST classifiers (seeds 1 and 2) fitted on 200 rows of a 3-class problem:
    ``(a, b, X, y)``."""
    from sklearn.datasets import make_classification

    from sktree_lmc import SoftTreeEnsembleClassifier

    X, y = make_classification(n_samples=200, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    a, b = (SoftTreeEnsembleClassifier(random_state=s, **FAST).fit(X, y) for s in (1, 2))
    return a, b, X, y


@pytest.fixture(scope="session")
def magic():
    """600 standardized rows of the bundled MagicTelescope data (both classes): ``(X, y)``."""
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    from sktree_lmc.datasets import load_magic_small

    X, y = load_magic_small(return_X_y=True)
    idx = np.random.RandomState(0).choice(len(y), 600, replace=False)  # rows are class-sorted
    return StandardScaler().fit_transform(X[idx]), y[idx]


@pytest.fixture(scope="session")
def clf_pair(magic):
    """Two FAST binary classifiers (seeds 1 and 2) fitted on ``magic``."""
    from sktree_lmc import SoftTreeEnsembleClassifier

    X, y = magic
    return tuple(SoftTreeEnsembleClassifier(random_state=s, **FAST).fit(X, y) for s in (1, 2))


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
        for item in gpu_items:
            item.add_marker(skip)

"""Datasets for sktree_lmc: the Tabular-Benchmark data, a bundled small dataset, the paper's split.

- :func:`load_magic_small` -- 3,000 rows of MagicTelescope shipped with the package.
- :func:`load_tabular_benchmark` -- the seven Tabular-Benchmark datasets of
  :data:`TABULAR_BENCHMARK` from a local folder (argument ``data_home`` or the environment
  variable ``SKTREE_LMC_DATA``).
- :func:`fetch_tabular_benchmark_openml` -- the same datasets from OpenML (network needed).
- :func:`paper_split`, :func:`make_paper_preprocessor` and :data:`PAPER_TRAINING` -- the paper's
  protocol: 10,000 train and 10,000 test rows (halves for smaller datasets), normal quantile
  transform + standardization, and the estimator settings of its training.
"""

from ._base import (
    DATA_ENV_VAR,
    PAPER_TRAINING,
    TABULAR_BENCHMARK,
    fetch_tabular_benchmark_openml,
    get_data_home,
    load_magic_small,
    load_tabular_benchmark,
    make_paper_preprocessor,
    paper_split,
)

__all__ = [
    "DATA_ENV_VAR",
    "PAPER_TRAINING",
    "TABULAR_BENCHMARK",
    "fetch_tabular_benchmark_openml",
    "get_data_home",
    "load_magic_small",
    "load_tabular_benchmark",
    "make_paper_preprocessor",
    "paper_split",
]

"""Helpers shared by several benchmark scripts: the model makers, the Tabular-Benchmark data as
DataFrames, CSV rows appended and read back, a synthetic classification problem, and the
share of a gap that a merge recovers.

The scripts import these names from here, not each other's private helpers.
"""

import csv

# -- model makers: ``make(seed)`` returns an unfitted estimator --------------------------------


def soft_classifier(**params):
    """A maker of ``SoftTreeEnsembleClassifier(random_state=seed, device="cpu", **params)``."""
    def make(seed):
        from sktree_lmc import SoftTreeEnsembleClassifier

        return SoftTreeEnsembleClassifier(**{"random_state": seed, "device": "cpu", **params})
    return make


def soft_regressor(**params):
    """A maker of ``SoftTreeEnsembleRegressor(random_state=seed, device="cpu", **params)``."""
    def make(seed):
        from sktree_lmc import SoftTreeEnsembleRegressor

        return SoftTreeEnsembleRegressor(**{"random_state": seed, "device": "cpu", **params})
    return make


def hgb(seed):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(random_state=seed)


def hgb_cat(seed):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)


def hgb_reg(seed):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(random_state=seed)


def mlp(seed):
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), MLPClassifier(random_state=seed, early_stopping=True))


# -- data --------------------------------------------------------------------------------------
_FRAMES = {}


#: Datasets of the robustness set (``../shared/data/robustness`` beside the repository, or
#: ``$SKTREE_LMC_ROBUSTNESS_DATA``): data on which a part of the package was seen to fail, in
#: the Tabular-Benchmark's format (numeric features, last column ``target``).
ROBUSTNESS = ("credit",)


def robustness_home():
    """The folder of the robustness datasets."""
    import os
    from pathlib import Path

    folder = os.environ.get("SKTREE_LMC_ROBUSTNESS_DATA")
    if folder:
        return Path(folder)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "robustness"


def frame(name):
    """The Tabular-Benchmark dataset ``name`` as a DataFrame (features and ``target``), loaded
    once per process."""
    if name in ROBUSTNESS and name not in _FRAMES:
        import pandas as pd

        _FRAMES[name] = pd.read_csv(robustness_home() / f"{name}.csv.gz")
    if name not in _FRAMES:
        from sktree_lmc.datasets import load_tabular_benchmark

        from .lmc.core import default_data_home

        _FRAMES[name] = load_tabular_benchmark(name, data_home=default_data_home(),
                                               as_frame=True).frame
    return _FRAMES[name]


def synthetic(n_features, n_samples=20_000):
    """``make_classification`` rows of ``n_features`` columns (15 informative, up to 10
    redundant), seed 0."""
    from sklearn.datasets import make_classification

    return make_classification(n_samples, n_features=n_features, n_informative=15,
                               n_redundant=min(10, n_features - 15), random_state=0)


# -- CSV rows ----------------------------------------------------------------------------------
def append_csv(path, fields, rows):
    """Append the dicts ``rows`` to the CSV ``path`` (columns ``fields``, other keys ignored),
    writing the header when the file is new."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def read_csv(path):
    """The rows of the CSV ``path`` as dicts; none when there is no file."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- merges of models trained apart ------------------------------------------------------------
def recovery(merged, site_mean, full):
    """The share of the gap from the sites' mean accuracy to the model fitted on all rows
    that the merged model recovers; empty when that gap is under half a point."""
    gap = full - site_mean
    return "" if gap < 0.5 else round((merged - site_mean) / gap, 4)

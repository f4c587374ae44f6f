"""One-off script of docs/benchmarks_archive.md, "Sharper splits" (issue 42): regressors binned into the classes_5 classes. Not maintained."""
import sys, json, time, warnings
import numpy as np, torch, pandas as pd
from threadpoolctl import threadpool_limits
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
from benchmarks.bench_shapes import _frame, CLASS_TARGETS
from benchmarks.bench_accuracy import split
from sktree_lmc import SoftTreeEnsembleRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
torch.set_num_threads(1)
name = sys.argv[1]; params = json.loads(sys.argv[2]); seed = 0
for d in CLASS_TARGETS:
    dataset, column = d.split("/")
    frame = _frame(dataset)
    cut, edges = pd.qcut(frame[column], 5, labels=False, retbins=True)
    X = frame.drop(columns=[column, "target"]).to_numpy(dtype=np.float64)
    yc = cut.to_numpy(); yr = frame[column].to_numpy(dtype=np.float64)
    idx = np.arange(len(yc))
    itr, ite, _, _ = split(idx[:, None], yc, 10000, 10000, seed, True)
    itr, ite = itr[:, 0], ite[:, 0]
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = HistGradientBoostingRegressor(random_state=seed, **params) if name.startswith("hgb") else SoftTreeEnsembleRegressor(random_state=seed, device="cpu", **params)
        t = time.process_time(); est.fit(X[itr], yr[itr]); t = time.process_time() - t
    def acc(i):
        p = np.clip(np.searchsorted(edges[1:-1], est.predict(X[i]), side="right"), 0, 4)
        return (p == yc[i]).mean() * 100
    from sklearn.metrics import r2_score
    print(f"{name:10s} {d:28s} r2 {r2_score(yr[ite], est.predict(X[ite])):.4f} test {acc(ite):6.2f} train {acc(itr):6.2f} ep {getattr(est,'n_iter_','')} t {t:5.1f}", flush=True)

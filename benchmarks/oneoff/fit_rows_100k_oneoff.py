"""The default fit on 100,000 rows of make_classification(n_features=20, n_informative=10)
beside HistGradientBoostingClassifier: fit CPU seconds with one thread (threadpoolctl), their
ratio, epochs and test accuracy on 10,000 more rows. Backs docs/benchmarks.md, "The fused
CPU kernel" (the training step without autograd).

    python benchmarks/oneoff/fit_rows_100k_oneoff.py
"""
import time, torch, json
torch.set_num_threads(1)
from threadpoolctl import threadpool_limits
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sktree_lmc import SoftTreeEnsembleClassifier
X, y = make_classification(110_000, n_features=20, n_informative=10, random_state=0)
Xtr, ytr, Xte, yte = X[:100_000], y[:100_000], X[100_000:], y[100_000:]
SoftTreeEnsembleClassifier(max_epochs=1, random_state=0).fit(Xtr[:500], ytr[:500])
with threadpool_limits(1):
    t = time.process_time(); h = HistGradientBoostingClassifier(random_state=0).fit(Xtr, ytr); th = time.process_time() - t
    t = time.process_time(); m = SoftTreeEnsembleClassifier(random_state=0).fit(Xtr, ytr); tm = time.process_time() - t
print(json.dumps(dict(hgb_s=round(th, 2), default_s=round(tm, 2), ratio=round(tm / th, 1), epochs=int(m.n_iter_), hgb_acc=round(100 * h.score(Xte, yte), 2), acc=round(100 * m.score(Xte, yte), 2))))

"""The gradient-boosted teacher alone on a multiclass set of ``benchmarks.bench_tasks``: its
training and test accuracy by number of trees, depth and boosting learning rate (validation
prefix on 10 % of the training rows), on the default encoder's features. Behind the teacher rule
of issue 63 (``teacher_trees``)::

    python benchmarks/oneoff/teacher_capacity_multiclass_oneoff.py hpc 0
"""
import sys, time, warnings
import numpy as np, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
from benchmarks import bench_tasks as bt
from sktree_lmc import SoftTreeEnsembleClassifier
from sktree_lmc.training._boosting import grow_oblivious_trees, oblivious_output
from sktree_lmc.training._losses import as_loss
name = sys.argv[1]; seed = int(sys.argv[2])
ds = bt.DATASETS[name]
X, y = ds.load()
Xtr, Xte, ytr, yte = bt.split(ds, X, y, seed)
est = SoftTreeEnsembleClassifier(max_epochs=1, teacher_weight=0.75, random_state=seed, device="cpu").fit(Xtr, ytr)
loss = est.objective_.loss
cls = est.classes_
Etr = np.asarray(est.encoder_.transform(Xtr), dtype=np.float64); Ete = np.asarray(est.encoder_.transform(Xte), dtype=np.float64)
ytr_i = np.searchsorted(cls, ytr).astype(np.int64); yte_i = np.searchsorted(cls, yte)
print(type(loss), Etr.shape)
rng = np.random.default_rng(seed); perm = rng.permutation(len(ytr)); nv = len(ytr)//10
vi, ti = perm[:nv], perm[nv:]
K=len(cls)
for n_trees, depth, val, lr in [(256,4,True,0.1),(1024,4,True,0.1),(1024,4,False,0.1),(256,4,True,0.3),(1024,6,True,0.1)]:
    t=time.time()
    trees = grow_oblivious_trees(Etr[ti], ytr_i[ti], np.ones(len(ti)), loss=loss, n_trees=n_trees, depth=depth,
        n_outputs=len(cls), learning_rate=lr, generator=torch.Generator().manual_seed(0),
        validation=(Etr[vi], ytr_i[vi], np.ones(len(vi))) if val else None)
    raw_tr = oblivious_output(Etr, *trees); raw_te = oblivious_output(Ete, *trees)
    print(n_trees, depth, lr, "kept", int((trees[1][:,0]>=0).sum()), "train", round(100*np.mean(raw_tr.argmax(1)==ytr_i),2), "test", round(100*np.mean(raw_te.argmax(1)==yte_i),2), round(time.time()-t,1),"s", flush=True)

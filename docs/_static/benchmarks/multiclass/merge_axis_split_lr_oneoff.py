"""One-off: bench_merge_axis.measure with the split weights and biases at a multiple of the learning rate (docs/benchmarks.md, "Sharper splits"; issue 42). Not maintained."""
import sys, os, json
sys.path.insert(0, "/work/main")
import sktree_lmc._training as _t, sktree_lmc._estimators as _e
from sktree_lmc._adam import Adam
fac = float(sys.argv[2])
def make_optimizer(module, learning_rate):
    groups = [{"params": [module.split_weight, module.split_bias], "lr": fac * learning_rate},
              {"params": [module.leaf_value]}]
    if module.additive is not None:
        groups.append({"params": [module.additive], "lr": _t.ADDITIVE_LR_FACTOR * learning_rate})
    return Adam(groups, lr=learning_rate)
_t.make_optimizer = make_optimizer; _e.make_optimizer = make_optimizer
from benchmarks.bench_merge_axis import measure
r = measure(sys.argv[1], "fs_auto"); r["variant"] = f"split_lr_x{sys.argv[2]}"
print(json.dumps(r), flush=True)

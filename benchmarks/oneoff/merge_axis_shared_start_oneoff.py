"""One-off: bench_merge_axis.measure with a start shared by every model whatever its
random_state (the module's draw and the trees' column draw from fixed generators)."""
import sys, json
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root
import torch
import sktree_lmc._estimators as _e
B = _e._BaseSoftTreeEnsemble
_init, _mask = B._init_module, B._feature_mask
B._init_module = lambda self, arch, n_outputs, generator, device, warm=False: _init(
    self, arch, n_outputs, torch.Generator().manual_seed(777), device, warm)
B._feature_mask = lambda self, module, generator, device, warm, gains=None: _mask(
    self, module, torch.Generator().manual_seed(778), device, warm, gains)
from benchmarks.bench_merge_axis import measure
r = measure(sys.argv[1], sys.argv[2]); r["variant"] = sys.argv[2] + "_shared_start"
print(json.dumps(r), flush=True)

"""The fused CPU training kernel (``sktree_lmc.model._kernel``, numba) computes the
torch path's outputs and gradients, on every architecture."""

import numpy as np
import pytest
import torch

from sktree_lmc import SoftTreeEnsembleModule, get_architecture
from sktree_lmc.model import _kernel

numba = pytest.importorskip("numba")

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]
#: float32 rounding: the kernel sums in another order and computes its
#: sigmoids from one exponential of its own, relative error ~2e-7 each.
RTOL = 2e-5


def _module(arch, depth, n_trees, n_features, n_outputs, seed, scale=3.0):
    gen = torch.Generator().manual_seed(seed)
    module = SoftTreeEnsembleModule(get_architecture(arch, depth), n_trees, n_features,
                                    n_outputs, generator=gen)
    with torch.no_grad():
        module.split_weight.mul_(scale)
        module.split_bias.mul_(scale)
        module.leaf_value.uniform_(-1, 1, generator=gen)
        # column masks: each tree weighs a random half of the features (zeros)
        mask = torch.rand(n_trees, 1, n_features, generator=gen) < 0.5
        module.split_weight.mul_(mask)
    return module


def _outputs_and_grads(module, X, grad_out, engine, n_members=1, codes=None):
    for p in module.parameters():
        p.grad = None
    with _kernel.training_engine(engine):
        out = (module(X, codes) if n_members == 1
               else module.member_outputs(X, n_members, codes=codes))
    out.backward(grad_out)
    grads = [p.grad.clone() for p in (module.split_weight, module.split_bias, module.leaf_value)]
    return out.detach(), grads


def _close(actual, expected):
    scale = max(1.0, float(expected.abs().max()))
    assert float((actual - expected).abs().max()) <= RTOL * scale


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("depth", [1, 3])
def test_outputs_and_gradients_match_the_torch_path(arch, depth):
    # 70 rows: a block of 64 and a padded one; 11 trees: chunks of 1 and 2 trees
    # two outputs (the fast path of binary classification) at depth 1, three at 3
    C = 2 if depth == 1 else 3
    module = _module(arch, depth, n_trees=11, n_features=5, n_outputs=C, seed=depth)
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(70, 5, generator=gen)
    grad_out = torch.randn(70, C, generator=gen)
    out_t, grads_t = _outputs_and_grads(module, X, grad_out, "torch")
    out_k, grads_k = _outputs_and_grads(module, X, grad_out, "numba")
    assert out_k.shape == out_t.shape and out_k.dtype == torch.float32
    _close(out_k, out_t)
    for g_k, g_t in zip(grads_k, grads_t):
        _close(g_k, g_t)
    # the masked weights' gradients are computed too (the mask's hook zeroes them)
    assert float(grads_k[0][module.split_weight == 0].abs().max()) > 0


@pytest.mark.parametrize("depth", range(1, 7))
@pytest.mark.parametrize("n_outputs", [1, 2, 3])
def test_the_oblivious_kernels_match_the_torch_path(depth, n_outputs):
    # oblivious trees of depths 1 to MAX_DEPTH take the written-out kernels of
    # _oblivious_numba (the leaf values contracted one level at a time); two outputs
    # have their own backward loop, other counts another
    from sktree_lmc.model._oblivious_codegen import MAX_DEPTH

    assert MAX_DEPTH == 6
    module = _module("oblivious", depth, n_trees=11, n_features=5, n_outputs=n_outputs,
                     seed=10 + depth)
    assert _kernel._oblivious_depth(module._steps, depth) == depth
    gen = torch.Generator().manual_seed(depth)
    X = torch.randn(150, 5, generator=gen)  # a block of 128 and a padded one
    grad_out = torch.randn(150, n_outputs, generator=gen)
    out_t, grads_t = _outputs_and_grads(module, X, grad_out, "torch")
    out_k, grads_k = _outputs_and_grads(module, X, grad_out, "numba")
    _close(out_k, out_t)
    for g_k, g_t in zip(grads_k, grads_t):
        _close(g_k, g_t)


def test_only_oblivious_schedules_take_the_oblivious_kernels():
    from sktree_lmc.model._oblivious_codegen import MAX_DEPTH

    for arch in ARCHS:
        for depth in (1, 2, 4, MAX_DEPTH + 1):
            module = _module(arch, depth, n_trees=1, n_features=2, n_outputs=1, seed=0)
            found = _kernel._oblivious_depth(module._steps, module.split_weight.shape[1])
            # depth 1: one split, the same schedule, but for the modified decision list's
            # fixed-zero leaf
            one_split = depth == 1 and arch != "decision_list_modified"
            expected = depth if (arch == "oblivious" or one_split) and depth <= MAX_DEPTH else None
            assert found == expected, (arch, depth)


def test_the_oblivious_kernels_are_the_generators_output():
    # _oblivious_numba is generated: edit _oblivious_codegen and rerun it instead
    from pathlib import Path

    from sktree_lmc.model import _oblivious_codegen

    path = Path(_oblivious_codegen.__file__).with_name("_oblivious_numba.py")
    assert path.read_text() == _oblivious_codegen.module_source(), (
        "run python -m sktree_lmc.model._oblivious_codegen")


def test_sharp_splits_and_the_additive_columns():
    # logits up to hundreds (sigmoids at the clamp, leaf probabilities flushed
    # below 1e-25), and code columns of an additive table beside the features
    module = _module("oblivious", 4, n_trees=9, n_features=4, n_outputs=2, seed=3, scale=60.0)
    gen = torch.Generator().manual_seed(2)
    module.additive = torch.nn.Parameter(torch.randn(3, 2, generator=gen))
    X = torch.randn(33, 4, generator=gen)
    codes = torch.randint(0, 3, (33, 2), generator=gen, dtype=torch.int32)
    grad_out = torch.randn(33, 2, generator=gen)
    out_t, grads_t = _outputs_and_grads(module, X, grad_out, "torch", codes=codes)
    out_k, grads_k = _outputs_and_grads(module, X, grad_out, "numba", codes=codes)
    _close(out_k, out_t)
    for g_k, g_t in zip(grads_k, grads_t):
        _close(g_k, g_t)


@pytest.mark.parametrize("arch", ["non_oblivious", "oblivious"])
def test_member_outputs_match_the_torch_path(arch):
    module = _module(arch, 2, n_trees=6, n_features=3, n_outputs=2, seed=4)
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(20, 3, generator=gen)
    grad_out = torch.randn(20, 3, 2, generator=gen)
    out_t, grads_t = _outputs_and_grads(module, X, grad_out, "torch", n_members=3)
    out_k, grads_k = _outputs_and_grads(module, X, grad_out, "numba", n_members=3)
    _close(out_k, out_t)
    for g_k, g_t in zip(grads_k, grads_t):
        _close(g_k, g_t)


def test_the_torch_engine_and_outside_training_keep_the_torch_path(monkeypatch):
    calls = []
    monkeypatch.setattr(_kernel.FusedEnsemble, "apply",
                        lambda *a: calls.append(1) or torch.zeros(()))
    module = _module("oblivious", 2, n_trees=3, n_features=2, n_outputs=1, seed=0)
    X = torch.randn(4, 2)
    module(X)  # not in a training loop
    with _kernel.training_engine("torch"):
        module(X)
    assert calls == []
    with _kernel.training_engine("numba"):
        module(X)
    assert calls == [1]


def test_engine_names_are_checked_and_numba_is_required(monkeypatch):
    with pytest.raises(ValueError, match="engine must be one of"):
        _kernel.resolve_engine("fast")
    monkeypatch.setattr(_kernel, "fused_available", lambda: False)
    assert _kernel.resolve_engine("auto") == "torch"
    with pytest.raises(ImportError, match="numba"):
        with _kernel.training_engine("numba"):
            pass


def test_the_row_block_is_the_compiled_one():
    from sktree_lmc.model import _fused_numba

    assert _kernel.ROW_BLOCK == _fused_numba.RB


def test_results_do_not_depend_on_the_number_of_threads():
    # the trees are cut into the same chunks whatever the threads, so the bits agree
    module = _module("non_oblivious", 3, n_trees=16, n_features=4, n_outputs=2, seed=5)
    gen = torch.Generator().manual_seed(4)
    X = torch.randn(130, 4, generator=gen)
    grad_out = torch.randn(130, 2, generator=gen)
    previous = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(_outputs_and_grads(module, X, grad_out, "numba"))
    finally:
        torch.set_num_threads(previous)
    (out_1, grads_1), (out_2, grads_2) = results
    assert torch.equal(out_1, out_2)
    for g_1, g_2 in zip(grads_1, grads_2):
        assert torch.equal(g_1, g_2)


def test_the_gradient_mask_leaves_the_masked_weights_at_zero():
    # train() hands the feature mask to the kernel, which then skips the gradients the
    # mask zeroes anyway; the others are the torch path's
    module = _module("oblivious", 3, n_trees=7, n_features=5, n_outputs=2, seed=6)
    mask = (module.split_weight[:, 0, :] != 0).float()  # (M, F): the features each tree keeps
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(40, 5, generator=gen)
    grad_out = torch.randn(40, 2, generator=gen)
    _, grads_t = _outputs_and_grads(module, X, grad_out, "torch")
    for p in module.parameters():
        p.grad = None
    with _kernel.engine("numba"), _kernel.training_loop(grad_mask=mask):
        module(X).backward(grad_out)
    g_w = module.split_weight.grad
    assert torch.equal(g_w * mask[:, None, :], g_w)  # masked entries exactly 0
    assert float(g_w.abs().max()) > 0
    _close(g_w, grads_t[0] * mask[:, None, :])
    _close(module.split_bias.grad, grads_t[1])
    _close(module.leaf_value.grad, grads_t[2])


def test_training_gives_torch_threads_to_the_kernel_and_restores_them():
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with _kernel.engine("numba"), _kernel.training_loop():  # a fit's training loop
            assert torch.get_num_threads() == 1  # torch's small operations: one thread
            assert _kernel._n_threads() == 2  # the kernel: the two
        assert torch.get_num_threads() == 2
        with _kernel.engine("torch"), _kernel.training_loop():
            assert torch.get_num_threads() == 2  # the torch path keeps them
        with _kernel.training_engine("numba"):  # the user's block: the caller's threads
            assert torch.get_num_threads() == 2 and _kernel._n_threads() == 2
    finally:
        torch.set_num_threads(previous)


def test_a_fit_gives_the_same_parameters_with_one_thread_or_two():
    from sklearn.datasets import make_classification

    from sktree_lmc import SoftTreeEnsembleClassifier

    X, y = make_classification(n_samples=300, n_features=6, random_state=0)
    fits = []
    with _kernel.engine("numba"):
        for threads in (1, 2):
            model = SoftTreeEnsembleClassifier(n_estimators=16, max_epochs=2, n_threads=threads,
                                               random_state=0).fit(X, y)
            fits.append(model.tree_params_)
    for name in ("split_weight", "split_bias", "leaf_value"):
        assert np.array_equal(getattr(fits[0], name), getattr(fits[1], name))


@pytest.mark.parametrize("scaled", [False, True])
def test_the_compiled_additive_term_is_torchs(scaled):
    """The numba engine's additive term (``FusedAdditive``: a gather of the table's rows
    and a scatter-add of their gradient) gives torch's output and table gradient, with
    the training's ``additive_scale`` and repeated and negative codes (the last rows, as
    torch's indexing)."""
    module = _module("oblivious", 2, n_trees=3, n_features=2, n_outputs=2, seed=5)
    gen = torch.Generator().manual_seed(6)
    module.additive = torch.nn.Parameter(torch.randn(7, 2, generator=gen))
    if scaled:
        module.additive_scale = torch.rand(7, 1, generator=gen) + 0.5
    torch.randn(40, 2, generator=gen)  # drawn, so that the codes below stay the same draws
    codes = torch.randint(-7, 7, (40, 3), generator=gen, dtype=torch.int32)
    codes[:5] = 2  # one row gathered many times
    grad_out = torch.randn(40, 2, generator=gen)
    results = {}
    for engine in ("torch", "numba"):
        module.additive.grad = None
        with _kernel.training_engine(engine):
            out = module.additive_term(codes)
        out.backward(grad_out)
        results[engine] = (out.detach(), module.additive.grad.clone())
    calls = []
    with _kernel.training_engine("numba"):
        original = _kernel.FusedAdditive.apply
        try:
            _kernel.FusedAdditive.apply = lambda *a: calls.append(1) or original(*a)
            module.additive_term(codes)
        finally:
            _kernel.FusedAdditive.apply = original
    assert calls  # the numba engine took the compiled path
    for k, t in zip(results["numba"], results["torch"]):
        _close(k, t)


@pytest.mark.parametrize("arch, depth", [("oblivious", 3), ("non_oblivious", 2)])
def test_the_row_drivers_give_the_whole_passes_bits(arch, depth):
    """The passes a training step runs per group of blocks of rows
    (``row_drivers``): partial outputs whose sum in chunk order is the
    forward pass's output, and per-block gradients whose sum in block order
    is the backward pass's (the same sums in the same order; equal bit for
    bit where both come from code compiled alike, but numba's code loaded from
    its disk cache can round differently from code compiled in the process,
    so compared to float32 rounding here), bit for bit the same whatever
    groups the blocks run in."""
    module = _module(arch, depth, n_trees=11, n_features=5, n_outputs=3, seed=8)
    W, bias, pi = (p.detach().numpy() for p in
                   (module.split_weight, module.split_bias, module.leaf_value))
    steps = module._steps
    gen = np.random.default_rng(0)
    Xb = _kernel.blocked(gen.standard_normal((300, 5)).astype(np.float32))  # 3 blocks
    Gb = _kernel.blocked(gen.standard_normal((300, 3)).astype(np.float32))
    out, S = _kernel.fused_forward_arrays(Xb, W, bias, pi, steps, keep=True)
    grads = _kernel.fused_backward_arrays(Xb, W, bias, pi, Gb, steps, S=S)
    forward, backward = _kernel.row_drivers(steps, W.shape)
    n_chunks = len(_kernel._chunk_bounds(W.shape[0])) - 1
    fmask = np.ones((W.shape[0], W.shape[2]), dtype=np.uint8)
    totals = []
    for groups in ([0, 3], [0, 1, 3], [0, 2, 3]):
        S_rows = np.empty_like(S)
        blocks = [np.full((3,) + p.shape, np.nan, dtype=np.float32) for p in (W, bias, pi)]
        for lo, hi in zip(groups[:-1], groups[1:]):
            parts = np.zeros((n_chunks, hi - lo, 3, _kernel.ROW_BLOCK), dtype=np.float32)
            forward(Xb[lo:hi], (W, bias, pi), (parts, S_rows[lo:hi]))
            summed = parts[0].copy()
            for k in range(1, n_chunks):
                summed += parts[k]
            _close(torch.from_numpy(summed), torch.from_numpy(out[lo:hi]))
            backward((Xb[lo:hi], Gb[lo:hi], S_rows[lo:hi]), (W, bias, pi),
                     tuple(b[lo:hi] for b in blocks) + (fmask,))
        _close(torch.from_numpy(S_rows), torch.from_numpy(S))
        totals.append([S_rows])
        for block, whole in zip(blocks, grads):
            total = np.zeros_like(whole)
            for k in range(3):
                total += block[k]
            _close(torch.from_numpy(total), torch.from_numpy(whole))
            totals[-1].append(total)
    for other in totals[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(totals[0], other))


def test_run_tasks_runs_every_task_and_raises_their_errors():
    seen = []
    _kernel.run_tasks(seen.append, 3)
    assert sorted(seen) == [0, 1, 2]

    def fail(g):
        if g == 1:
            raise RuntimeError("task 1")
        seen.append(g)

    seen.clear()
    with pytest.raises(RuntimeError, match="task 1"):
        _kernel.run_tasks(fail, 2)
    assert seen == [0]
    _kernel.run_tasks(seen.append, 2)  # the workers still run after an error
    assert sorted(seen) == [0, 0, 1]

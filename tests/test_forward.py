"""The math of the vectorized kernel (:mod:`sktree_lmc.model._forward`).

The kernel's routing is derived from each architecture's ``code`` table and its
backward pass is written by hand, so it is checked against the slow NumPy
``reference_forward``, against ``torch.autograd.gradcheck`` in float64, and on
the properties of Eq. 2-4 of the paper.
"""

import csv
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from sktree_lmc import TreeParams, get_architecture
from sktree_lmc.model._forward import SoftTreeEnsembleModule, reference_forward, routing_plan

ARCHS = ["non_oblivious", "oblivious", "decision_list", "decision_list_modified"]
REPO_ROOT = Path(__file__).resolve().parent.parent


def random_params(arch, n_trees, n_features, n_outputs, rng, scale=1.0):
    return TreeParams(
        rng.normal(scale=scale, size=(n_trees, arch.n_nodes, n_features)),
        rng.normal(scale=scale, size=(n_trees, arch.n_nodes)),
        rng.normal(size=(n_trees, arch.n_free_leaves, n_outputs)),
    )


def reference_leaf_probabilities(arch, params, X):
    """mu of shape (B, M, L) with unit leaf values, from ``reference_forward``."""
    L = arch.n_free_leaves
    out = np.empty((X.shape[0], params.n_trees, L))
    for j in range(L):
        unit = np.zeros((params.n_trees, L, 1))
        unit[:, j, 0] = 1.0
        p = TreeParams(params.split_weight, params.split_bias, unit)
        out[:, :, j] = reference_forward(arch, p, X)[:, :, 0]
    return out


def module_and_data(name, depth, n_trees=5, n_features=4, n_outputs=3, n_samples=17, seed=0,
                    dtype=torch.float32):
    rng = np.random.default_rng(seed)
    arch = get_architecture(name, depth)
    params = random_params(arch, n_trees, n_features, n_outputs, rng)
    X = rng.normal(size=(n_samples, n_features))
    module = SoftTreeEnsembleModule.from_params(arch, params).to(dtype)
    return arch, params, module, X


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ARCHS)
def test_vectorized_equals_reference(name, depth):
    arch, params, module, X = module_and_data(name, depth)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    ref = reference_forward(arch, params, X)
    with torch.no_grad():
        assert_allclose(module.tree_outputs(Xt).numpy(), ref, rtol=1e-5, atol=1e-5)
        assert_allclose(module(Xt).numpy(), ref.sum(axis=1), rtol=1e-5, atol=1e-5)
        assert_allclose(
            module.leaf_probabilities(Xt).numpy(),
            reference_leaf_probabilities(arch, params, X),
            rtol=1e-5,
            atol=1e-6,
        )


def test_depth_one_architectures_compute_the_same_function():
    """With one split, all architectures are the same stump (Figure 2); the
    modified list is the stump whose right leaf is 0."""
    rng = np.random.default_rng(1)
    M, F, C = 6, 5, 2
    w, b = rng.normal(size=(M, 1, F)), rng.normal(size=(M, 1))
    pi = rng.normal(size=(M, 2, C))
    X = torch.as_tensor(rng.normal(size=(40, F)), dtype=torch.float32)

    def out(name, leaf_value):
        module = SoftTreeEnsembleModule.from_params(
            get_architecture(name, 1), TreeParams(w, b, leaf_value)
        )
        with torch.no_grad():
            return module(X).numpy()

    stump = out("non_oblivious", pi)
    assert_array_equal(out("oblivious", pi), stump)
    assert_array_equal(out("decision_list", pi), stump)
    zero_right = pi.copy()
    zero_right[:, 1] = 0.0
    assert_allclose(out("decision_list_modified", pi[:, :1]), out("non_oblivious", zero_right),
                    rtol=1e-6, atol=1e-7)
    # and the stump is sigmoid(z) pi_left + sigmoid(-z) pi_right
    z = X.numpy() @ w[:, 0].T + b[:, 0]
    s = 1 / (1 + np.exp(-z))
    expected = s @ pi[:, 0] + (1 - s) @ pi[:, 1]
    assert_allclose(stump, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ARCHS)
def test_leaf_probabilities_sum_to_one(name, depth):
    arch, params, module, X = module_and_data(name, depth, dtype=torch.float64)
    with torch.no_grad():
        mu = module.leaf_probabilities(torch.as_tensor(X)).numpy()
    total = mu.sum(axis=2)  # (B, M)
    assert (mu > 0).all()
    if name != "decision_list_modified":
        assert_allclose(total, 1.0, rtol=0, atol=1e-12)
        return
    # The modified list's missing mass is its empty (fixed-zero) last leaf,
    # reached by going right at every split: prod_i (1 - sigmoid(z_i)).
    assert (total < 1).all()
    z = np.einsum("bf,mnf->bmn", X, params.split_weight.astype(np.float64)) + params.split_bias
    empty_leaf = np.prod(1 - 1 / (1 + np.exp(-z)), axis=2)
    assert_allclose(1 - total, empty_leaf, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ARCHS)
def test_gradients_reach_every_parameter(name):
    arch, params, module, X = module_and_data(name, 3, n_samples=64)
    y = torch.as_tensor(np.arange(64) % 3)
    loss = torch.nn.functional.cross_entropy(module(torch.as_tensor(X, dtype=torch.float32)), y)
    loss.backward()
    for p in (module.split_weight, module.split_bias, module.leaf_value):
        assert p.grad is not None and p.grad.shape == p.shape
        assert torch.isfinite(p.grad).all()
        assert (p.grad != 0).all(), "a parameter receives no gradient"


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("name", ARCHS)
def test_hand_written_backward_passes_gradcheck(name, depth):
    """The closed-form backward of the routing and of the leaf contraction,
    against finite differences in float64, through every public entry point."""
    arch, params, module, X = module_and_data(name, depth, n_trees=3, n_features=3, n_outputs=2,
                                              n_samples=4, dtype=torch.float64)
    Xt = torch.as_tensor(X)
    inputs = tuple(
        p.detach().clone().requires_grad_(True)
        for p in (module.split_weight, module.split_bias, module.leaf_value)
    )
    names = ("split_weight", "split_bias", "leaf_value")
    for method in ("forward", "tree_outputs", "leaf_probabilities"):
        caller = _MethodCaller(module, method)

        def fn(*tensors, caller=caller):
            swapped = {f"module.{n}": t for n, t in zip(names, tensors)}
            return torch.func.functional_call(caller, swapped, (Xt,))

        assert torch.autograd.gradcheck(fn, inputs, fast_mode=depth > 1), method


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("name", ARCHS)
def test_backward_sums_by_matmul_and_by_sweep_agree(name, depth, monkeypatch):
    """The routing backward sums ``h`` per sigmoid in one of two ways, chosen
    by the schedule (a matmul where sigmoids are shared among positions, as in
    oblivious trees; a sweep elsewhere): both give the same gradients, so the
    way not chosen for an architecture stays correct too."""
    from sktree_lmc.model import _forward

    arch, _, module, X = module_and_data(name, depth, n_trees=6, n_features=5, n_outputs=3,
                                         n_samples=11)
    steps = routing_plan(arch)
    sigs = [sig for _, sig, _ in steps]
    assert _forward._sums_by_matmul(steps) == (name == "oblivious" and len(sigs) > len(set(sigs)))
    grads = {}
    for by_matmul in (False, True):
        monkeypatch.setattr(_forward, "_sums_by_matmul", lambda steps, v=by_matmul: v)
        module.zero_grad(set_to_none=True)
        (module(torch.as_tensor(X, dtype=torch.float32)) ** 2).sum().backward()
        grads[by_matmul] = [p.grad.clone() for p in (module.split_weight, module.split_bias)]
    for by_sweep, by_matmul in zip(grads[False], grads[True]):
        assert_allclose(by_sweep.numpy(), by_matmul.numpy(), rtol=1e-5, atol=1e-6)
        assert by_sweep.abs().max() > 0


class _MethodCaller(torch.nn.Module):
    """Calls ``module.<method>`` so that ``functional_call`` can swap its parameters."""

    def __init__(self, module, method):
        super().__init__()
        self.module, self.method = module, method

    def forward(self, X):
        return getattr(self.module, self.method)(X)


def _dyadic_params(arch, rng, n_trees=4, n_features=3):
    """Parameters and inputs on a coarse dyadic grid: every split logit is computed
    exactly in float32, whatever the order of summation in the matmul."""
    w = rng.integers(-4, 5, size=(n_trees, arch.n_nodes, n_features)) / 8
    b = rng.integers(-4, 5, size=(n_trees, arch.n_nodes)) / 8
    pi = rng.normal(size=(n_trees, arch.n_free_leaves, 2))
    X = rng.integers(-3, 4, size=(25, n_features)).astype(np.float32)
    return TreeParams(w, b, pi), torch.as_tensor(X)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("name", ["non_oblivious", "oblivious", "decision_list"])
def test_split_flips_permute_leaf_probabilities_exactly(name, depth):
    """sigmoid(z) and sigmoid(-z) are computed from the same z, in slabs of the
    same layout, so flipping splits in place (w, b -> -w, -b; the ops of the
    group that move no node) gives bit-identical leaf probabilities, permuted.
    Ops that also move nodes (subtree swaps, splitting-order changes) move
    values to other memory positions, where float32 sigmoids may round
    differently by an ulp: those agree to float32 precision."""
    arch = get_architecture(name, depth)
    params, X = _dyadic_params(arch, np.random.default_rng(depth))
    in_place = (arch.ops.perm == np.arange(arch.n_nodes)).all(axis=1)
    n_flippable_in_place = {"non_oblivious": 2 ** (depth - 1), "oblivious": depth,
                            "decision_list": 1}
    assert in_place.sum() == 2 ** n_flippable_in_place[name]
    with torch.no_grad():
        mu = SoftTreeEnsembleModule.from_params(arch, params).leaf_probabilities(X).numpy()
        for u in range(len(arch.ops)):
            op = arch.ops[np.full(params.n_trees, u)]
            moved = SoftTreeEnsembleModule.from_params(arch, params.apply_ops(op))
            mu_moved = moved.leaf_probabilities(X).numpy()
            if in_place[u]:
                assert_array_equal(mu_moved, mu[:, :, op.leaf_perm[0]])
            else:
                assert_allclose(mu_moved, mu[:, :, op.leaf_perm[0]], rtol=1e-6, atol=0)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(ARCHS),
    depth=st.integers(1, 3),
    n_trees=st.integers(1, 4),
    n_features=st.integers(1, 4),
    n_outputs=st.integers(1, 3),
    n_samples=st.integers(1, 6),
    scale=st.floats(0.01, 20.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_kernel_matches_reference(name, depth, n_trees, n_features, n_outputs,
                                           n_samples, scale, seed):
    """For random shapes and parameter scales (including saturated sigmoids),
    the kernel equals the reference and routes a mass of at most 1 per tree."""
    rng = np.random.default_rng(seed)
    arch = get_architecture(name, depth)
    params = random_params(arch, n_trees, n_features, n_outputs, rng, scale=scale)
    X = rng.normal(size=(n_samples, n_features))
    module = SoftTreeEnsembleModule.from_params(arch, params).double()
    with torch.no_grad():
        Xt = torch.as_tensor(X)
        out = module.tree_outputs(Xt).numpy()
        mu = module.leaf_probabilities(Xt).numpy()
    assert_allclose(out, reference_forward(arch, params, X), rtol=1e-9, atol=1e-9)
    assert (mu >= 0).all() and (mu.sum(axis=2) <= 1 + 1e-12).all()


def test_routing_plan_follows_the_code_table():
    """Each free leaf's path in the plan uses exactly the nodes of its code row."""
    for name in ARCHS:
        for depth in (1, 2, 3):
            arch = get_architecture(name, depth)
            steps = routing_plan(arch)
            for j, leaf in enumerate(arch.free_leaves):
                (i,) = [i for i, s in enumerate(steps) if s[2] == j]
                row = np.zeros(arch.n_nodes, dtype=int)
                while i >= 0:
                    parent, sig, _ = steps[i]
                    row[sig % arch.n_nodes] = 1 if sig < arch.n_nodes else -1
                    i = parent
                assert_array_equal(row, arch.code[leaf])
    # the fixed-zero leaf of the modified list is never computed
    arch = get_architecture("decision_list_modified", 3)
    assert len(routing_plan(arch)) == 2 * 3 - 1


def test_routing_plan_rejects_a_table_that_is_not_a_tree():
    bad = types.SimpleNamespace(
        name="bad", code=np.array([[1, 0], [0, 1]], dtype=np.int8), free_leaves=np.arange(2)
    )
    with pytest.raises(ValueError, match="not a binary tree"):
        routing_plan(bad)


def test_module_parameters_keep_the_documented_layout():
    arch = get_architecture("non_oblivious", 3)
    gen = torch.Generator().manual_seed(0)
    module = SoftTreeEnsembleModule(arch, 6, 5, 4, generator=gen)
    assert module.split_weight.shape == (6, 7, 5)
    assert module.split_bias.shape == (6, 7)
    assert module.leaf_value.shape == (6, 8, 4)
    # fully-connected initialization bounds
    assert module.split_weight.abs().max() <= 1 / np.sqrt(5)
    assert module.leaf_value.abs().max() <= 1 / np.sqrt(8)
    p = module.to_params()
    back = SoftTreeEnsembleModule.from_params(arch, p)
    for a, b in zip(module.parameters(), back.parameters()):
        assert torch.equal(a, b)


def test_benchmark_smoke(tmp_path, monkeypatch, capsys):
    """``python -m benchmarks.bench_throughput --smoke`` runs and writes its CSV."""
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    from benchmarks import bench_throughput

    n_threads = torch.get_num_threads()
    rows = bench_throughput.main(["--smoke", "--out", str(tmp_path)])
    assert torch.get_num_threads() == n_threads
    printed = capsys.readouterr().out
    assert "| threads | arch | D |" in printed
    with open(tmp_path / "throughput_smoke.csv") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == len(rows) == 4 * 2
    for row in table:
        for kernel in bench_throughput.KERNELS:
            assert float(row[f"train_{kernel}"]) > 0
            assert float(row[f"predict_{kernel}"]) > 0
        assert float(row["fit"]) > 0 and float(row["predict_proba"]) > 0
        assert float(row["proba_over_train"]) == pytest.approx(
            float(row["predict_proba"]) / float(row["train_vectorized"]))


def test_busy_comparison_smoke(tmp_path, monkeypatch):
    """The busy-machine comparison times every variant and restores torch's thread count
    (run here without the busy-loop process: ``busy_core=-1``)."""
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    from benchmarks import bench_throughput

    n_threads = torch.get_num_threads()
    rows = bench_throughput.busy_comparison(
        ["oblivious"], [1, 2], n_trees=3, n_features=4, batch_size=16, n_classes=2, n_rows=48,
        repeats=2, busy_core=-1, progress=lambda *_: None, csv_path=tmp_path / "busy.csv")
    assert torch.get_num_threads() == n_threads
    assert [(r["arch"], r["depth"]) for r in rows] == [("oblivious", 1), ("oblivious", 2)]
    for r in rows:
        assert all(r[f"{v}_s"] > 0 for v in bench_throughput.BUSY_VARIANTS)
        assert r["default_over_one"] == pytest.approx(r["default_s"] / r["one_thread_s"])
    with open(tmp_path / "busy.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 2
    assert "| oblivious | 2 |" in bench_throughput.busy_table(rows)


def test_leaf_init_scales_the_leaf_values():
    arch = get_architecture("oblivious", 2)
    gen = torch.Generator().manual_seed(0)
    tree = SoftTreeEnsembleModule(arch, 64, 5, 2, generator=gen, leaf_init="tree")
    gen = torch.Generator().manual_seed(0)
    ens = SoftTreeEnsembleModule(arch, 64, 5, 2, generator=gen, leaf_init="ensemble")
    # same draws, leaves scaled by 1/sqrt(M); splits untouched
    torch.testing.assert_close(ens.split_weight, tree.split_weight)
    torch.testing.assert_close(ens.leaf_value * 8.0, tree.leaf_value)
    assert float(tree.leaf_value.detach().abs().max()) <= 0.5
    with pytest.raises(ValueError, match="leaf_init"):
        SoftTreeEnsembleModule(arch, 4, 5, 2, leaf_init="bogus")


@pytest.mark.parametrize("n_features", [3, 20, 100])
def test_split_init_sets_the_split_bound(n_features):
    arch = get_architecture("non_oblivious", 2)
    gen = torch.Generator().manual_seed(0)
    fan_in = SoftTreeEnsembleModule(arch, 64, n_features, 2, generator=gen)
    gen = torch.Generator().manual_seed(0)
    const = SoftTreeEnsembleModule(arch, 64, n_features, 2, generator=gen, split_init=0.45)
    # same draws, split weights and biases rescaled from 1/sqrt(F) to 0.45; leaves untouched
    scale = 0.45 * n_features**0.5
    torch.testing.assert_close(const.split_weight, fan_in.split_weight * scale)
    torch.testing.assert_close(const.split_bias, fan_in.split_bias * scale)
    torch.testing.assert_close(const.leaf_value, fan_in.leaf_value)
    for module, bound in [(fan_in, n_features**-0.5), (const, 0.45)]:
        w = torch.cat([module.split_weight.flatten(), module.split_bias.flatten()]).detach()
        assert float(w.abs().max()) <= bound
        assert float(w.abs().max()) > 0.9 * bound  # the whole range is used
    for bad in ["bogus", 0.0, -1.0, float("nan"), float("inf")]:
        with pytest.raises(ValueError, match="split_init"):
            SoftTreeEnsembleModule(arch, 4, 5, 2, split_init=bad)


def test_split_init_reaches_the_estimator():
    from sktree_lmc import SoftTreeEnsembleClassifier

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 30)), np.arange(40) % 2
    params = {"n_estimators": 4, "max_epochs": 1, "learning_rate": 1e-12, "random_state": 0,
              "numeric_encoding": "piecewise_linear"}
    wide = SoftTreeEnsembleClassifier(split_init=1.0, **params).fit(X, y)
    default = SoftTreeEnsembleClassifier(split_init="fan_in", **params).fit(X, y)
    w_wide = wide.get_tree_params().split_weight
    w_default = default.get_tree_params().split_weight
    # "fan_in" is 1/sqrt(F) over the split directions the trees see: with the
    # piecewise-linear encoding, one ramp per numeric column (30 here)
    assert w_default.shape[2] == default.encoder_.n_features_out_ > 30
    # a learning rate of 1e-12 leaves the initialization in place
    np.testing.assert_allclose(w_wide, w_default * 30**0.5, rtol=1e-5, atol=1e-9)
    # with one feature per column, fan_in counts the encoded features
    plain = {**params, "numeric_encoding": "standard"}
    w_std = SoftTreeEnsembleClassifier(split_init="fan_in", **plain).fit(X, y)
    w_std = w_std.get_tree_params().split_weight
    w_std_wide = SoftTreeEnsembleClassifier(split_init=1.0, **plain).fit(X, y)
    np.testing.assert_allclose(w_std_wide.get_tree_params().split_weight, w_std * 30**0.5,
                               rtol=1e-5, atol=1e-9)


def test_ratio_interleaved_smoke(tmp_path, monkeypatch):
    """``--ratio``: predict_proba and training rates measured alternately, medians reported."""
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    from benchmarks import bench_throughput

    rows = bench_throughput.ratio_interleaved(
        ["decision_list"], [2], n_trees=3, n_features=4, batch_size=16, n_classes=2,
        n_predict=50, min_time=0.0, rounds=3, progress=lambda *_: None,
        csv_path=tmp_path / "ratio.csv")
    (row,) = rows
    assert row["train"] > 0 and row["predict_proba"] > 0
    assert row["ratio_min"] <= row["ratio"]
    assert "| decision_list | 2 |" in bench_throughput.ratio_table(rows)
    with open(tmp_path / "ratio.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 1


# -- the routing plan: fast, built once, and refused when it cannot fit (issue 20) --------


def _reference_routing_plan(arch):
    """The former routing_plan (before issue 20), kept as the reference: a recursion
    that scans all nodes and all leaves at every position (quadratic in the leaves)."""
    code = np.asarray(arch.code)
    n_leaves, n_nodes = code.shape
    free_index = {int(leaf): j for j, leaf in enumerate(arch.free_leaves)}
    steps = []

    def build(leaves, parent, used):
        if len(leaves) == 1:
            return
        candidates = [
            n for n in range(n_nodes) if n not in used and all(code[k, n] != 0 for k in leaves)
        ]
        if not candidates:
            raise ValueError(f"code table of {arch.name!r} is not a binary tree")
        node = candidates[0]
        for side, sign in ((0, 1), (1, -1)):
            sub = [k for k in leaves if code[k, node] == sign]
            if not sub:
                raise ValueError(f"code table of {arch.name!r} is not a binary tree")
            if not any(k in free_index for k in sub):
                continue
            leaf = free_index[sub[0]] if len(sub) == 1 else -1
            steps.append((parent, node + side * n_nodes, leaf))
            build(sub, len(steps) - 1, used | {node})

    build(list(range(n_leaves)), -1, frozenset())
    for leaf, j in free_index.items():
        i = next(i for i, s in enumerate(steps) if s[2] == j)
        row = np.zeros(n_nodes, dtype=np.int64)
        while i >= 0:
            parent, sig, _ = steps[i]
            row[sig % n_nodes] = 1 if sig < n_nodes else -1
            i = parent
        if not np.array_equal(row, code[leaf]):
            raise ValueError(f"code table of {arch.name!r} is not a binary tree")
    return steps


@pytest.mark.parametrize("name", ARCHS)
def test_routing_plan_equals_the_reference_algorithm(name):
    from sktree_lmc.model._forward import _build_routing_plan

    for depth in range(1, 7):
        arch = get_architecture(name, depth)
        expected = _reference_routing_plan(arch)
        assert list(_build_routing_plan(arch)) == expected, (name, depth)
        assert list(routing_plan(arch)) == expected, (name, depth)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_routing_plan_fails_where_the_reference_fails(data):
    """Perturbed and random tables: the same plan, or the same ValueError."""
    from sktree_lmc.model._forward import _build_routing_plan

    if data.draw(st.booleans()):
        arch = get_architecture(data.draw(st.sampled_from(ARCHS)), data.draw(st.integers(1, 3)))
        code = arch.code.copy()
        i = data.draw(st.integers(0, code.shape[0] - 1))
        n = data.draw(st.integers(0, code.shape[1] - 1))
        code[i, n] = data.draw(st.sampled_from([-1, 0, 1]))
    else:
        code = np.array(data.draw(st.lists(
            st.lists(st.sampled_from([-1, 0, 1]), min_size=3, max_size=3),
            min_size=2, max_size=6)), dtype=np.int8)
    n_leaves = code.shape[0]
    free = sorted(data.draw(st.sets(st.integers(0, n_leaves - 1), min_size=1)))
    table = types.SimpleNamespace(name="t", code=code, free_leaves=np.array(free))
    try:
        expected = _reference_routing_plan(table)
    except ValueError:
        with pytest.raises(ValueError, match="not a binary tree"):
            _build_routing_plan(table)
    else:
        assert list(_build_routing_plan(table)) == expected


def test_routing_plan_is_built_once_per_architecture(monkeypatch):
    """Issue 20: the plan was rebuilt on every fit and prediction."""
    import sktree_lmc.model._forward as forward
    from sktree_lmc import SoftTreeEnsembleClassifier

    arch = get_architecture("non_oblivious", 5)
    forward._PLANS.pop(arch, None)
    built = []
    build = forward._build_routing_plan
    monkeypatch.setattr(forward, "_build_routing_plan", lambda a: built.append(a) or build(a))
    X = np.random.RandomState(0).randn(40, 3)
    y = np.arange(40) % 2
    est = SoftTreeEnsembleClassifier(arch="non_oblivious", depth=5, n_estimators=2,
                                     max_epochs=2, device="cpu", random_state=0).fit(X, y)
    est.predict_proba(X)
    est.fit(X, y).predict(X)
    assert built == [arch]
    assert routing_plan(arch) is routing_plan(arch)


def test_deep_routing_plans_are_fast():
    """The plan of a depth-15 oblivious tree (65534 steps) and of a depth-11
    non-oblivious tree: the former algorithm took tens of seconds."""
    import time

    from sktree_lmc.model._forward import _build_routing_plan

    for name, depth in (("oblivious", 15), ("non_oblivious", 11)):
        arch = get_architecture(name, depth)
        start = time.process_time()
        steps = _build_routing_plan(arch)
        assert time.process_time() - start < 10, (name, depth)
        assert len(steps) == 2 ** (depth + 1) - 2
        assert sorted(s[2] for s in steps if s[2] >= 0) == list(range(2**depth))


def test_routing_buffers_beyond_memory_are_refused_up_front(monkeypatch):
    """Deep trees (or very many) whose routing buffers cannot fit in memory are a
    ValueError quoting the estimate, before anything is allocated."""
    import sktree_lmc.model._forward as forward
    from sktree_lmc import SoftTreeEnsembleClassifier
    from sktree_lmc.model._forward import check_routing_memory, inference_chunk_rows

    X = np.random.RandomState(0).randn(40, 3)
    y = np.arange(40) % 2
    # a real case: 10**6 trees of depth 16 need terabytes per row
    huge = SoftTreeEnsembleClassifier(arch="oblivious", depth=16, n_estimators=10**6,
                                      device="cpu")
    with pytest.raises(ValueError, match=r"arch='oblivious' with depth=16 and 1000000 trees "
                                         r"needs about .* MiB of routing buffers per row"):
        huge.fit(X, y)
    arch = get_architecture("oblivious", 6)
    check_routing_memory(arch, 8, 64)  # fits
    est = SoftTreeEnsembleClassifier(arch="oblivious", depth=6, n_estimators=8, max_epochs=1,
                                     batch_size=32, device="cpu", random_state=0).fit(X, y)
    # a machine with 1 MiB: a prediction chunk and a minibatch no longer fit
    monkeypatch.setattr(forward, "_memory_bytes", lambda device: 2**20)
    with pytest.raises(ValueError, match=r"GiB for 512 row\(s\) at once: more than the"):
        inference_chunk_rows(arch, 8)
    with pytest.raises(ValueError, match="routing buffers per row"):
        est.predict_proba(X)
    monkeypatch.setattr(forward, "_memory_bytes", lambda device: 2**16)  # 64 KiB
    module = SoftTreeEnsembleModule.from_params(arch, est.tree_params_)  # one row fits
    with pytest.raises(ValueError, match=r"\(training, 64 leaves per tree\).* for 40 row"):
        module(torch.as_tensor(est._encoded_input(X).X))  # the trees' input: X encoded


@settings(max_examples=30, deadline=None)
@given(n_outputs=st.integers(1, 4), n_rows=st.integers(1, 40), seed=st.integers(0, 2 ** 16))
def test_leaf_gradients_are_the_product_of_leaf_values_and_output_gradients(n_outputs, n_rows,
                                                                            seed):
    """_leaf_gradients (two broadcast products for two outputs) is pi @ grad_t."""
    from sktree_lmc.model._forward import _leaf_gradients

    g = torch.Generator().manual_seed(seed)
    pi = torch.randn(24, n_outputs, generator=g)
    grad_t = torch.randn(n_outputs, n_rows, generator=g)
    torch.testing.assert_close(_leaf_gradients(pi, grad_t), pi @ grad_t, rtol=1e-6, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(ARCHS), depth=st.integers(1, 3), n_features=st.integers(2, 9),
       compact_features=st.booleans(), data=st.data())
def test_a_compacted_module_computes_the_same_function(name, depth, n_features,
                                                       compact_features, data):
    """``module.compacted(features, rows)`` on the kept features and the codes renumbered
    to the kept rows: the outputs and the gradients of the kept entries of the module
    whose other entries are zero; bit for bit with all features (rows alone are the same
    values), up to float32 rounding with fewer (the splits' matmul sums fewer terms)."""
    seed = data.draw(st.integers(0, 2**16))
    keep = data.draw(st.lists(st.booleans(), min_size=n_features, max_size=n_features)
                     .filter(any)) if compact_features else [True] * n_features
    gen = torch.Generator().manual_seed(seed)
    module = SoftTreeEnsembleModule(get_architecture(name, depth), n_trees=4,
                                    n_features=n_features, n_outputs=2, generator=gen,
                                    n_additive=8)
    rows = torch.tensor([1, 2, 5, 6, 7])  # two code columns' rows: [1, 2] and [5, 6, 7]
    features = torch.as_tensor(np.flatnonzero(keep))
    with torch.no_grad():
        module.split_weight[:, :, ~torch.as_tensor(keep)] = 0.0
        module.additive.copy_(torch.randn(8, 2, generator=gen))
        module.additive[[0, 3, 4]] = 0.0
    module.additive_scale = torch.rand(8, 1, generator=gen) + 0.5
    x = torch.randn(11, n_features, generator=gen)
    codes = torch.stack([torch.randint(1, 3, (11,), generator=gen),
                         torch.randint(5, 8, (11,), generator=gen)], 1)
    number = torch.full((8,), -1, dtype=torch.long)
    number[rows] = torch.arange(len(rows))
    small = module.compacted(features if compact_features else None, rows)
    outputs = []
    for m, X, c in ((module, x, codes), (small, x[:, features], number[codes])):
        out = m(X, c)
        out.square().sum().backward()
        outputs.append((out.detach(), dict(m.named_parameters())))
    (out_full, full), (out_small, part) = outputs
    check = torch.testing.assert_close if compact_features else (
        lambda a, b, **kw: torch.equal(a, b) or pytest.fail("not bit for bit"))
    check(out_small, out_full, rtol=1e-5, atol=1e-5)
    check(part["split_weight"].grad, full["split_weight"].grad[:, :, features],
          rtol=1e-4, atol=1e-4)
    check(part["additive"].grad, full["additive"].grad[rows], rtol=1e-4, atol=1e-4)
    for key in ("split_bias", "leaf_value"):
        check(part[key].grad, full[key].grad, rtol=1e-4, atol=1e-4)
    assert torch.equal(small.additive_scale, module.additive_scale[rows])
    assert torch.equal(small.split_weight.detach(), module.split_weight.detach()[:, :, features])

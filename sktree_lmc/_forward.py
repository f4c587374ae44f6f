"""The vectorized forward pass of a soft tree ensemble (one code path for all architectures).

The whole ensemble is a handful of tensor operations, with no Python loop over
trees or samples (in the spirit of NODE's ODST):

1. all split logits of all trees at once, one matmul, node-major:
   ``z = W @ X.T + b`` with ``W`` of shape ``(N * M, F)``, viewed as ``(N, M, B)``;
2. the two-sided sigmoids ``s = sigmoid([z, -z])``, shape ``(2N, M, B)``;
3. the leaf routing probabilities ``mu`` of shape ``(L, M, B)`` as products of
   sigmoids along each root-to-leaf path (Eq. 2), computed level by level,
   each step one elementwise product over all trees and samples. The steps are
   derived once from the architecture's ``code`` table
   (:func:`routing_plan`), so every architecture runs the same code;
4. the leaf values: ``out = (pi.T @ mu.reshape(L * M, B)).T`` (Eq. 3-4).

Steps 2-3 are one autograd function (:class:`_Routing`) whose backward pass is
closed-form and driven by the same schedule: with ``h = grad_mu * mu`` and
``H_n^left``, ``H_n^right`` the sums of ``h`` over the leaves left and right of
node ``n`` (one reverse sweep over the schedule),

.. math:: \\partial z_n = \\sigma(-z_n) H_n^{left} - \\sigma(z_n) H_n^{right}.

Step 4 is a second small autograd function that picks matmul layouts that are
fast on CPUs. Together they avoid autograd's bookkeeping for every product and
make training several times faster than a log-space formulation
(``logsigmoid`` and a routing matmul) on CPUs; see ``benchmarks/``.

Computing ``sigmoid(z)`` and ``sigmoid(-z)`` from the same ``z`` (rather than
``1 - sigmoid(z)``) makes a subtree flip (``w, b -> -w, -b``) exactly
symmetric: the flipped tree's leaf probabilities are bit-identical to the
original ones, permuted.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._params import TreeParams

__all__ = [
    "SoftTreeEnsembleModule",
    "inference_chunk_rows",
    "predict_chunked",
    "reference_forward",
    "routing_plan",
]


def routing_plan(arch):
    """Derive the product schedule of the leaf probabilities from ``arch.code``.

    The structural tree is rebuilt from the table: the root holds all leaves;
    a position holding several leaves is split by the first node that lies on
    the path of all of them (``code[l, n] != 0``) and is not used above it;
    leaves with ``code = +1`` go left, ``-1`` right. Positions that lead to no
    free leaf (the fixed-zero leaf of the modified decision list) are pruned.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table.

    Returns
    -------
    steps : list of tuple (parent, sig, leaf)
        Step ``i`` computes position ``i`` as ``pos[parent] * s[sig]``
        (``parent = -1``: the root, probability 1), where ``s`` is the
        ``(2N, ...)`` stack of ``sigmoid(z)`` (rows ``0..N-1``) and
        ``sigmoid(-z)`` (rows ``N..2N-1``). ``leaf`` is the index of the free
        leaf that position ``i`` is, or ``-1`` for an inner position.

    Raises
    ------
    ValueError
        If the table does not describe a binary tree.
    """
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
    # Each free leaf's path must use exactly the nodes of its code row.
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


def _route_forward(z, steps, n_leaves, buffers=None, exact_complement=True):
    """Two-sided sigmoids ``s`` (2N, ...) and leaf probabilities ``mu`` (L, ...).

    ``buffers``, when given, is ``(s, mu, inner)`` as made by
    :func:`_routing_buffers`: the results are written there instead of into
    new tensors (the inference kernel reuses one set of buffers per chunk).
    ``exact_complement=False`` computes ``sigmoid(-z)`` as ``1 - sigmoid(z)``
    (one exponential fewer; absolute error at most one float32 ulp of 1,
    6e-8), which the inference kernel uses; training keeps ``sigmoid(-z)``,
    which makes subtree flips exactly symmetric.
    """
    n_nodes = z.shape[0]
    if buffers is None:
        s = z.new_empty((2 * n_nodes,) + z.shape[1:])
        mu = z.new_empty((n_leaves,) + z.shape[1:])
        inner = [None] * len(steps)
    else:
        s, mu, inner = buffers
    torch.sigmoid(z, out=s[:n_nodes])
    if exact_complement:
        torch.neg(z, out=s[n_nodes:])
        s[n_nodes:].sigmoid_()
    else:
        torch.neg(s[:n_nodes], out=s[n_nodes:]).add_(1)
    pos = [None] * len(steps)
    for i, (parent, sig, leaf) in enumerate(steps):
        if leaf >= 0:
            if parent < 0:
                mu[leaf].copy_(s[sig])
            else:
                torch.mul(pos[parent], s[sig], out=mu[leaf])
            pos[i] = mu[leaf]
        elif parent < 0:
            pos[i] = s[sig]
        elif inner[i] is None:
            pos[i] = pos[parent] * s[sig]
        else:
            pos[i] = torch.mul(pos[parent], s[sig], out=inner[i])
    return s, mu


def _routing_buffers(steps, n_nodes, n_leaves, shape, dtype, device):
    """Preallocated ``(s, mu, inner)`` for :func:`_route_forward` on logits of ``(N,) + shape``."""
    s = torch.empty((2 * n_nodes,) + shape, dtype=dtype, device=device)
    mu = torch.empty((n_leaves,) + shape, dtype=dtype, device=device)
    inner = [
        torch.empty(shape, dtype=dtype, device=device) if leaf < 0 and parent >= 0 else None
        for parent, _, leaf in steps
    ]
    return s, mu, inner


def _accumulate(sums, owned, key, value):
    """``sums[key] += value``, in place once ``sums[key]`` is a tensor of our own."""
    if sums[key] is None:
        sums[key] = value
    elif owned[key]:
        sums[key].add_(value)
    else:
        sums[key] = sums[key] + value
        owned[key] = True


def _route_backward(s, h, steps):
    """Gradient w.r.t. ``z`` given ``h = grad_mu * mu`` (closed form, see module doc)."""
    n_nodes = s.shape[0] // 2
    # below[i]: sum of h over the free leaves under position i (children come
    # after their parent in ``steps``, so one reverse sweep suffices).
    below, owned = [None] * len(steps), [False] * len(steps)
    for i in range(len(steps) - 1, -1, -1):
        parent, _, leaf = steps[i]
        if leaf >= 0:
            below[i] = h[leaf]
        if parent >= 0:
            _accumulate(below, owned, parent, below[i])
    # per_sig[k]: sum of ``below`` over the positions reached through s[k].
    per_sig, owned = [None] * (2 * n_nodes), [False] * (2 * n_nodes)
    for i, (_, sig, _) in enumerate(steps):
        _accumulate(per_sig, owned, sig, below[i])
    grad_z = torch.empty_like(s[:n_nodes])
    for n in range(n_nodes):
        left, right = per_sig[n], per_sig[n + n_nodes]
        if left is not None:
            torch.mul(s[n + n_nodes], left, out=grad_z[n])
        else:
            grad_z[n].zero_()
        if right is not None:
            grad_z[n].addcmul_(s[n], right, value=-1)
    return grad_z


class _Routing(torch.autograd.Function):
    """Leaf probabilities ``mu`` (L, ...) from split logits ``z`` (N, ...)."""

    @staticmethod
    def forward(ctx, z, steps, n_leaves):
        s, mu = _route_forward(z, steps, n_leaves)
        ctx.steps = steps
        ctx.save_for_backward(s, mu)
        return mu

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_mu):
        s, mu = ctx.saved_tensors
        return _route_backward(s, grad_mu * mu, ctx.steps), None, None


class _Ensemble(torch.autograd.Function):
    """Ensemble output ``(B, C)`` from split logits ``z`` (N, M, B) and leaf values.

    ``pi`` is the leaf values in leaf-major layout ``(L * M, C)``. Routing and
    leaf contraction in one function let the backward pass reuse its buffers
    and pick matmul layouts that are fast on CPUs.
    """

    @staticmethod
    def forward(ctx, z, pi, steps):
        n_leaves = pi.shape[0] // z.shape[1]
        s, mu = _route_forward(z, steps, n_leaves)
        mu = mu.view(pi.shape[0], z.shape[2])
        ctx.steps = steps
        ctx.save_for_backward(s, mu, pi)
        return (pi.T @ mu).T

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        s, mu, pi = ctx.saved_tensors
        grad_t = grad_out.T.contiguous()  # (C, B)
        grad_pi = mu @ grad_t.T if ctx.needs_input_grad[1] else None
        grad_z = None
        if ctx.needs_input_grad[0]:
            h = (pi @ grad_t).mul_(mu)  # grad_mu * mu, in a buffer of our own
            grad_z = _route_backward(s, h.view((-1,) + s.shape[1:]), ctx.steps)
        return grad_z, grad_pi, None


def split_init_bound(split_init, n_features):
    """Bound ``c`` of the ``U(-c, c)`` initialization of split weights and biases.

    Parameters
    ----------
    split_init : "fan_in" or float
        ``"fan_in"`` gives ``1/sqrt(n_features)`` (a fully connected layer with
        ``n_features`` inputs, so the initial split logits have the same scale
        for any ``F``); a positive float is used as the bound itself.
    n_features : int
        Number of input features ``F``.

    Returns
    -------
    bound : float
    """
    message = f"split_init must be 'fan_in' or a positive float, got {split_init!r}."
    if isinstance(split_init, str):
        if split_init != "fan_in":
            raise ValueError(message)
        return 1.0 / math.sqrt(n_features)
    bound = float(split_init)
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(message)
    return bound


class SoftTreeEnsembleModule(nn.Module):
    """PyTorch module computing the sum of ``M`` soft trees of one architecture.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table (routing code, free leaves).
    n_trees : int
        Number of trees ``M``.
    n_features : int
        Number of input features ``F``.
    n_outputs : int
        Output dimension ``C`` (classes, or regression targets).
    generator : torch.Generator, optional
        Generator for the initialization. Parameters are drawn on the CPU so
        that initialization does not depend on the device.
    leaf_init : {"ensemble", "tree"}, default="ensemble"
        Fan-in of the leaf-value initialization: ``L`` per tree, or ``M * L``
        for the whole ensemble (see Notes).
    split_init : "fan_in" or float, default="fan_in"
        Bound of the uniform initialization of split weights and biases:
        ``1/sqrt(F)`` for ``"fan_in"``, the float itself otherwise (see Notes).

    Notes
    -----
    Initialization follows a fully connected layer (as in the paper):
    split weights and biases ``U(-1/sqrt(F), 1/sqrt(F))`` (or ``U(-c, c)`` for
    ``split_init=c``, independent of ``F``), leaf values
    ``U(-1/sqrt(L), 1/sqrt(L))`` with ``L`` the number of free leaves
    (``leaf_init="tree"``) or ``U(-1/sqrt(M L), 1/sqrt(M L))``
    (``leaf_init="ensemble"``: the output as one layer over all leaves).

    The parameters keep the documented layout ``(M, N, F)``, ``(M, N)``,
    ``(M, L, C)``; the forward pass works internally in node-major order
    ``(N, M, B)`` so that every routing step is one contiguous elementwise
    product.

    The estimators train this module; use it directly to put a soft tree
    ensemble into a PyTorch model of your own.

    Examples
    --------
    >>> import torch
    >>> from sktree_lmc import SoftTreeEnsembleModule, get_architecture
    >>> module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), n_trees=16,
    ...                                 n_features=5, n_outputs=3,
    ...                                 generator=torch.Generator().manual_seed(0))
    >>> module(torch.randn(8, 5)).shape
    torch.Size([8, 3])
    >>> module.to_params().split_weight.shape  # (M, N, F), as NumPy arrays
    (16, 2, 5)
    """

    def __init__(self, arch, n_trees, n_features, n_outputs, generator=None,
                 leaf_init="ensemble", split_init="fan_in"):
        super().__init__()
        N, L = arch.n_nodes, arch.n_free_leaves
        bound = split_init_bound(split_init, n_features)
        fan_in = {"tree": L, "ensemble": L * n_trees}.get(leaf_init)
        if fan_in is None:
            raise ValueError(f"leaf_init must be 'tree' or 'ensemble', got {leaf_init!r}.")
        lbound = 1.0 / math.sqrt(fan_in)

        def uniform(shape, b):
            return (torch.rand(shape, generator=generator) * 2 - 1) * b

        self._set_arch(arch)
        self.split_weight = nn.Parameter(uniform((n_trees, N, n_features), bound))
        self.split_bias = nn.Parameter(uniform((n_trees, N), bound))
        self.leaf_value = nn.Parameter(uniform((n_trees, L, n_outputs), lbound))

    def _set_arch(self, arch):
        self.arch = arch
        self._steps = routing_plan(arch)

    def _split_logits(self, X):
        """All split logits ``z`` in node-major layout ``(N, M, B)``, one matmul."""
        M, N, Fdim = self.split_weight.shape
        W = self.split_weight.transpose(0, 1).reshape(N * M, Fdim)
        b = self.split_bias.transpose(0, 1).reshape(N * M, 1)
        return torch.addmm(b, W, X.T).view(N, M, X.shape[0])

    def _routing_probabilities(self, X):
        """Leaf probabilities in the internal layout ``(L, M, B)``."""
        return _Routing.apply(self._split_logits(X), self._steps, self.leaf_value.shape[1])

    def leaf_probabilities(self, X):
        """Routing probabilities ``mu`` of every sample to every free leaf.

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.

        Returns
        -------
        torch.Tensor of shape (B, M, L)
            Probability of reaching each free leaf of each tree.
        """
        return self._routing_probabilities(X).permute(2, 1, 0)

    def tree_outputs(self, X):
        """Outputs of every single tree (Eq. 3).

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.

        Returns
        -------
        torch.Tensor of shape (B, M, C)
            Per-tree outputs; their sum over trees is :meth:`forward`.
        """
        mu = self._routing_probabilities(X)
        return torch.einsum("lmb,mlc->bmc", mu, self.leaf_value)

    def forward(self, X):
        """Ensemble output: the sum of the trees (Eq. 4).

        Parameters
        ----------
        X : torch.Tensor of shape (B, F)
            Input samples.

        Returns
        -------
        torch.Tensor of shape (B, C)
            Raw output (logits for classification).
        """
        M, L, C = self.leaf_value.shape
        pi = self.leaf_value.transpose(0, 1).reshape(L * M, C)
        return _Ensemble.apply(self._split_logits(X), pi, self._steps)

    # -- conversion to and from arrays -----------------------------------------
    def to_params(self):
        """Copy the parameters to a CPU :class:`TreeParams`.

        Returns
        -------
        TreeParams
            NumPy copies of the split weights, split biases and leaf values.
        """
        with torch.no_grad():
            return TreeParams(
                self.split_weight.detach().cpu().numpy().copy(),
                self.split_bias.detach().cpu().numpy().copy(),
                self.leaf_value.detach().cpu().numpy().copy(),
            )

    @classmethod
    def from_params(cls, arch, params, device="cpu"):
        """Build a module holding ``params`` on ``device``.

        Parameters
        ----------
        arch : TreeArchitecture
            Architecture of the parameters.
        params : TreeParams
            Parameters to load.
        device : str or torch.device, default="cpu"
            Device of the module.

        Returns
        -------
        SoftTreeEnsembleModule
            A module computing the ensemble of ``params``.
        """
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module._set_arch(arch)
        module.split_weight = nn.Parameter(torch.from_numpy(np.array(params.split_weight)))
        module.split_bias = nn.Parameter(torch.from_numpy(np.array(params.split_bias)))
        module.leaf_value = nn.Parameter(torch.from_numpy(np.array(params.leaf_value)))
        return module.to(device)


#: Bytes of a prediction chunk's intermediates (split logits, two-sided
#: sigmoids, leaf and inner-position probabilities, float32) on the CPU: about
#: two L2 caches of a current core. Measured (``benchmarks/bench_throughput.py``,
#: 1 thread, M=256): 64-256 rows per chunk ran within 10% of the best chunk for
#: every architecture at D in {2, 4, 6}; chunks of thousands of rows, which leave
#: the cache, were up to 3x slower.
INFERENCE_CHUNK_BYTES = {"cpu": 4 * 2**20, "cuda": 256 * 2**20}
#: Smallest and largest chunk, in rows (powers of two).
INFERENCE_CHUNK_ROWS = {"cpu": (64, 1024), "cuda": (1024, 65536)}


def inference_chunk_rows(arch, n_trees, device="cpu"):
    """Rows per chunk of :func:`predict_chunked` for a model (fixed per model).

    The largest power of two whose float32 intermediates fit
    :data:`INFERENCE_CHUNK_BYTES`, clipped to :data:`INFERENCE_CHUNK_ROWS`.

    Parameters
    ----------
    arch : TreeArchitecture
        Architecture table.
    n_trees : int
        Number of trees ``M``.
    device : str or torch.device, default="cpu"
        ``"cuda"`` devices get larger chunks; every other device the CPU's.

    Returns
    -------
    rows : int
    """
    kind = "cuda" if torch.device(device).type == "cuda" else "cpu"
    steps = routing_plan(arch)
    n_inner = sum(1 for parent, _, leaf in steps if leaf < 0 and parent >= 0)
    per_row = 4 * n_trees * (3 * arch.n_nodes + arch.n_free_leaves + n_inner)
    low, high = INFERENCE_CHUNK_ROWS[kind]
    rows = max(1, INFERENCE_CHUNK_BYTES[kind] // per_row)
    return int(min(high, max(low, 2 ** int(math.log2(rows)))))


@torch.inference_mode()
def predict_chunked(module, X, output="forward", chunk_rows=None):
    """Outputs of ``module`` for every row of ``X``: the one inference kernel.

    The forward pass of :class:`SoftTreeEnsembleModule` without autograd, in
    float32 (the precision the model is trained in; ``sigmoid(-z)`` as
    ``1 - sigmoid(z)``, see :func:`_route_forward`), on chunks of exactly
    ``chunk_rows`` rows: the last chunk is padded with zero rows. Every row
    therefore goes through the same kernels with the same shapes whatever the
    number of rows in ``X``, so its result does not depend on how rows are
    batched: bit-identical in our tests on the CPU with 1, 2 and 3 threads,
    for chunks of a multiple of 64 rows (the default always is; with odd
    chunk sizes the vectorized loops' scalar tails moved results by one
    float32 ulp). The chunk's buffers are allocated once and
    reused, sized to stay in cache (:func:`inference_chunk_rows`), and ``X``
    is converted to float32 chunk by chunk, without a full copy.

    Parameters
    ----------
    module : SoftTreeEnsembleModule
        The model; its parameters' device is where the kernel runs.
    X : ndarray of shape (n_samples, n_features)
        Input rows (any float dtype and memory layout).
    output : {"forward", "tree_outputs"}, default="forward"
        The ensemble output ``(n_samples, C)`` or the per-tree outputs
        ``(n_samples, M, C)``.
    chunk_rows : int, default=None
        Rows per chunk (positive); ``None`` uses :func:`inference_chunk_rows`.

    Returns
    -------
    out : ndarray of float64
        The outputs (float32 values, widened).
    """
    if output not in ("forward", "tree_outputs"):
        raise ValueError(f"output must be 'forward' or 'tree_outputs', got {output!r}.")
    device = module.split_weight.device
    dtype = torch.float32
    M, N, Fdim = module.split_weight.shape
    L, C = module.leaf_value.shape[1:]
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != Fdim:
        raise ValueError(f"X must have shape (n_samples, {Fdim}), got {X.shape}.")
    n = X.shape[0]
    if chunk_rows is not None and not (isinstance(chunk_rows, int) and chunk_rows > 0):
        raise ValueError(f"chunk_rows must be a positive int or None, got {chunk_rows!r}.")
    B = chunk_rows or inference_chunk_rows(module.arch, M, device)
    steps = module._steps
    W = module.split_weight.detach().to(dtype).transpose(0, 1).reshape(N * M, Fdim)
    b = module.split_bias.detach().to(dtype).transpose(0, 1).reshape(N * M, 1)
    leaf = module.leaf_value.detach().to(dtype)
    if output == "forward":
        lead = leaf.transpose(0, 1).reshape(L * M, C).T.contiguous()  # (C, L*M)
        chunk_out = torch.empty((C, B), dtype=dtype, device=device)
        result = torch.empty((n, C), dtype=dtype, device=device)
    else:
        leaf_t = leaf.transpose(1, 2).contiguous()  # (M, C, L)
        chunk_out = torch.empty((M, C, B), dtype=dtype, device=device)
        result = torch.empty((n, M, C), dtype=dtype, device=device)
    z = torch.empty((N * M, B), dtype=dtype, device=device)
    buffers = _routing_buffers(steps, N, L, (M, B), dtype, device)
    mu = buffers[1]
    xbuf = torch.zeros((B, Fdim), dtype=dtype, device=device)
    if device.type == "cpu":
        xbuf_np = xbuf.numpy()
    else:
        X_dev = torch.tensor(X, dtype=dtype, device=device)
    for start in range(0, n, B):
        rows = min(B, n - start)
        if rows < B:
            xbuf.zero_()
        if device.type == "cpu":
            xbuf_np[:rows] = X[start : start + rows]
        else:
            xbuf[:rows].copy_(X_dev[start : start + rows])
        torch.addmm(b, W, xbuf.T, out=z)
        _route_forward(z.view(N, M, B), steps, L, buffers, exact_complement=False)
        if output == "forward":
            torch.mm(lead, mu.view(L * M, B), out=chunk_out)
            result[start : start + rows] = chunk_out.T[:rows]
        else:
            torch.bmm(leaf_t, mu.transpose(0, 1), out=chunk_out)  # (M, C, L) @ (M, L, B)
            result[start : start + rows] = chunk_out.permute(2, 0, 1)[:rows]
    return result.cpu().numpy().astype(np.float64)


def reference_forward(arch, params, X):
    """Slow, obviously-correct NumPy forward (loop over trees and leaves).

    Used by the tests as the ground truth of the vectorized kernel. Returns
    per-tree outputs of shape ``(n_samples, M, C)``.
    """
    X = np.asarray(X, dtype=np.float64)
    M = params.n_trees
    out = np.zeros((X.shape[0], M, params.n_outputs))
    for m in range(M):
        z = X @ params.split_weight[m].T.astype(np.float64) + params.split_bias[m]
        s = 1.0 / (1.0 + np.exp(-z))
        for j, leaf in enumerate(arch.free_leaves):
            mu = np.ones(X.shape[0])
            for n in range(arch.n_nodes):
                c = arch.code[leaf, n]
                if c == 1:
                    mu = mu * s[:, n]
                elif c == -1:
                    mu = mu * (1.0 - s[:, n])
            out[:, m] += mu[:, None] * params.leaf_value[m, j][None, :]
    return out

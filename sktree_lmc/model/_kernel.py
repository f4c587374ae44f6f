"""A fused CPU training kernel of the soft tree ensemble, compiled with numba.

The torch path (:class:`~sktree_lmc.model._forward._Ensemble`) computes the split
logits, the two-sided sigmoids, the leaf probabilities and the leaf
contraction as whole tensors of trees x rows (and leaves), which a training
step writes and reads about 150 times: it runs at the speed of memory
(``docs/benchmarks.md``, "The training step's profile"). This kernel computes
the same function, and its gradients with respect to the split weights, the
split biases and the leaf values, block by block: for a block of
:data:`ROW_BLOCK` rows and one tree at a time, the logits, sigmoids and
routing products of that tree live in a few kilobytes of scratch that stay in
the L1 cache, and only the block's output (rows x outputs), the per-tree
gradients and, for the backward pass, the sigmoids (``2N`` floats per tree
and row) are written. Nothing of size trees x rows x leaves reaches memory:
the backward pass recomputes the routing products from the kept sigmoids.

Every architecture is covered, through the routing schedule of
:func:`~sktree_lmc.model._forward.routing_plan` (the same table the torch path
runs): position ``i`` is ``pos[parent] * s[sig]``, ``s`` the stack of
``sigmoid(z)`` and ``sigmoid(-z)``. The backward pass is the torch path's
closed form: with ``h_l = mu_l * sum_c pi_lc g_c`` and ``H`` its sums over the
leaves reached through each sigmoid (a reverse sweep over the schedule),
``dz_n = sigmoid(-z_n) H_n^left - sigmoid(z_n) H_n^right``.

The sigmoids come from one exponential, ``e = exp(-z)``: ``sigmoid(z) =
1 / (1 + e)`` and ``sigmoid(-z) = e * sigmoid(z)``, with ``exp`` evaluated by a
range reduction and a degree-6 polynomial that the compiler vectorizes (numba
without Intel's SVML calls the C library's scalar ``expf``). Its relative
error is about 2e-7 on the logits of trained models and at most about 1e-5
for logits beyond +-60, where the sigmoids are below 1e-26.

Work is split into a fixed number of chunks of trees (:data:`TREE_CHUNKS`),
whatever the number of threads: each chunk writes its own partial output,
summed in chunk order, and the gradients of a tree are written by the chunk
that owns it. The results are therefore the same, bit for bit, with one
thread or several. With ``n_threads > 1`` groups of chunks run in parallel,
in Python threads (the compiled code releases the GIL; see :func:`_run`).

Results are equal to the torch path's up to float32 rounding (the sums run
in another order; ``tests/test_fused_kernel.py``), not bit for bit.

Which path a training step takes is chosen by :func:`engine`, or the
environment variable ``SKTREE_LMC_ENGINE`` (``"auto"``, the default: this
kernel where numba imports and the tensors are float32 on the CPU, else the
torch path, which stays the reference and runs on GPUs);
:class:`~sktree_lmc.model._forward.SoftTreeEnsembleModule` consults
:func:`fused_active` while :func:`~sktree_lmc.training._training.train` runs, so the
kernel serves the estimators' training loops (their forward and backward
passes of the trees, the members of ``n_members`` included) and nothing
else: prediction keeps :func:`~sktree_lmc.model._forward.predict_chunked`.

Its speed: ``benchmarks/bench_kernel.py`` and ``docs/benchmarks.md``, "The
fused CPU kernel"."""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch

__all__ = [
    "ENGINES",
    "FusedAdditive",
    "FusedEnsemble",
    "engine",
    "fused_adam",
    "fused_additive",
    "fused_active",
    "fused_available",
    "fused_ensemble",
    "resolve_engine",
    "training_engine",
    "training_loop",
]

#: The engines :func:`engine` accepts.
ENGINES = ("auto", "torch", "numba")

#: The engine of training when neither :func:`engine` nor the environment
#: variable ``SKTREE_LMC_ENGINE`` says otherwise.
DEFAULT_ENGINE = "auto"

#: Rows per block (``_fused_numba.RB``): the scratch of one tree for one
#: block (logits, sigmoids, routing positions, float32) is ``(N + 2N + P) *
#: ROW_BLOCK * 4`` bytes, 11 KB for oblivious trees of depth 4 and 19 KB for
#: perfect trees of depth 4.
ROW_BLOCK = 128

#: Chunks of trees the work is split into (fixed, so that results do not
#: depend on the number of threads).
TREE_CHUNKS = 8

_STATE = threading.local()


def _default_engine():
    value = os.environ.get("SKTREE_LMC_ENGINE", DEFAULT_ENGINE)
    if value not in ENGINES:
        raise ValueError(
            f"SKTREE_LMC_ENGINE must be one of {ENGINES}, got {value!r}.")
    return value


def resolve_engine(name=None):
    """The engine that training uses: ``"torch"`` or ``"numba"``.

    Parameters
    ----------
    name : {"auto", "torch", "numba"} or None, default=None
        ``None`` reads the setting of :func:`engine` (default: the environment
        variable ``SKTREE_LMC_ENGINE``, else :data:`DEFAULT_ENGINE`). ``"auto"`` is
        ``"numba"`` when numba imports, else ``"torch"``.

    Returns
    -------
    str
        ``"torch"`` or ``"numba"``.

    Raises
    ------
    ValueError
        If the name is not one of :data:`ENGINES`.
    ImportError
        If ``"numba"`` is asked for and numba does not import.
    """
    if name is None:
        name = getattr(_STATE, "engine", None) or _default_engine()
    if name not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {name!r}.")
    if name == "torch":
        return "torch"
    if fused_available():
        return "numba"
    if name == "numba":
        raise ImportError(
            "engine='numba' needs numba (pip install 'sktree_lmc[fast]' or numba>=0.59).")
    return "torch"


@contextmanager
def engine(name):
    """Choose the training engine for the block (in this thread).

    Parameters
    ----------
    name : {"auto", "torch", "numba"}
        ``"torch"``: the tensor path of :mod:`sktree_lmc.model._forward` (the
        reference); ``"numba"``: the fused kernel of this module, an
        ImportError without numba; ``"auto"``: the kernel where numba
        imports. The kernel runs only on CPU float32 tensors; elsewhere the
        torch path runs whatever the choice.

    Examples
    --------
    >>> from sktree_lmc.model._kernel import engine
    >>> with engine("torch"):  # fit with the reference path
    ...     pass
    """
    resolve_engine(name)  # validate (and fail early without numba)
    previous = getattr(_STATE, "engine", None)
    _STATE.engine = name
    try:
        yield
    finally:
        _STATE.engine = previous


@contextmanager
def training_engine(name="auto"):
    """Train the soft trees with the engine ``name`` inside the block.

    On the CPU, the forward and backward passes of the trees can run in a
    fused kernel compiled with numba (the ``fast`` extra), which keeps each
    block of rows in cache, or as tensor operations of torch. The estimators'
    ``fit`` and ``partial_fit`` choose as the environment variable
    ``SKTREE_LMC_ENGINE`` says (``"auto"`` by default); inside this block,
    they and the forward passes of a :class:`SoftTreeEnsembleModule` use
    ``name`` instead (in this thread). Both engines compute the same function
    and gradients up to float32 rounding; prediction and GPUs always use
    torch.

    Parameters
    ----------
    name : {"auto", "torch", "numba"}, default="auto"
        ``"numba"``: the fused kernel (an ImportError without numba);
        ``"torch"``: the tensor path, the reference; ``"auto"``: the kernel
        where numba imports, else torch.

    Yields
    ------
    None
        The block runs with the engine.

    Raises
    ------
    ValueError
        If ``name`` is not one of these.
    ImportError
        If ``name`` is ``"numba"`` and numba does not import.

    Examples
    --------
    >>> import torch
    >>> from sktree_lmc import SoftTreeEnsembleModule, get_architecture, training_engine
    >>> module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), n_trees=4,
    ...                                 n_features=3, n_outputs=2,
    ...                                 generator=torch.Generator().manual_seed(0))
    >>> X = torch.randn(5, 3)
    >>> with training_engine("torch"):
    ...     reference = module(X)
    >>> with training_engine("auto"):  # the fused kernel where numba is installed
    ...     out = module(X)
    >>> bool(torch.allclose(out, reference, atol=1e-6))
    True
    """
    with engine(name), training_loop():
        yield


@functools.lru_cache(maxsize=1)
def fused_available():
    """Whether numba imports (the kernel can be compiled)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def training_loop(grad_mask=None):
    """Mark the block as a training loop that may use the fused kernel
    (:func:`fused_active`), with the engine :func:`engine` chooses; used by
    :func:`sktree_lmc.training._training.train`.

    ``grad_mask`` (a tensor ``(M, F)``, 0 where a tree leaves a feature out,
    or None): the training zeroes those split weights' gradients after the
    backward pass (:class:`~sktree_lmc.training._training.FeatureMask`), so the kernel
    does not compute them (they stay 0).

    With the kernel and several torch threads, the block runs torch's
    operations on one thread and gives the threads to the kernel
    (:func:`_n_threads`); torch's setting is restored on exit."""
    previous = (getattr(_STATE, "training", False), getattr(_STATE, "grad_mask", None),
                getattr(_STATE, "threads", None))
    fused = resolve_engine() == "numba"
    _STATE.training = fused
    _STATE.grad_mask = grad_mask
    _STATE.grad_mask_u8 = None  # its uint8 array, made at the first step (_feature_mask)
    torch_threads = torch.get_num_threads()
    if fused and torch_threads > 1:
        # the threads go to the kernel; torch's operations around it (the optimizer,
        # the additive table, the loss) are too small to share, and torch's OpenMP
        # threads spin while they wait, which stalls the kernel's threads
        _STATE.threads = torch_threads
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != torch_threads:
            torch.set_num_threads(torch_threads)
        _STATE.training, _STATE.grad_mask, _STATE.threads = previous


def fused_active(X, *tensors):
    """Whether a forward pass on ``X`` should take the fused kernel: inside
    :func:`training_loop` with the numba engine, CPU float32 tensors, and an
    input that needs no gradient."""
    if not getattr(_STATE, "training", False):
        return False
    if X.requires_grad or X.device.type != "cpu" or X.dtype != torch.float32:
        return False
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


# ----------------------------------------------------------------------------
# The compiled kernels
# ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _schedule(steps, n_nodes):
    """The routing schedule as int64 arrays: ``parent``, ``sig``, ``leaf``
    (per position, as in :func:`~sktree_lmc.model._forward.routing_plan`),
    ``leaf_pos`` (the position of every free leaf), ``child`` (P, 2) (the
    children of every position, -1 where none) and, for every sigmoid ``k``
    of the ``2 * n_nodes``, the positions reached through it,
    ``sig_pos[sig_ptr[k]:sig_ptr[k + 1]]``."""
    table = np.asarray(steps, dtype=np.int64).reshape(-1, 3)
    parent, sig, leaf = (np.ascontiguousarray(table[:, j]) for j in range(3))
    leaf_pos = np.full(int(leaf.max()) + 1, -1, dtype=np.int64)
    leaf_pos[leaf[leaf >= 0]] = np.flatnonzero(leaf >= 0)
    child = np.full((len(table), 2), -1, dtype=np.int64)
    for i in range(len(table)):
        p = parent[i]
        if p >= 0:
            child[p, 0 if child[p, 0] < 0 else 1] = i
    members = [np.flatnonzero(sig == k) for k in range(2 * n_nodes)]
    sig_ptr = np.cumsum([0] + [len(m) for m in members]).astype(np.int64)
    sig_pos = np.concatenate(members).astype(np.int64)
    return parent, sig, leaf, leaf_pos, child, sig_ptr, sig_pos


@functools.lru_cache(maxsize=64)
def _oblivious_depth(steps, n_nodes):
    """The depth of the oblivious trees whose routing schedule ``steps`` is, where
    :mod:`sktree_lmc.model._oblivious_numba` has kernels for it (depth at most
    :data:`~sktree_lmc.model._oblivious_codegen.MAX_DEPTH`); else None. An
    oblivious tree's schedule: level ``d`` is node ``d``, every path of ``d``
    levels is a position, depth first, left before right, the leaves numbered
    in that order."""
    from ._oblivious_codegen import MAX_DEPTH

    depth = n_nodes
    if not 1 <= depth <= MAX_DEPTH or len(steps) != 2 ** (depth + 1) - 2:
        return None
    expected = []

    def visit(parent, level, leaf):
        for side in (0, 1):
            here = len(expected)
            last = level == depth - 1
            expected.append((parent, level + side * depth, 2 * leaf + side if last else -1))
            if not last:
                visit(here, level + 1, 2 * leaf + side)

    visit(-1, 0, 0)
    return depth if tuple(map(tuple, steps)) == tuple(expected) else None


def _chunk_bounds(M):
    chunks = max(1, min(TREE_CHUNKS, M))
    return np.asarray([M * k // chunks for k in range(chunks + 1)], dtype=np.int64)


def _n_threads():
    """Threads of the kernel: torch's setting (which the estimators'
    ``n_threads`` sets while they run; inside :func:`training_loop`, the
    setting it found), at most the chunks of trees."""
    threads = getattr(_STATE, "threads", None) or torch.get_num_threads()
    return max(1, min(threads, TREE_CHUNKS))


_POOLS = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers):
    """A thread pool of ``workers`` threads, made once per size."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="sktree_lmc_kernel")
        return _POOLS[workers]


def _run(name, depth, *args):
    """Run the compiled ``name`` driver (``"forward"`` or ``"backward"``) on
    every chunk of trees: in this thread, or in groups of consecutive chunks
    over :func:`_n_threads` threads (the compiled code releases the GIL).
    The chunks, and so the results, are the same either way. ``depth``: the
    depth of oblivious trees that :mod:`sktree_lmc.model._oblivious_numba`
    has drivers for (their arguments without the routing plan), else None.

    Python threads rather than ``numba.prange``: numba's OpenMP layer made a
    step 5 times slower with two threads beside another busy process (its
    threads spin while they wait), and its workqueue layer cannot be called
    from two threads at once (concurrent fits)."""
    if depth is None:
        from . import _fused_numba

        fn = getattr(_fused_numba, name + "_serial")
    else:
        from . import _oblivious_numba

        fn = getattr(_oblivious_numba, f"{name}_serial_{depth}")
    threads = _n_threads()
    if threads == 1:
        fn(*args)
        return
    *head, bounds, rest = _split_args(name, args)
    n_chunks = len(bounds) - 1
    groups = [n_chunks * g // threads for g in range(threads + 1)]

    def call(g):
        lo, hi = groups[g], groups[g + 1]
        fn(*head, bounds[lo : hi + 1], *rest(lo, hi))

    futures = [_pool(threads - 1).submit(call, g) for g in range(1, threads)]
    call(0)
    for future in futures:
        future.result()


def _split_args(name, args):
    """``(*head, bounds, rest)`` of a driver's arguments: ``rest(lo, hi)``
    gives the arguments after ``bounds`` for chunks ``lo .. hi`` (the
    forward's partial outputs of those chunks; the backward's gradients are
    shared, each chunk writing its own trees)."""
    *head, bounds, last = args
    if name == "forward":
        parts, S, keep = last
        return (*head, bounds, lambda lo, hi: ((parts[lo:hi], S, keep),))
    return (*head, bounds, lambda lo, hi: (last,))


def _as_array(t):
    return t.detach().contiguous().numpy()


def blocked(A):
    """Rows ``A`` (B, K) as blocks of :data:`ROW_BLOCK` rows, each transposed:
    ``(n_blocks, K, ROW_BLOCK)`` float32, the last block padded with zero
    rows."""
    A = np.asarray(A, dtype=np.float32)
    B, K = A.shape
    n_blocks = -(-B // ROW_BLOCK)
    out = np.zeros((n_blocks * ROW_BLOCK, K), dtype=np.float32)
    out[:B] = A
    return np.ascontiguousarray(out.reshape(n_blocks, ROW_BLOCK, K).transpose(0, 2, 1))


def unblocked(Ab, B):
    """The inverse of :func:`blocked`: ``(B, K)`` from ``(n_blocks, K, ROW_BLOCK)``."""
    return Ab.transpose(0, 2, 1).reshape(-1, Ab.shape[1])[:B]


def fused_forward_arrays(Xb, W, bias, pi, steps, keep=False):
    """The ensemble output ``(n_blocks, C, ROW_BLOCK)`` of the fused kernel on
    NumPy arrays (``Xb``: the inputs as :func:`blocked` makes them; ``W``
    (M, N, F), ``bias`` (M, N), ``pi`` (M, L, C), float32 and C-contiguous).

    Returns ``(out, S)``: ``S`` the sigmoids ``(n_blocks, M, 2N, ROW_BLOCK)``
    (for the oblivious trees of :mod:`sktree_lmc.model._oblivious_numba`,
    ``exp(-z)``, ``(n_blocks, M, N, ROW_BLOCK)``) that
    :func:`fused_backward_arrays` needs when ``keep``, else None."""
    bounds = _chunk_bounds(W.shape[0])
    parts = np.zeros((len(bounds) - 1, Xb.shape[0], pi.shape[2], ROW_BLOCK), dtype=np.float32)
    depth = _oblivious_depth(steps, W.shape[1])
    # kept per tree and row: both sigmoids (2N floats), or for oblivious trees exp(-z) (N)
    rows = 2 * W.shape[1] if depth is None else W.shape[1]
    shape = ((Xb.shape[0], W.shape[0]) if keep else (1, 1)) + (rows, ROW_BLOCK)
    S = _take_buffer(shape) if keep else np.empty(shape, dtype=np.float32)
    if depth is None:
        _run("forward", None, Xb, (W, bias, pi), _schedule(steps, W.shape[1]), bounds,
             (parts, S, keep))
    else:
        _run("forward", depth, Xb, (W, bias, pi), bounds, (parts, S, keep))
    out = parts[0]
    for k in range(1, len(parts)):
        out += parts[k]
    return out, (S if keep else None)


_BUFFERS = threading.local()


def _take_buffer(shape):
    """A float32 array of ``shape`` for the kept sigmoids: one given back by
    :func:`_give_buffer` in this thread when there is one (a fresh array of
    megabytes each step costs its page faults), else a new one."""
    pool = getattr(_BUFFERS, "pool", None)
    if pool is not None and pool.shape == shape:
        _BUFFERS.pool = None
        return pool
    return np.empty(shape, dtype=np.float32)


def _give_buffer(S):
    """Keep ``S`` for the next :func:`_take_buffer` of this thread (once the
    backward pass no longer needs it)."""
    _BUFFERS.pool = S


def fused_backward_arrays(Xb, W, bias, pi, Gb, steps, *, S, fmask=None):
    """The gradients ``(gW, gb, gpi)`` of the fused kernel, given the
    output's gradient ``Gb`` (n_blocks, C, ROW_BLOCK), blocked as ``Xb``, and
    the sigmoids ``S`` of :func:`fused_forward_arrays`. ``fmask`` (uint8,
    ``(M, F)``): the split weights' gradients computed, the others left 0
    (None: all)."""
    if fmask is None:
        fmask = _ones_mask(W.shape[0], W.shape[2])
    bounds = _chunk_bounds(W.shape[0])
    gW = np.zeros(W.shape, dtype=np.float32)
    gb = np.zeros(bias.shape, dtype=np.float32)
    gpi = np.zeros(pi.shape, dtype=np.float32)
    grads = (gW, gb, gpi, fmask)
    depth = _oblivious_depth(steps, W.shape[1])
    if depth is None:
        _run("backward", None, (Xb, Gb, S), (W, bias, pi), _schedule(steps, W.shape[1]), bounds,
             grads)
    else:
        flat = (Xb, Gb, S.reshape(S.shape[:2] + (-1,)))
        _run("backward", depth, flat, (W, bias, pi), bounds, grads)
    return gW, gb, gpi


class FusedEnsemble(torch.autograd.Function):
    """Ensemble output ``(B, C)`` of inputs ``X`` (B, F), split weights
    ``(M, N, F)``, split biases ``(M, N)`` and leaf values ``(M, L, C)`` through
    the fused kernel; ``X`` gets no gradient. ``keep``: keep the sigmoids
    for the backward pass (:func:`fused_forward_arrays`). The arguments after
    the tensors that get gradients travel as one tuple, ``options``: ``(steps,
    keep, fmask)``, the routing schedule, ``keep`` and the uint8 mask of the
    split weights' gradients computed."""

    @staticmethod
    def forward(ctx, X, weight, bias, pi, options):
        steps, keep, fmask = options
        Xb = blocked(_as_array(X))
        arrays = (_as_array(weight), _as_array(bias), _as_array(pi))
        out, S = fused_forward_arrays(Xb, *arrays, steps, keep=keep)
        ctx.arrays = (Xb,) + arrays + (S, fmask)
        ctx.steps = steps
        return torch.from_numpy(np.ascontiguousarray(unblocked(out, X.shape[0])))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        Xb, W, bias, pi, S, fmask = ctx.arrays
        Gb = blocked(_as_array(grad_out.to(torch.float32)))
        gW, gb, gpi = fused_backward_arrays(Xb, W, bias, pi, Gb, ctx.steps, S=S, fmask=fmask)
        del ctx.arrays
        _give_buffer(S)
        return (None, torch.from_numpy(gW), torch.from_numpy(gb), torch.from_numpy(gpi), None)


def fused_ensemble(X, weight, bias, pi, steps):
    """The ensemble output of :class:`FusedEnsemble` (autograd-aware).

    Parameters
    ----------
    X : torch.Tensor of shape (B, F)
        Inputs (float32, CPU; no gradient flows to them).
    weight : torch.Tensor of shape (M, N, F)
        Split weights.
    bias : torch.Tensor of shape (M, N)
        Split biases.
    pi : torch.Tensor of shape (M, L, C)
        Leaf values of the free leaves.
    steps : tuple
        The routing schedule, :func:`~sktree_lmc.model._forward.routing_plan`.

    Returns
    -------
    torch.Tensor of shape (B, C)
        ``sum_m sum_l mu_{m l}(x) pi_{m l}``.
    """
    keep = torch.is_grad_enabled() and any(t.requires_grad for t in (weight, bias, pi))
    return FusedEnsemble.apply(X, weight, bias, pi, (steps, keep, _feature_mask(weight)))


def _feature_mask(weight):
    """The uint8 ``(M, F)`` mask of the split weights whose gradients are
    computed: the training's gradient mask (:func:`training_loop`) where it
    has the weights' shape, else all ones."""
    M, _, F = weight.shape
    mask = getattr(_STATE, "grad_mask", None)
    if mask is None or tuple(mask.shape) != (M, F):
        return _ones_mask(M, F)
    made = getattr(_STATE, "grad_mask_u8", None)
    if made is None or made[0] is not mask:  # once per training loop (the mask is fixed)
        made = _STATE.grad_mask_u8 = (mask, (mask.detach().cpu() != 0).to(torch.uint8).numpy())
    return made[1]


@functools.lru_cache(maxsize=8)
def _ones_mask(M, F):
    ones = np.ones((M, F), dtype=np.uint8)
    ones.setflags(write=False)
    return ones


# ----------------------------------------------------------------------------
# Around the trees: the additive table and Adam
# ----------------------------------------------------------------------------


def _cpu_float32(*tensors):
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


class FusedAdditive(torch.autograd.Function):
    """The additive term ``sum_j (table * scale)[codes[:, j]]`` (B, C) of the
    compiled gather, and the table's gradient by one compiled scatter-add
    (where torch gathers a (B, J, C) tensor, sums it, and in the backward
    pass accumulates an index_put and multiplies the whole table by
    ``scale`` twice). ``scale`` (T, 1) gets no gradient; ``codes`` none."""

    @staticmethod
    def forward(ctx, codes, table, scale):
        codes_a = np.ascontiguousarray(codes.detach().cpu().numpy())
        scale_a = (_NO_SCALE if scale is None else _as_array(scale))
        table_a = _as_array(table)
        out = np.empty((codes_a.shape[0], table_a.shape[1]), dtype=np.float32)
        from . import _fused_numba

        _fused_numba.additive_gather(table_a, scale_a, codes_a, out)
        ctx.arrays = (codes_a, scale_a, table_a.shape)
        return torch.from_numpy(out)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        codes_a, scale_a, shape = ctx.arrays
        del ctx.arrays
        from . import _fused_numba

        gtable = np.zeros(shape, dtype=np.float32)
        _fused_numba.additive_scatter(_as_array(grad_out.to(torch.float32)), scale_a, codes_a,
                                      gtable)
        return None, torch.from_numpy(gtable), None


_NO_SCALE = np.zeros((0, 1), dtype=np.float32)


def fused_additive(codes, table, scale=None):
    """The additive term of rows ``codes`` through :class:`FusedAdditive`
    inside a training loop of the numba engine (:func:`training_loop`) with
    CPU float32 tensors, else None (the caller takes torch's path).

    Parameters
    ----------
    codes : torch.Tensor of int of shape (B, J)
        Table rows per code column.
    table : torch.Tensor of shape (T, C)
        The additive table (a parameter).
    scale : torch.Tensor of shape (T, 1) or None, default=None
        A factor per row (no gradient), or None.

    Returns
    -------
    torch.Tensor of shape (B, C) or None
    """
    if not getattr(_STATE, "training", False) or codes.device.type != "cpu":
        return None
    if not _cpu_float32(table, *(() if scale is None else (scale,))):
        return None
    if scale is not None and scale.requires_grad:
        return None
    return FusedAdditive.apply(codes, table, scale)


def fused_adam(params, grads, moments, steps, hyper, *, cache=None):
    """One Adam step of ``params`` through the compiled update (one pass over
    each parameter, :func:`~sktree_lmc.model._fused_numba.adam_update`)
    inside a training loop of the numba engine with CPU float32 tensors;
    returns False (nothing done) elsewhere, where the caller runs torch's
    kernel.

    Parameters
    ----------
    params, grads : list of torch.Tensor
        The parameters (updated in place) and their gradients.
    moments : tuple of two lists of torch.Tensor
        ``(exp_avgs, exp_avg_sqs)``, updated in place.
    steps : list of torch.Tensor
        Each parameter's step count (a CPU float32 scalar tensor), incremented.
    hyper : tuple
        ``(lr, beta1, beta2, eps)``.
    cache : dict or None, default=None
        The optimizer's: the NumPy views of each parameter's tensors, kept from
        step to step while they stay the same (views cost microseconds a step).

    Returns
    -------
    bool
    """
    if not getattr(_STATE, "training", False):
        return False
    exp_avgs, exp_avg_sqs = moments
    arrays = []
    for p, g, m, v, step_t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
        held = _adam_arrays(p, m, v, step_t, {} if cache is None else cache)
        if held is None or not (g.is_cpu and g.dtype == torch.float32 and g.is_contiguous()):
            return False
        arrays.append((held, g))
    from . import _fused_numba

    hyper = np.asarray(hyper, dtype=np.float64)
    for (p_a, m_a, v_a, step_a), g in arrays:
        _fused_numba.adam_update((p_a, g.view(-1).numpy(), m_a, v_a), step_a, hyper)
    return True


def _adam_arrays(p, m, v, step_t, cache):
    """The flat NumPy views ``(p, m, v, step)`` of :func:`fused_adam`, from
    ``cache`` (``id(p)`` -> ``(p, m, v, step, data pointer, views)``) while
    its tensors and storage are the same; None where a tensor is not a
    contiguous CPU float32 one."""
    found = cache.get(id(p))
    if (found is not None and found[0] is p and found[1] is m and found[2] is v
            and found[3] is step_t and found[4] == p.data_ptr()):
        return found[5]
    if not all(t.is_cpu and t.dtype == torch.float32 and t.is_contiguous()
               for t in (p, m, v, step_t)):
        return None
    arrays = (p.detach().view(-1).numpy(), m.view(-1).numpy(), v.view(-1).numpy(),
              step_t.view(1).numpy())
    cache[id(p)] = (p, m, v, step_t, p.data_ptr(), arrays)
    return arrays

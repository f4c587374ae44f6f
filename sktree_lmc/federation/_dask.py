"""The dask layer: what the sharded fit and the federated leaf refit share.

Both the federated rounds (:class:`~sktree_lmc.federation._federated._DaskShards`, with
the boosting sites of :class:`~sktree_lmc.federation._federated._DaskSites`) and the
federated :func:`~sktree_lmc.refit_leaves`
(:class:`~sktree_lmc.merging._refit._FederatedLeafObjective`) run on dask partitions
that are computed on the workers and never gathered to the client. Both talk to
the cluster through one :class:`DaskSession`: it sends work to the workers
(:meth:`~DaskSession.submit`, :meth:`~DaskSession.send`), computes the
partitions there (:meth:`~DaskSession.partitions`), gathers the results
(:meth:`~DaskSession.gather`), words the :class:`WorkerLostError` of a lost
cluster with the caller's ``describe`` and, when the workers are lost,
cancels everything the failed fit or refit submitted
(:meth:`~DaskSession.cancel_all`). The pieces it is made of:

- :func:`is_dask_collection`, the partitions of the inputs
  (:func:`aligned_partitions`, computed on the workers by
  :func:`compute_partitions`), the running client (:func:`running_client`,
  with a clear error when there is none) and :func:`scatter_fresh`, which
  sends a model to the workers;
- :func:`gather_with_timeout`, the only place where their results are
  waited for: in slices of :data:`POLL` seconds, counting the scheduler's
  workers between slices, so that a cluster without workers (or a task lost
  with its workers) ends in a :class:`WorkerLostError` that names what was
  running, instead of a wait that never ends (:func:`scatter_fresh` gives up
  after the same ``worker_timeout`` with the same error).

Nothing here imports dask at module level (dask is an optional extra), and
nothing here imports another module of the package: this is the bottom of
the dask code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import weakref

from sklearn.utils.validation import check_is_fitted

__all__: list = []

#: Seconds of one wait on the futures before the scheduler's workers are counted.
POLL = 0.5

#: Default ``worker_timeout`` (seconds without any worker before the wait gives
#: up), as ``ShardedSoftTreeEnsemble(worker_timeout=60.0)``.
WORKER_TIMEOUT = 60.0


class WorkerLostError(RuntimeError):
    """The dask workers of a sharded fit were lost: the fit stopped.

    Raised when the scheduler has had no worker for ``worker_timeout``
    seconds while the fit waits on the shards, or when a shard's task was
    lost with its workers (``distributed.KilledWorker``, a task cancelled for
    lost dependencies). The message names the round, what was running and
    the unfinished shards (for the federated :func:`~sktree_lmc.refit_leaves`:
    ``refit_leaves``, what was running and the unfinished partitions). A
    :class:`RuntimeError` (not a :class:`TimeoutError`, which is an
    :class:`OSError`): what failed is the cluster the fit runs on, not an
    operation of this process, and a lost task is no timeout at all.

    See Also
    --------
    ShardedSoftTreeEnsemble : Its ``worker_timeout`` and ``checkpoint``.

    Examples
    --------
    >>> from sktree_lmc import WorkerLostError
    >>> issubclass(WorkerLostError, RuntimeError)
    True
    """


def is_dask_collection(obj):
    """Whether ``obj`` is a dask collection (without importing dask otherwise).

    Parameters
    ----------
    obj : object
        Anything.

    Returns
    -------
    bool
        False when dask is not installed.
    """
    try:
        import dask
    except ImportError:  # pragma: no cover - dask not installed
        return False
    return dask.is_dask_collection(obj)


def _partitions(obj, name):
    """The delayed partitions (along rows) of a dask array, DataFrame or Series,
    and the row counts of the partitions of an array (None for a DataFrame)."""
    import dask.array as da

    if isinstance(obj, da.Array):
        if obj.ndim > 1 and obj.numblocks[1] > 1:
            obj = obj.rechunk({1: -1})
        parts = list(obj.to_delayed().reshape(-1)) if obj.ndim > 1 else list(obj.to_delayed())
        sizes = obj.chunks[0]
    elif hasattr(obj, "to_delayed"):  # dask DataFrame / Series
        parts = list(obj.to_delayed())
        sizes = None
    else:
        raise TypeError(f"{name} must be a dask array or DataFrame when X is one, "
                        f"got {type(obj).__name__}.")
    return parts, sizes


def aligned_partitions(X, y, sample_weight=None):
    """The delayed partitions of ``X``, ``y`` and ``sample_weight``, checked to
    be partitioned alike.

    Parameters
    ----------
    X, y : dask array, DataFrame or Series
        The inputs and the targets.
    sample_weight : dask array or Series, default=None
        The sample weights, or None.

    Returns
    -------
    X_parts, y_parts, w_parts : list of dask.delayed.Delayed
        One item per partition (``w_parts`` is ``[]`` when ``sample_weight``
        is None).

    Raises
    ------
    TypeError
        When one of them is no dask collection.
    ValueError
        When their numbers of partitions differ (the message says how).
    """
    X_parts, _ = _partitions(X, "X")
    y_parts, _ = _partitions(y, "y")
    w_parts = [] if sample_weight is None else _partitions(sample_weight, "sample_weight")[0]
    P = len(X_parts)
    if len(y_parts) != P or (w_parts and len(w_parts) != P):
        raise ValueError(
            f"X has {P} partitions but y has {len(y_parts)}"
            + (f" and sample_weight {len(w_parts)}" if w_parts else "")
            + "; they must be partitioned alike."
        )
    return X_parts, y_parts, w_parts


def compute_partitions(client, parts):
    """The partitions of :func:`aligned_partitions` computed on the workers:
    futures, never gathered to the client.

    Parameters
    ----------
    client : distributed.Client
        The running client.
    parts : tuple of 3 lists
        ``(X_parts, y_parts, w_parts)`` as :func:`aligned_partitions` returns
        them.

    Returns
    -------
    X_futures, y_futures, w_futures : list of distributed.Future
        One future per partition (``w_futures`` is ``[]`` without sample
        weights). Drop them once the tasks that use them are submitted, so
        that the workers can release what those tasks no longer need.
    """
    X_parts, y_parts, w_parts = parts
    P = len(X_parts)
    futures = client.compute(X_parts + y_parts + w_parts)
    return futures[:P], futures[P : 2 * P], futures[2 * P :]


def running_client(call, subject=None):
    """The running ``dask.distributed`` client.

    Parameters
    ----------
    call : str
        What needs it, as the error names it: ``"fit"``, ``"refit_leaves"``.
    subject : str, default=None
        The subject of the error when ``distributed`` is not installed
        (``"Fitting"``: "Fitting on dask collections needs ..."); ``call``
        when None.

    Returns
    -------
    distributed.Client

    Raises
    ------
    ImportError
        When ``distributed`` is not installed.
    ValueError
        When no client is running.
    """
    try:
        from distributed import get_client
    except ImportError as exc:  # pragma: no cover - extra not installed
        raise ImportError(
            f"{subject or call} on dask collections needs dask.distributed "
            "(pip install 'dask[distributed]', or the project's 'distributed' extra)."
        ) from exc
    try:
        return get_client()
    except ValueError as exc:
        raise ValueError(
            "X is a dask collection but no dask.distributed Client is running: create "
            f"one (e.g. Client(LocalCluster())) before calling {call}."
        ) from exc


def scatter_fresh(client, obj, message, *, worker_timeout=WORKER_TIMEOUT, names=()):
    """``obj`` sent to every worker once, under a fresh key.

    ``hash=False``: with the content hash, two calls that scatter the same
    object (the training and validation losses of one round, two refits of
    one model) share one key, and the release of the first call's future can
    drop the data the second uses ("lost dependencies").

    Parameters
    ----------
    client : distributed.Client
        The running client.
    obj : object
        What to send (a model, parameters).
    message : callable
        ``message(unfinished, why) -> str``, as for
        :func:`gather_with_timeout`; ``unfinished`` is ``list(names)``.
    worker_timeout : float, default=60.0
        Seconds that the scatter waits for a worker when the scheduler has
        none (dask's scatter waits for workers, then raises a
        :class:`TimeoutError`).
    names : iterable, default=()
        The units (shards, partitions) that wait for ``obj``.

    Returns
    -------
    distributed.Future

    Raises
    ------
    WorkerLostError
        When the scheduler had no worker for ``worker_timeout`` seconds.
    """
    try:
        return client.scatter(obj, broadcast=True, hash=False, timeout=worker_timeout)
    except (TimeoutError, asyncio.TimeoutError) as exc:
        raise WorkerLostError(message(
            list(names),
            f"the scheduler has had no worker for {worker_timeout:.1f} s "
            f"(worker_timeout={worker_timeout:g}; {exc})")) from exc


def gather_with_timeout(client, futures, message, *, worker_timeout=WORKER_TIMEOUT,
                        names=None, unit="shard", poll=POLL):
    """The results of ``futures``, or a :class:`WorkerLostError` when the
    workers are lost.

    The futures are waited for in slices of ``poll`` seconds, and the
    scheduler's workers are counted between slices: after ``worker_timeout``
    seconds without any worker the futures are cancelled and a
    :class:`WorkerLostError` is raised. A task lost with its workers
    (``distributed.KilledWorker``, or cancelled, e.g. for lost dependencies)
    raises it too, without waiting for the other tasks. Workers that die and
    come back (a nanny, an autoscaler) only cost what dask recomputes, and
    long tasks on live workers are never timed out. A task's own error (its
    data, its fit) is raised as it is.

    Parameters
    ----------
    client : distributed.Client
        The client of the futures.
    futures : iterable of distributed.Future
        One future per unit (shard, partition).
    message : callable
        ``message(unfinished, why) -> str``, the error's message:
        ``unfinished`` is the list of the names of the units whose tasks did
        not finish (or were lost), ``why`` a sentence fragment ("the
        scheduler has had no worker for 3.1 s (worker_timeout=3)", "the tasks
        of shard(s) [1] were lost with their workers (KilledWorker: ...)").
    worker_timeout : float, default=60.0
        Seconds without any worker before the wait gives up.
    names : list, default=None
        The names of the units of ``futures``, in order (``0, 1, ...`` when
        None).
    unit : str, default="shard"
        What a future is, as ``why`` names it (``"shard"``, ``"partition"``).
    poll : float, default=0.5
        Seconds of one wait before the workers are counted.

    Returns
    -------
    list
        The results, in the order of ``futures``.

    Raises
    ------
    WorkerLostError
        When the workers were lost (see above).
    """
    from distributed import KilledWorker, wait

    def lost(f):
        return f.cancelled() or (f.status == "error" and isinstance(f.exception(), KilledWorker))

    futures = list(futures)
    names = list(range(len(futures)) if names is None else names)
    no_worker_since = None
    while True:
        try:
            wait(futures, timeout=poll)
            break
        except concurrent.futures.CancelledError:  # statuses looked at below
            break
        except (TimeoutError, asyncio.TimeoutError):
            pass
        if any(lost(f) for f in futures if f.done()):
            break  # no need to wait for the other tasks
        if client.nthreads():
            no_worker_since = None
            continue
        now = time.monotonic()
        if no_worker_since is None:
            no_worker_since = now
        elif now - no_worker_since >= worker_timeout:
            unfinished = [names[i] for i, f in enumerate(futures) if not f.done()]
            client.cancel(futures)
            raise WorkerLostError(message(
                unfinished,
                f"the scheduler has had no worker for {now - no_worker_since:.1f} s "
                f"(worker_timeout={worker_timeout:g})"))
    reasons = {names[i]: "cancelled" if f.cancelled() else f"KilledWorker: {f.exception()}"
               for i, f in enumerate(futures) if f.done() and lost(f)}
    if reasons:
        unfinished = [names[i] for i, f in enumerate(futures)
                      if names[i] in reasons or not f.done()]
        client.cancel(futures)
        raise WorkerLostError(message(
            unfinished,
            f"the tasks of {unit}(s) {sorted(reasons)} were lost with their workers ("
            + "; ".join(sorted(set(reasons.values()))) + ")"))
    return client.gather(futures)


class DaskSession:
    """The dask work of one sharded fit or one federated leaf refit.

    Every task it submits is kept (weakly: a result no longer referenced is
    released as usual), so that when the workers are lost everything the fit
    submitted is cancelled and nothing of it is left running or queued for
    the next fit on the client to wait behind. Every wait goes through
    :func:`gather_with_timeout` (or :func:`scatter_fresh` for what is sent to
    every worker), with the same ``worker_timeout`` and the caller's wording
    of the :class:`WorkerLostError`.

    Parameters
    ----------
    call : str
        What runs, as the error without a client names it (``"fit"``,
        ``"refit_leaves"``; :func:`running_client`).
    describe : callable
        ``describe(what, unfinished, why) -> str``: the message of the
        :class:`WorkerLostError` raised while ``what`` runs (``unfinished``
        and ``why`` as :func:`gather_with_timeout` gives them). Called when
        the error is raised, so that it may name the caller's current state
        (the round).
    subject : str, default=None
        The subject of the error when ``distributed`` is not installed
        (:func:`running_client`).
    worker_timeout : float, default=60.0
        Seconds without any worker before a wait gives up.
    unit : str, default="shard"
        What one future of a gather is (``"shard"``, ``"partition"``).

    Attributes
    ----------
    client : distributed.Client
        The running client.
    poll : float
        Seconds of one wait on the futures before the workers are counted.
    """

    poll = POLL

    def __init__(self, call, describe, *, subject=None, worker_timeout=WORKER_TIMEOUT,
                 unit="shard"):
        self.client = running_client(call, subject)
        self.describe = describe
        self.worker_timeout = float(worker_timeout)
        self.unit = unit
        self._futures = weakref.WeakSet()

    def message(self, what):
        """``message(unfinished, why)``: the message builder of
        :func:`gather_with_timeout` while ``what`` runs."""

        def message(unfinished, why):
            return self.describe(what, unfinished, why)

        return message

    def submit(self, fn, *args):
        """``client.submit(fn, *args, pure=False)``, the future kept (weakly)
        for :meth:`cancel_all`."""
        future = self.client.submit(fn, *args, pure=False)
        self._futures.add(future)
        return future

    def partitions(self, parts):
        """The partitions ``parts`` of :func:`aligned_partitions` computed on
        the workers (:func:`compute_partitions`): three lists of futures,
        never gathered here. Drop them once the tasks that use them are
        submitted."""
        futures = compute_partitions(self.client, parts)
        for part in futures:
            self._futures.update(part)
        return futures

    def send(self, obj, what, names=()):
        """``obj`` on every worker, under a fresh key (:func:`scatter_fresh`;
        ``names``: the units that wait for it, as the error names them): a
        future, or for a list or tuple ``obj`` one future per item."""
        try:
            future = scatter_fresh(self.client, obj, self.message(what),
                                   worker_timeout=self.worker_timeout, names=names)
        except WorkerLostError:
            self.cancel_all()
            raise
        # a list or tuple is scattered item by item: one future per item
        self._futures.update(future if isinstance(future, (list, tuple)) else [future])
        return future

    def gather(self, futures, what, names=None):
        """The results of ``futures`` (one per unit: of units ``names``, by
        default ``0, 1, ...`` in order), through :func:`gather_with_timeout`:
        when the workers are lost, everything submitted is cancelled and a
        :class:`WorkerLostError` names ``what`` was running and the unfinished
        units; a task's own error (its data, its fit) is raised as it is."""
        try:
            return gather_with_timeout(self.client, futures, self.message(what),
                                       worker_timeout=self.worker_timeout, names=names,
                                       unit=self.unit, poll=self.poll)
        except WorkerLostError:
            self.cancel_all()
            raise

    def cancel(self, futures):
        """Cancel ``futures`` (what is no longer needed)."""
        self.client.cancel(list(futures))

    def cancel_all(self):
        """Cancel every task submitted (and everything sent) that is still
        referenced: a failed fit leaves nothing running or queued on the
        cluster, even while its exception (and the futures in its traceback)
        is kept."""
        futures = list(self._futures)
        if futures:
            self.client.cancel(futures)


# -- lazy prediction on dask collections -------------------------------------------------------
def _predict_partition(part, estimator, method):
    """``estimator.method`` on one partition (a NumPy block or a pandas frame);
    an empty partition (a filter that kept none of its rows) gives an empty
    block of the output's width and dtype."""
    if part.shape[0] == 0:
        return estimator.objective_.prediction_meta(method)
    return getattr(estimator, method)(part)


def lazy_prediction(model, X, method):
    """``model.method(X)`` for a dask array or DataFrame ``X``: a lazy dask
    array, computed partition by partition where the partitions live
    (``map_blocks`` / ``map_partitions``, as dask-ml's ``ParallelPostFit``);
    the model travels with the tasks, the rows never reach the client.
    ``.compute()`` gives the NumPy result."""
    check_is_fitted(model, "tree_params_")
    frame = hasattr(X, "map_partitions") and hasattr(X, "columns")
    if getattr(X, "ndim", None) != 2 or not (frame or hasattr(X, "map_blocks")):
        raise TypeError(
            f"{method} takes a 2-D dask array or a dask DataFrame, got a {type(X).__name__} "
            f"of {getattr(X, 'ndim', 'no')} dimensions. Call .compute() first, or wrap the "
            "estimator in dask_ml.wrappers.ParallelPostFit.")
    n_columns = len(X.columns) if frame else X.shape[1]
    if n_columns != model.n_features_in_:
        raise ValueError(f"X has {n_columns} features, but {type(model).__name__} is expecting "
                         f"{model.n_features_in_} features as input.")
    meta = model.objective_.prediction_meta(method)
    if frame:  # pandas partitions keep the column names and dtypes
        return X.map_partitions(_predict_partition, model, method, meta=meta)
    X = X.rechunk({1: -1})  # every block holds whole rows
    if meta.ndim == 1:
        return X.map_blocks(_predict_partition, model, method, drop_axis=1,
                            dtype=meta.dtype, meta=meta)
    return X.map_blocks(_predict_partition, model, method, chunks=(X.chunks[0], meta.shape[1:]),
                        dtype=meta.dtype, meta=meta)

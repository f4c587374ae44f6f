"""Training where the rows stay apart: shards, sites and dask workers.

Lives here: ``ShardedSoftTreeEnsemble`` and ``make_shards`` (``_sharded``), the rounds of
federated training (``_federated``), the dask layer (``_dask``: sending work to workers,
gathering results, worker loss) and the checkpoints of a sharded fit (``_checkpoint``).

May import: ``merging`` and everything it may import.
"""

from ._dask import WorkerLostError
from ._sharded import ShardedSoftTreeEnsemble, make_shards

__all__ = ["ShardedSoftTreeEnsemble", "WorkerLostError", "make_shards"]

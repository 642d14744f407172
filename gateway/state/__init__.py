"""What replicas share: the ``state:`` seam.

A :class:`StateStore` holds the records of older clients' sessions (with a TTL, so a crashed
replica leaves nothing behind for ever) and carries routed messages between replicas (an answer to
a server→client request to the replica that asked, a cancellation or a notification to whichever
replica can act on it). Two implementations:

* :class:`~gateway.state.memory.MemoryStore` (``state.store: memory``, the default): one process,
  nothing shared. ``shared`` is False and the transports never consult it on the hot path, so a
  single replica runs exactly as before.
* :class:`~gateway.state.redis_store.RedisStore` (``state.store: redis://...``): records in Redis
  keys, routing over Redis pub/sub (one channel per replica, one for all).

Every process has a :data:`replica` id (random, per process): it names the owner of a pending
server→client request inside the request's id, so the answer finds its way back.
"""

from __future__ import annotations

from gateway.config import StateConfig

from .base import Deliver, StateStore, new_replica_id

__all__ = ["StateStore", "Deliver", "make_store", "new_replica_id"]


def make_store(config: StateConfig) -> StateStore:
    replica = new_replica_id()
    if not config.shared:
        from .memory import MemoryStore

        return MemoryStore(replica)
    from .redis_store import RedisStore

    return RedisStore(config.store, replica, config.redis_prefix, config.redis_timeout_s)

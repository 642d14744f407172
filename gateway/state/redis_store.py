"""``state.store: redis://...``: session records in Redis keys, routing over Redis pub/sub.

Keys (all under one hash tag, so a Redis Cluster keeps them in one slot):

* ``{prefix}:s:<session id>`` — the session record, JSON, with a TTL (``SET EX``; extended while
  the session is used), so a session nobody uses, or whose replicas all died, disappears.
* ``{prefix}:ev:<session id>:<stream>`` — the event log of one resumable SSE stream, a Redis
  Stream whose entry ids are ``0-<seq>`` (so "after event n" is a plain ``XREAD`` from ``0-n``),
  capped with ``MAXLEN`` and expiring with the stream's resumption window. A replica resuming a
  stream another one started replays it and follows it with ``XREAD BLOCK``.

Channels: ``{prefix}:r:<replica>`` (messages for one replica) and ``{prefix}:all`` (for every
replica; a replica ignores what it sent itself). ``PUBLISH`` answers how many subscribers got
the message, so a message for a replica that died is known undelivered at once (the caller
answers its client with an error instead of waiting).

The client is redis-py's asyncio client (already a dependency for shared rate limits), connected
like the rate limiter's: every command bounded by ``timeout_s``, no retries (a caller waiting on a
slow store is worse off than one told at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from .base import Deliver

__all__ = ["RedisStore"]

log = logging.getLogger("gateway.state")


class RedisStore:
    shared = True

    def __init__(self, url: str, replica: str, prefix: str = "gw:st", timeout_s: float = 0.5) -> None:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.replica = replica
        self.timeout_s = timeout_s
        self.client = aioredis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                        retry=Retry(NoBackoff(), 0), health_check_interval=30)
        # The subscriber blocks on reads by design: its connection has no read timeout.
        self._sub_client = aioredis.from_url(url, socket_connect_timeout=timeout_s, health_check_interval=30)
        tag = self._tag = "{" + prefix + "}"
        self._session_key = tag + ":s:"
        self._all = tag + ":all"
        self._mine = tag + ":r:" + replica
        self._replica_channel = tag + ":r:"
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self.ops = 0  # Redis commands sent (bench/scale.py reports them per call)

    # -- routing ----------------------------------------------------------------------------------
    async def start(self, deliver: Deliver) -> None:
        pubsub = self._sub_client.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(self._all, self._mine)
        self._reader = asyncio.get_running_loop().create_task(self._read(pubsub, deliver))

    async def _read(self, pubsub: Any, deliver: Deliver) -> None:
        while True:
            try:
                raw = await pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis restarted or the connection broke: redis-py resubscribes
                log.warning("state store subscription interrupted; retrying", exc_info=True)
                await asyncio.sleep(0.5)
                continue
            if raw is None or raw.get("type") != "message":
                continue
            try:
                message = json.loads(raw["data"])
            except (TypeError, ValueError):
                continue
            if not isinstance(message, dict) or message.get("from") == self.replica:
                continue
            try:
                deliver(message)
            except Exception:  # one bad message must not stop routing for everyone
                log.exception("routed message could not be delivered")

    async def route(self, replica: str | None, message: dict[str, Any]) -> int:
        channel = self._all if replica is None else self._replica_channel + replica
        self.ops += 1
        body = json.dumps({**message, "from": self.replica}, separators=(",", ":"))
        async with asyncio.timeout(self.timeout_s):
            return int(await self.client.publish(channel, body))

    # -- event logs of resumable streams -----------------------------------------------------------------
    async def append_event(self, key: str, seq: int, fields: dict[str, str], max_len: int, ttl_s: float) -> None:
        self.ops += 1  # one round trip: XADD and EXPIRE pipelined
        full = self._tag + ":ev:" + key
        async with asyncio.timeout(self.timeout_s):
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.xadd(full, fields, id=f"0-{seq}", maxlen=max_len, approximate=True)  # type: ignore[arg-type]
                pipe.expire(full, max(1, round(ttl_s)))
                await pipe.execute()

    async def read_events(self, key: str, after: int, block_s: float = 0.0) -> list[tuple[int, dict[str, str]]]:
        self.ops += 1
        full = self._tag + ":ev:" + key
        reply: Any
        if block_s > 0:  # the subscriber's pool has no read timeout: a blocking read is fine there
            async with asyncio.timeout(block_s + self.timeout_s):
                reply = await self._sub_client.xread({full: f"0-{after}"}, count=200, block=round(block_s * 1000))
        else:
            async with asyncio.timeout(self.timeout_s):
                reply = await self.client.xread({full: f"0-{after}"}, count=200)
        out: list[tuple[int, dict[str, str]]] = []
        for _stream, entries in reply or ():
            for entry_id, fields in entries:
                out.append((_seq(entry_id), _strings(fields)))
        return out

    async def last_event(self, key: str) -> tuple[int, dict[str, str]] | None:
        self.ops += 1
        async with asyncio.timeout(self.timeout_s):
            entries: Any = await self.client.xrevrange(self._tag + ":ev:" + key, count=1)
        if not entries:
            return None
        entry_id, fields = entries[0]
        return _seq(entry_id), _strings(fields)

    async def replica_alive(self, replica: str) -> bool:
        self.ops += 1
        async with asyncio.timeout(self.timeout_s):
            counts = await self.client.pubsub_numsub(self._replica_channel + replica)
        return bool(counts and int(counts[0][1]) > 0)

    # -- session records ------------------------------------------------------------------------------
    async def save_session(self, session_id: str, record: dict[str, Any], ttl_s: float) -> None:
        self.ops += 1
        async with asyncio.timeout(self.timeout_s):
            await self.client.set(self._session_key + session_id, json.dumps(record, separators=(",", ":")),
                                  ex=max(1, round(ttl_s)))

    async def load_session(self, session_id: str) -> dict[str, Any] | None:
        self.ops += 1
        async with asyncio.timeout(self.timeout_s):
            raw = await self.client.get(self._session_key + session_id)
        if raw is None:
            return None
        try:
            record = json.loads(raw)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    async def touch_session(self, session_id: str, ttl_s: float) -> None:
        self.ops += 1
        async with asyncio.timeout(self.timeout_s):
            await self.client.expire(self._session_key + session_id, max(1, round(ttl_s)))

    async def drop_session(self, session_id: str) -> None:
        self.ops += 1
        async with asyncio.timeout(self.timeout_s):
            await self.client.delete(self._session_key + session_id)

    # -- the rest ---------------------------------------------------------------------------------------
    async def ping(self) -> None:
        async with asyncio.timeout(self.timeout_s):
            await self.client.ping()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        await self.client.aclose()
        await self._sub_client.aclose()


def _seq(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[2] or 0)


def _strings(fields: dict[Any, Any]) -> dict[str, str]:
    return {(k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
            for k, v in fields.items()}

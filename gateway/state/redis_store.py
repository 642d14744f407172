"""``state.store: redis://...``: session records in Redis keys, routing over Redis pub/sub.

Keys (all under one hash tag, so a Redis Cluster keeps them in one slot):

* ``{prefix}:s:<session id>`` — the session record, JSON, with a TTL (``SET EX``; extended while
  the session is used), so a session nobody uses, or whose replicas all died, disappears.
* ``{prefix}:ev:<session id>:<stream>`` — the event log of one resumable SSE stream, a Redis
  Stream whose entry ids are ``0-<seq>`` (so "after event n" is a plain ``XREAD`` from ``0-n``),
  capped with ``MAXLEN`` and expiring with the stream's resumption window. A replica resuming a
  stream another one started replays it and follows it with ``XREAD BLOCK``.

* ``{prefix}:q:<scope>`` — the places of one session cap (``all``, or ``p:<kind>:<principal>``):
  a sorted set of session ids scored by their expiry in milliseconds of the Redis server's clock. A
  Lua script prunes the expired, counts and adds in one step, so replicas admitting at once never
  overshoot; a place is refreshed with its session record's TTL, so a crashed replica's sessions
  free their places when their records expire.
* ``{prefix}:sh:<replica>`` — the upstream resource subscriptions a replica holds for sessions (a
  hash of entries), and ``{prefix}:holders`` — the replicas holding any. A replica that is gone
  (nobody listens on its channel) has its entries moved by another one, atomically (one taker).

* ``{prefix}:v:<key>`` — a tool text's vector shared by the replicas' search endpoints
  (:mod:`gateway.discovery.shared_vectors`: the key a SHA-256 of model and text, the value its
  float32 row, ~1.9 kB), expiring 30 days after it was last stored or read; ``{prefix}:vc:<key>``
  — the replica embedding it now (``SET NX``, expiring after 30 s, deleted when the vector is
  stored), so replicas starting together embed each text once.

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
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .base import Deliver

__all__ = ["RedisStore"]

log = logging.getLogger("gateway.state")

# How long the subscription holdings outlive the last sign of their holder (a safety net: a gone
# holder's entries are taken over within a sweep, and an entry whose session ended is dropped).
_HOLDINGS_TTL_S = 86_400

# KEYS: the scopes' sorted sets; ARGV: member, ttl in ms, then each scope's limit. Returns nil when
# the member holds a place in every scope, else {index of the first full scope, its count}.
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if not redis.call('ZSCORE', key, ARGV[1]) then
    local n = redis.call('ZCARD', key)
    if n >= tonumber(ARGV[2 + i]) then return {i, n} end
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + ttl, ARGV[1])
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
return nil
"""
# KEYS: the scopes; ARGV: member, ttl in ms. Only a place still held is pushed ahead.
_REFRESH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + ttl, ARGV[1])
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
return nil
"""
# KEYS: the gone replica's hash, this replica's, the holders set; ARGV: gone replica, this one.
_TAKE = """
local entries = redis.call('HKEYS', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[1])
for _, e in ipairs(entries) do redis.call('HSET', KEYS[2], e, '1') end
if #entries > 0 then redis.call('SADD', KEYS[3], ARGV[2]) end
return entries
"""


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
        self._vector_key = tag + ":v:"
        self._claim_key = tag + ":vc:"
        self._all = tag + ":all"
        self._mine = tag + ":r:" + replica
        self._replica_channel = tag + ":r:"
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self._inflight = 0  # commands under way (close waits for them)
        self._idle = asyncio.Event()
        self._claim = self.client.register_script(_CLAIM)
        self._refresh = self.client.register_script(_REFRESH)
        self._take = self.client.register_script(_TAKE)
        self._holders = tag + ":holders"
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
        async with self._command():
            return int(await self.client.publish(channel, body))

    # -- event logs of resumable streams -----------------------------------------------------------------
    async def append_event(self, key: str, seq: int, fields: dict[str, str], max_len: int, ttl_s: float) -> None:
        self.ops += 1  # one round trip: XADD and EXPIRE pipelined
        full = self._tag + ":ev:" + key
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.xadd(full, fields, id=f"0-{seq}", maxlen=max_len, approximate=True)  # type: ignore[arg-type]
                pipe.expire(full, max(1, round(ttl_s)))
                await pipe.execute()

    async def read_events(self, key: str, after: int, block_s: float = 0.0) -> list[tuple[int, dict[str, str]]]:
        self.ops += 1
        full = self._tag + ":ev:" + key
        reply: Any
        if block_s > 0:  # the subscriber's pool has no read timeout: a blocking read is fine there
            async with self._command(block_s + self.timeout_s):
                reply = await self._sub_client.xread({full: f"0-{after}"}, count=200, block=round(block_s * 1000))
        else:
            async with self._command():
                reply = await self.client.xread({full: f"0-{after}"}, count=200)
        out: list[tuple[int, dict[str, str]]] = []
        for _stream, entries in reply or ():
            for entry_id, fields in entries:
                out.append((_seq(entry_id), _strings(fields)))
        return out

    async def last_event(self, key: str) -> tuple[int, dict[str, str]] | None:
        self.ops += 1
        async with self._command():
            entries: Any = await self.client.xrevrange(self._tag + ":ev:" + key, count=1)
        if not entries:
            return None
        entry_id, fields = entries[0]
        return _seq(entry_id), _strings(fields)

    async def replica_alive(self, replica: str) -> bool:
        self.ops += 1
        async with self._command():
            counts = await self.client.pubsub_numsub(self._replica_channel + replica)
        return bool(counts and int(counts[0][1]) > 0)

    # -- session records ------------------------------------------------------------------------------
    async def save_session(self, session_id: str, record: dict[str, Any], ttl_s: float) -> None:
        self.ops += 1
        async with self._command():
            await self.client.set(self._session_key + session_id, json.dumps(record, separators=(",", ":")),
                                  ex=max(1, round(ttl_s)))

    async def load_session(self, session_id: str) -> dict[str, Any] | None:
        self.ops += 1
        async with self._command():
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
        async with self._command():
            await self.client.expire(self._session_key + session_id, max(1, round(ttl_s)))

    async def drop_session(self, session_id: str) -> None:
        self.ops += 1
        async with self._command():
            await self.client.delete(self._session_key + session_id)

    @contextlib.asynccontextmanager
    async def _command(self, timeout_s: float | None = None) -> AsyncIterator[None]:
        """One bounded round trip. After :meth:`close` commands are refused (a closed client would
        silently open a connection nobody closes), and close waits for those under way."""
        if self._closed:
            raise ConnectionError("the state store is closed")
        self._inflight += 1
        try:
            async with asyncio.timeout(self.timeout_s if timeout_s is None else timeout_s):
                yield
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()

    # -- tool vectors shared by replicas ----------------------------------------------------------------
    async def load_vectors(self, keys: Sequence[str], ttl_s: float) -> list[bytes | None]:
        if not keys:
            return []
        self.ops += 1
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                for key in keys:  # GETEX: a vector in use keeps its place
                    pipe.getex(self._vector_key + key, ex=max(1, round(ttl_s)))
                values = await pipe.execute()
        return [v if isinstance(v, bytes) else None for v in values]

    async def save_vectors(self, items: Sequence[tuple[str, bytes]], ttl_s: float) -> None:
        if not items:
            return
        self.ops += 1
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                for key, value in items:
                    pipe.set(self._vector_key + key, value, ex=max(1, round(ttl_s)))
                pipe.delete(*(self._claim_key + key for key, _ in items))
                await pipe.execute()

    async def claim_vectors(self, keys: Sequence[str], owner: str, ttl_s: float) -> list[bool]:
        if not keys:
            return []
        self.ops += 1
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.set(self._claim_key + key, owner, nx=True, px=max(1, round(ttl_s * 1000)))
                claimed = await pipe.execute()
        return [bool(c) for c in claimed]

    # -- places under a shared cap ---------------------------------------------------------------------
    def _scope(self, scope: str) -> str:
        return self._tag + ":q:" + scope

    async def claim_place(self, scopes: Sequence[tuple[str, int]], member: str, ttl_s: float) -> tuple[int, int] | None:
        self.ops += 1
        async with self._command():
            full = await self._claim(keys=[self._scope(s) for s, _ in scopes],
                                     args=[member, max(1, round(ttl_s * 1000)), *(n for _, n in scopes)])
        return (int(full[0]) - 1, int(full[1])) if full else None

    async def refresh_place(self, scopes: Sequence[str], member: str, ttl_s: float) -> None:
        self.ops += 1
        async with self._command():
            await self._refresh(keys=[self._scope(s) for s in scopes], args=[member, max(1, round(ttl_s * 1000))])

    async def release_place(self, scopes: Sequence[str], member: str) -> None:
        self.ops += 1
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                for scope in scopes:
                    pipe.zrem(self._scope(scope), member)
                await pipe.execute()

    async def count_places(self, scope: str) -> int:
        self.ops += 1
        async with self._command():
            now_s, now_us = await self.client.time()
            return int(await self.client.zcount(self._scope(scope), int(now_s) * 1000 + int(now_us) // 1000 + 1, "+inf"))

    # -- upstream subscriptions held by replicas ------------------------------------------------------
    async def hold(self, entries: Sequence[str], held: bool) -> None:
        if not entries:
            return
        self.ops += 1
        mine = self._tag + ":sh:" + self.replica
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                if held:
                    pipe.hset(mine, mapping=dict.fromkeys(entries, "1"))
                    pipe.sadd(self._holders, self.replica)
                    pipe.expire(mine, _HOLDINGS_TTL_S)
                    pipe.expire(self._holders, _HOLDINGS_TTL_S)
                else:
                    pipe.hdel(mine, *entries)
                await pipe.execute()

    async def held_here(self) -> set[str]:
        self.ops += 1
        mine = self._tag + ":sh:" + self.replica
        async with self._command():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hkeys(mine)
                pipe.expire(mine, _HOLDINGS_TTL_S)  # kept while its holder lives; left behind, it goes
                pipe.expire(self._holders, _HOLDINGS_TTL_S)
                keys, *_ = await pipe.execute()
        return {k.decode() if isinstance(k, bytes) else str(k) for k in keys}

    async def take_over(self) -> list[str]:
        self.ops += 1
        async with self._command():
            holders = [h.decode() if isinstance(h, bytes) else str(h) for h in await self.client.smembers(self._holders)]
            others = [h for h in holders if h != self.replica]
            if not others:
                return []
            self.ops += 1
            counts = await self.client.pubsub_numsub(*(self._replica_channel + h for h in others))
        listening = {(c.decode() if isinstance(c, bytes) else str(c)) for c, n in counts if int(n) > 0}
        taken: list[str] = []
        for gone in others:
            if self._replica_channel + gone in listening:
                continue
            self.ops += 1
            async with self._command():
                moved = await self._take(keys=[self._tag + ":sh:" + gone, self._tag + ":sh:" + self.replica,
                                               self._holders], args=[gone, self.replica])
            taken += [m.decode() if isinstance(m, bytes) else str(m) for m in moved or ()]
        return taken

    # -- the rest ---------------------------------------------------------------------------------------
    async def ping(self) -> None:
        async with self._command():
            await self.client.ping()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._inflight:
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeout_s * 2):
                    await self._idle.wait()
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

"""``oauth.token_store: redis://...`` (or the shared ``state.store``): grants every replica sees.

Keys, under one hash tag (a Redis Cluster keeps them in one slot):

* ``{prefix}:grants`` — a hash: field = an opaque name of (connector, issuer, principal) (an HMAC
  under a key derived from the store key, :meth:`Sealer.name`), value = the sealed grant with its
  key. ``HSET``/``HGET``/``HDEL`` change one field: concurrent writers of different grants never
  lose each other's updates.
* ``{prefix}:registrations`` — the same for client registrations by (connector, issuer).
* ``{prefix}:check`` — a value sealed under the key the first replica started with: a replica
  started with another key refuses to start, rather than writing grants the others cannot open.

Every value is AES-256-GCM sealed with its field name as associated data, so neither a token nor
who holds one is readable in Redis, and a value copied under another field does not open. A value
that does not open is a :class:`~.sealing.StoreError` (never read as "no grant"). Every command is
bounded by ``timeout_s``, with no retries (as the state store's).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError

from connectors.oauth.port import Grant, GrantKey

from .file_store import entry_grant, grant_entry
from .sealing import Sealer, SealError, StoreError, WrongKey

__all__ = ["RedisTokenStore"]


class RedisTokenStore:
    """A :class:`~connectors.oauth.port.TokenStore` in Redis, shared by every replica on it."""

    def __init__(self, url: str, sealer: Sealer, prefix: str = "gw:oauth", timeout_s: float = 1.0) -> None:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self._sealer = sealer
        self.timeout_s = timeout_s
        self.client = aioredis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                        retry=Retry(NoBackoff(), 0), health_check_interval=30)
        tag = "{" + prefix + "}"
        self.grants_key = tag + ":grants"
        self.registrations_key = tag + ":registrations"
        self.check_key = tag + ":check"
        # Field names derive from the key: under another key a grant would read as missing, so
        # nothing is served until open() checked this replica's key against the store's.
        self._checked = False

    async def open(self) -> None:
        """Reach Redis and check the key against the one the store was first sealed with."""
        probe = self._sealer.seal(b"ok", self.check_key.encode())
        try:
            async with asyncio.timeout(self.timeout_s):
                await self.client.set(self.check_key, probe, nx=True)
                sealed = await self.client.get(self.check_key)
        except (TimeoutError, OSError, RedisError) as exc:
            raise StoreError(f"the OAuth token store (Redis) cannot be reached: {type(exc).__name__}") from None
        try:
            self._sealer.open(sealed if isinstance(sealed, bytes) else b"", self.check_key.encode())
        except WrongKey:
            raise StoreError("the OAuth token store (Redis) is sealed with another key than this replica's "
                             "oauth.encryption_key: every replica must use the same key") from None
        except SealError:
            raise StoreError(f"the OAuth token store (Redis) key {self.check_key} is damaged") from None
        self._checked = True

    # -- grants -----------------------------------------------------------------------------------
    async def get(self, key: GrantKey) -> Grant | None:
        field = self._field(key)
        raw = await self._do(lambda: self.client.hget(self.grants_key, field))
        if raw is None:
            return None
        return entry_grant(self._open(raw, field))[1]

    async def put(self, key: GrantKey, grant: Grant) -> None:
        field = self._field(key)
        await self._do(lambda: self.client.hset(self.grants_key, field, self._seal(grant_entry(key, grant), field)))

    async def delete(self, key: GrantKey) -> bool:
        return bool(await self._do(lambda: self.client.hdel(self.grants_key, self._field(key))))

    async def keys(self) -> list[GrantKey]:
        everything: dict[Any, Any] = await self._do(lambda: self.client.hgetall(self.grants_key))
        out = []
        for field, raw in everything.items():
            name = field.decode() if isinstance(field, bytes) else str(field)
            out.append(entry_grant(self._open(raw, name))[0])
        return out

    # -- client registrations -----------------------------------------------------------------------
    async def get_registration(self, connector: str, issuer: str) -> dict[str, Any] | None:
        field = self._sealer.name("registration", connector, issuer)
        raw = await self._do(lambda: self.client.hget(self.registrations_key, field))
        if raw is None:
            return None
        return dict(self._open(raw, field)["r"])

    async def put_registration(self, connector: str, issuer: str, registration: dict[str, Any]) -> None:
        field = self._sealer.name("registration", connector, issuer)
        entry = {"c": connector, "i": issuer, "r": dict(registration)}
        await self._do(lambda: self.client.hset(self.registrations_key, field, self._seal(entry, field)))

    async def close(self) -> None:
        await self.client.aclose()

    # -- helpers -----------------------------------------------------------------------------------
    def _field(self, key: GrantKey) -> str:
        return self._sealer.name("grant", key.connector, key.issuer, key.principal)

    def _seal(self, entry: dict[str, Any], field: str) -> bytes:
        return self._sealer.seal(json.dumps(entry, separators=(",", ":")).encode(), field.encode())

    def _open(self, raw: Any, field: str) -> dict[str, Any]:
        try:
            entry = json.loads(self._sealer.open(bytes(raw), field.encode()))
        except WrongKey:
            raise StoreError("an OAuth grant in Redis is sealed with another key than this replica's "
                             "oauth.encryption_key: every replica must use the same key") from None
        except (SealError, ValueError):
            raise StoreError("an OAuth grant in Redis is altered or was moved from another field") from None
        if not isinstance(entry, dict):
            raise StoreError("an OAuth grant in Redis is not a grant")
        return entry

    async def _do(self, command: Callable[[], Awaitable[Any]]) -> Any:
        if not self._checked:
            raise StoreError("the OAuth token store (Redis) was not opened with a key it accepts")
        try:
            async with asyncio.timeout(self.timeout_s):
                return await command()
        except TimeoutError:
            raise StoreError(f"the OAuth token store (Redis) did not answer within {self.timeout_s:g} s") from None
        except (OSError, RedisError) as exc:
            raise StoreError(f"the OAuth token store (Redis) cannot be reached: {type(exc).__name__}") from None

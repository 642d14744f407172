"""Response cache filter: results of read-only tools served again without calling the backend.

Opt-in per connector (``cache:`` on its entry, :class:`connectors.config.CacheConfig`). A
``tools/call`` is cacheable when its tool's annotations (as listed downstream, overrides included)
set one of the configured ``hints`` (default ``readOnlyHint``) to true. The key is (principal,
public tool name, the arguments as canonical JSON); each connector has its own LRU store bounded
by ``max_entries`` and ``max_bytes`` (the results' JSON size), entries living ``ttl_s`` at most.

Never stored: error results (``isError``), interim results (``resultType`` other than
``complete``), the retries of multi round-trip requests (``inputResponses``/``requestState``: the
answer depends on the round), and results larger than a quarter of ``max_bytes``. A result that
carries the 2026-07-28 caching hints (an upstream that sends them) is honoured: ``ttlMs: 0`` is not
stored, a smaller ``ttlMs`` shortens the entry's life, ``cacheScope: "public"`` lets every principal
share the entry (``private``, and no hint, keep it to the caller).

The filter sits inside auth and rate limiting (a hit is authorised, counted and audited like a
call) and outside the timeout. Concurrent identical misses each call the backend (no single
flight). A config reload builds a new chain, and so an empty cache. Hits and misses are counted in
``mcp_gateway_response_cache_total{connector, result}``.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from connectors.config import CacheConfig
from gateway.context import CallContext
from gateway.filters import Handler
from gateway.telemetry import metrics

__all__ = ["ResponseCacheFilter", "ResultStore", "ToolLookup"]


# public tool name → (connector name, the tool's public definition); None when unknown
ToolLookup = Callable[[str], "tuple[str, dict[str, Any]] | None"]
_MRTR_KEYS = ("inputResponses", "requestState")


@dataclass(slots=True)
class _Entry:
    body: bytes  # the result as JSON: a hit decodes a fresh copy nobody else holds
    expires: float


class ResultStore:
    """An LRU of results with a deadline each, bounded in entries and bytes (pure, given a clock)."""

    def __init__(self, config: CacheConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._entries: OrderedDict[tuple[str, ...], _Entry] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[str, ...]) -> dict[str, Any] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        result: dict[str, Any] = json.loads(entry.body)
        return result

    def put(self, key: tuple[str, ...], result: Mapping[str, Any], ttl_s: float) -> bool:
        body = json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode()
        if len(body) > self.config.max_bytes // 4:
            return False  # one large result must not flush everyone else's
        if key in self._entries:
            self._drop(key)
        self._entries[key] = _Entry(body, self._clock() + ttl_s)
        self.bytes += len(body)
        while len(self._entries) > self.config.max_entries or self.bytes > self.config.max_bytes:
            self._drop(next(iter(self._entries)))
        return True

    def _drop(self, key: tuple[str, ...]) -> None:
        self.bytes -= len(self._entries.pop(key).body)


def _cacheable(definition: Mapping[str, Any], hints: tuple[str, ...]) -> bool:
    annotations = definition.get("annotations")
    return isinstance(annotations, dict) and any(annotations.get(h) is True for h in hints)


def _ttl(result: Mapping[str, Any], config: CacheConfig) -> float | None:
    """Seconds to keep ``result``, or None when it must not be kept."""
    if result.get("isError") is True:
        return None
    kind = result.get("resultType")
    if kind is not None and kind != "complete":
        return None
    ttl = config.ttl_s
    hint = result.get("ttlMs")
    if isinstance(hint, (int, float)) and not isinstance(hint, bool) and hint >= 0:
        if hint == 0:
            return None
        ttl = min(ttl, hint / 1000)
    return ttl


class ResponseCacheFilter:
    def __init__(self, configs: Mapping[str, CacheConfig], tool: ToolLookup) -> None:
        self._stores = {name: ResultStore(cfg) for name, cfg in configs.items()}
        self._tool = tool

    def store(self, connector: str) -> ResultStore | None:
        return self._stores.get(connector)

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        if ctx.method != "tools/call" or ctx.rejection is not None or any(k in ctx.params for k in _MRTR_KEYS):
            return await call_next(ctx)
        found = self._tool(ctx.target)
        store = self._stores.get(found[0]) if found is not None else None
        if found is None or store is None or not _cacheable(found[1], store.config.hints):
            return await call_next(ctx)
        connector = found[0]
        try:
            arguments = json.dumps(ctx.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            return await call_next(ctx)
        private = (f"{ctx.principal.kind}:{ctx.principal.name}", ctx.target, arguments)
        public = ("*", ctx.target, arguments)
        hit = store.get(public) or store.get(private)
        label = metrics.bounded("connector", connector)
        if hit is not None:
            metrics.RESPONSE_CACHE.labels(label, "hit").inc()
            ctx.record.connector = connector
            return hit
        metrics.RESPONSE_CACHE.labels(label, "miss").inc()
        result = await call_next(ctx)
        ttl = _ttl(result, store.config)
        if ttl is not None:
            store.put(public if result.get("cacheScope") == "public" else private, result, ttl)
        return result

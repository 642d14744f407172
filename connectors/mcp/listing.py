"""Aggregating an upstream's listings: every page of every listing its capabilities announce.

Upstreams paginate too; :func:`list_all` follows ``nextCursor`` to the end (bounded by
``max_pages``, and a cursor seen twice ends it: an upstream bug must not become a loop).
:class:`Refresher` fetches listings again after ``list_changed``, bursts coalesced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from gateway.protocol.errors import MethodNotFound, ProtocolError

from .client import UpstreamSession

__all__ = ["LISTINGS", "ALL_LISTINGS", "fetch_listings", "list_all", "Refresher"]

log = logging.getLogger("connectors.mcp")

# name → (method, result key, the server capability announcing it)
LISTINGS: dict[str, tuple[str, str, str]] = {
    "tools": ("tools/list", "tools", "tools"),
    "resources": ("resources/list", "resources", "resources"),
    "templates": ("resources/templates/list", "resourceTemplates", "resources"),
    "prompts": ("prompts/list", "prompts", "prompts"),
}
ALL_LISTINGS = frozenset(LISTINGS)


async def fetch_listings(session: UpstreamSession, which: frozenset[str] | set[str], timeout_s: float,
                         max_pages: int) -> dict[str, list[Any]]:
    """``{name: items}`` for each listing in ``which`` (empty when the upstream lacks the capability)."""
    caps = session.server_capabilities
    out: dict[str, list[Any]] = {}
    for name, (method, key, capability) in LISTINGS.items():
        if name in which:
            out[name] = await list_all(session, method, key, timeout_s, max_pages) if capability in caps else []
    return out


async def list_all(session: UpstreamSession, method: str, key: str, timeout_s: float, max_pages: int) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(max_pages):
        try:
            result = await session.request(method, {"cursor": cursor} if cursor else None, timeout_s=timeout_s)
        except MethodNotFound:
            return items
        page = result.get(key)
        if isinstance(page, list):
            items.extend(page)
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor or cursor in seen:
            break
        seen.add(cursor)
    return items


class Refresher:
    """Listings fetched again after an upstream's ``list_changed``: bursts are coalesced into as few
    re-fetches as possible, each handed to ``apply(listings, modern, announced)`` (``announced``: the
    kinds the upstream said changed) unless the shared session was lost meanwhile."""

    def __init__(self, name: str, shared: Callable[[], UpstreamSession | None], timeout_s: float, max_pages: int,
                 apply: Callable[[dict[str, list[Any]], bool, frozenset[str]], None]) -> None:
        self.name = name
        self._shared = shared
        self._timeout_s = timeout_s
        self._max_pages = max_pages
        self._apply = apply
        self.task: asyncio.Task[None] | None = None
        self._pending: set[str] = set()
        self._announced: set[str] = set()  # list_changed kinds the upstream announced, not yet passed on

    def schedule(self, which: set[str], announced: frozenset[str] = frozenset()) -> None:
        self._pending, self._announced = self._pending | which, self._announced | announced
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._loop(), name=f"mcp-refresh-{self.name}")

    async def _loop(self) -> None:
        while self._pending:
            session = self._shared()
            if session is None:
                return  # the reconnect fetches everything anyway
            which, self._pending = self._pending, set()
            announced, self._announced = frozenset(self._announced), set()
            try:
                listings = await fetch_listings(session, which, self._timeout_s, self._max_pages)
            except ProtocolError as exc:  # control flow: keep the listings we have, say why
                log.warning("upstream %s: re-listing after list_changed failed: %s", self.name, exc)
                return
            if session is not self._shared():
                return  # lost meanwhile: stale listings must not resurrect its components
            self._apply(listings, session.modern, announced)

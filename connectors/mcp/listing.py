"""Aggregating an upstream's listings: every page of every listing its capabilities announce.

Upstreams paginate too; :func:`list_all` follows ``nextCursor`` to the end (bounded by
``max_pages``, and a cursor seen twice ends it: an upstream bug must not become a loop).
"""

from __future__ import annotations

from typing import Any

from gateway.protocol.errors import MethodNotFound

from .client import UpstreamSession

__all__ = ["LISTINGS", "ALL_LISTINGS", "fetch_listings", "list_all"]

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

"""The legacy callers' own process of a dual-era stdio upstream: what it lists, what it watches.

Why there are two processes. An SDK 2.x server fixes a stdio connection's era with the client's
first request (``mcp.server.runner.serve_dual_era_loop``): a request carrying the 2026-07-28
``_meta`` envelope opens a stateless connection, anything else a handshake one, and a later claim
of the other era is refused (``initialize`` on a 2026-07-28 connection: -32022; an enveloped
request on a handshake connection: -32600). One pipe cannot serve both eras, and over stdio a
connection is a process. So a dual-era stdio upstream that serves each caller in its own era
(:mod:`connectors.mcp.sessions`) runs as two processes of the command: the shared one (2026-07-28,
stateless; the connector's discovery) and the legacy callers' session
(:data:`~connectors.mcp.sessions.LEGACY_SHARED`), each with its own memory, as each directly
connected stdio client has a process of its own.

What that process changes is its own, so the connector treats it as a second source
(:class:`EraProcess`), as a directly connected client would see its own process:

* **listings**: its ``notifications/*/list_changed`` re-lists *from it* (not from the shared
  process, which did not change), and what it lists that the shared process does not joins the
  connector's components (:meth:`EraProcess.merged`), so the tool a legacy caller added is listed
  and callable (its calls go to that process). The gateway has one catalog per connector, not one
  per era: a 2026-07-28 caller sees the addition too, and calling such a tool is refused with the
  reason (:meth:`EraProcess.absent_for`) rather than sent to a process that lacks it; likewise a
  legacy caller calling a tool only the shared process lists (prompts and resources are sent on,
  and the upstream refuses what it lacks). A removal in one process only is not seen (the
  other still serves the item). Until the process announces a change, its listings are taken to be
  the shared process's (the same command, started the same way): nothing is fetched.
* **resource subscriptions**: every URI the connector watches is subscribed on it too, as soon as
  it is opened (before the first call over it) and on each later ``resources/subscribe``, so a
  change its calls make reaches the watchers (the gateway's subscriptions are per URI, not per
  era: a watcher may also hear of a change in the other process).

Over Streamable HTTP the legacy session and the stateless requests reach one process, which
announces its changes on both: nothing here applies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .client import UpstreamSession
from .listing import Refresher

__all__ = ["EraProcess", "KEYS"]

# The field naming an item of each listing (items of both processes with the same one are one item).
KEYS = {"tools": "name", "prompts": "name", "resources": "uri", "templates": "uriTemplate"}


def _names(items: list[Any], key: str) -> set[Any]:
    return {item.get(key) for item in items if isinstance(item, dict)}


class EraProcess:
    """The listings the legacy callers' process announced (``lists``, by listing name, raw items as
    it sent them) and its re-listing after ``list_changed`` (``refresher``, bursts coalesced, each
    result handed to ``apply(kinds, announced)`` after it is stored)."""

    def __init__(self, name: str, source: Callable[[], UpstreamSession | None], timeout_s: float, max_pages: int,
                 apply: Callable[[frozenset[str], frozenset[str]], None]) -> None:
        self.lists: dict[str, list[Any]] = {}
        self._tool_names: set[Any] = set()
        self._apply = apply
        self.refresher = Refresher(f"{name} (legacy callers' process)", source, timeout_s, max_pages, self._store)

    def _store(self, listings: dict[str, list[Any]], _modern: bool, announced: frozenset[str]) -> None:
        self.lists.update(listings)
        if "tools" in listings:
            self._tool_names = _names(listings["tools"], KEYS["tools"])
        self._apply(frozenset(listings), announced)

    def merged(self, kind: str, shared: list[Any]) -> list[Any]:
        """``shared`` (the shared process's items of listing ``kind``) and, after them, the items
        of this process it lacks. ``shared`` itself when this process never re-listed ``kind``."""
        own = self.lists.get(kind)
        if not own:
            return shared
        key = KEYS[kind]
        known = _names(shared, key)
        return [*shared, *(item for item in own if isinstance(item, dict) and item.get(key) not in known)]

    def absent_for(self, tool: str, legacy: bool, shared_tools: list[Any]) -> str | None:
        """Why a call of upstream tool ``tool`` must not go to the process serving its caller
        (``legacy``: the legacy callers' one), or None: it lists ``tool``, or nothing is known to
        differ (this process never re-listed its tools)."""
        if "tools" not in self.lists:
            return None
        if legacy and tool not in self._tool_names:
            return (f"Unknown tool: {tool} (only the upstream process serving 2026-07-28 callers lists it; over "
                    "stdio each era is served by a process of its own)")
        if not legacy and tool in self._tool_names and tool not in _names(shared_tools, KEYS["tools"]):
            return (f"Unknown tool: {tool} (only the upstream process serving 2025-11-25 and older callers lists "
                    "it; over stdio each era is served by a process of its own)")
        return None

    def forget(self) -> bool:
        """The process is gone (its successor starts afresh): whether it had listed anything."""
        had = bool(self.lists)
        self.lists, self._tool_names = {}, set()
        return had

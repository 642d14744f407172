"""The resources the MCP connector watches upstream, on every channel that tells of their changes.

The gateway subscribes a connector once per URI (:mod:`gateway.subscriptions`: the first watcher
subscribes, the last one to leave unsubscribes); :class:`Watching` holds that set and keeps each
upstream channel of the connector that may report a change subscribed to it:

* the shared channel: a legacy session gets ``resources/subscribe``/``unsubscribe`` per URI
  (renewed after a reconnect: :meth:`Watching.renew`); a 2026-07-28 channel has no such methods,
  so its listen request (:class:`~connectors.mcp.listen.Listener`) is re-opened with the new set;
* a dual-era stdio upstream's legacy callers' process (:mod:`connectors.mcp.era_process`), whose
  memory is its own: every URI as soon as it is opened (:meth:`Watching.all_on`, before any call
  goes over it), then each one subscribed later.

Their updates reach the gateway alike (``notifications/resources/updated``, the connector's
``on_notification``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.protocol.errors import ProtocolError

from . import mapping
from .client import UpstreamSession
from .listen import Listener

__all__ = ["Watching", "subscription"]


async def subscription(session: UpstreamSession, method: str, uri: str, timeout_s: float) -> None:
    """``resources/subscribe`` or ``resources/unsubscribe`` of ``uri`` over a legacy session."""
    declared = "subscribe" in mapping.capability_set(session.server_capabilities)
    try:
        await session.request(method, {"uri": uri}, timeout_s=timeout_s)
    except ProtocolError:
        # Servers built on the Python SDK serve subscriptions while declaring
        # ``subscribe: false``, so an undeclared upstream is still asked; only one that
        # declared the capability gets its refusal passed on.
        if declared:
            raise


class Watching:
    """The URIs the connector watches (``uris``: kept across reconnects) and their subscriptions."""

    def __init__(self) -> None:
        self.uris: set[str] = set()

    async def subscribe(self, uri: str, shared: UpstreamSession, listener: Listener | None,
                        era_process: UpstreamSession | None, timeout_s: float) -> None:
        """Watch ``uri`` (already in :attr:`uris`) on ``shared`` and on the legacy callers' process."""
        if listener is not None and shared.modern:
            # 2026-07-28: no resources/subscribe; the listen is re-opened with the new set.
            await listener.update(self.uris, timeout_s)
        else:
            await subscription(shared, "resources/subscribe", uri, timeout_s)
        if era_process is not None:
            await subscription(era_process, "resources/subscribe", uri, timeout_s)

    async def unsubscribe(self, uri: str, shared: UpstreamSession | None, listener: Listener | None,
                          era_process: UpstreamSession | None, timeout_s: float) -> None:
        self.uris.discard(uri)
        if listener is not None and shared is not None and shared.modern:
            await listener.update(self.uris, 0)  # not waiting for the acknowledgement
        elif shared is not None:
            await subscription(shared, "resources/unsubscribe", uri, timeout_s)
        if era_process is not None:
            await subscription(era_process, "resources/unsubscribe", uri, timeout_s)

    def renew(self, session: UpstreamSession, spawn: Callable[[Coroutine[Any, Any, Any]], None]) -> None:
        """A legacy shared session was (re)connected: every URI subscribed again, in the background."""
        for uri in list(self.uris):
            spawn(_quiet(session.request("resources/subscribe", {"uri": uri}, timeout_s=10)))

    async def all_on(self, session: UpstreamSession) -> None:
        """Subscribe every watched URI on ``session`` (a refusal or failure of one is ignored)."""
        done: set[str] = set()
        # Until none is left: a URI watched meanwhile is in uris (added before the caller's await).
        while pending := self.uris - done:
            for uri in pending:
                done.add(uri)
                await _quiet(session.request("resources/subscribe", {"uri": uri}, timeout_s=10))


async def _quiet(coro: Coroutine[Any, Any, Any]) -> None:
    with contextlib.suppress(Exception):
        await coro

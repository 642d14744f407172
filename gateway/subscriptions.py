"""Resource subscriptions across sessions: one connector subscription per URI, however many
sessions watch it.

The first session that subscribes to a public URI subscribes the owning connector; the last one to
leave (by ``resources/unsubscribe`` or by closing) unsubscribes it. A connector's
``resource_updated`` report reaches every session watching the public URI.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from gateway.catalog import Catalog
from gateway.context import CallContext, SessionHandle
from gateway.protocol.errors import ProtocolError

if TYPE_CHECKING:
    from connectors.base import Connector

__all__ = ["Subscriptions"]

log = logging.getLogger("gateway.subscriptions")

Spawn = Callable[[Coroutine[Any, Any, Any]], None]


class Subscriptions:
    """Who watches which public resource URI."""

    def __init__(self, catalog: Catalog, spawn: Spawn) -> None:
        self.catalog = catalog
        self._spawn = spawn
        self._watchers: dict[str, set[SessionHandle]] = {}
        self._by_session: dict[SessionHandle, set[str]] = {}

    def watched(self) -> frozenset[str]:
        return frozenset(self._watchers)

    async def subscribe(self, session: SessionHandle, public_uri: str, connector: Connector, local: str,
                        ctx: CallContext) -> None:
        watchers = self._watchers.setdefault(public_uri, set())
        first = not watchers
        watchers.add(session)
        if first:
            try:
                await connector.subscribe(local, ctx)
            except BaseException:
                watchers.discard(session)
                if not watchers:
                    self._watchers.pop(public_uri, None)
                raise
        self._by_session.setdefault(session, set()).add(public_uri)

    async def unsubscribe(self, session: SessionHandle, public_uri: str, connector: Connector, local: str,
                          ctx: CallContext) -> None:
        self._by_session.get(session, set()).discard(public_uri)
        watchers = self._watchers.get(public_uri)
        if not watchers or session not in watchers:
            return
        watchers.discard(session)
        if not watchers:
            del self._watchers[public_uri]
            await connector.unsubscribe(local, ctx)

    def of(self, session: SessionHandle) -> frozenset[str]:
        """The public URIs this session is subscribed to."""
        return frozenset(self._by_session.get(session, ()))

    def session_closed(self, session: SessionHandle) -> None:
        """Forget a closed session; URIs nobody watches any more are unsubscribed upstream."""
        for uri in self._by_session.pop(session, ()):
            watchers = self._watchers.get(uri)
            if watchers is None:
                continue
            watchers.discard(session)
            if not watchers:
                del self._watchers[uri]
                self._drop_upstream(uri)

    def _drop_upstream(self, public_uri: str) -> None:
        try:
            connector, local, _ = self.catalog.resource_owner(public_uri)
        except ProtocolError:  # the resource went away with its connector: nothing to release
            return
        self._spawn(connector.unsubscribe(local, None))

    def resource_updated(self, connector_name: str, local_uri: str) -> None:
        public = self.catalog.public_uri(connector_name, local_uri)
        for session in list(self._watchers.get(public, ())):
            self._spawn(session.notify("notifications/resources/updated", {"uri": public}))

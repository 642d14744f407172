"""``subscriptions/listen`` (2026-07-28): long-lived streams of the change notifications a client
opted in to.

A listen request names what it wants (``toolsListChanged``, ``promptsListChanged``,
``resourcesListChanged``, ``resourceSubscriptions``: a list of URIs). The gateway acknowledges the
subset it honours with ``notifications/subscriptions/acknowledged`` (first, before anything else
on that stream), then sends each matching notification tagged with
``_meta["io.modelcontextprotocol/subscriptionId"]`` (the listen request's id), until the client
closes the stream or the gateway shuts down — then the listen request gets its result, a graceful
end. Resource subscriptions share the gateway's :class:`~gateway.subscriptions.Subscriptions`
with older clients' ``resources/subscribe``: one upstream subscription per URI however many watch.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.context import CallContext, SessionHandle
from gateway.protocol.errors import InvalidParams, ProtocolError
from gateway.protocol.meta import SUBSCRIPTION_ID
from gateway.subscriptions import Subscriptions

__all__ = ["Listener", "Listeners", "LIST_FLAGS"]

log = logging.getLogger("gateway.listeners")

# Filter flag -> the notification it admits.
LIST_FLAGS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
MAX_RESOURCE_SUBSCRIPTIONS = 1000


class Listener:
    """One open ``subscriptions/listen`` stream. It is the watcher :class:`Subscriptions` notifies
    for its resource URIs, so it has a session handle's ``notify``."""

    def __init__(self, session: SessionHandle, subscription_id: str | int, methods: frozenset[str],
                 uris: tuple[str, ...]) -> None:
        self.session = session
        self.subscription_id = subscription_id
        self.methods = methods
        self.uris = uris
        self.closed = asyncio.Event()
        # A SessionHandle for Subscriptions: the same identity fields as its request.
        self.id = f"{session.id}:listen"
        self.transport = session.transport
        self.protocol_version = session.protocol_version
        self.client_info = session.client_info
        self.client_capabilities = session.client_capabilities
        self.principal = session.principal

    def tagged(self, params: dict[str, Any] | None) -> dict[str, Any]:
        out = dict(params or {})
        meta = dict(out.get("_meta") or {})
        meta[SUBSCRIPTION_ID] = self.subscription_id
        out["_meta"] = meta
        return out

    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None:
        if method == "notifications/resources/updated" or method in self.methods:
            await self.session.notify(method, self.tagged(params))

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None, timeout: float | None = None) -> dict[str, Any]:
        raise ProtocolError("a subscription stream carries no requests")


class Listeners:
    """Every open listen stream of this gateway."""

    def __init__(self, subscriptions: Subscriptions) -> None:
        self.subscriptions = subscriptions
        self._open: set[Listener] = set()

    def __len__(self) -> int:
        return len(self._open)

    def broadcast(self, method: str, host: object = None) -> list[Any]:
        """The coroutines that deliver a list_changed notification to the listeners that want it
        (with ``host``: only those whose request came to that host, an endpoint or ``/mcp``)."""
        return [listener.notify(method) for listener in self._open if method in listener.methods
                and (host is None or getattr(listener.session, "host", None) is host)]

    async def listen(self, ctx: CallContext) -> dict[str, Any]:
        """Serve one ``subscriptions/listen`` request until its stream ends."""
        wanted = ctx.params.get("notifications") or {}
        if not isinstance(wanted, dict):
            raise InvalidParams("subscriptions/listen: params.notifications must be an object")
        methods = frozenset(LIST_FLAGS[k] for k, v in wanted.items() if k in LIST_FLAGS and v is True)
        uris = wanted.get("resourceSubscriptions") or []
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise InvalidParams("subscriptions/listen: resourceSubscriptions must be a list of URIs")
        if len(uris) > MAX_RESOURCE_SUBSCRIPTIONS:
            raise InvalidParams(f"subscriptions/listen: at most {MAX_RESOURCE_SUBSCRIPTIONS} resource subscriptions")
        listener = Listener(ctx.session, ctx.request_id, methods, ())
        honoured: list[str] = []
        try:
            for uri in dict.fromkeys(uris):
                try:
                    connector, local, _ = self.subscriptions.catalog.resource_owner(uri)
                    await self.subscriptions.subscribe(listener, uri, connector, local, ctx)
                except ProtocolError as exc:  # not ours, or its connector is down: not acknowledged
                    log.debug("listen: not subscribing to %s: %s", uri, exc.message)
                    continue
                honoured.append(uri)
            listener.uris = tuple(honoured)
            ack: dict[str, Any] = {flag: True for flag, method in LIST_FLAGS.items() if method in methods}
            if "resourceSubscriptions" in wanted:
                ack["resourceSubscriptions"] = honoured
            # The acknowledgment goes first: nothing reaches the stream before the listener is open.
            await ctx.session.notify("notifications/subscriptions/acknowledged",
                                     listener.tagged({"notifications": ack}))
            self._open.add(listener)
            await listener.closed.wait()
        finally:
            self._open.discard(listener)
            self.subscriptions.session_closed(listener)
        return {"_meta": {SUBSCRIPTION_ID: ctx.request_id}}

    def close_all(self) -> None:
        """End every stream gracefully (shutdown): each listen request gets its result."""
        for listener in list(self._open):
            listener.closed.set()

"""The HTTP routes of endpoints: ``/mcp/{name}`` (Streamable HTTP, both revisions: 2025-11-25
sessions and 2026-07-28 stateless requests, as ``/mcp``) and ``/sse/{name}`` + ``/messages/{name}``
(legacy HTTP+SSE).

Each endpoint gets its own transports (made on its first request, so an endpoint a reload adds is
served at once), opening sessions through its :class:`~gateway.endpoints.host.EndpointHost`; a
session id of one endpoint is unknown (404) on another and on ``/mcp``. The guards are the main
ones (:func:`gateway.transports.http_app.build_app` passes its ``guarded``): Origin/Host, body
limits, authentication (401); then the endpoint's ``principals`` (403 for a principal outside
them), and 404 for a name no endpoint has. Sessions of endpoints count against the same session
cap. With replicas sharing ``state.store``, an endpoint's Streamable HTTP sessions are shared as
``/mcp``'s are (:mod:`gateway.transports.replicas`: any replica adopts them, on this endpoint only,
bound to their principal; :meth:`EndpointTransports.deliver` takes the messages routed to them);
its legacy HTTP+SSE sessions stay on the replica that opened them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.protocol.errors import INVALID_REQUEST
from gateway.transports.modern_http import ModernHTTP
from gateway.transports.replicas import SharedSessions
from gateway.transports.sse import LegacySSE
from gateway.transports.streamable_http import StreamableHTTP, rpc_error

if TYPE_CHECKING:
    from gateway.config import HttpConfig
    from gateway.context import Principal
    from gateway.endpoints.host import EndpointHost, Endpoints
    from gateway.transports.quota import SessionQuota

__all__ = ["add_routes", "EndpointTransports"]

Endpoint = Callable[[web.Request, "Principal"], Awaitable[web.StreamResponse]]
Guarded = Callable[[Endpoint], Callable[[web.Request], Awaitable[web.StreamResponse]]]


class EndpointTransports:
    """The transports of every endpoint, by endpoint host (made on first use)."""

    def __init__(self, endpoints: Callable[[], Endpoints | None], http: Callable[[], HttpConfig],
                 quota: SessionQuota | None, record_ttl_s: Callable[[], float] | None = None) -> None:
        self.endpoints = endpoints
        self.http = http
        self.quota = quota
        self.record_ttl_s = record_ttl_s  # shared records live as long as an idle session would
        self._made: dict[str, tuple[EndpointHost, StreamableHTTP, LegacySSE]] = {}

    def of(self, host: EndpointHost) -> tuple[StreamableHTTP, LegacySSE]:
        made = self._made.get(host.name)
        if made is None or made[0] is not host:
            http = self.http()
            shared = SharedSessions(host.state, host.session_record, self.record_ttl_s, self.quota,
                                    endpoint=host.name) \
                if host.state.shared and self.record_ttl_s is not None else None
            streamable = StreamableHTTP(host, http, ModernHTTP(host, http), self.quota, shared)
            legacy = LegacySSE(host, http, messages_path=f"/messages/{host.name}", quota=self.quota)
            made = self._made[host.name] = (host, streamable, legacy)
        return made[1], made[2]

    def admitted(self, request: web.Request, principal: Principal) -> EndpointHost | web.Response:
        """The endpoint a request names, if the principal may use it (else 404 / 403)."""
        name = request.match_info["name"]
        endpoints = self.endpoints()
        host = endpoints.get(name) if endpoints is not None else None
        if host is None:
            return rpc_error(404, INVALID_REQUEST, f"Not Found: no endpoint is named {name!r}")
        if not host.config.admits(principal.name, principal.groups):
            return rpc_error(403, INVALID_REQUEST, f"Forbidden: principal {principal.name!r} is not among the "
                             f"principals of endpoint {name!r}")
        return host

    def route(self, pick: Callable[[StreamableHTTP, LegacySSE], Endpoint]) -> Endpoint:
        async def handler(request: web.Request, principal: Principal) -> web.StreamResponse:
            host = self.admitted(request, principal)
            if isinstance(host, web.Response):
                return host
            return await pick(*self.of(host))(request, principal)

        return handler

    def deliver(self, message: dict[str, Any]) -> None:
        """A message another replica routed to a session here: the transport holding it takes it."""
        for _host, streamable, _legacy in self._made.values():
            if str(message.get("sid")) in streamable.channels:
                streamable.deliver(message)
                return

    def expire_idle(self, now: float, idle_s: float) -> None:
        for _host, streamable, _legacy in self._made.values():
            streamable.expire_idle(now, idle_s)

    async def close_all(self) -> None:
        for _host, streamable, legacy in list(self._made.values()):
            await legacy.close_all()
            await streamable.close_all()


def add_routes(app: web.Application, guarded: Guarded, endpoints: Callable[[], Endpoints | None],
               http: Callable[[], HttpConfig], idle_s: Callable[[], float],
               quota: SessionQuota | None) -> EndpointTransports:
    """Serve every endpoint of ``endpoints()`` (read per request: a reload changes them)."""
    transports = EndpointTransports(endpoints, http, quota, idle_s)
    app.router.add_post("/mcp/{name}", guarded(transports.route(lambda s, _l: s.post)))
    app.router.add_get("/mcp/{name}", guarded(transports.route(lambda s, _l: s.get)))
    app.router.add_delete("/mcp/{name}", guarded(transports.route(lambda s, _l: s.delete)))
    app.router.add_get("/sse/{name}", guarded(transports.route(lambda _s, sse: sse.get)))
    app.router.add_post("/messages/{name}", guarded(transports.route(lambda _s, sse: sse.post)))

    async def expire_idle(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                idle = idle_s()
                await asyncio.sleep(min(60.0, idle))
                transports.expire_idle(time.monotonic(), idle)

        task = asyncio.create_task(loop())
        yield
        task.cancel()

    async def on_shutdown(app: web.Application) -> None:
        await transports.close_all()

    app.cleanup_ctx.append(expire_idle)
    app.on_shutdown.append(on_shutdown)
    return transports

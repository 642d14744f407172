"""The aiohttp application: MCP endpoints, their guards, health probes and optional extras.

Routes: ``/mcp`` (Streamable HTTP), ``/sse`` + ``/messages`` (legacy HTTP+SSE), ``/healthz``
(liveness: the process serves HTTP), ``/readyz`` (readiness: started and not draining, 200 or 503
with ``{"status": ...}`` alone; ``?strict=1`` also fails when any connector is down;
``?verbose=1`` adds each connector's health and error and the session count, and takes a
credential when auth is on, as the metrics port's ``/readyz`` does not),
``/.well-known/oauth-protected-resource`` and, unless metrics are off or have a port of their
own, ``/metrics`` (it names tools and connectors: with auth on it takes a credential), and
``/status`` (the operator's HTML page, :mod:`gateway.status`: Origin/Host checked like ``/mcp``;
with auth on, a credential whose principal matches ``status.principals``, else 401/403).

Guards on the MCP endpoints, before any session is touched: a connection admitted past
``gateway.http.max_connections`` for probes only is answered 503; Origin and Host validation
against DNS rebinding (both parsed strictly: ``Host: [::1]evil.example`` is malformed, not
loopback; loopback origins and hosts are always allowed when bound to loopback; others must be
listed in ``gateway.http.allowed_origins`` / ``allowed_hosts``), the body size limit,
authentication (HTTP 401 with ``WWW-Authenticate`` before a session exists), then the POST body
read within ``body_timeout_s`` (408). The session cap is :mod:`.quota`'s, shared by both
transports; connection limits and header timeouts are the server's (:mod:`.http_server`).

The app gets an :class:`HttpHost` (the running gateway, seen through what it serves HTTP with),
read per request where a hot reload replaces things (the config, the authenticator).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from gateway.auth import Authenticator, Unauthenticated
from gateway.config import GatewayConfig, HttpConfig
from gateway.context import Principal
from gateway.endpoints.http import add_routes as add_endpoint_routes
from gateway.oauth.routes import OAuthRoutesHost
from gateway.oauth.routes import add_routes as add_oauth_routes
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST
from gateway.state.bus import Bus
from gateway.status.page import refusal, respond
from gateway.status.view import StatusQuery, StatusView
from gateway.telemetry import metrics
from gateway.telemetry.http import add_routes as add_metrics_routes
from gateway.telemetry.http import metrics_handler, readiness

from .host import SessionFactory
from .http_server import probe_only, skip_lingering
from .modern_http import ModernHost, ModernHTTP
from .quota import SessionQuota
from .replicas import SharedSessions
from .sse import ROUTED_KIND as SSE_ROUTED
from .sse import LegacySSE
from .streamable_http import StreamableHTTP, rpc_error

__all__ = ["build_app", "HttpHost", "HOST_KEY", "HTTP_KEY", "SSE_KEY", "QUOTA_KEY"]


class HttpHost(SessionFactory, ModernHost, Protocol):
    """What the HTTP app needs of the running gateway: legacy sessions, modern requests, and:"""

    @property
    def config(self) -> GatewayConfig:
        """The current config (a reload replaces it)."""

    @property
    def authenticator(self) -> Authenticator:
        """The current authenticator (a reload replaces it)."""

    @property
    def bus(self) -> Bus:
        """Messages routed between replicas, by kind (started here; idle with the memory store)."""

    def health(self) -> dict[str, Any]:
        """Readiness detail: ``{"ready": bool, "connectors": {name: {"up": bool, ...}}, ...}``."""

    async def status(self, query: StatusQuery) -> StatusView:
        """What the ``/status`` page shows now."""

    @property
    def oauth(self) -> OAuthRoutesHost:
        """Upstream OAuth: /oauth/start/{id}, /oauth/callback, the client metadata document."""


HOST_KEY: web.AppKey[HttpHost] = web.AppKey("host", HttpHost)
HTTP_KEY: web.AppKey[StreamableHTTP] = web.AppKey("streamable_http", StreamableHTTP)
SSE_KEY: web.AppKey[LegacySSE] = web.AppKey("legacy_sse", LegacySSE)
QUOTA_KEY: web.AppKey[SessionQuota] = web.AppKey("session_quota", SessionQuota)

# RFC 3986 authority without userinfo: an IP literal in brackets or a name / IPv4 address, then an
# optional port. Nothing may follow: "[::1]evil.example" is not a loopback host.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::[0-9]{0,5})?")
_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::[0-9]{0,5})?")


@functools.lru_cache(maxsize=1024)
def _is_loopback(host: str) -> bool:
    """``host`` as :func:`_host_of` returns it: ``localhost``, or a loopback address (IPv6 in brackets)."""
    if host.lower() == "localhost":
        return True
    if host.startswith("["):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(value: str) -> str | None:
    """The host of a ``Host`` header value (``[v6]`` keeps its brackets), or None when malformed."""
    match = _HOST.fullmatch(value)
    if match is None:
        return None
    host = match.group(1)
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
    return host


def _origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` (``scheme://host[:port]``, nothing else), or None when malformed."""
    match = _ORIGIN.fullmatch(origin)
    return _host_of(match.group(1)) if match is not None else None


@functools.lru_cache(maxsize=1024)
def _origin_host_refusal(origin: str | None, host_header: str, http: HttpConfig) -> str | None:
    """Why these Origin and Host headers are refused under ``http``, or None. Pure and cached:
    a client sends the same pair on every request (the config is hashable and frozen)."""
    if origin is not None and "*" not in http.allowed_origins and origin not in http.allowed_origins:
        host = _origin_host(origin)
        if host is None or not _is_loopback(host):
            return f"origin {origin} is not allowed"
    if host_header and _is_loopback(http.host) and "*" not in http.allowed_hosts:
        host = _host_of(host_header)
        if host is None:
            return "the Host header is malformed"
        if not _is_loopback(host) and host not in http.allowed_hosts:
            return f"host {host} is not allowed"
    return None


class _Guard:
    """Origin/Host checks and authentication for the MCP endpoints."""

    def __init__(self, host: HttpHost) -> None:
        self.host = host

    def check_origin_host(self, request: web.Request) -> web.Response | None:
        headers = request.headers
        refusal = _origin_host_refusal(headers.get("Origin"), headers.get("Host", ""), self.host.config.gateway.http)
        if refusal is not None:
            return rpc_error(403, INVALID_REQUEST, f"Forbidden: {refusal}")
        return None

    async def principal(self, request: web.Request) -> Principal | web.Response:
        try:
            return await self.host.authenticator.authenticate(request.headers)
        except Unauthenticated as exc:
            body = jsonrpc.error_response(None, INVALID_REQUEST, f"Unauthorized: {exc}")
            return web.Response(status=exc.status, body=jsonrpc.dumps(body), content_type="application/json",
                                headers={"WWW-Authenticate": exc.www_authenticate})


Endpoint = Callable[[web.Request, Principal], Awaitable[web.StreamResponse]]


def _closing(response: web.Response) -> web.Response:
    response.force_close()
    return response


async def _body_refusal(request: web.Request, http: HttpConfig) -> web.Response | None:
    """Read a POST body within ``body_timeout_s`` (endpoints then read it from memory); a body
    that trickles in slower is refused with 408 and its connection closed. A body that came with
    its head (the usual case) costs no timer."""
    if request.content.is_eof():
        return None
    try:
        async with asyncio.timeout(http.body_timeout_s):
            await request.read()
    except TimeoutError:
        metrics.HTTP_REFUSED.labels("body_timeout").inc()
        skip_lingering(request)
        return _closing(rpc_error(408, INVALID_REQUEST, f"Request Timeout: the body did not arrive within "
                                  f"gateway.http.body_timeout_s ({http.body_timeout_s:g} s)"))
    return None


def _guarded(guard: _Guard, endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        http = guard.host.config.gateway.http
        if probe_only(request):
            return _closing(rpc_error(503, INTERNAL_ERROR, f"Service Unavailable: every connection is busy "
                                      f"(gateway.http.max_connections = {http.max_connections})",
                                      {"Retry-After": "1"}))
        refused = guard.check_origin_host(request)
        if refused is not None:
            return refused
        limit = http.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return rpc_error(413, INVALID_REQUEST, f"Payload Too Large: over {limit} bytes")
        principal = await guard.principal(request)
        if not isinstance(principal, Principal):  # a refusal (web.Response's isinstance is an ABC check)
            return principal
        # After authentication: a stranger's slow body costs no more than aiohttp's lingering close.
        if request.method == "POST":
            slow = await _body_refusal(request, http)
            if slow is not None:
                return slow
        return await endpoint(request, principal)

    return handler


def build_app(host: HttpHost) -> web.Application:
    """An aiohttp application serving this host (not started). The framing options of
    ``gateway.http`` (body limit, keepalive, json_response) are read here, once; the Origin/Host
    allow-lists, the authenticator and the metadata are read per request."""
    http = host.config.gateway.http
    app = web.Application(client_max_size=http.max_body_bytes)
    app[HOST_KEY] = host
    # Replicas sharing sessions through state.store; records (and places under the session cap,
    # counted in the store then) live as long as an idle session would.
    record_ttl = lambda: host.config.gateway.session_idle_timeout_s  # noqa: E731
    quota = SessionQuota(lambda: host.config.gateway.http, host.state, record_ttl)
    shared = SharedSessions(host.state, host.session_record, record_ttl, quota) if host.state.shared else None
    streamable = StreamableHTTP(host, http, ModernHTTP(host, http), quota, shared)
    legacy = LegacySSE(host, http, quota=quota, store=host.state,
                       record_ttl_s=host.config.gateway.session_idle_timeout_s)
    app[HTTP_KEY] = streamable
    app[SSE_KEY] = legacy
    app[QUOTA_KEY] = quota
    guard = _Guard(host)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        # The public answer is the status alone; the detail (connector names, their errors, the
        # session count) needs a credential when auth is on, or the metrics port.
        verbose = request.query.get("verbose") in ("1", "true")
        if verbose:
            principal = await guard.principal(request)
            if isinstance(principal, web.Response):
                return principal
        return readiness(host.health(), request.query.get("strict") in ("1", "true"), verbose)

    async def authorized_metrics(request: web.Request) -> web.StreamResponse:
        principal = await guard.principal(request)
        if isinstance(principal, web.Response):
            return principal
        return await metrics_handler(request)

    app.router.add_post("/mcp", _guarded(guard, streamable.post))
    app.router.add_get("/mcp", _guarded(guard, streamable.get))
    app.router.add_delete("/mcp", _guarded(guard, streamable.delete))
    app.router.add_get("/sse", _guarded(guard, legacy.get))
    app.router.add_post("/messages", _guarded(guard, legacy.post))
    app.router.add_post("/messages/", _guarded(guard, legacy.post))
    app.router.add_get("/healthz", healthz)
    # Endpoints (virtual servers): /mcp/{name}, /sse/{name} + /messages/{name}, behind the same guards.
    endpoint_transports = add_endpoint_routes(app, functools.partial(_guarded, guard),
                                              lambda: getattr(host, "endpoints", None),
                                              lambda: host.config.gateway.http,
                                              lambda: host.config.gateway.session_idle_timeout_s, quota)
    app.router.add_get("/readyz", readyz)

    async def status(request: web.Request) -> web.StreamResponse:
        config = host.config
        if not config.status.enabled:
            raise web.HTTPNotFound()
        refused = guard.check_origin_host(request)
        if refused is not None:
            return refused
        principal = await guard.principal(request)
        if isinstance(principal, web.Response):
            return principal
        # With auth off every caller is anonymous and the page is as open as /metrics; with auth
        # on it shows what other principals did, so it takes an explicit grant.
        if host.authenticator.enabled and not any(principal.matches(s) for s in config.status.principals):
            return refusal(403, f"Forbidden: principal {principal.name!r} is not in status.principals")
        return await respond(request, host.status)

    app.router.add_get("/status", status)

    async def prm(request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        return web.json_response(host.authenticator.protected_resource_metadata(base))

    app.router.add_get("/.well-known/oauth-protected-resource", prm)
    app.router.add_get("/.well-known/oauth-protected-resource/mcp", prm)
    add_oauth_routes(app, host.oauth)  # a person's browser, not an MCP client: no credential asked
    # On the public port (no metrics_port), /metrics names tools and connectors: with auth on it
    # takes a credential like /mcp does.
    add_metrics_routes(app, host.config.telemetry, authorized_metrics)

    async def expire_idle(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            idle = host.config.gateway.session_idle_timeout_s
            while True:
                await asyncio.sleep(min(60.0, idle))
                streamable.expire_idle(time.monotonic(), idle)

        task = asyncio.create_task(loop())
        # Messages other replicas route here (a no-op with the memory store).
        def deliver(message: dict[str, Any]) -> None:  # a session of /mcp, or of an endpoint
            streamable.deliver(message)
            endpoint_transports.deliver(message)

        for kind in ("response", "cancel", "notify", "refresh", "closed"):
            host.bus.on(kind, deliver)
        host.bus.on(SSE_ROUTED, legacy.deliver)
        await host.state.start(host.bus.deliver)
        yield
        task.cancel()

    async def on_shutdown(app: web.Application) -> None:
        await legacy.close_all()
        await streamable.close_all()

    app.cleanup_ctx.append(expire_idle)
    app.on_shutdown.append(on_shutdown)
    return app

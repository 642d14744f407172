"""The aiohttp application: MCP endpoints, their guards, health probes and optional extras.

Routes: ``/mcp`` (Streamable HTTP), ``/sse`` + ``/messages`` (legacy HTTP+SSE), ``/healthz``
(liveness: the process serves HTTP), ``/readyz`` (readiness: started and not draining; the body
lists each connector's health; ``?strict=1`` also fails when any connector is down),
``/.well-known/oauth-protected-resource`` and, unless metrics are off or have a port of their
own, ``/metrics``.

Guards on the MCP endpoints, before any session is touched: Origin and Host validation against
DNS rebinding (loopback origins and hosts are always allowed when bound to loopback; others must be
listed in ``gateway.http.allowed_origins`` / ``allowed_hosts``), the body size limit, and
authentication (HTTP 401 with ``WWW-Authenticate`` before a session exists).

The app gets an :class:`HttpHost` (the running gateway, seen through what it serves HTTP with),
read per request where a hot reload replaces things (the config, the authenticator).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from aiohttp import web

from gateway.auth import Authenticator, Unauthenticated
from gateway.config import GatewayConfig, HttpConfig
from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INVALID_REQUEST
from gateway.telemetry.http import add_routes as add_metrics_routes

from .host import SessionFactory
from .modern_http import ModernHost, ModernHTTP
from .sse import LegacySSE
from .streamable_http import StreamableHTTP, rpc_error

__all__ = ["build_app", "HttpHost", "HOST_KEY", "HTTP_KEY", "SSE_KEY"]


class HttpHost(SessionFactory, ModernHost, Protocol):
    """What the HTTP app needs of the running gateway: legacy sessions, modern requests, and:"""

    @property
    def config(self) -> GatewayConfig:
        """The current config (a reload replaces it)."""

    @property
    def authenticator(self) -> Authenticator:
        """The current authenticator (a reload replaces it)."""

    def health(self) -> dict[str, Any]:
        """Readiness detail: ``{"ready": bool, "connectors": {name: {"up": bool, ...}}, ...}``."""


HOST_KEY: web.AppKey[HttpHost] = web.AppKey("host", HttpHost)
HTTP_KEY: web.AppKey[StreamableHTTP] = web.AppKey("streamable_http", StreamableHTTP)
SSE_KEY: web.AppKey[LegacySSE] = web.AppKey("legacy_sse", LegacySSE)

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


@functools.lru_cache(maxsize=1024)
def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(value: str) -> str:
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@functools.lru_cache(maxsize=1024)
def _origin_host_refusal(origin: str | None, host_header: str, http: HttpConfig) -> str | None:
    """Why these Origin and Host headers are refused under ``http``, or None. Pure and cached:
    a client sends the same pair on every request (the config is hashable and frozen)."""
    if origin is not None and "*" not in http.allowed_origins and origin not in http.allowed_origins:
        if not _is_loopback(urlsplit(origin).hostname or ""):
            return f"origin {origin} is not allowed"
    if _is_loopback(http.host) and "*" not in http.allowed_hosts:
        host = _host_of(host_header)
        if host and host.strip("[]") not in _LOOPBACK_NAMES and host not in http.allowed_hosts \
                and not _is_loopback(host):
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


def _guarded(guard: _Guard, endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        refused = guard.check_origin_host(request)
        if refused is not None:
            return refused
        limit = guard.host.config.gateway.http.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return rpc_error(413, INVALID_REQUEST, f"Payload Too Large: over {limit} bytes")
        principal = await guard.principal(request)
        if isinstance(principal, web.Response):
            return principal
        return await endpoint(request, principal)

    return handler


def build_app(host: HttpHost) -> web.Application:
    """An aiohttp application serving this host (not started). The framing options of
    ``gateway.http`` (body limit, keepalive, json_response) are read here, once; the Origin/Host
    allow-lists, the authenticator and the metadata are read per request."""
    http = host.config.gateway.http
    app = web.Application(client_max_size=http.max_body_bytes)
    app[HOST_KEY] = host
    streamable = StreamableHTTP(host, http, ModernHTTP(host, http))
    legacy = LegacySSE(host, http)
    app[HTTP_KEY] = streamable
    app[SSE_KEY] = legacy
    guard = _Guard(host)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        health = host.health()
        ok = health["ready"]
        if request.query.get("strict") in ("1", "true") and not all(c["up"] for c in health["connectors"].values()):
            ok = False
        return web.Response(status=200 if ok else 503, text=json.dumps(health), content_type="application/json")

    app.router.add_post("/mcp", _guarded(guard, streamable.post))
    app.router.add_get("/mcp", _guarded(guard, streamable.get))
    app.router.add_delete("/mcp", _guarded(guard, streamable.delete))
    app.router.add_get("/sse", _guarded(guard, legacy.get))
    app.router.add_post("/messages", _guarded(guard, legacy.post))
    app.router.add_post("/messages/", _guarded(guard, legacy.post))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)

    async def prm(request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        return web.json_response(host.authenticator.protected_resource_metadata(base))

    app.router.add_get("/.well-known/oauth-protected-resource", prm)
    app.router.add_get("/.well-known/oauth-protected-resource/mcp", prm)
    add_metrics_routes(app, host.config.telemetry)

    async def expire_idle(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            idle = host.config.gateway.session_idle_timeout_s
            while True:
                await asyncio.sleep(min(60.0, idle))
                streamable.expire_idle(time.monotonic(), idle)

        task = asyncio.create_task(loop())
        yield
        task.cancel()

    async def on_shutdown(app: web.Application) -> None:
        await legacy.close_all()
        await streamable.close_all()

    app.cleanup_ctx.append(expire_idle)
    app.on_shutdown.append(on_shutdown)
    return app

"""Serve an official-SDK (2.x) ``MCPServer`` as a test upstream of one protocol era.

What the SDK does by itself (read from ``mcp/server/runner.py``, ``lowlevel/server.py`` and
``streamable_http_manager.py``): an SDK 2.x server is **dual-era** on every transport. Over a
stream pair (stdio, the legacy SSE transport) ``Server.run`` drives ``serve_dual_era_loop``: the
client's first request decides the connection's era once (a request carrying the 2026-07-28
``_meta`` protocolVersion opens a modern connection, anything else, ``initialize`` included, a
legacy one). Over Streamable HTTP the session manager routes each POST by its
``MCP-Protocol-Version`` header: a handshake revision or no header goes to the stateful 2025
transport (``initialize``, ``Mcp-Session-Id``, GET stream), any other value to the stateless
2026-07-28 entry. There is no switch to serve one era only, so :func:`serve` adds it:

* ``legacy`` — what a 2025-era server does: stream transports run the handshake-only
  ``serve_loop`` (``server/discover`` is -32601, unknown at a handshake revision); on Streamable
  HTTP a modern ``MCP-Protocol-Version`` header is dropped, so the SDK's 2025 transport answers
  (HTTP 400 "Missing session ID" for a POST without a session);
* ``modern`` — a 2026-07-28-only server: a legacy ``initialize`` is refused with -32022
  UnsupportedProtocolVersion naming the served revisions (middleware, every transport); on
  Streamable HTTP a request without a modern ``MCP-Protocol-Version`` gets that error with
  ``400 Bad Request`` and GET/DELETE get 405, as the 2026-07-28 transport specifies;
* ``dual`` — the SDK as it is.

Run a server with :func:`serve`; its command-line scripts take ``--era``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

import anyio
from mcp import MCPDeprecationWarning
from mcp.server import MCPServer, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.runner import serve_dual_era_loop, serve_loop
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import UNSUPPORTED_PROTOCOL_VERSION
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

__all__ = ["ERAS", "Era", "TRANSPORTS", "serve", "add_era_arguments"]

Era = Literal["legacy", "modern", "dual"]
ERAS: tuple[Era, ...] = ("dual", "legacy", "modern")
TRANSPORTS = ("stdio", "sse", "streamable_http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

_VERSION_HEADER = b"mcp-protocol-version"


def _unsupported(requested: object) -> dict[str, Any]:
    data: dict[str, Any] = {"supported": list(MODERN_PROTOCOL_VERSIONS)}
    if isinstance(requested, str):
        data["requested"] = requested
    return data


async def _refuse_handshake(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """A modern-only server answers a legacy client's ``initialize`` with the versions it serves
    (versioning.mdx: it SHOULD name them in any error to ``initialize``). An ``initialize`` sent
    at 2026-07-28 is left to the SDK: a method that revision removed (-32601, HTTP 404)."""
    if ctx.method == "initialize" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(code=UNSUPPORTED_PROTOCOL_VERSION, message="Unsupported protocol version",
                       data=_unsupported((ctx.params or {}).get("protocolVersion")))
    return await call_next(ctx)


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name), None)


def _legacy_http(app: ASGIApp) -> ASGIApp:
    """Hide the SDK's stateless entry: a modern version header never reaches its router."""
    async def wrapped(scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        version = _header(scope, _VERSION_HEADER)
        if scope["type"] == "http" and version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != _VERSION_HEADER]}
        await app(scope, receive, send)
    return wrapped


def _modern_http(app: ASGIApp) -> ASGIApp:
    """Serve only requests that declare a modern revision (streamable-http.mdx, Protocol Version
    Header: an unsupported version is ``400`` with UnsupportedProtocolVersionError)."""
    async def wrapped(scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        version = _header(scope, _VERSION_HEADER)
        if scope["type"] != "http" or version in MODERN_PROTOCOL_VERSIONS:
            await app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        request = request if isinstance(request, dict) else {}
        params = request.get("params")
        requested = version
        if requested is None and isinstance(params, dict):
            requested = params.get("protocolVersion")  # a legacy client's initialize
        error = {"jsonrpc": "2.0", "id": request.get("id"), "error": {
            "code": UNSUPPORTED_PROTOCOL_VERSION, "message": "Unsupported protocol version",
            "data": _unsupported(requested)}}
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(error).encode()})
    return wrapped


async def _serve_streams(server: MCPServer[Any], era: Era, read: Any, write: Any) -> None:
    low = server._lowlevel_server  # the registry: its handlers, lifespan, initialization options
    async with low.lifespan(low) as state:
        options = low.create_initialization_options()
        if era == "legacy":
            await serve_loop(low, read, write, lifespan_state=state, init_options=options)
        else:
            await serve_dual_era_loop(low, read, write, lifespan_state=state, init_options=options)


def _sse_app(server: MCPServer[Any], era: Era) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def endpoint(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await _serve_streams(server, era, read, write)
        return Response()

    return Starlette(routes=[Route("/sse", endpoint=endpoint, methods=["GET"]),
                             Mount("/messages/", app=sse.handle_post_message)])


def serve(server: MCPServer[Any], transport: str, era: Era = "dual", port: int = 0, **http: Any) -> None:
    """Serve ``server`` until the process is stopped: ``stdio``, or ``sse`` (``/sse``) or
    ``streamable_http`` (``/mcp``) on 127.0.0.1:``port``. ``http`` goes to
    ``MCPServer.streamable_http_app`` (``event_store``, ``retry_interval``, ``json_response``...)."""
    # Logging, sampling, roots and subscriptions are deprecated at 2026-07-28 and warn on every
    # call; a legacy session uses them legitimately, and the warnings would only clutter stderr.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    if era not in ERAS:
        raise ValueError(f"era must be one of {ERAS}, not {era!r}")
    if era == "modern":
        server.middleware.append(_refuse_handshake)
    if transport == "stdio":
        async def main() -> None:
            async with stdio_server() as (read, write):
                await _serve_streams(server, era, read, write)
        anyio.run(main)
        return
    import uvicorn

    if transport == "sse":
        app = _sse_app(server, era)
    elif transport == "streamable_http":
        app = server.streamable_http_app(**http)
        if era == "legacy":
            app = _legacy_http(app)
        elif era == "modern":
            app = _modern_http(app)
    else:
        raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).run()


def add_era_arguments(parser: Any) -> None:
    """``--transport`` and ``--era`` for a server script's ``argparse`` parser."""
    parser.add_argument("--transport", default="stdio", choices=TRANSPORTS)
    parser.add_argument("--era", default="dual", choices=ERAS,
                        help="protocol era served: legacy (initialize), modern (2026-07-28) or dual")

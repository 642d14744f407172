"""Test helpers: a loopback upstream that validates every request against the original spec with
openapi-core, a recording events sink, a dummy session and a CallContext factory."""

from __future__ import annotations

import asyncio
import gzip
import json
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from jsonschema_path import SchemaPath
from openapi_core.datatypes import RequestParameters
from openapi_core.security.factories import SecurityProviderFactory
from openapi_core.security.providers import ApiKeyProvider, HttpProvider
from openapi_core.validation.request.validators import V30RequestValidator, V31RequestValidator

from connectors.openapi.request import server_url
from connectors.openapi.validate import openapi_core_quirk, split_server
from gateway.context import CallContext

DATA = Path(__file__).resolve().parents[2] / "data" / "openapi"
SPECS = {
    "petstore": DATA / "petstore-v3.json",
    "openapi31": DATA / "openapi31-schema-types.json",
    "composition": DATA / "composition-discriminators.json",
    "recursion": DATA / "recursion-schema-circular.json",
    "github": DATA / "github-api.json.gz",
}


def load_doc(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc: dict[str, Any] = json.loads(raw)
    return doc


class RecordingEvents:
    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.changes = 0
        self.logs: list[tuple[str, Any]] = []

    def components_changed(self) -> None:
        self.changes += 1
        self.changed.set()

    def resource_updated(self, uri: str) -> None:
        pass

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        self.logs.append((level, data))

    def health_changed(self, health: Any) -> None:
        pass


class DummySession:
    id = "s1"
    transport = "test"
    protocol_version = "2025-11-25"
    client_info: dict[str, Any] = {}
    client_capabilities: dict[str, Any] = {}

    async def notify(self, method: str, params: dict[str, Any] | None = None, related_request_id: Any = None) -> None:
        pass

    async def request(self, method: str, params: dict[str, Any] | None = None, related_request_id: Any = None,
                      timeout: float | None = None) -> dict[str, Any]:
        raise NotImplementedError


def ctx(name: str = "t", arguments: dict[str, Any] | None = None) -> CallContext:
    return CallContext(session=DummySession(), method="tools/call", request_id=1, params={},
                       target=name, arguments=arguments or {})


class _BearerProvider(HttpProvider):
    """OAuth2/OpenID Connect: openapi-core only warns; here an access token must be present."""

    def __call__(self, parameters: RequestParameters) -> Any:
        auth = parameters.header.get("Authorization", "")
        if not auth.lower().startswith("bearer "):
            from openapi_core.security.exceptions import SecurityProviderError

            raise SecurityProviderError("Missing bearer token.")
        return auth[7:]


_SECURITY = SecurityProviderFactory()
_SECURITY.PROVIDERS = {"apiKey": ApiKeyProvider, "http": HttpProvider, "oauth2": _BearerProvider,
                       "openIdConnect": _BearerProvider}


class _Incoming:
    __slots__ = ("host_url", "path", "method", "body", "content_type", "parameters")

    def __init__(self, host: str, path: str, request: web.Request, body: bytes) -> None:
        self.host_url = host
        self.path = path
        self.method = request.method.lower()
        self.body = body
        self.content_type = request.headers.get("Content-Type", "").lower()
        self.parameters = RequestParameters(query=request.query, header=request.headers, cookie=request.cookies)


@dataclass
class Upstream:
    url: str  # base URL to configure as base_url
    seen: list[dict[str, Any]] = field(default_factory=list)

    @property
    def valid(self) -> int:
        return sum(1 for s in self.seen if not s["errors"])


@asynccontextmanager
async def mock_upstream(doc: dict[str, Any], respond: Callable[[web.Request, bytes], Any] | None = None,
                        check_security: bool = True) -> AsyncIterator[Upstream]:
    """Serve ``doc`` at http://127.0.0.1:PORT/base: validate each request, answer 200 ``{}``
    (or what ``respond`` returns)."""
    spec = SchemaPath.from_dict(doc)
    cls = V31RequestValidator if str(doc.get("openapi", "")).startswith("3.1") else V30RequestValidator
    validator = cls(spec, security_provider_factory=_SECURITY)
    # Operations may declare their own servers (GitHub's uploads.github.com): try each in turn.
    servers = [split_server(server_url(doc.get("servers")))]
    for item in (doc.get("paths") or {}).values():
        for node in [item, *[v for v in item.values() if isinstance(v, dict)]]:
            if isinstance(node, dict) and node.get("servers"):
                found = split_server(server_url(node["servers"]))
                if found not in servers:
                    servers.append(found)
    upstream = Upstream("")

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        rel = request.rel_url.raw_path[len("/base"):]
        for host, base in servers:
            incoming = _Incoming(host, base + rel, request, body)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # deprecated parameters may be used
                errors = [e for e in validator.iter_errors(incoming) if not openapi_core_quirk(e)
                          and (check_security or "Security" not in type(e).__name__)]
            if not any(type(e).__name__ == "ServerNotFound" for e in errors):
                break
        upstream.seen.append({"method": request.method, "path": request.rel_url.raw_path,
                              "query": request.rel_url.raw_query_string, "headers": dict(request.headers),
                              "body": body, "errors": [f"{type(e).__name__}: {e} {e.__cause__ or ''}" for e in errors]})
        if errors:
            return web.json_response({"errors": upstream.seen[-1]["errors"]}, status=400)
        if respond is not None:
            out = respond(request, body)
            if asyncio.iscoroutine(out):
                out = await out
            assert isinstance(out, web.StreamResponse)
            return out
        return web.json_response({})

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_route("*", "/base/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    upstream.url = f"http://127.0.0.1:{port}/base"
    try:
        yield upstream
    finally:
        await runner.cleanup()

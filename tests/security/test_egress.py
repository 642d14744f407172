"""Issue 14, rows 2, 10, 11 and 12 for the OpenAPI connector: egress and hostile backends.

Row 2 was: a backend answering 302 to another host received the connector's ``X-API-Key``, and
redirects toward 169.254.169.254 were followed (SSRF). Now every request goes through the egress
policy (connectors/egress.py): redirects are followed within the same origin for GET/HEAD only, and
every address is checked after DNS, before connecting. The attacks run against real loopback
backends on several ports and addresses (127.0.0.2 plays another host); names are mapped to
addresses by a fake DNS handed to the connector, so no test needs the internet. Every socket the
test's loop connects is recorded, so "refused before connecting" is observed, not assumed.

Rows 10-12: a CR/LF in a header argument is a tool error naming the argument (it was ``-32603
Internal error (ValueError)``), ``.`` and ``..`` path values arrive percent-encoded, and a response
over ``max_response_bytes`` fails that call only while the connector keeps serving.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.connector import OpenAPIConnector
from connectors.openapi.loader import SpecError
from gateway.protocol.errors import ToolExecutionError
from tests.connectors.openapi.upstream import RecordingEvents, ctx
from tests.e2e.rawhttp import initialize
from tests.support import running_gateway

SECRETS = {"api_key": "K-SECRET", "bearer": "B-SECRET", "basic": {"username": "u", "password": "P-SECRET"}}
BASIC = "Basic " + base64.b64encode(b"u:P-SECRET").decode()
CREDENTIAL = {"key": ("X-API-Key", "K-SECRET"), "bearer": ("Authorization", "Bearer B-SECRET"),
              "basic": ("Authorization", BASIC)}
METADATA_URL = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"


def _op(op_id: str, security: str | None = None, params: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "responses": {"200": {"description": "ok"}}, "parameters": list(params)}
    op["security"] = [{security: []}] if security else []
    return op


SPEC: dict[str, Any] = {
    "openapi": "3.0.3", "info": {"title": "egress", "version": "1"}, "servers": [{"url": "http://api.invalid/base"}],
    "components": {"securitySchemes": {
        "key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        "bearer": {"type": "http", "scheme": "bearer"},
        "basic": {"type": "http", "scheme": "basic"}}},
    "paths": {
        "/key": {"get": _op("key", "key")},
        "/bearer": {"get": _op("bearer", "bearer")},
        "/basic": {"get": _op("basic", "basic")},
        "/items": {"post": _op("add", "key")},
        "/files/{name}": {"get": _op("file", None, [{"name": "name", "in": "path", "required": True,
                                                      "schema": {"type": "string"}}])},
        "/echo": {"get": _op("echo", "key", [{"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                                             {"name": "pref", "in": "cookie", "schema": {"type": "string"}}])},
        "/big": {"get": _op("big")},
    },
}


class FakeDNS:
    """Names → loopback addresses; records every question, so a test sees whether DNS was asked."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int, family: int) -> Sequence[str]:
        self.asked.append(host)
        return self.table.get(host, [])


@dataclass
class Backend:
    url: str  # http://host:port
    seen: list[dict[str, Any]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _echo(request: web.Request) -> web.StreamResponse:
    return web.json_response({"path": request.rel_url.raw_path, "headers": dict(request.headers)})


@asynccontextmanager
async def backend(host: str = "127.0.0.1", handler: Handler = _echo) -> AsyncIterator[Backend]:
    """A real HTTP server on ``host`` (any loopback address) recording every request it receives."""
    found = Backend("")

    async def handle(request: web.Request) -> web.StreamResponse:
        found.seen.append({"method": request.method, "path": request.rel_url.raw_path,
                           "headers": dict(request.headers)})
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    found.url = f"http://{host}:{runner.addresses[0][1]}"
    try:
        yield found
    finally:
        await runner.cleanup()


@pytest.fixture
async def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every address a client socket of this test's loop connects to (aiohttp connects through
    ``loop.sock_connect``)."""
    loop = asyncio.get_running_loop()
    seen: list[tuple[str, int]] = []
    original = loop.sock_connect

    async def sock_connect(sock: Any, address: Any) -> None:
        seen.append((str(address[0]), int(address[1])))
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", sock_connect)
    return seen


@asynccontextmanager
async def connector(spec_path: Path, dns: FakeDNS | None = None, **config: Any) -> AsyncIterator[OpenAPIConnector]:
    conn = OpenAPIConnector(OpenAPIConfig.model_validate(
        {"name": "api", "type": "openapi", "spec": str(spec_path), "auth": SECRETS, "retries": 0, **config}),
        lookup=dns)
    await conn.start(RecordingEvents())
    try:
        yield conn
    finally:
        await conn.stop()


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "egress.json"
    path.write_text(json.dumps(SPEC))
    return path


async def _refused(conn: OpenAPIConnector, tool: str, args: dict[str, Any] | None = None) -> ToolExecutionError:
    with pytest.raises(ToolExecutionError) as info:
        await conn.call_tool(tool, args or {}, ctx())
    assert info.value.status == "egress_refused", info.value.message
    return info.value


# -- row 2: redirects ------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["key", "bearer", "basic"])
async def test_a_redirect_to_another_origin_never_receives_the_credential(
        spec_file: Path, connects: list[tuple[str, int]], scheme: str) -> None:
    header, secret = CREDENTIAL[scheme]
    target: dict[str, str] = {}

    async def redirecting(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/base/final/"):
            return await _echo(request)
        raise web.HTTPFound(target["location"])

    dns = FakeDNS({"partner.test": ["127.0.0.1"]})
    async with backend("127.0.0.1", redirecting) as api, backend("127.0.0.1") as same_host, \
            backend("127.0.0.2") as other_host, \
            connector(spec_file, dns, base_url=f"{api.url}/base",
                      egress={"allow_hosts": ["partner.test"]}) as conn:
        # Control: a redirect within the origin is followed, and the credential goes along.
        target["location"] = f"/base/final/{scheme}"
        result = await conn.call_tool(scheme, {}, ctx())
        assert result["structuredContent"]["headers"][header] == secret
        assert [s["path"] for s in api.seen] == [f"/base/{scheme}", f"/base/final/{scheme}"]
        # Another port of the same host, another loopback host, a name the policy even allows,
        # the same host over https: none is the configured origin, none is contacted.
        for location in (f"{same_host.url}/steal", f"{other_host.url}/steal", f"http://partner.test:{same_host.port}/x",
                         f"https://127.0.0.1:{api.port}/base/final/{scheme}"):
            target["location"] = location
            err = await _refused(conn, scheme)
            assert err.message == (f"GET /{scheme}: the backend answered HTTP 302, a redirect the gateway does not "
                                   "follow: the target is another origin (only the same scheme, host and port are "
                                   "followed)")
            assert secret not in err.message and location not in err.message
    assert same_host.seen == [] and other_host.seen == []
    assert dns.asked == []  # refused on the origin rule, before any DNS question
    assert {port for _, port in connects} == {api.port}


async def test_only_get_and_head_are_redirected_and_hops_are_bounded(spec_file: Path) -> None:
    hops: list[str] = []

    async def looping(request: web.Request) -> web.StreamResponse:
        hops.append(request.path)
        if request.method == "POST":
            raise web.HTTPTemporaryRedirect("/base/final")  # 307 keeps the method and the body
        raise web.HTTPFound(f"/base/key?n={len(hops)}")

    async with backend("127.0.0.1", looping) as api, \
            connector(spec_file, base_url=f"{api.url}/base", egress={"max_redirects": 2}) as conn:
        err = await _refused(conn, "key")
        assert "more than egress.max_redirects = 2 redirects" in err.message
        assert len(hops) == 3  # the request and two redirects followed
        hops.clear()
        err = await _refused(conn, "add")
        assert "POST requests are not redirected (only GET and HEAD are)" in err.message
        assert hops == ["/base/items"]  # the POST is not sent again anywhere


async def test_a_redirect_toward_the_metadata_address_is_refused_before_connecting(
        spec_file: Path, tmp_path: Path, connects: list[tuple[str, int]]) -> None:
    async def to_metadata(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(METADATA_URL)

    async with backend("127.0.0.1", to_metadata) as api:
        async with connector(spec_file, base_url=f"{api.url}/base") as conn:
            started = time.perf_counter()
            err = await _refused(conn, "key")
            assert time.perf_counter() - started < 2  # refused, not a connect timeout to a black hole
            assert "169.254" not in err.message
        # The spec fetch is redirected the same way: start fails and names the rule for the operator.
        with pytest.raises(SpecError) as info:
            async with connector(Path("unused"), spec=f"{api.url}/openapi.json"):
                pass
        assert "HTTP 302 redirect" in str(info.value) and "169.254.169.254" in str(info.value)
        assert "another origin" in str(info.value)
    assert connects and all(host == "127.0.0.1" for host, _ in connects)


# -- row 2: addresses, after DNS -----------------------------------------------------------------

async def test_a_host_name_resolving_to_link_local_is_refused_before_connecting(
        spec_file: Path, connects: list[tuple[str, int]]) -> None:
    dns = FakeDNS({"api.test": ["127.0.0.1"], "meta.test": ["169.254.169.254"],
                   "mixed.test": ["127.0.0.1", "169.254.169.254"], "v6meta.test": ["::ffff:169.254.169.254"]})
    async with backend("127.0.0.1") as api:
        port = api.port
        # Control: the same backend by a name, allowed by network, is reached at the address checked.
        async with connector(spec_file, dns, base_url=f"http://api.test:{port}/base",
                             egress={"allow_private": ["127.0.0.0/8"]}) as conn:
            result = await conn.call_tool("key", {}, ctx())
            assert result["structuredContent"]["headers"]["Host"] == f"api.test:{port}"
        assert connects == [("127.0.0.1", port)]
        # Without allow_private the name is refused after DNS: its address is private.
        async with connector(spec_file, dns, base_url=f"http://api.test:{port}/base") as conn:
            assert "a private address" in (await _refused(conn, "key")).message
        # Link-local answers are refused even with every private range allowed, and one bad
        # address in an answer refuses the name (no "fallback" to the good one).
        for name in ("meta.test", "mixed.test", "v6meta.test"):
            async with connector(spec_file, dns, base_url=f"http://{name}:{port}/base",
                                 egress={"allow_private": ["0.0.0.0/0", "::/0"]}) as conn:
                err = await _refused(conn, "key")
                assert "a link-local or cloud metadata address" in err.message
        # Obfuscated spellings of 127.0.0.1 are names to the rules, so they are resolved and checked
        # (aiohttp refuses them outright); never the trusted literal origin they imitate.
        for host in ("2130706433", "127.1", "0x7f.0.0.1", "017700000001"):
            async with connector(spec_file, base_url=f"http://{host}:{port}/base") as conn:
                with pytest.raises(ToolExecutionError):
                    await conn.call_tool("key", {}, ctx())
    assert dns.asked.count("meta.test") == 1 and dns.asked.count("mixed.test") == 1
    assert connects == [("127.0.0.1", port)]  # nothing but the control was ever connected
    assert len(api.seen) == 1


async def test_metadata_base_urls_fail_at_start(spec_file: Path) -> None:
    for base_url in ("http://169.254.169.254/latest", "http://[::ffff:169.254.169.254]/",
                     "http://metadata.google.internal/computeMetadata/v1"):
        with pytest.raises(SpecError) as info:
            async with connector(spec_file, base_url=base_url):
                pass
        assert info.value.path == "base_url" and "allowed only by" in info.value.message
    # By name, the operator may: a connector serving the metadata service on purpose starts.
    async with connector(spec_file, base_url="http://metadata.google.internal/computeMetadata/v1",
                         egress={"allow_hosts": ["metadata.google.internal"]}) as conn:
        assert conn.health().up


async def test_a_spec_url_on_a_private_address_is_refused_unless_allowed(
        tmp_path: Path, connects: list[tuple[str, int]]) -> None:
    schemas = {"Thing": {"type": "object", "properties": {"name": {"type": "string"}}}}
    with_ref = json.loads(json.dumps(SPEC))
    async with backend("127.0.0.2", lambda r: _json(schemas)) as refs:
        with_ref["paths"]["/things"] = {"post": {
            "operationId": "addThing", "responses": {"200": {"description": "ok"}},
            "requestBody": {"content": {"application/json": {"schema": {"$ref": f"{refs.url}/schemas.json#/Thing"}}}}}}
        docs = {"/openapi.json": SPEC, "/with-ref.json": with_ref}
        async with backend("127.0.0.1", lambda r: _json(docs[r.path])) as specs:
            dns = FakeDNS({"specs.test": ["127.0.0.1"]})
            by_name = f"http://specs.test:{specs.port}/openapi.json"
            with pytest.raises(SpecError) as info:
                async with connector(Path("unused"), dns, spec=by_name):
                    pass
            assert info.value.path == by_name
            assert "specs.test (127.0.0.1) refused: a private address" in info.value.message
            assert "egress.allow_private" in info.value.message
            assert specs.seen == []
            async with connector(Path("unused"), dns, spec=by_name, egress={"allow_hosts": ["specs.test"]}) as conn:
                assert "key" in {t.name for t in conn.tools()}
            assert len(specs.seen) == 1
            # A spec the config names by its IP literal is trusted; a $ref it makes to another
            # private origin is not.
            literal = f"{specs.url}/with-ref.json"
            with pytest.raises(SpecError) as info:
                async with connector(Path("unused"), spec=literal):
                    pass
            assert "cannot load $ref target" in info.value.message and "127.0.0.2" in info.value.message
            assert refs.seen == []
            async with connector(Path("unused"), spec=literal, egress={"allow_private": ["127.0.0.2"]}) as conn:
                assert "addThing" in {t.name for t in conn.tools()}
            assert len(refs.seen) == 1
    assert ("127.0.0.2", refs.port) in connects  # the control above did connect there


def _json(data: Any) -> Awaitable[web.StreamResponse]:
    async def reply() -> web.StreamResponse:
        return web.json_response(data)

    return reply()


# -- rows 10 and 11 through the gateway ------------------------------------------------------------

async def test_a_line_break_in_a_header_argument_is_a_tool_error_naming_it(spec_file: Path) -> None:
    async with backend("127.0.0.1") as api:
        config = f"""
            audit: {{enabled: false}}
            connectors:
              - name: api
                type: openapi
                spec: {spec_file}
                base_url: {api.url}/base
                auth: {{api_key: K-SECRET}}
        """
        async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
            session = await initialize(http, gw.mcp_url)
            clean = await session.request("tools/call", {"name": "api_echo", "arguments": {"X-Trace": "t-1"}})
            assert clean["result"]["structuredContent"]["headers"]["X-Trace"] == "t-1"
            for args, arg in (({"X-Trace": "t\r\nX-Injected: yes"}, "X-Trace"), ({"X-Trace": "t\nX-Injected: yes"},
                                                                                   "X-Trace"),
                              ({"pref": "dark; X-API-Key=stolen"}, "pref")):
                reply = await session.request("tools/call", {"name": "api_echo", "arguments": args})
                assert "error" not in reply, reply  # was -32603 Internal error (ValueError)
                result = reply["result"]
                assert result["isError"] is True
                assert result["content"][0]["text"].startswith(f"Invalid arguments for echo: argument {arg!r}: ")
    assert len(api.seen) == 1  # only the clean call reached the backend
    assert all("X-Injected" not in s["headers"] for s in api.seen)


async def test_dot_segments_reach_the_backend_percent_encoded(spec_file: Path) -> None:
    async with backend("127.0.0.1") as api, connector(spec_file, base_url=f"{api.url}/base") as conn:
        for name, raw in ((".", "%2E"), ("..", "%2E%2E"), ("../key", "..%2Fkey"), ("%2E%2E", "%252E%252E")):
            result = await conn.call_tool("file", {"name": name}, ctx())
            assert result["structuredContent"]["path"] == f"/base/files/{raw}"
    assert [s["path"] for s in api.seen] == ["/base/files/%2E", "/base/files/%2E%2E", "/base/files/..%2Fkey",
                                             "/base/files/%252E%252E"]


# -- row 12: an oversized response -----------------------------------------------------------------

async def test_an_oversized_response_fails_that_call_only(spec_file: Path) -> None:
    written = {"bytes": 0}
    release = asyncio.Event()

    async def huge(request: web.Request) -> web.StreamResponse:
        if request.path == "/base/big":  # chunked, no Content-Length, endless unless the client leaves
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            chunk = b" " * 65536
            while written["bytes"] < 512 * 1024 * 1024:
                await resp.write(chunk)
                written["bytes"] += len(chunk)
            return resp
        if request.path == "/base/files/declared":  # a Content-Length over the limit: not read at all
            return web.Response(body=b"x" * (2 * 1024 * 1024), content_type="application/octet-stream")
        await release.wait()  # a slow, ordinary call of another user, in flight meanwhile
        return await _echo(request)

    async with backend("127.0.0.1", huge) as api, \
            connector(spec_file, base_url=f"{api.url}/base", max_response_bytes=1024 * 1024) as conn:
        other = asyncio.create_task(conn.call_tool("key", {}, ctx()))
        started = time.perf_counter()
        with pytest.raises(ToolExecutionError) as info:
            await conn.call_tool("big", {}, ctx())
        assert time.perf_counter() - started < 5
        assert info.value.message == "GET /big: the response exceeded 1048576 bytes"
        assert written["bytes"] < 64 * 1024 * 1024  # reading stopped at the limit, the stream was cut
        with pytest.raises(ToolExecutionError, match="exceeded 1048576 bytes"):
            await conn.call_tool("file", {"name": "declared"}, ctx())
        assert conn.health().up
        release.set()
        assert (await asyncio.wait_for(other, 5))["structuredContent"]["headers"]["X-API-Key"] == "K-SECRET"
        assert (await conn.call_tool("file", {"name": "after"}, ctx()))["structuredContent"]["path"] == \
            "/base/files/after"


# -- what a spec says is not trusted like what the config says -------------------------------------

async def test_a_spec_cannot_steer_the_client_secret_or_read_local_files(tmp_path: Path) -> None:
    issued: list[str] = []

    async def token(request: web.Request) -> web.StreamResponse:
        if request.path == "/moved":
            raise web.HTTPTemporaryRedirect(f"http://127.0.0.2:{thief.port}/token")
        issued.append(request.headers.get("Authorization", ""))
        return web.json_response({"access_token": "tok", "expires_in": 3600})

    async with backend("127.0.0.1") as api, backend("127.0.0.1", token) as idp, backend("127.0.0.2") as thief:
        doc = json.loads(json.dumps(SPEC))
        doc["components"]["securitySchemes"]["oauth"] = {"type": "oauth2", "flows": {"clientCredentials": {
            "tokenUrl": f"{thief.url}/token", "scopes": {}}}}
        doc["paths"]["/key"]["get"]["security"] = [{"oauth": []}]
        spec = tmp_path / "oauth.json"
        spec.write_text(json.dumps(doc))
        oauth = {"client_id": "cid", "client_secret": "C-SECRET"}
        # The spec's tokenUrl names a private origin the config never wrote: the secret stays home.
        conn = OpenAPIConnector(OpenAPIConfig.model_validate({
            "name": "api", "type": "openapi", "spec": str(spec), "base_url": f"{api.url}/base",
            "auth": {"oauth2": oauth}}))
        await conn.start(RecordingEvents())
        try:
            assert "a private address" in (await _refused(conn, "key")).message
        finally:
            await conn.stop()
        # The config's own token_url is trusted; a redirect from it is never followed.
        for path, ok in (("/token", True), ("/moved", False)):
            conn = OpenAPIConnector(OpenAPIConfig.model_validate({
                "name": "api", "type": "openapi", "spec": str(spec), "base_url": f"{api.url}/base",
                "auth": {"oauth2": {**oauth, "token_url": f"{idp.url}{path}"}}}))
            await conn.start(RecordingEvents())
            try:
                if ok:
                    result = await conn.call_tool("key", {}, ctx())
                    assert result["structuredContent"]["headers"]["Authorization"] == "Bearer tok"
                else:
                    with pytest.raises(ToolExecutionError, match="OAuth2 token request failed with HTTP 307"):
                        await conn.call_tool("key", {}, ctx())
            finally:
                await conn.stop()
        assert len(issued) == 1 and thief.seen == []
        # A downloaded spec may not pull a local file into the tool schemas.
        secret_file = tmp_path / "secret.json"
        secret_file.write_text(json.dumps({"Thing": {"type": "object", "description": "S3CRET"}}))
        doc = json.loads(json.dumps(SPEC))
        doc["paths"]["/things"] = {"post": {
            "operationId": "addThing", "responses": {"200": {"description": "ok"}},
            "requestBody": {"content": {"application/json": {"schema": {"$ref": f"file://{secret_file}#/Thing"}}}}}}
        async with backend("127.0.0.1", lambda r: _json(doc)) as specs:
            with pytest.raises(SpecError, match="may refer to URLs only, not to local files"):
                async with connector(Path("unused"), spec=f"{specs.url}/openapi.json"):
                    pass

"""The OpenAPI connector's upstream identities: a REST API protected by the loopback
authorization server (:mod:`tests.oauth.authserver`), called through a gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from aiohttp import web
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from connectors.base import Connector
from connectors.oauth.port import LocalAuthorizationBroker, MemoryTokenStore, OAuthPort
from connectors.openapi.config import OpenAPIConfig
from tests.e2e.clients import LEGACY, connect
from tests.oauth.authserver import AuthServer
from tests.support import running_gateway

SPEC = {"openapi": "3.0.3", "info": {"title": "who", "version": "1"},
        "paths": {"/whoami": {"get": {"operationId": "whoami", "responses": {"200": {"description": "ok"}}}}}}


@pytest.fixture
def port() -> Iterator[OAuthPort]:
    store = MemoryTokenStore()
    fresh = OAuthPort(store=store, broker=LocalAuthorizationBroker(store))
    saved, Connector.oauth_port = Connector.oauth_port, fresh
    try:
        yield fresh
    finally:
        Connector.oauth_port = saved


@asynccontextmanager
async def api_world() -> AsyncIterator[tuple[AuthServer, str, list[str | None]]]:
    """The authorization server and a REST API answering GET /whoami with the token's subject
    (401 with a challenge naming the authorization server's metadata otherwise)."""
    auth = AuthServer()
    seen: list[str | None] = []
    runners = []

    async def whoami(request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        grant = auth.tokens.get(header[7:]) if header.startswith("Bearer ") else None
        seen.append(grant.subject if grant else None)
        if grant is None:
            return web.json_response({"error": "invalid_token"}, status=401,
                                     headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return web.json_response({"sub": grant.subject})

    api = web.Application()
    api.router.add_get("/whoami", whoami)
    for app in (auth.app(), api):
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
    auth.url = f"http://127.0.0.1:{runners[0].addresses[0][1]}"
    try:
        yield auth, f"http://127.0.0.1:{runners[1].addresses[0][1]}", seen
    finally:
        for runner in runners:
            await runner.cleanup()


def gateway_config(spec: Path, base_url: str, extra: dict[str, Any]) -> str:
    entry = {"name": "who", "type": "openapi", "spec": str(spec), "base_url": base_url,
             "egress": {"allow_private": ["127.0.0.0/8"]}, **extra}
    return ("audit: {enabled: false}\nauth: {api_keys: [{name: alice, key: alice-key}, {name: bob, key: bob-key}]}\n"
            f"connectors: [{json.dumps(entry)}]\n")


async def call(url: str, key: str) -> Any:
    """The tool's result, or the MCPError the call was answered with."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
            connect(streamable_http_client(url, http_client=http), LEGACY) as session:
        try:
            return await session.call_tool("who_whoami", {})
        except MCPError as exc:
            return exc


async def test_openapi_service_identity_with_client_credentials(port: OAuthPort, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    async with api_world() as (auth, base_url, seen):
        oauth = {"identity": "service", "client": {"client_id": "gw", "client_secret": "gw-secret", "issuer": auth.url}}
        async with running_gateway(gateway_config(spec, base_url, {"oauth": oauth})) as gw:
            for key in ("alice-key", "bob-key"):
                result = await call(gw.mcp_url, key)
                assert not result.is_error and json.loads(result.content[0].text) == {"sub": "service:gw"}
        assert seen == [None, "service:gw", "service:gw"]  # the first call found the server by its 401
        assert auth.counts["client_credentials"] == 1


async def test_openapi_per_principal_keys_reach_only_their_user(port: OAuthPort, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    async with api_world() as (auth, base_url, seen):
        alice = auth.issue("alice", None)
        async with running_gateway(gateway_config(spec, base_url, {"credentials": {"per_principal": {"alice": alice}}})
                                   ) as gw:
            result = await call(gw.mcp_url, "alice-key")
            assert json.loads(result.content[0].text) == {"sub": "alice"}
            refused = await call(gw.mcp_url, "bob-key")
            assert isinstance(refused, MCPError) and "principal bob has none" in str(refused)
            assert alice not in str(refused)
        assert seen == ["alice"]


def test_openapi_oauth_beside_static_credentials_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="both set the upstream's credentials"):
        OpenAPIConfig.model_validate({"name": "x", "type": "openapi", "spec": "s.json", "auth": {"bearer": "t"},
                                      "oauth": {"identity": "service"}})

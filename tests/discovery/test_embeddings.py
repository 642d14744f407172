"""Hybrid tool search against a loopback ``/v1/embeddings`` stub (tests/discovery/embeddings_stub.py):
the embedding side finds what the lexical ranker misses, visibility holds on both sides, only
changed tools are embedded, the key goes to the configured origin only, and every failure of the
URL falls back to the lexical ranking for that call without an error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import generate_latest

from connectors.base import ToolSpec
from gateway.discovery.catalog_search import CatalogSearch
from gateway.discovery.embeddings import EmbeddingsClient, EmbeddingsError
from gateway.discovery.fusion import (
    ABSENT_GAP,
    CALIBRATION,
    K_CORE,
    K_PACK,
    LEXICAL_FIRST_WITHIN,
    SURE,
    SURE_PACK,
    W_MIN,
)
from gateway.discovery.hybrid import Semantic, fuse
from gateway.discovery.index import SearchHit
from gateway.endpoints.config import EmbeddingsConfig
from gateway.telemetry import metrics
from tests.discovery.embeddings_stub import EmbeddingsStub
from tests.test_catalog import Fake, _catalog

KEY = "sk-test-0123456789abcdef"
TOOLS = {
    "echo": "Echo the text back.",
    "widget_list": "List the widgets of an account.",
    "widget_delete": "Delete a widget.",
    "order_food": "Order food for delivery.",
    "pid": "The process id of the server.",
}


class Described(Fake):
    def __init__(self, name: str, descriptions: dict[str, str]) -> None:
        super().__init__(name, list(descriptions))
        self.descriptions = dict(descriptions)

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(n, {"name": n, "description": self.descriptions[n], "inputSchema": {"type": "object"}})
                for n in self.tool_names]


@pytest.fixture
async def stub() -> AsyncIterator[EmbeddingsStub]:
    server = EmbeddingsStub()
    await server.start()
    yield server
    await server.stop()


_OPEN: list[Semantic] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().close()


def _config(url: str, **kw: Any) -> EmbeddingsConfig:
    return EmbeddingsConfig(url=url, model="stub-1", **kw)


def _names(result: dict[str, Any]) -> list[str]:
    return [t["name"] for t in result["structuredContent"]["tools"]]


def _fallbacks(endpoint: str, reason: str) -> float:
    return metrics.REGISTRY.get_sample_value("mcp_gateway_search_lexical_fallbacks_total",
                                             {"endpoint": endpoint, "reason": reason}) or 0.0


async def _search(url: str, endpoint: str, tools: dict[str, str] | None = None, env: dict[str, str] | None = None,
                  **kw: Any) -> tuple[CatalogSearch, Described]:
    conn = Described("kit", tools or TOOLS)
    semantic = Semantic(_config(url, **kw), endpoint, env={} if env is None else env)
    _OPEN.append(semantic)
    search = CatalogSearch(_catalog((conn, "")), semantic)
    search.refresh()
    await search.embed()
    return search, conn


async def test_hybrid_finds_a_tool_the_lexical_ranking_misses(stub: EmbeddingsStub) -> None:
    search, _ = await _search(stub.url, "hyb-find")
    assert search.semantic is not None and len(search.semantic.store) == len(TOOLS)
    query = "parrot my phrase"
    assert "echo" not in [h.name for h in search.index.search(query, 3, fill=False)]  # lexically: no shared word
    vector = await search.query_vector(query)
    assert vector is not None
    assert _names(search.find(query, 3, vector=vector))[0] == "echo"
    # Fusion keeps what both agree on at the top: a query both rankings understand.
    both = "delete a widget"
    assert _names(search.find(both, 3, vector=await search.query_vector(both)))[0] == "widget_delete"


async def test_visibility_applies_before_both_rankings(stub: EmbeddingsStub) -> None:
    search, _ = await _search(stub.url, "hyb-vis")
    assert search.semantic is not None
    vector = await search.query_vector("parrot my phrase")
    assert vector is not None
    hidden = {"echo"}
    result = search.find("parrot my phrase", 50, lambda name: name not in hidden, vector)
    assert "echo" not in _names(result)
    assert all(t["name"] not in hidden for t in result["structuredContent"]["tools"])
    everything = search.find("delete vaporise widget echo food", 50, lambda name: name not in hidden,
                             await search.query_vector("delete vaporise widget echo food"))
    assert "echo" not in _names(everything) and set(_names(everything)) <= set(TOOLS) - hidden
    assert not search.semantic.rank(vector, search.prints, 50, lambda name: False)  # nothing visible


async def test_only_new_and_changed_tools_are_embedded_in_batches(stub: EmbeddingsStub) -> None:
    search, conn = await _search(stub.url, "hyb-sync", batch=4)
    # 5 tools, two views each (hybrid.tool_texts), 4 texts a batch: 2 tools a request.
    assert stub.requests == 3 and len(stub.inputs) == 2 * len(TOOLS)
    assert any(text.startswith("widget delete\nDelete a widget.") for text in stub.inputs)
    stub.reset()
    search.catalog.rebuild()  # same tools: nothing to embed
    search.refresh()
    assert await search.embed() == 0 and stub.requests == 0
    conn.descriptions["pid"] = "The process identifier of the server, as an integer."
    conn.tool_names.append("bake")
    conn.descriptions["bake"] = "Bake a snack."
    conn.tool_names.remove("order_food")
    search.catalog.rebuild()
    search.refresh()
    assert await search.embed() == 2
    assert stub.requests == 1 and sorted(t.split("\n")[0] for t in stub.inputs) == ["bake", "bake", "pid", "pid"]
    assert search.semantic is not None
    vector = await search.query_vector("grocery meal")
    assert _names(search.find("grocery meal", 1, vector=vector)) == ["bake"]  # order_food is gone


async def test_query_vectors_are_cached(stub: EmbeddingsStub) -> None:
    search, _ = await _search(stub.url, "hyb-lru", query_cache=1)
    stub.reset()
    for query in ("parrot", "parrot ", "  parrot", "gizmo", "parrot"):
        assert await search.query_vector(query) is not None
    assert stub.requests == 3  # "parrot" (3 spellings, one text), "gizmo", then "parrot" again: a cache of 1


@pytest.mark.parametrize(("mode", "reason"), [("http_500", "http_error"), ("bad_json", "bad_response"),
                                              ("wrong_dim", "dimensions"), ("short", "bad_response"),
                                              ("huge", "too_large"), ("slow", "timeout")])
async def test_a_failing_url_falls_back_to_the_lexical_ranking(stub: EmbeddingsStub, mode: str, reason: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    endpoint = f"hyb-fail-{mode}"
    search, _ = await _search(stub.url, endpoint, timeout_s=0.2, max_response_bytes=1 << 20)
    lexical = search.find("delete a widget", 3)
    stub.mode, stub.delay = mode, 1.0
    before = _fallbacks(endpoint, reason)
    with caplog.at_level(logging.WARNING, "gateway.discovery.hybrid"):
        vector = await search.query_vector("delete a widget")
    assert vector is None
    assert search.find("delete a widget", 3, vector=vector) == lexical
    assert _fallbacks(endpoint, reason) == before + 1
    assert reason in caplog.text and "ranking lexically" in caplog.text


async def test_the_url_down_then_a_breaker_then_recovery(stub: EmbeddingsStub, caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    search, _ = await _search(stub.url, "hyb-down", cooldown_s=0.3)
    semantic = search.semantic
    assert semantic is not None and semantic.client.requests == 1  # the tools: one batch
    lexical = search.find("parrot my phrase", 3)
    port = int(stub.url.split(":")[2].split("/")[0])
    await stub.stop()  # the URL goes down
    with caplog.at_level(logging.WARNING, "gateway.discovery.hybrid"):
        for i in range(6):
            vector = await search.query_vector(f"parrot my phrase {i}")
            assert vector is None and search.find("parrot my phrase", 3, vector=vector) == lexical
    assert _fallbacks("hyb-down", "connection") == 3 and _fallbacks("hyb-down", "breaker_open") == 3
    assert semantic.client.requests == 1 + 3  # after 3 failures in a row, no request until the cool-down
    assert caplog.text.count("embeddings query request") == 1  # warned once a minute, not per call
    await stub.start(port)  # back
    await asyncio.sleep(0.35)
    vector = await search.query_vector("parrot my phrase")
    assert vector is not None and _names(search.find("parrot my phrase", 3, vector=vector))[0] == "echo"


async def test_the_key_goes_to_the_configured_origin_only(stub: EmbeddingsStub, caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    elsewhere = EmbeddingsStub()
    await elsewhere.start()  # another port: another origin
    try:
        search, _ = await _search(stub.url, "hyb-key", env={"EMB_KEY": KEY}, api_key_env="EMB_KEY")
        assert stub.headers[0]["Authorization"] == f"Bearer {KEY}"
        stub.mode, stub.redirect_to = "redirect", elsewhere.url
        with caplog.at_level(logging.DEBUG):
            assert await search.query_vector("parrot") is None
        assert elsewhere.requests == 0  # the redirect was not followed
        assert _fallbacks("hyb-key", "redirect") == 1
        assert KEY not in caplog.text and KEY not in generate_latest(metrics.REGISTRY).decode()
        assert search.semantic is not None and KEY not in repr(search.semantic.client)
    finally:
        await elsewhere.stop()


async def test_another_header_carries_the_raw_key(stub: EmbeddingsStub) -> None:
    client = EmbeddingsClient(_config(stub.url, api_key_env="K", api_key_header="api-key"), KEY, "hyb-hdr")
    rows = await client.embed(["parrot", "echo"], "index")
    assert rows.shape == (2, 256) and abs(float(rows[0] @ rows[1]) - 1.0) < 1e-6  # same concept, same vector
    assert stub.headers[0]["api-key"] == KEY and "Authorization" not in stub.headers[0]
    await client.close()


async def test_an_unset_key_variable_sends_nothing(stub: EmbeddingsStub, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, "gateway.discovery.hybrid"):
        search, _ = await _search(stub.url, "hyb-nokey", env={}, api_key_env="EMB_MISSING")
    assert "EMB_MISSING" in caplog.text and stub.requests == 0
    assert await search.query_vector("parrot") is None and _fallbacks("hyb-nokey", "no_key") == 1
    assert _names(search.find("delete a widget", 1)) == ["widget_delete"]


async def test_sync_failure_keeps_vectors_and_waits(stub: EmbeddingsStub) -> None:
    stub.mode = "http_500"
    search, _ = await _search(stub.url, "hyb-syncfail", batch=2, cooldown_s=60)
    assert search.semantic is not None and len(search.semantic.store) == 0 and stub.requests == 1
    assert not search.pending()  # cooling down: no request per find_tools
    assert await search.query_vector("parrot") is None and _fallbacks("hyb-syncfail", "not_indexed") == 1


async def test_no_query_is_sent_while_the_index_is_being_built(stub: EmbeddingsStub) -> None:
    # A server embedding the catalog answers a query only after the batches before it: during a
    # first build every find_tools waited its full timeout_s. Batches are held at the stub's gate.
    semantic = Semantic(_config(stub.url, batch=4, timeout_s=2.0), "hyb-ready", env={})  # 2 tools' views a batch
    _OPEN.append(semantic)
    search = CatalogSearch(_catalog((Described("kit", TOOLS), "")), semantic)
    search.refresh()
    first = stub.gate = asyncio.Event()
    build = asyncio.create_task(search.embed())
    await asyncio.wait_for(stub.arrived.wait(), 10)  # batch 1 of 3 is at the server
    stub.arrived.clear()
    second = stub.gate = asyncio.Event()
    first.set()
    await asyncio.wait_for(stub.arrived.wait(), 10)  # batch 2 is held: 2 tools have vectors
    assert len(semantic.store) == 2 and stub.requests == 2
    before = _fallbacks("hyb-ready", "not_indexed")
    assert await search.query_vector("parrot my phrase") is None  # at once: nothing was sent
    assert stub.requests == 2 and _fallbacks("hyb-ready", "not_indexed") == before + 1
    second.set()
    assert await asyncio.wait_for(build, 10) == len(TOOLS)
    vector = await search.query_vector("parrot my phrase")
    assert vector is not None and stub.requests == 4
    assert _names(search.find("parrot my phrase", 3, vector=vector))[0] == "echo"


async def test_the_breaker_counts_query_failures_between_successful_batches(stub: EmbeddingsStub) -> None:
    now = [1000.0]
    semantic = Semantic(_config(stub.url, cooldown_s=30), "hyb-brk", env={}, clock=lambda: now[0])
    _OPEN.append(semantic)
    conn = Described("kit", TOOLS)
    catalog = _catalog((conn, ""))
    search = CatalogSearch(catalog, semantic)
    search.refresh()
    assert await search.embed() == len(TOOLS)

    async def add_tool(name: str) -> int:
        conn.descriptions[name] = f"The {name} tool."
        conn.tool_names.append(name)
        catalog.rebuild()
        search.refresh()
        stub.mode = "ok"
        done = await search.embed()
        stub.mode = "http_500"
        return done

    stub.mode = "http_500"
    for i in range(2):
        assert await search.query_vector(f"failing {i}") is None
    assert await add_tool("tally") == 1  # a batch answered: it says nothing of queries
    assert await search.query_vector("failing 2") is None  # the third query failure in a row
    sent = stub.requests
    stub.mode = "ok"
    for i in range(3):
        assert await search.query_vector(f"skipped {i}") is None
    assert stub.requests == sent and _fallbacks("hyb-brk", "breaker_open") == 3
    now[0] += 31  # the cool-down is over: a batch may go, and does not take the queries' probe
    stub.mode = "http_500"
    assert await add_tool("gauge") == 1
    stub.mode = "ok"
    assert await search.query_vector("parrot my phrase") is not None  # the probe, answered
    assert await search.query_vector("gizmo") is not None  # closed again
    assert _fallbacks("hyb-brk", "breaker_open") == 3


def test_fuse_weighs_the_cosine_by_how_sure_the_lexical_ranking_is() -> None:
    # Two cosines 0.9 and 0.2 are z-scores +1 and -1 (0.35 either side of their mean 0.55).
    near = [SearchHit("b", 0.9), SearchHit("a", 0.2)]
    # A sure lexical ranking (top score 1.9: the z counts K_CORE * W_MIN) keeps its first.
    sure = fuse([SearchHit("a", 1.9), SearchHit("b", 1.0)], near, 2)
    assert [h.name for h in sure] == ["a", "b"]
    assert sure[0].score == pytest.approx(1.9 - K_CORE * W_MIN)
    # An unsure one (top score 0.3: the z counts K_CORE * 1.9) yields to the embeddings' clear first.
    unsure = fuse([SearchHit("a", 0.3), SearchHit("b", 0.2)], near, 2)
    assert [h.name for h in unsure] == ["b", "a"]
    assert unsure[0].score == pytest.approx(0.2 + K_CORE * (SURE - 0.3))
    # Only the cosines' spread over the query's own candidates counts, not their level: a model
    # whose cosines all sit near 0.8 moves the fusion as one spread from 0.2 to 0.9 does.
    level = fuse([SearchHit("a", 0.3), SearchHit("b", 0.2)], [SearchHit("b", 0.82), SearchHit("a", 0.80)], 2)
    assert [h.name for h in level] == ["b", "a"]
    assert [h.score for h in level] == pytest.approx([h.score for h in unsure])
    # A tool only the embeddings found starts ABSENT_GAP under the lowest lexical score, and may
    # pass it on a clearly better cosine (w = K_CORE * (SURE - 1.0); z +1 against -1).
    only = fuse([SearchHit("a", 1.0)], [SearchHit("c", 0.9), SearchHit("a", 0.5)], 2)
    w = K_CORE * (SURE - 1.0)
    assert [(h.name, round(h.score, 6)) for h in only] == [("c", round(1.0 - ABSENT_GAP + w, 6)),
                                                          ("a", round(1.0 - w, 6))]
    # weight scales the cosine's say: at 5 the embeddings' first wins even a fairly sure lexical one.
    assert [h.name for h in fuse([SearchHit("a", 1.7), SearchHit("b", 1.0)], near, 2)] == ["a", "b"]
    assert [h.name for h in fuse([SearchHit("a", 1.7), SearchHit("b", 1.0)], near, 2, weight=5.0)] == ["b", "a"]
    # Cosines that do not vary (one tool, or all alike) say nothing: the lexical order stands.
    assert [h.name for h in fuse([SearchHit("x", 1)], [SearchHit("y", 1)], 2)] == ["x", "y"]
    assert [h.name for h in fuse([SearchHit("x", 0.5), SearchHit("y", 0.4)],
                                 [SearchHit("y", 0.6), SearchHit("x", 0.6)], 2)] == ["x", "y"]
    assert [h.name for h in fuse([], [SearchHit("y", 0.5), SearchHit("z", 0.4)], 2)] == ["y", "z"]
    assert [h.name for h in fuse([SearchHit("x", 0.5), SearchHit("w", 0.4)], [], 2)] == ["x", "w"]
    fused = fuse([SearchHit(n, s) for n, s in zip("abcd", (1.2, 0.9, 0.4, -0.2), strict=True)],
                 [SearchHit(n, s) for n, s in zip("dcef", (0.7, 0.6, 0.5, 0.1), strict=True)], 6)
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)  # never rising
    assert {h.name for h in fused} == set("abcdef") and fuse([], [], 3) == []


def test_fuse_trusts_a_lexical_ranking_read_with_a_domain_pack_more() -> None:
    # The same query: a middling lexical first (0.5) and the embeddings' clear first (z +1).
    lexical, near = [SearchHit("a", 0.5), SearchHit("b", 0.2)], [SearchHit("b", 0.9), SearchHit("a", 0.2)]
    # Read by the general core alone, the embeddings decide (w = K_CORE * 1.7: b 0.2 + w, a 0.5 - w) ...
    assert [h.name for h in fuse(lexical, near, 2)] == ["b", "a"]
    # ... read with an operator's domain pack, the lexical ranker is the expert: K_PACK, a twelfth.
    packed = fuse(lexical, near, 2, domain_pack=True)
    assert [h.name for h in packed] == ["a", "b"]
    assert packed[0].score == pytest.approx(0.5 - K_PACK * (SURE_PACK - 0.5))
    assert K_PACK < K_CORE


def test_fuse_keeps_the_lexical_first_within_the_first_few() -> None:
    # An unsure lexical ranking (top 0.3) whose first the embeddings put last: the cosine's order
    # wins the top, but the lexical first is lifted back to rank LEXICAL_FIRST_WITHIN (3), taking
    # the score of the tool it passes there, so the scores still never rise.
    names = "abcdef"
    lexical = [SearchHit(n, s) for n, s in zip(names, (0.3, 0.29, 0.28, 0.27, 0.26, 0.25), strict=True)]
    near = [SearchHit(n, s) for n, s in zip("fedcba", (0.9, 0.8, 0.7, 0.6, 0.5, 0.1), strict=True)]
    fused = fuse(lexical, near, 6)
    assert LEXICAL_FIRST_WITHIN == 3
    assert [h.name for h in fused] == ["f", "e", "a", "d", "c", "b"]
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)
    unlifted = fuse(lexical, near, 6, calibration=replace(CALIBRATION, lexical_first_within=0))
    assert [h.name for h in unlifted] == ["f", "e", "d", "c", "b", "a"]
    assert fused[2].score == unlifted[2].score  # a takes d's score there
    # A larger limit extends a smaller one's list, and a first already high enough stays put.
    assert [h.name for h in fuse(lexical, near, 3)] == ["f", "e", "a"]
    assert [h.name for h in fuse(lexical[:1], near, 6)].index("a") < LEXICAL_FIRST_WITHIN
    assert [h.name for h in fuse(lexical, [], 3)] == ["a", "b", "c"]


def test_fuse_may_weigh_the_leads_of_both_firsts() -> None:
    # Off as calibrated (0: within noise); a refit may turn them on: a clear cosine first (a long
    # lead in z) gets the embeddings more say, a clear lexical first (a long lead) less.
    # z: b +1.70, a -0.32 (cosines 0.9, 0.5, 0.45, 0.4).
    near = [SearchHit("b", 0.9), SearchHit("a", 0.5), SearchHit("c", 0.45), SearchHit("d", 0.4)]
    assert CALIBRATION.lexical_lead == CALIBRATION.cosine_lead == 0.0
    lexical = [SearchHit("a", 1.2), SearchHit("b", 0.7)]  # a leads by 0.5
    assert fuse(lexical, near, 2)[0].name == "b"  # w = 0.6 * 0.8: b 0.7 + 0.82, a 1.2 - 0.15
    sure_lexical = replace(CALIBRATION, lexical_lead=20.0)  # w at its least, 0.6 * 0.3
    assert fuse(lexical, near, 2, calibration=sure_lexical)[0].name == "a"
    lexical = [SearchHit("a", 1.9), SearchHit("b", 1.4)]  # a sure lexical first: w = 0.6 * 0.3
    assert fuse(lexical, near, 2)[0].name == "a"
    sure_cosine = replace(CALIBRATION, cosine_lead=1.0)  # w = 0.6 * (0.1 + 2.02)
    assert fuse(lexical, near, 2, calibration=sure_cosine)[0].name == "b"


@pytest.mark.parametrize(("body", "reason"), [
    (b"[]", "bad_response"),
    (b'{"data": [{"index": 0, "embedding": ["a", "b"]}]}', "bad_response"),
    (b'{"data": [{"index": 0, "embedding": [0, 0]}]}', "bad_response"),
    (b'{"data": [{"index": 1, "embedding": [1, 0]}]}', "bad_response"),
    (b'{"data": [{"index": 0, "embedding": [1, null]}]}', "bad_response"),
    (b'{"data": [{"index": 0, "embedding": [1, 0, 0]}]}', "dimensions"),
])
def test_malformed_answers_are_refused(body: bytes, reason: str) -> None:
    from gateway.discovery.embeddings import _parse
    with pytest.raises(EmbeddingsError) as info:
        _parse(body, 1, 2)
    assert info.value.reason == reason


def test_answers_are_reordered_by_index_and_normalised() -> None:
    from gateway.discovery.embeddings import _parse
    rows = _parse(b'{"data": [{"index": 1, "embedding": [0, 2]}, {"index": 0, "embedding": [3, 4]}]}', 2, None)
    assert rows.tolist() == [[pytest.approx(0.6), pytest.approx(0.8)], [0.0, 1.0]]


async def test_a_closed_client_sends_nothing_more(stub: EmbeddingsStub) -> None:
    client = EmbeddingsClient(_config(stub.url), None, "hyb-closed")
    await client.embed(["parrot"], "query")
    await client.close()  # a reload replaced it while a sync still ran
    with pytest.raises(EmbeddingsError) as info:
        await client.embed(["echo"], "index")
    assert info.value.reason == "connection" and stub.requests == 1


def test_the_store_ranks_past_its_first_partition_and_stops_at_min_similarity() -> None:
    import numpy as np

    from gateway.discovery.vectors import VectorStore
    store = VectorStore()
    angles = np.linspace(0.0, np.pi / 2, 200)  # tool i is i steps away from the query
    rows = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    prints = {f"t{i:03}": f"fp{i}" for i in range(200)}
    store.put(list(prints.values()), rows)
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert [h.name for h in store.nearest(query, prints, 3)] == ["t000", "t001", "t002"]
    # Only the farthest tools are visible: found beyond the first partial sort, still in order.
    far = store.nearest(query, prints, 2, lambda name: name >= "t198")
    assert [h.name for h in far] == ["t198", "t199"]
    close = store.nearest(query, prints, 50, min_similarity=float(np.cos(angles[9])) - 1e-6)
    assert [h.name for h in close] == [f"t{i:03}" for i in range(10)]
    assert store.nearest(query, prints, 5, lambda name: name >= "t150", min_similarity=0.99) == []
    del prints["t000"]  # gone from the catalog: never returned, its vector dropped
    assert store.nearest(query, dict(prints), 1)[0].name == "t001" and len(store) == 199
    with pytest.raises(ValueError):
        store.put(["x"], np.ones((1, 3), dtype=np.float32))  # one dimension per store


async def test_idle_returns_only_once_a_sync_under_way_has_stored_its_vectors() -> None:
    """``warm()`` waits on this: a sync started elsewhere (the start-up's warm-up) made a second
    ``embed()`` return at once, so a bench measured lexical answers as if they were hybrid."""
    import numpy as np

    from gateway.endpoints.config import LocalModelConfig

    release = asyncio.Event()

    class Held:
        async def embed(self, texts: list[str], purpose: str, dim: int | None) -> Any:
            await release.wait()
            return np.full((len(texts), 4), 0.5, dtype=np.float32)

        async def close(self) -> None:
            return None

    semantic = Semantic(LocalModelConfig(), "idle-test", encoder=Held())
    sync = asyncio.create_task(semantic.sync({"a": "fa", "b": "fb"}, lambda name: name))
    await asyncio.sleep(0)  # the sync has begun and waits in embed()
    waiter = asyncio.create_task(semantic.idle())
    for _ in range(10):  # loop turns, not time: an idle() that did not wait would be done by now
        await asyncio.sleep(0)
    assert not waiter.done() and len(semantic.store) == 0
    release.set()
    assert await sync == 2
    await asyncio.wait_for(waiter, 10)
    assert len(semantic.store) == 2
    await semantic.idle()  # no sync: at once


def test_a_tool_is_embedded_as_two_views_and_ranked_by_the_better() -> None:
    import numpy as np

    from gateway.discovery.hybrid import tool_summary, tool_text, tool_texts
    from gateway.discovery.index import doc_from_tool
    from gateway.discovery.vectors import VectorStore
    doc = doc_from_tool({"name": "crm_close_ticket", "title": "Close ticket",
                         "description": "Close ticket. Closes a <b>ticket</b> by its id. See "
                                        "[the guide](https://x.example/guide) for `states`.",
                         "inputSchema": {"type": "object", "properties": {"ticket_id": {"type": "string"}}}},
                        prefix="crm_")
    full, short = tool_texts(doc)
    assert full == tool_text(doc) and full.endswith("parameters: ticket id")
    # The short view: name in words, title, the description's first sentence without the title or markup.
    assert short == tool_summary(doc) == "close ticket\nClose ticket\nCloses a ticket by its id."
    store = VectorStore()
    # Tool a: its full view faces the query, its short view away; tool b: both half way.
    store.put(["fa", "fb"], np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.8, 0.6], [0.8, 0.6]]], dtype=np.float32))
    prints = {"a": "fa", "b": "fb"}
    hits = store.nearest(np.array([0.0, 1.0], dtype=np.float32), prints, 2)
    assert [(h.name, round(h.score, 3)) for h in hits] == [("a", 1.0), ("b", 0.6)]
    assert store.views == 2
    with pytest.raises(ValueError):
        store.put(["fc"], np.ones((1, 2), dtype=np.float32))  # one number of views per store


async def test_sync_sends_every_view_of_a_tool_within_the_batch() -> None:
    import numpy as np

    from gateway.endpoints.config import LocalModelConfig

    sent: list[list[str]] = []

    class Recording:
        async def embed(self, texts: list[str], purpose: str, dim: int | None) -> Any:
            sent.append(texts)
            return np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (len(texts), 1))

        async def close(self) -> None:
            return None

    semantic = Semantic(LocalModelConfig(batch=4), "views-test", encoder=Recording())
    prints = {n: f"f{n}" for n in "abcde"}
    assert await semantic.sync(prints, lambda name: (f"{name} full", f"{name} short")) == 5
    assert sent == [["a full", "a short", "b full", "b short"], ["c full", "c short", "d full", "d short"],
                    ["e full", "e short"]]
    assert semantic.store.views == 2 and len(semantic.store) == 5


def test_the_query_is_embedded_without_its_values() -> None:
    from gateway.discovery.hybrid import query_text
    from gateway.discovery.packs import lexicon
    core = lexicon(())
    assert query_text("close issue 42 in acme/api", core) == "close issue in"
    assert query_text("rename the label 'needs review' to 'triage'", core) == "rename the label to"
    # A typed id keeps its prefix's meaning: kept; an opaque id goes.
    assert query_text("cancel sub_1Oa9 for customer CA9f2c1e0a7b", core) == "cancel sub_1Oa9 for customer"
    assert query_text("what's the last 30 days' usage", core) == "what's the last 30 days' usage"  # a count
    assert query_text("acme/api", core) == "acme/api"  # values only: as typed

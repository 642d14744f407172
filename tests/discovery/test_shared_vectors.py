"""Tool vectors shared by replicas through the state store (``gateway/discovery/shared_vectors.py``),
on the real test Redis: one replica embeds a tool text, the others read its vector; a query is never
stored; a stored value that is not a unit vector of the right length is embedded anew; a store that
is down costs nothing but the sharing. End to end: two gateways sharing Redis, each with its own
local model, and the second embeds none of the tools the first did."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.discovery.shared_vectors import SharedVectors
from gateway.state.redis_store import RedisStore
from gateway.telemetry import metrics
from tests.e2e.clients import eventually


class Counting:
    """An encoder whose vectors are a pure function of the text (a unit vector seeded by its hash),
    counting the texts it was asked for: which texts reached the model is what is under test."""

    shown = "counting"

    def __init__(self, dimension: int = 8) -> None:
        self.dimension = dimension
        self.asked: list[tuple[str, list[str]]] = []

    async def embed(self, texts: list[str], stage: str, dimension: int | None = None) -> Any:
        self.asked.append((stage, list(texts)))
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def vector(self, text: str) -> Any:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        row = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
        return row / np.linalg.norm(row)

    async def close(self) -> None:
        pass


def _count(endpoint: str, outcome: str) -> float:
    return metrics.REGISTRY.get_sample_value("mcp_gateway_search_shared_vectors_total",
                                             {"endpoint": endpoint, "outcome": outcome}) or 0.0


@pytest.fixture
async def stores(redis_url: str) -> Any:
    prefix = f"gw:test:{secrets.token_hex(4)}"  # a fresh key space: nothing from an earlier run
    a, b = RedisStore(redis_url, "replicaa", prefix), RedisStore(redis_url, "replicab", prefix)
    yield a, b
    keys = [k async for k in a.client.scan_iter(match="{" + prefix + "}:*")]
    if keys:
        await a.client.delete(*keys)
    await a.close()
    await b.close()


async def test_one_replica_embeds_a_text_the_others_read_it(stores: Any) -> None:
    a, b = stores
    first, second = Counting(), Counting()
    one = SharedVectors(first, a, "space-1", "sv-share")
    two = SharedVectors(second, b, "space-1", "sv-share")
    texts = ["create a widget", "delete a widget", "list the widgets"]
    hits, misses = _count("sv-share", "hit"), _count("sv-share", "miss")
    rows = await one.embed(texts, "index")
    assert first.asked == [("index", texts)]
    again = await two.embed(texts, "index")
    assert second.asked == []  # every vector read from the store
    assert np.array_equal(rows, again) and np.array_equal(again, np.stack([second.vector(t) for t in texts]))
    # Only what the store lacks reaches the model; the rows keep the order asked for.
    mixed = ["list the widgets", "rename a widget", "create a widget"]
    got = await two.embed(mixed, "index")
    assert second.asked == [("index", ["rename a widget"])]
    assert np.array_equal(got, np.stack([second.vector(t) for t in mixed]))
    assert _count("sv-share", "miss") == misses + 4 and _count("sv-share", "hit") == hits + 5


async def test_a_query_is_never_stored_and_spaces_never_mix(stores: Any) -> None:
    a, b = stores
    encoder = Counting()
    shared = SharedVectors(encoder, a, "space-1", "sv-query")
    await shared.embed(["who am i"], "query")
    assert await a.load_vectors([shared.key("who am i")], 60) == [None]
    await shared.embed(["a tool text"], "index")
    other = Counting()
    await SharedVectors(other, b, "space-2", "sv-query").embed(["a tool text"], "index")
    assert other.asked == [("index", ["a tool text"])]  # another model's space: embedded anew


@pytest.mark.parametrize("stored", [
    b"\x00\x00\x80\x7f" * 8,  # eight +inf
    np.full(8, 0.5, dtype="<f4").tobytes(),  # norm 2: not a vector an encoder returns
    (np.ones(4, dtype="<f4") / 2).tobytes(),  # a unit row of the wrong length
    b"abc",  # not float32 at all
], ids=["infinite", "norm-2", "wrong-length", "not-floats"])
async def test_a_stored_value_that_is_not_a_unit_row_is_embedded_anew(stores: Any, stored: bytes) -> None:
    a, _ = stores
    encoder = Counting()
    shared = SharedVectors(encoder, a, "space-1", "sv-bad")
    await a.save_vectors([(shared.key("poisoned"), stored)], 60)
    invalid = _count("sv-bad", "invalid")
    got = await shared.embed(["poisoned"], "index", 8)
    assert encoder.asked == [("index", ["poisoned"])]
    assert np.array_equal(got[0], encoder.vector("poisoned")) and _count("sv-bad", "invalid") == invalid + 1
    # ... and the good row replaces it.
    assert await a.load_vectors([shared.key("poisoned")], 60) == [encoder.vector("poisoned").astype("<f4").tobytes()]


async def test_a_store_that_is_down_costs_the_sharing_only(caplog: pytest.LogCaptureFixture) -> None:
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = RedisStore(f"redis://127.0.0.1:{port}/0", "replicad", "gw:test:down", timeout_s=0.5)
    encoder = Counting()
    shared = SharedVectors(encoder, down, "space-1", "sv-down")
    errors = _count("sv-down", "error")
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.discovery.shared_vectors"):
            for _ in range(2):
                got = await shared.embed(["a", "b"], "index")
                assert np.array_equal(got, np.stack([encoder.vector("a"), encoder.vector("b")]))
    finally:
        await down.close()
    assert _count("sv-down", "error") == errors + 6  # a read, a claim and a write, twice
    warned = [r for r in caplog.records if "shared tool vectors" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in warned]  # at most once a minute


class Slow(Counting):
    """A Counting encoder that yields to the event loop while it works, so that two replicas'
    calls interleave as two processes' would."""

    async def embed(self, texts: list[str], stage: str, dimension: int | None = None) -> Any:
        for _ in range(20):
            await asyncio.sleep(0)
        return await super().embed(texts, stage, dimension)


async def test_replicas_starting_together_embed_each_text_once(stores: Any) -> None:
    a, b = stores
    first, second = Slow(), Slow()
    one = SharedVectors(first, a, "space-1", "sv-claim")
    two = SharedVectors(second, b, "space-1", "sv-claim")
    texts = [f"tool number {i}" for i in range(40)]

    async def sync(replica: SharedVectors) -> Any:  # batch after batch, as Semantic.sync sends them
        return np.concatenate([await replica.embed(texts[k:k + 8], "index") for k in range(0, 40, 8)])

    got = await asyncio.gather(sync(one), sync(two))
    expected = np.stack([first.vector(t) for t in texts])
    assert np.array_equal(got[0], expected) and np.array_equal(got[1], expected)
    embedded = [t for enc in (first, second) for _, asked in enc.asked for t in asked]
    assert sorted(embedded) == sorted(texts)  # every text embedded once, by one replica or the other


async def test_a_claim_whose_replica_died_is_waited_for_at_most_claim_ttl_s(stores: Any) -> None:
    a, b = stores
    encoder = Counting()
    shared = SharedVectors(encoder, a, "space-1", "sv-ghost", claim_ttl_s=0.3)
    assert await b.claim_vectors([shared.key("orphan")], "ghost", 60) == [True]  # a replica that died
    got = await shared.embed(["orphan", "fresh"], "index")
    assert encoder.asked == [("index", ["fresh"]), ("index", ["orphan"])]  # its own first, then the orphan
    assert np.array_equal(got, np.stack([encoder.vector("orphan"), encoder.vector("fresh")]))
    assert await a.load_vectors([shared.key("orphan")], 60) != [None]


# -- two gateways sharing Redis -----------------------------------------------------------------------

CONFIG = """
audit: {{store: none}}
telemetry: {{metrics: false}}
gateway: {{name: e2e, cursor_secret: shared-cursor-secret-0123456789}}
state: {{store: '{redis}', redis_prefix: '{prefix}'}}
auth:
  api_keys: [{{name: alice, key: alice-key-0123456789}}]
connectors:
  - {{name: up, type: mcp, transport: stdio, command: {python}, args: [{server}, --transport, stdio]}}
endpoints:
  - name: finder
    discovery: search
    select: [{{connector: up}}]
    search: {{semantic: local, local: {{cache_dir: {cache}}}}}
"""


async def test_a_second_replica_embeds_none_of_the_tools_the_first_did(tmp_path: Path, redis_url: str) -> None:
    from tests.connectors.mcp.helpers import SERVER
    from tests.support import running_gateway

    prefix = f"gw:test:{secrets.token_hex(4)}"

    def config(cache: str) -> str:  # its own cache folder: its own LocalEncoder, nothing shared in-process
        return CONFIG.format(redis=redis_url, prefix=prefix, python=sys.executable, server=SERVER,
                             cache=tmp_path / cache)

    async def embedded(gw: Any) -> Any:
        search = gw.gateway.endpoints.get("finder").search
        await search.warm()
        semantic = search._semantic
        assert semantic is not None and isinstance(semantic.client, SharedVectors)
        await eventually(lambda: len(semantic.store) >= 10 and not semantic._syncing, timeout=120)
        return semantic

    async with running_gateway(config("a"), base_dir=tmp_path) as first:
        semantic = await embedded(first)
        assert semantic.client.inner.requests > 0  # the first replica ran its model
        tools = len(semantic.store)
    async with running_gateway(config("b"), base_dir=tmp_path) as second:
        semantic = await embedded(second)
        assert len(semantic.store) == tools
        assert semantic.client.inner.requests == 0  # every tool vector came from Redis
        index = second.gateway.endpoints.get("finder").search._index
        vector = await semantic.query("repeat what I say")
        assert vector is not None
        names = [t["name"] for t in index.find("repeat what I say", 3, vector=vector)["structuredContent"]["tools"]]
        assert names[0] == "up_echo"  # ranked by meaning at once
    store = RedisStore(redis_url, "cleanup", prefix)
    try:
        keys = [k async for k in store.client.scan_iter(match="{" + prefix + "}:*")]
        assert sum(b":v:" in k for k in keys) >= tools
        if keys:
            await store.client.delete(*keys)
    finally:
        await store.close()

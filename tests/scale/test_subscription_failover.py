"""Upstream resource subscriptions survive the SIGKILL of the replica that made them: three gateway
processes behind HAProxy round robin share Redis, an SDK client subscribes to a resource of an SDK
upstream, the replica holding the upstream subscription is killed, and the session keeps receiving
``notifications/resources/updated`` (a live replica took the subscription over)."""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from mcp import types

from tests.e2e.clients import sdk_client
from tests.scale.harness import roundrobin_proxy, state_section, watched_upstream
from tests.support import gateway_process

URI = "mem://watched"


async def _replica_of(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url + "/readyz", params={"verbose": "1"}) as resp:
        return str((await resp.json())["state"]["replica"])


async def _holders(redis: aioredis.Redis, prefix: str) -> dict[str, set[str]]:
    """Which replica holds which (session, URI) entry, as the store says."""
    out: dict[str, set[str]] = {}
    async for key in redis.scan_iter(match="{" + prefix + "}:sh:*"):
        name = key.decode().rsplit(":", 1)[1]
        entries = {json.loads(e)[1] for e in await redis.hkeys(key)}
        if entries:
            out[name] = entries
    return out


@pytest.mark.timeout(180)
async def test_resource_updates_continue_after_the_holder_is_killed() -> None:
    updates: asyncio.Queue[str] = asyncio.Queue()

    async def handler(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.put_nowait(str(message.params.uri))

    state = state_section()
    async with AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(watched_upstream())
        entry = {"name": "up", "type": "mcp", "prefix": "", "transport": "streamable_http", "url": upstream}
        config = json.dumps({"gateway": {"cursor_secret": "replicas"}, "telemetry": {"metrics": False},
                             "audit": {"enabled": False}, "connectors": [entry], "state": state})
        procs = [await stack.enter_async_context(gateway_process(config)) for _ in range(3)]
        url = await stack.enter_async_context(roundrobin_proxy([p.url for p in procs]))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        redis = aioredis.from_url(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
        stack.push_async_callback(redis.aclose)
        names = {await _replica_of(http, p.url): p for p in procs}
        session = await stack.enter_async_context(sdk_client("streamable_http", url=url, message_handler=handler))

        await session.subscribe_resource(URI)  # type: ignore[arg-type]
        holders = await _holders(redis, state["redis_prefix"])
        assert list(holders.values()) == [{URI}], holders
        [holder] = holders

        async def touched_and_told(timeout: float) -> None:
            """Touch the resource (through any replica) until the session is told it changed."""
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        await session.call_tool("touch", {})
                    except Exception:  # a call in flight on the replica being killed
                        continue
                    try:
                        async with asyncio.timeout(1.0):
                            assert await updates.get() == URI
                            return
                    except TimeoutError:
                        continue

        await touched_and_told(10)
        # The replica holding the upstream subscription dies without a word.
        victim = names[holder]
        victim.proc.kill()
        await victim.proc.wait()
        # A live replica takes the subscription over (within a sweep) and the updates go on.
        await touched_and_told(20)
        holders = await _holders(redis, state["redis_prefix"])
        assert holder not in holders and list(holders.values()) == [{URI}], holders
        assert next(iter(holders)) in names and next(iter(holders)) != holder
        while not updates.empty():  # nothing but updates of the subscribed URI
            assert updates.get_nowait() == URI
        # Unsubscribing (through whichever replica) stops them: the holder lets go of its entry.
        await session.unsubscribe_resource(URI)  # type: ignore[arg-type]
        async with asyncio.timeout(10):
            while await _holders(redis, state["redis_prefix"]):  # noqa: ASYNC110 - routed: no event to wait on
                await asyncio.sleep(0.1)

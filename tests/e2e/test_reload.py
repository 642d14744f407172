"""Hot reload keeps sessions, announces list changes, and refuses a colliding config whole when
``gateway.names.on_collision`` is ``error`` (by default it keeps the first name and reports the rest)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from gateway.protocol.errors import ConfigError
from tests.e2e.rawhttp import initialize, sse_events
from tests.fuzz.strategies import static_config
from tests.support import config_from, running_gateway

EXTRA = """
  - name: more
    type: static
    prefix: ""
    prompts: [{name: fz_hello, messages: [{text: clash}]}]
"""


STRICT = static_config().replace("page_size: 2}", "page_size: 2, names: {on_collision: error}}")


async def test_reload_adds_a_connector_and_refuses_a_collision() -> None:
    assert STRICT != static_config()
    async with running_gateway(STRICT) as gw, aiohttp.ClientSession() as http:
        session = await initialize(http, gw.mcp_url)
        stream = await http.get(gw.mcp_url, headers={**session.headers, "Accept": "text/event-stream"})
        try:
            # fz_hello from "more" (empty prefix) clashes with fz's hello (prefix fz_): refused whole.
            with pytest.raises(ConfigError, match="collision"):
                await gw.gateway.reload(config_from(STRICT + EXTRA))
            assert gw.config.connector("more") is None and "more" not in gw.connectors
            before = (await session.request("prompts/list"))["result"]["prompts"]
            assert [p["name"] for p in before] == ["fz_greet", "fz_hello"]

            fine = STRICT + EXTRA.replace("fz_hello", "bye")
            outcome = await gw.gateway.reload(config_from(fine))
            assert outcome == {"started": ["more"], "stopped": [], "kept": ["fz"]}
            async with asyncio.timeout(5):
                _, data = await anext(sse_events(stream))
            assert json.loads(data)["method"] == "notifications/prompts/list_changed"
            after = (await session.request("prompts/list"))["result"]["prompts"]
            assert [p["name"] for p in after] == ["bye", "fz_greet"]
            assert session.id in gw.sessions
        finally:
            stream.close()


async def test_a_reload_that_collides_keeps_the_first_name_by_default() -> None:
    async with running_gateway(static_config()) as gw, aiohttp.ClientSession() as http:
        session = await initialize(http, gw.mcp_url)
        outcome = await gw.gateway.reload(config_from(static_config() + EXTRA))
        assert outcome["started"] == ["more"]
        prompts = (await session.request("prompts/list"))["result"]["prompts"]
        assert [p["name"] for p in prompts] == ["fz_greet", "fz_hello"]
        served = (await session.request("prompts/get", {"name": "fz_hello"}))["result"]
        assert served["messages"][0]["content"]["text"] == "hello"  # fz's, not "clash"
        [clash] = gw.gateway.health()["collisions"]
        assert "'fz_hello'" in clash and "connector 'more'" in clash and "serving the one from 'fz'" in clash

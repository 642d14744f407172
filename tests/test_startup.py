"""Connectors that fail at start are started again with capped exponential backoff and jitter
(gateway/startup.py, connectors/backoff.py), shown in /readyz and /status, and announced to
sessions when they come up."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from connectors.backoff import Backoff
from connectors.base import Connector
from connectors.config import ConnectorConfig
from gateway.config import StartRetry
from gateway.startup import StartRetries
from tests.e2e.rawhttp import initialize, sse_events
from tests.support import config_from, running_gateway, serving

SPEC = {
    "openapi": "3.0.3", "info": {"title": "late", "version": "1"},
    "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "pong"}}}}},
}


async def test_a_spec_served_404_then_200_comes_up_without_a_reload_and_sessions_hear_of_it() -> None:
    served = {"spec": False, "requests": 0}
    retried = asyncio.Event()

    async def spec(_request: web.Request) -> web.Response:
        served["requests"] += 1
        if served["requests"] >= 3:
            retried.set()
        return web.json_response(SPEC) if served["spec"] else web.Response(status=404, text="not yet")

    app = web.Application()
    app.router.add_get("/spec.json", spec)
    async with serving(app) as url:
        config = f"""
        gateway: {{start_retry: {{initial_s: 0.05, max_s: 0.2}}}}
        audit: {{enabled: false}}
        connectors:
          - {{name: late, type: openapi, spec: "{url}/spec.json", base_url: "{url}"}}
          - {{name: fz, type: static, prompts: [{{name: hello, messages: [{{text: hi}}]}}]}}
        """
        async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
            assert "late" in gw.failed and "late" not in gw.connectors
            session = await initialize(http, gw.mcp_url)
            stream = await http.get(gw.mcp_url, headers={**session.headers, "Accept": "text/event-stream"})
            try:
                async with asyncio.timeout(10):
                    await retried.wait()  # retried, without a reload
                async with http.get(gw.url + "/readyz?verbose=1") as resp:
                    late = (await resp.json())["connectors"]["late"]
                assert late["up"] is False and "HTTP 404" in late["detail"]
                assert late["retry"]["attempts"] >= 2 and "HTTP 404" in late["retry"]["last_error"]
                assert 0 <= late["retry"]["next_attempt_in_s"] <= 0.2
                async with http.get(gw.url + "/status") as resp:
                    page = await resp.text()
                assert "HTTP 404" in page and "next attempt in" in page

                served["spec"] = True
                async with asyncio.timeout(10):
                    _, data = await anext(sse_events(stream))
                assert json.loads(data)["method"] == "notifications/tools/list_changed"
                tools = (await session.request("tools/list"))["result"]["tools"]
                assert [t["name"] for t in tools] == ["late_ping"]
                assert gw.connectors["late"].health().up and "late" not in gw.failed
                async with http.get(gw.url + "/readyz?verbose=1") as resp:
                    late = (await resp.json())["connectors"]["late"]
                assert late["up"] is True and "retry" not in late and "HTTP 404" in late["last_error"]
            finally:
                stream.close()


def test_backoff_doubles_to_its_cap_with_jitter_between_half_and_all_of_the_step() -> None:
    now = [100.0]
    low = Backoff(1.0, 8.0, rand=lambda: 0.0, clock=lambda: now[0])
    assert [low.failed("down").delay_s for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    high = Backoff(1.0, 8.0, rand=lambda: 0.999999, clock=lambda: now[0])
    delays = [high.failed("down").delay_s for _ in range(5)]
    assert delays == pytest.approx([1.0, 2.0, 4.0, 8.0, 8.0], abs=1e-4)
    assert high.snapshot() == {"attempts": 5, "last_error": "down", "next_attempt_in_s": 8.0}
    now[0] += 3
    assert high.snapshot()["next_attempt_in_s"] == 5.0
    high.succeeded()
    assert high.snapshot() == {"attempts": 0, "last_error": "down"}  # the last error stays visible
    assert high.failed("down").delay_s == pytest.approx(1.0, abs=1e-4)  # a new streak starts low


def test_backoff_says_which_failures_repeat_the_previous_one() -> None:
    backoff = Backoff(1.0, 2.0, rand=lambda: 0.5)
    assert [backoff.failed(e).repeated for e in ("a", "a", "b", "b", "b")] == [False, True, False, True, True]


async def test_start_retries_log_an_identical_failure_as_one_short_line_per_attempt(
        caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[float] = []
    slept: list[float] = []
    adopted: list[Connector] = []
    done = asyncio.Event()
    cfg = ConnectorConfig(name="late", type="static")

    async def start(_cfg: ConnectorConfig) -> Connector:
        attempts.append(1)
        if len(attempts) < 4:
            raise RuntimeError("spec fetch returned HTTP 404\nnpm ERR! 404 Not Found")
        return object()  # type: ignore[return-value]

    async def sleep(delay: float) -> None:  # the injected clock: no wall-clock waits
        slept.append(delay)

    def adopt(connector: Connector) -> None:
        adopted.append(connector)
        done.set()

    retries = StartRetries(StartRetry(initial_s=1.0, max_s=4.0), start, adopt, rand=lambda: 0.0, sleep=sleep)
    with caplog.at_level(logging.INFO, logger="gateway.startup"):
        retries.schedule(cfg, "spec fetch returned HTTP 404\nnpm ERR! 404 Not Found")
        async with asyncio.timeout(5):
            await done.wait()
    assert slept == [0.5, 1.0, 2.0, 2.0] and len(adopted) == 1 and retries.state("late") is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("npm ERR!" in w for w in warnings) == 0  # the first failure is the gateway's own ERROR line
    assert sum("same error" in w for w in warnings) == 3
    assert any("started after 4 failed attempts" in r.getMessage() for r in caplog.records)


async def test_a_reload_restarts_the_retries_of_what_still_fails_and_drops_the_rest(tmp_path: Any) -> None:
    spec = tmp_path / "spec.json"
    base = """
    gateway: {{start_retry: {{initial_s: 30, max_s: 60}}}}
    audit: {{enabled: false}}
    connectors:
      - {{name: fz, type: static, prompts: [{{name: hello, messages: [{{text: hi}}]}}]}}
    {late}"""
    late = f'  - {{name: late, type: openapi, spec: "{spec}", base_url: "http://127.0.0.1:9"}}'
    async with running_gateway(base.format(late=late)) as gw:
        assert gw.retries.state("late")["attempts"] == 1  # type: ignore[index]
        await gw.gateway.reload(config_from(base.format(late=late)))
        assert gw.retries.state("late")["attempts"] == 1 and "late" in gw.failed  # type: ignore[index]
        spec.write_text(json.dumps(SPEC))
        await gw.gateway.reload(config_from(base.format(late="")))
        assert gw.retries.state("late") is None and "late" not in gw.failed and "late" not in gw.connectors

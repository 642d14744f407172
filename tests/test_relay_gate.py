"""Upstream log and progress notifications relayed to a caller are capped per call (issue 26,
finding 5: one upstream tool sent 23 MB of ``notifications/message`` in 9 s). A real SDK upstream
tool sends log messages and progress as fast as it can; its caller (a real SDK client) receives at
most the bucket's burst plus one notice, the drops are counted, and another session's
calls keep being answered promptly meanwhile."""

from __future__ import annotations

import asyncio
import logging
import sys
import time

import pytest
from mcp import types

from gateway.relay_gate import NOTICE_LOGGER
from gateway.telemetry import metrics
from tests.connectors.mcp.helpers import SERVER
from tests.e2e.clients import sdk_client
from tests.support import running_gateway

BURST = 10
CONFIG = f"""\
gateway: {{relayed_notifications: {{per_s: 0.001, burst: {BURST}}}}}
audit: {{enabled: false}}
connectors:
  - {{name: up, type: mcp, command: {sys.executable}, args: ["{SERVER}", "--transport", "stdio"]}}
  - {{name: fz, type: static, prompts: [{{name: hello, messages: [{{text: hi}}]}}]}}
"""
# A 2026-07-28 upstream has no session to log on outside a request: speak the legacy era to it.
LEGACY = CONFIG.replace('"--transport", "stdio"]}', '"--transport", "stdio"], protocol: legacy}')


def _dropped(method: str) -> float:
    value = metrics.REGISTRY.get_sample_value(f"{metrics.NAMESPACE}_relayed_notifications_dropped_total",
                                              {"method": method})
    return value or 0.0


async def test_a_chattering_tool_reaches_its_caller_capped_and_slows_no_one_else() -> None:
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[float] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    before = {m: _dropped(m) for m in ("notifications/message", "notifications/progress")}
    async with running_gateway(CONFIG) as gw, \
            sdk_client("streamable_http", url=gw.url, logging_callback=on_log) as chatty, \
            sdk_client("streamable_http", url=gw.url) as other:
        call = asyncio.create_task(chatty.call_tool("up_chatter", {"seconds": 3, "size": 1000},
                                                    progress_callback=on_progress))
        # Meanwhile another session is served as usual: each request answered well within a second
        # on an idle machine (2 s allows for a busy one), for as long as the chatter runs.
        slowest, answered = 0.0, 0
        while not call.done():
            started = time.monotonic()
            async with asyncio.timeout(10):
                got = await other.get_prompt("fz_hello")
            slowest = max(slowest, time.monotonic() - started)
            answered += 1
            assert got.messages[0].content == types.TextContent(type="text", text="hi")
        result = await call
    sent = int(result.content[0].text)  # type: ignore[union-attr]
    assert sent > 5 * BURST, f"the upstream sent only {sent}: nothing to cap"
    notices = [p for p in logs if p.logger == NOTICE_LOGGER]
    upstream = [p for p in logs if p.logger != NOTICE_LOGGER]
    assert len(notices) == 1 and "gateway.relayed_notifications" in str(notices[0].data)
    # Log messages and progress of one call share its bucket: BURST in all, then a notification
    # every 1000 s (per_s: 0.001).
    assert upstream and progress and len(upstream) + len(progress) <= BURST, (len(upstream), len(progress))
    assert _dropped("notifications/message") - before["notifications/message"] == sent - len(upstream)
    assert _dropped("notifications/progress") - before["notifications/progress"] == sent - len(progress)
    print(f"sent {sent}, relayed {len(upstream)} logs and {len(progress)} progress; other session: "
          f"{answered} answered, slowest {slowest * 1000:.0f} ms")
    assert answered >= 3 and slowest < 2.0, (answered, slowest)


async def test_log_messages_of_no_call_are_capped_per_connector_before_reaching_every_session(
        caplog: pytest.LogCaptureFixture) -> None:
    """An upstream logging outside any call: what the gateway would send to every session."""
    caplog.set_level(logging.WARNING, "gateway.relay")
    seen: dict[str, list[str]] = {"a": [], "b": []}

    def collector(name: str):  # noqa: ANN202 - the SDK's logging callback
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            seen[name].append(str(params.data))
        return on_log

    before = _dropped("notifications/message")
    assert LEGACY != CONFIG
    async with running_gateway(LEGACY) as gw, \
            sdk_client("streamable_http", url=gw.url, logging_callback=collector("a")) as a, \
            sdk_client("streamable_http", url=gw.url, logging_callback=collector("b")) as b:
        result = await a.call_tool("up_chatter_later", {"seconds": 1.5})
        assert result.content[0].text == "chattering"  # type: ignore[union-attr]
        # The upstream logs for 1.5 s; meanwhile both sessions are served, and then the drops show.
        async with asyncio.timeout(20):
            while _dropped("notifications/message") - before < 5 * BURST:
                assert (await b.get_prompt("fz_hello")).messages
    counts = {k: len(v) for k, v in seen.items()}
    assert 0 < counts["b"] <= BURST, counts
    # The caller's first few may still be relayed as its call's (the call's own bucket, and notice).
    assert 0 < counts["a"] <= 2 * BURST + 1, counts
    warnings = [r for r in caplog.records if "connector up sends more log messages" in r.getMessage()]
    assert len(warnings) == 1

"""SIGTERM during a call (issue 15, finding 6): the call is answered, and so is the client's
follow-up request (the SDK lists tools after a call), because sessions stay open for
``gateway.drain_linger_s`` after their last request; new sessions are refused meanwhile, and the
gateway exits as soon as the last session is gone."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

import aiohttp
from mcp import types

from tests.e2e.clients import sdk_client
from tests.filters.mcp_http import McpHttp
from tests.support import REPO, gateway_process

TINY = REPO / "examples" / "tiny_mcp_server.py"


async def test_a_follow_up_request_after_sigterm_is_answered() -> None:
    config = f"""\
    gateway: {{drain_linger_s: 5, shutdown_grace_s: 20, log_format: text}}
    audit: {{enabled: false}}
    connectors:
      - {{name: tiny, type: mcp, command: {sys.executable}, args: ["{TINY}"]}}
    """
    async with gateway_process(config) as gw, aiohttp.ClientSession() as http:
        proc = gw.proc
        terminated = asyncio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if not terminated.is_set():  # the call is running upstream: stop the gateway now
                proc.send_signal(signal.SIGTERM)
                terminated.set()

        async with sdk_client("streamable_http", url=gw.url) as session:
            result = await session.call_tool("tiny_countdown", {"n": 10}, progress_callback=on_progress)
            assert terminated.is_set() and proc.returncode is None
            assert not result.is_error and isinstance(result.content[0], types.TextContent)
            assert result.content[0].text == "liftoff"  # the call in flight finished during the drain
            # The follow-up on the same session: answered, not "404 Session terminated".
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["tiny_countdown", "tiny_echo", "tiny_word_count"]
            # New sessions are still refused while draining.
            refused = await McpHttp(http, gw.mcp_url).post({
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "late", "version": "1"}}})
            assert refused.status == 503
            assert proc.returncode is None
            left = time.monotonic()
        # The client closed its session (DELETE): nothing is left to linger for.
        assert await asyncio.wait_for(proc.wait(), 15) == 0
        assert time.monotonic() - left < 4.0  # well before the 5 s linger would have run out

"""SIGTERM on a gateway with nothing in flight (issue 26, finding 6): the process is gone within
``drain_linger_s`` + 1 s, whatever its clients leave open — idle keep-alive connections, the GET
(SSE) stream of a Streamable HTTP session, a legacy SSE stream, a POST whose body never comes, a
refused POST whose body was never read (aiohttp lingers up to 10 s on those) — while
``shutdown_grace_s`` is 20 s (it bounds calls still running, not connections without a call)."""

from __future__ import annotations

import asyncio
import signal
import time

import aiohttp

from tests.e2e.rawhttp import initialize, sse_events
from tests.support import gateway_process

LINGER_S = 0.5
CONFIG = f"""\
gateway: {{drain_linger_s: {LINGER_S}, shutdown_grace_s: 20, log_format: text}}
audit: {{enabled: false}}
connectors:
  - {{name: fz, type: static, prompts: [{{name: hello, messages: [{{text: hi}}]}}]}}
"""


def _partial_post(host: str) -> bytes:
    """A POST announcing 1000 bytes of body and sending one."""
    return (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{").encode()


async def test_sigterm_with_nothing_in_flight_exits_within_the_linger() -> None:
    async with gateway_process(CONFIG) as gw, aiohttp.ClientSession() as http:
        host = gw.url.removeprefix("http://")
        session = await initialize(http, gw.mcp_url)
        listed = await session.request("prompts/list")
        assert [p["name"] for p in listed["result"]["prompts"]] == ["fz_hello"]
        # A Streamable HTTP session's GET stream, open and idle.
        stream = await http.get(gw.mcp_url, headers={**session.headers, "Accept": "text/event-stream"})
        assert stream.status == 200
        # A legacy SSE session: its stream is open once the endpoint event arrived.
        legacy = await http.get(gw.url + "/sse", headers={"Accept": "text/event-stream"})
        async with asyncio.timeout(10):
            event, _ = await anext(sse_events(legacy))
        assert event == "endpoint"
        # A POST whose body never comes (its handler waits for it, up to body_timeout_s), and one
        # refused for its Host before its body was read (answered 403, then aiohttp's lingering read).
        waiting = await asyncio.open_connection("127.0.0.1", gw.url.rsplit(":", 1)[1])
        waiting[1].write(_partial_post(host))
        refused = await asyncio.open_connection("127.0.0.1", gw.url.rsplit(":", 1)[1])
        refused[1].write(_partial_post("elsewhere.example"))
        async with asyncio.timeout(10):
            assert (await refused[0].readline()).startswith(b"HTTP/1.1 403")
        # Nothing in flight now (a last request answered); idle keep-alive connections stay open.
        assert (await session.request("ping"))["result"] == {}
        sent = time.monotonic()
        gw.proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(30):  # the assertion below is the real bound
                code = await gw.proc.wait()
            took = time.monotonic() - sent
        finally:
            for _, writer in (waiting, refused):
                writer.close()
            stream.close()
            legacy.close()
        print(f"SIGTERM to exit: {took:.2f} s")
        assert code == 0
        assert took < LINGER_S + 1.0, f"exit took {took:.2f} s"

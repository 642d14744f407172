"""Readiness tells the truth (issue 15, finding 7): ``/readyz`` reports the rate-limit backend and
the audit store; a Redis outage reaches clients as "unavailable" (-32004), never as throttling
(-32029), and ``/readyz`` shows it even while no call comes (the gateway probes Redis)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from gateway import app as gateway_app
from gateway.protocol.errors import BACKEND_UNAVAILABLE, RATE_LIMITED
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway


class TcpProxy:
    """127.0.0.1:<port> → the real Redis, which a test can cut and restore (an outage)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()
        self.writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def readyz(http: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, Any]]:
    """The detail (``?verbose=1``: the plain ``/readyz`` body is ``{"status": ...}`` alone)."""
    async with http.get(url + "/readyz?verbose=1") as resp:
        return resp.status, await resp.json()


async def test_readyz_and_clients_see_a_redis_outage_as_unavailable(tmp_path: Path, redis_url: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_app, "_PROBE_EVERY_S", 0.05)
    target = urlsplit(redis_url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 6379)
    await proxy.start()
    config = f"""
    gateway: {{http: {{json_response: true}}}}
    audit: {{store: "sqlite:///{tmp_path}/audit.db", spill_path: "{tmp_path}/spill.jsonl"}}
    rate_limits:
      backend: redis://127.0.0.1:{proxy.port}/0
      on_backend_error: closed
      redis_prefix: "h15-{tmp_path.name}"
      rules: [{{scope: principal, rate: 1000/s}}]
    connectors:
      - {{name: team, type: static, prompts: [{{name: hi, messages: [{{text: hello}}]}}]}}
    """
    async with running_gateway(config, base_dir=tmp_path) as gw, aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url).initialize()
        assert "result" in await client.call("prompts/get", {"name": "team_hi"})
        status, body = await readyz(http, gw.url)
        assert status == 200 and body["ready"] is True
        assert body["rate_limit"] == {"backend": "redis", "up": True}
        assert body["audit"] == {"store": "sqlite", "up": True}

        await proxy.stop()  # Redis is gone
        refused = await client.call("prompts/get", {"name": "team_hi"})
        assert refused["error"]["code"] == BACKEND_UNAVAILABLE != RATE_LIMITED
        assert "rate-limit backend unavailable" in refused["error"]["message"]
        assert "retryAfterMs" not in (refused["error"].get("data") or {})  # nothing to wait out: not throttled
        status, body = await readyz(http, gw.url)
        assert status == 200 and body["rate_limit"]["up"] is False and body["rate_limit"]["detail"]

        await proxy.start()  # back, on the same port: the probe notices with no call at all
        async with asyncio.timeout(10):
            while not (await readyz(http, gw.url))[1]["rate_limit"]["up"]:
                pass
        assert "result" in await client.call("prompts/get", {"name": "team_hi"})
        await proxy.stop()  # and gone again: the probe notices that too
        async with asyncio.timeout(10):
            while (await readyz(http, gw.url))[1]["rate_limit"]["up"]:
                pass


async def test_readyz_reports_an_audit_store_that_is_down(tmp_path: Path) -> None:
    config = f"""
    audit: {{store: "postgresql+asyncpg://audit@127.0.0.1:1/audit", spill_path: "{tmp_path}/spill.jsonl"}}
    connectors:
      - {{name: team, type: static, prompts: [{{name: hi, messages: [{{text: hello}}]}}]}}
    """
    async with running_gateway(config, base_dir=tmp_path) as gw, aiohttp.ClientSession() as http:
        status, body = await readyz(http, gw.url)
    assert status == 200 and body["ready"] is True  # events are spilled, not lost: still serving
    assert body["audit"] == {"store": "postgresql", "up": False,
                             "detail": f"store unavailable: events are spilled to {tmp_path / 'spill.jsonl'}"}
    assert "rate_limit" not in body  # no rules: no limiter, nothing to report

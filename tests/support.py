"""Test support: run a real gateway on a free loopback port, in-process or as a subprocess."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from gateway.app import Gateway
from gateway.config import GatewayConfig, parse_config
from gateway.transports.http_app import build_app
from gateway.transports.http_server import start_server

__all__ = ["free_port", "running_gateway", "RunningGateway", "gateway_process", "GatewayProcess", "config_from",
           "serving", "until_ok"]

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_from(config: str | GatewayConfig, base_dir: str | Path | None = None) -> GatewayConfig:
    if isinstance(config, GatewayConfig):
        return config
    return parse_config(textwrap.dedent(config), base_dir=base_dir or REPO)


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve an aiohttp app (a test's backend) on 127.0.0.1:<ephemeral port>; yields its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@dataclass
class RunningGateway:
    gateway: Gateway
    url: str
    app: web.Application

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"

    @property
    def sse_url(self) -> str:
        return self.url + "/sse"

    def __getattr__(self, name: str) -> Any:  # gw.catalog, gw.sessions, ... of the Gateway
        return getattr(self.gateway, name)


@asynccontextmanager
async def running_gateway(config: str | GatewayConfig, base_dir: str | Path | None = None) -> AsyncIterator[RunningGateway]:
    """Start a Gateway and its HTTP app on 127.0.0.1:<free port>; stop both on exit."""
    cfg = config_from(config, base_dir)
    gateway = Gateway(cfg)
    await gateway.start()
    app = build_app(gateway)
    runner = await start_server(app, lambda: gateway.config.gateway.http, "127.0.0.1", 0, shutdown_timeout=1.0)
    port = runner.addresses[0][1]
    gateway.oauth.serving_at(f"http://127.0.0.1:{port}")  # authorization links point at this server
    try:
        yield RunningGateway(gateway, f"http://127.0.0.1:{port}", app)
    finally:
        await gateway.drain(grace_s=1.0, linger_s=0)  # tests end their sessions: no follow-up to wait for
        await runner.shutdown()
        await gateway.stop(grace_s=0)
        await runner.cleanup()


async def until_ok(http: Any, url: str, check: Callable[[], Awaitable[None]]) -> bytes:
    """GET ``url`` (an ``aiohttp.ClientSession``) until it answers 200, every 50 ms; returns that
    body. ``check`` runs before each attempt and raises when waiting is pointless (the server
    exited). Unbounded: the caller bounds it (``asyncio.timeout``)."""
    import aiohttp

    while True:
        await check()
        try:
            async with http.get(url) as resp:
                if resp.status == 200:
                    return bytes(await resp.read())
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.05)


@dataclass
class GatewayProcess:
    proc: asyncio.subprocess.Process
    url: str
    config_path: Path

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"


@asynccontextmanager
async def gateway_process(config_text: str, env: dict[str, str] | None = None,
                          startup_timeout: float = 30.0, args: tuple[str, ...] = (),
                          port: int | None = None) -> AsyncIterator[GatewayProcess]:
    """Run ``mcp-gateway serve`` (with ``args``) as a subprocess on ``port`` or a free one; waits
    for /readyz."""
    import aiohttp

    port = port or free_port()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gateway.yaml"
        path.write_text(textwrap.dedent(config_text))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port", str(port), *args,
            env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, cwd=tmp)
        url = f"http://127.0.0.1:{port}"
        try:
            async with asyncio.timeout(startup_timeout), aiohttp.ClientSession() as http:
                async def exited() -> None:
                    if proc.returncode is not None:
                        err = await proc.stderr.read() if proc.stderr else b""
                        raise RuntimeError(f"gateway exited with {proc.returncode}: {err.decode()[-2000:]}")

                await until_ok(http, url + "/readyz", exited)
            yield GatewayProcess(proc, url, path)
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 15)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()

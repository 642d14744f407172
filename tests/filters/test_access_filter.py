"""Access rules through a real gateway: listings differ by principal, denied calls are errors
that say so and are audited as denied."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from gateway.audit.store import AuditStore
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway

CONFIG = """
gateway: {{http: {{json_response: true}}}}
connectors:
  - name: team
    type: static
    prompts:
      - {{name: summarize, arguments: [{{name: text}}], messages: [{{text: "Summarize {{text}}"}}]}}
      - {{name: delete_all, messages: [{{text: "x"}}]}}
    resources:
      - {{uri: "docs://runbook", name: runbook, text: "be calm"}}
      - {{uri: "docs://secret_plan", name: secret_plan, text: "shh"}}
auth:
  api_keys:
    - {{name: ops-bot, key: ops-key, groups: [ops]}}
    - {{name: ci, key: ci-key, groups: [ci]}}
    - {{name: nobody, key: nobody-key}}
access:
  - {{principals: ["group:ops"], allow: ["*"]}}
  - {{principals: ["group:ci"], allow: ["team_*"], deny: ["*delete*", "*secret*"]}}
audit: {{store: "sqlite:///{db}", spill_path: "{tmp}/spill.jsonl"}}
"""


async def test_listings_and_calls_follow_the_rules(tmp_path: Path) -> None:
    config = CONFIG.format(db=tmp_path / "audit.db", tmp=tmp_path)
    async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
        ops = await McpHttp(http, gw.mcp_url, "ops-key").initialize()
        ci = await McpHttp(http, gw.mcp_url, "ci-key").initialize()
        nobody = await McpHttp(http, gw.mcp_url, "nobody-key").initialize()

        def names(resp: dict, key: str) -> list[str]:
            return [p["name"] for p in resp["result"][key]]

        assert names(await ops.call("prompts/list"), "prompts") == ["team_delete_all", "team_summarize"]
        assert names(await ci.call("prompts/list"), "prompts") == ["team_summarize"]
        assert names(await nobody.call("prompts/list"), "prompts") == []
        assert names(await ops.call("resources/list"), "resources") == ["team_runbook", "team_secret_plan"]
        assert names(await ci.call("resources/list"), "resources") == ["team_runbook"]

        ok = await ci.call("prompts/get", {"name": "team_summarize", "arguments": {"text": "hi"}})
        assert "result" in ok
        denied = await ci.call("prompts/get", {"name": "team_delete_all"})
        assert denied["error"]["code"] == -32003 and "denied" in denied["error"]["message"].lower()
        read = await ci.call("resources/read", {"uri": "docs://secret_plan"})
        assert read["error"]["code"] == -32003
        assert "result" in await ops.call("prompts/get", {"name": "team_delete_all"})
        writer = next(f.writer for f in gw.gateway.filters if hasattr(f, "writer"))
        await writer.flush()
    store = AuditStore(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        rows = await store.query(outcome="denied")
    finally:
        await store.close()
    assert sorted((r["principal"], r["target"]) for r in rows) == [
        ("ci", "docs://secret_plan"), ("ci", "team_delete_all")]
    assert all(r["error_code"] == -32003 and r["client_name"] == "policy-tests" for r in rows)

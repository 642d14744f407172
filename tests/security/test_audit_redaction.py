"""Issue 14, row 9: redaction missed header-shaped names (``X-API-Key`` stored in clear) and the
caller's own credential quoted inside free text.

The attack: an authenticated caller sends arguments that carry secrets the way real tools get
them — headers as a mapping, as ``name``/``value`` objects and as pairs, under ``X-API-Key``,
``x_api_key``, ``apiKey``, ``Authorization``; ``key: value`` and ``key=value`` inside free text; its
own bearer token quoted in a sentence, in a resource URI and in a tool name (which the refusal's
error message repeats). Now none of the secrets reaches the audit store (PostgreSQL, SQLite — the
database file's bytes are searched) or the JSON-lines mirror, and what is not secret stays.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.audit.events import REDACTED, Redactor, caller_secrets
from tests.audit.pgdb import scratch_database
from tests.e2e import testkit
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway

CALLER_KEY = "caller-key-7Hq2v9LmX4"
# Secrets that must not be stored, whatever shape they came in.
SECRETS = (CALLER_KEY, "hdr-secret-1111", "hdr-secret-2222", "hdr-secret-3333", "hdr-secret-4444",
           "obj-secret-5555", "pair-secret-6666", "text-secret-7777", "query-secret-8888", "json-secret-9999")

CONFIG = """
gateway: {{http: {{json_response: true}}, log_level: warning}}
auth:
  api_keys: [{{name: alice, key: "{key}"}}]
audit: {{store: "{store}", jsonl: "{jsonl}", spill_path: "{spill}"}}
telemetry: {{metrics: false}}
connectors:
  - {{name: kit, type: testkit, tools: 1}}
  - name: team
    type: static
    resources: [{{uri: "docs://runbook", name: runbook, text: "# Runbook"}}]
"""


@pytest.fixture
def kit(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)  # kit_echo_000 takes any arguments and echoes them


def test_names_match_whatever_their_case_and_separators() -> None:
    redactor = Redactor()
    for name in ("X-API-Key", "x_api_key", "apiKey", "API Key", "x.api.key", "Authorization", "proxy-authorization",
                 "X-Auth-Token", "refresh_token", "clientSecret", "AWS_SECRET_ACCESS_KEY", "db.password", "Set-Cookie",
                 "privateKey", "accessKeyId"):
        assert redactor.secret_name(name), name
    for name in ("Content-Type", "Accept", "user_name", "query", "region", "key_id_hint"):
        assert not redactor.secret_name(name), name
    # Configured words are normalised the same way: "ssn" catches "SSN" and "s.s.n".
    assert Redactor(["S-S-N"]).secret_name("customer_s.s.n")


def test_the_callers_credential_is_found_in_any_text() -> None:
    secrets = caller_secrets(f"Bearer {CALLER_KEY}")
    assert secrets == (CALLER_KEY,)
    redactor = Redactor()
    args = {"q": f"please use {CALLER_KEY}, thanks", "deep": [{"x": f"<{CALLER_KEY}>"}], "n": 3}
    assert redactor.redact(args, scrub=secrets) == {"q": f"please use {REDACTED}, thanks",
                                                     "deep": [{"x": f"<{REDACTED}>"}], "n": 3}
    assert redactor.text(f"Unknown tool: {CALLER_KEY}", secrets) == f"Unknown tool: {REDACTED}"
    # Too short to search for without destroying ordinary text.
    assert caller_secrets("Bearer abc") == ()


def _arguments() -> dict[str, Any]:
    """A tool's arguments with secrets in every shape the finding used, and things that are not."""
    return {
        "headers": {"X-API-Key": "hdr-secret-1111", "x_api_key": "hdr-secret-2222", "apiKey": "hdr-secret-3333",
                    "Authorization": "Token hdr-secret-4444", "Accept": "application/json"},
        "header_list": [{"name": "X-Api-Key", "value": "obj-secret-5555"}, {"name": "Accept", "value": "text/csv"}],
        "header_pairs": [["x-api-key", "pair-secret-6666"], ["Accept", "text/plain"]],
        "url": "https://api.example/v1/items?api_key=query-secret-8888&page=2",
        "note": (f"calling with X-API-Key: text-secret-7777 (my gateway key is {CALLER_KEY}); "
                 f"body {json.dumps({'password': 'json-secret-9999', 'user': 'ada'})}"),
    }


async def _attack(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url, token=CALLER_KEY).initialize()
        reply = await client.call("tools/call", {"name": "kit_echo_000", "arguments": _arguments()})
        assert "result" in reply and "hdr-secret-1111" in reply["result"]["content"][0]["text"], reply
        # The caller's key in a URI and in a tool name: the refusals repeat them in their messages.
        reply = await client.call("resources/read", {"uri": f"docs://missing?token={CALLER_KEY}"})
        assert reply["error"]["code"] == -32002 and CALLER_KEY in reply["error"]["message"]
        reply = await client.call("tools/call", {"name": f"{CALLER_KEY}", "arguments": {}})
        assert "error" in reply and CALLER_KEY in reply["error"]["message"]


def _check(rows: list[dict[str, Any]], raw: bytes) -> None:
    for secret in SECRETS:
        assert secret.encode() not in raw, f"{secret} was stored"
    echo = next(r for r in rows if r["target"] == "kit_echo_000")
    args = echo["arguments"] if isinstance(echo["arguments"], dict) else json.loads(echo["arguments"])
    assert args["headers"] == {"X-API-Key": REDACTED, "x_api_key": REDACTED, "apiKey": REDACTED,
                               "Authorization": REDACTED, "Accept": "application/json"}
    assert args["header_list"] == [{"name": "X-Api-Key", "value": REDACTED}, {"name": "Accept", "value": "text/csv"}]
    assert args["header_pairs"] == [["x-api-key", REDACTED], ["Accept", "text/plain"]]
    # What is not secret is kept, so the event still says what happened.
    assert args["url"] == f"https://api.example/v1/items?api_key={REDACTED}&page=2"
    assert args["note"] == (f"calling with X-API-Key: {REDACTED} (my gateway key is {REDACTED}); "
                            f'body {{"password": "{REDACTED}", "user": "ada"}}')
    read = next(r for r in rows if r["method"] == "resources/read")
    assert read["target"] == f"docs://missing?token={REDACTED}" and REDACTED in read["error_message"]
    call = next(r for r in rows if r["method"] == "tools/call" and r is not echo)
    assert call["target"] == REDACTED and REDACTED in call["error_message"]
    assert all(r["principal"] == "alice" for r in rows)


async def test_sqlite_store_and_mirror_hold_no_secret(tmp_path: Path, kit: None) -> None:
    db, jsonl = tmp_path / "audit.db", tmp_path / "audit.jsonl"
    config = CONFIG.format(key=CALLER_KEY, store=f"sqlite:///{db}", jsonl=jsonl, spill=tmp_path / "spill.jsonl")
    async with running_gateway(config) as gw:
        await _attack(gw)
    # The gateway stopped: the writer flushed. Every byte of the database file and of the mirror.
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM gw_audit_events ORDER BY id")]
    _check(rows, db.read_bytes() + jsonl.read_bytes())
    assert len(jsonl.read_text().splitlines()) == len(rows) == 4  # initialize + the three calls


@pytest.mark.parametrize("durability", ["batch", "strict"])
async def test_postgres_store_holds_no_secret(durability: str, pg_url: str, tmp_path: Path, kit: None) -> None:
    async with scratch_database(pg_url) as pg:
        config = CONFIG.format(key=CALLER_KEY, store=pg.url, jsonl=tmp_path / "audit.jsonl",
                               spill=tmp_path / "spill.jsonl")
        config = config.replace("audit: {", f"audit: {{durability: {durability}, ")
        async with running_gateway(config) as gw:
            await _attack(gw)
        records = await pg.fetch("SELECT row_to_json(e)::text AS line, e.* FROM gw_audit_events e ORDER BY id")
    rows = [dict(r) for r in records]
    _check(rows, "\n".join(r["line"] for r in rows).encode())

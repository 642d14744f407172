"""Redaction removes a secret and nothing else (issue 26): a statement that merely mentions a
secret's name (``password=``, ``"password="``, ``/* password: */``, ``token:``) is recorded word
for word, a real secret (``password=hunter2``) is still removed, and the row's keyed digest of the
unredacted arguments proves which statement ran. Driven through a real gateway with a SQLite
connector."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiohttp
import pytest

from gateway.audit.escape import arguments_digest
from gateway.audit.events import REDACTED, Redactor
from gateway.filters.audit import AuditFilter
from tests.e2e.rawhttp import initialize
from tests.support import running_gateway

KEY = "audit-digest-key-for-tests"
CONFIG = f"""
gateway: {{log_level: warning}}
connectors:
  - name: shop
    type: sql
    url: "sqlite+aiosqlite:///shop.db"
audit: {{store: "sqlite:///./audit.db", spill_path: ./spill.jsonl, digest_key: "{KEY}"}}
"""
MENTIONS = (
    """SELECT 'MARKX4' AS "password=", (SELECT group_concat(name||':'||note, ';') FROM items WHERE id < 4) AS "x\"""",
    "SELECT name /* password: */ FROM items WHERE note <> 'token:' ORDER BY id",
    """SELECT 'password=' || name AS "token:", note FROM items WHERE id = 1""",
    "SELECT name, note FROM items -- token:\nWHERE id < 3",
)
SECRET = "SELECT name FROM items WHERE note = 'password=hunter2' OR id = 2"


def _shop(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, note TEXT)")
        db.executemany("INSERT INTO items VALUES (?, ?, ?)", [(i, f"item{i}", f"note{i}") for i in range(1, 6)])


async def test_statements_keep_their_words_and_a_digest(tmp_path: Path) -> None:
    _shop(tmp_path / "shop.db")
    async with running_gateway(CONFIG, base_dir=tmp_path) as gw, aiohttp.ClientSession() as http:
        session = await initialize(http, gw.mcp_url)
        for sql in (*MENTIONS, SECRET):
            reply = await session.request("tools/call", {"name": "shop_query", "arguments": {"sql": sql}})
            assert not reply["result"].get("isError"), reply
        writer = next(f.writer for f in gw.gateway.filters if isinstance(f, AuditFilter))
        await writer.flush()
        assert writer.store is not None
        rows = [r for r in await writer.store.query(method="tools/call") if r["target"] == "shop_query"]
    recorded = [r["arguments"]["sql"] for r in rows]
    assert recorded[:-1] == list(MENTIONS)  # every word, every quote: the structure is intact
    assert recorded[-1] == SECRET.replace("hunter2", REDACTED)
    for row, sql in zip(rows, (*MENTIONS, SECRET), strict=True):
        assert row["arguments_digest"] == arguments_digest(KEY.encode(), {"sql": sql})
    # The digest proves what ran without the secret in the row: a guess that differs is refuted.
    assert rows[-1]["arguments_digest"] != arguments_digest(KEY.encode(), {"sql": recorded[-1]})
    assert rows[-1]["arguments_digest"] != arguments_digest(b"another key", {"sql": SECRET})


@pytest.mark.parametrize(("text", "expected"), [
    ('SELECT 1 AS "password=", 2 AS "x"', 'SELECT 1 AS "password=", 2 AS "x"'),
    ("note = 'password: ' || name || ' and more'", "note = 'password: ' || name || ' and more'"),
    ("x /* token: */ y", "x /* token: */ y"),
    ("token:*/", "token:*/"),
    ("password=hunter2", f"password={REDACTED}"),
    ('"password=hunter2" AND x', f'"password={REDACTED}" AND x'),
    ("WHERE pw = 'token: abc123' AND y", f"WHERE pw = 'token: {REDACTED}' AND y"),
    ('{"password": "hunter2", "user": "bob"}', f'{{"password": "{REDACTED}", "user": "bob"}}'),
    ("password='hunter2' y", f"password='{REDACTED}' y"),
    ("url?api_key=abc&page=2", f"url?api_key={REDACTED}&page=2"),
])
def test_a_secret_ends_with_its_token_or_quoted_string(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


async def test_the_digest_key_defaults_to_the_cursor_secret_and_is_off_without_either(tmp_path: Path) -> None:
    base = ('connectors: [{name: team, type: static, prompts: [{name: hello, messages: [{text: hi}]}]}]\n'
            'audit: {store: "sqlite:///./audit.db", spill_path: ./spill.jsonl}\n')
    for extra, key in (("gateway: {cursor_secret: shared-by-replicas}\n", b"shared-by-replicas"), ("", None)):
        async with running_gateway(extra + base, base_dir=tmp_path) as gw:
            writer = next(f.writer for f in gw.gateway.filters if isinstance(f, AuditFilter))
            assert writer._digest_key == key

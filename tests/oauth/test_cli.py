"""``mcp-gateway oauth list|revoke`` on a real config: grants shown without their tokens, removed by
connector / principal / issuer, next to a store another process keeps writing."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.oauth.port import Grant, GrantKey
from gateway.cli import main
from gateway.oauth.file_store import EncryptedFileTokenStore
from gateway.oauth.sealing import Sealer

KEY = secrets.token_bytes(32)
CANARY = "canary-" + secrets.token_hex(16)
REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, key: bytes = KEY) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(f"oauth:\n  encryption_key: '{base64.b64encode(key).decode()}'\n"
                    "  token_store: 'file:tokens.bin'\n")
    return path


async def _seed(tmp_path: Path) -> EncryptedFileTokenStore:
    store = EncryptedFileTokenStore(tmp_path / "tokens.bin", Sealer(KEY))
    soon = time.time() + 3600
    await store.put(GrantKey("crm", "https://idp.example", "alice"),
                    Grant(access_token=CANARY, refresh_token="r-" + CANARY, expires_at=soon, scopes=("read", "write")))
    await store.put(GrantKey("crm", "https://idp.example", "bob"), Grant(access_token=CANARY + "b", expires_at=1.0))
    await store.put(GrantKey("crm", "https://other.example", "alice"), Grant(access_token=CANARY + "c"))
    await store.put(GrantKey("crm", "https://idp.example", ""), Grant(access_token=CANARY + "s"))
    await store.put(GrantKey("wiki", "https://idp.example", "alice"), Grant(access_token=CANARY + "w"))
    return store


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60, env={k: v for k, v in os.environ.items() if k != "MCP_GATEWAY_OAUTH_KEY"})


async def test_list_shows_every_grant_but_never_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await _seed(tmp_path)
    config = str(_config(tmp_path))
    assert await asyncio.to_thread(main, ["oauth", "list", config]) == 0
    out = capsys.readouterr()
    assert CANARY not in out.out + out.err
    lines = out.out.splitlines()
    assert lines[0].split() == ["CONNECTOR", "ISSUER", "PRINCIPAL", "SCOPES", "EXPIRES"]
    assert len(lines) == 6 and "5 grant(s)" in out.err
    alice = next(line for line in lines if line.startswith("crm") and "alice" in line and "idp.example" in line)
    assert "read write" in alice and "Z" in alice and "(expired)" not in alice
    assert any("(service)" in line for line in lines)
    assert any("bob" in line and "(expired)" in line for line in lines)

    assert await asyncio.to_thread(main, ["oauth", "list", config, "--json"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert CANARY not in out.out and len(rows) == 5
    assert {"connector": "crm", "issuer": "https://idp.example", "principal": "alice", "scopes": ["read", "write"],
            "refreshable": True} == {k: v for k, v in rows[1].items() if k != "expires_at"}


async def test_revoke_narrows_by_principal_and_issuer(tmp_path: Path) -> None:
    store = await _seed(tmp_path)
    config = str(_config(tmp_path))
    done = await asyncio.to_thread(_run, "oauth", "revoke", config, "--connector", "crm", "--principal", "alice",
                                   "--issuer", "https://idp.example")
    assert done.returncode == 0 and done.stdout == "revoked crm https://idp.example alice\n"
    # A running gateway's store (another process) sees it on its next read.
    assert await store.get(GrantKey("crm", "https://idp.example", "alice")) is None
    assert await store.get(GrantKey("crm", "https://other.example", "alice")) is not None
    done = await asyncio.to_thread(_run, "oauth", "revoke", config, "--connector", "crm", "--principal", "")
    assert done.returncode == 0 and done.stdout == "revoked crm https://idp.example (service)\n"
    done = await asyncio.to_thread(_run, "oauth", "revoke", config, "--connector", "crm")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2
    assert {k.connector for k in await store.keys()} == {"wiki"}
    done = await asyncio.to_thread(_run, "oauth", "revoke", config, "--connector", "crm")
    assert done.returncode == 1 and "no grant of connector 'crm' matched" in done.stderr


async def test_a_wrong_or_missing_key_is_exit_2_with_the_reason(tmp_path: Path) -> None:
    await _seed(tmp_path)
    config = _config(tmp_path, key=secrets.token_bytes(32))
    done = await asyncio.to_thread(_run, "oauth", "list", str(config))
    assert done.returncode == 2 and "sealed with another key" in done.stderr and CANARY not in done.stderr
    config.write_text("oauth: {token_store: 'file:tokens.bin'}\n")
    done = await asyncio.to_thread(_run, "oauth", "list", str(config))
    assert done.returncode == 2 and "MCP_GATEWAY_OAUTH_KEY" in done.stderr
    config.write_text("oauth: {token_store: 'nope'}\n")
    done = await asyncio.to_thread(_run, "oauth", "revoke", str(config), "--connector", "crm")
    assert done.returncode == 2 and "oauth.token_store (line 1)" in done.stderr
    assert (await asyncio.to_thread(_run, "oauth", "--help")).returncode == 0

"""The sealed file token store: nothing readable in its bytes, grants survive a restart, a wrong
key or a damaged file is an error (never an empty store), concurrent writers lose nothing."""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.oauth.port import Grant, GrantKey
from gateway.oauth.file_store import EncryptedFileTokenStore
from gateway.oauth.sealing import Sealer, StoreError

REPO = Path(__file__).resolve().parents[2]
KEY = bytes(range(32))
CANARY = "canary-" + secrets.token_hex(16)


def _grant(token: str = CANARY, refresh: str | None = "refresh-" + CANARY) -> Grant:
    return Grant(access_token=token, refresh_token=refresh, expires_at=time.time() + 3600, scopes=("read", "write"),
                 resource="https://crm.example/mcp")


async def test_a_grant_is_sealed_at_rest_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "oauth-tokens.bin"
    store = EncryptedFileTokenStore(path, Sealer(KEY))
    await store.open()
    key = GrantKey("crm", "https://idp.example", "alice@example.com")
    await store.put(key, _grant())
    await store.put_registration("crm", "https://idp.example", {"client_id": "gw-" + CANARY,
                                                                "client_secret": "secret-" + CANARY})
    data = path.read_bytes()
    for needle in (CANARY, "alice", "idp.example", "crm", "access_token"):
        assert needle.encode() not in data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []  # atomic: no leftovers

    # A new process (a new store on the same file and key) sees the same grants.
    again = EncryptedFileTokenStore(path, Sealer(KEY))
    await again.open()
    assert await again.keys() == [key]
    got = await again.get(key)
    assert got is not None and got.access_token == CANARY and got.refresh_token == "refresh-" + CANARY
    assert got.scopes == ("read", "write") and got.resource == "https://crm.example/mcp"
    assert await again.get_registration("crm", "https://idp.example") == {"client_id": "gw-" + CANARY,
                                                                         "client_secret": "secret-" + CANARY}
    assert await again.get_registration("crm", "https://other.example") is None
    assert await again.delete(key) is True and await again.delete(key) is False
    assert await store.get(key) is None  # the first store re-reads the replaced file
    assert CANARY not in repr(got)


async def test_a_wrong_key_or_a_damaged_file_is_an_error_not_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "tokens.bin"
    store = EncryptedFileTokenStore(path, Sealer(KEY))
    await store.put(GrantKey("crm", "https://idp.example", "alice"), _grant())
    other = EncryptedFileTokenStore(path, Sealer(bytes(32)))
    with pytest.raises(StoreError) as info:
        await other.open()
    assert "sealed with another key" in str(info.value) and str(path) in str(info.value)
    with pytest.raises(StoreError):  # and every later call too: never "no grant"
        await other.get(GrantKey("crm", "https://idp.example", "alice"))
    with pytest.raises(StoreError):  # a write would replace grants it cannot read: refused
        await other.put(GrantKey("crm", "https://idp.example", "bob"), _grant())

    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as info:
        await EncryptedFileTokenStore(path, Sealer(KEY)).open()
    assert "altered, truncated" in str(info.value)
    path.write_bytes(b'{"grants": []}')
    with pytest.raises(StoreError) as info:
        await EncryptedFileTokenStore(path, Sealer(KEY)).open()
    assert "not a token store file" in str(info.value)


async def test_a_missing_folder_is_refused_at_open(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        await EncryptedFileTokenStore(tmp_path / "nope" / "t.bin", Sealer(KEY)).open()
    assert "folder does not exist" in str(info.value)


async def test_concurrent_writers_on_one_file_lose_no_update(tmp_path: Path) -> None:
    """Two stores (two gateways, or a gateway and `oauth revoke`) on one file, writing at once,
    plus another process writing through its own store: every grant is there at the end."""
    path = tmp_path / "tokens.bin"
    a = EncryptedFileTokenStore(path, Sealer(KEY))
    b = EncryptedFileTokenStore(path, Sealer(KEY))
    script = (
        "import asyncio, sys\n"
        "from connectors.oauth.port import Grant, GrantKey\n"
        "from gateway.oauth.file_store import EncryptedFileTokenStore\n"
        "from gateway.oauth.sealing import Sealer\n"
        "async def main():\n"
        "    s = EncryptedFileTokenStore(sys.argv[1], Sealer(bytes(range(32))))\n"
        "    for i in range(25):\n"
        "        await s.put(GrantKey('crm', 'https://idp', f'proc{i}'), Grant(access_token=f't{i}'))\n"
        "asyncio.run(main())\n")
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", script, str(path),
                                                 cwd=REPO)
    await asyncio.gather(*(s.put(GrantKey("crm", "https://idp", f"{n}{i}"), Grant(access_token=f"t{i}"))
                           for i in range(25) for n, s in (("a", a), ("b", b))))
    async with asyncio.timeout(60):
        assert await child.wait() == 0
    keys = {k.principal for k in await EncryptedFileTokenStore(path, Sealer(KEY)).keys()}
    assert keys == {f"{n}{i}" for n in ("a", "b", "proc") for i in range(25)}
    assert await a.delete(GrantKey("crm", "https://idp", "b3"))
    assert await b.get(GrantKey("crm", "https://idp", "b3")) is None


def test_the_file_is_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    script = (
        "import asyncio, os, sys\n"
        "os.umask(0)\n"
        "from connectors.oauth.port import Grant, GrantKey\n"
        "from gateway.oauth.file_store import EncryptedFileTokenStore\n"
        "from gateway.oauth.sealing import Sealer\n"
        "asyncio.run(EncryptedFileTokenStore(sys.argv[1], Sealer(bytes(32))).put(GrantKey('c', 'i'), "
        "Grant(access_token='t')))\n")
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, cwd=REPO,
                   timeout=60)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

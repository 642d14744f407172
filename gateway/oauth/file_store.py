"""``oauth.token_store: file:PATH``: every grant and client registration in one sealed file.

The file is one AES-256-GCM sealed JSON document (:mod:`.sealing`): nothing in its bytes reads as a
token, a principal or an issuer. It is created ``0600``, and every write is atomic (a temporary file
in the same folder, fsync'd, renamed over the old one, the folder fsync'd), so a crash leaves the
old grants or the new ones, never half a file.

Writers never lose each other's updates, in one process or several (a gateway and ``mcp-gateway
oauth revoke``, or ``serve --workers N`` on one file): a write takes an exclusive ``flock`` on
``PATH.lock`` (bounded by ``lock_timeout_s``), reads the file as it is now, changes it, and
replaces it. Reads are served from memory and re-read the file when its identity (inode, size,
mtime) changed, so another process's grant is seen on the next call.

A file sealed under another key, or altered, is a :class:`~.sealing.StoreError` naming the path,
raised by :meth:`open` at start-up and by every call after: never an empty store in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.oauth.port import Grant, GrantKey

from .sealing import Corrupt, Sealer, StoreError, WrongKey

__all__ = ["EncryptedFileTokenStore", "grant_entry", "entry_grant"]

_CONTEXT = b"mcp-gateway oauth token file"
_Signature = tuple[int, int, int]
_Regs = dict[tuple[str, str], dict[str, Any]]


def grant_entry(key: GrantKey, grant: Grant) -> dict[str, Any]:
    return {"c": key.connector, "i": key.issuer, "p": key.principal, "g": grant.to_dict()}


def entry_grant(entry: dict[str, Any]) -> tuple[GrantKey, Grant]:
    return GrantKey(str(entry["c"]), str(entry["i"]), str(entry["p"])), Grant.from_dict(entry["g"])


class _Contents:
    __slots__ = ("grants", "registrations")

    def __init__(self, grants: dict[GrantKey, Grant] | None = None, registrations: _Regs | None = None) -> None:
        self.grants: dict[GrantKey, Grant] = grants or {}
        self.registrations: _Regs = registrations or {}

    def dumps(self) -> bytes:
        doc = {"v": 1, "grants": [grant_entry(k, g) for k, g in self.grants.items()],
               "registrations": [{"c": c, "i": i, "r": r} for (c, i), r in self.registrations.items()]}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes) -> _Contents:
        doc = json.loads(data)
        grants = dict(entry_grant(e) for e in doc.get("grants", ()))
        regs = {(str(e["c"]), str(e["i"])): dict(e["r"]) for e in doc.get("registrations", ())}
        return cls(grants, regs)


class EncryptedFileTokenStore:
    """A :class:`~connectors.oauth.port.TokenStore` in one sealed file."""

    def __init__(self, path: str | Path, sealer: Sealer, lock_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self._sealer = sealer
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._lock_timeout_s = lock_timeout_s
        self._write_lock = asyncio.Lock()  # one writer thread per store; flock orders processes
        self._signature: _Signature | None = None
        self._contents = _Contents()

    # -- the TokenStore protocol ------------------------------------------------------------------
    async def open(self) -> None:
        """Read the file now (a wrong key or a damaged file fails the start, not a later call)."""
        if not self.path.parent.is_dir():
            raise StoreError(f"the OAuth token store {self.path}: its folder does not exist")
        self._current()

    async def get(self, key: GrantKey) -> Grant | None:
        return self._current().grants.get(key)

    async def keys(self) -> list[GrantKey]:
        return list(self._current().grants)

    async def get_registration(self, connector: str, issuer: str) -> dict[str, Any] | None:
        found = self._current().registrations.get((connector, issuer))
        return dict(found) if found is not None else None

    async def put(self, key: GrantKey, grant: Grant) -> None:
        await self._mutate(lambda c: c.grants.__setitem__(key, grant))

    async def delete(self, key: GrantKey) -> bool:
        return bool(await self._mutate(lambda c: c.grants.pop(key, None) is not None))

    async def put_registration(self, connector: str, issuer: str, registration: dict[str, Any]) -> None:
        await self._mutate(lambda c: c.registrations.__setitem__((connector, issuer), dict(registration)))

    async def close(self) -> None:
        return None

    # -- reading ----------------------------------------------------------------------------------
    def _current(self) -> _Contents:
        """The file's contents, re-read only when the file was replaced since the last read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._signature, self._contents = None, _Contents()
            return self._contents
        except OSError as exc:
            raise StoreError(f"the OAuth token store {self.path} cannot be read: {exc.strerror}") from None
        if (st.st_ino, st.st_size, st.st_mtime_ns) != self._signature:
            self._signature, self._contents = self._read()
        return self._contents

    def _read(self) -> tuple[_Signature | None, _Contents]:
        try:
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                sealed = handle.read()
        except FileNotFoundError:
            return None, _Contents()
        except OSError as exc:
            raise StoreError(f"the OAuth token store {self.path} cannot be read: {exc.strerror}") from None
        try:
            contents = _Contents.loads(self._sealer.open(sealed, _CONTEXT))
        except WrongKey:
            raise StoreError(f"the OAuth token store {self.path} was sealed with another key: set "
                             "oauth.encryption_key (or MCP_GATEWAY_OAUTH_KEY) to the key it was written with, "
                             "or move the file away to start with no grants") from None
        except (Corrupt, ValueError, KeyError, TypeError):
            raise StoreError(f"the OAuth token store {self.path} cannot be opened: it is altered, truncated "
                             "or not a token store file") from None
        return (st.st_ino, st.st_size, st.st_mtime_ns), contents

    # -- writing ----------------------------------------------------------------------------------
    async def _mutate(self, change: Callable[[_Contents], Any]) -> Any:
        async with self._write_lock:
            return await asyncio.to_thread(self._mutate_locked, change)

    def _mutate_locked(self, change: Callable[[_Contents], Any]) -> Any:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self._flock(fd)
            _, contents = self._read()  # as the file is now: another process may have written
            result = change(contents)
            self._write(contents.dumps())
            # What this process wrote is what it reads next (no stat race with its own write).
            st = os.stat(self.path)
            self._signature, self._contents = (st.st_ino, st.st_size, st.st_mtime_ns), contents
            return result
        finally:
            os.close(fd)  # releases the flock

    def _flock(self, fd: int) -> None:
        deadline = time.monotonic() + self._lock_timeout_s
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise StoreError(f"the OAuth token store {self.path} cannot be locked: {exc.strerror}") from None
            if time.monotonic() >= deadline:
                raise StoreError(f"the OAuth token store {self.path} stayed locked by another process for "
                                 f"{self._lock_timeout_s:g} s")
            time.sleep(pause)  # a writer holds it for one small write: poll briefly, backing off
            pause = min(pause * 2, 0.05)

    def _write(self, plaintext: bytes) -> None:
        sealed = self._sealer.seal(plaintext, _CONTEXT)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(sealed)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StoreError(f"the OAuth token store {self.path} cannot be written: {exc.strerror}") from None
        with contextlib.suppress(OSError):  # the rename is durable once the folder is
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

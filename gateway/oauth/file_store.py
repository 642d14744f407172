"""``oauth.token_store: file:PATH``: every grant and client registration in one sealed file.

The file is one AES-256-GCM sealed JSON document (:mod:`.sealing`): nothing in its bytes reads as a
token, a principal or an issuer. It is created ``0600``, and every write is atomic (a temporary file
in the same folder, fsync'd, renamed over the old one, the folder fsync'd), so a crash leaves the
old grants or the new ones, never half a file.

Writers never lose each other's updates, in one process or several (a gateway and ``mcp-gateway
oauth revoke``, or ``serve --workers N`` on one file): a write takes an exclusive ``flock`` on
``PATH.lock`` (bounded by ``lock_timeout_s``), reads the file as it is now, changes it, and
replaces it (the file is read again under the lock unless its sealed nonce shows it is still the
write this process last saw). Reads are served from memory: a ``stat`` per call, and the file read
again (in a thread) when it was replaced, so another process's grant or revocation is seen on the
next call. Inside the sealed file each grant's JSON is kept as its own record, decoded when asked
for: re-reading parses keys only, writing re-encodes only the grant written
(``bench/oauth_store.py``).

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
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.oauth.port import Grant, GrantKey

from .sealing import Corrupt, Sealer, StoreError, WrongKey, nonce_of

__all__ = ["EncryptedFileTokenStore", "grant_entry", "entry_grant"]

_CONTEXT = b"mcp-gateway oauth token file"
_FORMAT = b"GWF1"
_Signature = tuple[int, int, int]
_GRANT, _REGISTRATION = b"g", b"r"


def grant_entry(key: GrantKey, grant: Grant) -> dict[str, Any]:
    return {"c": key.connector, "i": key.issuer, "p": key.principal, "g": grant.to_dict()}


def entry_grant(entry: dict[str, Any]) -> tuple[GrantKey, Grant]:
    return GrantKey(str(entry["c"]), str(entry["i"]), str(entry["p"])), Grant.from_dict(entry["g"])


class _Contents:
    """The file's records: each grant's and registration's JSON kept as bytes, decoded when asked
    for, so re-reading a file of thousands of grants (another process wrote it) parses their keys
    only, and writing one grant re-encodes only that one.

    Plaintext layout: ``GWF1``, then records: a tag (``g`` grant, ``r`` registration), the key's
    parts (3 or 2), each a 2-byte length and UTF-8, then a 4-byte length and the value's JSON."""

    __slots__ = ("ident", "grants", "registrations", "_decoded")

    def __init__(self, ident: bytes = b"") -> None:
        self.ident = ident  # the sealed file's random nonce: which write this is
        self.grants: dict[GrantKey, bytes] = {}
        self.registrations: dict[tuple[str, str], bytes] = {}
        self._decoded: dict[GrantKey, Grant] = {}

    def copy(self) -> _Contents:
        out = _Contents(self.ident)
        out.grants, out.registrations, out._decoded = dict(self.grants), dict(self.registrations), dict(self._decoded)
        return out

    def grant(self, key: GrantKey) -> Grant | None:
        found = self._decoded.get(key)
        if found is None and key in self.grants:
            found = self._decoded[key] = Grant.from_dict(json.loads(self.grants[key]))
        return found

    def set_grant(self, key: GrantKey, grant: Grant) -> None:
        self.grants[key] = json.dumps(grant.to_dict(), separators=(",", ":")).encode()
        self._decoded[key] = grant

    def pop_grant(self, key: GrantKey) -> bool:
        self._decoded.pop(key, None)
        return self.grants.pop(key, None) is not None

    def dumps(self) -> bytes:
        out = [_FORMAT]
        records: list[tuple[bytes, tuple[str, ...], bytes]] = [
            (_GRANT, (k.connector, k.issuer, k.principal), v) for k, v in self.grants.items()]
        records += [(_REGISTRATION, k, v) for k, v in self.registrations.items()]
        for tag, parts, value in records:
            out.append(tag)
            for part in parts:
                raw = part.encode()
                out += (struct.pack(">H", len(raw)), raw)
            out += (struct.pack(">I", len(value)), value)
        return b"".join(out)

    @classmethod
    def loads(cls, data: bytes, ident: bytes) -> _Contents:
        if not data.startswith(_FORMAT):
            raise ValueError("unknown format")
        out = cls(ident)
        view, pos = memoryview(data), len(_FORMAT)
        while pos < len(data):
            tag = data[pos:pos + 1]
            pos += 1
            parts = []
            for _ in range(3 if tag == _GRANT else 2):
                (n,) = struct.unpack_from(">H", data, pos)
                parts.append(bytes(view[pos + 2:pos + 2 + n]).decode())
                pos += 2 + n
            (n,) = struct.unpack_from(">I", data, pos)
            value = bytes(view[pos + 4:pos + 4 + n])
            if len(value) != n or tag not in (_GRANT, _REGISTRATION):
                raise ValueError("truncated record")
            pos += 4 + n
            if tag == _GRANT:
                out.grants[GrantKey(*parts)] = value
            else:
                out.registrations[(parts[0], parts[1])] = value
        return out


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
        await self._current()

    async def get(self, key: GrantKey) -> Grant | None:
        return (await self._current()).grant(key)

    async def keys(self) -> list[GrantKey]:
        return list((await self._current()).grants)

    async def get_registration(self, connector: str, issuer: str) -> dict[str, Any] | None:
        found = (await self._current()).registrations.get((connector, issuer))
        return dict(json.loads(found)) if found is not None else None

    async def put(self, key: GrantKey, grant: Grant) -> None:
        await self._mutate(lambda c: c.set_grant(key, grant))

    async def delete(self, key: GrantKey) -> bool:
        return bool(await self._mutate(lambda c: c.pop_grant(key)))

    async def put_registration(self, connector: str, issuer: str, registration: dict[str, Any]) -> None:
        value = json.dumps(dict(registration), separators=(",", ":")).encode()
        await self._mutate(lambda c: c.registrations.__setitem__((connector, issuer), value))

    async def close(self) -> None:
        return None

    # -- reading ----------------------------------------------------------------------------------
    async def _current(self) -> _Contents:
        """The file's contents: a ``stat`` per call, the file read again only when it was replaced
        (and parsed again only when its sealed nonce says it is another write), in a thread: a file
        of thousands of grants takes milliseconds to parse, which the event loop does not wait for.
        A read racing a write of this process may install the older contents with the older
        signature: the next call sees the file changed and reads it again."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._signature, self._contents = None, _Contents()
            return self._contents
        except OSError as exc:
            raise StoreError(f"the OAuth token store {self.path} cannot be read: {exc.strerror}") from None
        if (st.st_ino, st.st_size, st.st_mtime_ns) != self._signature:
            self._signature, self._contents = await asyncio.to_thread(self._read, self._contents)
        return self._contents

    def _read(self, known: _Contents | None = None) -> tuple[_Signature | None, _Contents]:
        """The file as it is now; ``known`` is returned as is when the file is still that write."""
        try:
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                sealed = handle.read()
        except FileNotFoundError:
            return None, _Contents()
        except OSError as exc:
            raise StoreError(f"the OAuth token store {self.path} cannot be read: {exc.strerror}") from None
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        ident = nonce_of(sealed)
        if known is not None and known.ident and ident == known.ident:
            return signature, known
        try:
            contents = _Contents.loads(self._sealer.open(sealed, _CONTEXT), ident)
        except WrongKey:
            raise StoreError(f"the OAuth token store {self.path} was sealed with another key: set "
                             "oauth.encryption_key (or MCP_GATEWAY_OAUTH_KEY) to the key it was written with, "
                             "or move the file away to start with no grants") from None
        except (Corrupt, ValueError, struct.error):
            raise StoreError(f"the OAuth token store {self.path} cannot be opened: it is altered, truncated "
                             "or not a token store file") from None
        return signature, contents

    # -- writing ----------------------------------------------------------------------------------
    async def _mutate(self, change: Callable[[_Contents], Any]) -> Any:
        async with self._write_lock:
            return await asyncio.to_thread(self._mutate_locked, change)

    def _mutate_locked(self, change: Callable[[_Contents], Any]) -> Any:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self._flock(fd)
            # As the file is now (another process may have written): what this process last read
            # or wrote when the sealed nonce is the same, else the file read again.
            _, current = self._read(self._contents)
            contents = current.copy()  # the cache changes only once the new file is in place
            result = change(contents)
            contents.ident = self._write(contents.dumps())
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

    def _write(self, plaintext: bytes) -> bytes:
        """Replace the file with ``plaintext`` sealed; its nonce (the new file's identity)."""
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
        return nonce_of(sealed)

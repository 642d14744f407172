"""API keys: ``Authorization: Bearer <key>`` matched against configured keys in constant time.

Keys are configured as a SHA-256 hex digest (``key_sha256``), as plain text (``key``, normally
``${ENV}``-interpolated from the environment) or in a secret file (``key_file``, e.g. a mounted
Kubernetes secret; surrounding whitespace is stripped). Only digests are kept in memory. A
presented key is hashed once and compared with *every* configured digest through
``hmac.compare_digest`` without stopping at the first match, so timing reveals neither which key
matched nor how many bytes did.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gateway.config import ApiKeyConfig
from gateway.context import Principal
from gateway.protocol.errors import ConfigError

__all__ = ["ApiKeyEntry", "ApiKeyStore", "sha256_hex", "secret_digests"]


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKeyEntry:
    digest: bytes  # raw 32-byte SHA-256 of the key
    principal: Principal


def _entry(i: int, cfg: ApiKeyConfig, base_dir: Path) -> ApiKeyEntry:
    where = f"auth.api_keys[{i}]"
    given = [k for k in ("key_sha256", "key", "key_file") if getattr(cfg, k)]
    if len(given) != 1:
        raise ConfigError("set exactly one of key_sha256, key, key_file", where)
    if cfg.key_sha256:
        hexd = cfg.key_sha256.strip().lower()
        try:
            digest = bytes.fromhex(hexd)
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise ConfigError("key_sha256 must be 64 hexadecimal characters", where + ".key_sha256")
    elif cfg.key:
        digest = hashlib.sha256(cfg.key.encode()).digest()
    else:
        path = Path(cfg.key_file or "")
        if not path.is_absolute():
            path = base_dir / path
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", where + ".key_file") from None
        if not secret:
            raise ConfigError(f"{path} is empty", where + ".key_file")
        digest = hashlib.sha256(secret.encode()).digest()
    return ApiKeyEntry(digest, Principal(cfg.name, frozenset(cfg.groups), kind="api_key"))


class ApiKeyStore:
    """The configured keys; :meth:`lookup` returns the principal of a presented key, or None."""

    __slots__ = ("_entries",)

    def __init__(self, configs: Iterable[ApiKeyConfig], base_dir: str | Path = ".") -> None:
        self._entries = tuple(_entry(i, c, Path(base_dir)) for i, c in enumerate(configs))
        owners: dict[bytes, str] = {}
        for i, entry in enumerate(self._entries):
            # One key for two principals: a request would get whichever matched last.
            if owners.setdefault(entry.digest, entry.principal.name) != entry.principal.name:
                raise ConfigError(f"the same key as api key {owners[entry.digest]!r}: a key must identify one "
                                  "principal", f"auth.api_keys[{i}]")

    @property
    def digests(self) -> list[bytes]:
        return [e.digest for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, presented: str) -> Principal | None:
        digest = hashlib.sha256(presented.encode()).digest()
        found: Principal | None = None
        for entry in self._entries:
            # No early exit: every entry is compared whatever the outcome.
            if hmac.compare_digest(digest, entry.digest):
                found = entry.principal
        return found


def secret_digests(configs: Iterable[ApiKeyConfig], base_dir: str | Path = ".") -> list[bytes]:
    """Digests of the configured keys, so the audit log redacts their values wherever they appear;
    empty when the keys do not load (the authenticator reports that at start)."""
    try:
        return ApiKeyStore(configs, base_dir).digests
    except ConfigError:
        return []

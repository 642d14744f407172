"""Opaque, signed pagination cursors.

A cursor records the last public key (name or URI) a page ended on, for one listing. Listings are
keyset-paginated over sorted keys, so a cursor stays meaningful when items are added or removed:
the next page starts after that key, wherever it now sits. The HMAC stops clients from forging or
editing cursors; a tampered, truncated or foreign cursor raises :class:`InvalidParams` (-32602).
Replicas that share ``gateway.cursor_secret`` accept each other's cursors.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets

from .errors import InvalidParams

__all__ = ["CursorCodec"]

_MAC_LEN = 12


class CursorCodec:
    """Encodes ``(listing, last_key)`` into an opaque string and back."""

    __slots__ = ("_key",)

    def __init__(self, secret: str | bytes | None = None) -> None:
        if secret is None:
            self._key = secrets.token_bytes(32)
        else:
            self._key = secret.encode() if isinstance(secret, str) else secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_MAC_LEN]

    def encode(self, listing: str, last_key: str) -> str:
        payload = json.dumps([listing, last_key], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(self._mac(payload) + payload).decode().rstrip("=")

    def decode(self, listing: str, cursor: object) -> str:
        """The last key of the previous page; raises InvalidParams for anything not ours."""
        if not isinstance(cursor, str) or not cursor or len(cursor) > 4096:
            raise InvalidParams("Invalid cursor")
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (ValueError, TypeError):
            raise InvalidParams("Invalid cursor") from None
        mac, payload = raw[:_MAC_LEN], raw[_MAC_LEN:]
        if len(mac) != _MAC_LEN or not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidParams("Invalid cursor")
        try:
            kind, key = json.loads(payload)
        except (ValueError, TypeError):
            raise InvalidParams("Invalid cursor") from None
        if kind != listing or not isinstance(key, str):
            raise InvalidParams(f"Invalid cursor: it belongs to another listing than {listing}")
        return key

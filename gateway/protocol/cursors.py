"""Opaque, signed pagination cursors.

A cursor records the last public key (name or URI) a page ended on, for one listing. Listings are
keyset-paginated over sorted keys, so a cursor stays meaningful when items are added or removed:
the next page starts after that key, wherever it now sits. The HMAC stops clients from forging or
editing cursors; a tampered, truncated or foreign cursor raises :class:`InvalidParams` (-32602).
Replicas that share ``gateway.cursor_secret`` accept each other's cursors.
"""

from __future__ import annotations

import json

from .errors import InvalidParams
from .signing import SignatureError, Signer

__all__ = ["CursorCodec"]

_MAC_LEN = 12
_MAX_CURSOR = 4096


class CursorCodec:
    """Encodes ``(listing, last_key)`` into an opaque string and back."""

    __slots__ = ("_signer",)

    def __init__(self, secret: str | bytes | None = None) -> None:
        # The raw secret (no context) and a 12-byte MAC: the format cursors always had, so
        # cursors issued before an upgrade stay valid across a rolling deploy.
        self._signer = Signer(secret, mac_len=_MAC_LEN)

    def encode(self, listing: str, last_key: str) -> str:
        return self._signer.sign(json.dumps([listing, last_key], separators=(",", ":")).encode())

    def decode(self, listing: str, cursor: object) -> str:
        """The last key of the previous page; raises InvalidParams for anything not ours."""
        if not isinstance(cursor, str):
            raise InvalidParams("Invalid cursor")
        try:
            payload = self._signer.unsign(cursor, _MAX_CURSOR)
            kind, key = json.loads(payload)
        except (SignatureError, ValueError, TypeError):
            raise InvalidParams("Invalid cursor") from None
        if kind != listing or not isinstance(key, str):
            raise InvalidParams(f"Invalid cursor: it belongs to another listing than {listing}")
        return key

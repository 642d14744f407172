"""HMAC-SHA256 signed, URL-safe tokens: the one signing scheme behind cursors and request state.

A token is ``base64url(mac || payload)`` without padding, ``mac`` being the first ``mac_len`` bytes
of HMAC-SHA256 over the payload. :meth:`Signer.unsign` accepts only tokens this signer made:
anything else raises :class:`SignatureError`, telling a malformed token (not base64url, too long or
too short) from a forged one (a well-formed token whose MAC does not verify). Integrity only: the
payload is readable by whoever holds the token, so callers put nothing secret in it.

A ``context`` derives a separate key from the same secret, so tokens of one use are never accepted
by another even when an operator configures one secret for both.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

__all__ = ["Signer", "SignatureError"]

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class SignatureError(ValueError):
    """A token this signer did not make; ``malformed`` tells a garbled token from a forged one."""

    def __init__(self, reason: str, *, malformed: bool) -> None:
        super().__init__(reason)
        self.malformed = malformed


class Signer:
    """Signs and verifies payloads with one key; stateless after construction."""

    __slots__ = ("_key", "_mac_len")

    def __init__(self, secret: str | bytes | None, *, mac_len: int = 16, context: bytes = b"") -> None:
        if not 8 <= mac_len <= 32:
            raise ValueError("mac_len must be between 8 and 32 bytes")
        if secret is None:
            key = secrets.token_bytes(32)  # per process: replicas must be given a shared secret
        else:
            key = secret.encode() if isinstance(secret, str) else bytes(secret)
        self._key = hmac.new(key, context, hashlib.sha256).digest() if context else key
        self._mac_len = mac_len

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[: self._mac_len]

    def sign(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(self._mac(payload) + payload).decode().rstrip("=")

    def unsign(self, token: str, max_len: int) -> bytes:
        """The payload of ``token``; :class:`SignatureError` if it is not one of ours."""
        if not token or len(token) > max_len or not _B64URL.fullmatch(token):
            raise SignatureError("malformed", malformed=True)
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (ValueError, binascii.Error):
            raise SignatureError("malformed", malformed=True) from None
        mac, payload = raw[: self._mac_len], raw[self._mac_len:]
        if len(mac) != self._mac_len:
            raise SignatureError("malformed", malformed=True)
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise SignatureError("forged", malformed=False)
        return payload

"""AES-256-GCM sealing of what the token stores keep (pure: bytes in, bytes out), and the stores' error.

A sealed value is ``b"GWT1" + key id (8 bytes) + nonce (12) + ciphertext and tag``. The key id is
an HMAC of a fixed label under the key, so opening a value sealed under another key is told apart
from a tampered or truncated one (``WrongKey`` vs ``Corrupt``) without revealing anything of the
key. The associated data binds a value to where it is kept (``context``: the file, or the Redis
field of its grant), so a value copied to another place (one principal's grant under another's
name) does not open.

:meth:`Sealer.name` turns a grant's key (connector, issuer, principal) into an opaque, stable
field name (an HMAC under a key derived from the store key), so Redis key names say nothing of
who holds a grant either.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.protocol.errors import BackendUnavailable

__all__ = ["Sealer", "SealError", "WrongKey", "Corrupt", "MAGIC", "StoreError", "nonce_of"]

MAGIC = b"GWT1"
_ID_LEN = 8
_NONCE_LEN = 12
_HEAD = len(MAGIC) + _ID_LEN + _NONCE_LEN


class StoreError(BackendUnavailable):
    """The token store cannot be used (wrong key, corrupted, unreachable): the message says which
    store and what to do, never a secret. Nothing is ever read as empty in its place. A call that
    needed the store fails as unavailable (``-32004``), like one whose backend is down."""


class SealError(Exception):
    """A sealed value cannot be opened."""


class WrongKey(SealError):
    """The value was sealed under another key."""


class Corrupt(SealError):
    """The value is not a sealed value, or was altered or truncated."""


def nonce_of(sealed: bytes) -> bytes:
    """The random nonce of a sealed value: tells two sealings apart without opening them."""
    return sealed[len(MAGIC) + _ID_LEN:_HEAD]


class Sealer:
    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the token store key must be 32 bytes")
        self._aead = AESGCM(key)
        self.key_id = hmac.new(key, b"mcp-gateway oauth token store key id", hashlib.sha256).digest()[:_ID_LEN]
        self._names = hmac.new(key, b"mcp-gateway oauth token store names", hashlib.sha256).digest()

    def seal(self, plaintext: bytes, context: bytes) -> bytes:
        nonce = os.urandom(_NONCE_LEN)  # random 96-bit nonces: fine far beyond a token store's writes
        head = MAGIC + self.key_id
        return head + nonce + self._aead.encrypt(nonce, plaintext, head + context)

    def open(self, sealed: bytes, context: bytes) -> bytes:
        if len(sealed) < _HEAD + 16 or not sealed.startswith(MAGIC):
            raise Corrupt("not a sealed token store value")
        key_id = sealed[len(MAGIC):len(MAGIC) + _ID_LEN]
        if not hmac.compare_digest(key_id, self.key_id):
            raise WrongKey("sealed under another key")
        nonce = sealed[len(MAGIC) + _ID_LEN:_HEAD]
        try:
            return self._aead.decrypt(nonce, sealed[_HEAD:], MAGIC + key_id + context)
        except InvalidTag:
            raise Corrupt("altered, truncated or moved from another place") from None

    def name(self, *parts: str) -> str:
        """An opaque, stable name for ``parts`` (hex)."""
        return hmac.new(self._names, "\x00".join(parts).encode(), hashlib.sha256).hexdigest()[:40]

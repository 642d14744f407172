"""Sealed ``requestState`` for multi round-trip requests (MRTR, specification 2026-07-28).

A server that answers ``input_required`` hands the client an opaque ``requestState`` to echo on the
retry. The client is untrusted, so (mrtr.mdx, "Server Requirements") the state is
integrity-protected and binds, inside the protected payload:

* the authenticated principal (kept as a digest: the token is readable by its holder),
* an expiry (``ttl_s`` after sealing),
* the originating request: its method and :func:`request_digest` of its salient params.

:meth:`RequestStateCodec.open` verifies all of them and raises :class:`InvalidParams` (-32602)
saying which check failed (malformed, tampered, expired, another principal, another method, other
params) without echoing the token, the secret or the principal. Sealing uses the signing scheme of
the pagination cursors (:mod:`gateway.protocol.signing`, HMAC-SHA256) under a key derived for this
use alone. A ``None`` secret is random per process: replicas must share a configured one.

This bounds replay (time, caller, request) but does not make a state single-use; a use that must
be redeemed at most once needs server-side bookkeeping.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from .errors import InvalidParams
from .signing import SignatureError, Signer

__all__ = ["RequestStateCodec", "request_digest", "MAX_REQUEST_STATE"]

MAX_REQUEST_STATE = 256 * 1024  # characters of one sealed token
_CONTEXT = b"mcp-gateway/request-state/v1"
_FORMAT = 1
_IGNORED = frozenset({"_meta", "inputResponses", "requestState"})
_SALIENT: Mapping[str, tuple[str, ...]] = {
    "tools/call": ("name", "arguments"),
    "prompts/get": ("name", "arguments"),
    "resources/read": ("uri",),
}
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def request_digest(method: str, params: Mapping[str, Any]) -> str:
    """A stable digest of what identifies a request: its method and salient params (``tools/call``
    and ``prompts/get``: ``name`` and ``arguments``, a missing ``arguments`` counting as ``{}``;
    ``resources/read``: ``uri``; any other method: every param). ``_meta``, ``inputResponses`` and
    ``requestState`` never count, so a retry digests like the request it retries. Key order in
    objects does not matter."""
    keys = _SALIENT.get(method)
    if keys is None:
        salient = {k: v for k, v in params.items() if k not in _IGNORED}
    else:
        salient = {k: params.get(k) for k in keys}
        if "arguments" in salient and salient["arguments"] is None:
            salient["arguments"] = {}
    canonical = _CANONICAL.encode([method, salient]).encode()
    return hashlib.sha256(canonical).hexdigest()[:32]


def _principal_tag(principal: str) -> str:
    return hashlib.sha256(b"principal\0" + principal.encode()).hexdigest()[:32]


def _refuse(why: str) -> InvalidParams:
    return InvalidParams(f"Invalid requestState: {why}")


class RequestStateCodec:
    """Seals a JSON payload into an opaque ``requestState`` and opens it again, bound to a caller
    and a request; stateless, so one instance serves every request concurrently."""

    __slots__ = ("_signer", "_ttl_s")

    def __init__(self, secret: bytes | str | None, ttl_s: float = 600) -> None:
        if not ttl_s > 0:
            raise ValueError("ttl_s must be positive")
        self._signer = Signer(secret, mac_len=32, context=_CONTEXT)
        self._ttl_s = float(ttl_s)

    def seal(self, payload: Mapping[str, Any], *, principal: str, method: str, digest: str,
             now: float | None = None) -> str:
        """An opaque token carrying ``payload`` (JSON values only); ValueError if it would exceed
        :data:`MAX_REQUEST_STATE` characters (the server would refuse it on the retry)."""
        issued = time.time() if now is None else now
        body = {"v": _FORMAT, "p": _principal_tag(principal), "m": method, "d": digest,
                "x": round(issued + self._ttl_s, 3), "s": dict(payload)}
        token = self._signer.sign(_CANONICAL.encode(body).encode())
        if len(token) > MAX_REQUEST_STATE:
            raise ValueError(f"requestState payload too large ({len(token)} characters sealed)")
        return token

    def open(self, token: object, *, principal: str, method: str, digest: str,
             now: float | None = None) -> dict[str, Any]:
        """The payload sealed in ``token`` if it was sealed by this secret for this principal,
        method and digest and has not expired; :class:`InvalidParams` otherwise."""
        if not isinstance(token, str):
            raise _refuse("malformed (not a string)")
        try:
            raw = self._signer.unsign(token, MAX_REQUEST_STATE)
        except SignatureError as exc:
            if exc.malformed:
                raise _refuse("malformed") from None
            raise _refuse("integrity check failed (tampered with, or sealed with another secret)") from None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if (not isinstance(body, dict) or body.get("v") != _FORMAT or not isinstance(body.get("s"), dict)
                or not isinstance(body.get("x"), (int, float))):
            raise _refuse("malformed (unknown format)")
        if body.get("p") != _principal_tag(principal):
            raise _refuse("it was issued to another principal")
        if body.get("m") != method:
            raise _refuse(f"it was issued for {body.get('m')}, not {method}")
        if body.get("d") != digest:
            raise _refuse("it was issued for a request with other parameters")
        if (time.time() if now is None else now) >= body["x"]:
            raise _refuse("expired; send the request again without requestState")
        state: dict[str, Any] = body["s"]
        return state

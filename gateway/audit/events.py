"""The audit event: its fields, how a finished request becomes one, and redaction.

An event is a flat wire dict (one row of the store, one JSON line of the mirror). The request path
only *captures* (:func:`capture`: a few attribute reads and a shallow copy of the arguments);
redaction and serialisation happen later in the writer task (:func:`finalize`), off the request
path.

Redaction replaces values with ``"[REDACTED]"``:

* under keys containing (case-insensitively) any configured ``audit.redact`` word;
* always, whatever the config says, under keys that name secrets (:data:`ALWAYS_REDACT`), values
  that look like credentials (``Bearer ...``, JWT-shaped strings) and values equal to a configured
  API key (compared by SHA-256 digest).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.context import CallContext

__all__ = ["FIELDS", "ALWAYS_REDACT", "REDACTED", "Redactor", "capture", "finalize", "trace_id_of",
           "INSTANCE"]

# Column order of the store and key order of the JSON lines.
FIELDS = ("event_id", "time", "instance", "request_id", "session_id", "principal", "transport",
          "client_name", "client_version", "method", "target", "connector", "backend_target",
          "arguments", "outcome", "error_code", "error_message", "latency_ms", "backend_status",
          "trace_id")

ALWAYS_REDACT = ("password", "passwd", "secret", "token", "authorization", "api_key", "apikey",
                 "private_key", "credential", "cookie")
REDACTED = "[REDACTED]"
INSTANCE = f"{socket.gethostname()}:{os.getpid()}"

_JWT = re.compile(r"^[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*$")
_BEARER = re.compile(r"^\s*(bearer|basic)\s+\S+", re.I)
_MAX_DEPTH = 20


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    return parts[1] if len(parts) >= 4 and len(parts[1]) == 32 else None


class Redactor:
    """Applies configured and built-in redaction to argument trees (copying, never mutating)."""

    def __init__(self, keys: Iterable[str] = (), secret_digests: Iterable[bytes] = ()) -> None:
        words = {k.lower() for k in keys if k} | set(ALWAYS_REDACT)
        self._key_re = re.compile("|".join(re.escape(w) for w in sorted(words)))
        self._digests = frozenset(secret_digests)
        self._key_cache: dict[str, bool] = {}

    def _secret_key(self, key: str) -> bool:
        hit = self._key_cache.get(key)
        if hit is None:
            hit = self._key_re.search(key.lower()) is not None
            if len(self._key_cache) < 10_000:
                self._key_cache[key] = hit
        return hit

    def _secret_value(self, value: str) -> bool:
        if _BEARER.match(value) or _JWT.match(value):
            return True
        return bool(self._digests) and len(value) >= 8 and \
            hashlib.sha256(value.encode()).digest() in self._digests

    def redact(self, value: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            return REDACTED
        if isinstance(value, Mapping):
            return {str(k): REDACTED if self._secret_key(str(k)) else self.redact(v, depth + 1)
                    for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact(v, depth + 1) for v in value]
        if isinstance(value, str):
            return REDACTED if self._secret_value(value) else value
        if value is None or isinstance(value, bool | int | float):
            return value
        return str(value)


def capture(ctx: CallContext, outcome: str, error_code: int | None, error_message: str | None,
            latency_ms: float) -> dict[str, Any]:
    """Snapshot a finished request (cheap: runs on the request path)."""
    session = ctx.session
    info = session.client_info or {}
    record = ctx.record
    status = record.backend_status
    return {
        "event_id": uuid.uuid4().hex,
        "time": datetime.now(UTC),
        "instance": INSTANCE,
        "request_id": None if ctx.request_id is None else str(ctx.request_id),
        "session_id": session.id,
        "principal": ctx.principal.name,
        "transport": session.transport,
        "client_name": info.get("name"),
        "client_version": info.get("version"),
        "method": ctx.method,
        "target": ctx.target or None,
        "connector": record.connector,
        "backend_target": record.backend_target,
        "arguments": dict(ctx.arguments) if ctx.arguments else None,
        "outcome": outcome,
        "error_code": error_code,
        "error_message": error_message,
        "latency_ms": round(latency_ms, 3),
        "backend_status": None if status is None else str(status),
        # The telemetry filter records the trace it opened (a new one when the client sent none).
        "trace_id": record.trace_id or trace_id_of(ctx.traceparent),
    }


def finalize(event: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """Redact the arguments and the error message in place (writer task); returns the event."""
    args = event.get("arguments")
    if args is not None:
        event["arguments"] = redactor.redact(args)
    return event


def to_jsonable(event: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(event)
    t = out.get("time")
    if isinstance(t, datetime):
        out["time"] = t.isoformat()
    return out


def from_jsonable(data: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: data.get(k) for k in FIELDS}
    t = out.get("time")
    if isinstance(t, str):
        out["time"] = datetime.fromisoformat(t)
    return out


__all__ += ["to_jsonable", "from_jsonable"]

"""The audit event: its fields, how a finished request becomes one, and redaction.

:func:`finalize` also sets the keyed ``arguments_digest`` (of the arguments before redaction) and
makes the event storable (``escaped``): :mod:`gateway.audit.escape`.

An event is a flat wire dict (one row of the store, one JSON line of the mirror). The request path
only *captures* (:func:`capture`: a few attribute reads and a shallow copy of the arguments);
redaction and serialisation happen later in the writer task (:func:`finalize`), off the request
path.

Redaction replaces values with ``"[REDACTED]"``:

* under keys containing any configured ``audit.redact`` word, and always, whatever the config
  says, any word of :data:`ALWAYS_REDACT`. Names are compared case- and separator-insensitively
  (lower case, letters and digits only): ``api_key`` matches ``X-API-Key``, ``x_api_key``,
  ``apiKey`` and ``API Key``. The same goes for the value of a ``{"name": <secret name>, "value":
  ...}`` entry (headers as lists of objects) and the second of a ``[<secret name>, value]`` pair;
* always, values that look like credentials (``Bearer ...``, JWT-shaped strings) and values equal
  to a configured API key (compared by SHA-256 digest);
* inside free text (every string of the arguments, the error message, the target): the value of
  ``name: value`` / ``name=value`` pairs whose name is a secret name (``X-API-Key: abc``,
  ``?api_key=abc``, ``"password": "x"``), the credential after ``Bearer``/``Basic``, and JWTs.
  A value is one token or one quoted string and nothing past it: a quoted value begins with no
  blank and its closing quote ends a token; a name inside a quoted string (``"password=..."``)
  has its value inside that string; a bare token stops at a quote, ``*/`` or ``--``. So text that
  only mentions a secret's name (``AS "password="``, ``/* password: */``) keeps every word, and
  SQL in a row keeps its structure (issue 26);
* everywhere in the event, the caller's own credential: the token of its ``Authorization`` header
  (for ``Basic``, also the decoded ``user:password`` and the password), wherever it is quoted. A
  credential under 8 characters is not searched for in text (it would match ordinary words).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import socket
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.context import CallContext

from .escape import arguments_digest, sanitize
from .store import COLUMN_LIMITS

__all__ = ["FIELDS", "ALWAYS_REDACT", "REDACTED", "Redactor", "capture", "finalize", "trace_id_of",
           "INSTANCE", "caller_secrets"]

# Column order of the store and key order of the JSON lines.
FIELDS = ("event_id", "time", "instance", "request_id", "session_id", "principal", "transport",
          "client_name", "client_version", "method", "target", "connector", "backend_target",
          "arguments", "outcome", "error_code", "error_message", "latency_ms", "backend_status",
          "trace_id", "endpoint", "escaped", "arguments_digest")

ALWAYS_REDACT = ("password", "passwd", "passphrase", "secret", "token", "authorization", "api_key",
                 "access_key", "private_key", "credential", "cookie")
REDACTED = "[REDACTED]"
INSTANCE = f"{socket.gethostname()}:{os.getpid()}"

_JWT = re.compile(r"^[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*$")
_BEARER = re.compile(r"^\s*(bearer|basic)\s+\S+", re.I)
_MAX_DEPTH = 20
_MIN_SECRET = 8  # shorter caller credentials are not searched for in text
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
# Free text: a credential after an auth scheme, a JWT, or a "name: " / "name=" whose value follows.
_IN_TEXT = re.compile(
    r"(?P<scheme>\b(?:bearer|basic)\s+)(?P<cred>[A-Za-z0-9._~+/=-]{8,})"
    r"|(?P<jwt>\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)"
    r"|(?P<name>\b[A-Za-z][A-Za-z0-9_.-]{0,63})[\"']?[ \t]*[:=][ \t]*", re.I)
# The value after a secret name: an optional scheme, then a quoted string or a bare token. A
# quoted value starts with no blank and its closing quote ends a token (else the "opening" quote
# closed a string around the name: `AS "password=", (SELECT ...) AS "x"`); a bare token never
# runs into a comment's end or a quote.
_TOKEN = re.compile(r"(?:(?:bearer|basic)\s+)?(?:(?!\*/|--)[^\s\"',;&)}\]])+", re.I)
_VALUE = re.compile(r"(?:(?:bearer|basic)\s+)?(?:\"(?=[^\s\"])[^\"]*\"(?=[\s,;&)}\]]|$)"
                    r"|'(?=[^\s'])[^']*'(?=[\s,;&)}\]]|$)|(?:(?!\*/|--)[^\s\"',;&)}\]])+)", re.I)
# Event fields that may quote what the caller sent (free text scanned like argument strings).
_TEXT_FIELDS = ("error_message", "target", "backend_target")
_CALLER = "_caller_authorization"  # private key of a captured event; finalize removes it


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    return parts[1] if len(parts) >= 4 and len(parts[1]) == 32 else None


def _norm(name: str) -> str:
    """A name as redaction compares it: lower case, letters and digits only."""
    return _NOT_ALNUM.sub("", name.lower())


def caller_secrets(authorization: str | None) -> tuple[str, ...]:
    """What of an ``Authorization`` header value must never appear in an event: the token (for
    ``Basic``, also the decoded ``user:password`` and the password), longest first."""
    if not authorization:
        return ()
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip() or scheme  # no scheme: the whole value is the credential
    found = {token}
    if scheme.lower() == "basic" and token is not scheme:
        try:
            decoded = base64.b64decode(token, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        if decoded:
            found |= {decoded, decoded.partition(":")[2]}
    return tuple(sorted((s for s in found if len(s) >= _MIN_SECRET), key=len, reverse=True))


def _looks_like_credential(word: str) -> bool:
    """After ``Bearer``/``Basic`` in text: a token, not an English word (``Basic authentication``)."""
    return len(word) >= 16 or not word.isalpha()


class Redactor:
    """Applies configured and built-in redaction to argument trees and free text (copying, never
    mutating)."""

    def __init__(self, keys: Iterable[str] = (), secret_digests: Iterable[bytes] = ()) -> None:
        words = {_norm(k) for k in keys} | {_norm(k) for k in ALWAYS_REDACT}
        words.discard("")
        self._key_re = re.compile("|".join(re.escape(w) for w in sorted(words)))
        self._digests = frozenset(secret_digests)
        self._key_cache: dict[str, bool] = {}

    def secret_name(self, key: str) -> bool:
        """Whether values under this name are redacted (case- and separator-insensitive)."""
        hit = self._key_cache.get(key)
        if hit is None:
            hit = self._key_re.search(_norm(key)) is not None
            if len(self._key_cache) < 10_000:
                self._key_cache[key] = hit
        return hit

    def _secret_value(self, value: str) -> bool:
        if _BEARER.match(value) or _JWT.match(value):
            return True
        return bool(self._digests) and len(value) >= 8 and \
            hashlib.sha256(value.encode()).digest() in self._digests

    def redact(self, value: Any, depth: int = 0, scrub: tuple[str, ...] = ()) -> Any:
        """A copy of ``value`` with secrets replaced; ``scrub``: strings removed wherever they
        occur (the caller's own credential, :func:`caller_secrets`)."""
        if depth > _MAX_DEPTH:
            return REDACTED
        if isinstance(value, Mapping):
            out = {str(k): REDACTED if self.secret_name(str(k)) else self.redact(v, depth + 1, scrub)
                   for k, v in value.items()}
            label = value.get("name", value.get("key"))
            if "value" in out and isinstance(label, str) and self.secret_name(label):
                out["value"] = REDACTED  # {"name": "X-API-Key", "value": "..."}
            return out
        if isinstance(value, list | tuple):
            items = [self.redact(v, depth + 1, scrub) for v in value]
            if len(items) == 2 and isinstance(value[0], str) and self.secret_name(value[0]):
                items[1] = REDACTED  # ["X-API-Key", "..."]
            return items
        if isinstance(value, str):
            return REDACTED if self._secret_value(value) else self.text(value, scrub)
        if value is None or isinstance(value, bool | int | float):
            return value
        return self.text(str(value), scrub)

    def text(self, value: str, scrub: tuple[str, ...] = ()) -> str:
        """Free text with the caller's credential, credentials after an auth scheme, JWTs and the
        values of secret-named pairs replaced."""
        for secret in scrub:
            if secret in value:
                value = value.replace(secret, REDACTED)
        out: list[str] = []
        pos = 0
        for m in _IN_TEXT.finditer(value):
            if m.start() < pos:  # inside a value already replaced
                continue
            if m.group("cred") is not None:
                if _looks_like_credential(m.group("cred")):
                    out.append(value[pos:m.start("cred")])
                    out.append(REDACTED)
                    pos = m.end()
            elif m.group("jwt") is not None:
                out.append(value[pos:m.start()])
                out.append(REDACTED)
                pos = m.end()
            elif self.secret_name(m.group("name")) and not value.startswith(REDACTED, m.end()):
                found = _pair_value(value, m)
                if found is not None:
                    word = found.group()
                    quoted = len(word) >= 2 and word[0] in "\"'" and word[-1] == word[0]
                    out.append(value[pos:found.start()])
                    out.append(f"{word[0]}{REDACTED}{word[0]}" if quoted else REDACTED)
                    pos = found.end()
        if not out:
            return value
        out.append(value[pos:])
        return "".join(out)


def _pair_value(text: str, m: re.Match[str]) -> re.Match[str] | None:
    """The value of the secret-named pair ``m`` found in ``text``, or None when there is none.

    A name that opens a quoted string (``"password=..."``, ``'token: ...'``) has its value inside
    that string: a bare token, never a quoted string (whose "opening" quote would be the closing
    one of the name's string). An empty value redacts nothing.
    """
    start = m.start("name")
    opened = start > 0 and text[start - 1] in "\"'" and text[m.end("name")] != text[start - 1]
    found = (_TOKEN if opened else _VALUE).match(text, m.end())
    return found if found is not None and found.end() > found.start() else None


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
        "endpoint": ctx.endpoint or None,  # the endpoint (virtual server) the request came to
        "escaped": None,  # set by finalize: true when its strings had to be escaped
        "arguments_digest": None,  # set by finalize when a digest key is configured
        # Not a field: what finalize must scrub from the event, then removes (never stored).
        _CALLER: ctx.caller_authorization,
    }


def finalize(event: dict[str, Any], redactor: Redactor, digest_key: bytes | None = None) -> dict[str, Any]:
    """Make a captured event what is stored (writer task), in place; returns it. Idempotent.

    With ``digest_key``, ``arguments_digest`` is set from the arguments as the caller sent them
    (:func:`~gateway.audit.escape.arguments_digest`); then the arguments and the free-text fields
    are redacted, the caller's own credential scrubbed everywhere, and the event made storable
    (:func:`~gateway.audit.escape.sanitize`: escaped when a string is unstorable, marked so;
    bounded columns cut to fit)."""
    scrub = caller_secrets(event.pop(_CALLER, None))
    args = event.get("arguments")
    if digest_key is not None and args is not None and not event.get("arguments_digest"):
        event["arguments_digest"] = arguments_digest(digest_key, args)
    if args is not None:
        event["arguments"] = redactor.redact(args, scrub=scrub)
    for name in _TEXT_FIELDS:
        text = event.get(name)
        if isinstance(text, str) and text:
            event[name] = redactor.text(text, scrub)
    if scrub:  # anywhere else it could be quoted (client name and version, request id)
        for name, text in event.items():
            if isinstance(text, str) and any(secret in text for secret in scrub):
                event[name] = redactor.text(text, scrub)
    return sanitize(event, COLUMN_LIMITS)


def to_jsonable(event: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in event.items() if k != _CALLER}
    t = out.get("time")
    if isinstance(t, datetime):
        out["time"] = t.isoformat()
    return out


def from_jsonable(data: Mapping[str, Any]) -> dict[str, Any]:
    """An event read back from a JSON line (the spill file), made storable again: a line written
    before events were sanitised may hold a NUL (issue 26)."""
    out = sanitize({k: data.get(k) for k in FIELDS}, COLUMN_LIMITS)
    t = out.get("time")
    if isinstance(t, str):
        out["time"] = datetime.fromisoformat(t)
    return out


__all__ += ["to_jsonable", "from_jsonable"]

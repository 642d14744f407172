"""What makes an audit event storable whatever the caller sent: reversible escaping, column limits,
and the keyed digest of the arguments.

**Escaping.** A caller controls most strings of an event (arguments and their keys, the target,
error text quoting them, client info, a JWT's subject, a ``traceparent``), and valid JSON can
carry characters no store takes: a lone surrogate (``"\\ud800"``; also what invalid UTF-8 in an
HTTP header decodes to) cannot be encoded as UTF-8 at all, so neither the JSONL mirror nor the
spill file nor a driver can write it, and PostgreSQL refuses NUL in ``text`` and ``\\u0000`` in
``jsonb``. An event holding any of :data:`UNSTORABLE` anywhere is *escaped*: in every string of
the event (dict keys included) a backslash becomes ``\\\\`` and each such character ``\\uXXXX``,
and the event's ``escaped`` field is true. :func:`unescape_event` gives back the exact strings.
Events without such characters are left as they are (``escaped`` null), so ordinary rows read
as before. The strong form (:func:`escape_event` with ``strong=True``) escapes everything but
printable ASCII; the writer uses it for an event a store still refused (defence in depth).

**Column limits.** The bounded columns (``principal`` 200 characters, ``client_version`` 100, ...)
and the indexed ``target`` are cut to fit, ending in ``…`` (a store refuses the whole batch
otherwise: PostgreSQL enforces ``varchar(n)`` and a btree entry's size). A cut is not reversible;
the mirror and the store hold the same cut value.

**Digest.** ``arguments_digest`` is HMAC-SHA256, under ``audit.digest_key`` (default
``gateway.cursor_secret``), of the unredacted arguments in canonical JSON
(:func:`canonical_arguments`): with the key, anyone holding the statement a call is said to have
run can prove or refute it, while the row itself shows only the redacted text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["UNSTORABLE", "needs_escape", "escape_event", "unescape_event", "unescape_text",
           "sanitize", "canonical_arguments", "arguments_digest", "ESCAPED_FIELD", "TARGET_LIMIT"]

ESCAPED_FIELD = "escaped"
TARGET_LIMIT = 1000  # characters of the indexed target column (a btree entry holds ~2,700 bytes)
# NUL and UTF-16 surrogates: no UTF-8 encoder, PostgreSQL text or jsonb takes them.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_ESCAPE = re.compile("[\\\\\x00\ud800-\udfff]")
_ESCAPE_STRONG = re.compile(r"[^\x20-\x5b\x5d-\x7e]")  # all but printable ASCII (and the backslash)
_UNESCAPE = re.compile(r"\\(?:\\|u([0-9a-f]{4})|U([0-9a-f]{8}))")
_TOKEN = re.compile(r"\\\\|\\u[0-9a-f]{4}|\\U[0-9a-f]{8}|.", re.S)  # one character of an escaped string
_MAX_DEPTH = 64


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    if c == "\\":
        return "\\\\"
    n = ord(c)
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def _unescape_char(m: re.Match[str]) -> str:
    code = m.group(1) or m.group(2)
    return "\\" if code is None else chr(int(code, 16))


def unescape_text(text: str) -> str:
    """The original of a string of an escaped event."""
    return _UNESCAPE.sub(_unescape_char, text)


def _has_unstorable(value: Any, depth: int = 0) -> bool:
    if isinstance(value, str):
        return UNSTORABLE.search(value) is not None
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, Mapping):
        return any(_has_unstorable(k, depth + 1) or _has_unstorable(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_unstorable(v, depth + 1) for v in value)
    return False


def needs_escape(event: Mapping[str, Any]) -> bool:
    """Whether any string of the event (arguments and their keys included) is unstorable."""
    return not event.get(ESCAPED_FIELD) and any(_has_unstorable(v) for v in event.values())


def _map(value: Any, fn: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return fn(value)
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {fn(str(k)): _map(v, fn, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_map(v, fn, depth + 1) for v in value]
    return value


def escape_event(event: dict[str, Any], *, strong: bool = False) -> dict[str, Any]:
    """Escape every string of the event (in place) and mark it; an event already escaped is
    unescaped first, so there is only ever one layer. ``strong``: all but printable ASCII."""
    if event.get(ESCAPED_FIELD):
        unescape_event(event)
    pattern = _ESCAPE_STRONG if strong else _ESCAPE
    fn = lambda s: pattern.sub(_escape_char, s)  # noqa: E731 - a one-line mapper
    for key, value in event.items():
        if key != "time":
            event[key] = _map(value, fn)
    event[ESCAPED_FIELD] = True
    return event


def unescape_event(event: dict[str, Any]) -> dict[str, Any]:
    """Give an escaped event (in place) its original strings back; others are returned as they are."""
    if not event.get(ESCAPED_FIELD):
        return event
    for key, value in event.items():
        if key not in ("time", ESCAPED_FIELD):
            event[key] = _map(value, unescape_text)
    event[ESCAPED_FIELD] = None
    return event


def _fit(event: dict[str, Any], limits: Mapping[str, int]) -> None:
    escaped = bool(event.get(ESCAPED_FIELD))
    for name, limit in limits.items():
        value = event.get(name)
        if isinstance(value, str) and len(value) > limit:
            event[name] = _cut(value, limit - 1, escaped) + "…"


def _cut(value: str, size: int, escaped: bool) -> str:
    """The first ``size`` characters of ``value``; of an escaped one, whole escapes only."""
    if not escaped:
        return value[:size]
    out = 0
    for m in _TOKEN.finditer(value, 0, size + 10):
        if m.end() > size:
            break
        out = m.end()
    return value[:out]


def sanitize(event: dict[str, Any], limits: Mapping[str, int]) -> dict[str, Any]:
    """Make the event storable (in place): escaped if any string is unstorable, bounded columns
    cut to ``limits`` (column name → characters). Idempotent."""
    if needs_escape(event):
        escape_event(event)
    _fit(event, limits)
    return event


def canonical_arguments(arguments: Any) -> bytes:
    """The arguments as the digest sees them: JSON, keys sorted, no spaces, ASCII only (a lone
    surrogate is ``\\udXXX``, so every value a caller can send has exactly one form)."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=str).encode("ascii")


def arguments_digest(key: bytes, arguments: Any) -> str:
    """HMAC-SHA256 (hex) of the unredacted arguments under ``key``."""
    return hmac.new(key, canonical_arguments(arguments), hashlib.sha256).hexdigest()

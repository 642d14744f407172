"""Driver exceptions → messages a model can act on, with secrets scrubbed.

SQLAlchemy, asyncpg, aiosqlite and the socket layer each have their own exception types; this is
the one edge where they are classified (:func:`classify`) into

* ``unavailable`` — the database cannot be reached or the connection died (the connector marks
  itself down and the health monitor reconnects);
* ``timeout`` — the server cancelled the statement at ``statement_timeout_s``;
* ``read_only`` — the database refused a write in a read-only transaction / connection;
* ``too_large`` — a reply or a value exceeded the byte budget (:class:`ResultTooLarge`, raised by
  the backends: the socket meter tripped, or SQLite refused to build a value that large);
* ``sql`` — anything else the database reported about the statement (syntax, missing table ...).

Every message passes through a :class:`Redactor` built from the connection URL, so a password
never reaches a tool result, a health detail, a log record or an audit record.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote

__all__ = ["Redactor", "Failure", "ResultTooLarge", "PrivilegedRole", "classify"]

# SQLSTATE classes / codes (PostgreSQL appendix A).
_UNAVAILABLE_CLASSES = ("08", "53", "57P", "28", "3D")  # connection, resources, shutdown, auth, no db
_TIMEOUT = {"57014"}
_READ_ONLY = {"25006"}


class Redactor:
    """Replaces the URL's password (raw and URL-encoded forms) with ``***`` in any text."""

    __slots__ = ("_secrets",)

    def __init__(self, password: str | None) -> None:
        forms = set()
        if password:
            forms = {password, quote(password, safe=""), quote_plus(password), unquote(password)}
        # Longest first so that an encoded form is not half-replaced by a shorter raw form.
        self._secrets = tuple(sorted((s for s in forms if len(s) >= 1), key=len, reverse=True))

    def __call__(self, text: object) -> str:
        out = str(text)
        for secret in self._secrets:
            out = out.replace(secret, "***")
        return out


class ResultTooLarge(Exception):
    """A reply or a value exceeded ``max_bytes``; the message says which and what to do."""


class PrivilegedRole(Exception):
    """The connector's role is too powerful and ``allow_privileged`` is not set (the message names it)."""


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str  # unavailable | timeout | read_only | too_large | privileged | sql
    message: str
    status: str | None = None  # SQLSTATE or a short tag for audit/metrics


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps (SQLAlchemy's ``orig``, ``__cause__``, ``__context__``)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo.extend([getattr(e, "orig", None), e.__cause__, e.__context__])
    return seen


def _sqlstate(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    return state if isinstance(state, str) else None


def classify(exc: BaseException, statement_timeout_s: float | None = None) -> Failure:
    """Classify any exception raised while talking to the database."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, ResultTooLarge):
            return Failure("too_large", str(e), "max_bytes")
        if isinstance(e, PrivilegedRole):
            return Failure("privileged", str(e), "privileged")
    for e in chain:
        state = _sqlstate(e)
        if state is None:
            continue
        detail = getattr(e, "message", None) or str(e)
        if state in _TIMEOUT:
            limit = f" of {statement_timeout_s:g}s" if statement_timeout_s else ""
            return Failure("timeout", f"Query cancelled by the server: it exceeded the statement timeout{limit}. "
                                      "Narrow it (WHERE, LIMIT) or use an index.", state)
        if state in _READ_ONLY:
            return Failure("read_only", f"Refused: this connection is read-only ({detail}).", state)
        if state.startswith(_UNAVAILABLE_CLASSES):
            return Failure("unavailable", f"Database unavailable: {detail}", state)
        hint = getattr(e, "hint", None)
        msg = f"SQL error [{state}]: {detail}"
        if hint:
            msg += f" (hint: {hint})"
        return Failure("sql", msg, state)
    for e in chain:
        name = type(e).__name__
        module = type(e).__module__
        if isinstance(e, (ConnectionError, OSError, asyncio.TimeoutError, TimeoutError)):
            return Failure("unavailable", f"Database unavailable: {e or name}", "unavailable")
        if module.startswith("asyncpg"):
            if name == "DataError":  # a bound value that does not fit the parameter's type
                return Failure("sql", f"Invalid parameter value: {e}", "invalid_parameter")
            # InternalClientError: the protocol state is broken (e.g. a FATAL arrived while idle).
            if name in ("ConnectionDoesNotExistError", "InternalClientError", "ProtocolError") or \
                    "closed" in str(e) or "connect" in str(e):
                return Failure("unavailable", f"Database unavailable: {e}", "unavailable")
    for e in chain:
        if isinstance(e, sqlite3.Error):
            text = str(e)
            lowered = text.lower()
            if lowered == "interrupted":
                limit = f" of {statement_timeout_s:g}s" if statement_timeout_s else ""
                return Failure("timeout", f"Query cancelled: it exceeded the statement timeout{limit}. "
                                          "Narrow it (WHERE, LIMIT) or use an index.", "timeout")
            if "readonly" in lowered or "read-only" in lowered or "query_only" in lowered:
                return Failure("read_only", f"Refused: this connection is read-only ({text}).", "read_only")
            if "not authorized" in lowered or "authorization denied" in lowered:
                return Failure("read_only", "Refused: this statement is not allowed on a read-only "
                                            f"connection ({text}).", "not_authorized")
            if "one statement at a time" in lowered:
                return Failure("sql", "Only one SQL statement per call is allowed.", "multiple_statements")
            if "unable to open database" in lowered or "disk i/o" in lowered:
                return Failure("unavailable", f"Database unavailable: {text}", "unavailable")
            return Failure("sql", f"SQL error: {text}", type(e).__name__)
    for e in chain:
        # SQLAlchemy's own wrappers carry a useful message even without a driver exception.
        if type(e).__module__.startswith("sqlalchemy") and "connection" in str(e).lower():
            return Failure("unavailable", f"Database unavailable: {str(e).splitlines()[0]}", "unavailable")
    return Failure("sql", f"Database error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                   type(exc).__name__)

"""Pure read-only policy for the SQL a caller sends to a read-only connector (``query``, ``explain``).

This is a seatbelt in front of the real mechanisms, not the mechanism itself: the database
refuses writes (a read-only transaction on PostgreSQL; ``mode=ro``, ``query_only`` and an
authorizer on SQLite), the role's privileges refuse what it was not granted, and every pooled
connection is reset on release. What this module adds, from the statement's words
(:func:`connectors.sql.statements.words`, so literals and comments never match):

* **Statement classes.** Only statements that read are accepted: ``SELECT``, ``WITH``, ``VALUES``,
  ``TABLE``, ``SHOW`` and ``EXPLAIN`` on PostgreSQL; ``SELECT``, ``WITH``, ``VALUES``, ``EXPLAIN``
  and ``PRAGMA`` (read forms only, the authorizer decides) on SQLite. This refuses, with a clear
  message, what a read-only transaction does *not* stop: ``COPY … TO PROGRAM``/``TO 'file'``,
  ``PREPARE``/``EXECUTE``/``DEALLOCATE``, ``LISTEN``, ``DO``, ``CALL``, ``LOAD``, ``SET``/``RESET``,
  transaction control (``COMMIT``), cursors, ``LOCK``, ``CHECKPOINT``, ``VACUUM`` …
* **Functions that act outside the transaction** (PostgreSQL): calls of the functions in
  :data:`DENIED` are refused wherever they appear (schema-qualified, quoted, inside ``EXPLAIN
  ANALYZE`` or a subquery): ``dblink*``, session-level advisory locks, server file access
  (``pg_read_file``, ``pg_ls_dir`` …, ``lo_import``/``lo_export``), signalling other sessions, and
  the functions that run SQL given as text (``query_to_xml*``, ``ts_stat``), which would hide a
  call from this check. ``U&"..."`` identifiers are refused so that a name cannot be spelled in
  escapes.

What it cannot see: a function the operator defined (or a view) that calls one of these
internally. That is the operator's side of the model: a least-privilege role, which the connector
verifies at start (see :mod:`connectors.sql.pg_session`).
"""

from __future__ import annotations

import functools

from .statements import Word, words

__all__ = ["GuardError", "DENIED", "check_read_statement", "first_word", "wrappable"]

READ_STATEMENTS = {
    "postgresql": frozenset({"select", "with", "values", "table", "show", "explain"}),
    "sqlite": frozenset({"select", "with", "values", "explain", "pragma"}),
}

_LOCKS = "takes a session-level advisory lock that outlives the transaction (use the pg_advisory_xact_* functions)"
_FILES = "reads files or directories on the database server"
_SIGNALS = "acts on other sessions or on the server itself"
_TEXT_SQL = "runs SQL given as text, which this check cannot see"

# Exact names, lower-case; prefixes below.
DENIED: dict[str, str] = {
    **{name: _LOCKS for name in (
        "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared",
        "pg_advisory_unlock", "pg_advisory_unlock_shared", "pg_advisory_unlock_all")},
    **{name: _FILES for name in ("pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_logdir_ls")},
    "lo_import": "reads a file on the database server into a large object",
    "lo_export": "writes a large object to a file on the database server",
    **{name: _SIGNALS for name in (
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_promote",
        "pg_switch_wal", "pg_logical_emit_message", "pg_drop_replication_slot")},
    "ts_stat": _TEXT_SQL,
}
_DENIED_PREFIXES = (
    ("dblink", "opens connections to other databases, outside this read-only transaction"),
    ("pg_ls_", _FILES),
    ("pg_file_", "reads or writes files on the database server"),
    ("query_to_xml", _TEXT_SQL),
    ("pg_create_", _SIGNALS),
    ("pg_replication_origin_", _SIGNALS),
)

# Words after which a statement cannot be wrapped in a subquery (SELECT … INTO, data-modifying
# CTEs, row locks): such statements are refused by the read-only transaction anyway.
_NOT_WRAPPABLE = frozenset({"into", "insert", "update", "delete", "merge"})


class GuardError(Exception):
    """The statement is refused; ``message`` is for the model, ``status`` for audit and metrics."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def first_word(sql: str) -> str:
    """The statement's first keyword, lower-case (leading parentheses skipped); '' when none."""
    for kind, text in words(sql):
        if kind == "punct" and text == "(":
            continue
        return text if kind == "ident" else ""
    return ""


@functools.lru_cache(maxsize=512)  # called on every read; statements repeat
def wrappable(sql: str) -> bool:
    """Whether ``sql`` can stand as a subquery in ``FROM (…)`` (what the PostgreSQL byte budget
    wraps it in): a query that reads and nothing else."""
    ws = words(sql)
    return first_word(sql) in {"select", "with", "values", "table"} and not any(
        kind == "ident" and text in _NOT_WRAPPABLE for kind, text in ws)


def _denied(name: str) -> str | None:
    reason = DENIED.get(name)
    if reason is not None:
        return reason
    for prefix, why in _DENIED_PREFIXES:
        if name.startswith(prefix):
            return why
    return None


def _calls(ws: tuple[Word, ...]) -> list[str]:
    """Names (last part, lower-case) of what is called: a word followed by ``(``."""
    return [text.lower() for (kind, text), nxt in zip(ws, ws[1:], strict=False)
            if kind in ("ident", "quoted") and nxt == ("punct", "(")]


@functools.lru_cache(maxsize=512)  # only statements that pass are cached (a refusal raises)
def check_read_statement(sql: str, dialect: str) -> None:
    """Raise :class:`GuardError` unless ``sql`` (one statement) is a read this policy accepts."""
    first = first_word(sql)
    allowed = READ_STATEMENTS["postgresql" if dialect == "postgresql" else "sqlite"]
    if first not in allowed:
        shown = first.upper() or "this statement"
        raise GuardError(f"Refused: {shown} is not a read-only statement. This connector is read-only: "
                         f"its query tools run {', '.join(sorted(w.upper() for w in allowed))} only.",
                         "refused_statement")
    if dialect != "postgresql":
        return  # SQLite: the authorizer refuses functions (load_extension, readfile ...)
    ws = words(sql)
    if any(kind == "unicode" for kind, _ in ws):
        raise GuardError('Refused: U&"..." identifiers are not accepted by this read-only connector; '
                         "write the name plainly.", "refused_statement")
    for name in _calls(ws):
        reason = _denied(name)
        if reason is not None:
            raise GuardError(f"Refused: {name}() {reason}; it is not allowed on a read-only connector.",
                             "refused_function")

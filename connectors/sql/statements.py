"""Pure SQL text handling: the single-statement check, named placeholders, identifier quoting.

This is *not* the read-only guard (the database enforces that: a read-only transaction on
PostgreSQL, ``PRAGMA query_only`` plus an authorizer on SQLite). It is a lexer that knows where
strings, quoted identifiers, comments and dollar-quoted bodies are, so that

* ``SELECT 1; DROP TABLE t`` is refused with a clear message before it reaches the server (the
  server refuses it too: the extended protocol and sqlite3 accept one statement only);
* ``:name`` placeholders are found outside literals and comments and rewritten to the driver's
  positional form (``$1`` on PostgreSQL, ``?1`` on SQLite), values always travelling as bound
  parameters, never as text;
* the words of a statement (:func:`words`: identifiers outside literals and comments, quoted ones
  unquoted) are available to :mod:`connectors.sql.guard`, which classifies statements and finds
  the functions they call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "StatementError",
    "check_single_statement",
    "named_placeholders",
    "bind_named",
    "quote_ident",
    "qualified",
    "Word",
    "words",
]


class StatementError(ValueError):
    """The SQL text is empty or holds more than one statement."""


_IDENT_START = re.compile(r"[A-Za-z_]")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_]")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def _tokens(sql: str) -> Iterator[tuple[str, int, int]]:
    """Yield ``(kind, start, end)`` for code spans the lexer cares about.

    Kinds: ``code`` (one character outside any literal), ``semicolon``, ``param`` (``:name``),
    ``comment``, ``literal`` (strings, quoted identifiers, dollar-quoted bodies).
    """
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end + 1
            yield "comment", i, end
            i = end
        elif c == "/" and sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:  # PostgreSQL nests block comments
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                raise StatementError("unterminated /* comment")
            yield "comment", i, j
            i = j
        elif c in "'\"`":
            escapes = c == "'" and i > 0 and sql[i - 1] in "eE" and (i < 2 or not _IDENT_CHAR.match(sql[i - 2]))
            j = i + 1
            while True:
                if j >= n:
                    raise StatementError("unterminated quoted string or identifier")
                if escapes and sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # doubled quote is an escaped quote
                        j += 2
                        continue
                    break
                j += 1
            yield "literal", i, j + 1
            i = j + 1
        elif c == "$" and (m := _DOLLAR_TAG.match(sql, i)) and not (i > 0 and _IDENT_CHAR.match(sql[i - 1])):
            tag = m.group(0)
            end = sql.find(tag, m.end())
            if end < 0:
                raise StatementError(f"unterminated dollar-quoted string {tag}")
            yield "literal", i, end + len(tag)
            i = end + len(tag)
        elif c == ";":
            yield "semicolon", i, i + 1
            i += 1
        elif (c == ":" and i + 1 < n and _IDENT_START.match(sql[i + 1])
              and not (i > 0 and sql[i - 1] == ":")):
            j = i + 2
            while j < n and _IDENT_CHAR.match(sql[j]):
                j += 1
            yield "param", i, j
            i = j
        elif c == ":" and sql.startswith("::", i):
            yield "code", i, i + 2  # a PostgreSQL cast, never a placeholder
            i += 2
        else:
            yield "code", i, i + 1
            i += 1


def check_single_statement(sql: str) -> str:
    """The one statement in ``sql`` without trailing semicolons; raises StatementError otherwise."""
    if not isinstance(sql, str):
        raise StatementError("sql must be a string")
    return _check(sql)


@functools.lru_cache(maxsize=512)  # agents repeat statements; the lexer is pure Python
def _check(sql: str) -> str:
    last_semicolon: int | None = None
    seen_code = False
    for kind, start, _end in _tokens(sql):
        if kind == "comment":
            continue
        if kind == "semicolon":
            if last_semicolon is None:
                last_semicolon = start
            continue
        if kind == "code" and sql[start].isspace():
            continue
        if last_semicolon is not None:
            raise StatementError(
                "only one SQL statement per call is allowed (found more after ';'); "
                "send each statement in its own call")
        seen_code = True
    if not seen_code:
        raise StatementError("the SQL text is empty")
    body = sql if last_semicolon is None else sql[:last_semicolon]
    return body.strip()


Word = tuple[str, str]
"""``(kind, text)``: ``ident`` (unquoted, lower-cased), ``quoted`` (a double-quoted identifier,
unquoted), ``unicode`` (a ``U&"..."`` identifier, kept raw), ``string`` (any other literal, kept raw)
or ``punct`` (one character of code that is neither a word nor white space)."""


@functools.lru_cache(maxsize=512)
def words(sql: str) -> tuple[Word, ...]:
    """The statement as words, comments dropped; raises StatementError like the single-statement check."""
    out: list[Word] = []
    ident: list[str] = []

    def flush() -> None:
        if ident:
            out.append(("ident", "".join(ident).lower()))
            ident.clear()

    for kind, start, end in _tokens(sql):
        text = sql[start:end]
        if kind == "code" and len(text) == 1 and (_IDENT_CHAR.match(text) or text == "$" and ident):
            ident.append(text)
            continue
        flush()
        if kind == "comment" or (kind == "code" and text.isspace()):
            continue
        if kind == "literal" and text.startswith('"'):
            if out[-2:] == [("ident", "u"), ("punct", "&")]:
                del out[-2:]
                out.append(("unicode", text))
            else:
                out.append(("quoted", text[1:-1].replace('""', '"')))
        elif kind == "literal":
            out.append(("string", text))
        elif kind == "param":
            out.append(("punct", ":"))
            out.append(("ident", text[1:].lower()))
        else:
            out.extend(("punct", c) for c in text)
    flush()
    return tuple(out)


def named_placeholders(sql: str) -> list[str]:
    """``:name`` placeholders outside literals and comments, in order (repeats kept)."""
    return [sql[s + 1:e] for kind, s, e in _tokens(sql) if kind == "param"]


def bind_named(sql: str, values: Mapping[str, Any], dialect: str) -> tuple[str, list[Any]]:
    """Rewrite ``:name`` to positional placeholders; returns ``(sql, args)``.

    A name used twice binds once (``$1`` twice). A placeholder without a value raises KeyError
    naming it; extra values are the caller's concern (the named-query layer rejects them).
    """
    out: list[str] = []
    args: list[Any] = []
    index: dict[str, int] = {}
    pos = 0
    for kind, start, end in _tokens(sql):
        if kind != "param":
            continue
        name = sql[start + 1:end]
        if name not in values:
            raise KeyError(name)
        if name not in index:
            args.append(values[name])
            index[name] = len(args)
        out.append(sql[pos:start])
        out.append(f"${index[name]}" if dialect == "postgresql" else f"?{index[name]}")
        pos = end
    out.append(sql[pos:])
    return "".join(out), args


def quote_ident(name: str) -> str:
    """A double-quoted identifier (valid on PostgreSQL and SQLite); NULs are refused."""
    if "\x00" in name:
        raise ValueError("identifier contains a NUL character")
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, name: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(name)}"

"""Which tables and columns a SQL connector shows (``expose:``), applied to the schema (pure).

:func:`apply` filters an introspected :class:`~connectors.sql.schema.Snapshot` before anything
reads it, so every surface built from the snapshot shows only what is exposed: the schema
resources and the overview, ``list_tables`` and ``describe_table``, the prompts, completions
(table, column and key values), and the row template, whose statement names the visible columns
(never ``SELECT *``). A hidden column also takes with it the keys and indexes that use it: a table
whose primary key has a hidden column has no row template reads (its key values would be a
probe into the hidden column), foreign keys and indexes naming it are left out, and a table
with every column hidden is hidden.

Free SQL (``query``, ``explain``, ``execute``) is checked by :func:`check_free_sql`, a seatbelt
from the statement's words: it refuses SQL that names a hidden table, a hidden column, or a table
that has hidden columns (``*``, ``t.*`` and whole-row references like ``to_jsonb(t)`` would read
them), in identifiers or inside string literals (``table_to_xml('t', …)``). It cannot see through
a view or a function the operator defined; real secrecy is the database role's privileges
(column-level ``GRANT SELECT (…)`` or a view), which this does not replace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from connectors.config import glob_match

from .config import Exposure
from .guard import GuardError
from .schema import Snapshot, Table
from .statements import words

__all__ = ["Hidden", "apply", "check_free_sql"]

_WORD = re.compile(r"[A-Za-z0-9_$]+")


@dataclass(frozen=True, slots=True)
class Hidden:
    """What free SQL may not name (lower-case): hidden tables, tables with hidden columns, hidden
    columns. Empty when the connector exposes everything."""

    tables: frozenset[str] = frozenset()
    columns: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.tables or self.columns)


def _table_globs_match(table: Table, globs: tuple[str, ...]) -> bool:
    return glob_match(table.qualified_name, globs) or glob_match(table.name, globs)


def _column_globs(table: Table, by_table: dict[str, tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [cols for pattern, cols in by_table.items() if _table_globs_match(table, (pattern,))]


def _table_shown(table: Table, expose: Exposure) -> bool:
    return (not expose.tables or _table_globs_match(table, expose.tables)) and \
        not _table_globs_match(table, expose.hide_tables)


def _column_shown(table: Table, column: str, expose: Exposure) -> bool:
    allowed = _column_globs(table, expose.columns)
    if allowed and not any(glob_match(column, cols) for cols in allowed):
        return False
    return not any(glob_match(column, cols) for cols in _column_globs(table, expose.hide_columns))


def apply(snapshot: Snapshot, expose: Exposure) -> tuple[Snapshot, Hidden]:
    """The snapshot as clients may see it, and the names free SQL may not use."""
    if expose.everything:
        return snapshot, Hidden()
    hidden_tables: set[str] = set()
    hidden_columns: set[str] = set()
    shown_tables: list[Table] = []
    for table in snapshot.tables:
        if not _table_shown(table, expose):
            hidden_tables.add(table.name.lower())
            continue
        columns = tuple(c for c in table.columns if _column_shown(table, c.name, expose))
        if len(columns) == len(table.columns):
            shown_tables.append(table)
            continue
        visible = {c.name for c in columns}
        hidden_tables.add(table.name.lower())
        hidden_columns.update(c.name.lower() for c in table.columns if c.name not in visible)
        if not columns:
            continue  # nothing of it to show: hidden as a whole (a row read would be SELECT *)
        shown_tables.append(replace(
            table, columns=columns,
            primary_key=table.primary_key if set(table.primary_key) <= visible else (),
            foreign_keys=tuple(fk for fk in table.foreign_keys if set(fk.columns) <= visible),
            indexes=tuple(ix for ix in table.indexes if ix.columns and set(ix.columns) <= visible)))
    shown_keys = {(t.schema, t.name) for t in shown_tables}
    # A foreign key into a hidden table would name it: left out as well.
    final = [replace(t, foreign_keys=tuple(fk for fk in t.foreign_keys if (fk.ref_schema, fk.ref_table) in shown_keys
                                           and _refs_visible(fk.ref_columns, snapshot, fk.ref_schema, fk.ref_table,
                                                             expose)))
             for t in shown_tables]
    out = Snapshot.of(snapshot.dialect, final, snapshot.database, snapshot.server_version)
    return out, Hidden(frozenset(hidden_tables), frozenset(hidden_columns))


def _refs_visible(columns: tuple[str, ...], snapshot: Snapshot, schema: str, name: str, expose: Exposure) -> bool:
    target = snapshot.by_key.get((schema, name))
    return target is not None and all(_column_shown(target, c, expose) for c in columns)


def check_free_sql(sql: str, hidden: Hidden) -> None:
    """Raise :class:`GuardError` when ``sql`` names what ``hidden`` holds (see the module doc)."""
    if not hidden:
        return
    for kind, text in words(sql):
        if kind in ("ident", "quoted", "unicode"):
            names = [text.lower()]
        elif kind == "string":
            names = [w.lower() for w in _WORD.findall(text)]
        else:
            continue
        for name in names:
            if name in hidden.tables:
                raise GuardError(f"Refused: {name} is not exposed to free SQL on this connector (hidden, or it "
                                 "has hidden columns); use describe_table, the row resources or the named queries.",
                                 "hidden_name")
            if name in hidden.columns:
                raise GuardError(f"Refused: {name} is a hidden column on this connector.", "hidden_name")

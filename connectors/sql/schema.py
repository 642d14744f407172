"""Pure introspection mapping: catalog rows → a typed schema snapshot → wire objects and text.

The I/O side (:mod:`connectors.sql.engine`) runs a few catalog queries and hands their rows here as
plain dicts; everything about shaping them (primary/foreign keys, indexes, resource URIs, the JSON
and text descriptions, change fingerprints) lives in this module and is tested with plain values.

Change detection deliberately ignores row estimates: they move with every write and would turn
every refresh into a ``list_changed`` storm. The *structure* (columns, types, keys, indexes,
comments) is what clients cache and what subscriptions report on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from .statements import quote_ident

__all__ = [
    "Column",
    "ForeignKey",
    "Index",
    "Table",
    "Snapshot",
    "build_pg_snapshot",
    "build_sqlite_table",
    "table_uri",
    "overview_uri",
    "row_uri_template",
    "parse_uri",
    "table_json",
    "table_text",
    "overview_json",
    "overview_text",
    "resource_definition",
    "select_list",
]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    default: str | None = None
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class ForeignKey:
    columns: tuple[str, ...]
    ref_schema: str
    ref_table: str
    ref_columns: tuple[str, ...]
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Index:
    name: str
    columns: tuple[str, ...] = ()
    unique: bool = False
    definition: str | None = None


@dataclass(frozen=True, slots=True)
class Table:
    schema: str
    name: str
    kind: str  # table | view | materialized_view | foreign_table
    columns: tuple[Column, ...] = ()
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    indexes: tuple[Index, ...] = ()
    row_estimate: int | None = None
    comment: str | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    def structure(self) -> dict[str, Any]:
        """Everything but the row estimate (the part whose change clients should hear about)."""
        data = asdict(self)
        data.pop("row_estimate")
        return data

    def fingerprint(self) -> str:
        raw = json.dumps(self.structure(), sort_keys=True, default=str).encode()
        return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One introspection result: tables by ``(schema, name)``, sorted."""

    dialect: str
    tables: tuple[Table, ...] = ()
    database: str = ""
    server_version: str = ""
    by_key: dict[tuple[str, str], Table] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, dialect: str, tables: Iterable[Table], database: str = "", server_version: str = "") -> Snapshot:
        ordered = tuple(sorted(tables, key=lambda t: (t.schema, t.name)))
        return cls(dialect, ordered, database, server_version, {(t.schema, t.name): t for t in ordered})

    def find(self, name: str, default_schema: str | None = None) -> Table | None:
        """Resolve ``schema.table`` or a bare ``table`` (unique across schemas, or in the default)."""
        if (hit := self.by_key.get(tuple(name.split(".", 1)))) is not None:  # type: ignore[arg-type]
            return hit
        bare = [t for t in self.tables if t.name == name]
        if len(bare) == 1:
            return bare[0]
        if default_schema is not None:
            return self.by_key.get((default_schema, name))
        return None

    def fingerprints(self) -> dict[tuple[str, str], str]:
        return {(t.schema, t.name): t.fingerprint() for t in self.tables}


# -- builders ---------------------------------------------------------------------------------

_PG_KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized_view", "f": "foreign_table"}


def build_pg_snapshot(relations: Iterable[Mapping[str, Any]], columns: Iterable[Mapping[str, Any]],
                      constraints: Iterable[Mapping[str, Any]], indexes: Iterable[Mapping[str, Any]],
                      database: str = "", server_version: str = "") -> Snapshot:
    """Rows of the four catalog queries in :mod:`engine` (keyed by the relation ``oid``)."""
    cols: dict[int, list[Column]] = {}
    for c in columns:
        cols.setdefault(c["oid"], []).append(
            Column(c["name"], c["type"], bool(c["nullable"]), c["default"], c.get("comment")))
    pks: dict[int, tuple[str, ...]] = {}
    fks: dict[int, list[ForeignKey]] = {}
    for k in constraints:
        if k["contype"] == "p":
            pks[k["oid"]] = tuple(k["columns"])
        elif k["contype"] == "f":
            fks.setdefault(k["oid"], []).append(ForeignKey(
                tuple(k["columns"]), k["ref_schema"], k["ref_table"], tuple(k["ref_columns"]), k["name"]))
    idx: dict[int, list[Index]] = {}
    for i in indexes:
        idx.setdefault(i["oid"], []).append(
            Index(i["name"], tuple(i["columns"] or ()), bool(i["unique"]), i["definition"]))
    tables = []
    for r in relations:
        estimate = r["estimate"]
        tables.append(Table(
            schema=r["schema"], name=r["name"], kind=_PG_KINDS.get(r["kind"], "table"),
            columns=tuple(cols.get(r["oid"], ())), primary_key=pks.get(r["oid"], ()),
            foreign_keys=tuple(sorted(fks.get(r["oid"], ()), key=lambda f: f.name or "")),
            indexes=tuple(sorted(idx.get(r["oid"], ()), key=lambda i: i.name)),
            # reltuples is -1 (PG 14+) or 0 before the first ANALYZE: unknown, not "empty".
            row_estimate=int(estimate) if estimate is not None and estimate >= 0 and r["kind"] != "v" else None,
            comment=r.get("comment"),
        ))
    return Snapshot.of("postgresql", tables, database, server_version)


def build_sqlite_table(schema: str, name: str, kind: str, table_info: Iterable[Mapping[str, Any]],
                       fk_list: Iterable[Mapping[str, Any]], index_list: Iterable[Mapping[str, Any]],
                       index_columns: Mapping[str, list[str]], row_estimate: int | None) -> Table:
    """One table from ``PRAGMA table_info / foreign_key_list / index_list / index_info`` rows."""
    info = sorted(table_info, key=lambda r: r["cid"])
    columns = tuple(Column(r["name"], r["type"] or "ANY", not r["notnull"] and not r["pk"],
                           None if r["dflt_value"] is None else str(r["dflt_value"])) for r in info)
    pk = tuple(r["name"] for r in sorted((r for r in info if r["pk"]), key=lambda r: r["pk"]))
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for r in fk_list:
        groups.setdefault(r["id"], []).append(r)
    fks = []
    for fid, rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["seq"])
        fks.append(ForeignKey(tuple(r["from"] for r in rows), schema, rows[0]["table"],
                              tuple(r["to"] or "" for r in rows), f"fk_{name}_{fid}"))
    indexes = tuple(sorted((Index(r["name"], tuple(index_columns.get(r["name"], ())), bool(r["unique"]))
                            for r in index_list), key=lambda i: i.name))
    return Table(schema, name, kind, columns, pk, tuple(fks), indexes,
                 row_estimate if kind == "table" else None)


# -- URIs -------------------------------------------------------------------------------------

def _seg(text: str) -> str:
    return quote(text, safe="")


def table_uri(connector: str, schema: str, name: str) -> str:
    return f"sql://{_seg(connector)}/{_seg(schema)}/{_seg(name)}"


def overview_uri(connector: str) -> str:
    return f"sql://{_seg(connector)}/overview"


def row_uri_template(connector: str) -> str:
    return f"sql://{_seg(connector)}/{{schema}}/{{table}}/row/{{key}}"


def parse_uri(connector: str, uri: str) -> tuple[str, ...] | None:
    """``("overview",)``, ``("table", schema, name)``, ``("row", schema, name, key)`` or None.

    ``key`` stays percent-encoded: composite keys are comma-separated encoded values.
    """
    prefix = f"sql://{_seg(connector)}/"
    if not uri.startswith(prefix):
        return None
    parts = uri[len(prefix):].split("/")
    if parts == ["overview"]:
        return ("overview",)
    if len(parts) == 2 and all(parts):
        return ("table", unquote(parts[0]), unquote(parts[1]))
    if len(parts) == 4 and parts[2] == "row" and all(parts):
        return ("row", unquote(parts[0]), unquote(parts[1]), parts[3])
    return None


# -- renderings -------------------------------------------------------------------------------

def table_json(table: Table, connector: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "uri": table_uri(connector, table.schema, table.name),
        "schema": table.schema,
        "name": table.name,
        "kind": table.kind,
        "columns": [{k: v for k, v in asdict(c).items() if v is not None} for c in table.columns],
        "primaryKey": list(table.primary_key),
        "foreignKeys": [
            {"columns": list(f.columns), "references": {"schema": f.ref_schema, "table": f.ref_table,
                                                        "columns": list(f.ref_columns)}}
            for f in table.foreign_keys
        ],
        "indexes": [{k: v for k, v in (("name", i.name), ("columns", list(i.columns)), ("unique", i.unique),
                                       ("definition", i.definition)) if v is not None} for i in table.indexes],
        "rowEstimate": table.row_estimate,
    }
    if table.comment:
        data["comment"] = table.comment
    return data


def table_text(table: Table) -> str:
    """A compact, model-friendly description (Markdown)."""
    head = f"# {table.kind.replace('_', ' ')} {table.qualified_name}"
    lines = [head]
    if table.comment:
        lines.append(table.comment)
    if table.row_estimate is not None:
        lines.append(f"~{table.row_estimate} rows (estimate)")
    lines.append("")
    lines.append("| column | type | null | default | key |")
    lines.append("|---|---|---|---|---|")
    fk_cols = {c: f for f in table.foreign_keys for c in f.columns}
    for c in table.columns:
        key = []
        if c.name in table.primary_key:
            key.append("PK")
        if c.name in fk_cols:
            f = fk_cols[c.name]
            key.append(f"FK → {f.ref_schema}.{f.ref_table}({', '.join(f.ref_columns)})")
        lines.append(f"| {c.name} | {c.type} | {'yes' if c.nullable else 'no'} | {c.default or ''} | {' '.join(key)} |")
    if table.indexes:
        lines.append("")
        lines.append("Indexes: " + "; ".join(
            f"{i.name} ({', '.join(i.columns)}){' unique' if i.unique else ''}" for i in table.indexes))
    return "\n".join(lines) + "\n"


def overview_json(snapshot: Snapshot, connector: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "connector": connector,
        "dialect": snapshot.dialect,
        "database": snapshot.database,
        "serverVersion": snapshot.server_version,
        **(dict(extra) if extra else {}),
        "tables": [
            {"schema": t.schema, "name": t.name, "kind": t.kind, "rowEstimate": t.row_estimate,
             "columns": [c.name for c in t.columns], "uri": table_uri(connector, t.schema, t.name)}
            for t in snapshot.tables
        ],
    }


def overview_text(snapshot: Snapshot, connector: str) -> str:
    lines = [f"# Database {snapshot.database or connector} ({snapshot.dialect} {snapshot.server_version})".rstrip(),
             f"{len(snapshot.tables)} tables and views.", ""]
    for t in snapshot.tables:
        est = f", ~{t.row_estimate} rows" if t.row_estimate is not None else ""
        cols = ", ".join(c.name + (" (PK)" if c.name in t.primary_key else "") for c in t.columns)
        lines.append(f"- {t.qualified_name} [{t.kind}{est}]: {cols}")
        for f in t.foreign_keys:
            lines.append(f"    {', '.join(f.columns)} → {f.ref_schema}.{f.ref_table}({', '.join(f.ref_columns)})")
    return "\n".join(lines) + "\n"


def resource_definition(table: Table, connector: str) -> dict[str, Any]:
    what = table.kind.replace("_", " ")
    desc = table.comment or f"Structure of the {what} {table.qualified_name}"
    return {
        "uri": table_uri(connector, table.schema, table.name),
        "name": f"{table.schema}.{table.name}",
        "title": f"{what.capitalize()} {table.qualified_name}",
        "description": f"{desc}: {len(table.columns)} columns.",
        "mimeType": "text/markdown",
    }


def select_list(table: Table) -> str:
    """The table's known columns, quoted, for a SELECT: never ``*``, which would also read the
    columns ``expose:`` hides (a table with no known columns falls back to ``*``)."""
    return ", ".join(quote_ident(c.name) for c in table.columns) or "*"

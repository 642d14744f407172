"""Pure mapping for the SQL connector: tool and prompt definitions, named-query arguments,
prompt rendering and completion candidates.

Named-query arguments are validated and coerced here (types, enums, bounds, defaults) into the
Python values the drivers bind; an invalid argument raises :class:`ArgumentError` whose message is
shown to the model (MCP 2025-11-25: input validation errors are tool execution errors, so the
model can correct itself).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .config import NamedQuery, QueryParam, SQLConfig
from .schema import Snapshot, Table, overview_text, overview_uri, table_text, table_uri
from .statements import qualified, quote_ident

__all__ = [
    "ArgumentError",
    "RESULT_SCHEMA",
    "builtin_tools",
    "named_query_tool",
    "coerce_arguments",
    "prompt_definitions",
    "render_explore_table",
    "render_write_query",
    "complete_values",
    "key_completion_sql",
]

_MAX_COMPLETIONS = 100


class ArgumentError(ValueError):
    """A tool argument is missing, unknown or invalid (shown to the model)."""


RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array"}},
        "truncated": {"type": "boolean", "description": "More rows exist beyond this page"},
        "nextCursor": {"type": ["string", "null"], "description": "Pass as `cursor` to get the next page"},
        "truncatedBy": {"type": ["string", "null"], "enum": ["max_rows", "max_bytes", None],
                        "description": "Which limit ended the page (row count or byte budget), if any"},
        "valuesCut": {"type": "boolean",
                      "description": "The page's only row was larger than the byte budget: its large values are cut"},
    },
    "required": ["columns", "rows", "truncated", "nextCursor"],
}

_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def _placeholder_help(dialect: str) -> str:
    positional = "$1, $2" if dialect == "postgresql" else "?"
    return (f"Bind values, never inline them: {positional} placeholders with `params` as an array, "
            "or :name placeholders with `params` as an object.")


def builtin_tools(config: SQLConfig, dialect: str) -> list[dict[str, Any]]:
    db = f"the {'PostgreSQL' if dialect == 'postgresql' else 'SQLite'} database '{config.name}'"
    params_schema = {"type": ["array", "object"], "description": "Bound parameter values"}
    tools: list[dict[str, Any]] = [
        {
            "name": "query",
            "title": "Run a read-only SQL query",
            "description": (f"Run one read-only SQL statement on {db} and return at most {config.max_rows} rows "
                            f"per page as columns and rows. {_placeholder_help(dialect)} When `truncated` is "
                            "true, call again with the same `sql` and `cursor` set to `nextCursor` (use ORDER BY "
                            "for stable pages); a page also ends at the result's byte budget (`truncatedBy`). "
                            f"Statements time out after {config.statement_timeout_s:g}s. "
                            "Writes are refused by the database."),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "sql": {"type": "string", "description": "One SQL statement (SELECT, WITH, VALUES, SHOW ...)"},
                    "params": params_schema,
                    "cursor": {"type": "string", "description": "nextCursor from the previous page"},
                },
                "required": ["sql"],
            },
            "outputSchema": RESULT_SCHEMA,
            "annotations": {"title": "Run a read-only SQL query", **_READ_ONLY},
        },
        {
            "name": "list_tables",
            "title": "List tables and views",
            "description": f"List the tables and views of {db} with their kind, estimated row count and "
                           "resource URI. Set `refresh` to re-read the schema from the database.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "schema": {"type": "string", "description": "Only this schema"},
                    "refresh": {"type": "boolean", "default": False},
                },
            },
            "annotations": {"title": "List tables and views", **_READ_ONLY},
        },
        {
            "name": "describe_table",
            "title": "Describe a table",
            "description": f"Columns with types, nullability and defaults, primary and foreign keys, indexes "
                           f"and estimated row count of one table or view of {db}.",
            "inputSchema": {
                "type": "object",
                "properties": {"table": {"type": "string", "description": "table or schema.table"}},
                "required": ["table"],
            },
            "annotations": {"title": "Describe a table", **_READ_ONLY},
        },
        {
            "name": "explain",
            "title": "Explain a query plan",
            "description": f"Show the execution plan of one SQL statement on {db}. `analyze` runs it (read-only) "
                           "to report actual times" + (" (PostgreSQL only)." if dialect == "postgresql" else "; "
                           "ignored on SQLite."),
            "inputSchema": {
                "type": "object",
                "properties": {"sql": {"type": "string"}, "params": params_schema,
                               "analyze": {"type": "boolean", "default": False}},
                "required": ["sql"],
            },
            "annotations": {"title": "Explain a query plan", **_READ_ONLY},
        },
    ]
    if config.allow_writes:
        tools.append({
            "name": "execute",
            "title": "Execute a write statement",
            "description": (f"Execute one statement that changes {db} (INSERT, UPDATE, DELETE, DDL) and commit "
                            f"it. {_placeholder_help(dialect)} Returns the affected row count and up to "
                            f"{config.max_rows} RETURNING rows."),
            "inputSchema": {
                "type": "object",
                "properties": {"sql": {"type": "string"}, "params": params_schema},
                "required": ["sql"],
            },
            "annotations": {"title": "Execute a write statement", "readOnlyHint": False, "destructiveHint": True,
                            "idempotentHint": False, "openWorldHint": False},
        })
    return tools


def _param_schema(p: QueryParam) -> dict[str, Any]:
    out: dict[str, Any]
    if p.type == "date":
        out = {"type": "string", "format": "date"}
    elif p.type == "datetime":
        out = {"type": "string", "format": "date-time"}
    else:
        out = {"type": p.type}
    for key, value in (("description", p.description), ("enum", list(p.enum) if p.enum is not None else None),
                       ("default", p.default), ("minimum", p.minimum), ("maximum", p.maximum),
                       ("minLength", p.min_length), ("maxLength", p.max_length), ("pattern", p.pattern)):
        if value is not None:
            out[key] = value
    return out


def named_query_tool(q: NamedQuery, config: SQLConfig) -> dict[str, Any]:
    limit = q.max_rows or config.max_rows
    props = {name: _param_schema(p) for name, p in q.params.items()}
    props["cursor"] = {"type": "string", "description": "nextCursor from the previous page"}
    tool: dict[str, Any] = {
        "name": q.name,
        "description": (q.description or f"Named query {q.name}") + f" (at most {limit} rows per page).",
        "inputSchema": {"type": "object", "properties": props,
                        "required": [n for n, p in q.params.items() if p.is_required]},
        "outputSchema": RESULT_SCHEMA,
        "annotations": {**_READ_ONLY, **({"title": q.title} if q.title else {})},
    }
    if q.title:
        tool["title"] = q.title
    return tool


def _coerce(name: str, p: QueryParam, value: Any) -> Any:
    def bad(expected: str) -> ArgumentError:
        return ArgumentError(f"Argument {name!r} must be {expected}, got {value!r}")

    if p.type == "integer":
        if isinstance(value, bool):
            raise bad("an integer")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
            value = int(value)
        if not isinstance(value, int):
            raise bad("an integer")
    elif p.type == "number":
        if isinstance(value, bool):
            raise bad("a number")
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad("a number") from None
        if not isinstance(value, (int, float)):
            raise bad("a number")
        value = float(value)
    elif p.type == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            raise bad("true or false")
    elif p.type in ("date", "datetime"):
        if not isinstance(value, str):
            raise bad("an ISO 8601 " + ("date" if p.type == "date" else "date-time") + " string")
        try:
            value = (dt.date.fromisoformat(value) if p.type == "date"
                     else dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            raise bad("an ISO 8601 " + ("date (YYYY-MM-DD)" if p.type == "date" else "date-time")) from None
    else:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise bad("a string")
    if p.enum is not None and value not in p.enum:
        raise ArgumentError(f"Argument {name!r} must be one of {', '.join(map(repr, p.enum))}, got {value!r}")
    if p.minimum is not None and isinstance(value, (int, float)) and value < p.minimum:
        raise ArgumentError(f"Argument {name!r} must be >= {p.minimum:g}, got {value!r}")
    if p.maximum is not None and isinstance(value, (int, float)) and value > p.maximum:
        raise ArgumentError(f"Argument {name!r} must be <= {p.maximum:g}, got {value!r}")
    if isinstance(value, str):
        if p.min_length is not None and len(value) < p.min_length:
            raise ArgumentError(f"Argument {name!r} must have at least {p.min_length} characters")
        if p.max_length is not None and len(value) > p.max_length:
            raise ArgumentError(f"Argument {name!r} must have at most {p.max_length} characters")
        if p.pattern is not None and re.search(p.pattern, value) is None:
            raise ArgumentError(f"Argument {name!r} must match the pattern {p.pattern}")
    return value


def coerce_arguments(q: NamedQuery, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Validated, typed values for every declared parameter (``cursor`` is not a parameter)."""
    unknown = sorted(set(arguments) - set(q.params) - {"cursor"})
    if unknown:
        raise ArgumentError(f"Unknown argument(s) for {q.name}: {', '.join(unknown)}; "
                            f"expected: {', '.join(q.params) or 'none'}")
    out: dict[str, Any] = {}
    for name, p in q.params.items():
        value = arguments.get(name)
        if value is None:
            if p.default is not None:
                value = p.default
            elif p.is_required:
                raise ArgumentError(f"Missing required argument {name!r} for {q.name}")
            else:
                out[name] = None
                continue
        out[name] = _coerce(name, p, value)
    return out


# -- prompts ----------------------------------------------------------------------------------

def prompt_definitions() -> list[dict[str, Any]]:
    return [
        {
            "name": "explore_table",
            "title": "Explore a table",
            "description": "Understand one table: its structure, relationships and typical values.",
            "arguments": [
                {"name": "table", "description": "table or schema.table", "required": True},
                {"name": "column", "description": "a column to focus on", "required": False},
            ],
        },
        {
            "name": "write_query",
            "title": "Write a SQL query",
            "description": "Write and run a read-only SQL query that answers a question, with the schema at hand.",
            "arguments": [
                {"name": "question", "description": "what you want to know from the data", "required": True},
                {"name": "tables", "description": "comma-separated tables to use (default: all)", "required": False},
            ],
        },
    ]


def _embedded(uri: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": {"type": "resource",
                                        "resource": {"uri": uri, "mimeType": "text/markdown", "text": text}}}


def _text(text: str) -> dict[str, Any]:
    return {"role": "user", "content": {"type": "text", "text": text}}


def render_explore_table(connector: str, table: Table, column: str | None, query_tool: str) -> dict[str, Any]:
    focus = ""
    if column:
        focus = (f" Focus on column {column}: its distinct values or range, how many rows are NULL, and how it "
                 "relates to other tables.")
    text = (f"Explore the {table.kind.replace('_', ' ')} {table.qualified_name} described above. Explain what one row "
            "represents, what the keys and foreign keys connect it to, and show typical values by running a few "
            f"small read-only queries with the `{query_tool}` tool (always with LIMIT).{focus}")
    return {"description": f"Explore {table.qualified_name}",
            "messages": [_embedded(table_uri(connector, table.schema, table.name), table_text(table)), _text(text)]}


def render_write_query(connector: str, snapshot: Snapshot, tables: list[Table], question: str,
                       query_tool: str, max_rows: int) -> dict[str, Any]:
    if tables:
        context = [_embedded(table_uri(connector, t.schema, t.name), table_text(t)) for t in tables]
    else:
        context = [_embedded(overview_uri(connector), overview_text(snapshot, connector))]
    dialect = "PostgreSQL" if snapshot.dialect == "postgresql" else "SQLite"
    text = (f"Write one read-only {dialect} SQL statement that answers this question:\n\n{question}\n\n"
            "Use only the tables and columns shown above, qualify ambiguous columns, pass literal values as "
            f"bound parameters, and add ORDER BY and LIMIT where they help. Then run it with the `{query_tool}` "
            f"tool (at most {max_rows} rows per page) and answer the question from the result.")
    return {"description": "Write a SQL query", "messages": [*context, _text(text)]}


# -- completion -------------------------------------------------------------------------------

def complete_values(candidates: Iterable[str], prefix: str) -> dict[str, Any]:
    """A CompleteResult for candidates starting with ``prefix`` (case-insensitive), sorted, ≤ 100."""
    low = (prefix or "").lower()
    hits = sorted({c for c in candidates if c.lower().startswith(low)})
    return {"completion": {"values": hits[:_MAX_COMPLETIONS], "total": len(hits),
                           "hasMore": len(hits) > _MAX_COMPLETIONS}}


def key_completion_sql(table: Table, value: str, dialect: str) -> tuple[str, str]:
    """The statement listing up to 101 values of ``table``'s (single-column) primary key that start
    with ``value``, and its one parameter (a LIKE pattern with the wildcards in ``value`` escaped)."""
    col = quote_ident(table.primary_key[0])
    like = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    placeholder = "$1" if dialect == "postgresql" else "?1"
    sql = (f"SELECT DISTINCT CAST({col} AS TEXT) AS k FROM {qualified(table.schema, table.name)} "
           f"WHERE CAST({col} AS TEXT) LIKE {placeholder} ESCAPE '\\' ORDER BY 1 LIMIT 101")
    return sql, like

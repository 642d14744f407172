"""Config model of a ``type: sql`` connector entry.

``url`` is a SQLAlchemy async URL: ``postgresql+asyncpg://...`` or ``sqlite+aiosqlite:///path``
(a relative SQLite path resolves against the config file's folder). Named queries are validated
here, at load time: every ``:name`` placeholder in their SQL must be declared under ``params`` and
every declared parameter must be used, so a typo fails ``mcp-gateway validate`` and not a call.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from sqlalchemy.engine import make_url

from connectors.config import ConnectorConfig, Model
from gateway.protocol.patterns import portable_pattern

from .statements import StatementError, check_single_statement, named_placeholders

__all__ = ["QueryParam", "NamedQuery", "SQLConfig", "BUILTIN_TOOLS", "Exposure"]

# Local tool names the connector always defines; a named query may not reuse them.
BUILTIN_TOOLS = frozenset({"query", "list_tables", "describe_table", "explain", "execute"})


class QueryParam(Model):
    """One bound parameter of a named query (JSON Schema-like keys)."""

    type: Literal["string", "integer", "number", "boolean", "date", "datetime"] = "string"
    description: str | None = None
    default: Any = None
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = Field(None, ge=0)
    max_length: int | None = Field(None, ge=0)
    pattern: str | None = None
    # Required unless a default is given (explicit ``required: false`` makes it nullable).
    required: bool | None = None

    @field_validator("pattern")
    @classmethod
    def _portable(cls, value: str | None) -> str | None:
        # Published in the tool's inputSchema: clients compile it with JavaScript or Python's re.
        if value is None:
            return value
        portable = portable_pattern(value)
        if portable.pattern is None:
            raise ValueError(f"pattern {value!r} is not a regular expression JavaScript and Python both read: "
                             f"{portable.reason}")
        if portable.changed:
            raise ValueError(f"pattern {value!r} is not read alike by JavaScript and Python: write {portable.pattern!r}")
        return value

    @property
    def is_required(self) -> bool:
        if self.required is not None:
            return self.required
        return self.default is None


class NamedQuery(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    title: str | None = None
    description: str | None = None
    sql: str = Field(min_length=1)
    params: dict[str, QueryParam] = Field(default_factory=dict)
    max_rows: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _placeholders_match(self) -> NamedQuery:
        try:
            check_single_statement(self.sql)
        except StatementError as exc:
            raise ValueError(f"sql: {exc}") from None
        used = set(named_placeholders(self.sql))
        declared = set(self.params)
        if used - declared:
            raise ValueError(f"sql uses undeclared parameter(s): {', '.join(sorted(used - declared))}")
        if declared - used:
            raise ValueError(f"params declared but not used in sql: {', '.join(sorted(declared - used))}")
        if self.name in BUILTIN_TOOLS:
            raise ValueError(f"name {self.name!r} is a built-in tool of the sql connector")
        return self


class Exposure(Model):
    """Which tables and columns clients see (:mod:`connectors.sql.exposure` applies it).

    Table globs match ``schema.table`` or the bare table name; column globs the column name.
    ``tables`` empty: every table; ``hide_tables`` wins. ``columns`` maps a table glob to the
    columns served (the others are hidden); ``hide_columns`` maps a table glob to columns hidden
    (``"*": [password*]`` hides them everywhere).
    """

    tables: tuple[str, ...] = ()
    hide_tables: tuple[str, ...] = ()
    columns: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    hide_columns: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @property
    def everything(self) -> bool:
        return not (self.tables or self.hide_tables or self.columns or self.hide_columns)


class SQLConfig(ConnectorConfig):
    type: Literal["sql"]
    url: str = Field(min_length=1)
    # Default: ["public"] on PostgreSQL, ["main"] on SQLite.
    schemas: tuple[str, ...] = ()
    max_rows: int = Field(500, ge=1, le=100_000)
    # Byte budget of one result page (values as the database renders them); 0 turns it off.
    max_bytes: int = Field(4 * 1024 * 1024, ge=0)
    statement_timeout_s: float = Field(10.0, gt=0)
    allow_writes: bool = False
    # A role that is a superuser, may act outside transactions (CREATEROLE, pg_execute_server_program
    # ...) or, without allow_writes, may write, refuses to start unless this is true (PostgreSQL).
    allow_privileged: bool = False
    queries: tuple[NamedQuery, ...] = ()
    pool_size: int = Field(5, ge=1, le=200)
    connect_timeout_s: float = Field(5.0, gt=0)
    # Schema re-introspection period (list_changed / resources/updated on change); 0 disables.
    refresh_s: float = Field(60.0, ge=0)
    # Tables and columns shown to clients (schema resources, describe_table, rows, completions);
    # free SQL naming what is hidden is refused (a seatbelt: the role's grants are the mechanism).
    expose: Exposure = Exposure()

    @field_validator("url")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        # Never echo the URL in a message: it may hold a password.
        scheme = value.partition("://")[0]
        if scheme not in {"postgresql+asyncpg", "sqlite+aiosqlite"}:
            raise ValueError("url must start with postgresql+asyncpg:// or sqlite+aiosqlite://")
        try:
            make_url(value)
        except Exception:
            raise ValueError("url is not a valid database URL (scheme://user:password@host:port/database)") from None
        return value

    @field_validator("max_bytes")
    @classmethod
    def _sane_budget(cls, value: int) -> int:
        if 0 < value < 1024:
            raise ValueError("max_bytes must be at least 1024 (or 0 to turn the byte budget off)")
        return value

    @model_validator(mode="after")
    def _unique_queries(self) -> SQLConfig:
        names = [q.name for q in self.queries]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate named queries: {', '.join(dupes)}")
        return self

    @property
    def dialect(self) -> str:
        return "postgresql" if self.url.startswith("postgresql") else "sqlite"

"""The SQL connector: a PostgreSQL or SQLite database as schema resources, query tools, named
queries, prompts and completions.

Lifecycle. ``start`` builds the engine (a missing SQLite file is a config error) and introspects;
a database that cannot be reached at start does *not* fail the connector: it starts down and the
monitor task reconnects. The monitor re-introspects every ``refresh_s`` while up (a structural
change emits ``list_changed`` and ``resources/updated`` for subscribed tables) and probes with
backoff while down. A tool call that hits a connectivity error fails with a clear
:class:`ToolExecutionError`, marks the connector down (``health()``, readiness) and wakes the
monitor; the first successful probe or call brings it back up, without a restart.

Safety (see README.md, "Safety"). Caller SQL passes :func:`guard.check_read_statement` before it
reaches a read; reads are bounded by ``max_bytes`` in the backends; on PostgreSQL a role that is
too powerful (:func:`pg_session.privilege_findings`) makes ``start`` fail with a ConfigError naming
``allow_privileged`` — found later by the monitor, it takes the connector down and every call is
refused until the role is fixed.

Secrets. The URL's password is only given to the driver; every message that leaves this module
(tool errors, health details, logs) passes through the :class:`Redactor`.

Exceptions. Whatever the drivers raise (SQLAlchemy, asyncpg, aiosqlite, sqlite3, sockets) is
classified in one place, :meth:`SQLConnector._failure` (:func:`errors.classify`, redaction, health),
and becomes a gateway exception at one edge, :meth:`SQLConnector._edge`, entered around every
statement a call runs: a :class:`ToolExecutionError` for a tool (the model reads what went wrong),
``BackendUnavailable``/``InvalidParams``/``InternalError`` for a resource read. The ``except``
clauses left are control flow that calls ``_failure`` directly: ``start`` (a database that is down
is not a failed start), the monitor (must never die) and completion (best effort).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sqlalchemy.engine import make_url

from connectors.base import (
    Components,
    Connector,
    ConnectorEvents,
    Health,
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ToolSpec,
)
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import (
    BackendUnavailable,
    ConfigError,
    ExceptionMap,
    GatewayError,
    InternalError,
    InvalidParams,
    ResourceNotFound,
    ToolExecutionError,
    map_exceptions,
)
from gateway.protocol.names import public_name

from . import exposure, mapping
from . import schema as sch
from .backends import make_backend
from .config import NamedQuery, SQLConfig
from .engine import Backend, Page
from .errors import Failure, PrivilegedRole, Redactor, classify
from .guard import GuardError, check_read_statement
from .paging import PageCursor, decode_cursor
from .results import page_result, write_result
from .statements import StatementError, bind_named, check_single_statement
from .texttable import json_value
from .traced import traced_sql

if TYPE_CHECKING:
    from gateway.context import CallContext

__all__ = ["SQLConnector"]

log = logging.getLogger(__name__)

_BACKOFF_MIN_S = 0.2
_BACKOFF_MAX_S = 5.0
_SHAPE_INLINE_CELLS = 20_000  # pages with more cells are shaped off the event loop


class SQLConnector(Connector):
    kind = "sql"
    config: SQLConfig

    def __init__(self, config: SQLConfig, base_dir: Path = Path(".")) -> None:
        super().__init__(config, base_dir)
        url = make_url(config.url)
        self._redact = Redactor(url.password)
        self.safe_url = url.render_as_string(hide_password=True)
        self.dialect = config.dialect
        self._queries: dict[str, NamedQuery] = {q.name: q for q in config.queries}
        self._codec = CursorCodec()
        self._backend: Backend | None = None
        self._schemas: tuple[str, ...] = ()
        self._snapshot = sch.Snapshot.of(self.dialect, ())  # what is exposed of the schema (expose:)
        self._hidden = exposure.Hidden()
        self._fingerprints: dict[tuple[str, str], str] = {}
        self._info: dict[str, Any] = {}
        self._health = Health(False, "not started")
        self._subscriptions: set[str] = set()
        self._wake = asyncio.Event()
        self._monitor_task: asyncio.Task[None] | None = None
        self._refresh_lock = asyncio.Lock()
        self._warned_privileged = False
        self._refused: str | None = None  # why every call is refused (a privileged role), or None
        tools = mapping.builtin_tools(config, self.dialect)
        tools += [mapping.named_query_tool(q, config) for q in config.queries]
        self._template_uri = sch.row_uri_template(self.name)
        self.components = Components(
            tools=tuple(ToolSpec(t["name"], t) for t in tools),
            prompts=tuple(PromptSpec(p["name"], p) for p in mapping.prompt_definitions()),
            resource_templates=(ResourceTemplateSpec(self._template_uri, "row", {
                "uriTemplate": self._template_uri, "name": "row", "title": "Row by primary key",
                "description": "One row as JSON. key is the primary key value; composite keys are "
                               "comma-separated in key order (percent-encode commas inside values).",
                "mimeType": "application/json"}),))

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)
        # Every statement becomes a CLIENT span and a backend_call_duration observation.
        self._backend = traced_sql(make_backend(self.dialect, self.config.url, self.config.pool_size,
                                                self.config.connect_timeout_s, self.config.allow_writes,
                                                self.name, self.base_dir, self.config.max_bytes), instrumentation)
        self._schemas = self.config.schemas or self._backend.default_schemas
        try:
            await self._refresh(notify=False)
        except Exception as exc:
            # Control flow: a database that cannot be reached now does not fail the start (the
            # connector comes up down and the monitor reconnects); anything else does.
            failure = self._failure(exc, wake=False)
            if failure.kind != "unavailable":
                await self._backend.dispose()
                if failure.kind == "privileged":
                    raise ConfigError(failure.message, f"connectors[{self.name}].allow_privileged") from None
                raise InternalError(failure.message) from None
        self._monitor_task = asyncio.create_task(self._monitor(), name=f"sql-monitor-{self.name}")

    async def stop(self) -> None:
        task, self._monitor_task = self._monitor_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._backend is not None:
            await self._backend.dispose()

    def health(self) -> Health:
        return self._health

    def _set_health(self, up: bool, detail: str = "") -> None:
        extra = {"dialect": self.dialect, "url": self.safe_url, "tables": len(self._snapshot.tables)}
        new = Health(up, detail, extra)
        changed = new.up != self._health.up
        self._health = new
        if changed:
            (log.info if up else log.warning)("sql connector %s is %s%s", self.name, "up" if up else "down",
                                              f": {detail}" if detail else "")
            if self.events is not None:
                self.events.health_changed(new)
                self.events.log("info" if up else "error",
                                {"connector": self.name, "up": up, "detail": detail}, f"sql.{self.name}")

    async def _monitor(self) -> None:
        delay = _BACKOFF_MIN_S
        while True:
            if self._health.up:
                timeout: float | None = self.config.refresh_s or None
                delay = _BACKOFF_MIN_S
            else:
                timeout, delay = delay, min(delay * 2, _BACKOFF_MAX_S)
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the cancellation from
            # stop() when the event is set at the same moment.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._refresh(notify=True)
            except Exception as exc:
                # Control flow: the monitor must never die. A connectivity failure has marked the
                # connector down (without waking this loop, which backs off); others are logged.
                failure = self._failure(exc, wake=False)
                if failure.kind not in ("unavailable", "privileged"):  # those two are in the health detail
                    log.warning("sql connector %s: schema refresh failed: %s", self.name, failure.message)

    # -- introspection -----------------------------------------------------------------------
    async def _refresh(self, notify: bool) -> None:
        """Re-read the schema; report structural changes. Raises the driver's exception."""
        assert self._backend is not None
        async with self._refresh_lock:
            snapshot, info = await self._backend.introspect(self._schemas, self.config.statement_timeout_s)
            snapshot, self._hidden = exposure.apply(snapshot, self.config.expose)
            self._info = info
            self._check_privileges(info)
            old, new = self._fingerprints, snapshot.fingerprints()
            self._snapshot, self._fingerprints = snapshot, new
            self.components = replace(self.components, resources=self._build_resource_specs(snapshot))
            self._set_health(True)
            if not notify or old == new:
                return
            if self.events is not None:
                self.events.components_changed()
                changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
                for schema_name, table in changed:
                    uri = sch.table_uri(self.name, schema_name, table)
                    if uri in self._subscriptions:
                        self.events.resource_updated(uri)
                overview = sch.overview_uri(self.name)
                if overview in self._subscriptions:
                    self.events.resource_updated(overview)

    def _check_privileges(self, info: dict[str, Any]) -> None:
        """Refuse a role that is too powerful unless the config accepts it (``allow_privileged``)."""
        findings: list[str] = info.get("privileged") or []
        if not findings:
            self._refused = None
            return
        role = info.get("user")
        if self.config.allow_privileged:
            if not self._warned_privileged:
                self._warned_privileged = True
                log.warning("sql connector %s connects as role %s, which is privileged (%s); allowed by "
                            "allow_privileged: true. Use a least-privilege role in production.",
                            self.name, role, "; ".join(findings))
            self._refused = None
            return
        newly = self._refused is None
        self._refused = (f"Refused: connector {self.name} connects as role {role}, which is privileged: "
                         f"{'; '.join(findings)}. Connect as a least-privilege role (SELECT only), or set "
                         "allow_privileged: true on this connector to accept the risk.")
        self._set_health(False, self._refused)
        if newly:
            self._wake.set()  # the monitor re-checks with backoff: fixing the role brings it back
        raise PrivilegedRole(self._refused)

    def _usable(self) -> None:
        if self._refused is not None:
            raise ToolExecutionError(self._refused, status="privileged")

    def _build_resource_specs(self, snapshot: sch.Snapshot) -> tuple[ResourceSpec, ...]:
        overview = sch.overview_uri(self.name)
        specs = [ResourceSpec(overview, "overview", {
            "uri": overview, "name": "overview", "title": f"Database {self.name}",
            "description": f"All tables and views of {self.name} with their columns and relationships.",
            "mimeType": "text/markdown"})]
        for t in snapshot.tables:
            d = sch.resource_definition(t, self.name)
            specs.append(ResourceSpec(d["uri"], d["name"], d))
        return tuple(specs)

    async def refresh(self) -> None:
        """Re-introspect now (also what ``list_tables`` with ``refresh: true`` does)."""
        await self._refresh(notify=True)

    # -- components --------------------------------------------------------------------------
    def capabilities(self) -> set[str]:
        return {"tools", "resources", "prompts", "completions", "subscribe"}

    def owns_uri(self, uri: str) -> bool:
        return sch.parse_uri(self.name, uri) is not None

    # -- the exception edge ------------------------------------------------------------------
    def _failure(self, exc: BaseException, timeout_s: float | None = None, *, wake: bool = True) -> Failure:
        """The one classification of what the drivers raise (:func:`errors.classify`), its
        message redacted. A connectivity failure marks the connector down and wakes the monitor to
        reconnect (``wake=False`` from the monitor itself, which backs off, and from ``start``)."""
        failure = classify(exc, timeout_s)
        failure = replace(failure, message=self._redact(failure.message))
        if failure.kind == "unavailable":
            self._set_health(False, failure.message)
            if wake:
                self._wake.set()
        return failure

    def _edge(self, timeout_s: float, surface: Callable[[Failure], GatewayError]) -> ExceptionMap:
        """Around every statement a call runs: any exception from the drivers leaves as
        ``surface(failure)``; ``timeout_s`` is the statement's timeout, for the message. The key
        is ``Exception`` because the drivers share no base class (SQLAlchemy, asyncpg, sqlite3,
        OSError ...) and :func:`errors.classify` knows them all, wrapped ones included."""
        return map_exceptions({Exception: lambda exc: surface(self._failure(exc, timeout_s))})

    def _tool_edge(self, ctx: CallContext, timeout_s: float) -> ExceptionMap:
        """A tool's statement: a :class:`ToolExecutionError` (``isError``) with the SQLSTATE or tag."""

        def tool_error(failure: Failure) -> ToolExecutionError:
            ctx.record.backend_status = failure.status
            log.info("sql connector %s: tool failed (%s): %s", self.name, failure.kind, failure.message)
            return ToolExecutionError(failure.message, status=failure.status)

        return self._edge(timeout_s, tool_error)

    def _timeout(self, ctx: CallContext) -> float:
        remaining = ctx.remaining()
        limit = self.config.statement_timeout_s
        return max(0.001, min(limit, remaining)) if remaining is not None else limit

    def _succeeded(self) -> None:
        if not self._health.up:
            self._set_health(True)
            self._wake.set()  # re-read the schema now that the database is back

    async def _read(self, sql: str, args: list[Any], offset: int, limit: int, ctx: CallContext) -> Page:
        assert self._backend is not None
        self._usable()
        timeout = self._timeout(ctx)
        with self._tool_edge(ctx, timeout):
            page = await self._backend.read_page(sql, args, offset, limit, timeout)
        self._succeeded()
        return page

    # -- tools -------------------------------------------------------------------------------
    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        if ctx.record.backend_target is None:
            ctx.record.backend_target = name
        if name == "query":
            return await self._tool_query(arguments, ctx)
        if name == "list_tables":
            return await self._tool_list_tables(arguments, ctx)
        if name == "describe_table":
            return self._tool_describe(arguments)
        if name == "explain":
            return await self._tool_explain(arguments, ctx)
        if name == "execute" and self.config.allow_writes:
            return await self._tool_execute(arguments, ctx)
        query = self._queries.get(name)
        if query is not None:
            return await self._tool_named(query, arguments, ctx)
        raise InvalidParams(f"Unknown tool: {name}")

    def _statement(self, sql: Any, params: Any, read: bool = True) -> tuple[str, list[Any]]:
        """Single-statement check, the read-only guard (``read``) and parameter binding; errors are
        for the model to fix."""
        if not isinstance(sql, str):
            raise ToolExecutionError("Argument 'sql' must be a string holding one SQL statement.")
        try:
            statement = check_single_statement(sql)
            if read:
                check_read_statement(statement, self.dialect)
            exposure.check_free_sql(statement, self._hidden)
        except StatementError as exc:
            raise ToolExecutionError(f"Refused: {exc}.", status="statement_check") from None
        except GuardError as exc:
            raise ToolExecutionError(exc.message, status=exc.status) from None
        if params is None:
            return statement, []
        if isinstance(params, list):
            return statement, list(params)
        if isinstance(params, dict):
            try:
                return bind_named(statement, params, self.dialect)
            except KeyError as exc:
                raise ToolExecutionError(f"No value in 'params' for placeholder :{exc.args[0]}.") from None
        raise ToolExecutionError("Argument 'params' must be an array (positional) or an object (named).")

    async def _page_result(self, tool: str, sql: str, params: Any, page: Page, offset: int) -> dict[str, Any]:
        args = (self._codec, tool, sql, params, page, offset, self.config.max_bytes)
        if len(page.rows) * max(1, len(page.columns)) < _SHAPE_INLINE_CELLS:
            return page_result(*args)
        # A large page: shape it on a worker thread so the event loop keeps serving others (the
        # pure-Python shaping yields the GIL every few milliseconds).
        return await asyncio.to_thread(page_result, *args)

    def _decode(self, token: Any, tool: str) -> PageCursor:
        try:
            return decode_cursor(self._codec, token, tool)
        except InvalidParams as exc:
            raise ToolExecutionError(f"{exc.message}. Start again without a cursor.", status="bad_cursor") from None

    async def _tool_query(self, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        sql, params, offset = arguments.get("sql"), arguments.get("params"), 0
        if arguments.get("cursor") is not None:
            page_cursor = self._decode(arguments["cursor"], "query")
            if sql is not None and sql != page_cursor.sql:
                raise ToolExecutionError("This cursor belongs to another statement: send the same sql as the "
                                         "previous page, or no cursor.", status="bad_cursor")
            sql, offset = page_cursor.sql, page_cursor.offset
            params = page_cursor.params if params is None else params
        statement, args = self._statement(sql, params)
        page = await self._read(statement, args, offset, self.config.max_rows, ctx)
        return await self._page_result("query", str(sql), params, page, offset)

    async def _tool_named(self, query: NamedQuery, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        offset, raw = 0, {k: v for k, v in arguments.items() if k != "cursor"}
        if arguments.get("cursor") is not None:
            page_cursor = self._decode(arguments["cursor"], query.name)
            offset, raw = page_cursor.offset, page_cursor.params or {}
        try:
            values = mapping.coerce_arguments(query, raw)
        except mapping.ArgumentError as exc:
            raise ToolExecutionError(str(exc), status="invalid_arguments") from None
        sql, args = bind_named(check_single_statement(query.sql), values, self.dialect)
        page = await self._read(sql, args, offset, query.max_rows or self.config.max_rows, ctx)
        return await self._page_result(query.name, "", raw, page, offset)

    async def _tool_list_tables(self, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        if arguments.get("refresh"):
            with self._tool_edge(ctx, self.config.statement_timeout_s):
                await self._refresh(notify=True)
        only = arguments.get("schema")
        tables = [t for t in self._snapshot.tables if only is None or t.schema == only]
        items = [{"schema": t.schema, "name": t.name, "kind": t.kind, "rowEstimate": t.row_estimate,
                  "columns": len(t.columns), "uri": sch.table_uri(self.name, t.schema, t.name)} for t in tables]
        lines = [f"{t.qualified_name} ({t.kind}, {len(t.columns)} columns"
                 + (f", ~{t.row_estimate} rows" if t.row_estimate is not None else "") + ")" for t in tables]
        text = "\n".join(lines) if lines else "No tables or views" + (f" in schema {only}" if only else "") + "."
        return {"content": [{"type": "text", "text": text}], "structuredContent": {"tables": items}}

    def _find(self, name: Any) -> sch.Table:
        table = self._snapshot.find(name, self._schemas[0] if self._schemas else None) if isinstance(name, str) else None
        if table is None:
            known = ", ".join(t.qualified_name for t in self._snapshot.tables[:50])
            raise ToolExecutionError(f"Unknown table {name!r}. Known tables: {known or 'none'}.", status="unknown_table")
        return table

    def _tool_describe(self, arguments: dict[str, Any]) -> dict[str, Any]:
        table = self._find(arguments.get("table"))
        return {"content": [{"type": "text", "text": sch.table_text(table)}],
                "structuredContent": sch.table_json(table, self.name)}

    async def _tool_explain(self, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        assert self._backend is not None
        self._usable()
        statement, args = self._statement(arguments.get("sql"), arguments.get("params"))
        timeout = self._timeout(ctx)
        with self._tool_edge(ctx, timeout):
            plan = await self._backend.explain(statement, args, bool(arguments.get("analyze")), timeout)
        self._succeeded()
        return {"content": [{"type": "text", "text": plan}]}

    async def _tool_execute(self, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        assert self._backend is not None
        self._usable()
        statement, args = self._statement(arguments.get("sql"), arguments.get("params"), read=False)
        timeout = self._timeout(ctx)
        with self._tool_edge(ctx, timeout):
            result = await self._backend.write(statement, args, self.config.max_rows, timeout)
        self._succeeded()
        self._wake.set()  # DDL may have changed the schema: re-introspect soon
        return write_result(result)

    # -- resources ---------------------------------------------------------------------------
    async def read_resource(self, uri: str, ctx: CallContext) -> dict[str, Any]:
        parsed = sch.parse_uri(self.name, uri)
        if parsed is None:
            raise ResourceNotFound(uri)
        if parsed[0] == "overview":
            extra = {"readOnly": not self.config.allow_writes, "maxRows": self.config.max_rows,
                     "maxBytes": self.config.max_bytes}
            data = sch.overview_json(self._snapshot, self.name, extra)
            return {"contents": [
                {"uri": uri, "mimeType": "text/markdown", "text": sch.overview_text(self._snapshot, self.name)},
                {"uri": uri, "mimeType": "application/json", "text": json.dumps(data, default=str)}]}
        table = self._snapshot.by_key.get((parsed[1], parsed[2]))
        if table is None:
            raise ResourceNotFound(uri)
        if parsed[0] == "table":
            return {"contents": [
                {"uri": uri, "mimeType": "text/markdown", "text": sch.table_text(table)},
                {"uri": uri, "mimeType": "application/json",
                 "text": json.dumps(sch.table_json(table, self.name), default=str)}]}
        return await self._read_row(uri, table, parsed[3], ctx)

    async def _read_row(self, uri: str, table: sch.Table, key: str, ctx: CallContext) -> dict[str, Any]:
        assert self._backend is not None
        if not table.primary_key:
            raise InvalidParams(f"{table.qualified_name} has no primary key: read rows with the query tool")
        values = [unquote(v) for v in key.split(",")]
        if len(values) != len(table.primary_key):
            raise InvalidParams(f"{table.qualified_name} has a {len(table.primary_key)}-column key "
                                f"({', '.join(table.primary_key)}); got {len(values)} value(s)")
        sql = self._backend.row_sql(table, table.primary_key)
        timeout = self._timeout(ctx)
        if self._refused is not None:
            raise BackendUnavailable(self._refused)
        with self._edge(timeout, _request_error):
            page = await self._backend.read_page(sql, values, 0, 1, timeout)
        self._succeeded()
        if not page.rows:
            raise ResourceNotFound(uri)
        if page.cut:
            raise InvalidParams(f"This row is larger than the byte budget (max_bytes = {self.config.max_bytes}): "
                                "read it with the query tool, selecting fewer columns or substring()s.")
        row = {c: json_value(v) for c, v in zip(page.columns, page.rows[0][:len(page.columns)], strict=True)}
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": json.dumps(row)}]}

    async def subscribe(self, uri: str, ctx: CallContext) -> None:
        parsed = sch.parse_uri(self.name, uri)
        if parsed is None or (parsed[0] != "overview" and (parsed[1], parsed[2]) not in self._snapshot.by_key):
            raise ResourceNotFound(uri)
        if parsed[0] == "row":
            raise InvalidParams("Rows are not watched: subscribe to the table resource "
                                f"{sch.table_uri(self.name, parsed[1], parsed[2])} for schema changes")
        self._subscriptions.add(uri)

    async def unsubscribe(self, uri: str, ctx: CallContext | None) -> None:
        self._subscriptions.discard(uri)

    # -- prompts and completion --------------------------------------------------------------
    def _query_tool_name(self) -> str:
        return public_name(self.config.public_prefix, "query", self.config.portable_names)

    def _prompt_table(self, name: Any) -> sch.Table:
        try:
            return self._find(name)
        except ToolExecutionError as exc:
            raise InvalidParams(exc.message) from None

    async def get_prompt(self, name: str, arguments: dict[str, str], ctx: CallContext) -> dict[str, Any]:
        if name == "explore_table":
            if not arguments.get("table"):
                raise InvalidParams("Missing required argument for prompt explore_table: table")
            table = self._prompt_table(arguments["table"])
            column = arguments.get("column") or None
            if column and table.column(column) is None:
                raise InvalidParams(f"{table.qualified_name} has no column {column!r}")
            return mapping.render_explore_table(self.name, table, column, self._query_tool_name())
        if name == "write_query":
            if not arguments.get("question"):
                raise InvalidParams("Missing required argument for prompt write_query: question")
            names = [n.strip() for n in (arguments.get("tables") or "").split(",") if n.strip()]
            tables = [self._prompt_table(n) for n in names]
            return mapping.render_write_query(self.name, self._snapshot, tables, arguments["question"],
                                              self._query_tool_name(), self.config.max_rows)
        raise InvalidParams(f"Unknown prompt: {name}")

    def _table_names(self) -> list[str]:
        default = self._schemas[0] if self._schemas else None
        bare = [t.name for t in self._snapshot.tables]
        return [t.name if t.schema == default and bare.count(t.name) == 1 else t.qualified_name
                for t in self._snapshot.tables]

    async def complete(self, ref: dict[str, Any], argument: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        arg, value = argument.get("name"), str(argument.get("value") or "")
        context = (ctx.params.get("context") or {}).get("arguments") or {}
        if ref.get("type") == "ref/prompt":
            if arg == "table":
                return mapping.complete_values(self._table_names(), value)
            if arg == "column":
                table = self._snapshot.find(str(context.get("table", "")), self._schemas[0] if self._schemas else None)
                return mapping.complete_values([c.name for c in table.columns] if table else [], value)
            if arg == "tables":  # comma-separated: complete the last item, keep the others
                head, _, last = value.rpartition(",")
                prefix = f"{head}, " if head else ""
                done = {n.strip() for n in head.split(",")}
                names = [n for n in self._table_names() if n not in done]
                result = mapping.complete_values(names, last.strip())
                result["completion"]["values"] = [prefix.replace(" ,", ",") + v for v in result["completion"]["values"]]
                return result
        elif ref.get("uri") == self._template_uri:
            if arg == "schema":
                return mapping.complete_values({t.schema for t in self._snapshot.tables}, value)
            if arg == "table":
                schema_name = context.get("schema")
                return mapping.complete_values(
                    [t.name for t in self._snapshot.tables if schema_name in (None, t.schema)], value)
            if arg == "key":
                return await self._complete_key(context, value, ctx)
        return {"completion": {"values": [], "hasMore": False}}

    async def _complete_key(self, context: dict[str, Any], value: str, ctx: CallContext) -> dict[str, Any]:
        """Primary-key values starting with ``value`` (single-column keys; read-only, 100 at most)."""
        table = self._snapshot.by_key.get((str(context.get("schema", "")), str(context.get("table", ""))))
        if table is None or len(table.primary_key) != 1 or self._backend is None or self._refused is not None:
            return {"completion": {"values": [], "hasMore": False}}
        sql, like = mapping.key_completion_sql(table, value, self.dialect)
        try:
            page = await self._backend.read_page(sql, [like], 0, 101, min(2.0, self._timeout(ctx)))
        except Exception as exc:
            # Control flow: completion is best effort, a failed lookup offers nothing (but a lost
            # connection still marks the connector down).
            self._failure(exc, 2.0)
            return {"completion": {"values": [], "hasMore": False}}
        values = [str(r[0]) for r in page.rows]
        return {"completion": {"values": values[:100], "hasMore": len(values) > 100}}


def _request_error(failure: Failure) -> GatewayError:
    """A protocol request's statement (``resources/read`` of a row): a JSON-RPC error."""
    if failure.kind == "unavailable":
        return BackendUnavailable(failure.message)
    if failure.kind == "sql":  # e.g. a key value that does not fit the column's type
        return InvalidParams(failure.message)
    return InternalError(failure.message)

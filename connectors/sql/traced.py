"""Tracing for SQL backends: a proxy that puts every statement in a CLIENT span.

``traced_sql(backend, instrumentation)`` wraps a :class:`connectors.sql.engine.Backend`:
``read_page``, ``write`` and ``explain`` each run inside the connector's
:meth:`~connectors.instrumentation.Instrumentation.backend_call` (span ``{OPERATION}`` with
``db.system.name``, ``db.operation.name`` and the statement text, plus the
``backend_call_duration_seconds{kind="sql"}`` observation); every other attribute and method
(``dialect``, ``row_sql``, ``introspect``, ``dispose`` ...) passes straight through.

The statement text is the one the connector sends: parameterised (values travel separately), so
it is safe to record; it is cut at :data:`MAX_STATEMENT` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connectors.instrumentation import Instrumentation

__all__ = ["TracedSQLBackend", "traced_sql", "operation_of", "MAX_STATEMENT"]

MAX_STATEMENT = 2000
_SYSTEMS = {"postgresql": "postgresql", "sqlite": "sqlite"}


def operation_of(sql: str) -> str:
    """The statement's first keyword, upper-cased (``SELECT``, ``INSERT``, ``WITH`` ...)."""
    for word in sql.lstrip("( \t\r\n").split(None, 1)[:1]:
        if word.isalpha():
            return word.upper()
    return "SQL"


class TracedSQLBackend:
    __slots__ = ("_inner", "_instrumentation", "_system")

    def __init__(self, inner: Any, instrumentation: Instrumentation) -> None:
        self._inner = inner
        self._instrumentation = instrumentation
        dialect = str(getattr(inner, "dialect", ""))
        self._system = _SYSTEMS.get(dialect, dialect or "other_sql")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _attrs(self, sql: str, operation: str) -> dict[str, Any]:
        return {"db.system.name": self._system, "db.operation.name": operation,
                "db.query.text": sql[:MAX_STATEMENT]}

    async def read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float) -> Any:
        op = operation_of(sql)
        with self._instrumentation.backend_call(op, self._attrs(sql, op)):
            return await self._inner.read_page(sql, args, offset, limit, timeout_s)

    async def write(self, sql: str, args: Sequence[Any], limit: int, timeout_s: float) -> Any:
        op = operation_of(sql)
        with self._instrumentation.backend_call(op, self._attrs(sql, op)):
            return await self._inner.write(sql, args, limit, timeout_s)

    async def explain(self, sql: str, args: Sequence[Any], analyze: bool, timeout_s: float) -> Any:
        with self._instrumentation.backend_call("EXPLAIN", self._attrs(sql, "EXPLAIN")):
            return await self._inner.explain(sql, args, analyze, timeout_s)


def traced_sql(backend: Any, instrumentation: Instrumentation) -> Any:
    """``backend`` with its statements traced and timed (typed as the backend it wraps)."""
    return TracedSQLBackend(backend, instrumentation)

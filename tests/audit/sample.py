"""Sample audit events for the audit tests and ``bench/audit_replay.py``.

Kept apart from the test modules so that the bench, which measures its own process's memory,
does not import pytest to get them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gateway.audit.events import capture
from gateway.context import CallContext, Principal

__all__ = ["sample_ctx", "sample_event"]


def sample_ctx(i: int, arguments: dict[str, Any] | None = None, principal: str = "alice") -> CallContext:
    session = SimpleNamespace(id="sess-1", transport="streamable_http",
                              client_info={"name": "claude", "version": "9.9"})
    ctx = CallContext(session=session, method="tools/call", request_id=i, params={},  # type: ignore[arg-type]
                      principal=Principal(principal), target=f"shop_tool{i % 3}",
                      arguments=arguments or {"n": i},
                      traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    ctx.record.connector, ctx.record.backend_target, ctx.record.backend_status = "shop", f"tool{i % 3}", 200
    return ctx


def sample_event(i: int, **kw: Any) -> dict[str, Any]:
    return capture(sample_ctx(i, **kw), "ok", None, None, 1.5)

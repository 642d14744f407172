"""Timeout filter: abandons a call when its deadline passes (-32001), so a slow backend cannot hold
a client forever. The deadline comes from the connector's ``timeout_s`` or the gateway's
``request_timeout_s``; the catalog's resolution of the target decides which.

A ``tools/call`` that runs out of time is a tool failure, as when the connector's own clock ran
out first (``dispatch._call_tool``): a result with ``isError`` (:meth:`ToolExecutionError.timed_out`),
outcome ``timeout``, so the two clocks racing never change the shape a client sees."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.context import CallContext
from gateway.filters import Handler
from gateway.protocol.errors import RequestTimeout, ToolExecutionError

__all__ = ["TimeoutFilter"]


class TimeoutFilter:
    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        remaining = ctx.remaining()
        if remaining is None:
            return await call_next(ctx)
        try:
            async with asyncio.timeout(remaining):
                return await call_next(ctx)
        except TimeoutError:
            message = f"{ctx.method} {ctx.target} timed out after {remaining:.1f}s".replace("  ", " ")
            if ctx.method != "tools/call":
                raise RequestTimeout(message) from None
        failure = ToolExecutionError.timed_out(message)
        ctx.record.outcome, ctx.record.backend_status = "timeout", failure.status
        return failure.to_result()


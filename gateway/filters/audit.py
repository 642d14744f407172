"""Audit filter: one event for every request that passes the chain, including refusals.

It sits outside auth and rate limiting (see docs/architecture.md), so denied and limited attempts are
recorded too. The outcome is ``ctx.record.outcome`` when an inner layer set it, else derived from
the result (``isError`` → tool_error) or the exception. Recording costs a dict build and a
``put_nowait`` on the request path; redaction, serialisation and all I/O happen in the
:class:`~gateway.audit.writer.AuditWriter` task, which the gateway starts with the filter and stops
(flushing the queue) after in-flight requests have finished.

With ``audit.durability: strict`` the filter waits, before it returns (so before the response is
sent), until the writer reports the event durable: committed, or fsync'd to the spill file. A
cancelled request is not waited for: no response is sent for it. An event that is neither (the
writer reports :class:`~gateway.audit.writer.NotRecorded`, or the spill file refused it at once)
makes the call answer an internal error (-32603) instead of its result: strict never answers a
call it did not record. (The call itself did run.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gateway.audit.events import capture
from gateway.audit.writer import AuditWriter, NotRecorded
from gateway.context import CallContext
from gateway.filters import Handler
from gateway.protocol.errors import (
    INTERNAL_ERROR,
    REQUEST_CANCELLED,
    InternalError,
    ProtocolError,
)

__all__ = ["AuditFilter", "outcome_for", "result_error_text"]

log = logging.getLogger("gateway.audit")

_OUTCOME_BY_CODE = {
    -32003: "denied",
    -32029: "rate_limited",
    -32602: "invalid",
    -32600: "invalid",
    -32700: "invalid",
    -32601: "not_found",
    -32002: "not_found",
    -32001: "timeout",
    -32800: "cancelled",
}


def result_error_text(result: dict[str, Any]) -> str:
    """The error text of a failed tool result (``isError``): its text content, else its
    structured content, cut like every audited message; never empty."""
    content = result.get("content")
    parts = [item["text"] for item in content if isinstance(item, dict) and isinstance(item.get("text"), str)] \
        if isinstance(content, list) else []
    text = " ".join(parts).strip()
    if not text and result.get("structuredContent") is not None:
        text = str(result["structuredContent"])
    return text[:500] or "the tool reported an error without a message"


def outcome_for(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, ProtocolError):
        return _OUTCOME_BY_CODE.get(exc.code, "error"), exc.code
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled", REQUEST_CANCELLED
    return "error", INTERNAL_ERROR


class AuditFilter:
    def __init__(self, writer: AuditWriter) -> None:
        self.writer = writer

    async def start(self) -> None:
        await self.writer.start()

    async def stop(self) -> None:
        await self.writer.stop()

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            outcome, code = outcome_for(exc)
            message = (exc.message if isinstance(exc, ProtocolError) else str(exc)[:500]) or type(exc).__name__
            durable = self._record(ctx, ctx.record.outcome or outcome, code, message)
            if durable is not None and not isinstance(exc, asyncio.CancelledError):
                await _durable(durable)
            raise
        failed = bool(result.get("isError"))
        outcome = ctx.record.outcome or ("tool_error" if failed else "ok")
        durable = self._record(ctx, outcome, None, result_error_text(result) if failed else None)
        if durable is not None:
            await _durable(durable)
        return result

    def _record(self, ctx: CallContext, outcome: str, code: int | None,
                message: str | None) -> asyncio.Future[None] | None:
        """Submit the event; in strict mode, the future that says it is durable. Raises
        :class:`InternalError` in strict mode when the event could not even be submitted."""
        try:
            event = capture(ctx, outcome, code, message, (time.perf_counter() - ctx.started) * 1000.0)
            return self.writer.submit(event)
        except Exception as exc:  # batch mode: auditing never turns a served request into a failure
            log.exception("could not record audit event for %s", ctx.method)
            if self.writer.strict:
                raise _not_recorded() from exc
            return None


def _not_recorded() -> InternalError:
    return InternalError("the call was not answered: its audit event could not be recorded "
                         "(audit.durability: strict)")


async def _durable(waiter: asyncio.Future[None]) -> None:
    """Wait until the writer reports the event durable; an unrecorded event fails the call."""
    try:
        await waiter
    except NotRecorded as exc:
        raise _not_recorded() from exc


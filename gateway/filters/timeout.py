"""Timeout filter: abandons a call when its deadline passes (-32001), so a slow backend cannot hold
a client forever. The deadline comes from the connector's ``timeout_s`` or the gateway's
``request_timeout_s``; the catalog's resolution of the target decides which."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.context import CallContext
from gateway.filters import Handler
from gateway.protocol.errors import RequestTimeout

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
            raise RequestTimeout(f"{ctx.method} {ctx.target} timed out after {remaining:.1f}s".replace("  ", " ")) from None


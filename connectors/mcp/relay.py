"""Relaying what an upstream sends *about one forwarded request* back to its downstream session.

Every forwarded request carries a :class:`Relay` as its owner in the upstream session. Upstream
progress, logs and server→client requests attributed to that request go through it, in arrival
order (each relayed message waits for the previous one), and the connector drains it before
returning the response, so a client never sees a request's notifications after its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.context import CallContext

    from .client import UpstreamSession

__all__ = ["Relay", "sole_owner"]

log = logging.getLogger("connectors.mcp")


class Relay:
    """The downstream side of one forwarded request."""

    __slots__ = ("ctx", "_last")

    def __init__(self, ctx: CallContext) -> None:
        self.ctx = ctx
        self._last: asyncio.Task[None] | None = None

    def push(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        self._last = asyncio.create_task(_after(self._last, make))

    async def drain(self) -> None:
        if self._last is not None:
            with contextlib.suppress(Exception):
                await self._last


async def _after(prev: asyncio.Task[None] | None, make: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    if prev is not None:
        with contextlib.suppress(Exception):
            await prev
    try:
        await make()
    except Exception as exc:  # the downstream session may be gone: nothing to relay to
        log.debug("relaying to a downstream session failed: %s", exc)


def sole_owner(session: UpstreamSession) -> Relay | None:
    """For messages no transport relates to a request (stdio, legacy SSE): the newest request in
    flight, provided every request in flight comes from the same downstream session."""
    owners = [o for o in session.owners() if isinstance(o, Relay)]  # (not the listen request's)
    if not owners:
        return None
    sid = owners[-1].ctx.session.id
    if all(o.ctx.session.id == sid for o in owners):
        return owners[-1]
    return None

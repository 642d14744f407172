"""Routed messages by kind, and request/reply between replicas, over a :class:`StateStore`.

Every message carries its kind in ``t``; :meth:`Bus.on` registers the one handler of a kind
(the Streamable HTTP transport's session messages, the MRTR router's retries). :meth:`Bus.ask`
sends a request to one replica and waits, bounded, for its ``reply``; the replica answering may
send ``event`` messages first (progress, log lines of a call it runs for the asker), which the
asker's ``on_event`` receives in order.

A replica that is gone is known at once (nobody received the request: :class:`ReplicaGone`); one
that dies after taking it leaves the asker waiting until ``timeout`` (its caller's own deadline).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Coroutine
from typing import Any

from .base import StateStore

__all__ = ["Bus", "ReplicaGone", "Handler", "OnEvent"]

log = logging.getLogger("gateway.state")

Handler = Callable[[dict[str, Any]], None]
OnEvent = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


class ReplicaGone(Exception):
    """The replica a message was for does not listen any more (it stopped or died)."""


class Bus:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._handlers: dict[str, Handler] = {}
        self._waiting: dict[str, tuple[asyncio.Future[dict[str, Any]], OnEvent]] = {}
        self._events: set[asyncio.Task[None]] = set()

    def on(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    def deliver(self, message: dict[str, Any]) -> None:
        """What the store calls with each message routed to this replica."""
        kind = message.get("t")
        if kind in ("reply", "event"):
            waiting = self._waiting.get(str(message.get("corr")))
            msg = message.get("msg")
            if waiting is None or not isinstance(msg, dict):
                return
            future, on_event = waiting
            if kind == "reply":
                if not future.done():
                    future.set_result(msg)
            else:
                task = asyncio.get_running_loop().create_task(on_event(msg))
                self._events.add(task)
                task.add_done_callback(self._events.discard)
            return
        handler = self._handlers.get(str(kind))
        if handler is not None:
            handler(message)

    async def ask(self, replica: str, kind: str, body: dict[str, Any], on_event: OnEvent,
                  timeout: float) -> dict[str, Any]:
        """Send ``body`` to ``replica`` as a ``kind`` request; its reply, within ``timeout``."""
        corr = secrets.token_hex(8)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[corr] = (future, on_event)
        try:
            reached = await self.store.route(replica, {**body, "t": kind, "corr": corr})
            if not reached:
                raise ReplicaGone(replica)
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._waiting.pop(corr, None)

    async def reply(self, request: dict[str, Any], msg: dict[str, Any]) -> None:
        await self.store.route(str(request.get("from")), {"t": "reply", "corr": request.get("corr"), "msg": msg})

    async def event(self, request: dict[str, Any], msg: dict[str, Any]) -> None:
        await self.store.route(str(request.get("from")), {"t": "event", "corr": request.get("corr"), "msg": msg})

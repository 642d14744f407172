"""The ``subscriptions/listen`` request a modern upstream's change notifications arrive on
(specification 2026-07-28, basic/patterns/subscriptions.mdx).

A :class:`Listener` keeps one listen request open on a modern
:class:`~connectors.mcp.client.UpstreamSession`, asking for every list change
(``toolsListChanged``, ``promptsListChanged``, ``resourcesListChanged``) and ``resources/updated``
for the URIs the gateway has subscribed (``resourceSubscriptions``). The notifications reach the
connector's ``on_notification`` like any other (on HTTP on the listen request's own response
stream, on stdio tagged with ``io.modelcontextprotocol/subscriptionId``); the connector hands the
``notifications/subscriptions/acknowledged`` to :meth:`Listener.acknowledged`.

:meth:`Listener.update` re-opens the listen with a new set of URIs (the old request is cancelled:
its stream closed on HTTP, ``notifications/cancelled`` on stdio) and waits for the new
acknowledgement. A listen that drops (the stream ends, the upstream answers it, an error) is
opened again after a backoff with jitter; once it is acknowledged again ``on_reopened`` runs (the
connector re-lists: changes made while nobody listened were missed). An upstream that does not
know the method (-32601) is not asked again. The listener ends with its session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from gateway.protocol.errors import MethodNotFound, ProtocolError
from gateway.protocol.meta import SUBSCRIPTION_ID

from .client import UpstreamSession

__all__ = ["Listener"]

log = logging.getLogger("connectors.mcp")


class Listener:
    """The listen request of one modern upstream channel (see the module doc)."""

    def __init__(self, session: UpstreamSession, *, initial_s: float, max_s: float,
                 on_reopened: Callable[[], None]) -> None:
        self._session = session
        self._initial_s = initial_s
        self._max_s = max_s
        self._on_reopened = on_reopened
        self._uris: frozenset[str] = frozenset()
        self._task: asyncio.Task[None] | None = None
        self._rid: int | None = None
        self._ack = asyncio.Event()
        self._lock = asyncio.Lock()
        self._dropped = False
        self.unsupported = False
        self.acknowledged_filter: dict[str, Any] = {}

    @property
    def uris(self) -> frozenset[str]:
        return self._uris

    def start(self, uris: Iterable[str]) -> None:
        self._uris = frozenset(uris)
        self._restart()

    async def update(self, uris: Iterable[str], timeout_s: float | None) -> None:
        """Listen for ``uris`` from now on; waits (up to ``timeout_s``, 0: not at all) until the
        upstream acknowledged the new listen. ``uris`` is read once the update's turn comes, so a
        caller passing its live set gets its latest content (concurrent updates run one by one)."""
        async with self._lock:
            wanted = frozenset(uris)
            if wanted == self._uris and self._task is not None and not self._task.done():
                return
            self._uris = wanted
            if self.unsupported or not self._session.alive:
                return
            await self._stop_task()
            self._restart()
        if timeout_s != 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    while True:  # until the listen current when it is acknowledged (a newer one may replace it)
                        ack = self._ack
                        await ack.wait()
                        if ack is self._ack:
                            return

    def acknowledged(self, params: dict[str, Any], owner: Any) -> None:
        """A ``notifications/subscriptions/acknowledged`` arrived (on any stream)."""
        meta = params.get("_meta")
        sid = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if self._rid is None or (sid != self._rid and not (sid is None and owner is self)):
            return  # an earlier listen's, already cancelled
        notifications = params.get("notifications")
        self.acknowledged_filter = notifications if isinstance(notifications, dict) else {}
        self._ack.set()
        if self._dropped:
            self._dropped = False
            self._on_reopened()

    async def stop(self) -> None:
        await self._stop_task()
        self._ack.set()  # nobody waits for an acknowledgement that cannot come

    # -- the loop ------------------------------------------------------------------------------
    def _filter(self) -> dict[str, Any]:
        wanted: dict[str, Any] = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}
        if self._uris:
            wanted["resourceSubscriptions"] = sorted(self._uris)
        return wanted

    def _restart(self) -> None:
        self._new_ack()
        self._task = asyncio.create_task(self._run(), name=f"mcp-listen-{self._session.name}")

    def _new_ack(self) -> None:
        old, self._ack = self._ack, asyncio.Event()
        old.set()  # its waiters move on to the new listen's acknowledgement

    async def _stop_task(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        delay = self._initial_s
        session = self._session
        first = True
        while session.alive:
            if not first:
                self._new_ack()
            first = False
            self._rid = rid = session.reserve_id()
            try:
                await session.request("subscriptions/listen", {"notifications": self._filter()}, owner=self,
                                      request_id=rid)
                reason = "the upstream ended it"
            except MethodNotFound:
                log.info("upstream %s does not serve subscriptions/listen: no change notifications", session.name)
                self.unsupported = True
                self._ack.set()
                return
            except ProtocolError as exc:
                reason = exc.message
            if self._ack.is_set():
                delay = self._initial_s  # it was up: start the backoff over
            self._dropped = True
            if not session.alive:
                return
            log.debug("upstream %s: subscriptions/listen dropped (%s); opening it again", session.name, reason)
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, self._max_s)

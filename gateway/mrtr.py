"""Multi Round-Trip Requests (2026-07-28) for calls that are still running: ask, park, resume.

A 2026-07-28 client cannot be sent a request (sampling, elicitation, roots) in the middle of a
call: the server answers the call with an ``InputRequiredResult`` and the client retries it with
``inputResponses``. An older upstream does not know that: it asks in the middle of its tool call
and waits for the answer. The gateway bridges the two by keeping the call running:

* :class:`PendingInputs` is the call's mailbox. The call's downstream handle turns each
  server→client request into an entry (:meth:`PendingInputs.ask` awaits its answer).
* :func:`run_until_input` runs the call until it finishes or asks for input.
  (How many inputs a call may ask is the business of its downstream handle: the configured caps
  on server→client requests, applied before :meth:`PendingInputs.ask`.)
* :class:`ParkedCalls` keeps a call that asked, under a random id that goes into the sealed
  ``requestState``; the client's retry takes it back (:meth:`ParkedCalls.take`), its answers fill
  the mailbox and the call goes on. A call nobody comes back for is cancelled after the
  deadline it was parked with (its own request deadline, bounded by ``park_timeout_s``).

Everything here is in-process: a retry must reach the replica that parked the call; with a
shared ``state.store`` the sealed state names that replica and :mod:`gateway.mrtr_remote` routes a
retry landing elsewhere to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PendingInputs", "ParkedCall", "ParkedCalls", "run_until_input"]

log = logging.getLogger("gateway.mrtr")


class PendingInputs:
    """The input requests of one running call, and their answers."""

    __slots__ = ("_asked", "_futures", "_keys", "waker")

    def __init__(self) -> None:
        self._asked: dict[str, dict[str, Any]] = {}
        self._futures: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._keys = itertools.count(1)
        # Resolved when the call asks for input (or ends): what run_until_input waits on.
        self.waker: asyncio.Future[None] | None = None

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Register a request for the client and wait for its answer (the call's task blocks here
        while the call is parked). How many a call may ask is capped before this, by the caller's
        budget (``gateway.server_requests``, see :mod:`gateway.stateless`)."""
        key = f"gw-{next(self._keys)}"
        request: dict[str, Any] = {"method": method}
        if params is not None:
            request["params"] = params
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[key] = request
        self._futures[key] = future
        _wake(self.waker)
        try:
            return await future
        finally:
            self._asked.pop(key, None)
            self._futures.pop(key, None)

    def outstanding(self) -> dict[str, dict[str, Any]]:
        """The ``inputRequests`` map of what is still unanswered."""
        return dict(self._asked)

    def answer(self, responses: Mapping[str, Any]) -> None:
        """Deliver the client's ``inputResponses``; keys it does not know are ignored (the spec
        asks servers to ignore what they do not need), missing ones are asked again."""
        for key, response in responses.items():
            future = self._futures.get(key)
            if future is not None and not future.done() and isinstance(response, dict):
                self._asked.pop(key, None)  # answered now, though the call resumes only later
                future.set_result(response)

    def fail(self, exc: BaseException) -> None:
        for future in self._futures.values():
            if not future.done():
                future.set_exception(exc)


def _wake(waker: asyncio.Future[None] | None) -> None:
    if waker is not None and not waker.done():
        waker.set_result(None)


def _wake_on_done(waker: asyncio.Future[None], _task: asyncio.Future[Any]) -> None:
    _wake(waker)


async def run_until_input(task: asyncio.Future[Any], inputs: PendingInputs) -> bool:
    """Wait until ``task`` finishes (True) or asks for input nobody has answered yet (False).

    One future per wait, resolved by whichever comes first (no helper task: this is on the path
    of every 2026-07-28 tools/call)."""
    while True:
        if task.done():
            return True
        if inputs.outstanding():
            return False
        waker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        inputs.waker = waker
        task.add_done_callback(functools.partial(_wake_on_done, waker))
        try:
            await waker
        finally:
            inputs.waker = None


@dataclass(slots=True)
class ParkedCall:
    """A call waiting for the client's retry. ``session`` is its downstream handle, whose reply
    channel the retry re-points; ``principal``/``method``/``digest`` bind it to its request."""

    task: asyncio.Future[Any]
    inputs: PendingInputs
    session: Any
    principal: str
    method: str
    digest: str
    expires: float = field(default=0.0)


class ParkedCalls:
    """Calls parked until their client retries, by id; expired ones are cancelled."""

    def __init__(self, park_timeout_s: float = 300.0) -> None:
        self.park_timeout_s = park_timeout_s
        self._calls: dict[str, ParkedCall] = {}
        self._sweeper: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._calls)

    def park(self, call: ParkedCall, deadline_s: float | None = None) -> str:
        """Keep ``call``; returns the id the client's ``requestState`` carries back."""
        timeout = self.park_timeout_s if deadline_s is None else min(deadline_s, self.park_timeout_s)
        call.expires = time.monotonic() + max(timeout, 0.0)
        call_id = secrets.token_urlsafe(16)
        self._calls[call_id] = call
        # A call that ends while parked (its deadline passed) leaves the registry at once.
        call.task.add_done_callback(lambda _task: self._calls.pop(call_id, None))
        self._schedule()
        return call_id

    def take(self, call_id: str) -> ParkedCall | None:
        """The parked call with this id, removed from the registry (one retry resumes it)."""
        call = self._calls.pop(call_id, None)
        if call is not None and call.expires < time.monotonic():
            self._abandon(call)
            return None
        return call

    def sweep(self, now: float | None = None) -> int:
        """Cancel the calls whose client did not come back in time; returns how many."""
        now = time.monotonic() if now is None else now
        expired = [cid for cid, call in self._calls.items() if call.expires < now]
        for cid in expired:
            self._abandon(self._calls.pop(cid))
        return len(expired)

    def close(self) -> None:
        for call in self._calls.values():
            self._abandon(call)
        self._calls.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _abandon(self, call: ParkedCall) -> None:
        log.info("abandoning a parked %s call of %s: its client did not retry in time", call.method, call.principal)
        with contextlib.suppress(Exception):
            call.inputs.fail(TimeoutError("the client did not answer the input request in time"))
        call.task.cancel()

    def _schedule(self) -> None:
        if self._sweeper is not None or not self._calls:
            return
        loop = asyncio.get_running_loop()
        soonest = min(call.expires for call in self._calls.values())
        self._sweeper = loop.call_at(loop.time() + max(0.0, soonest - time.monotonic()) + 0.01, self._sweep_now)

    def _sweep_now(self) -> None:
        self._sweeper = None
        self.sweep()
        self._schedule()

"""The MCP connector's connection kept up: the first attempt, every reconnect after a loss, and
the health ping that finds a hung upstream (:func:`ping_loop`).

Attempts follow :class:`~connectors.backoff.Backoff` (capped exponential, jittered, so gateways
restarting together spread out); each failure is one WARNING, the whole error only when it
changed. An upstream whose service identity needs an authorization waits for an operator and goes
on once it arrives, never in a tight loop of new authorizations. An unforeseen error is logged
with its traceback and the loop goes on trying. The connector is reached through the callables
it passes (:class:`Reconnector`), never as a whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from connectors.backoff import Backoff
from connectors.oauth.client import AuthorizationRequired
from gateway.protocol.errors import BackendUnavailable, MethodNotFound, ProtocolError
from gateway.protocol.versions import LATEST_VERSION

from .client import UpstreamSession
from .transport import SessionExpired

__all__ = ["Reconnector", "ping_loop"]

log = logging.getLogger("connectors.mcp")


class Reconnector:
    """Connects one upstream until it is connected (``connected()``) or the connector stops.

    ``connect`` makes one attempt (raising ``BackendUnavailable`` or ``AuthorizationRequired``),
    ``detail`` reads and ``set_health`` reports the connector's health, ``authorize`` asks for the
    service identity's authorization (``BackendUnavailable`` when refused or abandoned)."""

    def __init__(self, name: str, backoff: Backoff, *, connect: Callable[[], Awaitable[None]],
                 connected: Callable[[], bool], stopping: Callable[[], bool], detail: Callable[[], str],
                 set_health: Callable[[bool, str], None],
                 authorize: Callable[[AuthorizationRequired], Awaitable[object]]) -> None:
        self.name = name
        self.backoff = backoff
        self._connect = connect
        self._connected = connected
        self._stopping = stopping
        self._detail = detail
        self._set_health = set_health
        self._authorize = authorize
        self.task: asyncio.Task[None] | None = None
        self.reconnects = 0
        self._connected_once = False
        # Set when the first attempt of a start() is over, whatever its outcome.
        self.first_attempt = asyncio.Event()

    def schedule(self, immediately: bool = False) -> None:
        """Start the loop unless it runs (or the connector stops); ``immediately``: no first delay."""
        if self._stopping() or (self.task is not None and not self.task.done()):
            return
        self.task = asyncio.create_task(self._loop(immediately), name=f"mcp-connect-{self.name}")

    async def _loop(self, immediately: bool) -> None:
        backoff = self.backoff
        delay = 0.0 if immediately else backoff.failed(self._detail()).delay_s  # lost: wait a first step
        while not self._stopping() and not self._connected():
            if not immediately:
                await asyncio.sleep(delay)  # jittered (connectors.backoff): gateways restarting together spread out
            immediately = False
            try:
                await self._connect()
            except AuthorizationRequired as exc:  # the service identity waits for an operator
                self._set_health(False, f"{exc.message}: waiting for the authorization")
                with contextlib.suppress(BackendUnavailable):
                    await self._authorize(exc)
                    immediately = True  # authorised: this attempt goes on (start() still waits for it)
                if not immediately:  # refused or abandoned: never a tight loop of new authorizations
                    delay = self._failed(backoff, self._detail())
                continue
            except BackendUnavailable as exc:
                self._set_health(False, exc.message)
                delay = self._failed(backoff, exc.message)
                continue
            except Exception as exc:  # unforeseen (a bug): say so, and never stop trying
                log.exception("upstream %s: connecting failed unexpectedly", self.name)
                self._set_health(False, f"connecting failed: {type(exc).__name__}: {exc}")
                delay = self._failed(backoff, self._detail())
                continue
            finally:
                if not immediately:
                    self.first_attempt.set()
            backoff.succeeded()
            if self._connected_once:
                self.reconnects += 1
                self._set_health(True, self._detail())
                log.info("upstream %s reconnected", self.name)
            self._connected_once = True
            return

    def _failed(self, backoff: Backoff, error: str) -> float:
        """One failed attempt: one WARNING (the whole error only when it changed); the next delay."""
        failure = backoff.failed(error)
        if failure.repeated:
            log.warning("upstream %s: connecting failed again (attempt %d, same error); next attempt in %.1f s",
                        self.name, failure.attempts, failure.delay_s)
        else:
            log.warning("upstream %s: connecting failed (attempt %d): %s; next attempt in %.1f s",
                        self.name, failure.attempts, error, failure.delay_s)
        return failure.delay_s


async def ping_loop(interval: float, shared: Callable[[], UpstreamSession | None], stopping: Callable[[], bool]) -> None:
    """Every ``interval`` seconds, probe the shared session; one that fails the probe is lost (and
    reconnected by the :class:`Reconnector`)."""
    while not stopping():
        await asyncio.sleep(interval)
        session = shared()
        if session is None or not session.alive:
            continue
        # 2026-07-28 has no ping: server/discover is the probe (and must still list the revision).
        method = "server/discover" if session.modern else "ping"
        try:
            result = await session.request(method, None, timeout_s=min(interval, 10.0), cancellable=False)
        except SessionExpired:
            session.lose("upstream session expired")
        except ProtocolError as exc:
            if session.modern or exc.code != MethodNotFound.code:  # an upstream without ping is still up
                session.lose(f"health {'probe' if session.modern else 'ping'} failed: {exc.message}")
        else:
            if session.modern and LATEST_VERSION not in (result.get("supportedVersions") or ()):
                session.lose(f"upstream no longer lists protocol {LATEST_VERSION}")

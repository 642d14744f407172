"""The HTTP server under the app: the connection limits aiohttp does not enforce by itself.

aiohttp 3.x bounds a request line and each header field and closes idle keep-alive connections, but
it puts no time limit on a request's head (a slowloris feeding one header line every few seconds is
never cut), no cap on connections (20,000 half-open sockets exhausted the process's descriptors and
``/healthz`` stopped answering), and it logs a request it cannot parse at error level, with a
traceback and the first 100 bytes of the offending line (an oversized ``Authorization`` header
landed in the logs). :func:`start_server` serves an app with these limits, read from
``gateway.http`` when each connection opens (so a reload applies to new connections):

* ``header_timeout_s``: a request's line and headers must arrive within this long of the request's
  first byte (of the connection's opening, for its first request), else the connection is closed.
* ``keepalive_timeout_s``: an idle keep-alive connection is closed after this long (aiohttp's timer).
* ``max_header_bytes``: a header line (name and value) longer than this, or more than 128 header
  lines, is answered ``431``; a request line over 8190 bytes ``414``; any other request that does
  not parse ``400``. Nothing of such a request is logged: a debug line names the limit and the peer.
* ``max_connections``: at the cap a new connection evicts the oldest idle one (one waiting for a
  request with nothing of it received: half-open, slowloris, idle keep-alive; those that never
  completed a request first), so a flood of idle sockets cannot lock out a new client or a probe.
  When every connection is busy serving a request, :data:`PROBE_RESERVE` more are accepted for
  probes only (``/healthz``, ``/readyz`` and ``/metrics`` answer on them, the MCP endpoints answer
  503), and past those a new connection gets ``503`` naming the limit and is closed. Eviction takes
  a full connection before a probe-only one, so the reserve a moment of saturation filled does not
  pass its probe-only class on to the clients that come after it.

Stopping (``runner.cleanup()``, after the gateway's drain) waits at most :data:`CLOSE_WAIT_S` for
each connection's handler, then cancels it. The drain (``shutdown_grace_s``, ``drain_linger_s``)
is what waits for calls; what is left then is no call: a request body that never came (a handler
waiting up to ``body_timeout_s``), or aiohttp's lingering read of a refused request's unread body
(up to 10 s). Under aiohttp's own timeout (it was ``shutdown_grace_s``) such a connection kept an
idle gateway from exiting for 10 to 20 s after SIGTERM.

A POST body's time limit (``body_timeout_s``) is the app's (``http_app._guarded``), as is the session
cap (:mod:`.quota`). What the server refused or cut is counted in ``mcp_gateway_http_refused``.

Whether a connection is idle comes from aiohttp's ``RequestHandler`` itself: ``_messages`` (parsed
heads not yet served), ``_request_in_progress``, ``_request_count`` (heads parsed so far), plus
``finish_response`` (overridden to note that every request so far is answered); a refused body
sets ``_lingering_time``. aiohttp is pinned by ``constraints.txt``, and
``tests/security/test_http_limits.py`` attacks each limit for real, so a change of meaning fails.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import termios
import time
from collections.abc import Callable
from typing import Any, cast

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from gateway.config import HttpConfig
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST
from gateway.telemetry import metrics

__all__ = ["start_server", "GatewayServer", "AccessLogger", "PROBE_RESERVE", "CLOSE_WAIT_S", "probe_only", "skip_lingering",
           "raise_fd_limit"]

log = logging.getLogger("gateway.http")

# Connections accepted past max_connections, when every connection is busy, for probes only.
PROBE_RESERVE = 16
# How long stopping waits for a connection's handler once the drain is over (a response on its way
# out); whatever is still running then is cut (see the module's docstring).
CLOSE_WAIT_S = 0.1
# aiohttp's request-line limit. It must differ from the header-field limit: aiohttp raises the
# same LineTooLong for both, and the limit it names tells a long URL (414) from a long header (431).
_MAX_LINE = 8190
_WARN_EVERY_S = 10.0
# Connections the kernel completes and queues before the gateway accepts them (aiohttp's default
# is 128). A burst past the queue has its SYNs dropped, and a probe or client then waits 1 s for
# its retransmission; in the queue it waits only for the accepts ahead of it (the kernel caps
# this at net.core.somaxconn).
LISTEN_BACKLOG = 2048

_OK, _PROBE, _REFUSE = 0, 1, 2
_GONE = object()

Limits = Callable[[], HttpConfig]


def _json_error(code: int, message: str) -> bytes:
    return jsonrpc.dumps(jsonrpc.error_response(None, code, message))


def _refusal(max_connections: int) -> bytes:
    body = _json_error(INTERNAL_ERROR, f"Service Unavailable: every connection is busy "
                       f"(gateway.http.max_connections = {max_connections})")
    head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n")
    return head.encode() + body


class _Handler(RequestHandler):
    """aiohttp's request handler plus admission, a head timer and quiet parse errors."""

    __slots__ = ("_gw", "_header_timeout", "_head_timer", "_refused", "_answered", "probe_only")

    def __init__(self, manager: GatewayServer, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._gw = manager
        self._header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._answered = False
        self.probe_only = False

    # -- admission and the head timer -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        verdict = self._gw.admit(self)
        if verdict == _REFUSE:
            self._refused = True
            tcp = cast(asyncio.Transport, transport)
            tcp.write(self._gw.refusal())
            tcp.close()
            return
        self.probe_only = verdict == _PROBE
        super().connection_made(transport)
        self._head_timer = self._loop.call_later(self._header_timeout, self._head_timed_out)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._refused:
            return
        self._gw.release(self)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._messages or self._request_in_progress:  # a head is complete: the timer is done
            self._answered = False
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
        elif self._head_timer is None:  # the first bytes of the next request on a kept-alive connection
            self._head_timer = self._loop.call_later(self._header_timeout, self._head_timed_out)

    async def finish_response(self, request: BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._answered = True

    @property
    def idle(self) -> bool:
        """Serving nothing: no request head yet, or every request answered (the connection waits
        for the next one, or drains the unread body of the last one: aiohttp's lingering close).
        Parsed heads and running handlers make a connection busy."""
        if self._messages or self._request_in_progress:
            return False
        return self._request_count == 0 or self._answered

    @property
    def served(self) -> bool:
        """Whether this connection has carried a request (idle ones that never did go first)."""
        return self._request_count > 0

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.idle and not self._force_close:
            metrics.HTTP_REFUSED.labels("header_timeout").inc()
            log.debug("closed a connection from %s: no complete request head within "
                      "gateway.http.header_timeout_s (%s s)", self._peer(), self._header_timeout)
            self.force_close()

    def evict(self) -> None:
        metrics.HTTP_REFUSED.labels("idle_evicted").inc()
        self.force_close()

    def skip_lingering(self) -> None:
        """Close as soon as the response is out, without draining the request's unread body."""
        self._lingering_time = 0.0

    @property
    def receiving(self) -> bool:
        """Whether bytes wait in this connection's socket that the loop has not read yet: a request
        is arriving, whatever the connection's age (after a stall the loop accepts and reads a
        backlog in bursts)."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return False
        try:
            waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return False
        return int.from_bytes(waiting, "little") > 0

    def _peer(self) -> str:
        peer = self.peername
        return str(peer[0]) if isinstance(peer, tuple) else str(peer)

    # -- requests that do not parse ---------------------------------------------------------------
    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        # The exception's text quotes the refused bytes (a header line: maybe a credential): neither
        # it nor a traceback is logged.
        status, text, label = self._parse_refusal(exc)
        metrics.HTTP_REFUSED.labels(label).inc()
        log.debug("refused a request from %s with %d: %s", self._peer(), status, text)
        response = web.Response(status=status, body=_json_error(INVALID_REQUEST, text),
                                content_type="application/json")
        response.force_close()
        return response

    def _parse_refusal(self, exc: HttpProcessingError) -> tuple[int, str, str]:
        if isinstance(exc, LineTooLong):
            limit = exc.args[1] if len(exc.args) > 1 else None
            if limit == self.max_line_size and limit != self.max_field_size:
                return 414, f"URI Too Long: the request line is over {limit} bytes", "request_line_too_large"
            return 431, (f"Request Header Fields Too Large: a header line is over "
                         f"gateway.http.max_header_bytes ({self.max_field_size})"), "header_too_large"
        if exc.message.startswith("Too many headers"):
            return 431, f"Request Header Fields Too Large: more than {self.max_headers} header lines", \
                "header_too_large"
        return 400, "Bad Request: malformed HTTP request", "bad_request"


class GatewayServer(web.Server):
    """aiohttp's low-level server making :class:`_Handler` s, which it admits under the cap."""

    def __init__(self, plain: web.Server, limits: Limits) -> None:
        # The app's handler, request factory and handler options, as AppRunner built them.
        super().__init__(plain.request_handler, request_factory=plain.request_factory,
                         handler_cancellation=plain.handler_cancellation, loop=plain._loop, **plain._kwargs)
        self._limits = limits
        # Admitted connections, oldest first: those that have not carried a request yet, and the rest.
        self._fresh: dict[_Handler, None] = {}
        self._served: dict[_Handler, None] = {}
        self._probe_only: dict[_Handler, None] = {}  # the admitted ones in the probe reserve, oldest first
        self._refusal: tuple[int, bytes] = (0, b"")
        self._warned = 0.0

    def __call__(self) -> RequestHandler:
        http = self._limits()
        kwargs = {**self._kwargs, "keepalive_timeout": http.keepalive_timeout_s,
                  "max_field_size": http.max_header_bytes,
                  "max_line_size": _MAX_LINE if http.max_header_bytes != _MAX_LINE else _MAX_LINE + 1}
        return _Handler(self, http.header_timeout_s, loop=self._loop, **kwargs)

    @property
    def open_connections(self) -> int:
        return len(self._fresh) + len(self._served)

    @property
    def probe_only_connections(self) -> int:
        return len(self._probe_only)

    def admit(self, handler: _Handler) -> int:
        limit = self._limits().max_connections
        count = self.open_connections
        if count - len(self._probe_only) < limit and count < limit + PROBE_RESERVE:
            self._fresh[handler] = None
            return _OK
        # At the cap, room comes first from an idle full connection (the newcomer takes its place),
        # then from the probe reserve, then from an idle probe-only connection (whose class the
        # newcomer takes): at most max_connections serve MCP.
        evicted = self._evict_one(probe_only_too=False)
        if evicted is not None:
            verdict = _OK
        elif count < limit + PROBE_RESERVE:
            verdict = _PROBE
        else:
            evicted = self._evict_one(probe_only_too=True)
            verdict = _PROBE if evicted is not None else _REFUSE
        self._warn(limit, {_OK: "closing the oldest idle connections", _PROBE: "admitting probes only",
                           _REFUSE: "every connection is busy: refusing new ones"}[verdict])
        if verdict == _REFUSE:
            metrics.HTTP_REFUSED.labels("max_connections").inc()
            return _REFUSE
        self._fresh[handler] = None
        if verdict == _PROBE:
            self._probe_only[handler] = None
        return verdict

    def release(self, handler: _Handler) -> None:
        """A connection closed. If it held a full place (and was not evicted: its newcomer took that
        place), the oldest probe-only connection gets it: the probe reserve holds connections only
        while every full place is taken."""
        held = self._fresh.pop(handler, _GONE) is not _GONE or self._served.pop(handler, _GONE) is not _GONE
        if self._probe_only.pop(handler, _GONE) is not _GONE or not held or not self._probe_only:
            return
        promoted = next(iter(self._probe_only))
        del self._probe_only[promoted]
        promoted.probe_only = False

    def refusal(self) -> bytes:
        limit = self._limits().max_connections
        if self._refusal[0] != limit:
            self._refusal = (limit, _refusal(limit))
        return self._refusal[1]

    def _evict_one(self, *, probe_only_too: bool) -> _Handler | None:
        """Close the oldest idle connection and return it: one that never carried a request first,
        then one idle between requests. A connection whose request bytes wait in its socket is not
        idle (the loop may lag its reads under load: the accept-time age of a connection says
        nothing then). Full connections go first; a probe-only one only if ``probe_only_too`` and
        no full one is idle. Connections met on the way that carried a request move to the served
        queue, busy served ones to its back."""
        victim = self._oldest_idle(self._fresh, probe_only_too, fresh=True)
        if victim is None:
            victim = self._oldest_idle(self._served, probe_only_too, fresh=False)
        if victim is not None:
            victim.evict()
        return victim

    def _oldest_idle(self, queue: dict[_Handler, None], probe_only_too: bool, *, fresh: bool) -> _Handler | None:
        """The oldest idle connection of ``queue`` (full before probe-only), taken out of it."""
        victim: _Handler | None = None
        fallback: _Handler | None = None
        to_move = []  # fresh queue: those that carried a request; served queue: busy ones
        for handler in queue:  # oldest first
            if handler.served if fresh else not handler.idle:
                to_move.append(handler)
            elif handler.receiving:
                continue
            elif not handler.probe_only:
                victim = handler
                break
            elif fallback is None:
                fallback = handler
        if victim is None and probe_only_too:
            victim = fallback
        for handler in to_move:
            del queue[handler]
            self._served[handler] = None  # to the served queue, or to its back
        if victim is not None:
            del queue[victim]
            self._probe_only.pop(victim, None)
        return victim

    def _warn(self, limit: int, what: str) -> None:
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY_S:  # once in a while: a flood must not flood the logs
            self._warned = now
            log.warning("gateway.http.max_connections (%d) reached: %s", limit, what)


class AccessLogger(AbstractAccessLogger):
    """aiohttp's access log (at info on ``aiohttp.access``, which ``serve`` enables only at log_level
    debug): peer, method, path, status, duration. Never the query string or a header: a credential
    a client put there would land in the logs."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info('%s "%s %s" %s %.1f ms', request.remote, request.method, request.path,
                          response.status, time * 1000)

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


class _Runner(web.AppRunner):
    __slots__ = ("_limits",)

    def __init__(self, app: web.Application, limits: Limits, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._limits = limits

    async def _make_server(self) -> web.Server:
        return GatewayServer(await super()._make_server(), self._limits)


def probe_only(request: web.Request) -> bool:
    """Whether the request came on a connection admitted past the cap, for probes only."""
    return getattr(request.protocol, "probe_only", False) is True


def skip_lingering(request: web.Request) -> None:
    """Close the request's connection once its response is out, without reading the rest of its
    body (aiohttp otherwise drains it for up to 10 s): for a body refused for its slowness."""
    protocol = request.protocol
    if isinstance(protocol, _Handler):
        protocol.skip_lingering()


def raise_fd_limit(max_connections: int) -> None:
    """Make room for ``max_connections`` sockets and the gateway's own descriptors: raise the soft
    limit on open files towards the hard one (as the Go runtime does), or warn that it is short."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    needed = max_connections + PROBE_RESERVE + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft < needed:
        log.warning("the open-file limit (%d) is short of gateway.http.max_connections (%d) plus the "
                    "gateway's own files: lower max_connections or raise the limit", soft, max_connections)


async def start_server(app: web.Application, limits: Limits, host: str, port: int, *,
                       access_log: logging.Logger | None = None, shutdown_timeout: float = CLOSE_WAIT_S,
                       reuse_port: bool = False) -> web.AppRunner:
    """Serve ``app`` on ``host:port`` under the limits ``limits()`` returns; the runner's
    ``shutdown()`` and ``cleanup()`` stop it, ``runner.addresses`` names the bound port.
    ``cleanup()`` waits up to ``shutdown_timeout`` for each connection's handler: call it after
    the gateway's drain, which is what waits for calls.
    ``reuse_port``: ``SO_REUSEPORT``, so the workers of ``serve --workers N`` share the port (the
    kernel spreads connections over them)."""
    raise_fd_limit(limits().max_connections)
    runner = _Runner(app, limits, handle_signals=False, shutdown_timeout=shutdown_timeout, access_log=access_log,
                     access_log_class=AccessLogger)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG, reuse_port=reuse_port or None)
    await site.start()
    return runner

"""A lean HTTP/1.1 client for Streamable HTTP upstreams: the hot path of every forwarded request.

Why not aiohttp's client, which the rest of the gateway uses: each forwarded MCP request is one
POST to the upstream, and ``aiohttp.ClientSession`` spends about 90 µs of CPU per request on a
2-vCPU VM (request and response objects, multidicts, cookie jar, timers, trace hooks) where this
client spends about 30 µs. With a 0.5 ms budget for the whole proxy hop, that is a fifth of it.
Parsing is not hand-written: httptools (llhttp, the parser uvicorn and aiohttp are built on) reads
status lines, headers and Content-Length, chunked or close-delimited bodies.

What it does: keep-alive connections to one origin (``http`` or ``https``), one request at a time
per connection, most recently used first; bodies read chunk by chunk (SSE streams) with
back-pressure; ``gzip``/``deflate`` content coding; cookies the upstream sets are sent back
(load-balancer stickiness), per client, so per upstream session.

Connection hygiene (issue 19: an upstream closing an idle connection just as the next request
arrives must cost at most that request, never the upstream session):

* an idle connection is kept at most ``_IDLE_S`` (below the 5 s keep-alive of common servers:
  uvicorn, Node, gunicorn), and at most three quarters of what the server's ``Keep-Alive:
  timeout=N`` says; ``Connection: close`` (and HTTP/1.0 without keep-alive) is honoured;
* before reuse an idle connection is polled: readable means the peer closed it (EOF, RST) or is
  out of step, and it is discarded without being written to;
* a request that failed on a *reused* connection before any byte of the response arrived is sent
  once more on a fresh connection when that is safe: it never left (the write failed), or the
  caller says the request is idempotent (``retry_safe``: listings, reads, ``ping``). Otherwise
  that one request fails with :class:`HTTPConnectionError` whose ``unanswered`` is true (the
  caller may retry it knowing nothing of the response arrived).

What it leaves out: proxies and redirects (a 3xx is returned as a status, and the transport names
it), HTTP/2, pipelining.

Connections go to the address the connector's :class:`~connectors.egress.EgressPolicy` checked
(``policy.create_connection``), when it has one.

Failures raise :class:`HTTPConnectionError` (an ``OSError``); ``connecting`` tells a connection
that could not be made (the upstream is unreachable) from one that broke under a request.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import re
import select
import socket
import ssl
import time
import zlib
from collections.abc import Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Any, cast

import httptools
from yarl import URL

from connectors.egress import EgressPolicy, EgressRefused

__all__ = ["HTTP1Client", "HTTPResponse", "HTTPConnectionError", "BodyTooLarge", "header_block",
           "request_header_block", "keep_alive_timeout"]

# Body bytes buffered per response before reading from the socket pauses, and resumes below half.
_HIGH_WATER = 4 * 1024 * 1024
# Idle connections kept per client, and how long one may stay idle before it is closed: below
# the 5 s keep-alive timeout of common servers, so the client gives a connection up before the
# server does (a server closing it as a request arrives resets that request).
_MAX_IDLE = 32
_IDLE_S = 4.0
# Share of a server's own ``Keep-Alive: timeout=N`` a connection may idle (clocks and the wire
# disagree by a little; a request must not arrive as the server closes).
_KEEP_ALIVE_SHARE = 0.75


class HTTPConnectionError(ConnectionError):
    """The upstream could not be reached, or the connection broke or spoke bad HTTP.

    ``connecting``: no connection could be made (refused, DNS, timeout, TLS): the upstream is
    unreachable. ``unanswered``: the connection broke before any byte of the response arrived, so
    the caller knows no part of an answer was lost (whether the request ran is unknown).
    """

    def __init__(self, message: str, *, connecting: bool = False, unanswered: bool = False) -> None:
        super().__init__(message)
        self.connecting = connecting
        self.unanswered = unanswered


@functools.lru_cache(maxsize=8)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """One verifying context per trust store: loading the system CAs costs tens of milliseconds,
    too much for every upstream session (``per_client`` opens one per downstream session). The
    arguments are the ``SSL_CERT_FILE``/``SSL_CERT_DIR`` the context was built under."""
    return ssl.create_default_context()


class BodyTooLarge(HTTPConnectionError):
    """:meth:`HTTPResponse.read` met more than its limit; the connection was closed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"response body over {limit} bytes")
        self.limit = limit


def keep_alive_timeout(value: str | None) -> float | None:
    """The ``timeout=`` of a ``Keep-Alive`` header in seconds, None when absent or malformed."""
    if not value:
        return None
    for part in value.split(","):
        key, _, number = part.strip().partition("=")
        if key.strip().lower() == "timeout":
            try:
                seconds = float(number.strip())
            except ValueError:
                return None
            return seconds if seconds >= 0 else None
    return None


_BAD_NAME = re.compile(r"[\r\n: ]")


def header_block(headers: Mapping[str, str]) -> str:
    """``headers`` as request header lines, checked once (no CR/LF smuggling, no empty names);
    build it when the headers change and pass it to every :meth:`HTTP1Client.request`."""
    lines = []
    for name, value in headers.items():
        if not name or _BAD_NAME.search(name) or "\r" in value or "\n" in value:
            raise ValueError(f"invalid HTTP header {name!r}")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines)


def request_header_block(headers: Mapping[str, str]) -> str:
    """:func:`header_block` of a request's own metadata headers (``Mcp-Method``, ``Mcp-Name`` ...
    of a 2026-07-28 call), which repeat from call to call: short blocks already built are
    remembered by their items (a bounded table, emptied when full). Never for credentials: a
    remembered block outlives the request."""
    key = tuple(headers.items())
    block = _BLOCKS.get(key)
    if block is None:
        block = header_block(headers)
        if len(block) <= _BLOCK_MAX_CHARS:
            if len(_BLOCKS) >= _BLOCKS_SIZE:
                _BLOCKS.clear()
            _BLOCKS[key] = block
    return block


_BLOCKS: dict[tuple[tuple[str, str], ...], str] = {}
_BLOCKS_SIZE = 4096
_BLOCK_MAX_CHARS = 1024


class HTTPResponse:
    """Status and headers of one response; the body is read with :meth:`read_chunk`.

    ``headers`` has lower-case names (repeated headers joined with ", "). Finish with
    :meth:`release` (the connection is reused if the body was read to the end, else closed) or
    :meth:`release_at_end` (the rest of the body is discarded as it arrives).
    """

    __slots__ = ("status", "headers", "_conn")

    def __init__(self, status: int, headers: dict[str, str], conn: _Connection) -> None:
        self.status = status
        self.headers = headers
        self._conn = conn

    @property
    def complete(self) -> bool:
        """The whole body has arrived (it may not all have been read yet)."""
        return self._conn.complete

    async def read_chunk(self) -> bytes:
        """The next piece of the body as it arrived; ``b""`` at its end."""
        return await self._conn.read_chunk()

    async def read(self, limit: int) -> bytes:
        """The whole body; more than ``limit`` bytes is :class:`BodyTooLarge`."""
        parts: list[bytes] = []
        size = 0
        while chunk := await self._conn.read_chunk():
            size += len(chunk)
            if size > limit:
                self._conn.close()
                raise BodyTooLarge(limit)
            parts.append(chunk)
        return b"".join(parts)

    def release(self) -> None:
        """Done with this response: reuse the connection if the body was read, else close it."""
        self._conn.finish(discard_rest_s=None)

    def release_at_end(self, grace_s: float) -> None:
        """Discard the rest of the body and reuse the connection when it ends; close the
        connection if it has not ended within ``grace_s`` seconds."""
        self._conn.finish(discard_rest_s=grace_s)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: writes a request, parses its response (httptools callbacks)."""

    def __init__(self, client: HTTP1Client) -> None:
        self._client = client
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.idle_limit_s = _IDLE_S
        self.served = 0  # responses completed on this connection: >0 means it is a reused one
        self._fd = -1
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._header_list: list[tuple[bytes, bytes]] = []
        self._head: asyncio.Future[HTTPResponse] | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self.complete = False
        self._started = False
        self._close_delimited = False
        self._keep_alive = False
        self._error: BaseException | None = None
        self._discard = False
        self._finished = False
        self._grace: asyncio.TimerHandle | None = None
        self._decoder: Any = None
        self._received = False  # any byte of this request's response arrived
        self._unsent = False  # the connection broke while the request was still being written

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(OSError, ValueError):
                self._fd = sock.fileno()

    def data_received(self, data: bytes) -> None:
        if self._head is None:  # bytes nobody asked for: the connection is out of step
            self.close()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HTTPConnectionError(f"malformed HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._client._forget(self)
        if self._grace is not None:
            self._grace.cancel()
        if self._head is None or self.complete:
            return
        if self._close_delimited:
            self.on_message_complete()  # the body ends with the connection
            return
        reason = f": {exc}" if exc else ""
        where = "while sending the body" if self._started and self._head.done() else "before answering"
        if self._transport is not None and (isinstance(exc, BrokenPipeError) or
                                            self._transport.get_write_buffer_size() > 0):
            self._unsent = True
        self._fail(HTTPConnectionError(f"the upstream closed the connection {where}{reason}",
                                       unanswered=not self._received))

    def pause_writing(self) -> None:  # requests are small: nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks ------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._started = True

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_list.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # informational: the real response follows
            self._header_list = []
            return
        self._status = status
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for raw_name, raw_value in self._header_list:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            if name == "set-cookie":
                cookies.append(value)
            elif name in headers:
                headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
        self._header_list = []
        server_idle = keep_alive_timeout(headers.get("keep-alive"))
        if server_idle is not None:
            self.idle_limit_s = min(_IDLE_S, server_idle * _KEEP_ALIVE_SHARE)
        if cookies:
            self._client._store_cookies(cookies)
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        elif coding != "identity":
            self._fail(HTTPConnectionError(f"unsupported content coding {coding!r}"))
            self.close()
            return
        self._close_delimited = ("content-length" not in headers and "chunked" not in
                                 headers.get("transfer-encoding", "").lower() and status not in (204, 304))
        if self._head is not None and not self._head.done():
            self._head.set_result(HTTPResponse(status, headers, self))

    def on_body(self, body: bytes) -> None:
        if self._status == 0 or self._discard:
            return
        if self._decoder is not None:
            try:
                body = self._decoder.decompress(body)
            except zlib.error as exc:
                self._fail(HTTPConnectionError(f"bad compressed body: {exc}"))
                self.close()
                return
            if not body:
                return
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._status == 0:  # the end of an informational response
            self._started = False
            return
        if self._decoder is not None and not self._discard:
            with contextlib.suppress(zlib.error):
                tail = self._decoder.flush()
                if tail:
                    self._chunks.append(tail)
        self.complete = True
        self._keep_alive = self._parser.should_keep_alive() and not self._close_delimited
        self.served += 1
        self._wake()
        if self._finished:
            self._done()

    # -- used by the client and the response ---------------------------------------------------
    async def request(self, head: bytes, body: bytes) -> HTTPResponse:
        assert self._transport is not None
        self._reset()
        self._head = asyncio.get_running_loop().create_future()
        self._transport.write(head + body if body else head)
        try:
            return await self._head
        except asyncio.CancelledError:
            self.close()  # the response may still come: this connection cannot be reused
            raise

    async def read_chunk(self) -> bytes:
        while True:
            if self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered < _HIGH_WATER // 2 and self._transport is not None:
                    self._paused = False
                    self._transport.resume_reading()
                return chunk
            if self._error is not None:
                raise self._error
            if self.complete:
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def finish(self, discard_rest_s: float | None) -> None:
        if self._finished:
            return
        self._finished = True
        self._chunks.clear()
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        if self.complete:
            self._done()
        elif discard_rest_s is None or self.closed:
            self.close()
        else:
            self._discard = True
            self._grace = asyncio.get_running_loop().call_later(discard_rest_s, self.close)

    def _done(self) -> None:
        """The response is complete and its reader is finished: back to the pool, or closed."""
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        if self._keep_alive and not self.closed:
            self._head = None  # idle: any byte that arrives now is out of step
            self._client._put_back(self)
        else:
            self.close()

    def usable(self, now: float) -> bool:
        """An idle connection may carry the next request: not closed, not idle past its limit,
        and nothing to read on it (an idle connection has nothing to say: readable means EOF, a
        reset or stray bytes the event loop has not handled yet)."""
        if self.closed or now - self.idle_since >= self.idle_limit_s:
            return False
        if self._fd < 0:
            return True
        poller = select.poll()  # not select(): descriptors past 1024 are common in a busy gateway
        try:
            poller.register(self._fd, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    @property
    def unsent(self) -> bool:
        """The last request broke the connection while it was still being written."""
        return self._unsent

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self.closed = True
            self._transport.close()
        self._client._forget(self)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        if self._head is not None and not self._head.done():
            self._head.set_exception(exc)
            self._head.exception()  # retrieved: a cancelled caller may never look
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class HTTP1Client:
    """Keep-alive connections to the origin of ``url``, for requests to ``url`` itself.
    ``policy``: the connector's egress policy, which every new connection goes through."""

    def __init__(self, url: str, *, connect_timeout_s: float, policy: EgressPolicy | None = None) -> None:
        parsed = URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {url}")
        self.url = url
        self._host = parsed.raw_host or ""
        self._port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self._ssl: ssl.SSLContext | None = None
        if parsed.scheme == "https":
            self._ssl = _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        host = f"[{self._host}]" if ":" in self._host else self._host
        authority = host if parsed.is_default_port() else f"{host}:{self._port}"
        self._target = parsed.raw_path_qs or "/"
        self._static = f"Host: {authority}\r\nAccept-Encoding: gzip, deflate\r\nUser-Agent: mcp-gateway\r\n"
        self._connect_timeout_s = connect_timeout_s
        self._policy = policy
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._cookies: dict[str, str] = {}
        self._closed = False
        self.retries = 0  # requests sent again on a fresh connection (module docstring)

    async def request(self, method: str, headers: str, body: bytes = b"", *,
                      retry_safe: bool = False) -> HTTPResponse:
        """Send one request to the URL and return once the response's headers arrived.
        ``headers`` comes from :func:`header_block`. ``retry_safe``: the request may be sent
        twice (idempotent), so a reused connection that breaks before answering is retried once
        on a fresh one (a request that broke while being written is retried whatever this says)."""
        if self._closed:
            raise HTTPConnectionError("client closed")
        lines = [f"{method} {self._target} HTTP/1.1\r\n", self._static, headers]
        if self._cookies:
            lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self._cookies.items()) + "\r\n")
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}\r\n")
        lines.append("\r\n")
        head = "".join(lines).encode("latin-1")
        conn = await self._acquire()
        try:
            return await conn.request(head, body)
        except HTTPConnectionError as exc:
            # A fresh connection that fails is the upstream's answer; a reused one may simply have
            # been closed by the server as the request arrived (keep-alive race).
            if not (conn.served and exc.unanswered and (retry_safe or conn.unsent)) or self._closed:
                raise
        self.retries += 1
        conn = await self._acquire(fresh=True)
        return await conn.request(head, body)

    async def _acquire(self, fresh: bool = False) -> _Connection:
        now = time.monotonic()
        while self._idle and not fresh:
            conn = self._idle.pop()
            if conn.usable(now):
                return conn
            conn.close()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                if self._policy is not None:
                    _transport, conn = await self._policy.create_connection(
                        lambda: _Connection(self), self._host, self._port, ssl=self._ssl)
                else:
                    _transport, conn = await asyncio.get_running_loop().create_connection(
                        lambda: _Connection(self), self._host, self._port, ssl=self._ssl,
                        server_hostname=self._host if self._ssl is not None else None)
        except TimeoutError:
            raise HTTPConnectionError(f"no connection within {self._connect_timeout_s:g}s", connecting=True) from None
        except EgressRefused as exc:  # str() names host, address, rule and how to allow it
            raise HTTPConnectionError(str(exc), connecting=True) from None
        except ssl.SSLError as exc:
            raise HTTPConnectionError(f"TLS handshake failed: {exc}", connecting=True) from None
        except OSError as exc:
            raise HTTPConnectionError(str(exc) or type(exc).__name__, connecting=True) from None
        if self._closed:
            conn.close()
            raise HTTPConnectionError("client closed")
        self._all.add(conn)
        return conn

    def _put_back(self, conn: _Connection) -> None:
        if self._closed or len(self._idle) >= _MAX_IDLE:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        with contextlib.suppress(ValueError):
            self._idle.remove(conn)

    def _store_cookies(self, values: list[str]) -> None:
        for value in values:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value)
            except CookieError:
                continue
            for name, morsel in jar.items():
                max_age = morsel["max-age"]
                if max_age and max_age.lstrip("-").isdigit() and int(max_age) <= 0:
                    self._cookies.pop(name, None)
                else:
                    self._cookies[name] = morsel.coded_value

    async def close(self) -> None:
        """Close every connection, idle or busy."""
        self._closed = True
        for conn in list(self._all):
            conn.close()
        self._idle.clear()

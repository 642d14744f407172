"""Streamable HTTP client transport (MCP 2025-03-26 and later).

Every message is one POST. A request's answer is either one JSON body or an SSE stream that may
carry notifications and server→client requests *related to that request* before the response;
those are delivered with ``related_id`` set, which is how the connector routes an upstream's
sampling or progress to the downstream session that caused it. ``send`` returns only once the
response was delivered, so the caller's task does the reading and no task is spawned per call.

A response stream that ends before the response (the server closing it on purpose, SEP-1699) is
resumed with a GET carrying ``Last-Event-ID`` when the server gave event ids. After initialize a
background GET stream receives unrelated server messages (405 means the server has none), and the
handshake returns only once the server answered that GET (or it failed; at most
``_LISTEN_WAIT_S``): a server without an event store drops what it sends while no GET stream is
open (the official SDK does), and an SDK tool's ``ctx.session.list_roots()`` is such a message (it
is not related to the call), so a call sent before the stream opened lost it and hung to its
deadline. (While the stream is re-opened later, after the server ended it, that window remains:
only the server's event store can close it.) A 404
on a request carrying our session id raises :class:`SessionExpired`; the session re-initializes.

Each transport (one upstream session) has its own :class:`~connectors.mcp.http1.HTTP1Client`: its
connections and cookies live and die with the session. A 3xx is reported, not followed.

A connection that breaks under a request fails that request only (:class:`RequestFailed`): the
lean client already retried it once on a fresh connection where that is safe (idempotent methods,
``_RETRY_SAFE``). The session is lost only when no connection can be made at all, or the upstream
says so (404). A response over ``max_response_bytes`` fails its request only (:class:`ResponseTooLarge`).
Every connection goes through the connector's egress policy.

Stateless mode (``stateless = True``, 2026-07-28): no session id, no GET stream, no resumption
(the revision has none), and a connection failure fails that one request without declaring the
upstream lost (there is nothing to lose: the health probe decides whether it is down). Closing a
request's response stream (the caller cancelled, or timed out) is how the upstream learns of the
cancellation. ``send`` adds the request's own metadata headers to the static ones.

Upstream authorization (``auth``, a :class:`~connectors.oauth.requestauth.RequestAuth`): every
request carries its ``Authorization``; a 401 or 403 goes to ``auth.challenged`` with the
``WWW-Authenticate`` header, and the request is sent again when it says so (a token obtained,
refreshed or stepped up). Without ``auth`` the hot path is unchanged and a 401/403 is reported
as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from connectors.egress import EgressPolicy
from connectors.oauth.requestauth import MAX_ATTEMPTS, RequestAuth
from gateway.protocol.errors import BackendUnavailable
from gateway.protocol.jsonrpc import dumps

from .http1 import (
    BodyTooLarge,
    HTTP1Client,
    HTTPConnectionError,
    HTTPResponse,
    header_block,
    request_header_block,
)
from .sse import SSEDecoder
from .transport import (
    MAX_LINE,
    ClientTransport,
    Deliver,
    HTTPStatusError,
    OnLost,
    RequestFailed,
    ResponseTooLarge,
    SessionExpired,
    TransportClosed,
    decode_payload,
)

__all__ = ["StreamableHTTPTransport"]

log = logging.getLogger("connectors.mcp")

# OSError covers refused connections, DNS failures and the client's HTTPConnectionError.
_CONN_ERRORS = (OSError,)

# Requests that may be sent twice: they change nothing upstream (listings, reads, probes), so one
# lost with a connection the server closed as it arrived is retried on a fresh connection.
_RETRY_SAFE = frozenset({
    "ping", "server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list",
    "resources/read", "prompts/get", "completion/complete",
})

# A server that keeps a response stream open after the response holds its connection; give up on
# it (close the connection) after this long.
_STREAM_END_GRACE_S = 10.0

# How long opening a session waits for the server to answer its GET stream. The SDKs answer at
# once (headers before any event); one that sends headers only with its first event costs this
# much per session opened, and one still slower loses its unrelated messages until it answers.
_LISTEN_WAIT_S = 5.0


class StreamableHTTPTransport(ClientTransport):
    def __init__(self, name: str, deliver: Deliver, on_lost: OnLost, *, url: str, headers: dict[str, str],
                 connect_timeout_s: float, policy: EgressPolicy | None = None,
                 max_response_bytes: int = MAX_LINE, auth: RequestAuth | None = None) -> None:
        super().__init__(name, deliver, on_lost)
        self._url = url
        self._auth = auth
        self._auth_value: str | None = None  # the last credential sent (for GET and DELETE)
        self._max_bytes = max_response_bytes
        # Our own connections (and cookies): they live and die with this upstream session.
        self._http = HTTP1Client(url, connect_timeout_s=connect_timeout_s, policy=policy)
        # Replaced (never mutated) when the session id or version is learnt; the header block is
        # checked and built once per change, not per request.
        self._headers: dict[str, str] = {**headers, "Accept": "application/json, text/event-stream",
                                         "Content-Type": "application/json"}
        self._header_block = header_block(self._headers)
        self.session_id: str | None = None
        self._get_task: asyncio.Task[None] | None = None
        # Set once the GET stream's first attempt was answered (any status) or failed.
        self._get_answered = asyncio.Event()

    async def connect(self) -> None:
        # Nothing to open: the initialize POST is the connection. Failures surface there.
        return

    def _set_header(self, key: str, value: str) -> None:
        headers = {**self._headers, key: value}
        self._header_block = header_block(headers)
        self._headers = headers

    def _block(self, accept: str, last_event_id: str | None = None) -> str:
        """The header block for a GET or DELETE (not the hot path: built each time)."""
        headers = {k: v for k, v in self._headers.items() if k not in ("Accept", "Content-Type")}
        if accept:
            headers["Accept"] = accept
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        if self._auth is not None and self._auth_value:
            headers[self._auth.header] = self._auth_value
        return header_block(headers)

    def initialized(self) -> None:
        if self.protocol_version:
            self._set_header("MCP-Protocol-Version", self.protocol_version)
        self._get_task = asyncio.create_task(self._get_stream(), name=f"mcp-http-get-{self.name}")

    async def listening(self, timeout_s: float) -> None:
        """Until the server answered the GET stream's first request (its response headers: the
        SDK registers the stream before it sends them), or that request failed; at most
        ``min(timeout_s, _LISTEN_WAIT_S)``. No GET stream (stateless, never initialized): at once."""
        if self._get_task is None or self._get_answered.is_set():
            return
        try:
            async with asyncio.timeout(min(timeout_s, _LISTEN_WAIT_S)):
                await self._get_answered.wait()
        except TimeoutError:
            log.debug("upstream %s has not answered its GET stream yet: going on without waiting", self.name)

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if not self.is_open:
            raise TransportClosed(f"upstream {self.name} is disconnected")
        method = message.get("method")
        rid = message.get("id") if method is not None else None
        block = self._header_block if not headers else self._header_block + request_header_block(headers)
        try:
            if self._auth is None:
                resp = await self._http.request("POST", block, dumps(message), retry_safe=method in _RETRY_SAFE)
            else:
                authorized = await self._authorized_post(self._auth, block, message, rid)
                if authorized is None:
                    return
                resp = authorized
        except _CONN_ERRORS as exc:
            raise self._unreachable(exc, method) from None
        handed_off = False
        try:
            status = resp.status
            if status == 202:
                return
            if status == 404 and self.session_id is not None:
                raise SessionExpired(f"upstream {self.name} expired session {self.session_id}")
            sid = resp.headers.get("mcp-session-id")
            if sid and sid != self.session_id and not self.stateless:
                self.session_id = sid
                self._set_header("mcp-session-id", sid)
            if 300 <= status < 400:
                location = resp.headers.get("location")
                moved = f" (to {location}: set the connector's url to it)" if location else ""
                raise HTTPStatusError(f"upstream {self.name} answered HTTP {status}{moved}", status)
            if resp.headers.get("content-type", "").startswith("text/event-stream"):
                if rid is None:
                    return
                if not await self._read_stream(resp, rid):
                    raise BackendUnavailable(f"upstream {self.name} closed the response stream before answering")
                if not resp.complete:
                    # The server ends the stream a moment after the response: the caller returns
                    # now, and the connection returns to the pool when the stream ends.
                    handed_off = True
                    resp.release_at_end(_STREAM_END_GRACE_S)
                return
            body = await resp.read(self._max_bytes)
            if status >= 400:
                self._deliver_error_body(body, rid, status)
                return
            if rid is not None and not decode_payload(body, self._deliver, rid, self.name):
                kind = resp.headers.get("content-type", "no content type")
                raise BackendUnavailable(f"upstream {self.name} answered HTTP {status} ({kind}) without a "
                                         "JSON-RPC response to the request")
        except BodyTooLarge:
            raise ResponseTooLarge(self.name, self._max_bytes) from None
        except _CONN_ERRORS as exc:
            raise self._unreachable(exc, method) from None
        finally:
            if not handed_off:
                resp.release()

    async def _authorized_post(self, auth: RequestAuth, block: str, message: dict[str, Any],
                               rid: Any) -> HTTPResponse | None:
        """POST with the upstream's credential, answering its 401/403 challenges (module doc).
        None: the final 401/403 was delivered as the request's error."""
        body = dumps(message)
        retry_safe = message.get("method") in _RETRY_SAFE
        for _ in range(MAX_ATTEMPTS):
            value = await auth.authorization()
            sent = block + header_block({auth.header: value}) if value else block
            resp = await self._http.request("POST", sent, body, retry_safe=retry_safe)
            if resp.status not in (401, 403):
                if value:
                    self._auth_value = value
                    auth.accepted()
                return resp
            challenge = resp.headers.get("www-authenticate")
            try:
                error_body = await resp.read(64 * 1024)
            except BodyTooLarge:
                error_body = b""
            finally:
                resp.release()
            if not await auth.challenged(resp.status, challenge, value):
                self._deliver_error_body(error_body, rid, resp.status, authorized=True)
                return None
        raise HTTPStatusError(f"upstream {self.name} kept refusing its credentials (HTTP 401/403 after "
                              f"{MAX_ATTEMPTS} attempts)", 401)

    def _unreachable(self, exc: BaseException, method: Any) -> TransportClosed:
        """A connection failure, as the failure of this request (the connection broke under it)
        or of the session (no connection could be made: the upstream is not there)."""
        if isinstance(exc, HTTPConnectionError) and not exc.connecting:
            what = f"{method} to upstream {self.name}" if method else f"a message to upstream {self.name}"
            return RequestFailed(f"{what} failed with its connection ({exc}); the upstream session stands, "
                                 "the request may be retried")
        reason = f"cannot reach upstream {self.name} at {self._url}: {exc}"
        if not self.stateless:
            self._lose(reason)
        return TransportClosed(reason)

    def _deliver_error_body(self, body: bytes, rid: Any, status: int, authorized: bool = False) -> None:
        """A 4xx/5xx: pass a JSON-RPC error for our request through, otherwise fail with the status."""
        try:
            obj = json.loads(body)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "error" in obj and rid is not None:
            if obj.get("id") is None:
                obj = {**obj, "id": rid}
            self._deliver(obj, rid)
            return
        if rid is not None:
            hint = " (check the credentials in its headers)" if status in (401, 403) and not authorized else ""
            raise HTTPStatusError(f"upstream {self.name} answered HTTP {status}{hint}", status)

    async def _read_stream(self, resp: HTTPResponse, rid: Any) -> bool:
        """Deliver events until our response arrives; resume with Last-Event-ID if cut short."""
        decoder = SSEDecoder()
        if await self._consume(resp, decoder, rid):
            return True
        attempts = 0
        while decoder.last_event_id is not None and self.is_open and not self.stateless and attempts < 5:
            attempts += 1
            await asyncio.sleep((decoder.retry_ms if decoder.retry_ms is not None else 500) / 1000)
            again = await self._http.request("GET", self._block("text/event-stream", decoder.last_event_id))
            try:
                if again.status != 200:
                    return False
                if await self._consume(again, decoder, rid):
                    return True
            finally:
                again.release()
        return False

    async def _consume(self, resp: HTTPResponse, decoder: SSEDecoder, rid: Any, until_response: bool = True) -> bool:
        """Deliver the stream's messages (related to ``rid``) until our response, or with
        ``until_response=False`` until the stream ends. Reads whole chunks and splits lines here:
        one await per chunk instead of one per line (an answer is usually one chunk)."""
        deliver = self._deliver
        pending = b""
        while chunk := await resp.read_chunk():
            data = pending + chunk
            lines = data.split(b"\n")
            pending = lines.pop()
            # One SSE line is one message: none may pass the limit, whole or still arriving.
            if len(data) > self._max_bytes and (len(pending) > self._max_bytes or
                                                any(len(line) > self._max_bytes for line in lines)):
                raise ResponseTooLarge(self.name, self._max_bytes)
            done = False
            for line in lines:
                event = decoder.feed_line(line)
                if event is None or not event.data or event.event != "message":
                    continue
                try:
                    obj = json.loads(event.data)
                except ValueError:
                    log.warning("upstream %s sent an SSE event that is not JSON", self.name)
                    continue
                for item in obj if isinstance(obj, list) else (obj,):
                    if not isinstance(item, dict):
                        continue
                    deliver(item, rid)
                    if until_response and item.get("id") == rid and "method" not in item:
                        done = True
            if done:
                return True
        if pending:
            decoder.feed_line(pending)
        return False

    async def _get_stream(self) -> None:
        """The standalone GET stream for server messages unrelated to any request."""
        try:
            await self._get_stream_loop()
        finally:
            self._get_answered.set()  # (cancelled, or the server offers none): nobody waits for it

    async def _get_stream_loop(self) -> None:
        decoder = SSEDecoder()
        delay = 0.5
        while self.is_open:
            try:
                try:
                    resp = await self._http.request("GET", self._block("text/event-stream", decoder.last_event_id))
                finally:
                    self._get_answered.set()  # answered, or failed: the session need not wait longer
                try:
                    if resp.status == 405:
                        return  # the server offers no standalone stream
                    if 400 <= resp.status < 500 and resp.status not in (404, 408, 429):
                        log.debug("upstream %s refuses the GET stream: HTTP %s", self.name, resp.status)
                        return  # asking again would not change its mind
                    if resp.status != 200:
                        log.debug("upstream %s refused the GET stream: HTTP %s", self.name, resp.status)
                    else:
                        delay = 0.5
                        await self._consume(resp, decoder, None, until_response=False)
                finally:
                    resp.release()
            except _CONN_ERRORS:
                pass
            except ResponseTooLarge as exc:
                log.warning("upstream %s: GET stream dropped: %s", self.name, exc.message)
            if not self.is_open:
                return
            # The spec's retry field wins; otherwise back off so a down upstream is not hammered.
            await asyncio.sleep(decoder.retry_ms / 1000 if decoder.retry_ms is not None else delay)
            delay = min(delay * 2, 10.0)

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._get_task is not None:
            self._get_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._get_task
        if self.session_id is not None and not self._lost:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    (await self._http.request("DELETE", self._block(""))).release()
        await self._http.close()

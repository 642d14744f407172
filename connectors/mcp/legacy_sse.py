"""Legacy HTTP+SSE client transport (MCP 2024-11-05).

``connect`` opens the GET event stream at ``url`` and waits for the ``endpoint`` event naming the
URL to POST messages to (resolved against ``url``). Every server message then arrives as a
``message`` event on that one stream, so nothing is related to a request (``related_id`` None).
The stream ending is the upstream going away.

Credentials (the connector's ``headers``) stay with the configured origin: no redirect is
followed (a 3xx is reported with its target), and an ``endpoint`` on another origin (scheme, host,
port) is refused before anything is posted there. The connector's aiohttp client is built on its
egress policy, which checks every address connected to.

With ``auth`` (upstream OAuth, :mod:`connectors.oauth.requestauth`) the event stream's GET and
every POST carry its credential; a 401/403 on either goes to ``auth.challenged`` and, when it says
so, the stream is opened (or the message posted) again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

import aiohttp
from aiohttp.http_exceptions import LineTooLong
from yarl import URL

from connectors.egress import EgressRefused
from connectors.oauth.requestauth import MAX_ATTEMPTS, RequestAuth
from gateway.protocol.errors import BackendUnavailable
from gateway.protocol.jsonrpc import dumps

from .sse import SSEDecoder
from .transport import MAX_LINE, ClientTransport, Deliver, OnLost, TransportClosed, decode_payload

__all__ = ["LegacySSETransport"]

log = logging.getLogger("connectors.mcp")

# EgressRefused: the policy refused the address (not an OSError, so aiohttp lets it through).
_CONN_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError, EgressRefused)


class LegacySSETransport(ClientTransport):
    def __init__(self, name: str, deliver: Deliver, on_lost: OnLost, *, url: str, headers: dict[str, str],
                 http: aiohttp.ClientSession, connect_timeout_s: float, max_response_bytes: int = MAX_LINE,
                 auth: RequestAuth | None = None) -> None:
        super().__init__(name, deliver, on_lost)
        self._auth = auth
        self._auth_value: str | None = None
        self._refused: tuple[int, str | None] | None = None  # the stream's 401/403 and its challenge
        self._url = url
        self._max_bytes = max_response_bytes
        self._http = http
        self._headers = dict(headers)
        self._post_headers = {**headers, "Content-Type": "application/json"}
        self._connect_timeout = connect_timeout_s
        self._endpoint: asyncio.Future[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self.post_url: str | None = None

    async def connect(self) -> None:
        for _ in range(MAX_ATTEMPTS if self._auth is not None else 1):
            self._refused = None
            if self._auth is not None:
                self._auth_value = await self._auth.authorization()
            try:
                await self._connect_once()
                if self._auth is not None and self._auth_value:
                    self._auth.accepted()
                return
            except TransportClosed:
                refused = self._refused
                if self._auth is None or refused is None or not await self._auth.challenged(
                        refused[0], refused[1], self._auth_value):
                    raise
                self._closing, self._lost = False, False  # the next attempt opens a new stream

    def _credential(self) -> dict[str, str]:
        if self._auth is not None and self._auth_value:
            return {self._auth.header: self._auth_value}
        return {}

    async def _connect_once(self) -> None:
        self._endpoint = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._read(), name=f"mcp-sse-{self.name}")
        try:
            async with asyncio.timeout(self._connect_timeout):
                self.post_url = await asyncio.shield(self._endpoint)
        except (TimeoutError, TransportClosed) as exc:
            await self.close()
            raise TransportClosed(str(exc) or f"upstream {self.name} sent no endpoint event") from None

    async def _read(self) -> None:
        assert self._endpoint is not None
        reason = "event stream closed by the upstream"
        try:
            headers = {**self._headers, **self._credential(), "Accept": "text/event-stream"}
            async with self._http.get(self._url, headers=headers, allow_redirects=False) as resp:
                if resp.status in (401, 403) and self._auth is not None:
                    self._refused = (resp.status, resp.headers.get("WWW-Authenticate"))
                if resp.status != 200:
                    moved = resp.headers.get("Location")
                    where = f" (to {moved[:200]}: not followed)" if moved and 300 <= resp.status < 400 else ""
                    raise TransportClosed(f"upstream {self.name} answered HTTP {resp.status} at {self._url}{where}")
                decoder = SSEDecoder()
                while line := await resp.content.readuntil(b"\n", max_size=self._max_bytes):
                    event = decoder.feed_line(line)
                    if event is None:
                        continue
                    if event.event == "endpoint":
                        if not self._endpoint.done():
                            self._endpoint.set_result(self._same_origin(event.data.strip()))
                    elif event.event == "message" and event.data:
                        decode_payload(event.data, self._deliver, None, self.name)
        except TransportClosed as exc:
            reason = str(exc)
        except LineTooLong:  # readuntil past max_size
            reason = f"upstream {self.name} sent an event over {self._max_bytes} bytes (max_response_bytes)"
        except _CONN_ERRORS as exc:
            reason = f"cannot reach upstream {self.name} at {self._url}: {exc}"
        finally:
            if not self._endpoint.done():
                self._endpoint.set_exception(TransportClosed(reason))
                self._endpoint.exception()  # retrieved here so an unawaited failure is not logged
            if self._refused is None:  # a refused credential is answered by connect(), not lost
                self._lose(reason)

    def _same_origin(self, endpoint: str) -> str:
        """The POST URL an ``endpoint`` event names, refused on another origin: the connector's
        headers (its credentials) would go there."""
        url = urljoin(self._url, endpoint)
        ours, theirs = URL(self._url), URL(url)
        if (theirs.scheme, theirs.host, theirs.port) != (ours.scheme, ours.host, ours.port):
            raise TransportClosed(f"upstream {self.name} named an endpoint on another origin ({url[:200]}); "
                                  "the gateway posts only to the origin of the connector's url")
        return url

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if not self.is_open or self.post_url is None:
            raise TransportClosed(f"upstream {self.name} is disconnected")
        for _ in range(MAX_ATTEMPTS):
            if not await self._post(message):
                return
        raise BackendUnavailable(f"upstream {self.name} kept refusing its credentials")

    async def _post(self, message: dict[str, Any]) -> bool:
        """One POST; True when a challenge was answered and it is to be sent again."""
        headers = self._post_headers
        if self._auth is not None:
            self._auth_value = await self._auth.authorization()
            headers = {**headers, **self._credential()}
        try:
            async with self._http.post(self.post_url or "", data=dumps(message), headers=headers,
                                       allow_redirects=False) as resp:
                if resp.status in (401, 403) and self._auth is not None:
                    await resp.read()
                    if await self._auth.challenged(resp.status, resp.headers.get("WWW-Authenticate"),
                                                   self._auth_value):
                        return True
                if resp.status >= 400:
                    await resp.read()
                    if resp.status == 404:
                        self._lose(f"upstream {self.name} forgot our session (HTTP 404)")
                        raise TransportClosed(f"upstream {self.name} forgot our session")
                    raise BackendUnavailable(f"upstream {self.name} answered HTTP {resp.status}")
                if 300 <= resp.status < 400:
                    raise BackendUnavailable(f"upstream {self.name} answered HTTP {resp.status} (a redirect, "
                                             "not followed)")
        except _CONN_ERRORS as exc:
            reason = f"cannot reach upstream {self.name}: {exc}"
            self._lose(reason)
            raise TransportClosed(reason) from None
        return False

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

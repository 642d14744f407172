"""The client-transport contract shared by the stdio, legacy SSE and Streamable HTTP clients.

A transport moves JSON-RPC messages (dicts) between the gateway and one upstream server and knows
nothing of MCP semantics. It hands every incoming message to ``deliver(message, related_id)``:
``related_id`` is the id of the gateway's own request whose response stream carried the message
(Streamable HTTP knows it; stdio and legacy SSE pass None). ``deliver`` must not block: the
session it belongs to spawns tasks for anything slow.

When the upstream goes away on its own (process exit, event stream closed, connection refused)
the transport calls ``on_lost(reason)`` exactly once; after that ``send`` raises
:class:`TransportClosed`. :class:`SessionExpired` (HTTP 404 on a known session id) asks the owner
to re-initialize transparently. A stateless (2026-07-28) HTTP transport has no connection to
lose: a failed request raises :class:`TransportClosed` for that request only.

``send`` takes optional extra headers for that one message (the 2026-07-28 request metadata
headers); transports without headers ignore them. An HTTP error status without a JSON-RPC error
body raises :class:`HTTPStatusError`, which era detection reads.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Mapping
from typing import Any

from gateway.protocol.errors import BackendUnavailable, InternalError
from gateway.protocol.jsonrpc import loads

__all__ = ["Deliver", "OnLost", "TransportClosed", "SessionExpired", "RequestFailed", "ResponseTooLarge",
           "HTTPStatusError", "ClientTransport", "decode_payload", "MAX_LINE"]

log = logging.getLogger("connectors.mcp")

# Longest SSE line (one JSON-RPC message) accepted from an upstream. aiohttp's own line limit is
# 128 KiB, far below a large resource or tool result, so every reader passes this one.
MAX_LINE = 64 * 1024 * 1024

Deliver = Callable[[dict[str, Any], "str | int | None"], None]
OnLost = Callable[[str], None]


class TransportClosed(Exception):
    """The upstream connection is gone (or was never made); the message was not delivered."""


class SessionExpired(TransportClosed):
    """The upstream no longer knows our session (Streamable HTTP 404): initialize again."""


class RequestFailed(TransportClosed):
    """This one request was lost with its connection (reset, closed before or while answering);
    the upstream session stands and the request may be sent again (it may or may not have run)."""


class ResponseTooLarge(InternalError):
    """The upstream's answer to this request was over the byte limit: the request fails, the
    connection that carried it is closed, the session and every other request carry on."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(f"upstream {name} sent a response over the connector's limit of {limit} bytes "
                         "(max_response_bytes); ask for less, or raise the limit", {"limit": limit})
        self.limit = limit


class HTTPStatusError(BackendUnavailable):
    """The upstream answered a request with an HTTP error status and no JSON-RPC error."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def decode_payload(data: bytes | str, deliver: Deliver, related: str | int | None, name: str) -> bool:
    """Decode one JSON-RPC frame (object or batch) and deliver each message; True if it held the
    response to ``related``."""
    try:
        obj = loads(data)
    except ValueError:
        log.warning("upstream %s sent a frame that is not JSON: %.200r", name, data)
        return False
    answered = False
    for item in obj if isinstance(obj, list) else (obj,):
        if isinstance(item, dict):
            deliver(item, related)
            answered = answered or (related is not None and item.get("id") == related and "method" not in item)
        else:
            log.warning("upstream %s sent a JSON value that is not a message: %.200r", name, item)
    return answered


class ClientTransport(abc.ABC):
    """One connection to one upstream. Not reusable: a reconnect builds a new transport."""

    def __init__(self, name: str, deliver: Deliver, on_lost: OnLost) -> None:
        self.name = name
        self._deliver = deliver
        self._on_lost_cb = on_lost
        self._lost = False
        self._closing = False
        self._initialized = False
        # Negotiated by the session after initialize; HTTP transports send it as a header.
        self.protocol_version: str | None = None
        # 2026-07-28 over HTTP: requests stand alone (streamable_http.py); unused elsewhere.
        self.stateless = False

    @property
    def is_open(self) -> bool:
        return not self._lost and not self._closing

    def _lose(self, reason: str) -> None:
        if self._lost:
            return
        self._lost = True
        if not self._closing:
            self._on_lost_cb(reason)

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open the connection; raises TransportClosed (with a readable reason) on failure."""

    @abc.abstractmethod
    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        """Send one message (with ``headers`` where the transport has headers). For HTTP requests
        this returns once the response was delivered."""

    def initialized(self) -> None:
        """The initialize handshake completed (Streamable HTTP opens its GET stream here)."""
        self._initialized = True

    async def listening(self, timeout_s: float) -> None:
        """Wait, at most ``timeout_s``, until server messages unrelated to any request can reach
        us (called once after :meth:`initialized`, before the session is used). Returns at once
        where every message shares one channel (stdio, legacy SSE); never raises on a timeout."""
        return

    @abc.abstractmethod
    async def close(self) -> None:
        """Release everything; idempotent; never calls ``on_lost``."""

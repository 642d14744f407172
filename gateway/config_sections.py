"""The ``gateway:`` section of gateway.yaml: the server's identity and timings, the HTTP server
(:class:`HttpConfig`) and the caps and policies under it (server requests, relayed notifications,
name collisions, start retries). Pure models; :mod:`gateway.config` re-exports every one of them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from connectors.config import Model

__all__ = ["HttpConfig", "ServerRequestLimits", "RelayLimits", "NamesConfig", "StartRetry", "GatewaySection"]


class HttpConfig(Model):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # Origins allowed besides the loopback ones (DNS-rebinding protection); "*" allows any.
    allowed_origins: tuple[str, ...] = ()
    # Host header values allowed besides loopback ones when bound to loopback; "*" allows any.
    allowed_hosts: tuple[str, ...] = ()
    # Answer every POST with one JSON body, never with an SSE stream (for simple proxies).
    json_response: bool = False
    # SSE comment lines this often on open streams, so proxies with idle timeouts keep them; a POST
    # still running after this long switches to SSE to carry them (not with json_response).
    keepalive_s: float = Field(15.0, gt=0)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    # Server limits (gateway/transports/http_server.py): a request's line and headers must arrive
    # within header_timeout_s of its first byte, a POST body within body_timeout_s; an idle
    # keep-alive connection is closed after keepalive_timeout_s (longer than a proxy's idle timeout).
    header_timeout_s: float = Field(10.0, gt=0)
    body_timeout_s: float = Field(30.0, gt=0)
    keepalive_timeout_s: float = Field(75.0, gt=0)
    # One header line (name and value) longer than this is refused with 431.
    max_header_bytes: int = Field(8192, ge=1024, le=1024 * 1024)
    # At the cap a new connection evicts the oldest idle one; when all are busy it gets 503.
    max_connections: int = Field(4096, ge=1)
    # Sessions (Streamable HTTP and legacy SSE) open at once, in all and per principal (without
    # auth every caller is the one principal "anonymous").
    max_sessions: int = Field(10_000, ge=1)
    max_sessions_per_principal: int = Field(1000, ge=1)


class ServerRequestLimits(Model):
    """Requests an upstream sends to the client through the gateway (sampling, elicitation, roots,
    and their 2026-07-28 input requests); what is over a cap is refused to the upstream."""

    max_per_call: int = Field(50, ge=0)  # over the whole call (every MRTR round counted)
    max_per_session_per_s: float = Field(10.0, gt=0)  # refill rate of the session's bucket
    burst: int = Field(20, ge=1)  # the bucket's size


class RelayLimits(Model):
    """Notifications an upstream sends about one call (``notifications/message``,
    ``notifications/progress``) on their way to the caller, per call: a bucket of messages
    (``per_s``, ``burst``) and one of bytes (``bytes_per_s``, ``bytes_burst``; a message costs its
    encoded size). What does not fit is dropped and counted
    (``mcp_gateway_relayed_notifications_dropped_total``); the caller is told once per call."""

    per_s: float = Field(20.0, gt=0)
    burst: int = Field(100, ge=1)
    bytes_per_s: float = Field(65536.0, gt=0)
    bytes_burst: int = Field(1_048_576, ge=1)


class NamesConfig(Model):
    """What a public-name collision does (two connectors serving one tool or prompt name).
    ``keep_first`` (the default): the connector first in config order keeps the name, the others'
    are left out and reported (log, ``/readyz?verbose=1``, ``/status``), at start-up as at run
    time, so an upstream that lists a clashing tool cannot keep the gateway from starting.
    ``error``: a collision at start-up or on a reload refuses the config (exit 2 at start-up)."""

    on_collision: Literal["keep_first", "error"] = "keep_first"


class StartRetry(Model):
    """How a connector whose start failed is started again (gateway/startup.py): capped
    exponential backoff, each delay drawn between half and all of ``min(max_s, initial_s * 2^n)``."""

    initial_s: float = Field(1.0, gt=0)
    max_s: float = Field(60.0, gt=0)


class GatewaySection(Model):
    name: str = "mcp-gateway"
    version: str = "0.1.0"
    instructions: str | None = None
    page_size: int = Field(50, ge=1, le=10_000)
    http: HttpConfig = HttpConfig()
    # Shared by replicas so that any of them accepts a cursor another one issued.
    cursor_secret: str | None = None
    # 2026-07-28 cacheable results (listings, resources/read, server/discover) carry ttlMs from this.
    cache_ttl_s: float = Field(60.0, ge=0)
    request_timeout_s: float = Field(60.0, gt=0)
    session_idle_timeout_s: float = Field(3600.0, gt=0)
    shutdown_grace_s: float = Field(20.0, ge=0)
    # After SIGTERM a session stays open this long after its last request (within the grace
    # period), so a client's follow-up (the SDK lists tools after a call) is still answered.
    drain_linger_s: float = Field(3.0, ge=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"
    server_requests: ServerRequestLimits = ServerRequestLimits()
    names: NamesConfig = NamesConfig()
    relayed_notifications: RelayLimits = RelayLimits()
    start_retry: StartRetry = StartRetry()

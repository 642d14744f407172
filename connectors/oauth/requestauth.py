"""What a transport asks of an upstream's authorization, per request: the hook between the HTTP
transports (``connectors.mcp.streamable_http``, ``legacy_sse``; the OpenAPI connector) and
:class:`~connectors.oauth.client.OAuthClient`.

A transport with a :class:`RequestAuth` sends ``await auth.authorization()`` as the
``Authorization`` header of each request (None: no header; the upstream's 401 then starts
discovery) and, when the upstream answers 401 or 403, hands the status and its
``WWW-Authenticate`` to ``await auth.challenged(...)``: True means "send it again" (a token was
obtained, refreshed or stepped up), False means the answer stands. The auth object bounds the
retries (``max_step_up``, one refresh per refused token); the transport bounds the loop too
(:data:`MAX_ATTEMPTS`). :class:`~connectors.oauth.client.AuthorizationRequired` and
:class:`~connectors.oauth.client.UpstreamAuthError` propagate out of the request.

:class:`BearerAuth` is the OAuth one for one principal (``""``: the service identity);
:class:`StaticAuth` sends a fixed value (a principal's personal key) and never retries.
"""

from __future__ import annotations

from typing import Protocol

from .challenge import parse
from .client import OAuthClient

__all__ = ["RequestAuth", "BearerAuth", "StaticAuth", "MAX_ATTEMPTS"]

# Sends of one request at most: first, after discovery, after a refresh, after step-ups.
MAX_ATTEMPTS = 8


class RequestAuth(Protocol):
    header: str

    async def authorization(self) -> str | None: ...

    async def challenged(self, status: int, www_authenticate: str | None, sent: str | None) -> bool: ...

    def accepted(self) -> None: ...


class BearerAuth:
    """OAuth tokens of ``principal`` from ``client`` (``subject_token``: the caller's JWT, for
    ``identity: exchange``)."""

    header = "Authorization"

    def __init__(self, client: OAuthClient, principal: str, subject_token: str | None = None) -> None:
        self.client = client
        self.principal = principal
        self.subject_token = subject_token

    async def authorization(self) -> str | None:
        if self.client.discovered is None:
            return None  # nothing known yet: the upstream's challenge says where to go
        grant = await self.client.token(self.principal, self.subject_token)
        scheme = "Bearer" if grant.token_type.lower() == "bearer" else grant.token_type
        return f"{scheme} {grant.access_token}"

    async def challenged(self, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        challenge = parse(www_authenticate)
        token = sent.split(" ", 1)[1] if sent and " " in sent else None
        if status == 401:
            await self.client.unauthorized(self.principal, challenge, token)
            return True
        if status == 403 and challenge.error == "insufficient_scope":
            await self.client.insufficient_scope(self.principal, challenge, token)
            return True
        return False

    def accepted(self) -> None:
        self.client.accepted(self.principal)


class StaticAuth:
    """A fixed credential (never refreshed, never retried)."""

    def __init__(self, value: str, header: str = "Authorization") -> None:
        self._value = value
        self.header = header

    async def authorization(self) -> str | None:
        return self._value

    async def challenged(self, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        return False

    def accepted(self) -> None:
        return None

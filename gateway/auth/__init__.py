"""Authentication of HTTP requests: API keys and JWTs (JWKS), before any session exists.

The HTTP transports call ``await authenticator.authenticate(headers)`` on every request (the
gateway builds one :class:`Authenticator` per config and replaces it on reload). It returns the :class:`Principal` or raises
:class:`Unauthenticated`, whose ``status`` (401) and ``www_authenticate`` (the RFC 6750 / RFC 9728
challenge with ``resource_metadata=``) the transport sends back. With no ``auth.api_keys`` and no
``auth.jwt`` configured every request is the anonymous principal.

A bearer token is first looked up among the API keys (constant time); if none matches and it has
the shape of a JWT and JWT auth is configured, it is verified against the JWKS.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.config import AuthConfig
from gateway.context import ANONYMOUS, Principal
from gateway.telemetry import metrics

from .apikeys import ApiKeyStore, sha256_hex
from .jwks import JwksUnavailable, JwtVerifier, TokenInvalid
from .metadata import (
    WELL_KNOWN_PATH,
    base_url_from_headers,
    metadata_document,
    www_authenticate,
)

__all__ = ["Unauthenticated", "Authenticator", "www_authenticate", "sha256_hex", "WELL_KNOWN_PATH"]

log = logging.getLogger("gateway.auth")


class Unauthenticated(Exception):
    """Refuse the HTTP request with ``status`` and the ``WWW-Authenticate`` header value."""

    def __init__(self, message: str, www_authenticate: str, status: int = 401) -> None:
        super().__init__(message)
        self.message = message
        self.www_authenticate = www_authenticate
        self.status = status


class Authenticator:
    """Maps request headers to a principal. Cheap when auth is off (returns ANONYMOUS)."""

    def __init__(self, auth: AuthConfig, base_dir: str | Path = ".", name: str = "mcp-gateway") -> None:
        self.config = auth
        self.name = name
        self.api_keys = ApiKeyStore(auth.api_keys, base_dir)
        self.jwt = JwtVerifier(auth.jwt) if auth.jwt is not None else None
        self.enabled = auth.enabled
        # Counters for metrics/tests: accepted and refused authentications.
        self.accepted = 0
        self.refused = 0

    def protected_resource_metadata(self, base_url: str) -> dict[str, Any]:
        """The RFC 9728 document the HTTP app serves at :data:`WELL_KNOWN_PATH`."""
        return metadata_document(self.config, base_url, self.name)

    def _challenge(self, headers: Mapping[str, str], error: str | None, description: str | None) -> str:
        url = base_url_from_headers(headers) + WELL_KNOWN_PATH
        return www_authenticate(url, error, description, realm=self.name)

    def _refuse(self, headers: Mapping[str, str], message: str, error: str | None) -> Unauthenticated:
        self.refused += 1
        reason = "missing" if error is None else "expired" if "expired" in message else "invalid"
        metrics.AUTH_FAILURES.labels(reason).inc()
        return Unauthenticated(message, self._challenge(headers, error, message if error else None))

    async def authenticate(self, request_headers: Mapping[str, str]) -> Principal:
        if not self.enabled:
            return ANONYMOUS
        header = request_headers.get("Authorization") or request_headers.get("authorization")
        if not header:
            raise self._refuse(request_headers, "authentication required", None)
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise self._refuse(request_headers, "expected an Authorization: Bearer token", "invalid_request")
        principal = self.api_keys.lookup(token) if len(self.api_keys) else None
        if principal is None and self.jwt is not None and token.count(".") == 2:
            try:
                principal = await self.jwt.verify(token)
            except JwksUnavailable as exc:
                log.warning("JWT refused: %s", exc)
                raise self._refuse(request_headers, "token cannot be verified right now", "invalid_token") from None
            except TokenInvalid as exc:
                raise self._refuse(request_headers, str(exc), "invalid_token") from None
        if principal is None:
            raise self._refuse(request_headers, "invalid token", "invalid_token")
        self.accepted += 1
        return principal


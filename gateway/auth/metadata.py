"""OAuth 2.0 Protected Resource Metadata (RFC 9728) and the ``WWW-Authenticate`` challenge.

The MCP authorization specification (2025-11-25) makes the gateway an OAuth resource server: a 401
carries ``WWW-Authenticate: Bearer resource_metadata="<url>"`` pointing at
``/.well-known/oauth-protected-resource``, whose document names the authorization servers a
client obtains tokens from. Pure functions over config values and the request's base URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.config import AuthConfig

__all__ = ["WELL_KNOWN_PATH", "metadata_document", "www_authenticate", "base_url_from_headers"]

WELL_KNOWN_PATH = "/.well-known/oauth-protected-resource"


def metadata_document(auth: AuthConfig, base_url: str, name: str = "mcp-gateway") -> dict[str, Any]:
    base = base_url.rstrip("/")
    servers = list(auth.authorization_servers)
    if not servers and auth.jwt is not None and auth.jwt.issuer:
        servers = [auth.jwt.issuer]
    doc: dict[str, Any] = {
        "resource": auth.resource or f"{base}/mcp",
        "bearer_methods_supported": ["header"],
        "resource_name": name,
    }
    if servers:
        doc["authorization_servers"] = servers
    return doc


def base_url_from_headers(headers: Mapping[str, str], fallback: str = "http://127.0.0.1") -> str:
    """Scheme and host the client used (``X-Forwarded-Proto`` honoured for TLS-terminating proxies)."""
    host = _get(headers, "host")
    if not host:
        return fallback
    proto = (_get(headers, "x-forwarded-proto") or "http").split(",")[0].strip() or "http"
    return f"{proto}://{host}"


def _get(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.title())
    return value


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def www_authenticate(metadata_url: str, error: str | None = None, description: str | None = None,
                     realm: str = "mcp-gateway") -> str:
    """RFC 6750 challenge; ``error`` is omitted when no credentials were sent (RFC 6750 §3.1)."""
    parts = [f'realm="{_quote(realm)}"', f'resource_metadata="{_quote(metadata_url)}"']
    if error:
        parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{_quote(description)}"')
    return "Bearer " + ", ".join(parts)

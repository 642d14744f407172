"""The top-level ``oauth:`` block: where grants are kept, how they are sealed, where people are sent.

The gateway side of upstream OAuth (issue 17). A connector's own ``oauth:`` block (identity,
client, scopes: :mod:`connectors.oauth.config`) says how it obtains tokens; this block says what
the gateway gives every such connector:

* ``token_store``: ``file:PATH`` (default ``file:./oauth-tokens.bin``, relative to the config
  file) or ``redis://...`` / ``rediss://...`` / ``unix://...``. Unset, it is the shared
  ``state.store`` when that is Redis (a grant made through one replica serves all), else the file.
* ``encryption_key``: 32 bytes, base64 (``openssl rand -base64 32``), normally
  ``${MCP_GATEWAY_OAUTH_KEY}``; unset, the environment variable ``MCP_GATEWAY_OAUTH_KEY`` is read
  when the store is first needed. The store is AES-256-GCM sealed; no key is a start-up error.
* ``public_url``: the gateway's base URL as a person's browser reaches it; ``/oauth/start/{id}``
  links and ``/oauth/callback`` are under it (default: the address the server bound).
* ``client_metadata_url``: the gateway's Client ID Metadata Document (its URL is the client_id),
  served by the gateway at that URL's path; ``https`` with a path (``http`` only on loopback).

:func:`identity_problems` is the cross-section check ``parse_config`` runs on the raw file: a
connector whose ``oauth.identity`` is ``user`` needs callers with an identity (``auth.api_keys`` or
``auth.jwt``); ``exchange`` trades the caller's validated JWT, so it needs ``auth.jwt``. It reads
raw dicts, so it needs nothing of the connector kinds' models.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from connectors.config import Model
from gateway.protocol.errors import ConfigError

__all__ = ["GatewayOAuthConfig", "identity_problems", "KEY_ENV", "decode_key", "resolve_key", "DEFAULT_FILE"]

KEY_ENV = "MCP_GATEWAY_OAUTH_KEY"
DEFAULT_FILE = "file:./oauth-tokens.bin"
# Paths the gateway answers itself: its metadata document cannot take one of them.
_GATEWAY_PATHS = frozenset({"/mcp", "/sse", "/messages", "/messages/", "/healthz", "/readyz", "/metrics",
                            "/status", "/oauth/callback"})
_KEY_HINT = "32 bytes, base64-encoded (openssl rand -base64 32)"


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def decode_key(text: str) -> bytes:
    """The AES-256 key written as base64 (standard or URL-safe, padding optional); ValueError
    naming what is wrong (never echoing the value)."""
    raw = text.strip()
    padded = raw + "=" * (-len(raw) % 4)
    try:
        key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"encryption_key is not base64: it must be {_KEY_HINT}") from None
    if len(key) != 32:
        raise ValueError(f"encryption_key decodes to {len(key)} bytes: it must be {_KEY_HINT}")
    return key


class GatewayOAuthConfig(Model):
    token_store: str | None = None
    encryption_key: str | None = Field(None, repr=False)
    # Redis keys of grants and registrations live under this prefix (one hash tag); unset:
    # "{state.redis_prefix}:oauth", so replicas sharing sessions share grants.
    redis_prefix: str | None = None
    redis_timeout_s: float = Field(1.0, gt=0, le=10)
    public_url: str | None = None
    client_metadata_url: str | None = None
    # What the Client ID Metadata Document says of the gateway as an OAuth client.
    client_name: str = "mcp-gateway"
    application_type: Literal["web", "native"] = "web"
    # A person opens /oauth/start/{id} within this long, or asks again.
    start_ttl_s: float = Field(600.0, gt=0, le=86_400)
    # Authorizations waiting for their callback, at most (each holds a connector's redeem task).
    max_pending: int = Field(10_000, ge=1)
    # Behind an authenticating proxy (oauth2-proxy, IAP): the header naming the person who opened
    # /oauth/start/{id}; it must equal the principal that asked (else 403), so a start link sent to
    # someone else cannot bind their upstream account to the asker.
    user_header: str | None = None

    @field_validator("token_store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith("file:"):
            if not value[len("file:"):].strip():
                raise ValueError("token_store file: needs a path (file:./oauth-tokens.bin)")
            return value
        if urlsplit(value).scheme in ("redis", "rediss", "unix") and "://" in value:
            return value
        raise ValueError("token_store must be file:PATH, redis://HOST:PORT/DB, rediss://... or unix:///PATH")

    @field_validator("encryption_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is not None and value.strip():
            decode_key(value)
            return value
        return None  # empty (``${MCP_GATEWAY_OAUTH_KEY:-}``): the environment is read at start

    @field_validator("public_url")
    @classmethod
    def _public(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ValueError("public_url must be an http:// or https:// base URL (no query)")
        return value.rstrip("/")

    @field_validator("client_metadata_url")
    @classmethod
    def _cimd(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        # The CIMD draft: an https URL with a path; http is allowed for a loopback try-out only.
        if not (parts.scheme == "https" or (parts.scheme == "http" and _loopback(parts.hostname))):
            raise ValueError("client_metadata_url must be an https:// URL (http:// only on loopback)")
        if not parts.netloc or parts.path in ("", "/") or parts.query or parts.fragment:
            raise ValueError("client_metadata_url must have a path and no query or fragment "
                             "(https://gw.example/oauth/client.json)")
        if parts.path in _GATEWAY_PATHS or parts.path.startswith(("/mcp/", "/oauth/start/", "/.well-known/")):
            raise ValueError(f"client_metadata_url: the gateway serves {parts.path} itself; choose another path "
                             "(https://gw.example/oauth/client.json)")
        return value

    def store_url(self, state_store: str) -> str:
        """The store to open: the configured one, else the shared state store, else the file."""
        if self.token_store is not None:
            return self.token_store
        return state_store if state_store != "memory" else DEFAULT_FILE

    def prefix(self, state_prefix: str) -> str:
        return self.redis_prefix if self.redis_prefix is not None else f"{state_prefix}:oauth"

    def metadata_path(self) -> str | None:
        """The path the gateway serves its Client ID Metadata Document at."""
        return urlsplit(self.client_metadata_url).path if self.client_metadata_url else None


def resolve_key(config: GatewayOAuthConfig, env: Mapping[str, str] | None = None) -> bytes:
    """The store's key: ``oauth.encryption_key``, else ``$MCP_GATEWAY_OAUTH_KEY``; ConfigError
    when neither is set or the value is not 32 bytes of base64."""
    variables = os.environ if env is None else env
    text = config.encryption_key or variables.get(KEY_ENV, "")
    where = "oauth.encryption_key"
    if not text.strip():
        raise ConfigError(f"the OAuth token store is encrypted and has no key: set oauth.encryption_key "
                          f"(or the environment variable {KEY_ENV}) to {_KEY_HINT}", where)
    try:
        return decode_key(text)
    except ValueError as exc:
        source = where if config.encryption_key else KEY_ENV
        raise ConfigError(str(exc).replace("encryption_key", source, 1), where) from None


PathKey = tuple[str | int, ...]


def identity_problems(raw: Mapping[str, Any]) -> list[tuple[PathKey, str]]:
    """Connectors whose ``oauth.identity`` needs caller identities the ``auth:`` block does not
    give: (path of the identity key, message) for each."""
    auth = raw.get("auth") if isinstance(raw.get("auth"), dict) else {}
    assert isinstance(auth, dict)
    has_jwt = bool(auth.get("jwt"))
    has_auth = has_jwt or bool(auth.get("api_keys"))
    entries = raw.get("connectors")
    out: list[tuple[PathKey, str]] = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        oauth = entry.get("oauth") if isinstance(entry, dict) else None
        identity = oauth.get("identity") if isinstance(oauth, dict) else None
        path: PathKey = ("connectors", i, "oauth", "identity")
        if identity == "user" and not has_auth:
            out.append((path, "oauth identity user keeps a grant per caller: turn on downstream auth "
                              "(auth.api_keys or auth.jwt), else every caller is the one principal anonymous"))
        elif identity == "exchange" and not has_jwt:
            out.append((path, "oauth identity exchange trades the caller's validated JWT for an upstream token: "
                              "it needs downstream auth.jwt"))
    return out

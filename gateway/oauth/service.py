"""What the app holds of upstream OAuth: the token store, the broker and the port connectors get.

:func:`open_token_store` builds the store a config names (``oauth.token_store``, else the shared
``state.store``, else ``file:./oauth-tokens.bin`` next to the config file), sealed with the key
of ``oauth.encryption_key`` / ``$MCP_GATEWAY_OAUTH_KEY``, and opens it: a missing or malformed
key, a store sealed with another key, or an unreachable Redis is a :class:`ConfigError` naming
``oauth.*`` before any connector starts. ``mcp-gateway oauth list|revoke`` uses it too.

:class:`OAuthService` opens the store the first time a connector about to start has an ``oauth:``
block and no port of its own (:meth:`attach`, called for each batch of connectors the app starts,
at start-up and on reload) and gives every such connector the same
:class:`~connectors.oauth.port.OAuthPort`; a gateway with none opens nothing and needs no key. A
connector given a port already (a test's, an embedding application's) keeps it. The store is
fixed when it opens: changing ``oauth.token_store``, the key or ``public_url`` takes a restart.
Authorization links start with ``oauth.public_url``, else the address the server bound
(:meth:`serving_at`), else ``http://{gateway.http.host}:{port}``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from connectors.oauth.port import LOCAL_OAUTH, OAuthPort, TokenStore
from gateway.config import GatewayConfig
from gateway.protocol.errors import ConfigError
from gateway.state.base import StateStore
from gateway.state.bus import Bus

from .broker import GatewayBroker
from .config import GatewayOAuthConfig, resolve_key
from .sealing import Sealer, StoreError

__all__ = ["OAuthService", "ClosableStore", "open_token_store", "probe_token_store", "uses_oauth", "wants_port",
           "client_metadata"]

log = logging.getLogger("gateway.oauth")


class ClosableStore(TokenStore, Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...


def uses_oauth(config: GatewayConfig) -> bool:
    """Whether a connector of ``config`` has an ``oauth:`` block (the kinds' models say so)."""
    return any(getattr(c, "oauth", None) is not None for c in config.connectors)


def wants_port(connector: Any) -> bool:
    """A connector with an ``oauth:`` block and the default port (or none: a connector class
    without the attribute): the gateway's port is for it. One given a port already keeps it."""
    return getattr(connector.config, "oauth", None) is not None and \
        getattr(connector, "oauth_port", LOCAL_OAUTH) is LOCAL_OAUTH


async def open_token_store(config: GatewayConfig, env: dict[str, str] | None = None) -> ClosableStore:
    """The token store ``config`` names, opened (ConfigError when it cannot be)."""
    oauth = config.oauth
    sealer = Sealer(resolve_key(oauth, env))
    url = oauth.store_url(config.state.store)
    store: ClosableStore
    if url.startswith("file:"):
        from .file_store import EncryptedFileTokenStore

        path = Path(url[len("file:"):].strip())
        store = EncryptedFileTokenStore(path if path.is_absolute() else Path(config.base_dir) / path, sealer)
    else:
        from .redis_store import RedisTokenStore

        store = RedisTokenStore(url, sealer, oauth.prefix(config.state.redis_prefix), oauth.redis_timeout_s)
    try:
        await store.open()
    except StoreError as exc:
        await store.close()
        raise ConfigError(str(exc), "oauth.token_store") from None
    return store


async def probe_token_store(config: GatewayConfig) -> tuple[bool, str]:
    """``validate --deep``: open the store the config names (key, file or Redis), then close it."""
    try:
        store = await open_token_store(config)
    except ConfigError as exc:
        return False, exc.message
    await store.close()
    return True, f"opened ({'file' if config.oauth.store_url(config.state.store).startswith('file:') else 'Redis'})"


def client_metadata(config: GatewayConfig, public_url: str) -> dict[str, object] | None:
    """The gateway's Client ID Metadata Document (None without ``oauth.client_metadata_url``):
    its ``client_id`` is that URL; its ``redirect_uris`` the gateway's callback and every
    connector's own ``oauth.redirect_uri``."""
    oauth = config.oauth
    if oauth.client_metadata_url is None:
        return None
    redirects = [f"{public_url}/oauth/callback"]
    for connector in config.connectors:
        uri = getattr(getattr(connector, "oauth", None), "redirect_uri", None)
        if isinstance(uri, str) and uri not in redirects:
            redirects.append(uri)
    return {
        "client_id": oauth.client_metadata_url,
        "client_name": oauth.client_name,
        "redirect_uris": redirects,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": oauth.application_type,
    }


def _public_url(config: GatewayConfig) -> str:
    if config.oauth.public_url is not None:
        return config.oauth.public_url
    http = config.gateway.http
    host = f"[{http.host}]" if ":" in http.host else http.host
    return f"http://{host}:{http.port}"


class OAuthService:
    """The store, broker and port of one gateway (opened when first needed)."""

    def __init__(self, config: Callable[[], GatewayConfig], state: StateStore, bus: Bus) -> None:
        self._config = config
        self._state = state
        self._bus = bus
        self.store: ClosableStore | None = None
        self.broker: GatewayBroker | None = None
        self.port: OAuthPort | None = None
        self._opened_with: GatewayOAuthConfig | None = None
        self._bound: str | None = None

    @property
    def config(self) -> GatewayConfig:
        return self._config()

    @property
    def public_url(self) -> str:
        if self.broker is not None:
            return self.broker.public_url
        return self.config.oauth.public_url or self._bound or _public_url(self.config)

    def metadata(self) -> dict[str, object] | None:
        """The Client ID Metadata Document as the current config says it."""
        return client_metadata(self.config, self.public_url)

    def metadata_path(self) -> str | None:
        return self.config.oauth.metadata_path()

    def serving_at(self, url: str) -> None:
        """The address the HTTP server bound (``serve``, tests on an ephemeral port): the base of
        authorization links when ``oauth.public_url`` is not set."""
        self._bound = url.rstrip("/")
        if self.broker is not None and self._opened_with is not None and self._opened_with.public_url is None:
            self.broker.public_url = self._bound

    async def attach(self, config: GatewayConfig, connectors: Iterable[Any]) -> None:
        """Give the port to each of ``connectors`` (about to start) that wants one: an ``oauth:``
        block and no port of its own (the default :data:`LOCAL_OAUTH`). The store opens with the
        first one: a missing or wrong key is a ConfigError before any connector starts."""
        wanting = [c for c in connectors if wants_port(c)]
        port = await self.port_for(config) if wanting else None
        for connector in wanting:
            setattr(connector, "oauth_port", port)  # noqa: B010 (the connectors' seam, by duck typing)

    async def port_for(self, config: GatewayConfig) -> OAuthPort:
        """The port of this gateway, opening the store and the broker the first time."""
        if self.port is not None:
            if config.oauth != self._opened_with:
                log.warning("the oauth: block changed: the token store, its key and public_url stay as they "
                            "were until a restart")
            return self.port
        store = await open_token_store(config)
        oauth = config.oauth
        self.store, self._opened_with = store, oauth
        public = oauth.public_url or self._bound or _public_url(config)
        self.broker = GatewayBroker(store, public, state=self._state, bus=self._bus, max_ttl_s=oauth.start_ttl_s,
                                    max_pending=oauth.max_pending, user_header=oauth.user_header)
        self.port = OAuthPort(store, self.broker, oauth.client_metadata_url)
        log.info("OAuth token store open (%s); authorization links under %s/oauth/start/",
                 "Redis" if not oauth.store_url(config.state.store).startswith("file:") else "file", public)
        return self.port

    async def close(self) -> None:
        if self.broker is not None:
            await self.broker.close()
        if self.store is not None:
            await self.store.close()

"""The gateway's side of upstream OAuth (issue 17): what it gives every connector with an ``oauth:``
block through :class:`connectors.oauth.port.OAuthPort`.

* :mod:`.config` — the top-level ``oauth:`` block and the cross-section identity check;
* :mod:`.sealing` — AES-256-GCM sealing of what the stores keep (key fingerprint, AAD);
* :mod:`.file_store` — :class:`EncryptedFileTokenStore` (the default: one sealed file);
* :mod:`.redis_store` — :class:`RedisTokenStore` (shared by replicas);
* :mod:`.broker` — :class:`GatewayBroker`: pending authorizations, ``/oauth/start`` and
  ``/oauth/callback`` logic, callbacks routed to the replica holding the authorization;
* :mod:`.routes` — the aiohttp routes and the Client ID Metadata Document;
* :mod:`.service` — :class:`OAuthService`: builds the store, the broker and the port for the app;
* :mod:`.cli` — ``mcp-gateway oauth list|revoke``.

This package's ``__init__`` imports nothing: :mod:`gateway.config` imports :mod:`.config`.
"""

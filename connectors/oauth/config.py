"""The ``oauth:`` and ``credentials:`` blocks of a connector entry (``type: mcp`` over HTTP,
``type: openapi``).

``oauth`` says how the connector obtains upstream tokens:

* ``identity``: ``service`` (one grant for the connector: ``client_credentials`` when the client
  can authenticate and the authorization server offers that grant, else an authorization code an
  operator completes once), ``user`` (a grant per principal, authorization code + PKCE; the
  principal without one is sent the authorization URL as a URL-mode elicitation) or ``exchange``
  (the caller's validated JWT traded for an upstream token, RFC 8693). Listings and the shared
  upstream session always use the service grant.
* ``client``: a pre-registered client (``client_id``, ``client_secret``, ``auth_method``,
  ``issuer`` the credentials are bound to, ``private_key`` for ``private_key_jwt``); without it the
  gateway's Client ID Metadata Document is used, else dynamic registration.
* ``redirect_uri`` (the gateway's ``/oauth/callback``), ``scopes`` (empty: the challenge's
  ``scope``, else the resource's ``scopes_supported``), ``max_step_up`` (403
  ``insufficient_scope`` re-authorisations per principal), ``refresh_margin_s``,
  ``authorization_timeout_s`` (how long a call waits for a person to authorise).
* ``exchange``: for ``identity: exchange``, the token endpoint (``token_url``, else the discovered
  one) and the ``audience`` asked for.

``credentials: {per_principal: {alice: ${ALICE_PAT}}}`` are personal static keys for upstreams
that take nothing else: a principal's key goes only with that principal's calls, as
``Authorization: Bearer <key>`` (or the ``header`` named); a principal without one is refused.
``credentials.service`` is the key listings and the shared session use.

Secrets are ``SecretStr``: printing or dumping a config never shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from connectors.config import Model

__all__ = ["OAuthClientConfig", "ExchangeConfig", "OAuthConfig", "CredentialsConfig", "AuthMethod", "Identity",
           "no_static_authorization"]

AuthMethod = Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
Identity = Literal["service", "user", "exchange"]


class OAuthClientConfig(Model):
    """A client registered ahead of time at the authorization server ``issuer``."""

    client_id: str = Field(min_length=1)
    client_secret: SecretStr | None = None
    auth_method: AuthMethod | None = None  # None: client_secret_basic with a secret, none without
    # The credentials belong to this authorization server only (exact issuer string); None: to
    # whichever one the resource names (the operator's word that there is only one).
    issuer: str | None = None
    # private_key_jwt: a PEM private key (RSA or EC) and its JWS algorithm.
    private_key: SecretStr | None = None
    signing_algorithm: str = "RS256"

    @property
    def method(self) -> str:
        if self.auth_method is not None:
            return self.auth_method
        if self.private_key is not None:
            return "private_key_jwt"
        return "client_secret_basic" if self.client_secret is not None else "none"

    @model_validator(mode="after")
    def _secrets_for_method(self) -> OAuthClientConfig:
        method = self.method
        if method in ("client_secret_basic", "client_secret_post") and self.client_secret is None:
            raise ValueError(f"auth_method {method} needs client_secret")
        if method == "private_key_jwt" and self.private_key is None:
            raise ValueError("auth_method private_key_jwt needs private_key (PEM)")
        return self


class ExchangeConfig(Model):
    """RFC 8693 token exchange (``identity: exchange``)."""

    token_url: str | None = None  # None: the discovered authorization server's token endpoint
    audience: str | None = None
    subject_token_type: str = "urn:ietf:params:oauth:token-type:jwt"


class OAuthConfig(Model):
    identity: Literal["service", "user", "exchange"] = "service"
    client: OAuthClientConfig | None = None
    redirect_uri: str | None = None
    scopes: tuple[str, ...] = ()
    max_step_up: int = Field(2, ge=0, le=10)
    refresh_margin_s: float = Field(30.0, ge=0)
    authorization_timeout_s: float = Field(300.0, gt=0)
    # What a DCR request declares (SEP-837): a gateway is a web application (it has a server).
    application_type: Literal["web", "native"] = "web"
    client_name: str = "mcp-gateway"
    exchange: ExchangeConfig | None = None

    @model_validator(mode="after")
    def _identity_needs(self) -> OAuthConfig:
        if self.identity == "user" and not self.redirect_uri:
            raise ValueError("oauth identity user needs redirect_uri (the gateway's /oauth/callback)")
        if self.redirect_uri is not None and not self.redirect_uri.startswith(("http://", "https://")):
            raise ValueError("oauth redirect_uri must be http:// or https://")
        return self


class CredentialsConfig(Model):
    """Personal static keys, by principal name."""

    per_principal: dict[str, SecretStr] = Field(default_factory=dict)
    # The key of listings and the shared upstream session (None: they go without one).
    service: SecretStr | None = None
    header: str = "Authorization"
    # The value is ``scheme + " " + key`` (empty scheme: the key alone).
    scheme: str = "Bearer"

    def value_for(self, principal: str | None) -> str | None:
        """The header value for ``principal`` (None: the service key)."""
        secret = self.service if principal is None else self.per_principal.get(principal)
        if secret is None:
            return None
        key = secret.get_secret_value()
        return f"{self.scheme} {key}" if self.scheme else key


def no_static_authorization(field: str, headers: Mapping[str, str] | None, static: str | None = None) -> None:
    """Refuse ``oauth``/``credentials`` (``field``) beside a static credential: an ``Authorization``
    header in ``headers``, or ``static`` (what else the entry configures, named)."""
    if static is None and not any(k.lower() == "authorization" for k in headers or {}):
        return
    raise ValueError(f"{field} and {static or 'an Authorization header in headers'} both set the upstream's "
                     "credentials: keep one")

"""Which client the connector is at an authorization server, in the spec's order of preference:

1. the pre-registered ``client`` of the config, when it is bound to this issuer (or to none);
2. a registration made earlier at this issuer (the token store keeps them under (connector,
   issuer): never presented to another authorization server, so a changed issuer means a new
   registration);
3. the gateway's Client ID Metadata Document (its URL is the ``client_id``) when the server says
   ``client_id_metadata_document_supported``;
4. Dynamic Client Registration (RFC 7591) with ``application_type`` (SEP-837), stored.

:func:`auth_method` picks how a registered client authenticates at the token endpoint: what the
registration answer says, else the first of basic, post the server supports for a client with a
secret, else ``none``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import OAuthConfig
from .discovery import Discovery
from .http import OAuthHTTP
from .port import TokenStore

__all__ = ["ClientIdentity", "RegistrationError", "auth_method", "client_for"]


class RegistrationError(Exception):
    """No client could be had at this authorization server."""


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    client_id: str
    method: str  # client_secret_basic | client_secret_post | private_key_jwt | none
    client_secret: str | None = field(default=None, repr=False)
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    source: str = "preregistered"  # preregistered | stored | cimd | dcr

    @property
    def confidential(self) -> bool:
        return self.method != "none"


def auth_method(registered: str | None, secret: str | None, supported: Any) -> str:
    if isinstance(registered, str) and registered:
        return registered
    methods = supported if isinstance(supported, list) else ["client_secret_basic"]
    if secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in methods:
                return method
    return "none"


def _from_registration(reg: dict[str, Any], source: str) -> ClientIdentity:
    return ClientIdentity(str(reg["client_id"]), str(reg.get("method") or "none"), reg.get("client_secret"),
                          source=source)


async def client_for(http: OAuthHTTP, discovery: Discovery, cfg: OAuthConfig, store: TokenStore, connector: str,
                     client_metadata_url: str | None) -> ClientIdentity:
    """The client to present at ``discovery.issuer`` (registering one if need be)."""
    pre = cfg.client
    if pre is not None and (pre.issuer is None or pre.issuer == discovery.issuer):
        return ClientIdentity(pre.client_id, pre.method,
                              pre.client_secret.get_secret_value() if pre.client_secret else None,
                              pre.private_key.get_secret_value() if pre.private_key else None,
                              pre.signing_algorithm)
    stored = await store.get_registration(connector, discovery.issuer)
    if stored and stored.get("client_id"):
        return _from_registration(stored, "stored")
    if client_metadata_url and discovery.metadata.get("client_id_metadata_document_supported") is True:
        return ClientIdentity(client_metadata_url, "none", source="cimd")
    endpoint = discovery.endpoint("registration_endpoint")
    if endpoint is None:
        raise RegistrationError(f"authorization server {discovery.issuer} offers no registration and no client "
                                "is configured for it (oauth.client with its issuer)")
    supported = discovery.metadata.get("token_endpoint_auth_methods_supported")
    wanted = auth_method(None, "secret", supported)
    request: dict[str, Any] = {
        "client_name": cfg.client_name,
        "redirect_uris": [cfg.redirect_uri] if cfg.redirect_uri else [],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted,
        "application_type": cfg.application_type,
    }
    if cfg.scopes:
        request["scope"] = " ".join(cfg.scopes)
    answer = await http.request("POST", endpoint, json_body=request)
    if not answer.ok or answer.body is None or not isinstance(answer.body.get("client_id"), str):
        raise RegistrationError(f"registration at {endpoint} failed (HTTP {answer.status})")
    body = answer.body
    secret = body.get("client_secret") if isinstance(body.get("client_secret"), str) else None
    method = auth_method(body.get("token_endpoint_auth_method"), secret, supported)
    registration = {"client_id": body["client_id"], "client_secret": secret, "method": method}
    await store.put_registration(connector, discovery.issuer, registration)
    return _from_registration(registration, "dcr")

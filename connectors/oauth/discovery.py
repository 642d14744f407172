"""Where a protected upstream's authorization server is, and what it offers.

The order is the MCP authorization spec's (2025-11-25 and 2026-07-28, "Authorization Server
Discovery"):

1. Protected Resource Metadata (RFC 9728): the ``resource_metadata`` URL of the 401's
   ``WWW-Authenticate`` challenge, else the path-based well-known URL
   (``/.well-known/oauth-protected-resource/<path>``), then the root one. Its ``resource`` must
   name the connector's URL (same origin, a path prefix of it: :func:`resource_matches`), else
   nothing is sent anywhere (a server must not point us at another resource's tokens).
2. Authorization-server metadata of its first ``authorization_servers`` issuer: RFC 8414 with
   path insertion, OIDC with path insertion, OIDC with path appending (for an issuer without a
   path: RFC 8414 then OIDC). The document's ``issuer`` must equal the issuer exactly (RFC 8414
   §3.3, no normalisation).
3. An upstream without protected-resource metadata: the configured client's ``issuer`` when there
   is one (a REST API rarely serves RFC 9728 metadata), else (the 2025-03-26 revision) it is its
   own authorization server: its origin's metadata, else ``/authorize``, ``/token``, ``/register``.

PKCE S256 is required for the authorization-code grant (:attr:`Discovery.pkce_s256`): a server
that does not advertise it is refused before any redirect (checked by the caller that needs it).
The candidate URLs and the checks are pure functions; :func:`discover` does the fetching.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from .challenge import Challenge
from .http import OAuthHTTP, OAuthHTTPError

__all__ = ["Discovery", "DiscoveryError", "prm_candidates", "metadata_candidates", "resource_matches", "canonical",
           "discover"]


class DiscoveryError(Exception):
    """The upstream's authorization could not be discovered (or was refused: a resource that is
    not ours, an issuer that does not match)."""


@dataclass(frozen=True, slots=True)
class Discovery:
    resource: str  # the RFC 8707 resource tokens are asked for (and the only place they go)
    issuer: str
    metadata: dict[str, Any] = field(repr=False)
    resource_scopes: tuple[str, ...] = ()  # the PRM's scopes_supported

    def endpoint(self, name: str) -> str | None:
        value = self.metadata.get(name)
        return value if isinstance(value, str) and value else None

    @property
    def pkce_s256(self) -> bool:
        return "S256" in (self.metadata.get("code_challenge_methods_supported") or ())

    @property
    def iss_supported(self) -> bool:
        return self.metadata.get("authorization_response_iss_parameter_supported") is True

    @property
    def as_scopes(self) -> tuple[str, ...]:
        return tuple(self.metadata.get("scopes_supported") or ())

    def supports_grant(self, grant: str) -> bool:
        grants = self.metadata.get("grant_types_supported")
        return grant in (grants if isinstance(grants, list) else ["authorization_code", "implicit"])


def _origin(url: URL) -> str:
    return str(url.origin())


def prm_candidates(server_url: str, challenge: Challenge) -> list[str]:
    """The protected-resource metadata URLs to try, in order."""
    url = URL(server_url)
    out: list[str] = []
    if challenge.resource_metadata:
        out.append(challenge.resource_metadata)
    path = url.path.rstrip("/")
    if path:
        out.append(f"{_origin(url)}/.well-known/oauth-protected-resource{path}")
    out.append(f"{_origin(url)}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(out))


def metadata_candidates(issuer: str) -> list[str]:
    """The authorization-server metadata URLs of ``issuer``, in the spec's order."""
    url = URL(issuer)
    origin = _origin(url)
    path = url.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether a PRM ``resource`` names the upstream at ``server_url``: same origin, and its path
    is the server's path or a path-segment prefix of it."""
    try:
        res, srv = URL(resource), URL(server_url)
    except ValueError:
        return False
    if not res.is_absolute() or res.fragment:
        return False
    if (res.scheme.lower(), (res.host or "").lower(), res.port) != (srv.scheme.lower(), (srv.host or "").lower(), srv.port):
        return False
    rpath, spath = res.path.rstrip("/"), srv.path.rstrip("/")
    return spath == rpath or spath.startswith(rpath + "/")


def canonical(server_url: str) -> str:
    """The server URL as an RFC 8707 resource: no fragment, no query, no trailing slash."""
    url = URL(server_url).with_fragment(None).with_query(None)
    text = str(url)
    return text[:-1] if text.endswith("/") and url.path != "/" else text.rstrip("/")


async def _metadata(http: OAuthHTTP, issuer: str) -> dict[str, Any] | None:
    for candidate in metadata_candidates(issuer):
        try:
            answer = await http.get(candidate)
        except OAuthHTTPError:
            continue
        if answer.ok and answer.body is not None:
            if answer.body.get("issuer") != issuer:
                raise DiscoveryError(f"the authorization server metadata at {candidate} names issuer "
                                     f"{str(answer.body.get('issuer'))[:200]!r}, not {issuer!r}")
            return answer.body
    return None


async def discover(http: OAuthHTTP, server_url: str, challenge: Challenge, fallback_issuer: str | None = None) -> Discovery:
    """Discover the authorization server of the upstream at ``server_url`` (see the module doc)."""
    prm: dict[str, Any] | None = None
    for candidate in prm_candidates(server_url, challenge):
        try:
            answer = await http.get(candidate)
        except OAuthHTTPError as exc:
            if candidate == challenge.resource_metadata:
                raise DiscoveryError(str(exc)) from None
            continue
        if answer.ok and answer.body is not None:
            prm = answer.body
            break
    if prm is None and fallback_issuer is not None:
        metadata = await _metadata(http, fallback_issuer)
        if metadata is None:
            raise DiscoveryError(f"no authorization server metadata found for issuer {fallback_issuer!r}")
        return Discovery(canonical(server_url), fallback_issuer, metadata)
    if prm is None:  # 2025-03-26: the upstream is its own authorization server
        issuer = _origin(URL(server_url))
        metadata = await _metadata(http, issuer)
        if metadata is None:
            metadata = {"issuer": issuer, "authorization_endpoint": f"{issuer}/authorize",
                        "token_endpoint": f"{issuer}/token", "registration_endpoint": f"{issuer}/register",
                        "code_challenge_methods_supported": ["S256"]}
        return Discovery(canonical(server_url), issuer, metadata)
    resource = prm.get("resource")
    if not isinstance(resource, str) or not resource_matches(resource, server_url):
        raise DiscoveryError(f"the protected resource metadata names resource {str(resource)[:200]!r}, which is "
                             f"not the connector's url: no token is asked for it")
    servers = prm.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise DiscoveryError("the protected resource metadata names no authorization server")
    issuer = servers[0]
    metadata = await _metadata(http, issuer)
    if metadata is None:
        raise DiscoveryError(f"no authorization server metadata found for issuer {issuer!r}")
    scopes = prm.get("scopes_supported")
    return Discovery(resource, issuer, metadata, tuple(s for s in scopes if isinstance(s, str))
                     if isinstance(scopes, list) else ())

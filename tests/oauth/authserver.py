"""A loopback OAuth authorization server and a protected MCP upstream behind it, for tests.

:class:`AuthServer` (aiohttp, on 127.0.0.1) serves RFC 8414 and OIDC metadata, Dynamic Client
Registration, the authorization endpoint (approves at once for the person named by the
``X-Test-User`` header of the browser's request, redirects with ``code``, ``state`` and ``iss``),
and the token endpoint: ``client_credentials`` (subject ``service:<client_id>``), the
authorization code with PKCE S256, refresh with rotation (the old refresh token dies), RFC 8693
token exchange (subject ``exchange:<sub of the JWT>``). Every token is opaque, bound to the
``resource`` it was asked for (its audience) and lives ``token_lifetime_s``. It counts what it is
asked (:attr:`AuthServer.counts`).

:class:`ProtectedUpstream` is a reverse proxy in front of the official-SDK test upstream
(``tests/connectors/mcp/upstream_server.py``): it serves the protected-resource metadata, answers
a request without a valid token for its own URL with 401 and a ``WWW-Authenticate`` challenge, one
whose token lacks ``required_scope`` with 403 ``insufficient_scope``, and records every token it
receives with its subject and the JSON-RPC method (:attr:`ProtectedUpstream.seen`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import jwt
from aiohttp import web

from tests.connectors.mcp.helpers import upstream_http

__all__ = ["AuthServer", "ProtectedUpstream", "Seen", "auth_world"]


@dataclass
class Token:
    subject: str
    audience: str | None
    scopes: tuple[str, ...]
    expires: float


@dataclass
class Seen:
    token: str | None
    subject: str | None
    method: str | None
    body: dict[str, Any] = field(default_factory=dict)
    status: int = 200


class AuthServer:
    def __init__(self, *, token_lifetime_s: float = 3600.0, client_credentials: bool = True,
                 grantable: frozenset[str] | None = None) -> None:
        self.url = ""
        self.grantable = grantable  # None: every scope asked is granted
        self.token_lifetime_s = token_lifetime_s
        self.client_credentials = client_credentials
        self.clients: dict[str, dict[str, Any]] = {"gw": {"secret": "gw-secret"}}
        self.tokens: dict[str, Token] = {}
        self.refresh_tokens: dict[str, Token] = {}
        self.codes: dict[str, tuple[str, str, str | None, tuple[str, ...], str]] = {}
        self.counts: Counter[str] = Counter()
        self.token_prefix = ""  # starts every access and refresh token (a canary to look for)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/.well-known/oauth-authorization-server", self.metadata)
        app.router.add_get("/.well-known/openid-configuration", self.metadata)
        app.router.add_get("/authorize", self.authorize)
        app.router.add_post("/token", self.token)
        app.router.add_post("/register", self.register)
        return app

    async def metadata(self, _request: web.Request) -> web.Response:
        grants = ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:token-exchange"]
        if self.client_credentials:
            grants.append("client_credentials")
        return web.json_response({
            "issuer": self.url, "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token", "registration_endpoint": f"{self.url}/register",
            "response_types_supported": ["code"], "grant_types_supported": grants,
            "code_challenge_methods_supported": ["S256"], "authorization_response_iss_parameter_supported": True,
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "scopes_supported": ["mcp:read", "mcp:admin"]})

    async def register(self, request: web.Request) -> web.Response:
        self.counts["register"] += 1
        body = await request.json()
        client_id, secret = f"dcr-{secrets.token_hex(4)}", secrets.token_urlsafe(16)
        self.clients[client_id] = {"secret": secret, "redirect_uris": body.get("redirect_uris") or []}
        return web.json_response({"client_id": client_id, "client_secret": secret,
                                  "token_endpoint_auth_method": "client_secret_basic"}, status=201)

    async def authorize(self, request: web.Request) -> web.Response:
        self.counts["authorize"] += 1
        q = request.query
        user = request.headers.get("X-Test-User", "")
        if not user or q.get("code_challenge_method") != "S256" or q.get("client_id") not in self.clients:
            return web.json_response({"error": "invalid_request"}, status=400)
        code = secrets.token_urlsafe(16)
        scopes = tuple(q.get("scope", "").split())
        self.codes[code] = (user, q["code_challenge"], q.get("resource"), scopes, q["client_id"])
        query = urlencode({"code": code, "state": q.get("state", ""), "iss": self.url})
        raise web.HTTPFound(f"{q['redirect_uri']}?{query}")

    def _client(self, request: web.Request, form: Any) -> str | None:
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        known = self.clients.get(client_id)
        return client_id if known is not None and known["secret"] == secret else None

    def issue(self, subject: str, audience: str | None, scopes: tuple[str, ...] = ("mcp:read",)) -> str:
        """A token minted outside any grant (a personal key an operator configures)."""
        return str(self._issue(subject, audience, scopes, refresh=False)["access_token"])

    def _issue(self, subject: str, audience: str | None, scopes: tuple[str, ...], refresh: bool) -> dict[str, Any]:
        if self.grantable is not None:
            scopes = tuple(s for s in scopes if s in self.grantable)
        token = self.token_prefix + secrets.token_urlsafe(24)
        grant = Token(subject, audience, scopes, time.time() + self.token_lifetime_s)
        self.tokens[token] = grant
        out: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": self.token_lifetime_s,
                               "scope": " ".join(scopes)}
        if refresh:
            rt = self.token_prefix + secrets.token_urlsafe(24)
            self.refresh_tokens[rt] = grant
            out["refresh_token"] = rt
        return out

    async def token(self, request: web.Request) -> web.Response:
        form = await request.post()
        kind = str(form.get("grant_type", ""))
        self.counts[kind] += 1
        self.counts["token"] += 1
        resource = form.get("resource")
        audience = str(resource) if resource else None
        scopes = tuple(str(form.get("scope", "")).split())
        client = self._client(request, form)
        if kind == "client_credentials" and client is not None:
            return web.json_response(self._issue(f"service:{client}", audience, scopes, refresh=False))
        if kind == "authorization_code" and client is not None:
            entry = self.codes.pop(str(form.get("code", "")), None)
            verifier = str(form.get("code_verifier", ""))
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if entry is None or entry[1] != digest or entry[2] != audience:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return web.json_response(self._issue(entry[0], audience, entry[3], refresh=True))
        if kind == "refresh_token" and client is not None:
            old = self.refresh_tokens.pop(str(form.get("refresh_token", "")), None)  # rotated: used once
            if old is None:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return web.json_response(self._issue(old.subject, audience, old.scopes, refresh=True))
        if kind == "urn:ietf:params:oauth:grant-type:token-exchange" and client is not None:
            claims = jwt.decode(str(form.get("subject_token", "")), options={"verify_signature": False})
            return web.json_response(self._issue(f"exchange:{claims['sub']}", audience, scopes, refresh=False))
        return web.json_response({"error": "invalid_client" if client is None else "unsupported_grant_type"},
                                 status=400)


class ProtectedUpstream:
    def __init__(self, auth: AuthServer, upstream_url: str, *, required_scope: str | None = None) -> None:
        self.auth = auth
        self.upstream_url = upstream_url
        self.required_scope = required_scope
        self.upstream_origin = upstream_url.rsplit("/", 1)[0]
        self.url = ""  # .../mcp (or .../sse) once started
        self.seen: list[Seen] = []
        self._http: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/.well-known/oauth-protected-resource/{path:.*}", self.prm)
        app.router.add_route("*", "/{path:.*}", self.proxy)  # /mcp, or /sse and its /messages/
        return app

    @property
    def origin(self) -> str:
        return self.url.split("/", 3)[0] + "//" + self.url.split("/", 3)[2]

    async def prm(self, _request: web.Request) -> web.Response:
        return web.json_response({"resource": self.url, "authorization_servers": [self.auth.url],
                                  "scopes_supported": ["mcp:read"]})

    def _challenge(self, status: int, error: str, scope: str | None = None) -> web.Response:
        path = self.url.split("/", 3)[3]
        parts = [f'resource_metadata="{self.origin}/.well-known/oauth-protected-resource/{path}"', f'error="{error}"']
        if scope:
            parts.append(f'scope="{scope}"')
        return web.json_response({"error": error}, status=status, headers={"WWW-Authenticate": "Bearer " + ", ".join(parts)})

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        try:
            message = json.loads(body) if body else {}
        except ValueError:
            message = {}
        method = message.get("method") if isinstance(message, dict) else None
        header = request.headers.get("Authorization", "")
        token = header[7:] if header.startswith("Bearer ") else None
        grant = self.auth.tokens.get(token or "")
        seen = Seen(token, grant.subject if grant else None, method, message if isinstance(message, dict) else {})
        self.seen.append(seen)
        if grant is None or grant.expires < time.time() or grant.audience != self.url:
            seen.status = 401
            return self._challenge(401, "invalid_token", "mcp:read")
        if self.required_scope and self.required_scope not in grant.scopes and method not in (None, "initialize"):
            seen.status = 403
            return self._challenge(403, "insufficient_scope", self.required_scope)
        assert self._http is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "authorization",
                                                                                 "content-length")}
        target = self.upstream_origin + request.path_qs
        async with self._http.request(request.method, target, data=body or None, headers=headers) as resp:
            out = web.StreamResponse(status=resp.status, headers={k: v for k, v in resp.headers.items() if k.lower() in (
                "content-type", "mcp-session-id", "mcp-protocol-version")})
            await out.prepare(request)
            async for chunk in resp.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    def subjects(self, method: str = "tools/call") -> list[tuple[str | None, dict[str, Any]]]:
        return [(s.subject, s.body) for s in self.seen if s.method == method and s.status == 200]


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    # At the end of a test the proxy may still be relaying an SSE stream the upstream keeps open:
    # cleanup then cancels it after 0.5 s instead of waiting out aiohttp's default 60 s (in
    # practice until the upstream's next chunk, ~15 s, failed to be written).
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    assert runner.addresses
    return runner, int(runner.addresses[0][1])


@asynccontextmanager
async def auth_world(*, token_lifetime_s: float = 3600.0, required_scope: str | None = None,
                     client_credentials: bool = True, grantable: frozenset[str] | None = None,
                     transport: str = "streamable_http") -> AsyncIterator[tuple[AuthServer, ProtectedUpstream]]:
    """An authorization server and a protected SDK upstream (dual era) behind it, on loopback."""
    auth = AuthServer(token_lifetime_s=token_lifetime_s, client_credentials=client_credentials, grantable=grantable)
    async with upstream_http(transport) as (upstream_url, _proc):
        auth_runner, auth_port = await _serve(auth.app())
        auth.url = f"http://127.0.0.1:{auth_port}"
        protected = ProtectedUpstream(auth, upstream_url, required_scope=required_scope)
        protected._http = aiohttp.ClientSession()
        runner, port = await _serve(protected.app())
        protected.url = f"http://127.0.0.1:{port}/{upstream_url.rsplit('/', 1)[1]}"
        try:
            yield auth, protected
        finally:
            await runner.cleanup()
            await auth_runner.cleanup()
            await protected._http.close()

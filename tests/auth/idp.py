"""A loopback identity provider for tests: RSA keys, a JWKS endpoint, and token minting."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["LoopbackIdp", "loopback_idp", "unsigned_token"]

ISSUER = "https://idp.test/"
AUDIENCE = "mcp-gateway"


class LoopbackIdp:
    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.published: list[str] = []
        self.url = ""
        self.requests = 0
        self.add_key("k1")

    def add_key(self, kid: str, publish: bool = True) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if publish:
            self.published.append(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def token(self, kid: str = "k1", **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now,
                                  "exp": now + 300, "groups": ["ops"]}
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.keys[kid], algorithm="RS256", headers={"kid": kid})

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.json_response(self.jwks())


def unsigned_token(**claims: Any) -> str:
    """An ``alg: none`` token (no signature), as an attacker would send it."""
    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{b64({'alg': 'none', 'typ': 'JWT', 'kid': 'k1'})}.{b64(claims)}."


@asynccontextmanager
async def loopback_idp() -> AsyncIterator[LoopbackIdp]:
    idp = LoopbackIdp()
    app = web.Application()
    app.router.add_get("/jwks.json", idp.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    idp.url = f"http://127.0.0.1:{runner.addresses[0][1]}/jwks.json"
    try:
        yield idp
    finally:
        await runner.cleanup()

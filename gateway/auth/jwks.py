"""JWT bearer tokens validated against a JWKS URL (PyJWT).

Checks, in order: the header's ``alg`` is in the configured allow-list (``none`` and HMAC
algorithms are never accepted, whatever the list says, so a public JWKS key can never be used as
an HMAC secret and an unsigned token never passes); the ``kid`` names a key of the JWKS; the
signature; ``exp`` (required), ``nbf``, ``iat`` with ``leeway_s``; ``iss`` and ``aud`` when
configured. The principal is the ``principal_claim`` (default ``sub``); groups come from
``groups_claim`` (a list, or a space/comma separated string).

Key rotation: the JWKS is cached for ``jwks_cache_s``; a token with an unknown ``kid`` triggers a
refetch, at most once per ``jwks_min_refresh_s`` so a flood of forged kids cannot hammer the
identity provider. Concurrent refetches are coalesced behind one lock.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import aiohttp
import jwt

from gateway.config import JwtConfig
from gateway.context import Principal

__all__ = ["JwtVerifier", "TokenInvalid", "JwksUnavailable"]

log = logging.getLogger("gateway.auth.jwt")

_ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                         "ES256", "ES384", "ES512", "EdDSA"})


class TokenInvalid(Exception):
    """The token was refused; the message is safe to show in ``error_description``."""


class JwksUnavailable(TokenInvalid):
    """The JWKS could not be fetched (the token cannot be checked)."""


class JwtVerifier:
    def __init__(self, config: JwtConfig) -> None:
        self.config = config
        self.algorithms = tuple(a for a in config.algorithms if a in _ASYMMETRIC)
        if not self.algorithms:
            raise ValueError("auth.jwt.algorithms allows no asymmetric algorithm")
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()
        self.fetches = 0  # observable in tests: how often the JWKS was fetched

    async def _fetch(self) -> None:
        timeout = aiohttp.ClientTimeout(total=10)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http, \
                    http.get(self.config.jwks_url, headers={"Accept": "application/json"}) as resp:
                if resp.status != 200:
                    raise JwksUnavailable(f"JWKS fetch returned HTTP {resp.status}")
                body = json.loads(await resp.read())
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise JwksUnavailable(f"JWKS fetch failed: {exc}") from None
        self.fetches += 1
        keys: dict[str | None, jwt.PyJWK] = {}
        for data in body.get("keys", []) if isinstance(body, dict) else []:
            if data.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(data)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, KeyError) as exc:
                log.warning("skipping JWKS key %s: %s", data.get("kid"), exc)
                continue
            keys[data.get("kid")] = key
        self._keys = keys
        self._fetched_at = time.monotonic()

    async def _key_for(self, kid: str | None) -> jwt.PyJWK:
        age = time.monotonic() - self._fetched_at
        if age > self.config.jwks_cache_s or (kid not in self._keys and age > self.config.jwks_min_refresh_s):
            async with self._lock:
                # Another task may have refreshed while we waited for the lock.
                age = time.monotonic() - self._fetched_at
                if age > self.config.jwks_cache_s or (
                        kid not in self._keys and age > self.config.jwks_min_refresh_s):
                    try:
                        await self._fetch()
                    except JwksUnavailable:
                        if not self._keys:
                            raise
                        log.warning("JWKS refresh failed; keeping the cached keys", exc_info=True)
        key = self._keys.get(kid)
        if key is None and kid is None and len(self._keys) == 1:
            key = next(iter(self._keys.values()))
        if key is None:
            raise TokenInvalid("unknown signing key")
        return key

    async def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenInvalid("malformed token") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise TokenInvalid(f"algorithm {alg!r} is not allowed")
        key = await self._key_for(header.get("kid"))
        cfg = self.config
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=[alg],
                audience=cfg.audience, issuer=cfg.issuer, leeway=cfg.leeway_s,
                options={"require": ["exp"], "verify_aud": cfg.audience is not None})
        except jwt.ExpiredSignatureError:
            raise TokenInvalid("token expired") from None
        except jwt.InvalidAudienceError:
            raise TokenInvalid("wrong audience") from None
        except jwt.InvalidIssuerError:
            raise TokenInvalid("wrong issuer") from None
        except jwt.PyJWTError as exc:
            raise TokenInvalid(f"invalid token: {exc}") from None
        name = claims.get(cfg.principal_claim)
        if not isinstance(name, str) or not name:
            raise TokenInvalid(f"claim {cfg.principal_claim!r} missing")
        return Principal(name, _groups(claims.get(cfg.groups_claim) if cfg.groups_claim else None), kind="jwt")


def _groups(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(g for g in value.replace(",", " ").split() if g)
    if isinstance(value, list | tuple):
        return frozenset(str(g) for g in value)
    return frozenset()

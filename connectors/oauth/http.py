"""The HTTP a connector does for OAuth (metadata, registration, token requests).

Every request goes through the connector's :class:`~connectors.egress.EgressPolicy` (its aiohttp
client is built on it, redirects are followed only on the same origin, GET only), bodies are
bounded (:data:`MAX_BODY`), every wait is bounded (``timeout_s``). Answers are JSON objects; a
body that is not one is a :class:`OAuthHTTPError` naming the URL and status, never the body
(a token endpoint's answer holds secrets).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from connectors.egress import EgressPolicy, EgressRefused

__all__ = ["OAuthHTTP", "OAuthHTTPError", "Answer", "MAX_BODY"]

MAX_BODY = 1024 * 1024


class OAuthHTTPError(Exception):
    """An OAuth request failed (unreachable, refused by egress, not JSON); the message names the
    URL and why, never a secret."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: dict[str, Any] | None  # the JSON object, None when the body was not one
    headers: Mapping[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300 and self.body is not None


class OAuthHTTP:
    """A small JSON client on one egress policy (lazily opened, closed by :meth:`close`)."""

    def __init__(self, policy: EgressPolicy, *, timeout_s: float = 15.0) -> None:
        self._policy = policy
        self._timeout = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = self._policy.client_session(
                limit=20, keepalive_timeout=4.0, timeout=aiohttp.ClientTimeout(total=self._timeout))
        return self._session

    async def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                      data: Mapping[str, str] | None = None, json_body: Any = None) -> Answer:
        kwargs: dict[str, Any] = {"headers": {"Accept": "application/json", **(headers or {})}}
        if data is not None:
            kwargs["data"] = dict(data)
        if json_body is not None:
            kwargs["json"] = json_body
        try:
            async with self._policy.request(self._client(), method, url, **kwargs) as resp:
                raw = await resp.content.read(MAX_BODY + 1)
                if len(raw) > MAX_BODY:
                    raise OAuthHTTPError(f"{method} {url}: answer over {MAX_BODY} bytes")
                body: dict[str, Any] | None = None
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict):
                    body = parsed
                return Answer(resp.status, body, {k.lower(): v for k, v in resp.headers.items()})
        except EgressRefused as exc:
            raise OAuthHTTPError(f"{method} {url}: refused by the egress policy ({exc})") from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise OAuthHTTPError(f"{method} {url}: {type(exc).__name__}: {exc}"[:300]) from None

    async def get(self, url: str) -> Answer:
        return await self.request("GET", url)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

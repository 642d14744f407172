"""A client of an OpenAI-compatible ``/v1/embeddings`` URL, for hybrid tool search.

Contract:

* :meth:`EmbeddingsClient.embed` POSTs ``{"model", "input": [texts], "encoding_format": "float"}``
  (plus ``dimensions`` when configured) and returns one L2-normalised ``float32`` row per text, in
  the order of the texts (the answer's ``data[i].index`` says which is which). Anything else raises
  :class:`EmbeddingsError`, whose ``reason`` is one of
  :data:`~gateway.telemetry.metrics.EMBEDDING_OUTCOMES` and whose message is safe to log.
* Every request is bounded: a total timeout, and at most ``max_response_bytes`` of body (read
  incrementally, after decompression, so neither a huge nor a compressed answer is held whole).
* The key (from the environment variable ``api_key_env`` names, read once when the client is made)
  is sent to the configured URL and nowhere else: redirects are never followed (a 3xx is an error),
  the proxy environment is not used, and neither the key nor the response body appears in an
  error, a log line or a metric. The URL is shown without its query (which may carry a token).
* Each request is counted in ``mcp_gateway_embedding_requests_total{endpoint, stage, outcome}``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
import numpy as np
import orjson

from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.endpoints.config import EmbeddingsConfig

__all__ = ["EmbeddingsClient", "EmbeddingsError", "Matrix", "safe_url"]

Matrix = np.ndarray[Any, np.dtype[np.float32]]
_CHUNK = 1 << 16


class EmbeddingsError(Exception):
    """A request that gave no usable vectors; ``reason`` is a closed-set label, the text safe to log."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def safe_url(url: str) -> str:
    """*url* without its query and fragment (a query may carry a token): for logs and errors."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


class EmbeddingsClient:
    """One endpoint's connection to its embeddings URL (keep-alive; :meth:`close` when done)."""

    def __init__(self, config: EmbeddingsConfig, api_key: str | None, endpoint: str) -> None:
        self.config = config
        self.endpoint = endpoint
        self.label = metrics.bounded("endpoint", endpoint)
        self.shown = safe_url(config.url)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            header = config.api_key_header
            self._headers[header] = f"Bearer {api_key}" if header.lower() == "authorization" else api_key
        self._http: aiohttp.ClientSession | None = None
        self._closed = False  # for good: a sync still running after a reload must not reopen it
        self.requests = 0  # observable in tests and the bench

    def __repr__(self) -> str:  # never the headers
        return f"EmbeddingsClient({self.shown!r}, model={self.config.model!r})"

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            # trust_env=False: HTTP(S)_PROXY would be a second party seeing the key and the texts.
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=8), trust_env=False)
        return self._http

    async def close(self) -> None:
        self._closed = True
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def embed(self, texts: list[str], stage: str, dimension: int | None = None) -> Matrix:
        """The normalised vectors of *texts* (``stage``: ``query`` or ``index``, for the metric and
        the timeout). *dimension*: the length every vector must have (the store's, once known)."""
        try:
            matrix = await self._embed(texts, stage, dimension)
        except EmbeddingsError as exc:
            metrics.EMBEDDING_REQUESTS.labels(self.label, stage, exc.reason).inc()
            raise
        metrics.EMBEDDING_REQUESTS.labels(self.label, stage, "ok").inc()
        return matrix

    async def _embed(self, texts: list[str], stage: str, dimension: int | None) -> Matrix:
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "input": texts, "encoding_format": "float"}
        if cfg.dimensions is not None:
            body["dimensions"] = cfg.dimensions
        timeout = cfg.timeout_s if stage == "query" else cfg.index_timeout_s
        if self._closed:
            raise EmbeddingsError("connection", "the client was closed (a reload replaced it)")
        self.requests += 1
        try:
            async with asyncio.timeout(timeout):
                async with self._session().post(cfg.url, data=orjson.dumps(body), headers=self._headers,
                                                 allow_redirects=False) as resp:
                    if 300 <= resp.status < 400:
                        raise EmbeddingsError("redirect", f"HTTP {resp.status}: redirects are not followed")
                    if resp.status != 200:
                        raise EmbeddingsError("http_error", f"HTTP {resp.status}")
                    raw = await _read(resp, cfg.max_response_bytes)
        except TimeoutError:
            raise EmbeddingsError("timeout", f"no answer within {timeout:g}s") from None
        except aiohttp.ClientError as exc:
            # The exception's class only: some carry the request (and so its headers) in their repr.
            raise EmbeddingsError("connection", type(exc).__name__) from None
        return _parse(raw, len(texts), cfg.dimensions or dimension)


async def _read(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    if resp.content_length is not None and resp.content_length > limit:
        raise EmbeddingsError("too_large", f"answer of {resp.content_length} bytes (limit {limit})")
    chunks: list[bytes] = []
    size = 0
    while chunk := await resp.content.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise EmbeddingsError("too_large", f"answer over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(raw: bytes, n: int, dimension: int | None) -> Matrix:
    """The rows of an embeddings answer for *n* inputs, normalised; EmbeddingsError if malformed."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise EmbeddingsError("bad_response", "the answer is not JSON") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or len(data) != n:
        raise EmbeddingsError("bad_response", f"the answer has no data list of {n} item(s)")
    rows: list[Any] = [None] * n
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n or rows[index] is not None:
            raise EmbeddingsError("bad_response", "data[].index is missing, repeated or out of range")
        vector = item.get("embedding")
        if not isinstance(vector, list) or not vector:
            raise EmbeddingsError("bad_response", "data[].embedding is not a list of numbers")
        rows[index] = vector
    try:
        matrix = np.asarray(rows)  # ragged rows raise; strings, nulls or bools give a non-numeric dtype
    except ValueError:
        raise EmbeddingsError("dimensions", "the vectors have different lengths") from None
    if matrix.ndim != 2 or matrix.dtype.kind not in "fiu":
        raise EmbeddingsError("bad_response", "data[].embedding is not a list of numbers")
    if dimension is not None and matrix.shape[1] != dimension:
        raise EmbeddingsError("dimensions", f"vectors of {matrix.shape[1]} dimensions, expected {dimension}")
    out = matrix.astype(np.float32)
    if not np.isfinite(out).all():
        raise EmbeddingsError("bad_response", "a vector holds NaN or infinity")
    norms = np.linalg.norm(out, axis=1)
    if not (norms > 0).all():
        raise EmbeddingsError("bad_response", "a vector is all zeros")
    result: Matrix = out / norms[:, None]
    return result

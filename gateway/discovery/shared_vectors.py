"""Tool vectors shared by the replicas of a gateway through its state store (``state.store``).

Every replica of a search endpoint embeds the same tool texts. Without sharing, each one pays for
them: with the local model ~86 s of CPU for 6,115 tools (``bench/discovery.py --semantic``), during
which its ``find_tools`` ranks lexically; with an embeddings URL, the provider's bill once per
replica and rollout. Reading them back takes 0.7 s. :class:`SharedVectors` wraps an endpoint's encoder (the local model or a URL's client,
the contract of :meth:`~gateway.discovery.embeddings.EmbeddingsClient.embed`) so that an *index*
text's vector is looked up in the shared store first and stored there once made: the first
replica embeds, the others (and every later rollout whose tool texts did not change) read.

Contract:

* Only ``index`` calls are shared; a query's vector is never stored (it is the caller's text).
* A vector is stored under the SHA-256 of (*space*, text): *space* names the model and what shapes
  its vectors (the local model's weights hash; a URL, its model and dimensions), so two models'
  vectors never mix. The value is the row as little-endian float32.
* A value read back is used only when it has the expected length, every float is finite and its
  norm is 1 within 1e-3 (the rows every encoder returns are L2-normalised); anything else is
  embedded anew, as if absent, and counted ``invalid``.
* The store failing (down, slow: its own bounded timeout) never fails the call: what could not be
  read is embedded, what could not be written stays unshared, counted ``error`` and logged as a
  WARNING at most once a minute.
* Counted in ``mcp_gateway_search_shared_vectors_total{endpoint, outcome}``: ``hit`` (texts read
  from the store), ``miss`` (embedded here and stored), ``invalid``, ``error``.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.discovery.embeddings import Matrix
    from gateway.discovery.hybrid import Encoder
    from gateway.state import StateStore

__all__ = ["SharedVectors", "TTL_S"]

log = logging.getLogger("gateway.discovery.shared_vectors")

TTL_S = 30 * 86400.0  # a vector no replica stored or read for 30 days leaves the store
_CHUNK = 256  # keys per store round trip (1,536 bytes a 384-float vector: ~400 kB a reply)
_WARN_EVERY_S = 60.0


class SharedVectors:
    """*inner* with its index vectors shared through *store* (see the module doc)."""

    def __init__(self, inner: Encoder, store: StateStore, space: str, endpoint: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self.shown = inner.shown  # how logs name it: the wrapped encoder's name
        self.store = store
        self.space = space
        self.endpoint = endpoint
        self._clock = clock
        self._warned_at = float("-inf")

    def __repr__(self) -> str:
        return f"SharedVectors({self.inner!r}, space={self.space!r})"


    async def close(self) -> None:
        await self.inner.close()

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.space}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()

    async def embed(self, texts: list[str], stage: str, dimension: int | None = None) -> Matrix:
        """The contract of the wrapped encoder's ``embed``; ``index`` rows come from the store
        where it has them."""
        if stage != "index" or not texts:
            return await self.inner.embed(texts, stage, dimension)
        keys = [self.key(t) for t in texts]
        try:
            stored = await self._load(keys)
        except Exception as exc:  # noqa: BLE001 (any store failure: embed everything here)
            self._count("error", 1)
            self._warn("read", exc)
            stored = [None] * len(keys)
        rows: dict[int, np.ndarray] = {}
        invalid = 0
        for i, raw in enumerate(stored):
            row = _row(raw, dimension)
            if row is not None:
                rows[i] = row
            elif raw is not None:
                invalid += 1
        todo = [i for i in range(len(texts)) if i not in rows]
        self._count("hit", len(rows))
        self._count("invalid", invalid)
        fresh: Matrix | None = None
        if todo:
            fresh = await self.inner.embed([texts[i] for i in todo], stage, dimension)
            try:
                await self._save([(keys[i], fresh[j].astype("<f4").tobytes()) for j, i in enumerate(todo)])
            except Exception as exc:  # noqa: BLE001
                self._count("error", 1)
                self._warn("write", exc)
            else:
                self._count("miss", len(todo))
        width = fresh.shape[1] if fresh is not None else next(iter(rows.values())).shape[0]
        out: Matrix = np.empty((len(texts), width), dtype=np.float32)
        for i, row in rows.items():
            if row.shape[0] != width:  # the store's dimension is not the model's: embed those too
                return await self.inner.embed(texts, stage, dimension)
            out[i] = row
        if fresh is not None:
            out[todo] = fresh
        return out

    async def _load(self, keys: list[str]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for start in range(0, len(keys), _CHUNK):
            out += await self.store.load_vectors(keys[start:start + _CHUNK], TTL_S)
        return out

    async def _save(self, items: list[tuple[str, bytes]]) -> None:
        for start in range(0, len(items), _CHUNK):
            await self.store.save_vectors(items[start:start + _CHUNK], TTL_S)

    def _count(self, outcome: str, n: int) -> None:
        if n:
            metrics.SEARCH_SHARED_VECTORS.labels(metrics.bounded("endpoint", self.endpoint), outcome).inc(n)

    def _warn(self, what: str, exc: BaseException) -> None:
        now = self._clock()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("endpoint %s: the shared tool vectors cannot be %s (%s: %s); embedding here",
                        self.endpoint, "read" if what == "read" else "written", type(exc).__name__, exc)


def _row(raw: bytes | None, dimension: int | None) -> np.ndarray | None:
    """The stored row, or None when absent or not a unit vector of the expected length."""
    if raw is None or len(raw) % 4 or not raw or (dimension is not None and len(raw) != 4 * dimension):
        return None
    row = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(row).all() or not math.isclose(float(np.dot(row, row)), 1.0, abs_tol=2e-3):
        return None
    return row

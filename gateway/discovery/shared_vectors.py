"""Tool vectors shared by the replicas of a gateway through its state store (``state.store``).

Every replica of a search endpoint embeds the same tool texts. Without sharing, each one pays for
them: with the local model ~86 s of CPU for 6,115 tools (``bench/discovery.py --semantic``), during
which its ``find_tools`` ranks lexically; with an embeddings URL, the provider's bill once per
replica and rollout. Reading them back takes 0.7 s. :class:`SharedVectors` wraps an endpoint's
encoder (the local model or a URL's client, the contract of
:meth:`~gateway.discovery.embeddings.EmbeddingsClient.embed`) so that an *index* text's vector is
looked up in the shared store first and stored there once made: the first replica embeds, the
others (and every later rollout whose tool texts did not change) read.

Contract:

* Only ``index`` calls are shared; a query's vector is never stored (it is the caller's text).
* Replicas that start together (the workers of ``serve --workers N``, the pods of a rollout) do
  not all embed the same texts: a text the store lacks is *claimed* first (``SET NX``, expiring
  after ``claim_ttl_s``); the replica that claimed it embeds and stores it, the others wait for it
  (polling, at most ``claim_ttl_s``; then they embed whatever is still missing themselves). So a
  catalog is embedded about once whatever the number of replicas, and a waiting replica's core
  stays free for serving.
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

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.discovery.embeddings import Matrix
    from gateway.discovery.hybrid import Encoder
    from gateway.state import StateStore

__all__ = ["CLAIM_TTL_S", "SharedVectors", "TTL_S"]

log = logging.getLogger("gateway.discovery.shared_vectors")

TTL_S = 30 * 86400.0  # a vector no replica stored or read for 30 days leaves the store
CLAIM_TTL_S = 30.0  # the longest another replica waits for the texts this one claimed
_CHUNK = 256  # keys per store round trip (1,536 bytes a 384-float vector: ~400 kB a reply)
_WARN_EVERY_S = 60.0


class SharedVectors:
    """*inner* with its index vectors shared through *store* (see the module doc)."""

    def __init__(self, inner: Encoder, store: StateStore, space: str, endpoint: str,
                 clock: Callable[[], float] = time.monotonic, claim_ttl_s: float = CLAIM_TTL_S) -> None:
        self.claim_ttl_s = claim_ttl_s
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
        where it has them, or from the replica that claimed them (see the module doc)."""
        if stage != "index" or not texts:
            return await self.inner.embed(texts, stage, dimension)
        keys = [self.key(t) for t in texts]
        rows = await self._read(keys, range(len(keys)), dimension, count_invalid=True) or {}
        missing = [i for i in range(len(texts)) if i not in rows]
        self._count("hit", len(rows))
        if missing:
            mine = await self._claim([keys[i] for i in missing])
            todo = [i for i, claimed in zip(missing, mine, strict=True) if claimed]
            elsewhere = [i for i, claimed in zip(missing, mine, strict=True) if not claimed]
            if todo:
                await self._embed_here(texts, keys, todo, rows, dimension)
            if elsewhere:  # claimed by another replica: its vectors, once stored, else our own
                late = await self._wait(keys, elsewhere, dimension)
                self._count("hit", len(late))
                rows.update(late)
                left = [i for i in elsewhere if i not in late]
                if left:
                    await self._embed_here(texts, keys, left, rows, dimension)
        width = {row.shape[0] for row in rows.values()}
        if len(width) != 1:  # the store's dimension is not the model's: embed them all here
            return await self.inner.embed(texts, stage, dimension)
        out: Matrix = np.empty((len(texts), width.pop()), dtype=np.float32)
        for i, row in rows.items():
            out[i] = row
        return out

    async def _embed_here(self, texts: list[str], keys: list[str], todo: list[int], rows: dict[int, np.ndarray],
                          dimension: int | None) -> None:
        fresh = await self.inner.embed([texts[i] for i in todo], "index", dimension)
        for j, i in enumerate(todo):
            rows[i] = fresh[j]
        try:
            await self._save([(keys[i], fresh[j].astype("<f4").tobytes()) for j, i in enumerate(todo)])
        except Exception as exc:  # noqa: BLE001 (unshared, not lost: the caller has its rows)
            self._count("error", 1)
            self._warn("written", exc)
        else:
            self._count("miss", len(todo))

    async def _read(self, keys: list[str], which: Iterable[int], dimension: int | None,
                    count_invalid: bool = False) -> dict[int, np.ndarray] | None:
        """The valid stored rows of ``keys[i]`` for i in *which*, by i; None when the store fails."""
        which = list(which)
        try:
            stored = await self._load([keys[i] for i in which])
        except Exception as exc:  # noqa: BLE001 (any store failure: embed here)
            self._count("error", 1)
            self._warn("read", exc)
            return None
        rows: dict[int, np.ndarray] = {}
        invalid = 0
        for i, raw in zip(which, stored, strict=True):
            row = _row(raw, dimension)
            if row is not None:
                rows[i] = row
            elif raw is not None:
                invalid += 1
        if count_invalid:
            self._count("invalid", invalid)
        return rows

    async def _claim(self, keys: list[str]) -> list[bool]:
        """Which of *keys* this replica embeds (it claimed them); all when the store fails."""
        try:
            return await self.store.claim_vectors(keys, self.store.replica, self.claim_ttl_s)
        except Exception as exc:  # noqa: BLE001
            self._count("error", 1)
            self._warn("claimed", exc)
            return [True] * len(keys)

    async def _wait(self, keys: list[str], which: list[int], dimension: int | None) -> dict[int, np.ndarray]:
        """The rows another replica stores for ``keys[i]``, i in *which*, polled until all are
        there or its claim would have expired (``claim_ttl_s``): a replica that died mid-batch
        costs a wait, never a missing row."""
        got: dict[int, np.ndarray] = {}
        pause = 0.05
        deadline = self._clock() + self.claim_ttl_s
        while True:
            read = await self._read(keys, (i for i in which if i not in got), dimension)
            if read is None:  # the store fails: stop waiting for it
                return got
            got.update(read)
            if len(got) == len(which) or self._clock() >= deadline:
                return got
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

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
                        self.endpoint, what, type(exc).__name__, exc)


def _row(raw: bytes | None, dimension: int | None) -> np.ndarray | None:
    """The stored row, or None when absent or not a unit vector of the expected length."""
    if raw is None or len(raw) % 4 or not raw or (dimension is not None and len(raw) != 4 * dimension):
        return None
    row = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(row).all() or not math.isclose(float(np.dot(row, row)), 1.0, abs_tol=2e-3):
        return None
    return row

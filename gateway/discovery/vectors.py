"""Tool vectors in memory, by the fingerprint of the tool's indexed text, and their nearest tools.

Contract:

* :meth:`VectorStore.put` adds normalised rows by fingerprint (a :class:`~gateway.discovery.index.ToolDoc`
  fingerprint: a tool whose text did not change keeps its vector, a changed one needs a new one),
  copied: the store never holds the caller's matrix (the local model's thread allocated it; see
  the comment in ``put``). Every vector has the store's one dimension (that of the first rows put).
  A tool may have several vectors, one per view of it (rows of shape (n, views, dimension):
  ``hybrid.tool_texts``); then its cosine is the best of its views' (the same float as the maximum
  of the views' cosines). Every tool has the store's one number of views.
* :meth:`VectorStore.nearest` ranks the tools of ``prints`` (public name → fingerprint: the catalog
  now) that have a vector by cosine to the query, applying ``visible`` before the top *n* are
  taken, so a tool the caller may not see never takes a slot and is never returned. Tools without
  a vector (not embedded yet) are simply absent: the lexical ranking still has them.
* The matrix searched is compiled once per (``prints`` object, store version): vectors of tools no
  longer in ``prints`` are dropped then, so memory follows the catalog (4 bytes × dimension per tool and view:
  ~37 MB a view for 6,000 tools at 1,536 dimensions, held once: the kept vectors become views of it).
* Like the index, not thread-safe: used from the event loop only.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from gateway.discovery.embeddings import Matrix
from gateway.discovery.index import SearchHit

__all__ = ["VectorStore"]

_BLOCK_BYTES = 4 << 20  # the rows put between two compiles are copied into blocks of this size


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, else None (another C library: nothing to call)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def _give_back() -> None:
    """Return the C heap's free pages to the system (~1.5 ms after 6,115 tools were put): the
    blocks a compile frees sit in the middle of the heap, where free() never gives pages back; left
    there, a process that never trims kept them resident (+18.7 MB at bench/discovery.py's
    6,115 tools)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class VectorStore:
    def __init__(self) -> None:
        self._vectors: dict[str, Matrix] = {}  # fingerprint → row
        self.dim: int | None = None
        self.views: int | None = None
        self.version = 0
        self._for: tuple[object, int] | None = None
        self._names: list[str] = []
        self._matrix: Matrix = np.zeros((0, 0), dtype=np.float32)
        # Rows put since the last compile are copied into blocks (see put): the last one fills up.
        self._block: Matrix | None = None
        self._used = 0  # its rows written

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._vectors

    def missing(self, prints: Iterable[str]) -> list[str]:
        """The fingerprints of *prints* that have no vector yet (each once, in order)."""
        return list(dict.fromkeys(p for p in prints if p not in self._vectors))

    def put(self, prints: Sequence[str], rows: Matrix) -> None:
        if len(prints) != rows.shape[0]:
            raise ValueError("one row per fingerprint")
        views = 1 if rows.ndim == 2 else int(rows.shape[1])
        if self.dim is None:
            self.dim, self.views = int(rows.shape[-1]), views
        elif rows.shape[-1] != self.dim:
            raise ValueError(f"vectors of {rows.shape[-1]} dimensions in a store of {self.dim}")
        elif views != self.views:
            raise ValueError(f"{views} view(s) per tool in a store of {self.views}")
        # Copied, into blocks of ~4 MB: the rows the local model returns were allocated in its
        # thread's malloc arena, whose freed top glibc's malloc_trim never gives back, and held
        # until the next compile 6,115 tools' batches left ~15 MB resident there
        # (bench/discovery.py --semantic); copied one batch at a time, they left ~1,500 holes in
        # the main heap that later allocations faulted back in (a compile 3-4x slower). A few
        # large blocks are freed whole by the compile.
        block = self._block
        for fingerprint, row in zip(prints, rows, strict=True):
            if block is None or self._used == len(block):
                size = max(64, _BLOCK_BYTES // (4 * row.size))
                block = self._block = np.empty((size, *row.shape), dtype=np.float32)
                self._used = 0
            block[self._used] = row
            self._vectors[fingerprint] = block[self._used]
            self._used += 1
        self.version += 1

    def _compile(self, prints: Mapping[str, str]) -> None:
        key = (prints, self.version)
        if self._for is not None and self._for[0] is prints and self._for[1] == self.version:
            return
        names = [name for name, fp in prints.items() if fp in self._vectors]
        if names and self.dim is not None:
            matrix = np.stack([self._vectors[prints[n]] for n in names]).astype(np.float32, copy=False)
            # Keep only the catalog's vectors, as views of the one matrix (no second copy).
            self._vectors = {prints[n]: matrix[i] for i, n in enumerate(names)}
        else:
            matrix = np.zeros((0, self.dim or 0) if (self.views or 1) == 1 else (0, self.views or 0, self.dim or 0),
                              dtype=np.float32)
            self._vectors = {}
        self._names, self._matrix, self._for = names, matrix, key
        if self._block is not None:  # rows were put since the last compile: their blocks are freed now
            self._block, self._used = None, 0
            _give_back()

    def nearest(self, query: Matrix, prints: Mapping[str, str], n: int,
                visible: Callable[[str], bool] | None = None, min_similarity: float = -1.0) -> list[SearchHit]:
        """The best *n* tools of *prints* for the normalised *query*, by cosine, best first."""
        self._compile(prints)
        if not self._names or query.shape[-1] != self._matrix.shape[-1]:
            return []
        # einsum, not ``@``: a matrix-vector product through BLAS spreads over threads that spin
        # on a busy machine (3-6× the CPU for the same answer); einsum's loop is one core's SIMD.
        if self._matrix.ndim == 2:
            sims = np.einsum("ij,j->i", self._matrix, query.reshape(-1))
        else:  # several views of each tool: the best, view by view (``.max(axis=1)`` over an axis
            # of 2 costs ~0.16 ms for 6,115 tools, ``np.maximum`` of the columns ~5 µs: the same floats)
            per_view = np.einsum("ivj,j->iv", self._matrix, query.reshape(-1))
            sims = per_view[:, 0].copy()
            for view in range(1, per_view.shape[1]):
                np.maximum(sims, per_view[:, view], out=sims)
        total = len(self._names)
        # Usually the best few are visible: sort a partition first, everything only if needed.
        want = min(total, max(4 * n, 64))
        while True:
            rows = self._best(sims, want)
            out = self._walk(sims, rows, n, visible, min_similarity)
            # Enough, or all rows seen, or the walk stopped at min_similarity: no other row can do.
            if len(out) >= n or want >= total or float(sims[rows[-1]]) < min_similarity:
                return out
            want = total

    @staticmethod
    def _best(sims: np.ndarray[Any, Any], want: int) -> list[int]:
        """The rows of the *want* highest scores, best first; equal scores by row (deterministic)."""
        rows = np.arange(len(sims)) if want >= len(sims) else np.argpartition(-sims, want - 1)[:want]
        ordered: list[int] = rows[np.lexsort((rows, -sims[rows]))].tolist()
        return ordered

    def _walk(self, sims: np.ndarray[Any, Any], rows: list[int], n: int, visible: Callable[[str], bool] | None,
              min_similarity: float) -> list[SearchHit]:
        out: list[SearchHit] = []
        names = self._names
        for i in rows:
            score = float(sims[i])
            if score < min_similarity:
                break
            name = names[i]
            if visible is None or visible(name):
                out.append(SearchHit(name, score))
                if len(out) >= n:
                    break
        return out

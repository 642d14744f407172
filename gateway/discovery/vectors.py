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
  ~37 MB a view for 6,000 tools at 1,536 dimensions, held once: a compiled vector is a row of it).
  Its rows are in the order of ``prints`` (equal cosines rank by row), whatever the history of puts.
  A compile that only drops rows and adds new ones after the kept rows keep their order (a sync:
  changed tools go to the end of ``prints``) moves rows within the matrix's buffer (memmove) and
  writes the new ones: no new matrix, so no fresh pages to fault in (a new 18 MB matrix cost ~40 ms
  of a 100-tool sync at 6,115 tools, two views of 384). The buffer keeps ~3% spare rows for growth;
  it is made anew when the catalog outgrows it or shrinks below half of it.
* Like the index, not thread-safe: used from the event loop only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from gateway.discovery.embeddings import Matrix
from gateway.discovery.heap import give_back
from gateway.discovery.index import SearchHit

__all__ = ["VectorStore"]

_BLOCK_BYTES = 4 << 20  # the rows put between two compiles are copied into blocks of this size



class VectorStore:
    def __init__(self) -> None:
        self._rows: dict[str, int] = {}  # fingerprint → its row of the compiled matrix
        self._fresh: dict[str, Matrix] = {}  # fingerprint → a vector put since the last compile
        self.dim: int | None = None
        self.views: int | None = None
        self._shape: tuple[int, ...] = ()
        self.version = 0
        self._for: tuple[object, int] | None = None
        self._names: list[str] = []
        self._buffer: Matrix = np.zeros((0, 0), dtype=np.float32)  # rows beyond the matrix: spare
        self._matrix: Matrix = np.zeros((0, 0), dtype=np.float32)  # the buffer's first rows
        # Rows put since the last compile are copied into blocks (see put): the last one fills up.
        self._block: Matrix | None = None
        self._used = 0  # its rows written

    def __len__(self) -> int:
        return len(self._rows.keys() | self._fresh.keys()) if self._fresh else len(self._rows)

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._fresh or fingerprint in self._rows

    def missing(self, prints: Iterable[str]) -> list[str]:
        """The fingerprints of *prints* that have no vector yet (each once, in order)."""
        return list(dict.fromkeys(p for p in prints if p not in self._rows and p not in self._fresh))

    def put(self, prints: Sequence[str], rows: Matrix) -> None:
        if len(prints) != rows.shape[0]:
            raise ValueError("one row per fingerprint")
        views = 1 if rows.ndim == 2 else int(rows.shape[1])
        if self.dim is None:
            self.dim, self.views = int(rows.shape[-1]), views
            self._shape = tuple(rows.shape[1:])  # one tool's: (dimension) or (views, dimension)
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
            self._fresh[fingerprint] = block[self._used]  # replaces a compiled row of the same fingerprint
            self._used += 1
        self.version += 1

    def _compile(self, prints: Mapping[str, str]) -> None:
        if self._for is not None and self._for[0] is prints and self._for[1] == self.version:
            return
        fresh, rows = self._fresh, self._rows
        names = [name for name, fp in prints.items() if fp in fresh or fp in rows]
        if names and self.dim is not None:
            wanted = [prints[n] for n in names]
            # Each row's source: its row in the matrix now, or -1 for a vector put since.
            source = [-1 if fp in fresh else rows[fp] for fp in wanted]
            if not self._in_place(source, wanted):
                self._rebuild(source, wanted)
            self._rows = dict(zip(wanted, range(len(wanted)), strict=True))
        else:
            self._buffer = np.zeros((0, self.dim or 0) if (self.views or 1) == 1 else (0, self.views or 0, self.dim or 0),
                                    dtype=np.float32)
            self._matrix, self._rows = self._buffer, {}
        self._fresh = {}
        self._names, self._for = names, (prints, self.version)
        if self._block is not None:  # rows were put since the last compile: their blocks are freed now
            self._block, self._used = None, 0
            give_back()  # the blocks sat in the middle of the heap: free() keeps such pages (+18.7 MB at 6,115 tools)

    def _in_place(self, source: list[int], wanted: list[str]) -> bool:
        """Move the kept rows up within the buffer and write the new ones after; False (nothing
        done) unless every kept row moves towards the top, in its order, and all fit."""
        n, buffer = len(source), self._buffer
        if not len(buffer) or n > len(buffer) or n < len(buffer) // 2:
            return False
        at = np.array(source, dtype=np.int64)
        pos = np.flatnonzero(at >= 0)
        rows = at[pos]
        if len(rows) and (bool(np.any(rows < pos)) or bool(np.any(rows[1:] <= rows[:-1]))):
            return False
        # Runs of kept rows with one shift each, top first: one memmove a run. A forward copy is
        # safe: every row a later run reads lies below the rows written so far. Then the new rows,
        # whose places no run reads any more.
        stride, base = buffer.strides[0], buffer.ctypes.data
        starts = [0, *(np.flatnonzero((np.diff(pos) != 1) | (np.diff(rows) != 1)) + 1).tolist(), len(pos)]
        for a, b in zip(starts, starts[1:], strict=False):
            if b > a and rows[a] != pos[a]:
                ctypes.memmove(base + int(pos[a]) * stride, base + int(rows[a]) * stride, (b - a) * stride)
        for i in np.flatnonzero(at < 0).tolist():
            buffer[i] = self._fresh[wanted[i]]
        self._matrix = buffer[:n]
        return True

    def _rebuild(self, source: list[int], wanted: list[str]) -> None:
        """A new buffer (with spare rows) holding the rows of *source* in order."""
        n = len(source)
        buffer = np.empty((n + max(16, n // 32), *self._shape), dtype=np.float32)
        at = np.asarray(source)
        kept = np.flatnonzero(at >= 0)
        if len(kept):
            buffer[kept] = self._matrix[at[kept]]
        for i in np.flatnonzero(at < 0).tolist():
            buffer[i] = self._fresh[wanted[i]]
        self._buffer, self._matrix = buffer, buffer[:n]

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

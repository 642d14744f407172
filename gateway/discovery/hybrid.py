"""Hybrid tool search: the lexical ranking fused with an embeddings ranking (issue 18's option).

:class:`Semantic` is the embedding side of one search endpoint: its encoder (an
:class:`Encoder`: the client of an embeddings URL, :mod:`.embeddings`, or the local model,
:mod:`.local_model`), its tool vectors (:mod:`.vectors`), a small LRU of query vectors, and the
rules for when the encoder is not to be relied on. :func:`fuse` merges the two rankings.

Contract:

* What is embedded: two views of each tool (:func:`tool_texts`; its cosine is the better view's)
  and the query without its argument values (:func:`query_text`), for the local model and an
  embeddings URL alike (``docs/discovery.md``, "What is embedded").
* :meth:`Semantic.sync` embeds, in batches of ``batch`` texts, the tools whose fingerprint has no vector
  (only changed and new tools: unchanged ones keep theirs). One sync runs at a time; a failed batch
  stops it, keeps the vectors already made, and the next sync waits ``cooldown_s``.
* :meth:`Semantic.query` returns the query's vector, or None: then the caller ranks lexically alone
  for that call. It never raises for the URL's faults (down, slow, HTTP errors, bad JSON, wrong
  dimensions, an answer too large): each fallback is counted in
  ``mcp_gateway_search_lexical_fallbacks_total{endpoint, reason}`` and logged as a WARNING at most
  once a minute (with how many were not logged).
* No query is sent until the index is ready: while no tool has a vector, and while a sync is
  sending batches (reason ``not_indexed``). A server busy embedding the catalog answers a query
  only after the batches before it: during a first build every ``find_tools`` would wait its full
  ``timeout_s`` for nothing.
* With the local model (``local=True``) there is no key and no breaker: a query waits at most
  ``timeout_s`` for its vector (the model may be busy with another endpoint's batch; reason
  ``timeout``); one that would wait longer than ``queue_s`` behind the queries already queued for
  the model (a burst beyond what one core encodes) is not queued at all (reason ``busy``); a model
  that cannot be loaded (missing, refused: reason ``model``) is logged as
  an ERROR once and never asked again by this endpoint: it ranks lexically.
* The URL's breaker counts failures in a row of either stage, and only an answered *query* ends the row:
  a batch that succeeds says nothing about whether queries are answered within ``timeout_s`` (a
  batch has ``index_timeout_s``). After 3 the URL is not asked for ``cooldown_s`` (reason
  ``breaker_open``), so an endpoint that times out does not cost every call its timeout; then one
  call tries again (the others stay lexical until it succeeds). Time is read from ``clock``
  (monotonic seconds; tests pass their own).
* :func:`fuse` (:mod:`.fusion`) merges two rankings that were each made over the caller's visible
  tools only (visibility is applied before either top *n* is taken), so the fused result never
  holds a tool the caller may not see. It weighs the cosine by how sure the lexical ranking is
  (its top score), not by rank alone.
"""

from __future__ import annotations

import asyncio
import html
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from gateway.discovery.arguments import tokens
from gateway.discovery.embeddings import EmbeddingsClient, EmbeddingsError, Matrix
from gateway.discovery.fusion import fuse
from gateway.discovery.index import SearchHit, ToolDoc
from gateway.discovery.vectors import VectorStore
from gateway.discovery.words import words_text
from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.discovery.lexicon import Lexicon
    from gateway.endpoints.config import EmbeddingsConfig, LocalModelConfig

__all__ = ["Semantic", "Encoder", "fuse", "tool_text", "tool_summary", "tool_texts", "query_text", "CANDIDATES"]

log = logging.getLogger("gateway.discovery.hybrid")

CANDIDATES = 50  # each ranking's top n that is fused (at most MAX_LIMIT: the lexical index's bound)
_TEXT_CHARS = 2000  # of one tool's text sent to be embedded
_FAILURES_TO_OPEN = 3
_WARN_EVERY_S = 60.0


class Encoder(Protocol):
    """What makes vectors: :class:`~gateway.discovery.embeddings.EmbeddingsClient` (a URL) or
    :class:`~gateway.discovery.local_model.LocalEncoder` (the local model)."""

    shown: str  # how logs name it

    async def embed(self, texts: list[str], stage: str, dimension: int | None = None) -> Matrix:
        """One normalised float32 row per text, in order; EmbeddingsError otherwise."""

    async def close(self) -> None: ...


def tool_text(doc: ToolDoc) -> str:
    """A tool's full view: its name in words, title, description, tags, path, parameters."""
    parts = (words_text(doc.name[len(doc.prefix):]), doc.title, doc.description, doc.tags, doc.path,
             f"parameters: {doc.param_names}" if doc.param_names else "")
    return "\n".join(p for p in parts if p)[:_TEXT_CHARS]


_TAG = re.compile(r"<[^>]+>")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"https?://\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|\n")


def _plain(text: str) -> str:
    """*text* without markup: a Markdown link's text, no HTML tags or entities, URLs or backticks."""
    text = _LINK.sub(" ", html.unescape(_TAG.sub(" ", _MD_LINK.sub(r"\1", text)))).replace("`", "")
    return re.sub(r"[ \t]+", " ", re.sub(r"\n\s*\n+", "\n", text)).strip()


def tool_summary(doc: ToolDoc) -> str:
    """A tool's short view: its name in words, title and the description's first sentence (without
    markup, and without the title when the description starts with it)."""
    title, description = _plain(doc.title), _plain(doc.description)
    if title and description.lower().startswith(title.lower()):
        description = description[len(title):].strip(" \n.:")
    first = next((p for p in _SENTENCE_END.split(description) if p.strip()), "")
    return "\n".join(p for p in (words_text(doc.name[len(doc.prefix):]), title, first) if p)[:_TEXT_CHARS]


def tool_texts(doc: ToolDoc) -> tuple[str, str]:
    """What is embedded for a tool: two views, :func:`tool_text` (everything) and
    :func:`tool_summary` (what it is); a query's cosine to the tool is the better of the two. The
    full view's parameters, path and long description dilute a short request; the short view alone
    misses what only the description says (measured: docs/discovery.md, "What is embedded")."""
    return tool_text(doc), tool_summary(doc)


def query_text(query: str, lexicon: Lexicon) -> str:
    """What is embedded for a ``find_tools`` query: the query as typed with its argument values
    taken out (the spans :func:`~gateway.discovery.arguments.tokens` reads as values: ids, numbers
    naming one item, quoted text, paths, repositories, versions, ...), except typed ids such as
    ``cus_P2x9`` (their prefix says what they are). "close issue 42 in acme/api" is embedded as
    "close issue in": the values say nothing of which operation is asked. The same text goes to
    the local model and to an embeddings URL; a query that is values only is embedded as typed."""
    args = tokens(query, lexicon.ordinary, lexicon.tables, raw=True)
    text, out, pos = args.text, [], 0
    for start, end, kind in sorted(set(args.spans)):
        if start < pos or (kind == "one" and "_" in text[start:end]):
            continue
        if start > 0 and text[start - 1] == "+":  # "+15551234567": the number's sign
            start -= 1
        out += [text[pos:start], " "]
        pos = end
    out.append(text[pos:])
    kept = re.sub(r"\s+", " ", re.sub(r"\s+([,.?!])", r"\1", "".join(out))).strip()
    return kept or " ".join(query.split())


class Semantic:
    """The embedding side of one search endpoint (see the module doc)."""

    def __init__(self, config: EmbeddingsConfig | LocalModelConfig, endpoint: str,
                 env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.monotonic,
                 encoder: Encoder | None = None) -> None:
        """With *encoder* (the local model), *config* is its :class:`LocalModelConfig`; without, an
        :class:`EmbeddingsConfig` whose URL client is made here (its key read from *env*)."""
        self.config = config
        self._clock = clock
        self.endpoint = endpoint
        self._local = encoder  # the local model itself (self.client may wrap it: shared_vectors.py)
        self.no_key = False
        self.broken = False  # the local model cannot run: this endpoint ranks lexically for good
        self.client: Encoder
        if encoder is not None:
            self.client = encoder
        else:
            url = cast("EmbeddingsConfig", config)
            variables = os.environ if env is None else env
            key = variables.get(url.api_key_env, "") if url.api_key_env else ""
            # A configured key that is not there: nothing is sent (the URL would refuse us anyway).
            self.no_key = bool(url.api_key_env) and not key
            if self.no_key:
                log.error("endpoint %s: search.embeddings.api_key_env names %s, which is not set: ranking "
                          "lexically alone", endpoint, url.api_key_env)
            self.client = EmbeddingsClient(url, key or None, endpoint)
        self.store = VectorStore()
        self._queries: OrderedDict[str, Matrix] = OrderedDict()
        self._failures = 0
        self._open_until = 0.0
        self._sync_after = 0.0
        self._syncing = False
        self._idle = asyncio.Event()  # set while no sync runs (see idle())
        self._idle.set()
        self.complete_for: object = None  # the prints the last sync embedded entirely
        self._warned_at = float("-inf")
        self._unlogged = 0

    @property
    def local(self) -> bool:
        """Whether the vectors come from the local model (else from an embeddings URL)."""
        return self._local is not None

    async def close(self) -> None:
        await self.client.close()

    # -- failures ------------------------------------------------------------------------------
    def _failed(self, stage: str, exc: EmbeddingsError) -> None:
        if self.local and exc.reason == "model":
            if not self.broken:
                log.error("endpoint %s: the local embedding model cannot be used: %s; ranking lexically alone",
                          self.endpoint, exc)
            self.broken = True
            return
        if not self.local:  # only a URL's failures count toward its breaker
            self._failures += 1
        now = self._clock()
        if self._failures >= _FAILURES_TO_OPEN:
            self._open_until = now + self.config.cooldown_s
        if now - self._warned_at >= _WARN_EVERY_S:
            more = f" ({self._unlogged} more failure(s) since the last warning)" if self._unlogged else ""
            log.warning("endpoint %s: embeddings %s request to %s failed: %s: %s; ranking lexically%s",
                        self.endpoint, stage, self.client.shown, exc.reason, exc, more)
            self._warned_at, self._unlogged = now, 0
        else:
            self._unlogged += 1

    def _answered(self) -> None:
        """A query was answered: the breaker's row of failures ends (a batch never ends it)."""
        self._failures = 0

    def _allow(self) -> bool:
        """Whether a request may go out: no, while the breaker is open; after the cool-down, the
        first caller probes (and the cool-down restarts for the others until it succeeds)."""
        if self._failures < _FAILURES_TO_OPEN:
            return True
        now = self._clock()
        if now < self._open_until:
            return False
        self._open_until = now + self.config.cooldown_s
        return True

    # -- tools ---------------------------------------------------------------------------------
    def pending(self, prints: Mapping[str, str]) -> bool:
        """Whether a :meth:`sync` of *prints* has work it may do now."""
        return (not self.no_key and not self.broken and self.complete_for is not prints and not self._syncing
                and self._clock() >= self._sync_after)

    async def sync(self, prints: Mapping[str, str], texts: Callable[[str], str | Sequence[str]]) -> int:
        """Embed the tools of *prints* (name → fingerprint) that have no vector; *texts* gives a
        name's text, or its views (:func:`tool_texts`: one vector each, sent in the same request).
        Returns how many were embedded (0 when another sync runs or it cools down)."""
        # Batches may go while the breaker is closed or cooled down, but take no probe from the
        # queries: only an answered query closes the breaker.
        if not self.pending(prints) or (self._failures >= _FAILURES_TO_OPEN and self._clock() < self._open_until):
            return 0
        self._syncing = True
        self._idle.clear()
        done = 0
        try:
            by_print = {fp: name for name, fp in prints.items()}
            todo = self.store.missing(by_print)
            views = 1
            if todo:
                first = texts(by_print[todo[0]])
                views = 1 if isinstance(first, str) else len(first)
            step = max(1, self.config.batch // views)  # at most ``batch`` texts a request
            for start in range(0, len(todo), step):
                batch = todo[start:start + step]
                sent: list[str] = []
                for fp in batch:
                    text = texts(by_print[fp])
                    sent += [text] if isinstance(text, str) else list(text)
                try:
                    rows = await self.client.embed(sent, "index", self.store.dim)
                except EmbeddingsError as exc:
                    self._failed("index", exc)
                    self._sync_after = self._clock() + self.config.cooldown_s
                    return done
                self.store.put(batch, rows if views == 1 else rows.reshape(len(batch), views, -1))
                done += len(batch)
            self.complete_for = prints
            return done
        finally:
            self._syncing = False
            self._idle.set()

    async def idle(self) -> None:
        """Return once no :meth:`sync` runs: one started elsewhere (the start-up's warm-up, a search's
        background indexing) has ended, its vectors stored."""
        await self._idle.wait()

    # -- queries -------------------------------------------------------------------------------
    async def query(self, text: str) -> Matrix | None:
        """The vector of a ``find_tools`` query, or None (the call ranks lexically; see module doc)."""
        if self.no_key or self.broken:
            self._fallback("no_key" if self.no_key else "model")
            return None
        if not len(self.store) or self._syncing:
            # No tool vector yet (just started, or indexing fails), or batches are in flight: the
            # server would answer this query only after them.
            self._fallback("not_indexed")
            return None
        key = " ".join(text.split())
        cached = self._queries.get(key)
        if cached is not None:
            self._queries.move_to_end(key)
            return cached
        if not self._allow():
            self._fallback("breaker_open")
            return None
        queue_wait = getattr(self._local, "queue_wait_s", None)
        if queue_wait is not None and queue_wait() > cast("LocalModelConfig", self.config).queue_s:
            self._fallback("busy")  # a burst beyond what the model encodes: answered now, lexically
            return None
        try:
            if self.local:  # the model may be busy with a batch (another endpoint's): wait so long only
                async with asyncio.timeout(self.config.timeout_s):
                    vector: Matrix = (await self.client.embed([key], "query", self.store.dim))[0]
            else:  # the URL client bounds its own requests
                vector = (await self.client.embed([key], "query", self.store.dim))[0]
        except TimeoutError:
            self._fallback("timeout")
            return None
        except EmbeddingsError as exc:
            self._failed("query", exc)
            self._fallback(exc.reason)
            return None
        self._answered()
        if self.config.query_cache:
            self._queries[key] = vector
            if len(self._queries) > self.config.query_cache:
                self._queries.popitem(last=False)
        return vector

    def _fallback(self, reason: str) -> None:
        metrics.SEARCH_LEXICAL_FALLBACKS.labels(metrics.bounded("endpoint", self.endpoint), reason).inc()

    def rank(self, vector: Matrix, prints: Mapping[str, str], n: int,
             visible: Callable[[str], bool] | None) -> list[SearchHit]:
        """The best *n* visible tools by cosine to *vector* (see :class:`VectorStore`)."""
        return self.store.nearest(vector, prints, n, visible, self.config.min_similarity)

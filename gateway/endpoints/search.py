"""``discovery: search``: an endpoint that lists ``find_tools`` and ``call_tool`` instead of its
catalog (definitions in :mod:`gateway.discovery.tools`).

* ``tools/list`` answers the two tools (:meth:`EndpointSearch.listing`);
* ``find_tools`` is served by the endpoint itself, as a local handler at the end of the filter
  chain (so it is counted, traced, audited and rate-limited like a call; access rules do not name
  it: it only ever shows what the caller may use). It ranks the endpoint's tools with
  :class:`~gateway.discovery.catalog_search.CatalogSearch` over the endpoint's view, the caller's
  visibility (the access rules of its principal, on the catalog's names) applied before the top
  *k*, and answers full Tool objects as the endpoint serves them (renamed, fixed arguments hidden);
* ``call_tool {name, arguments}`` never reaches this module: the view's ``translate`` rewrites it
  into the ``tools/call`` of the named tool before the context is built, so access rules,
  argument validation, rate limits, audit and telemetry see that tool, not ``call_tool``;
* the tools found are callable directly by name on the endpoint, as on a ``list`` endpoint;
* semantic ranking (:mod:`gateway.discovery.hybrid`): ``search.embeddings`` (a URL), else under
  ``search.semantic: auto`` (the default) the local model when it is installed
  (:mod:`gateway.discovery.local_model`; when it is not, lexical alone, said once at INFO with how
  to install it), ``local`` the local model whatever happens (an ERROR when it cannot run), ``off``
  none. The query's vector is made before the index is locked (a slow URL or a busy model never
  holds other searches), tool vectors are made in the background after each warm-up or search that
  finds tools without one (until they are all there, ``find_tools`` ranks lexically), and a reload
  that changes what is wanted starts afresh (the old client is closed; the local model stays
  loaded, shared by every endpoint of the process). With a shared state store (``state.store``:
  Redis) the replicas share their tool vectors through it (:mod:`gateway.discovery.shared_vectors`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gateway.discovery.tools import CALL_TOOL, DEFAULT_LIMIT, FIND_TOOLS, MAX_LIMIT, MAX_QUERY
from gateway.filters.auth import AccessFilter

if TYPE_CHECKING:
    from gateway.context import CallContext, LocalHandler
    from gateway.discovery.catalog_search import CatalogSearch
    from gateway.discovery.hybrid import Semantic
    from gateway.endpoints.config import EmbeddingsConfig, LocalModelConfig, SearchConfig
    from gateway.endpoints.view import EndpointView
    from gateway.filters import Filter

    # What an endpoint's semantic side is made for: a URL's config, the local model's (with its
    # path and cache folder resolved), or None: lexical alone.
    Wanted = EmbeddingsConfig | tuple[str, LocalModelConfig, str | None, str | None] | None

__all__ = ["EndpointSearch", "FiltersSource", "VECTOR_CACHE_ENV"]

log = logging.getLogger("gateway.endpoints.search")
# The tool vectors' disk cache folder when search.local.cache_dir is not set (the container image
# sets it to its writable data volume, so a restarted container does not embed its catalog again).
VECTOR_CACHE_ENV = "MCP_GATEWAY_VECTOR_CACHE_DIR"
_UNSET = object()
_said_not_installed = False  # the INFO of `auto` without the model: once per process


def _local_path(value: str | None, base: str) -> str | None:
    return None if value is None else str(Path(base) / value)  # an absolute value stays as it is


def _auto_without_model(endpoint: str) -> None:
    global _said_not_installed
    if not _said_not_installed:
        from gateway.discovery.local_model import INSTALL
        log.info("endpoint %s (and any other search endpoint with search.semantic: auto) ranks tools lexically "
                 "alone: the local embedding model is not installed. Install it for semantic ranking: %s; "
                 "search.semantic: off says lexical on purpose", endpoint, INSTALL)
        _said_not_installed = True


class FiltersSource(Protocol):
    """Where the current filter chain is read (the gateway: a reload replaces it)."""

    @property
    def filters(self) -> Sequence[Filter]: ...


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


class EndpointSearch:
    """The search mode of one endpoint (see the module doc)."""

    tools: dict[str, dict[str, Any]] = {"find_tools": FIND_TOOLS, "call_tool": CALL_TOOL}

    def __init__(self, view: EndpointView, chain: FiltersSource) -> None:
        self.view = view
        self.chain = chain
        self._index: CatalogSearch | None = None  # built on the first search or warm-up
        # One user of the index at a time: a refresh runs in a worker thread (thousands of tools
        # take seconds to index; the event loop keeps serving meanwhile).
        self._lock = asyncio.Lock()
        self._semantic: Semantic | None = None
        self._semantic_for: Wanted = None  # what the semantic side was made for
        self._decided: tuple[object, Wanted] = (_UNSET, None)  # (the search config, what it wants)
        self._embedding: asyncio.Task[int] | None = None

    def _wanted(self, search: SearchConfig | None) -> Wanted:
        """The semantic side *search* asks for: a URL's config, the local model's, or None."""
        from gateway.endpoints.config import LocalModelConfig
        if search is not None and search.embeddings is not None:
            return search.embeddings
        semantic = search.semantic if search is not None else "auto"
        local = search.local if search is not None else LocalModelConfig()
        if semantic == "off":
            return None
        if semantic == "auto" and local.path is None:
            from gateway.discovery.local_model import installed_model_dir
            if installed_model_dir() is None:
                _auto_without_model(self.view.config.name)
                return None
        base = getattr(getattr(self.chain, "config", None), "base_dir", ".")  # the gateway's config folder
        cache_dir = _local_path(local.cache_dir, base) or os.environ.get(VECTOR_CACHE_ENV) or None
        return ("local", local, _local_path(local.path, base), cache_dir)

    async def _ready(self) -> CatalogSearch:
        async with self._lock:
            search = self.view.config.search
            packs = search.packs if search is not None else ()
            if self._index is None:
                # The ranker (index, stemmer, vocabulary: ~6 MB) loads with the first search endpoint
                # that searches or warms up, never in a gateway that has none.
                from gateway.discovery.catalog_search import CatalogSearch
                self._index = CatalogSearch(self.view, packs=packs)
            elif self._index.index.lexicon.packs != packs:  # a reload changed search.packs
                from gateway.discovery.packs import lexicon
                self._index.index.lexicon = lexicon(packs)
            if self._decided[0] is not search:  # first use, or a reload: read the config again
                self._decided = (search, self._wanted(search))
            wanted = self._decided[1]
            if wanted != self._semantic_for:  # first use, or a reload changed the semantic side
                old, self._semantic, self._semantic_for = self._semantic, None, wanted
                # numpy & co. load only where a semantic ranking is wanted
                if isinstance(wanted, tuple):
                    from gateway.discovery import local_model
                    from gateway.discovery.hybrid import Semantic
                    _, local, path, cache_dir = wanted
                    self._semantic = Semantic(local, self.view.config.name,
                                              encoder=local_model.shared(path, cache_dir))
                    self._share(self._semantic, f"local:{local_model.PINNED['model.safetensors']}")
                elif wanted is not None:
                    from gateway.discovery.hybrid import Semantic
                    self._semantic = Semantic(wanted, self.view.config.name)
                    self._share(self._semantic, f"url:{wanted.url}\n{wanted.model}\n{wanted.dimensions}")
                self._index.semantic = self._semantic
                if old is not None:
                    await old.close()
            if self._index.stale():
                await asyncio.to_thread(self._index.refresh)
            return self._index

    def _share(self, semantic: Semantic, space: str) -> None:
        """With a shared state store, the replicas share their tool vectors through it
        (:mod:`gateway.discovery.shared_vectors`): one replica embeds a tool text, the others read it."""
        store = getattr(self.chain, "state", None)
        if store is not None and store.shared:
            from gateway.discovery.shared_vectors import SharedVectors
            semantic.client = SharedVectors(semantic.client, store, space, self.view.config.name)

    async def warm(self) -> None:
        """Bring the index up to the endpoint's tools now (after a catalog rebuild), so the next
        ``find_tools`` does not wait for it; then their vectors, when there is a semantic side."""
        index = await self._ready()
        if index.semantic is not None:  # a sync under way would make embed() return at once
            await index.semantic.idle()
        await index.embed()

    def _embed_later(self, index: CatalogSearch) -> None:
        """Start making missing tool vectors in the background (one task at a time)."""
        if index.pending() and (self._embedding is None or self._embedding.done()):
            self._embedding = asyncio.get_running_loop().create_task(index.embed())

    async def close(self) -> None:
        """Stop background embedding and close the embeddings client (the gateway stops)."""
        if self._embedding is not None:
            self._embedding.cancel()
            await asyncio.gather(self._embedding, return_exceptions=True)
        if self._semantic is not None:
            await self._semantic.close()

    def local_handler(self, method: str, params: dict[str, Any]) -> LocalHandler | None:
        """The handler of a request the endpoint serves itself (``find_tools``), else None."""
        if method == "tools/call" and params.get("name") == "find_tools":
            return self.find
        return None

    def _visible(self, ctx: CallContext) -> Callable[[str], bool] | None:
        for flt in self.chain.filters:
            if isinstance(flt, AccessFilter):
                access = flt.policy.for_principal(ctx.principal)
                if access.allow_all:
                    return None
                view = self.view
                return lambda name: access.allowed(view.source("tools", name) or name)
        return None

    async def find(self, ctx: CallContext) -> dict[str, Any]:
        """``find_tools {query, limit?}``: bad arguments are a tool error the model can act on."""
        args = ctx.arguments
        extra = sorted(set(args) - {"query", "limit"})
        if extra:
            return _tool_error(f"find_tools: unexpected argument(s) {', '.join(extra)}; it takes query and limit")
        query = args.get("query")
        if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY:
            return _tool_error(f"find_tools: query must be a non-empty string of at most {MAX_QUERY} characters, "
                               "saying in plain words what you want to do")
        limit = args.get("limit", DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return _tool_error(f"find_tools: limit must be an integer from 1 to {MAX_LIMIT}")
        ctx.record.backend_target = "find_tools"
        index = await self._ready()
        vector = await index.query_vector(query)  # None: lexical alone (none wanted, not ready, or failed)
        async with self._lock:  # a warm-up may have started since: never search while it writes
            result = index.find(query, limit, self._visible(ctx), vector)
        self._embed_later(index)
        return result

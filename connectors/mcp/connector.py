"""The upstream MCP connector: one upstream MCP server served as part of the gateway.

Session model. ``session: shared`` (default) keeps one upstream session that multiplexes every
downstream session: the upstream sees the gateway's own request ids and progress tokens, never the
clients', so two sessions using the same ids or tokens cannot see each other's traffic.
``per_client`` opens one upstream session per downstream session on its first call (mirroring that
client's capabilities) and releases it in :meth:`session_closed`; the shared session is then kept
for discovery (listings, list_changed, resource updates) only.

Routing back. Each forwarded request carries a :class:`~connectors.mcp.relay.Relay` as its
owner: upstream progress (found by the gateway's token), logs and sampling/elicitation/roots
requests related to that request (Streamable HTTP tells which request's stream carried them) are
relayed to the downstream session that made it, in order, before its response is returned. stdio and legacy SSE carry no
such relation: the message goes to the only downstream session with calls in flight. With
``shared_calls: queued`` (default) a shared session serves one downstream session's calls at a time
(:mod:`connectors.mcp.turns`), so there is never more than one; with ``concurrent`` the upstream
gets an error naming ``session: per_client`` when there are several. Outside any call there is no
client to ask: ``roots/list`` is answered with no roots, sampling and elicitation with an error.

Staying up. A lost upstream fails its in-flight calls with ``BackendUnavailable``, removes its
components (``components_changed``), reports health down, and reconnects with exponential backoff
and jitter; calls meanwhile fail fast. On reconnect every listing is fetched again (following
``nextCursor`` to the end) and subscriptions are renewed. A health ping detects a hung upstream.

Eras. Each (re)connect finds out which era the upstream speaks (:mod:`connectors.mcp.era`). A
2026-07-28 upstream has no session: the shared "session" is a request channel whose every request
is stamped (:mod:`connectors.mcp.modern`) with the caller's own capabilities, so ``per_client``
opens nothing more, and the health probe is ``server/discover`` (the
revision has no ``ping``). Over HTTP a failed request fails alone; the upstream is down only when
the probe fails. Its change notifications arrive on ``subscriptions/listen``
(:mod:`connectors.mcp.listen`), which ``subscribe``/``unsubscribe`` re-open with the new set of
URIs. An ``input_required`` result goes back to the gateway as it is (the gateway asks its caller)
and the retry's ``inputResponses``/``requestState`` go upstream. A dual-era upstream serves each
caller in its era (a legacy one over an upstream session: :mod:`connectors.mcp.sessions`; over stdio
a second process, :mod:`connectors.mcp.era_process`). An upstream that answers
``UnsupportedProtocolVersion`` has changed: it is reconnected (its era found again), the call retried once.

Identity. With an ``oauth`` block the shared session carries the service identity's token; with
``identity: user|exchange`` or ``credentials.per_principal`` each principal's calls go through its
own session or request channel carrying that principal's credential (:mod:`connectors.oauth.identity`).
A missing authorization is asked for (the caller, by URL elicitation; an operator, for the service
identity) and the call or connection proceeds once it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import weakref
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from connectors.backoff import Backoff
from connectors.base import (
    Components,
    Connector,
    ConnectorEvents,
    Health,
    LeftOut,
)
from connectors.egress import EgressPolicy, Lookup
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from connectors.oauth.client import AuthorizationRequired
from connectors.oauth.identity import UpstreamIdentity
from gateway.protocol.errors import (
    BackendUnavailable,
    InvalidParams,
    InvalidRequest,
    ProtocolError,
    ResourceNotFound,
    ToolExecutionError,
)
from gateway.protocol.meta import TASKS_EXTENSION

from . import controls, mapping, modern
from .client import UpstreamSession
from .config import MCPConfig
from .era import open_upstream
from .era_process import EraProcess
from .listen import Listener
from .listing import ALL_LISTINGS, Refresher, fetch_listings
from .reconnect import Reconnector, ping_loop
from .relay import Relay, sole_owner
from .sessions import CLIENT_INFO, LEGACY_SHARED, SHARED_CLIENT_CAPS, SessionPool, legacy_caller
from .transport import ResponseTooLarge, SessionExpired
from .turns import SessionTurns
from .watching import Watching

if TYPE_CHECKING:
    from gateway.context import CallContext, SessionHandle

__all__ = ["MCPConnector"]

log = logging.getLogger("connectors.mcp")
# An upstream's notifications/<kind>/list_changed: the listings fetched again.
_REFRESHED = {"tools": ("tools",), "prompts": ("prompts",), "resources": ("resources", "templates")}


class MCPConnector(Connector):
    kind = "mcp"
    config: MCPConfig

    def __init__(self, config: MCPConfig, base_dir: Path = Path("."), *, lookup: Lookup | None = None) -> None:
        """``lookup`` replaces the system resolver (tests map names to loopback addresses)."""
        super().__init__(config, base_dir)
        self._http: aiohttp.ClientSession | None = None
        # Over HTTP every connection goes through it; the configured url's host is the operator's
        # own word (trusted by name for private addresses), everything else follows the rules.
        self._egress = EgressPolicy(config.egress, trusted=(config.url,), lookup=lookup, trust_names=True)
        self._identity = UpstreamIdentity(self.name, config.url, config.oauth, config.credentials, self._egress,
                                         lambda: self.oauth_port)
        self._shared: UpstreamSession | None = None
        # per_client and per-principal upstream sessions (connectors.mcp.sessions)
        self._sessions = SessionPool(self.name, config, base_dir, self._egress, self._identity, self,
                                     lambda: self._http, self._spawn, legacy_opened=self._legacy_opened)
        self._lists: dict[str, list[Any]] = {}  # the shared session's listings, as _apply stored them
        self._unusable: tuple[LeftOut, ...] = ()  # its tools a client must not list (x-mcp-header)
        self._template_res: tuple[Any, ...] = ()
        self._header_schemas: dict[str, Any] = {}  # tools with x-mcp-header parameters: their inputSchema
        self._upstream_names: dict[str, str] = {}  # renamed tools: local name → upstream name
        self._problems: tuple[str, ...] = ()
        self._left_out: tuple[LeftOut, ...] = ()  # upstream tools not served, on purpose (left_out())
        self._listener: Listener | None = None
        self._caps: set[str] | None = None
        self._progress: dict[str, Relay] = {}
        # shared_calls: queued: whose calls run now, per upstream session several sessions share
        self._turns: weakref.WeakKeyDictionary[UpstreamSession, SessionTurns] = weakref.WeakKeyDictionary()
        self._tokens = itertools.count(1)
        self._watching = Watching()  # the resources watched upstream, on which channels
        self._health = Health(False, "starting")
        self._stopping = False
        self._ping_task: asyncio.Task[None] | None = None
        # list_changed bursts coalesced into few re-fetches (connectors.mcp.listing)
        self._refresher = Refresher(self.name, lambda: self._shared, config.timeout_s or 30.0, config.max_pages,
                                    self._refreshed)
        # a dual-era stdio upstream's legacy callers' process: its own listings (connectors.mcp.era_process)
        self._era = EraProcess(self.name, self._legacy_process, config.timeout_s or 30.0, config.max_pages,
                               self._era_refreshed)
        self._bg: set[asyncio.Task[Any]] = set()
        # the first connection and every reconnect (connectors.mcp.reconnect)
        self._reconnect = Reconnector(self.name, Backoff(config.reconnect_initial_s, config.reconnect_max_s),
                                      connect=self._connect, connected=lambda: self._shared is not None,
                                      stopping=lambda: self._stopping, detail=lambda: self._health.detail,
                                      set_health=self._set_health,
                                      authorize=lambda exc: self._identity.authorize(exc, None))
        self._timeout = config.timeout_s

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)
        self._stopping = False
        if self.config.shared_calls == "concurrent" and self.config.transport != "streamable_http" \
                and self.config.session == "shared":
            log.warning("upstream %s: shared_calls: concurrent: its sampling, elicitation and roots requests fail "
                        "while calls of several client sessions are in flight (session: per_client avoids it)",
                        self.name)
        if self.config.transport == "sse":
            # One HTTP client per connector, shared by every upstream session of it (its cookie jar
            # keeps load-balancer stickiness cookies, which stateful upstreams behind one rely on).
            # Streamable HTTP sessions bring their own lean client (http1.py): it is the hot path.
            self._http = self._egress.client_session(
                limit=0, keepalive_timeout=4.0,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout_s))
        # The first attempt runs as the reconnect loop with no initial delay. start() waits for it
        # only up to startup_wait_s: a slow or hung upstream must not hold up the gateway and the
        # other connectors; it joins the catalog (components_changed) whenever it gets there.
        self._set_health(False, "connecting")
        self._reconnect.first_attempt = asyncio.Event()
        self._reconnect.schedule(immediately=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.startup_wait_s):
                await self._reconnect.first_attempt.wait()
        if self._shared is None:
            log.warning("upstream %s not connected yet: %s", self.name, self._health.detail)
        if self.config.ping_interval_s > 0:
            self._ping_task = asyncio.create_task(
                ping_loop(self.config.ping_interval_s, lambda: self._shared, lambda: self._stopping),
                name=f"mcp-ping-{self.name}")

    async def stop(self) -> None:
        self._stopping = True
        for task in (self._reconnect.task, self._ping_task, self._refresher.task, self._era.refresher.task, *self._bg):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        sessions = [s for s in (self._shared, *self._sessions.take_all()) if s is not None]
        self._shared = None
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None
        await self._identity.aclose()

    def health(self) -> Health:
        """Down and retrying: ``extra["retry"]`` holds attempts, last error and the next attempt."""
        backoff = self._reconnect.backoff
        if self._health.up or not backoff.attempts:
            return self._health
        return replace(self._health, extra={**self._health.extra, "retry": backoff.snapshot()})

    @property
    def reconnects(self) -> int:
        """Connections made again after a loss (the first one is not counted)."""
        return self._reconnect.reconnects

    def problems(self) -> tuple[str, ...]:
        return self._problems

    def _set_health(self, up: bool, detail: str) -> None:
        extra: dict[str, Any] = {"transport": self.config.transport, "reconnects": self.reconnects}
        if up and self._shared is not None:
            extra["protocol_version"] = self._shared.protocol_version
            extra["server"] = self._shared.server_info.get("name", "")
        changed = up != self._health.up
        self._health = Health(up, detail, extra)
        if changed and self.events is not None:
            self.events.health_changed(self._health)

    def capabilities(self) -> set[str]:
        # Before the first connection nothing is known: offer everything, so clients that
        # initialized while the upstream was down still learn about its components later.
        return set(mapping.ALL_CAPABILITIES) if self._caps is None else set(self._caps)

    # -- sessions ------------------------------------------------------------------------------
    @property
    def _clients(self) -> dict[str, UpstreamSession]:
        """The per_client and per-principal upstream sessions, by key (tests look)."""
        return self._sessions.clients

    async def _connect(self) -> None:
        cfg = self.config
        session = UpstreamSession(self.name, self._sessions.transport_factory(), self, client_info=CLIENT_INFO,
                                  capabilities=SHARED_CLIENT_CAPS)
        stamp = modern.ModernStamp(modern.modern_capabilities(SHARED_CLIENT_CAPS), CLIENT_INFO,
                                   http=cfg.transport == "streamable_http")
        await open_upstream(session, "legacy" if cfg.transport == "sse" else cfg.protocol, stamp,
                            connect_timeout_s=cfg.connect_timeout_s, probe_timeout_s=cfg.probe_timeout_s)
        try:
            listings = await fetch_listings(session, ALL_LISTINGS, self._timeout or 30.0, self.config.max_pages)
        except BaseException as exc:
            # Clean-up, then control flow: an upstream that initialized but cannot list its
            # components is not usable, which the reconnect loop handles as "unavailable".
            # (Transport and timeout failures were translated by UpstreamSession, the edge.)
            await session.close()
            if isinstance(exc, ProtocolError):
                raise BackendUnavailable(f"upstream {self.name} failed to list its components: {exc}") from None
            raise
        if self._stopping:
            await session.close()
            return
        self._shared = session
        caps = mapping.capability_set(session.server_capabilities)
        self._caps = caps if self._caps is None else self._caps | caps
        self._apply(listings, session.modern)
        if session.modern:
            # Changes made while nobody listened are missed: a listen opened again re-lists.
            self._listener = Listener(session, initial_s=cfg.reconnect_initial_s, max_s=cfg.reconnect_max_s,
                                      on_reopened=lambda: self._refresher.schedule(set(ALL_LISTINGS)))
            self._listener.start(self._watching.uris)
        else:
            self._watching.renew(session, self._spawn)
        self._set_health(True, f"connected ({session.protocol_version})")
        if self.events is not None:
            self.events.components_changed()

    def _apply(self, listings: dict[str, list[Any]], modern_upstream: bool) -> None:
        """The shared session's listings (every one, or those fetched again) become components."""
        if modern_upstream:
            listings = {k: modern.definitions(v) for k, v in listings.items()}
            if "tools" in listings:
                tools, unusable = modern.usable_tools(listings["tools"], self.name)
                listings["tools"], self._unusable = tools, tuple(unusable)
        elif "tools" in listings:
            self._unusable = ()
        self._lists.update(listings)
        self._build(frozenset(listings))

    def _build(self, kinds: frozenset[str]) -> None:
        """Components of the listings ``kinds`` from the shared session's and (a dual-era stdio
        upstream) the legacy callers' process's."""
        listings = {kind: self._era.merged(kind, self._lists.get(kind, [])) for kind in kinds}
        parts: dict[str, Any] = {}
        if "tools" in listings:
            tools = mapping.tool_specs(listings["tools"])
            self._header_schemas = {t.name: t.definition["inputSchema"] for t in tools
                                    if modern.has_header_params(t.definition.get("inputSchema"))}
            presented = controls.present_tools(tools, self.config)
            parts["tools"], self._upstream_names = presented.tools, presented.upstream_names
            self._problems = presented.problems
            for problem in presented.problems:
                log.warning("connector %s: %s", self.name, problem)
            self._note_left_out((*self._unusable, *presented.left_out))
        if "resources" in listings:
            parts["resources"] = controls.select_resources(mapping.resource_specs(listings["resources"]), self.config)
        if "templates" in listings:
            templates = controls.select_templates(mapping.template_specs(listings["templates"]), self.config)
            parts["resource_templates"] = templates
            self._template_res = tuple(mapping.template_regex(t.uri_template) for t in templates)
        if "prompts" in listings:
            parts["prompts"] = controls.select_prompts(mapping.prompt_specs(listings["prompts"]), self.config)
        self.components = replace(self.components, **parts)

    def _refreshed(self, listings: dict[str, list[Any]], modern_upstream: bool, announced: frozenset[str]) -> None:
        self._apply(listings, modern_upstream)
        if self.events is not None:
            self.events.components_changed(announced)

    def _era_refreshed(self, kinds: frozenset[str], announced: frozenset[str]) -> None:
        """The legacy callers' process re-listed ``kinds`` after announcing ``announced``."""
        if self._shared is None:
            return  # no components now; the reconnect builds them with these listings
        self._build(kinds)
        if self.events is not None:
            self.events.components_changed(announced)

    def _legacy_process(self) -> UpstreamSession | None:
        """The legacy callers' shared session of a dual-era upstream when it is a process of its
        own (stdio), else None (connectors.mcp.era_process)."""
        if self.config.transport != "stdio":
            return None
        session = self._sessions.clients.get(LEGACY_SHARED)
        return session if session is not None and session.alive and not session.modern else None

    async def _legacy_opened(self, session: UpstreamSession) -> None:
        """The legacy callers' session was opened: over stdio (a process of its own) it watches
        every URI the connector watches, before any call of theirs can change one."""
        if self.config.transport == "stdio":
            await self._watching.all_on(session)

    def _note_left_out(self, left: tuple[LeftOut, ...]) -> None:
        # Logged once each: a warning for a fault upstream or in overrides, info for include/exclude.
        for item in controls.newly_left_out(self._left_out, left):
            log.log(logging.INFO if item.rule in ("include", "exclude") else logging.WARNING,
                    "upstream %s: tool %r left out by rule %s: %s", self.name, item.name, item.rule, item.reason)
        self._left_out = left

    def left_out(self) -> tuple[LeftOut, ...]:
        return self._left_out

    def _clear(self) -> None:
        self.components = Components()
        self._lists = {}
        self._template_res = ()
        self._header_schemas = {}

    # -- SessionHandler: what the upstream initiates -------------------------------------------
    def on_lost(self, session: UpstreamSession, reason: str) -> None:
        if session is not self._shared:
            era_process = session is self._sessions.clients.get(LEGACY_SHARED)
            self._sessions.lost(session)
            # Its successor process starts afresh: what only it listed is gone.
            if era_process and self._era.forget() and self._shared is not None:
                self._build(frozenset(self._lists))
                if self.events is not None:
                    self.events.components_changed()
            return
        log.warning("upstream %s lost: %s", self.name, reason)
        self._shared = None
        if self._listener is not None:
            self._spawn(self._listener.stop())
            self._listener = None
        self._spawn(session.close())
        self._clear()
        self._set_health(False, reason)
        if self.events is not None:
            self.events.components_changed()
        self._reconnect.schedule()

    def on_notification(self, session: UpstreamSession, method: str, params: dict[str, Any], owner: Any) -> None:
        if method == "notifications/progress":
            relay = self._progress.get(params.get("progressToken"))  # type: ignore[arg-type]
            if relay is not None:
                ctx = relay.ctx
                relay.push(lambda: ctx.progress(params.get("progress", 0), params.get("total"), params.get("message")))
        elif method == "notifications/message":
            relay = owner if isinstance(owner, Relay) else sole_owner(session)
            level, data, logger = params.get("level", "info"), params.get("data"), params.get("logger")
            if relay is not None:
                ctx = relay.ctx
                relay.push(lambda: ctx.log(level, data, logger))
            elif self.events is not None:
                self.events.log(level, data, logger)
        elif method.endswith("/list_changed"):
            # From the listen stream or any session (an SDK server announces on the session whose
            # request made the change); passed on even if the lists read back the same.
            kind = method.split("/")[1]
            if kind in _REFRESHED:
                # The legacy callers' own process (stdio) changed itself, not the shared one.
                refresher = self._era.refresher if session is self._legacy_process() else self._refresher
                refresher.schedule(set(_REFRESHED[kind]), frozenset({kind}))
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str) and self.events is not None:
                self.events.resource_updated(uri)
        elif method == "notifications/subscriptions/acknowledged":
            if self._listener is not None and session is self._shared:
                self._listener.acknowledged(params, owner)

    async def on_request(self, session: UpstreamSession, method: str, params: dict[str, Any],
                         owner: Any) -> dict[str, Any]:
        relay: Relay | None = owner if isinstance(owner, Relay) else sole_owner(session)
        if relay is not None:
            ctx = relay.ctx
            return await ctx.session.request(method, params, related_request_id=ctx.request_id)
        bound = self._sessions.bound(session)
        if bound is not None:
            return await bound.request(method, params)
        owners = {o.ctx.session.id for o in session.owners() if isinstance(o, Relay)}
        if not owners and method == "roots/list":
            # Asked outside any call (servers ask right after initialize): no client is asking
            # through the gateway now, so it offers no roots; a call's own request gets its client's.
            return {"roots": []}
        if not owners:
            raise InvalidRequest(f"The gateway cannot tell which client {method} is for: no client request to "
                                 f"upstream {self.name} is in flight (an upstream asks its client during a call)")
        raise InvalidRequest(f"The gateway cannot tell which client {method} is for: calls of {len(owners)} client "
                             f"sessions are in flight on upstream {self.name} (shared_calls: concurrent); set "
                             f"session: per_client, or shared_calls: queued, on connector {self.name}")

    # -- background work -----------------------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    @staticmethod
    async def _quiet(coro: Coroutine[Any, Any, Any]) -> None:
        with contextlib.suppress(Exception):
            await coro

    # -- components ----------------------------------------------------------------------------
    def owns_uri(self, uri: str) -> bool:
        return any(rx.match(uri) for rx in self._template_res)

    # -- calls ---------------------------------------------------------------------------------
    def _deadline(self, ctx: CallContext | None) -> float | None:
        remaining = ctx.remaining() if ctx is not None else None
        if self._timeout is None:
            return remaining
        return self._timeout if remaining is None else min(remaining, self._timeout)

    async def _forward(self, method: str, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        # A CLIENT span per upstream request; its context travels in params._meta.traceparent.
        with self.instrumentation.backend_call(*mapping.span_of(method, params, self.instrumentation.recording)):
            return await self._forward_traced(method, params, ctx)

    async def _forward_traced(self, method: str, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        relay = Relay(ctx)
        token = None
        if ctx.progress_token is not None:
            token = f"{self.name}-{next(self._tokens)}"
            self._progress[token] = relay
        traceparent = self.instrumentation.traceparent()  # this request's span (or the caller's context)
        meta = mapping.outgoing_meta(ctx.params.get("_meta"), token, traceparent or ctx.traceparent)
        if meta is not None:
            if traceparent:
                meta["traceparent"] = traceparent
            params["_meta"] = meta
        try:
            for attempt in range(2 + 2 * self._identity.max_authorizations):
                try:
                    session = await self._sessions.session_for(self._shared, ctx, self._health.detail)
                except AuthorizationRequired as exc:
                    await self._identity.authorize(exc, ctx)
                    continue
                hints = None
                sent = params
                if session.modern:
                    hints = modern.hints(method, params, ctx.session, self._header_schemas)
                    sent = modern.with_input_responses(method, dict(params), ctx.params)
                try:
                    async with self._turn(session, ctx):
                        result = await session.request(method, sent, timeout_s=self._deadline(ctx), owner=relay,
                                                       hints=hints)
                    break
                except AuthorizationRequired as exc:  # asked, and retried once it arrives
                    await self._identity.authorize(exc, ctx)
                    continue
                except SessionExpired:
                    # The upstream forgot us (restart, idle expiry): initialize again, retry once.
                    session.lose("upstream session expired")
                    if attempt or self.config.session == "shared" and not await self._wait_reconnect():
                        raise BackendUnavailable(f"Upstream MCP server {self.name} expired the session") from None
                except ProtocolError as exc:
                    versions = modern.supported_versions(exc) if session.modern else None
                    if versions is None:
                        raise
                    # A modern upstream that no longer speaks the revision was replaced: find its
                    # era again, retry once.
                    session.lose(f"upstream now supports only {', '.join(versions) or 'no known version'}")
                    if attempt or not await self._wait_reconnect():
                        raise BackendUnavailable(f"Upstream MCP server {self.name} changed its protocol "
                                                 "version") from None
            else:
                raise BackendUnavailable(f"Upstream MCP server {self.name} kept asking for authorization")
        finally:
            if token is not None:
                del self._progress[token]
        await relay.drain()
        return result

    def _turn(self, session: UpstreamSession, ctx: CallContext) -> contextlib.AbstractAsyncContextManager[None]:
        """``shared_calls: queued``: a call on an upstream session that several downstream sessions
        share, over a transport relating no upstream request to a call, waits for its session's turn."""
        if (self.config.shared_calls == "concurrent" or session.modern or self.config.transport == "streamable_http"
                or self._sessions.bound(session) is not None):
            return contextlib.nullcontext()
        turns = self._turns.get(session)
        if turns is None:
            turns = self._turns[session] = SessionTurns()
        return turns.turn(ctx.session.id)

    async def _wait_reconnect(self) -> bool:
        task = self._reconnect.task
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), self.config.connect_timeout_s)
        return self._shared is not None

    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        name = self._upstream_names.get(name, name)  # a renamed tool is called by its own name
        if self._era.lists:  # a dual-era stdio upstream whose processes list differently
            absent = self._era.absent_for(name, legacy_caller(ctx), self._lists.get("tools", []))
            if absent is not None:
                raise InvalidParams(absent, {"name": name})
        try:
            return await self._forward("tools/call", {"name": name, "arguments": arguments}, ctx)
        except ResponseTooLarge as exc:  # a model can act on it (ask for less), like the OpenAPI one
            raise ToolExecutionError(exc.message, status="response_too_large") from None

    async def read_resource(self, uri: str, ctx: CallContext) -> dict[str, Any]:
        if not controls.serves_uri(uri, self.config):
            raise ResourceNotFound(uri)
        return await self._forward("resources/read", {"uri": uri}, ctx)

    # -- the tasks extension (gateway.tasks) ---------------------------------------------------
    def supports_tasks(self) -> bool:
        """Whether the upstream is connected, modern, and advertised ``io.modelcontextprotocol/tasks``."""
        shared = self._shared
        if shared is None or not shared.modern:
            return False
        extensions = (shared.server_capabilities or {}).get("extensions")
        return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)

    async def task_request(self, method: str, task_id: str, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel`` of the upstream's task ``task_id``."""
        return await self._forward(method, {**params, "taskId": task_id}, ctx)

    async def get_prompt(self, name: str, arguments: dict[str, str], ctx: CallContext) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = arguments
        return await self._forward("prompts/get", params, ctx)

    async def complete(self, ref: dict[str, Any], argument: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        if self._caps is not None and "completions" not in self._caps:
            return {"completion": {"values": [], "hasMore": False}}
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        context = ctx.params.get("context")
        if isinstance(context, dict):
            params["context"] = context
        return await self._forward("completion/complete", params, ctx)

    async def subscribe(self, uri: str, ctx: CallContext) -> None:
        if not controls.serves_uri(uri, self.config):
            raise ResourceNotFound(uri)
        self._watching.uris.add(uri)  # kept: subscribed again once the upstream is back
        shared = self._shared
        if shared is None:
            raise BackendUnavailable.connector_down(self.name, self._health.detail)
        await self._watching.subscribe(uri, shared, self._listener, self._legacy_process(),
                                       self._deadline(ctx) or 30.0)

    async def unsubscribe(self, uri: str, ctx: CallContext | None) -> None:
        # ctx is None when the gateway drops the last subscription of a closed session.
        await self._watching.unsubscribe(uri, self._shared, self._listener, self._legacy_process(),
                                         self._deadline(ctx) or 30.0)

    def roots_changed(self, session: SessionHandle) -> None:
        """A downstream client's roots changed: tell the upstream session(s) that may ask for them."""
        targets = [self._clients.get(session.id)] if self.config.session == "per_client" else [self._shared]
        targets.append(self._clients.get(LEGACY_SHARED))  # a dual-era upstream's legacy callers' session
        for upstream in targets:
            # (2026-07-28 has no roots/list_changed: a modern upstream asks for roots per request.)
            if upstream is not None and upstream.alive and not upstream.modern:
                self._spawn(self._quiet(upstream.notify("notifications/roots/list_changed")))

    async def session_closed(self, session_id: str) -> None:
        await self._sessions.closed(session_id)

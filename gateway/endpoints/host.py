"""What an endpoint's sessions and transports are served by: :class:`EndpointHost`, and the
:class:`Endpoints` of a gateway.

An :class:`EndpointHost` is the running gateway seen through one endpoint. To a transport it is
the ``SessionFactory`` and the ``ModernHost`` (sessions it opens have it as their host, and are
registered with the gateway, so drain, shutdown, metrics and connector log messages reach them);
to a session it is the ``SessionHost``: the endpoint's identity (its ``title`` and
``instructions``), its capabilities, and ``dispatch`` through a :class:`~gateway.dispatch.Dispatcher`
over the endpoint's :class:`~gateway.endpoints.view.EndpointView` with the gateway's own filter
chain (rebuilt when the gateway replaces its chain), so access rules, rate limits, audit and
telemetry apply unchanged and carry the endpoint's name. Everything else (parked MRTR calls,
request states, the state store, tasks) is the gateway's.

:meth:`Endpoints.rebuild` runs after every catalog rebuild and sends each endpoint's sessions and
listen streams the ``list_changed`` of the listings that changed *there*. A reload keeps the host
of an endpoint whose name stays (its sessions stay connected and see the new selection); an
endpoint that left the config is no longer served (404 over HTTP, its sessions included: they end
at their idle timeout) and is not re-selected.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gateway.catalog import LIST_CHANGED
from gateway.dispatch import Dispatcher
from gateway.endpoints.config import EndpointConfig
from gateway.endpoints.search import EndpointSearch
from gateway.endpoints.view import EndpointView, components_of
from gateway.protocol.errors import ProtocolError
from gateway.session import Send, Session
from gateway.state.records import restore

if TYPE_CHECKING:
    from gateway.catalog import Catalog
    from gateway.config import GatewayConfig, RelayLimits, ServerRequestLimits
    from gateway.context import CallContext, LocalHandler, Principal
    from gateway.filters import Filter
    from gateway.listeners import Listeners
    from gateway.mrtr import ParkedCalls
    from gateway.protocol.request_state import RequestStateCodec
    from gateway.state import StateStore
    from gateway.stateless import StatelessSession

__all__ = ["EndpointHost", "Endpoints", "EndpointIdentity", "GatewayPort"]

log = logging.getLogger("gateway.endpoints")



@dataclass(frozen=True, slots=True)
class EndpointIdentity:
    name: str
    version: str
    instructions: str | None
    title: str | None


class GatewayPort(Protocol):
    """What an endpoint needs of the running gateway (:class:`gateway.app.Gateway`)."""

    @property
    def config(self) -> GatewayConfig: ...
    @property
    def dispatcher(self) -> Dispatcher: ...
    @property
    def filters(self) -> Sequence[Filter]: ...
    @property
    def listeners(self) -> Listeners: ...
    @property
    def request_timeout_s(self) -> float: ...
    @property
    def server_request_limits(self) -> ServerRequestLimits: ...
    @property
    def relay_limits(self) -> RelayLimits: ...
    @property
    def accepting(self) -> bool: ...
    @property
    def state(self) -> StateStore: ...
    @property
    def parked(self) -> ParkedCalls: ...
    @property
    def request_states(self) -> RequestStateCodec: ...
    @property
    def replica(self) -> str | None: ...

    async def dispatch(self, session: Any, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: LocalHandler | None = None,
                       via: Dispatcher | None = None, *, authorization: str | None = None) -> dict[str, Any]: ...
    async def session_closed(self, session: Session) -> None: ...
    def client_roots_changed(self, session: Session) -> None: ...
    def add_session(self, session: Session) -> None: ...
    def session_record(self, session: Session) -> dict[str, Any]: ...
    async def resume_elsewhere(self, replica: str, message: dict[str, Any], session: StatelessSession
                               ) -> dict[str, Any]: ...
    def knows(self, method: str) -> bool: ...
    def modern_method(self, method: str) -> LocalHandler | None: ...
    def list_changed_deliveries(self, method: str, host: Any) -> list[Coroutine[Any, Any, None]]: ...


class EndpointHost:
    """The gateway as one endpoint serves it (see the module doc)."""

    def __init__(self, gateway: GatewayPort, config: EndpointConfig, catalog: Catalog) -> None:
        self.gateway = gateway
        self.config = config
        self.name = config.name
        self.view = EndpointView(config, catalog)
        self.search = EndpointSearch(self.view, gateway)
        self.gone = False  # the endpoint left the config: no new sessions
        self._dispatcher: Dispatcher | None = None
        self._built_for: object = None

    def configure(self, config: EndpointConfig) -> None:
        self.config = self.view.config = config

    # -- the dispatcher: the gateway's chain over this endpoint's view ---------------------------
    @property
    def dispatcher(self) -> Dispatcher:
        main = self.gateway.dispatcher
        if self._dispatcher is None or self._built_for is not main:
            # Listings differ between callers when access rules hide things; and a listing of an
            # endpoint with principals is not for everyone either: then they are private.
            cache = dataclasses.replace(main.cache, private_listings=main.cache.private_listings
                                        or bool(self.config.principals))
            d = Dispatcher(self.view, main.subscriptions, main.request_timeout_s, main.filters,
                           server_info=self._server_info(), cache=cache, tasks=main.tasks)
            d.endpoint, d.translate = self.name, self.view.translate
            self._dispatcher, self._built_for = d, main
        return self._dispatcher

    def _server_info(self) -> dict[str, Any]:
        identity = self.identity
        info: dict[str, Any] = {"name": identity.name, "version": identity.version}
        if identity.title:
            info["title"] = identity.title
        return info

    # -- SessionHost ---------------------------------------------------------------------------
    @property
    def identity(self) -> EndpointIdentity:
        gw = self.gateway.config.gateway
        return EndpointIdentity(f"{gw.name}/{self.name}", gw.version, self.config.instructions or gw.instructions,
                                self.config.title)

    @property
    def request_timeout_s(self) -> float:
        return self.gateway.request_timeout_s

    @property
    def server_request_limits(self) -> ServerRequestLimits:
        return self.gateway.server_request_limits

    @property
    def relay_limits(self) -> RelayLimits:
        return self.gateway.relay_limits

    def capabilities(self) -> dict[str, Any]:
        return self.view.capabilities()

    async def dispatch(self, session: Any, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: LocalHandler | None = None,
                       *, authorization: str | None = None) -> dict[str, Any]:
        if self.view.search:
            local = self.search.local_handler(method, params) or local
        return await self.gateway.dispatch(session, request_id, method, params, traceparent, local,
                                           via=self.dispatcher, authorization=authorization)

    async def session_closed(self, session: Session) -> None:
        await self.gateway.session_closed(session)

    def client_roots_changed(self, session: Session) -> None:
        self.gateway.client_roots_changed(session)

    # -- SessionFactory ------------------------------------------------------------------------
    @property
    def accepting(self) -> bool:
        return self.gateway.accepting and not self.gone

    def open_session(self, transport: str, send: Send, principal: Principal) -> Session:
        session = Session(self, transport, send, principal)
        if self.gateway.state.shared:
            session.request_prefix = f"gw.{self.gateway.state.replica}."
        return session

    def add_session(self, session: Session) -> None:
        self.gateway.add_session(session)

    @property
    def state(self) -> StateStore:
        return self.gateway.state

    def session_record(self, session: Session) -> dict[str, Any]:
        return {**self.gateway.session_record(session), "endpoint": self.name}

    def adopt_session(self, transport: str, send: Send, session_id: str, record: dict[str, Any],
                      principal: Principal) -> Session:
        """A session of this endpoint another replica started, rebuilt here from its shared record
        (which names this endpoint: :class:`~gateway.transports.replicas.SharedSessions` checks)."""
        session = self.open_session(transport, send, principal)
        restore(session, session_id, record)
        self.add_session(session)
        return session

    # -- ModernHost ----------------------------------------------------------------------------
    @property
    def parked(self) -> ParkedCalls:
        return self.gateway.parked

    @property
    def request_states(self) -> RequestStateCodec:
        return self.gateway.request_states

    @property
    def replica(self) -> str | None:
        return self.gateway.replica

    async def resume_elsewhere(self, replica: str, message: dict[str, Any], session: StatelessSession
                               ) -> dict[str, Any]:
        return await self.gateway.resume_elsewhere(replica, message, session)

    def knows(self, method: str) -> bool:
        return self.gateway.knows(method)

    def modern_method(self, method: str) -> LocalHandler | None:
        if method == "server/discover":
            return self._discover
        if method == "subscriptions/listen":
            return self._listen
        return self.gateway.modern_method(method)

    async def _discover(self, ctx: CallContext) -> dict[str, Any]:
        result = await self.gateway.modern_method("server/discover")(ctx)  # type: ignore[misc]
        result["capabilities"] = {**self.capabilities(), **{k: v for k, v in result["capabilities"].items()
                                                            if k == "extensions"}}
        identity = self.identity
        if identity.instructions:
            result["instructions"] = identity.instructions
        return result

    async def _listen(self, ctx: CallContext) -> dict[str, Any]:
        """``subscriptions/listen``, its resource URIs narrowed to what this endpoint serves."""
        wanted = ctx.params.get("notifications")
        uris = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        if isinstance(uris, list):
            kept = [u for u in uris if isinstance(u, str) and self._serves_uri(u)]
            params = {**ctx.params, "notifications": {**wanted, "resourceSubscriptions": kept}}  # type: ignore[dict-item]
            ctx = dataclasses.replace(ctx, params=params)
        return await self.gateway.listeners.listen(ctx)

    def _serves_uri(self, uri: str) -> bool:
        try:
            self.view.resource_owner(uri)
        except ProtocolError:
            return False
        return True

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        if self.view.search and name in self.search.tools:
            schema = self.search.tools[name].get("inputSchema")
        else:
            entry = self.view.snapshot("tools").by_key.get(name)
            schema = entry.wire.get("inputSchema") if entry is not None else None
        return schema if isinstance(schema, dict) else None


class Endpoints:
    """The endpoints of one gateway, by name (see the module doc)."""

    def __init__(self, gateway: GatewayPort, catalog: Catalog) -> None:
        self.gateway = gateway
        self.catalog = catalog
        self.hosts: dict[str, EndpointHost] = {}
        self._dirty = True  # configured since the last rebuild
        # Search endpoints index their tools in the background after each rebuild, once serving
        # (not for `list` / `validate --deep`, which never search).
        self.warming = False

    def get(self, name: str) -> EndpointHost | None:
        host = self.hosts.get(name)
        return None if host is None or host.gone else host

    def configure(self, configs: tuple[EndpointConfig, ...]) -> None:
        """Apply the config's ``endpoints:`` (at start and on reload); call :meth:`rebuild` next."""
        self._dirty = True
        wanted = {c.name: c for c in configs}
        for name, host in self.hosts.items():
            host.gone = name not in wanted
        for name, cfg in wanted.items():
            known = self.hosts.get(name)
            if known is None:
                self.hosts[name] = EndpointHost(self.gateway, cfg, self.catalog)
            else:
                known.configure(cfg)

    def rebuild(self, spawn: Callable[[Coroutine[Any, Any, Any]], None], catalog_changed: set[str] | None = None
                ) -> None:
        """Re-select every endpoint from the catalog; ``list_changed`` where a listing changed.
        ``catalog_changed``: the catalog's changed listings (none changed and nothing configured
        since: nothing to do; the views keep serving the same content)."""
        if catalog_changed is not None and not catalog_changed and not self._dirty:
            return
        self._dirty = False
        if not self.hosts:
            return
        components = components_of(self.catalog)  # once for all endpoints
        for host in self.hosts.values():
            if host.gone:
                continue
            changed = host.view.rebuild(components=components)
            if host.view.search and self.warming:
                spawn(host.search.warm())
            for method in sorted({LIST_CHANGED[k] for k in changed}):
                for delivery in self.gateway.list_changed_deliveries(method, host):
                    spawn(delivery)

    def warm(self, spawn: Callable[[Coroutine[Any, Any, Any]], None]) -> None:
        """From now on (the gateway serves), keep search endpoints' indexes warm; start now."""
        self.warming = True
        for host in self.hosts.values():
            if host.view.search and not host.gone:
                spawn(host.search.warm())

    async def close(self) -> None:
        """The gateway stops: search endpoints close their embeddings clients."""
        for host in self.hosts.values():
            await host.search.close()

    def of(self, session: object) -> str:
        """The endpoint a session belongs to ("" for ``/mcp``)."""
        host = getattr(session, "host", None)
        return host.name if isinstance(host, EndpointHost) else ""

    def __iter__(self) -> Any:
        return iter(self.hosts.values())

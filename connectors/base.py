"""The connector contract and the component specs connectors expose.

A connector owns one backend. The gateway constructs it with its validated config (a
:class:`~connectors.config.ConnectorConfig` of its kind), calls :meth:`Connector.start` with a
:class:`ConnectorEvents` sink and an :class:`~connectors.instrumentation.Instrumentation` bound to
its name, reads its components through the ``tools()``/``resources()``/``resource_templates()``/
``prompts()`` accessors (local names; cheap, called on every catalog rebuild: they read the
:class:`Components` value the connector last assigned to ``self.components``) and routes calls
to it.

A connector imports the contract (this module, ``connectors.config``,
``connectors.instrumentation``), the sans-I/O protocol (``gateway.protocol``) and the call
context (``gateway.context``): nothing else of the gateway.

Rules every connector follows:

* Wire data stays as dicts: a spec's ``definition`` is the MCP wire object (``Tool``, ``Resource``,
  ``ResourceTemplate``, ``Prompt``) with the *local* name; the catalog rewrites names only.
  Unknown fields (``_meta``, ``annotations``, ``icons``, ``outputSchema`` ...) pass through.
* Call results are MCP wire result dicts (``CallToolResult``, ``ReadResourceResult``,
  ``GetPromptResult``, ``CompleteResult``).
* A backend failure during a tool run raises :class:`ToolExecutionError` (becomes ``isError``);
  bad arguments raise ``InvalidParams`` (or ``ToolExecutionError`` where a model should retry);
  an unknown name raises ``InvalidParams``/``ResourceNotFound``; a backend that is down raises
  ``BackendUnavailable``. A connector never builds JSON-RPC error objects itself and never knows
  about other connectors.
* Changes are reported through ``events``: the catalog rebuilds and tells every session.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from connectors.config import ConnectorConfig
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from connectors.oauth.port import LOCAL_OAUTH, OAuthPort
from gateway.context import CallContext
from gateway.protocol.errors import InvalidParams, ResourceNotFound

__all__ = [
    "Components",
    "LeftOut",
    "ToolSpec",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "PromptSpec",
    "Health",
    "ConnectorEvents",
    "Connector",
]


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Something the backend offers that the connector does not serve, on purpose: ``kind``
    (``tools``, ``prompts``, ...), the backend's own ``name``, the ``rule`` that left it out
    (``include``, ``exclude``, ``overrides``, ``x-mcp-header``) and the ``reason`` in words."""

    kind: str
    name: str
    rule: str
    reason: str


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool under its local name; ``definition`` is the wire ``Tool`` (name = local name)."""

    name: str
    definition: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A concrete resource; ``uri`` is the connector's own URI, ``definition`` the wire ``Resource``."""

    uri: str
    name: str
    definition: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResourceTemplateSpec:
    """A resource template; ``definition`` is the wire ``ResourceTemplate``."""

    uri_template: str
    name: str
    definition: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """A prompt under its local name; ``definition`` is the wire ``Prompt``."""

    name: str
    definition: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Components:
    """Everything a connector serves right now, under local names. Replaced as a whole (or with
    :func:`dataclasses.replace`) when something changes, so a catalog rebuild reads a consistent set."""

    tools: tuple[ToolSpec, ...] = ()
    resources: tuple[ResourceSpec, ...] = ()
    resource_templates: tuple[ResourceTemplateSpec, ...] = ()
    prompts: tuple[PromptSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Health:
    """A connector's health, as shown by /readyz and the ``connector_up`` metric."""

    up: bool
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ConnectorEvents(Protocol):
    """How a connector tells the gateway that something happened. All methods are cheap and
    non-blocking except :meth:`client_request`, which awaits the downstream client's answer."""

    def components_changed(self, announced: frozenset[str] = frozenset()) -> None:
        """Tools, resources, templates or prompts changed: the catalog re-reads them and every
        session receives the matching ``notifications/*/list_changed``. ``announced`` (``tools``,
        ``prompts``, ``resources``): listings the backend itself said changed, passed on to the
        gateway's clients even when what the catalog reads back compares equal."""

    def resource_updated(self, uri: str) -> None:
        """The resource with this *local* URI changed: subscribed sessions are notified."""

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """A log message for every session whose log level admits it (``notifications/message``)."""

    def health_changed(self, health: Health) -> None:
        """The connector went up or down (readiness, metrics, reconnect counters)."""


class Connector(abc.ABC):
    """Base class of every connector. Subclasses set ``kind`` (its config model is found through
    :mod:`connectors.registry`) and implement :meth:`start`."""

    kind: ClassVar[str]
    # Where the connector's OAuth grants live and how a person authorises (connectors.oauth.port):
    # the gateway sets it before start on a connector with an ``oauth:`` block.
    oauth_port: OAuthPort = LOCAL_OAUTH

    def __init__(self, config: ConnectorConfig, base_dir: Path = Path(".")) -> None:
        """``base_dir`` is the config file's folder: relative paths in ``config`` resolve there."""
        self.config = config
        self.name: str = config.name
        self.base_dir = Path(base_dir)
        self.events: ConnectorEvents | None = None
        self.instrumentation: Instrumentation = NO_INSTRUMENTATION
        self.components = Components()

    # -- lifecycle ---------------------------------------------------------------------------
    @abc.abstractmethod
    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        """Load, introspect or connect. Raising here fails this connector, not the gateway.
        Implementations begin with ``self.attach(events, instrumentation)``."""

    def attach(self, events: ConnectorEvents, instrumentation: Instrumentation) -> None:
        """Keep what :meth:`start` was given."""
        self.events = events
        self.instrumentation = instrumentation

    async def stop(self) -> None:
        """Release every resource (sessions, pools, processes). Must be idempotent."""

    def health(self) -> Health:
        return Health(True)

    def problems(self) -> tuple[str, ...]:
        """What in this connector's config did not fit the backend it found at start (an override
        for an operation the spec lacks ...): it serves anyway; the gateway logs these and
        ``mcp-gateway validate --deep`` reports them."""
        return ()

    def left_out(self) -> tuple[LeftOut, ...]:
        """What the backend offers that this connector leaves out on purpose, each with its rule
        (the connector logs each when it is first left out; ``mcp-gateway list`` reports them)."""
        return ()

    def capabilities(self) -> set[str]:
        """Which server capabilities this connector may ever serve (even if it has none now):
        a subset of ``{"tools", "resources", "prompts", "completions", "subscribe"}``."""
        caps = set()
        if self.tools():
            caps.add("tools")
        if self.resources() or self.resource_templates():
            caps.add("resources")
        if self.prompts():
            caps.add("prompts")
        return caps

    # -- components (local names) ----------------------------------------------------------
    def tools(self) -> tuple[ToolSpec, ...]:
        return self.components.tools

    def resources(self) -> tuple[ResourceSpec, ...]:
        return self.components.resources

    def resource_templates(self) -> tuple[ResourceTemplateSpec, ...]:
        return self.components.resource_templates

    def prompts(self) -> tuple[PromptSpec, ...]:
        return self.components.prompts

    def owns_uri(self, uri: str) -> bool:
        """Whether a URI that is not in ``resources()`` is still served here (template matches,
        dynamic resources). The catalog asks only when no listed resource has the URI."""
        return False

    # -- calls (local names, CallContext from the dispatcher) -------------------------------
    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        raise InvalidParams(f"Unknown tool: {name}")

    async def read_resource(self, uri: str, ctx: CallContext) -> dict[str, Any]:
        raise ResourceNotFound(uri)

    async def get_prompt(self, name: str, arguments: dict[str, str], ctx: CallContext) -> dict[str, Any]:
        raise InvalidParams(f"Unknown prompt: {name}")

    async def complete(self, ref: dict[str, Any], argument: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """``ref`` is the wire ref with the *local* name or URI; returns a ``CompleteResult``."""
        return {"completion": {"values": [], "hasMore": False}}

    async def subscribe(self, uri: str, ctx: CallContext) -> None:
        """Start watching a local URI; changes are reported through ``events.resource_updated``."""

    async def unsubscribe(self, uri: str, ctx: CallContext | None) -> None:
        """Stop watching (called when no session is subscribed to ``uri`` any more; ``ctx`` is
        None when the last watcher left by closing its session rather than by a request)."""

    async def session_closed(self, session_id: str) -> None:
        """A downstream session ended (per-client upstream sessions are released here)."""

"""Config model of a ``type: mcp`` connector entry (an upstream MCP server).

``transport`` picks the client transport: ``stdio`` needs ``command`` (plus optional ``args``,
``env``, ``cwd``; the child runs in ``cwd`` or else the config file's folder, and a relative
``command`` path resolves against the config file's folder); ``sse`` (legacy HTTP+SSE, 2024-11-05) and ``streamable_http`` need ``url`` (plus
optional static ``headers``, usually ``${ENV}``-interpolated secrets). ``session: shared`` (the
default) multiplexes every downstream session over one upstream session; ``per_client`` opens one
upstream session per downstream session (a 2026-07-28 upstream has no sessions: every forwarded
request declares its caller's own capabilities, whichever the setting). ``shared_calls`` says how a
shared legacy session over stdio or legacy SSE keeps the upstream's requests to the client
attributable: ``queued`` (default) serves one downstream session's calls at a time, ``concurrent``
does not and refuses what it cannot attribute (``session: per_client`` needs neither).

``protocol`` picks the era spoken upstream: ``auto`` (default) probes with ``server/discover`` and
speaks 2026-07-28 to an upstream that supports it, the legacy ``initialize``-based revisions to the
rest (:mod:`connectors.mcp.era`); ``modern`` or ``legacy`` force one. The legacy HTTP+SSE
transport is legacy only. ``probe_timeout_s`` bounds the wait for the probe's answer on stdio: no
answer in that time means a legacy server (over HTTP, where no answer is no verdict, the probe has
``connect_timeout_s``).

Over HTTP (``sse``, ``streamable_http``), ``egress`` is where the connector may connect
(:mod:`connectors.egress`): the host of ``url`` is trusted by name for private addresses (it is
the operator's own word), but link-local and metadata addresses need ``allow_hosts`` and every
other host (the legacy transport's ``endpoint`` event) follows the rules. ``max_response_bytes``
bounds one upstream message; a larger one fails that request only.

What is served of the upstream: ``include`` and ``exclude`` hold shell-style globs per kind —
``tools`` and ``prompts`` on the upstream's names, ``resources`` on URIs and URI templates. An empty
``include`` list serves everything of its kind; ``exclude`` wins over ``include``. ``overrides``,
keyed by the upstream's tool name, rename a tool and replace its title, description or annotations
(:class:`connectors.config.ToolOverride`); a renamed tool is still called upstream by its own name.
Two overrides onto one name are a config error; an override for a tool the upstream lacks is found
at start (``validate --deep`` reports it).

Upstream identity (over HTTP only): ``oauth`` (:class:`connectors.oauth.config.OAuthConfig`: the
service, user or exchange identity, tokens discovered and obtained by the connector) or
``credentials.per_principal`` (personal static keys). Either one replaces a static
``Authorization`` header: both together are a config error, as is either on stdio.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from connectors.config import ConnectorConfig, EgressConfig, Model, ToolOverride, glob_match
from connectors.oauth.config import CredentialsConfig, OAuthConfig, no_static_authorization

__all__ = ["MCPConfig", "UpstreamSelection"]


class UpstreamSelection(Model):
    """Shell-style globs per kind: upstream tool and prompt names, resource URIs and URI templates."""

    tools: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()


class MCPConfig(ConnectorConfig):
    type: Literal["mcp"]
    transport: Literal["stdio", "sse", "streamable_http"] = "stdio"
    # stdio
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    # The child sees only PATH, HOME, locale and proxy variables of the gateway's environment
    # (plus ``env``) unless this is true: the gateway's secrets are not the upstream's business.
    inherit_env: bool = False
    cwd: str | None = None
    # sse / streamable_http
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # session model
    session: Literal["shared", "per_client"] = "shared"
    # A shared legacy session over stdio or legacy SSE, where nothing tells which call an upstream's
    # sampling/elicitation/roots request belongs to: ``queued`` runs one downstream session's calls at
    # a time (connectors/mcp/turns.py), so the request goes to that session; ``concurrent`` runs them
    # together and refuses such a request while several sessions' calls are in flight.
    shared_calls: Literal["queued", "concurrent"] = "queued"
    # protocol era spoken upstream
    protocol: Literal["auto", "modern", "legacy"] = "auto"
    probe_timeout_s: float = Field(5.0, gt=0)
    # connecting and staying connected
    connect_timeout_s: float = Field(20.0, gt=0)
    # How long gateway start-up waits for this upstream; after that it keeps connecting in the
    # background and its components appear when it is up (a slow upstream never stalls the rest).
    startup_wait_s: float = Field(10.0, ge=0)
    ping_interval_s: float = Field(15.0, ge=0)  # 0 disables the health ping
    reconnect_initial_s: float = Field(0.2, gt=0)
    reconnect_max_s: float = Field(30.0, gt=0)
    # Pages followed per listing before giving up on an upstream whose cursors never end.
    max_pages: int = Field(1000, ge=1)
    # Over HTTP: where the connector may connect, and the largest upstream message (one request fails).
    egress: EgressConfig = EgressConfig()
    max_response_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    # what is served downstream, and how its tools are presented
    include: UpstreamSelection = UpstreamSelection()
    exclude: UpstreamSelection = UpstreamSelection()
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)  # by upstream tool name
    # upstream identity (HTTP transports only)
    oauth: OAuthConfig | None = None
    credentials: CredentialsConfig | None = None

    @field_validator("oauth", "credentials")
    @classmethod
    def _identity_over_http(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return value
        if info.data.get("transport", "stdio") == "stdio":
            raise ValueError(f"{info.field_name} is for the sse and streamable_http transports, not stdio "
                             "(a stdio upstream gets its secrets through env)")
        no_static_authorization(str(info.field_name), info.data.get("headers"))
        return value

    def serves(self, kind: str, name: str) -> bool:
        """Whether the upstream's ``kind`` (``tools``, ``prompts``, ``resources``) named ``name``
        is served: included (an empty list includes all) and not excluded."""
        include: tuple[str, ...] = getattr(self.include, kind)
        return (not include or glob_match(name, include)) and not glob_match(name, getattr(self.exclude, kind))

    @model_validator(mode="after")
    def _override_names(self) -> MCPConfig:
        # Statically visible clashes: two overrides onto one name, or a rename onto a tool that
        # this config keeps under its own name. (A clash with a tool only the upstream knows is
        # the catalog's start-up error, naming both.)
        final: dict[str, str] = {}
        for upstream, override in self.overrides.items():
            target = override.name or upstream
            if target in final:
                raise ValueError(f"overrides: {final[target]!r} and {upstream!r} are both served as {target!r}")
            final[target] = upstream
        return self

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPConfig:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("transport stdio needs command")
            if self.url is not None:
                raise ValueError("url is for sse and streamable_http transports, not stdio")
        else:
            if not self.url:
                raise ValueError(f"transport {self.transport} needs url")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError("url must be http:// or https://")
            if self.command is not None or self.args or self.cwd is not None:
                raise ValueError("command, args and cwd are for the stdio transport only")
        if self.transport == "sse" and self.protocol == "modern":
            raise ValueError("protocol modern needs transport stdio or streamable_http: the legacy HTTP+SSE "
                             "transport carries the legacy protocol only")
        return self

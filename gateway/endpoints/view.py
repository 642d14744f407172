"""One endpoint's view of the catalog: its selection as sorted, paginated snapshots.

:class:`EndpointView` is a :class:`~gateway.catalog.Catalog` to the dispatcher (the routes call
``list_page``, ``tool``, ``prompt``, ``resource_owner``, ``owner``), built from the live catalog's
snapshots by :func:`gateway.endpoints.selection.select` on every catalog rebuild; :meth:`rebuild`
returns the listings whose content changed *on this endpoint*, so ``list_changed`` reaches only
endpoints whose selection changed.

Names: a call arrives with the endpoint's name for a tool or prompt; :meth:`translate` (the
dispatcher's hook, run before the context is built) rewrites it to the catalog's public name and
sets the fixed arguments, so the whole filter chain — access rules, rate limits, audit,
telemetry, the response cache — sees the real target exactly as a call on ``/mcp`` would, and a
rename can never step around an access rule. A name the endpoint does not serve is ``Unknown
tool`` (-32602) even when the catalog has it. Listing entries keep the catalog's public name in
``Entry.name``, so the access filter's visibility predicate applies to them unchanged. Cursors
are signed for ``{method}@{endpoint}``: one endpoint's cursor is refused by another and by ``/mcp``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway.catalog import LISTINGS, Catalog, Entry, Snapshot, page_of, template_matches
from gateway.discovery.tools import CALL_TOOL, FIND_TOOLS
from gateway.endpoints.config import RESERVED_TOOLS, EndpointConfig
from gateway.endpoints.selection import Component, Selection, rule_matches, select, with_defaults
from gateway.protocol.errors import InvalidParams, ProtocolError, ResourceNotFound

if TYPE_CHECKING:
    from connectors.base import Connector
    from gateway.context import CallContext

__all__ = ["EndpointView", "components_of"]

log = logging.getLogger("gateway.endpoints")

_KEYS = ("tools", "prompts", "resources", "resourceTemplates")


def components_of(catalog: Catalog) -> dict[str, list[Component]]:
    """The catalog's four listings as :class:`Component` values (tools with their OpenAPI tags)."""
    out: dict[str, list[Component]] = {}
    for key in _KEYS:
        items: list[Component] = []
        for entry in catalog.snapshot(key).entries:
            tags: tuple[str, ...] = ()
            origin = getattr(entry.connector, "tool_origin", None) if key == "tools" else None
            if origin is not None:
                tags = origin(entry.local)[0]
            items.append(Component(entry.key, entry.name, entry.connector.name, entry.wire, tags))
        out[key] = items
    return out


class EndpointView(Catalog):
    """The catalog as one endpoint serves it (see the module doc)."""

    def __init__(self, config: EndpointConfig, catalog: Catalog) -> None:
        super().__init__(catalog.page_size, catalog.codec)
        self.config = config
        self.main = catalog
        self.scope = f"@{config.name}"
        self.selection = Selection({})
        self._sources: dict[str, dict[str, str]] = {"tools": {}, "prompts": {}}  # endpoint name → catalog name
        self._served: dict[str, frozenset[str]] = {"tools": frozenset(), "prompts": frozenset()}  # catalog names

    @property
    def search(self) -> bool:
        return self.config.discovery == "search"

    def rebuild(self, strict: bool = False, components: Mapping[str, list[Component]] | None = None) -> set[str]:
        """Re-select from the live catalog (``components``: its listings as :func:`components_of`
        made them, shared by every endpoint); the listings whose content changed here."""
        self.connectors, self.prefixes = self.main.connectors, self.main.prefixes
        self.page_size = self.main.page_size
        selection = select(self.config, components if components is not None else components_of(self.main))
        for problem in selection.problems:
            if problem.path[0] == "rename":  # at run time only collisions matter (validate said the rest)
                log.error("endpoint %s: %s", self.config.name, problem.message)
        new: dict[str, Snapshot] = {}
        for key in _KEYS:
            by_source = self.main.snapshot(key).by_key
            entries = []
            for item in selection.listings.get(key, ()):
                source = by_source[item.source]
                entries.append(Entry(item.key, source.name, source.connector, source.local, item.wire))
            new[key] = Snapshot.build(entries)
        changed = {k for k in _KEYS if [e.wire for e in new[k].entries] != [e.wire for e in self._snapshots[k].entries]}
        self._snapshots = new
        self.selection = selection
        self._sources = {k: {item.key: item.source for item in selection.listings.get(k, ())} for k in ("tools", "prompts")}
        self._served = {k: frozenset(names.values()) for k, names in self._sources.items()}
        if self.search:  # the listing is find_tools and call_tool: it never changes
            changed.discard("tools")
        return changed

    # -- calls: the endpoint's names → the catalog's ------------------------------------------
    def source(self, listing: str, name: str) -> str | None:
        """The catalog's public name of the endpoint's tool or prompt ``name``, or None."""
        return self._sources[listing].get(name)

    def translate(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The request's params as ``/mcp`` would receive them (the dispatcher's hook)."""
        if method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str):
                return params  # parse_target refuses it
            if self.search and name == "call_tool":
                params = _unwrap_call(params)
                name = params["name"]
            elif self.search and name in RESERVED_TOOLS:
                return params  # find_tools: served by the endpoint itself
            source = self._sources["tools"].get(name)
            if source is None:
                raise InvalidParams(f"Unknown tool: {name}", {"name": name})
            arguments = params.get("arguments")
            if arguments is not None and not isinstance(arguments, Mapping):
                return params  # parse_target refuses it
            fixed = self.config.defaults.get(source)
            return {**params, "name": source, "arguments": with_defaults(arguments or {}, fixed)}
        if method == "prompts/get" or (method == "completion/complete" and _ref_type(params) == "ref/prompt"):
            ref = params.get("ref") if method == "completion/complete" else params
            name = ref.get("name") if isinstance(ref, Mapping) else None
            if not isinstance(name, str):
                return params
            source = self._sources["prompts"].get(name)
            if source is None:
                raise InvalidParams(f"Unknown prompt: {name}", {"name": name})
            if method == "prompts/get":
                return {**params, "name": source}
            return {**params, "ref": {**params["ref"], "name": source}}
        return params

    # -- the Catalog the routes use -----------------------------------------------------------
    def list_page(self, method: str, cursor: object, ctx: CallContext | None = None) -> dict[str, Any]:
        if self.search and method == "tools/list":  # find_tools and call_tool: one page, no cursor issued
            if cursor is not None:
                self.codec.decode(method + self.scope, cursor)
            return {"tools": [FIND_TOOLS, CALL_TOOL]}
        return page_of(self._snapshots[LISTINGS[method][0]], method, cursor, ctx, self.page_size, self.codec,
                       self.scope)

    def tool(self, name: str) -> Entry:
        """The catalog's entry of a tool this endpoint serves, by its catalog name."""
        if name not in self._served["tools"]:
            raise InvalidParams(f"Unknown tool: {name}", {"name": name})
        return self.main.tool(name)

    def prompt(self, name: str) -> Entry:
        if name not in self._served["prompts"]:
            raise InvalidParams(f"Unknown prompt: {name}", {"name": name})
        return self.main.prompt(name)

    def resource_owner(self, uri: str) -> tuple[Connector, str, str]:
        """As the catalog's, for a URI this endpoint serves: listed, matching one of its
        templates, or of a connector a rule selects resources of (dynamic and namespaced URIs)."""
        found = self.main.resource_owner(uri)
        if uri in self._snapshots["resources"].by_key:
            return found
        if any(template_matches(t.key, uri) for t in self._snapshots["resourceTemplates"].entries):
            return found
        component = Component(uri, found[2], found[0].name, {})
        if any(rule.connector is not None and rule_matches(rule, "resource", component) for rule in self.config.select):
            return found
        raise ResourceNotFound(uri)

    def owner(self, method: str, target: str) -> Connector | None:
        try:
            return super().owner(method, target)
        except ProtocolError:
            return None

    def capabilities(self) -> dict[str, Any]:
        """Only what the selection can serve (a search endpoint: tools)."""
        caps = self.main.capabilities()
        kinds: set[str] = set()
        for rule in self.config.select:
            kinds |= rule.kinds()
        keep = {"logging", "tools"} if self.search else {"logging", "completions"} | {
            {"tool": "tools", "resource": "resources", "prompt": "prompts"}[k] for k in kinds}
        if self.search:
            caps["tools"] = {"listChanged": True}
        return {k: v for k, v in caps.items() if k in keep}


def _ref_type(params: dict[str, Any]) -> Any:
    ref = params.get("ref")
    return ref.get("type") if isinstance(ref, Mapping) else None


def _unwrap_call(params: dict[str, Any]) -> dict[str, Any]:
    """``call_tool {name, arguments}`` as the ``tools/call`` of that tool (the caller's ``_meta``
    kept: progress tokens, trace context)."""
    inner = params.get("arguments")
    if not isinstance(inner, Mapping):
        raise InvalidParams("call_tool: arguments must be an object {name, arguments}")
    name = inner.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidParams("call_tool: arguments.name must be the name of a tool (find_tools lists them)")
    if name in RESERVED_TOOLS:
        raise InvalidParams(f"call_tool: {name} is not a tool to call through call_tool")
    arguments = inner.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidParams("call_tool: arguments.arguments must be an object")
    extra = set(inner) - {"name", "arguments"}
    if extra:
        raise InvalidParams(f"call_tool: unexpected argument(s) {', '.join(sorted(extra))}")
    out = {k: v for k, v in params.items() if k != "arguments"}
    out["name"], out["arguments"] = name, dict(arguments)
    return out

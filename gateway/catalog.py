"""The catalog: one namespaced, sorted, paginated view over every connector's components.

Public names are ``{prefix}{local}``, spelled as the connector's ``names`` says (portable by
default) and told apart within one connector by :func:`~gateway.protocol.names.public_names`
(the rule is documented there); resource URIs stay as
the connector wrote them unless two connectors serve the same URI, in which case each is exposed as
``{connector}+{uri}``. On a name collision the first connector in config order keeps the name and
the clash is logged (once, when it appears) and kept in :attr:`Catalog.collisions` (readiness
detail, ``/status``), at start-up as after it: refusing to serve would let one upstream listing a
clashing tool punish every other connector. ``rebuild(strict=True)`` (``gateway.names.on_collision:
error``) raises ConfigError naming both sources instead.

The catalog is rebuilt whenever a connector reports a change; each rebuild produces immutable
:class:`Snapshot` objects that requests read without locks. Listings are keyset-paginated over the
sorted public keys with signed cursors, so a cursor stays valid across rebuilds.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import (
    BackendUnavailable,
    ConfigError,
    InvalidParams,
    ProtocolError,
    ResourceNotFound,
)
from gateway.protocol.names import public_name, public_names

if TYPE_CHECKING:
    from connectors.base import Connector
    from gateway.context import CallContext

__all__ = ["Entry", "Snapshot", "Catalog", "LISTINGS", "template_matches", "page_of", "LIST_CHANGED"]

log = logging.getLogger("gateway.catalog")

# listing method → (result key, visibility kind)
LISTINGS: dict[str, tuple[str, str]] = {
    "tools/list": ("tools", "tool"),
    "resources/list": ("resources", "resource"),
    "resources/templates/list": ("resourceTemplates", "resource_template"),
    "prompts/list": ("prompts", "prompt"),
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One public component: its public key, owner, local key and public wire object."""

    key: str  # public name (tools, prompts) or public URI / URI template (resources, templates)
    name: str  # public name (for resources and templates: the prefixed ``name`` field)
    connector: Connector
    local: str
    wire: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An immutable sorted view of one listing."""

    keys: tuple[str, ...]
    entries: tuple[Entry, ...]
    by_key: dict[str, Entry]

    @classmethod
    def build(cls, entries: Iterable[Entry]) -> Snapshot:
        ordered = sorted(entries, key=lambda e: e.key)
        return cls(tuple(e.key for e in ordered), tuple(ordered), {e.key: e for e in ordered})


# snapshot key → the notification announcing that its listing changed
LIST_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
    "resourceTemplates": "notifications/resources/list_changed",
}
_EMPTY = Snapshot((), (), {})
_TEMPLATE_VAR = re.compile(r"\{[^}]*\}")


def template_matches(template: str, uri: str) -> bool:
    """RFC 6570 level-1 match: literal parts equal, each ``{var}`` matches one or more characters
    (``{+var}``/``{/var*}``-style expressions may also span slashes)."""
    pattern = ""
    pos = 0
    for m in _TEMPLATE_VAR.finditer(template):
        pattern += re.escape(template[pos:m.start()])
        expr = m.group(0)[1:-1]
        pattern += ".+" if expr[:1] in "+#/" or expr.endswith("*") else "[^/]+"
        pos = m.end()
    pattern += re.escape(template[pos:])
    return re.fullmatch(pattern, uri) is not None


def _ui_uri_namespaced(entry: Entry, aliases: dict[str, str]) -> Entry:
    """The tool entry with ``_meta.ui.resourceUri`` renamed to ``{connector}+{uri}`` when that URI
    was namespaced (two connectors serve it), so the UI a tool names is its own connector's."""
    meta = entry.wire.get("_meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("ui"), dict):
        return entry
    ui: dict[str, Any] = meta["ui"]
    public = f"{entry.connector.name}+{ui.get('resourceUri')}"
    if not isinstance(ui.get("resourceUri"), str) or public not in aliases:
        return entry
    wire = {**entry.wire, "_meta": {**meta, "ui": {**ui, "resourceUri": public}}}
    return Entry(entry.key, entry.name, entry.connector, entry.local, wire)


def page_of(snap: Snapshot, method: str, cursor: object, ctx: CallContext | None, page_size: int,
            codec: CursorCodec, scope: str = "") -> dict[str, Any]:
    """One page of ``snap`` for a listing ``method``, after the cursor's key, hiding what
    ``ctx.visible`` refuses. ``scope`` binds cursors to one view (an endpoint's: ``@name``), so a
    cursor of one view is refused by another (-32602)."""
    result_key, kind = LISTINGS[method]
    listing = method + scope
    start = 0
    if cursor is not None:
        last = codec.decode(listing, cursor)
        start = bisect.bisect_right(snap.keys, last)
    visible: Callable[[str, str], bool] | None = ctx.visible if ctx is not None else None
    items: list[dict[str, Any]] = []
    i = start
    n = len(snap.entries)
    while i < n and len(items) < page_size:
        entry = snap.entries[i]
        if visible is None or visible(kind, entry.name):
            items.append(entry.wire)
        i += 1
    result: dict[str, Any] = {result_key: items}
    if i < n and items:
        result["nextCursor"] = codec.encode(listing, snap.keys[i - 1])
    return result


# What a connector that goes down served, remembered by kind: (kind, snapshot key).
_DOWN_KINDS = (("tool", "tools"), ("prompt", "prompts"), ("resource", "resources"), ("template", "resourceTemplates"))


class Catalog:
    """Aggregates connectors; answers listings and resolves public names to connectors."""

    def __init__(self, page_size: int, codec: CursorCodec) -> None:
        self.page_size = page_size
        self.codec = codec
        self.connectors: dict[str, Connector] = {}
        self.prefixes: dict[str, str] = {}
        self._snapshots: dict[str, Snapshot] = {key: _EMPTY for key, _ in LISTINGS.values()}
        self._uri_aliases: dict[str, str] = {}  # public URI → (connector's) local URI when namespaced
        # (kind, public name or URI or URI template) → its connector, while that connector is down
        self._down: dict[tuple[str, str], Connector] = {}
        # The collisions of the last rebuild, one sentence each: what was left out, and why.
        self.collisions: tuple[str, ...] = ()

    # -- building ----------------------------------------------------------------------------
    def set_connectors(self, connectors: Sequence[tuple[Connector, str]]) -> None:
        """(connector, public prefix) in config order; call :meth:`rebuild` afterwards."""
        self.connectors = {c.name: c for c, _ in connectors}
        self.prefixes = {c.name: prefix for c, prefix in connectors}

    def rebuild(self, strict: bool = False) -> set[str]:
        """Re-read every connector; returns the listings whose content changed.

        ``strict``: a name collision raises ConfigError naming both sources (nothing changes);
        otherwise the first connector keeps the name and the collision is in :attr:`collisions`.
        """
        collisions: list[str] = []
        tools: dict[str, Entry] = {}
        prompts: dict[str, Entry] = {}
        resources: list[tuple[Connector, Any]] = []
        templates: list[tuple[Connector, Any]] = []
        down: dict[tuple[str, str], Connector] = {}
        for connector in self.connectors.values():
            prefix = self.prefixes[connector.name]
            if not connector.health().up:
                # A connector that is down contributes nothing until it recovers; calls to what
                # it served (tools, prompts, resources, templates) fail fast naming it
                # (BackendUnavailable) instead of "unknown tool" or "resource not found".
                for kind, key in _DOWN_KINDS:
                    down.update({(kind, old.key): connector for old in self._snapshots[key].entries
                                 if old.connector is connector})
                down.update({k: c for k, c in self._down.items() if c is connector})
                continue
            portable = connector.config.portable_names
            specs = connector.tools()
            for spec, public in zip(specs, public_names(prefix, [s.name for s in specs], portable), strict=True):
                self._add(tools, "tool", public, connector, spec.name, spec.definition, strict, collisions)
            prompt_specs = connector.prompts()
            for prompt, public in zip(prompt_specs, public_names(prefix, [p.name for p in prompt_specs], portable),
                                      strict=True):
                self._add(prompts, "prompt", public, connector, prompt.name, prompt.definition, strict, collisions)
            resources.extend((connector, spec) for spec in connector.resources())
            templates.extend((connector, spec) for spec in connector.resource_templates())

        res_entries, aliases = self._namespace_uris(resources, "uri", "uri")
        if aliases:  # MCP Apps: a tool's _meta.ui.resourceUri follows its resource's namespacing
            tools = {key: _ui_uri_namespaced(entry, aliases) for key, entry in tools.items()}
        tpl_entries, tpl_aliases = self._namespace_uris(templates, "uri_template", "uriTemplate")
        new = {
            "tools": Snapshot.build(tools.values()),
            "prompts": Snapshot.build(prompts.values()),
            "resources": Snapshot.build(res_entries),
            "resourceTemplates": Snapshot.build(tpl_entries),
        }
        changed = {k for k, snap in new.items() if [e.wire for e in snap.entries] != [e.wire for e in self._snapshots[k].entries]}
        self._snapshots = new
        self._uri_aliases = aliases | tpl_aliases
        self._down = down
        for message in collisions:
            if message not in self.collisions:  # said once when it appears, not on every rebuild
                log.error("%s", message)
        self.collisions = tuple(collisions)
        return changed

    def _add(self, into: dict[str, Entry], kind: str, public: str, connector: Connector, local: str,
             definition: dict[str, Any], strict: bool, collisions: list[str]) -> None:
        other = into.get(public)
        if other is not None:
            message = (f"{kind} name collision: {public!r} comes from connector {other.connector.name!r} "
                       f"({other.local!r}) and from connector {connector.name!r} ({local!r}); set a prefix")
            if strict:
                raise ConfigError(message, f"connectors[{connector.name}].prefix")
            collisions.append(f"{message}; serving the one from {other.connector.name!r}")
            return
        wire = dict(definition)
        wire["name"] = public
        into[public] = Entry(public, public, connector, local, wire)

    def _namespace_uris(self, specs: list[tuple[Connector, Any]], attr: str, wire_key: str
                        ) -> tuple[list[Entry], dict[str, str]]:
        owners: dict[str, set[str]] = {}
        for connector, spec in specs:
            owners.setdefault(getattr(spec, attr), set()).add(connector.name)
        entries: list[Entry] = []
        aliases: dict[str, str] = {}
        seen: set[str] = set()
        for connector, spec in specs:
            local = getattr(spec, attr)
            public = local if len(owners[local]) == 1 else f"{connector.name}+{local}"
            if public in seen:
                continue  # the same connector listed the same URI twice
            seen.add(public)
            if public != local:
                aliases[public] = local
            wire = dict(spec.definition)
            wire[wire_key] = public
            name = public_name(self.prefixes[connector.name], spec.name, connector.config.portable_names)
            wire["name"] = name
            entries.append(Entry(public, name, connector, local, wire))
        return entries, aliases

    # -- reading ------------------------------------------------------------------------------
    def snapshot(self, key: str) -> Snapshot:
        return self._snapshots[key]

    def counts(self) -> dict[str, int]:
        return {k: len(s.keys) for k, s in self._snapshots.items()}

    def list_page(self, method: str, cursor: object, ctx: CallContext | None = None) -> dict[str, Any]:
        """One page of a listing, after the cursor's key, hiding what ``ctx.visible`` refuses."""
        return page_of(self._snapshots[LISTINGS[method][0]], method, cursor, ctx, self.page_size, self.codec)

    def _unavailable(self, kind: str, name: str) -> BackendUnavailable | None:
        connector = self._down.get((kind, name))
        if connector is None:
            return None
        return BackendUnavailable.connector_down(connector.name, connector.health().detail, f"{kind} {name}")

    def _unavailable_uri(self, uri: str) -> BackendUnavailable | None:
        """A URI that a connector now down served: listed, namespaced ``{connector}+``, or
        matching one of its templates."""
        found = self._unavailable("resource", uri)
        if found is not None:
            return found
        head, sep, _rest = uri.partition("+")
        if sep and head in self.connectors and not self.connectors[head].health().up:
            connector = self.connectors[head]
            return BackendUnavailable.connector_down(connector.name, connector.health().detail, f"resource {uri}")
        for (kind, key), connector in self._down.items():
            if kind == "template" and template_matches(key, uri):
                return BackendUnavailable.connector_down(connector.name, connector.health().detail,
                                                         f"resource {uri}")
        return None

    def tool(self, name: str) -> Entry:
        entry = self._snapshots["tools"].by_key.get(name)
        if entry is None:
            raise self._unavailable("tool", name) or InvalidParams(f"Unknown tool: {name}", {"name": name})
        return entry

    def prompt(self, name: str) -> Entry:
        entry = self._snapshots["prompts"].by_key.get(name)
        if entry is None:
            raise self._unavailable("prompt", name) or InvalidParams(f"Unknown prompt: {name}", {"name": name})
        return entry

    def resource_owner(self, uri: str) -> tuple[Connector, str, str]:
        """(connector, local URI, public name) for a public URI; ResourceNotFound otherwise.

        Order: a listed resource, a namespaced ``{connector}+`` URI, a template match, then a
        connector that claims the URI through ``owns_uri`` (dynamic resources).
        """
        entry = self._snapshots["resources"].by_key.get(uri)
        if entry is not None:
            return entry.connector, entry.local, entry.name
        head, sep, rest = uri.partition("+")
        if sep and head in self.connectors and self.connectors[head].health().up:
            connector = self.connectors[head]
            return connector, rest, self._template_name(connector, rest) or uri
        for tpl in self._snapshots["resourceTemplates"].entries:
            if template_matches(tpl.key, uri):
                local = uri if tpl.key == tpl.local else uri.partition("+")[2]
                return tpl.connector, local, tpl.name
        for connector in self.connectors.values():
            if connector.health().up and connector.owns_uri(uri):
                return connector, uri, self._template_name(connector, uri) or uri
        raise self._unavailable_uri(uri) or ResourceNotFound(uri)

    def owner(self, method: str, target: str) -> Connector | None:
        """The connector a call's public target resolves to now, or None (a listing, an unknown
        target: the catalog endpoint refuses those later with the right error)."""
        if not target:
            return None
        try:
            if method == "tools/call":
                return self.tool(target).connector
            if method == "prompts/get":
                return self.prompt(target).connector
            if method.startswith("resources/"):
                return self.resource_owner(target)[0]
        except ProtocolError:
            return None
        return None

    def _template_name(self, connector: Connector, local_uri: str) -> str | None:
        for tpl in self._snapshots["resourceTemplates"].entries:
            if tpl.connector is connector and template_matches(tpl.local, local_uri):
                return tpl.name
        return None

    def public_uri(self, connector_name: str, local_uri: str) -> str:
        """The URI clients know for a connector's local URI (for resources/updated)."""
        namespaced = f"{connector_name}+{local_uri}"
        if namespaced in self._uri_aliases:
            return namespaced
        return local_uri

    def access_name(self, kind: str, target: str) -> str:
        """The public name access rules match for a call's target (a URI for resource reads)."""
        if kind in ("tool", "prompt"):
            return target
        try:
            return self.resource_owner(target)[2]
        except (ResourceNotFound, BackendUnavailable):
            return target

    def capabilities(self) -> dict[str, Any]:
        """Server capabilities from what the connectors can serve (not only what they hold now)."""
        kinds: set[str] = set()
        for connector in self.connectors.values():
            kinds |= connector.capabilities()
        caps: dict[str, Any] = {"logging": {}}
        if "tools" in kinds:
            caps["tools"] = {"listChanged": True}
        if "resources" in kinds or "subscribe" in kinds:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if "prompts" in kinds:
            caps["prompts"] = {"listChanged": True}
        if "completions" in kinds or "prompts" in kinds or "resources" in kinds:
            caps["completions"] = {}
        return caps

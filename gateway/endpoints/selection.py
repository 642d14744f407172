"""What an endpoint serves, from the catalog's components: pure, tested with plain values.

:func:`select` takes the catalog's four listings as :class:`Component` values and an
:class:`~gateway.endpoints.config.EndpointConfig`, and returns a :class:`Selection`: per listing,
the endpoint's items sorted by their key on the endpoint (the renamed name for tools and prompts,
the URI for resources), each knowing the catalog key it stands for and carrying its wire object
as the endpoint shows it (renamed, described, fixed arguments removed from the schema). It also
reports what ``validate`` refuses: a rule that matches nothing, and a rename that collides with
another served name or names nothing served. At run time a collision keeps the component that
already had the name (the renamed one is left out) rather than refusing to serve.

Fixed arguments (``defaults``): :func:`fixed_schema` removes them from ``properties`` and
``required`` of the listed schema, and :func:`with_defaults` sets them on the call, over whatever
the caller sent, so a caller can neither see nor change them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from gateway.endpoints.config import EndpointConfig, SelectRule

__all__ = ["Component", "Item", "Selection", "Problem", "LISTING_KIND", "select", "rule_matches",
           "fixed_schema", "with_defaults", "endpoint_tool"]

# catalog listing key → the kind a rule selects it as
LISTING_KIND = {"tools": "tool", "prompts": "prompt", "resources": "resource", "resourceTemplates": "resource"}
_RENAMED = ("tools", "prompts")  # rename applies to names; URIs stay as the catalog has them


@dataclass(frozen=True, slots=True)
class Component:
    """One catalog component, as selection sees it."""

    key: str  # the catalog's public key: name, or URI / URI template
    name: str  # the public name (resources: their name field)
    connector: str
    wire: dict[str, Any]
    tags: tuple[str, ...] = ()  # OpenAPI tags of the operation a tool was made from


@dataclass(frozen=True, slots=True)
class Item:
    """One component as an endpoint serves it."""

    key: str  # the key on the endpoint (renamed name, or the URI)
    source: str  # the catalog key it stands for
    wire: dict[str, Any]  # the catalog's own object when the endpoint changes nothing of it


@dataclass(frozen=True, slots=True)
class Problem:
    """Something ``validate`` refuses; ``path`` is within the endpoint's entry (``("select", 1)``)."""

    path: tuple[str | int, ...]
    message: str


@dataclass(frozen=True, slots=True)
class Selection:
    listings: dict[str, tuple[Item, ...]]
    problems: tuple[Problem, ...] = ()
    # catalog key → endpoint key, for tools and prompts (the names calls arrive with, reversed)
    names: dict[str, dict[str, str]] = field(default_factory=dict)


@lru_cache(maxsize=1024)
def _globs(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


class _Rule:
    """A rule compiled once per :func:`select` (its kinds, glob regexes, tag set)."""

    __slots__ = ("kinds", "connector", "globs", "tags", "annotations")

    def __init__(self, rule: SelectRule) -> None:
        self.kinds = rule.kinds()
        self.connector = rule.connector
        self.globs = {kind: (_globs(g) if g else None) if g is not None else True
                      for kind, g in (("tool", rule.tools), ("resource", rule.resources), ("prompt", rule.prompts))}
        self.tags = frozenset(rule.tags)
        self.annotations = tuple(rule.annotations.items())

    def matches(self, kind: str, component: Component) -> bool:
        if kind not in self.kinds or (self.connector is not None and self.connector != component.connector):
            return False
        globs = self.globs[kind]
        if globs is not True and (globs is None or (globs.match(component.key) is None  # type: ignore[union-attr]
                                                    and globs.match(component.name) is None)):  # type: ignore[union-attr]
            return False
        if self.tags and self.tags.isdisjoint(component.tags):
            return False
        if self.annotations:
            annotations = component.wire.get("annotations")
            if not isinstance(annotations, Mapping) or any(annotations.get(k) != v for k, v in self.annotations):
                return False
        return True


def rule_matches(rule: SelectRule, kind: str, component: Component) -> bool:
    """Whether ``rule`` selects ``component`` of ``kind`` (tool, resource, prompt)."""
    return _Rule(rule).matches(kind, component)


def fixed_schema(schema: Any, fixed: Iterable[str]) -> Any:
    """``inputSchema`` without the fixed arguments (a copy; the catalog's stays untouched)."""
    fixed = set(fixed)
    if not fixed or not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    props = schema.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {k: v for k, v in props.items() if k not in fixed}
    required = schema.get("required")
    if isinstance(required, list):
        out["required"] = [k for k in required if k not in fixed]
        if not out["required"]:
            del out["required"]
    return out


def with_defaults(arguments: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    """The call's arguments with the fixed ones set (they win over what the caller sent)."""
    if not defaults:
        return dict(arguments)
    return {**arguments, **defaults}


def endpoint_tool(wire: Mapping[str, Any], name: str, description: str | None,
                  defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's wire object as an endpoint lists it."""
    out = dict(wire)
    out["name"] = name
    if description is not None:
        out["description"] = description
    if defaults:
        out["inputSchema"] = fixed_schema(wire.get("inputSchema"), defaults)
    return out


def select(cfg: EndpointConfig, catalog: Mapping[str, Sequence[Component]]) -> Selection:
    """The endpoint's listings from the catalog's (``tools``, ``prompts``, ``resources``,
    ``resourceTemplates``), with the problems :mod:`gateway.checks` reports."""
    matched = [False] * len(cfg.select)
    rules = [_Rule(rule) for rule in cfg.select]
    chosen: dict[str, list[Component]] = {}
    for listing, components in catalog.items():
        kind = LISTING_KIND[listing]
        picked: list[Component] = []
        live = [(i, r) for i, r in enumerate(rules) if kind in r.kinds]
        for component in components:
            hit = False
            for i, rule in live:
                if (not hit or not matched[i]) and rule.matches(kind, component):
                    matched[i] = hit = True
            if hit:
                picked.append(component)
        chosen[listing] = picked
    problems = [Problem(("select", i), "this rule matches nothing the catalog serves")
                for i, hit in enumerate(matched) if not hit]

    listings: dict[str, tuple[Item, ...]] = {}
    names: dict[str, dict[str, str]] = {}
    served: set[str] = set()
    collided: set[str] = set()
    for listing, picked in chosen.items():
        items: dict[str, Item] = {}
        renamed = listing in _RENAMED
        own = {c.key for c in picked}
        # Components keeping their name first: a rename never takes a name already served.
        for component in sorted(picked, key=lambda c: (renamed and c.key in cfg.rename, c.key)):
            key = cfg.rename.get(component.key, component.key) if renamed else component.key
            if key in items or (key != component.key and key in own and key not in cfg.rename):
                problems.append(Problem(("rename", component.key),
                                        f"rename {component.key!r} → {key!r} collides with the {LISTING_KIND[listing]} "
                                        f"{items[key].source if key in items else key!r} this endpoint also serves"))
                collided.add(component.key)
                continue
            wire = component.wire
            if listing == "tools":
                description, fixed = cfg.description.get(component.key), cfg.defaults.get(component.key)
                if key != component.key or description is not None or fixed:
                    wire = endpoint_tool(wire, key, description, fixed)
            elif listing == "prompts" and (key != component.key or component.key in cfg.description):
                wire = {**wire, "name": key}
                if component.key in cfg.description:
                    wire["description"] = cfg.description[component.key]
            items[key] = Item(key, component.key, wire)
            served.add(component.key)
        listings[listing] = tuple(items[k] for k in sorted(items))
        if renamed:
            names[listing] = {item.source: item.key for item in listings[listing]}
    for section in ("rename", "description", "defaults"):
        for name in getattr(cfg, section):
            if name not in served and name not in collided:
                problems.append(Problem((section, name), f"{name!r} is not served by this endpoint"))
    return Selection(listings, tuple(problems), names)

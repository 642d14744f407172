"""Tool schemas within a size budget (pure).

Why: a schema's ``$defs`` hold the transitive closure of what it references, and in some real
specs every response reaches nearly every component (Stripe's: a median ``outputSchema`` of
673 kB, 279 of 468 tools over 64 kB, a ``tools/list`` page of 9.8 MB). A client pays for that on
every listing and every ``find_tools`` answer, and a model reads it into its context.

:func:`fit` returns a schema whose serialised size is at most ``budget`` bytes by **loosening** it,
never by changing what it accepts to something narrower, so every value valid before is still
valid (arguments are still checked against the spec itself when ``validate_requests`` is on, and
a response still conforms to a loosened ``outputSchema``):

1. **Fewer ``$defs``:** every definition has a depth, the fewest ``$ref`` hops from the schema's
   own body. Definitions deeper than ``d`` are dropped, for the largest ``d`` that fits, and each
   ``$ref`` to a dropped one becomes ``{}`` (any value); its siblings stay.
2. **Shallower inline schemas** (a spec that inlines everything has no ``$defs`` to drop): with
   no ``$defs`` left, subschemas nested deeper than ``level`` keep only ``type``, ``format``,
   ``title`` and ``description``, for the largest ``level`` from 6 down to 1 that fits.
3. Otherwise ``None``: the caller decides (an ``outputSchema`` is left out, an ``inputSchema``
   keeps its level-1 form).

Sizes are of ``json.dumps`` with default separators, so the number is what a reader would count.
Definitions are measured once per key (:class:`Measures`, one per spec, as the converted
definitions themselves are shared by its tools) and kept ones are shared, not copied, except those
that referred to a dropped one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Measures", "fit"]

_PREFIX = "#/$defs/"
_MAPS = ("properties", "patternProperties", "dependentSchemas")
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
        "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_KEPT_AT_CUT = ("type", "format", "title", "description")


@dataclass(slots=True)
class Measures:
    """What :func:`fit` learns of a spec's definitions, by key: own size and direct references.
    One per spec (the converted definitions are shared by its tools, so are these)."""

    sizes: dict[str, int] = field(default_factory=dict)
    refs: dict[str, frozenset[str]] = field(default_factory=dict)
    # (key, the direct references dropped) -> the definition without them: tools of one spec
    # tend to drop the same ones, and a rewritten definition is then shared like the others.
    cut: dict[tuple[str, frozenset[str]], Any] = field(default_factory=dict)

    def without(self, key: str, value: Any, dropped: set[str]) -> Any:
        gone = self.refs.get(key, frozenset()) & dropped
        if not gone:
            return value
        if (key, gone) not in self.cut:
            self.cut[key, gone] = _without(value, set(gone))
        return self.cut[key, gone]

    def size(self, key: str, value: Any) -> int:
        if key not in self.sizes:
            self.sizes[key] = _size(value) + len(key) + 4
        return self.sizes[key]

    def direct(self, key: str, value: Any) -> frozenset[str]:
        if key not in self.refs:
            found: set[str] = set()
            _refs(value, found)
            self.refs[key] = frozenset(found)
        return self.refs[key]


def _size(value: Any) -> int:
    return len(json.dumps(value))


def _refs(node: Any, out: set[str]) -> None:
    """The ``$defs`` keys ``node`` refers to directly."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_PREFIX):
            out.add(ref[len(_PREFIX):])
        for key, value in node.items():
            if key != "$defs":
                _refs(value, out)
    elif isinstance(node, list):
        for item in node:
            _refs(item, out)


def _depths(body: Any, defs: dict[str, Any], measures: Measures) -> dict[str, int]:
    """Each definition's fewest ``$ref`` hops from ``body`` (breadth first)."""
    first: set[str] = set()
    _refs(body, first)
    depth = {key: 1 for key in first if key in defs}
    frontier = list(depth)
    while frontier:
        nxt: list[str] = []
        for key in frontier:
            for sub in measures.direct(key, defs[key]):
                if sub in defs and sub not in depth:
                    depth[sub] = depth[key] + 1
                    nxt.append(sub)
        frontier = nxt
    return depth


def _without(node: Any, dropped: set[str]) -> Any:
    """``node`` with every ``$ref`` to a dropped definition removed (a copy only where one is)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        changed = isinstance(ref, str) and ref.startswith(_PREFIX) and ref[len(_PREFIX):] in dropped
        out: dict[str, Any] = {}
        for key, value in node.items():
            if changed and key == "$ref":
                continue
            if key == "discriminator" and isinstance(value, dict) and isinstance(value.get("mapping"), dict):
                mapping = {k: v for k, v in value["mapping"].items()
                           if not (isinstance(v, str) and v.startswith(_PREFIX) and v[len(_PREFIX):] in dropped)}
                new: Any = {**value, "mapping": mapping} if len(mapping) != len(value["mapping"]) else value
            else:
                new = _without(value, dropped)
            changed = changed or new is not value
            out[key] = new
        return out if changed else node
    if isinstance(node, list):
        items = [_without(item, dropped) for item in node]
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    return node


def _shallow(node: Any, level: int) -> Any:
    """``node`` with subschemas below ``level`` cut to their ``_KEPT_AT_CUT`` keywords."""
    if not isinstance(node, dict):
        return node
    if level <= 0:
        return {k: node[k] for k in _KEPT_AT_CUT if k in node}
    out = dict(node)
    for key in _MAPS:
        if isinstance(node.get(key), dict):
            out[key] = {name: _shallow(sub, level - 1) for name, sub in node[key].items()}
    for key in _ONE:
        if isinstance(node.get(key), dict):
            out[key] = _shallow(node[key], level - 1)
    for key in _LISTS:
        if isinstance(node.get(key), list):
            out[key] = [_shallow(sub, level - 1) for sub in node[key]]
    return out


def fit(schema: dict[str, Any], budget: int, measures: Measures) -> dict[str, Any] | None:
    """``schema`` itself if it fits ``budget`` bytes, else the least loosened form that does (see
    the module docstring), or ``None`` when even one level of properties does not fit.
    ``measures`` caches what is learnt of each definition; pass one per spec."""
    defs: dict[str, Any] = schema.get("$defs") or {}
    body = {k: v for k, v in schema.items() if k != "$defs"}
    body_size = _size(body)
    if body_size + sum(measures.size(key, value) for key, value in defs.items()) <= budget:
        return schema
    depth = _depths(body, defs, measures)
    deepest = max(depth.values(), default=0)
    upto = [0] * (deepest + 1)  # upto[d]: the size of every definition at most d hops deep
    for key, hops in depth.items():
        upto[hops] += measures.sizes[key]
    for d in range(1, deepest + 1):
        upto[d] += upto[d - 1]
    for d in range(deepest - 1, 0, -1):
        if body_size + upto[d] + 16 > budget:
            continue
        kept = {key for key, hops in depth.items() if hops <= d}
        dropped = set(defs) - kept
        out = dict(_without(body, dropped))  # a copy: body itself is tried again below
        out["$defs"] = {key: measures.without(key, defs[key], dropped) for key in sorted(kept)}
        if _size(out) <= budget:
            return out
    bare: dict[str, Any] = _without(body, set(defs))
    if _size(bare) <= budget:
        return bare
    for level in range(6, 0, -1):
        cut: dict[str, Any] = _shallow(bare, level)
        if _size(cut) <= budget:
            return cut
    return None

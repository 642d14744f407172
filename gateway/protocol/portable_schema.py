"""A JSON Schema whose every ``pattern`` every client can compile (pure).

A backend's schema (an upstream MCP server's ``inputSchema``/``outputSchema``) may carry patterns
written for another engine (``\\p{L}``, ``\\x{60}`` ...): a client that compiles them with
JavaScript's ``u`` flag or Python's ``re`` fails, sometimes on the whole tool list.
:func:`portable_schema` returns the schema with each ``pattern`` and ``patternProperties`` key
rewritten by :func:`gateway.protocol.patterns.portable_pattern` where the meaning is kept, and left
out where it cannot be, the rule then written into the description of the schema that had it. The
backend still checks its own rule: the gateway passes the caller's arguments on unchanged.

Only schema positions are walked (``properties``, ``items``, ``allOf`` ...): a ``pattern`` key
inside ``default``, ``const``, ``enum`` or ``examples`` is data and left alone. A schema with
nothing to change is returned as the same object (no copy on the common path).
"""

from __future__ import annotations

from typing import Any

from .patterns import portable_pattern

__all__ = ["portable_schema", "UNPORTABLE_NOTE"]

UNPORTABLE_NOTE = "Left out of this schema, as clients could not compile the pattern: "
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_ONE = frozenset({"additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                         "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAX_DEPTH = 64  # deeper than any real schema; past it the rest is served as it came


def portable_schema(schema: Any, checked_by: str = "the server") -> Any:
    """``schema`` with portable patterns; ``checked_by`` names who still applies a dropped rule."""
    return _walk(schema, checked_by, 0)


def _walk(schema: Any, checked_by: str, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return schema
    out: dict[str, Any] | None = None  # copied on the first change
    unportable: list[str] = []

    def put(key: str, value: Any) -> None:
        nonlocal out
        if out is None:
            out = dict(schema)
        out[key] = value

    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            portable = portable_pattern(value)
            if portable.pattern is None:
                unportable.append(f"the value must match {value} ({portable.reason})")
                put(key, None)
            elif portable.changed:
                put(key, portable.pattern)
        elif key == "patternProperties" and isinstance(value, dict):
            props: dict[str, Any] = {}
            for pk, pv in value.items():
                portable = portable_pattern(pk)
                if portable.pattern is None:
                    unportable.append(f"properties named like {pk} have a schema of their own ({portable.reason})")
                    continue
                props[portable.pattern] = _walk(pv, checked_by, depth + 1)
            if props != value or any(a is not b for a, b in zip(props.values(), value.values(), strict=False)):
                put(key, props)
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            walked = {k: _walk(v, checked_by, depth + 1) for k, v in value.items()}
            if any(walked[k] is not v for k, v in value.items()):
                put(key, walked)
        elif (key in _SCHEMA_ONE or key == "items") and isinstance(value, dict):
            new = _walk(value, checked_by, depth + 1)
            if new is not value:
                put(key, new)
        elif (key in _SCHEMA_LISTS or key == "items") and isinstance(value, list):
            items = [_walk(v, checked_by, depth + 1) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                put(key, items)
    if out is None:
        return schema
    if out.get("pattern", "") is None:
        del out["pattern"]
    if unportable:
        note = f"{UNPORTABLE_NOTE}{'; '.join(unportable)}. {checked_by[0].upper()}{checked_by[1:]} checks it."
        desc = out.get("description")
        out["description"] = f"{desc}\n\n{note}" if isinstance(desc, str) and desc else note
    return out

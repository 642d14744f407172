"""Hypothesis strategies for the JSON Schema 2020-12 subset tool inputSchemas use.

(hypothesis-jsonschema does not run on the Hypothesis release pinned here, so this is a small
builder of our own.) Every drawn value is filtered through ``Draft202012Validator``, so whatever the
builder approximates (``allOf`` merging, ``oneOf`` exclusivity, formats) a value that comes out is
valid for the tool's inputSchema. Recursive ``$ref``s stop at ``depth``.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC
from typing import Any

from hypothesis import strategies as st
from jsonschema import Draft202012Validator

__all__ = ["from_schema"]

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=8))
_FORMATS: dict[str, st.SearchStrategy[Any]] = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "date-time": st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat().replace("+00:00", "Z")),
    "email": st.emails(),
    "uri": st.sampled_from(["https://example.com/a", "http://x.test/p?q=1"]),
    "url": st.sampled_from(["https://example.com/a", "http://x.test/p?q=1"]),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "byte": st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),
    "hostname": st.sampled_from(["example.com", "a.b.test"]),
}


def _merge(a: dict[str, Any], b: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    a, b = _deref(a, defs), _deref(b, defs)
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a if isinstance(b, bool) else b
    out = dict(a)
    for k, v in b.items():
        if k == "properties" and isinstance(out.get(k), dict):
            props = dict(out[k])
            for pk, pv in v.items():
                props[pk] = _merge(props[pk], pv, defs) if pk in props else pv
            out[k] = props
        elif k == "required" and isinstance(out.get(k), list):
            out[k] = list(dict.fromkeys([*out[k], *v]))
        else:
            out[k] = v
    return out


def _deref(schema: Any, defs: dict[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 10:
        target = defs.get(schema["$ref"].removeprefix("#/$defs/"), {})
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **rest} if isinstance(target, dict) else target
        seen += 1
    return schema


def _strategy(schema: Any, defs: dict[str, Any], stack: tuple[str, ...], depth: int) -> st.SearchStrategy[Any]:
    if schema is True or schema == {}:
        return _SCALARS
    if schema is False or not isinstance(schema, dict):
        return st.nothing()
    ref = schema.get("$ref")
    if isinstance(ref, str):
        key = ref.removeprefix("#/$defs/")
        if stack.count(key) >= depth:
            return st.nothing()
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        target = defs.get(key, {})
        merged = _merge(target, rest, defs) if rest else target
        return _strategy(merged, defs, (*stack, key), depth)
    if "const" in schema:
        return st.just(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return st.sampled_from(schema["enum"])
    if isinstance(schema.get("allOf"), list):
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            merged = _merge(merged, sub, defs)
        return _strategy(merged, defs, stack, depth)
    for comb in ("oneOf", "anyOf"):
        if isinstance(schema.get(comb), list) and schema[comb]:
            base = {k: v for k, v in schema.items() if k not in (comb, "discriminator")}
            return st.one_of(*[_strategy(_merge(base, sub, defs), defs, stack, depth) for sub in schema[comb]])
    t = schema.get("type")
    if isinstance(t, list):
        return st.one_of(*[_strategy({**schema, "type": one}, defs, stack, depth) for one in t])
    if t is None:
        if "properties" in schema or "required" in schema:
            t = "object"
        elif "items" in schema:
            t = "array"
        else:
            return _SCALARS
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(schema.get("exclusiveMinimum"), (int, float)):
            lo = int(schema["exclusiveMinimum"]) + 1
        if isinstance(schema.get("exclusiveMaximum"), (int, float)):
            hi = int(schema["exclusiveMaximum"]) - 1
        lo = int(lo) if lo is not None else -10_000
        hi = int(hi) if hi is not None else 10_000
        return st.integers(min(lo, hi), max(lo, hi))
    if t == "number":
        lo, hi = schema.get("minimum", -1e6), schema.get("maximum", 1e6)
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=32) | st.integers(int(lo), int(hi))
    if t == "string":
        fmt = schema.get("format")
        if "pattern" in schema:
            # ECMA-262 regexes (JSON Schema's) are ASCII for \d and \w, and $ ends the string.
            ascii_text = st.characters(codec="ascii", exclude_characters="\n")
            base = st.from_regex(schema["pattern"], fullmatch=False, alphabet=ascii_text)
        elif fmt in _FORMATS:
            base = _FORMATS[fmt]
        else:
            lo = int(schema.get("minLength", 0))
            hi = int(schema.get("maxLength", lo + 12))
            base = st.text(st.characters(codec="utf-8"), min_size=lo, max_size=max(lo, min(hi, lo + 12)))
        return base
    if t == "array":
        items = _strategy(schema.get("items", True), defs, stack, depth)
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", lo + 3))
        unique = json.dumps if schema.get("uniqueItems") else None
        if items.is_empty:  # a recursion cut off here: only the empty list is left
            return st.just([]) if lo == 0 else st.nothing()
        return st.lists(items, min_size=lo, max_size=max(lo, min(hi, lo + 3)), unique_by=unique)
    if t == "object":
        props = schema.get("properties") or {}
        required = [r for r in schema.get("required") or () if r in props]
        req = {k: _strategy(props[k], defs, stack, depth) for k in required}
        opt = {k: _strategy(v, defs, stack, depth) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(req, optional=opt)
    return _SCALARS


def from_schema(schema: dict[str, Any], depth: int = 2) -> st.SearchStrategy[Any]:
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return _strategy(schema, schema.get("$defs", {}), (), depth).filter(validator.is_valid)

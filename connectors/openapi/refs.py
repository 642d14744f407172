"""JSON pointers and OpenAPI Schema Objects → JSON Schema 2020-12 with ``$defs`` (pure).

Why ``$defs`` rather than inlining: real specs (GitHub's has ~900 component schemas) reference the
same schemas thousands of times, and recursive schemas cannot be inlined at all. Each referenced
schema is converted **once** per mode and the converted dict is shared by every tool that needs it;
a tool's ``inputSchema`` gets a ``$defs`` holding only the transitive closure of what it uses, with
``$ref`` rewritten to ``#/$defs/<key>``. Nothing of the source document is deep-copied or mutated.

Conversion (OpenAPI 3.0 dialect → 2020-12; 3.1 schemas are already 2020-12 and pass mostly as is):
``nullable`` adds ``null`` to an explicit ``type``, boolean ``exclusiveMinimum/Maximum``
become numeric, ``example`` becomes ``examples``, list-valued ``items`` becomes ``prefixItems``,
invalid ``type`` values and non-list ``required`` are dropped, ``discriminator`` is kept with its
mapping rewritten so it still names the right ``$defs`` entry. In ``request`` mode readOnly
properties are removed (an API rejects them in requests); in ``response`` mode writeOnly ones are.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from gateway.protocol.patterns import portable_pattern

__all__ = ["PointerError", "resolve_pointer", "escape_pointer", "SchemaConverter", "JSON_TYPES", "UNPORTABLE_NOTE"]

JSON_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
               "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
# OpenAPI-only keywords that mean nothing to a JSON Schema client and only add weight.
_DROP = frozenset({"xml", "externalDocs", "example", "$schema", "$id", "$anchor", "$dynamicAnchor",
                   "$comment", "nullable", "definitions"})
_KEY_BAD = re.compile(r"[^A-Za-z0-9_.-]")


class PointerError(LookupError):
    """A ``$ref`` that does not resolve; ``ref`` is the pointer and ``where`` the place using it."""

    def __init__(self, ref: str, where: str = "") -> None:
        self.ref = ref
        self.where = where
        super().__init__(f"unresolvable $ref {ref!r}" + (f" at {where}" if where else ""))


def escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def resolve_pointer(doc: Any, ref: str, where: str = "") -> Any:
    """Resolve a local ``#/a/b`` pointer in ``doc``."""
    if not ref.startswith("#"):
        raise PointerError(ref, where)
    node = doc
    body = ref[1:]
    if not body:
        return doc
    if not body.startswith("/"):
        raise PointerError(ref, where)
    for raw in body[1:].split("/"):
        token = unquote(raw).replace("~1", "/").replace("~0", "~")
        try:
            if isinstance(node, list):
                node = node[int(token)]
            else:
                node = node[token]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PointerError(ref, where) from None
    return node


class SchemaConverter:
    """Converts schemas of one document; caches every referenced schema per mode."""

    def __init__(self, doc: dict[str, Any], version: str) -> None:
        self.doc = doc
        self.v30 = version.startswith("3.0")
        # (mode, pointer) -> (key, converted schema, direct refs (mode, pointer))
        self._defs: dict[tuple[str, str], tuple[str, Any, frozenset[tuple[str, str]]]] = {}
        self._keys: dict[str, tuple[str, str]] = {}

    # -- public -----------------------------------------------------------------------------
    def convert(self, schema: Any, mode: str, where: str = "") -> tuple[Any, frozenset[tuple[str, str]]]:
        """Convert an inline schema; returns it and the refs it uses directly."""
        refs: set[tuple[str, str]] = set()
        out = self._conv(schema, mode, refs, where)
        return out, frozenset(refs)

    def defs_for(self, refs: Iterable[tuple[str, str]]) -> dict[str, Any]:
        """The ``$defs`` holding the transitive closure of ``refs`` (sorted keys, shared dicts)."""
        out: dict[str, Any] = {}
        stack = list(refs)
        seen: set[tuple[str, str]] = set()
        while stack:
            item = stack.pop()
            if item in seen:
                continue
            seen.add(item)
            key, converted, sub = self._defs[item]
            out[key] = converted
            stack.extend(sub)
        return dict(sorted(out.items()))

    def deref(self, node: Any, where: str = "") -> Any:
        """Follow ``$ref`` chains of a non-schema object (parameter, requestBody, response)."""
        seen = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise PointerError(ref, where)
            seen.add(ref)
            node = resolve_pointer(self.doc, ref, where)
        return node

    def filtered_props(self, schema: dict[str, Any], mode: str) -> dict[str, Any]:
        """Raw ``properties`` of ``schema`` without the readOnly (request) / writeOnly ones."""
        return {k: v for k, v in (schema.get("properties") or {}).items() if not self._is_read_only(v, mode)}

    # -- internals --------------------------------------------------------------------------
    def _key_for(self, mode: str, ref: str) -> str:
        name = ref.rsplit("/", 1)[-1] if ref.startswith("#/components/schemas/") else ref.lstrip("#/")
        name = _KEY_BAD.sub("_", unquote(name).replace("~1", "/").replace("~0", "~")) or "_"
        if mode == "response":
            name += ".out"
        if len(name) > 80:
            name = name[:70] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
        key = name
        n = 1
        while key in self._keys and self._keys[key] != (mode, ref):
            n += 1
            key = f"{name}_{n}"
        self._keys[key] = (mode, ref)
        return key

    def _ref(self, ref: str, mode: str, where: str) -> str:
        """Register (converting once) the schema at ``ref``; returns its ``$defs`` key."""
        ident = (mode, ref)
        hit = self._defs.get(ident)
        if hit is not None:
            return hit[0]
        target = resolve_pointer(self.doc, ref, where)
        key = self._key_for(mode, ref)
        holder: dict[str, Any] = {}
        # Placeholder first: a recursive schema meets its own ref while being converted.
        self._defs[ident] = (key, holder, frozenset())
        refs: set[tuple[str, str]] = set()
        converted = self._conv(target, mode, refs, ref)
        if isinstance(converted, dict):
            holder.update(converted)
            converted = holder
        self._defs[ident] = (key, converted, frozenset(refs))
        return key

    def _is_read_only(self, schema: Any, mode: str) -> bool:
        flag = "readOnly" if mode == "request" else "writeOnly"
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 20:
            if schema.get(flag) is True:
                return True
            try:
                schema = resolve_pointer(self.doc, schema["$ref"])
            except PointerError:
                return False
            seen += 1
        return isinstance(schema, dict) and schema.get(flag) is True

    def _conv(self, schema: Any, mode: str, refs: set[tuple[str, str]], where: str) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            return {}  # a malformed schema accepts anything rather than breaking the tool
        ref = schema.get("$ref")
        if isinstance(ref, str):
            key = self._ref(ref, mode, where)
            refs.add((mode, ref))
            out_ref: dict[str, Any] = {"$ref": "#/$defs/" + key}
            if not self.v30:  # 3.1: $ref may have siblings
                for k in ("description", "title", "default", "deprecated"):
                    if k in schema:
                        out_ref[k] = schema[k]
            return out_ref
        out: dict[str, Any] = {}
        unportable: list[str] = []  # rules left out: clients could not compile their patterns
        for k, v in schema.items():
            if k in _DROP or k.startswith("x-") or k == "$ref":
                continue
            if k in _SCHEMA_MAPS:
                if isinstance(v, dict):
                    props = {}
                    for pk, pv in v.items():
                        if k == "properties" and mode != "any" and self._is_read_only(pv, mode):
                            continue
                        if k == "patternProperties":
                            portable_key = portable_pattern(pk)
                            if portable_key.pattern is None:
                                unportable.append(f"properties named like {pk} have a schema of their own "
                                                  f"({portable_key.reason})")
                                continue
                            pk = portable_key.pattern
                        props[pk] = self._conv(pv, mode, refs, where)
                    out[k] = props
            elif k == "pattern":
                if isinstance(v, str):
                    portable = portable_pattern(v)
                    if portable.pattern is not None:
                        out[k] = portable.pattern
                    else:
                        unportable.append(f"the value must match {v} ({portable.reason})")
            elif k in _SCHEMA_ONE:
                out[k] = self._conv(v, mode, refs, where)
            elif k in _SCHEMA_LISTS:
                if isinstance(v, list):
                    out[k] = [self._conv(s, mode, refs, where) for s in v]
            elif k == "items":
                if isinstance(v, list):
                    out["prefixItems"] = [self._conv(s, mode, refs, where) for s in v]
                else:
                    out["items"] = self._conv(v, mode, refs, where)
            elif k == "type":
                if isinstance(v, str) and v in JSON_TYPES:
                    out["type"] = v
                elif isinstance(v, list):
                    kept = [t for t in v if t in JSON_TYPES]
                    if kept:
                        out["type"] = kept
            elif k == "required":
                if isinstance(v, list):
                    out["required"] = list(dict.fromkeys(r for r in v if isinstance(r, str)))
            elif k in ("exclusiveMinimum", "exclusiveMaximum"):
                if isinstance(v, bool):
                    bound = "minimum" if k == "exclusiveMinimum" else "maximum"
                    if v and isinstance(schema.get(bound), (int, float)):
                        out[k] = schema[bound]
                elif isinstance(v, (int, float)):
                    out[k] = v
            elif k == "examples":
                if isinstance(v, list):  # 3.0 specs put OpenAPI Example maps here; not JSON Schema
                    out[k] = v
            elif k == "discriminator":
                out[k] = self._discriminator(v, mode, refs, where)
            elif k in ("minimum", "maximum"):
                other = "exclusiveMinimum" if k == "minimum" else "exclusiveMaximum"
                if schema.get(other) is not True:
                    out[k] = v
            else:
                out[k] = v
        _format_hints(out)
        if unportable:
            _note_unportable(out, unportable, mode)
        if "example" in schema and "examples" not in schema:
            out["examples"] = [schema["example"]]
        if "required" in out and "properties" in out and mode != "any":
            # Properties removed as readOnly/writeOnly must not stay required.
            dropped = set(schema.get("properties") or {}) - set(out["properties"])
            if dropped:
                out["required"] = [r for r in out["required"] if r not in dropped]
        if schema.get("nullable") is True and self.v30:
            out = _nullable(out)
        return out

    def _discriminator(self, disc: Any, mode: str, refs: set[tuple[str, str]], where: str) -> Any:
        if not isinstance(disc, dict):
            return disc
        mapping = disc.get("mapping")
        if not isinstance(mapping, dict):
            return disc
        new_map = {}
        for value, target in mapping.items():
            if not isinstance(target, str):
                continue
            ref = target if target.startswith("#") else "#/components/schemas/" + target
            try:
                key = self._ref(ref, mode, where)
            except PointerError:
                continue
            refs.add((mode, ref))
            new_map[value] = "#/$defs/" + key
        return {**disc, "mapping": new_map}


_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


def _format_hints(out: dict[str, Any]) -> None:
    """Spell out what OpenAPI formats imply, so a model (and a validator) knows the real limits."""
    fmt = out.get("format")
    if fmt in _BOUNDS:
        lo, hi = _BOUNDS[fmt]
        if "minimum" not in out and "exclusiveMinimum" not in out:
            out["minimum"] = lo
        if "maximum" not in out and "exclusiveMaximum" not in out:
            out["maximum"] = hi
    elif fmt == "byte" and "pattern" not in out:
        out["pattern"] = _BASE64
        out.setdefault("contentEncoding", "base64")


# Starts the description note for a rule left out of a schema (see ``_note_unportable``).
UNPORTABLE_NOTE = "Left out of this schema, as clients could not compile the pattern: "


def _note_unportable(out: dict[str, Any], rules: list[str], mode: str) -> None:
    """Say in the description what a left-out pattern required: the model still learns the rule."""
    checked = "the gateway checks it before calling the API" if mode != "response" else "the API applies it"
    note = UNPORTABLE_NOTE + "; ".join(rules) + f". {checked[0].upper()}{checked[1:]}."
    desc = out.get("description")
    out["description"] = f"{desc}\n\n{note}" if isinstance(desc, str) and desc else note


def _nullable(out: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0.3: ``nullable`` adds "null" only to an explicit ``type``, and an ``enum`` still
    has to list null itself (openapi-core enforces both, so the schema says the same)."""
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = [t, "null"]
    elif isinstance(t, list) and "null" not in t:
        out["type"] = [*t, "null"]
    return out

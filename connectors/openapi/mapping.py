"""OpenAPI operations → MCP tool definitions and call plans (pure: no I/O).

:func:`map_spec` turns a loaded document into :class:`Operation` plans, one per selected
operation, each carrying the wire ``Tool`` definition and where every argument goes.

* **Names** (local) come from ``operationId`` or ``method_path``: characters MCP rejects become
  ``_``, runs of ``_`` one, none at either end; never cut (the catalog shortens a public name past
  64 characters with a digest of the whole, :mod:`gateway.protocol.names`); duplicates get ``_2``,
  ``_3`` in document order, so the same spec always yields the same names.
* **inputSchema** is one object: path, query, header and cookie parameters, then the request body
  (an object body is flattened into its properties; anything else is one ``body`` argument). An
  argument name already taken is renamed ``<location>_<name>`` and its wire name is kept in
  :class:`Arg`. Schemas go through :class:`refs.SchemaConverter`: valid 2020-12 with ``$defs``;
  one over ``max_schema_bytes`` is loosened to fit (:mod:`budget`), ``outputSchema`` likewise.
* **Selection**: an operation is kept when it matches every criterion given under ``include``
  (tags, path globs, methods, operationIds; any value within one criterion) and no criterion under
  ``exclude``. ``routes`` turn GET operations into resource templates.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway.protocol.names import sanitize

from .budget import Measures, fit
from .config import OpenAPIConfig, RouteRule, Selection
from .refs import UNPORTABLE_NOTE, PointerError, SchemaConverter, escape_pointer

__all__ = ["Arg", "Operation", "MappedSpec", "map_spec", "iter_operations", "pick_media_type",
           "HTTP_METHODS", "uri_template_for", "unknown_operations"]

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
# Header parameters OpenAPI says to ignore: the connector sets these itself.
_RESERVED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_JSON_MEDIA = re.compile(r"^application/([\w.+-]+\+)?json(;.*)?$", re.I)


@dataclass(frozen=True, slots=True)
class Arg:
    """One tool argument: its name in ``inputSchema`` and where it goes on the wire."""

    arg: str
    location: str  # path | query | header | cookie | body (a property) | body_whole
    name: str  # wire name (parameter or property name)
    style: str = "form"
    explode: bool = True
    allow_reserved: bool = False
    content_type: str | None = None  # parameters declared with ``content`` are serialised so
    is_binary: bool = False  # multipart file parts


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    method: str  # upper case
    path: str  # the spec's path template
    operation_id: str | None
    pointer: str  # "#/paths/~1pet~1{petId}/get", for errors
    args: tuple[Arg, ...]
    body_media: str | None
    body_required: bool
    security: tuple[dict[str, tuple[str, ...]], ...] | None  # None: the document's default
    servers: tuple[dict[str, Any], ...]
    route: str  # tool | resource
    definition: dict[str, Any]
    idempotent: bool = False
    # Declares an Authorization header parameter (ignored as an argument, answered with credentials).
    wants_authorization: bool = False
    by_arg: dict[str, Arg] = field(default_factory=dict, compare=False)
    loosened: bool = False  # a schema was over max_schema_bytes (budget.py)


@dataclass(frozen=True, slots=True)
class MappedSpec:
    operations: tuple[Operation, ...]
    version: str
    servers: tuple[dict[str, Any], ...]
    security: tuple[dict[str, tuple[str, ...]], ...]
    security_schemes: dict[str, Any]
    warnings: tuple[str, ...] = ()


def iter_operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(path, method, path item, operation) in document order."""
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method in HTTP_METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                yield path, method, item, op


def pick_media_type(content: dict[str, Any]) -> str | None:
    """Prefer JSON, then form encodings, then whatever is declared first."""
    if not isinstance(content, dict) or not content:
        return None
    keys = list(content)
    for k in keys:
        if _JSON_MEDIA.match(k):
            return k
    for wanted in ("application/x-www-form-urlencoded", "multipart/form-data"):
        for k in keys:
            if k.lower().startswith(wanted):
                return k
    return keys[0]


def _matches(sel: Selection, path: str, method: str, op: dict[str, Any], every: bool) -> bool:
    checks = []
    if sel.tags:
        checks.append(any(t in sel.tags for t in op.get("tags") or ()))
    if sel.paths:
        checks.append(any(fnmatch.fnmatchcase(path, g) for g in sel.paths))
    if sel.methods:
        checks.append(method.upper() in sel.methods)
    if sel.operations:
        checks.append(op.get("operationId") in sel.operations)
    return all(checks) if every else any(checks)


def _route(rules: Iterable[RouteRule], path: str, method: str) -> str:
    for rule in rules:
        if method.upper() in rule.methods and fnmatch.fnmatchcase(path, rule.path):
            return rule.route if method == "get" else "tool"
    return "tool"


def _base_name(path: str, method: str, op: dict[str, Any]) -> str:
    op_id = op.get("operationId")
    if isinstance(op_id, str) and op_id.strip():
        raw = op_id.strip()
    else:
        raw = f"{method}_{path}"
    return re.sub(r"_+", "_", sanitize(raw)).strip("_") or method


def _security(value: Any) -> tuple[dict[str, tuple[str, ...]], ...] | None:
    if not isinstance(value, list):
        return None
    out = []
    for req in value:
        if isinstance(req, dict):
            out.append({str(k): tuple(v or ()) for k, v in req.items()})
    return tuple(out)


def _annotations(method: str, title: str | None) -> dict[str, Any]:
    ann: dict[str, Any] = {"readOnlyHint": method in ("GET", "HEAD", "OPTIONS"), "openWorldHint": True}
    if method == "DELETE":
        ann["destructiveHint"] = True
    elif method in ("POST", "PUT", "PATCH"):
        ann["destructiveHint"] = False
    ann["idempotentHint"] = method in _IDEMPOTENT
    if title:
        ann["title"] = title
    return ann


def _description(op: dict[str, Any], item: dict[str, Any], override: str | None) -> str | None:
    if override:
        return override
    parts = []
    for text in (op.get("summary") or item.get("summary"), op.get("description") or item.get("description")):
        if isinstance(text, str) and text.strip() and text.strip() not in parts:
            parts.append(text.strip())
    if op.get("deprecated") is True:
        parts.append("(deprecated)")
    return "\n\n".join(parts) or None


class _Builder:
    """Collects one operation's arguments, renaming on collisions."""

    def __init__(self) -> None:
        self.props: dict[str, Any] = {}
        self.required: list[str] = []
        self.args: list[Arg] = []
        self.refs: set[tuple[str, str]] = set()
        self.dependent: dict[str, list[str]] = {}

    def add(self, arg: Arg, schema: Any, required: bool, description: str | None) -> None:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", arg.arg)[:64] or "_"
        if name in self.props:
            loc = "body" if arg.location.startswith("body") else arg.location
            name = f"{loc}_{name}"[:64]
            n = 2
            base = name
            while name in self.props:
                name = f"{base}_{n}"
                n += 1
        if isinstance(schema, dict):
            schema = dict(schema)
            own = schema.get("description")
            if description and own is None:
                schema["description"] = description
            elif description and isinstance(own, str) and own.startswith(UNPORTABLE_NOTE):
                schema["description"] = f"{description}\n\n{own}"  # the parameter's words first
        self.props[name] = schema
        if required:
            self.required.append(name)
        self.args.append(Arg(name, arg.location, arg.name, arg.style, arg.explode, arg.allow_reserved,
                             arg.content_type, arg.is_binary))


def _param_args(conv: SchemaConverter, b: _Builder, params: list[dict[str, Any]], where: str) -> None:
    for p in params:
        loc = p.get("in")
        name = p.get("name")
        if loc not in ("path", "query", "header", "cookie") or not isinstance(name, str):
            continue
        if loc == "header" and name.lower() in _RESERVED_HEADERS:
            continue
        content_type = None
        if "schema" in p:
            raw = p["schema"]
        elif isinstance(p.get("content"), dict) and p["content"]:
            content_type = next(iter(p["content"]))
            raw = (p["content"][content_type] or {}).get("schema", {})
        else:
            raw = {}
        schema, refs = conv.convert(raw, "request", where)
        b.refs |= refs
        schema = _wire_safe(schema, conv.deref(raw, where), loc, p.get("required") is True or loc == "path",
                            p.get("allowEmptyValue") is True)
        style = p.get("style") or ("simple" if loc in ("path", "header") else "form")
        explode = p.get("explode", style == "form")
        b.add(Arg(name, loc, name, style, bool(explode), bool(p.get("allowReserved", False)), content_type),
              schema, loc == "path" or p.get("required") is True, p.get("description"))


# What survives in an HTTP header or cookie unchanged (visible ASCII, no separators in cookies).
_HEADER_TEXT = r"^[!-~]([ -~]*[!-~])?$"
_COOKIE_TEXT = r"^[!#-+\--:<-\[\]-~]+$"


def _wire_safe(schema: Any, raw: Any, loc: str, required: bool, allow_empty: bool) -> Any:
    """Constrain values to what the location can carry, so the schema tells the truth: an empty
    array sends nothing (a required one needs an item), an empty path segment or query value is
    no value at all."""
    if not isinstance(schema, dict) or not isinstance(raw, dict):
        return schema
    t = raw.get("type")
    if t == "array" and required and loc in ("path", "query"):
        return {**schema, "minItems": max(1, raw.get("minItems", 1))}
    if t != "string" or any(k in raw for k in ("enum", "const", "pattern", "format")):
        return schema
    if loc == "path" or (loc == "query" and not allow_empty):
        return {**schema, "minLength": max(1, raw.get("minLength", 1))}
    if loc == "header":
        return {**schema, "pattern": _HEADER_TEXT}
    if loc == "cookie":
        return {**schema, "pattern": _COOKIE_TEXT}
    return schema


def _merged_params(conv: SchemaConverter, item: dict[str, Any], op: dict[str, Any], where: str) -> list[dict[str, Any]]:
    merged: dict[tuple[Any, Any], dict[str, Any]] = {}
    for source in (item.get("parameters") or (), op.get("parameters") or ()):
        for raw in source if isinstance(source, list) else ():
            p = conv.deref(raw, where)
            if isinstance(p, dict):
                merged[(p.get("name"), p.get("in"))] = p
    return list(merged.values())


def _body_args(conv: SchemaConverter, b: _Builder, op: dict[str, Any], where: str) -> tuple[str | None, bool]:
    body = conv.deref(op.get("requestBody"), where + "/requestBody")
    if not isinstance(body, dict):
        return None, False
    media = pick_media_type(body.get("content") or {})
    if media is None:
        return None, False
    media_obj = body["content"][media] or {}
    raw = media_obj.get("schema", {})
    required = body.get("required") is True
    target = conv.deref(raw, where) if isinstance(raw, dict) else raw
    flat = (isinstance(target, dict) and isinstance(target.get("properties"), dict) and target["properties"]
            and not any(k in target for k in ("oneOf", "anyOf", "allOf", "not", "discriminator"))
            and target.get("type", "object") in ("object", ["object"]) and not target.get("nullable"))
    if flat:
        ro = conv.filtered_props(target, "request")
        body_required = set(target.get("required") or ())
        req = body_required if required else set()
        encoding = media_obj.get("encoding") or {}
        arg_of: dict[str, str] = {}
        for pname, pschema in ro.items():
            schema, refs = conv.convert(pschema, "request", where)
            b.refs |= refs
            is_binary = media.startswith("multipart/") and _is_binary(conv, pschema, encoding.get(pname))
            b.add(Arg(pname, "body", pname, is_binary=is_binary), schema, pname in req, None)
            arg_of[pname] = b.args[-1].arg
        if not required and body_required & set(arg_of):
            # An optional body that, once sent, needs its required properties.
            needed = [arg_of[p] for p in ro if p in body_required]
            for arg in arg_of.values():
                others = [n for n in needed if n != arg]
                if others:
                    b.dependent[arg] = others
        return media, required
    schema, refs = conv.convert(raw, "request", where)
    b.refs |= refs
    b.add(Arg("body", "body_whole", "body"), schema, required, body.get("description"))
    return media, required


def _is_binary(conv: SchemaConverter, schema: Any, encoding: Any) -> bool:
    s = conv.deref(schema) if isinstance(schema, dict) else {}
    if isinstance(s, dict) and s.get("type") == "array":
        s = conv.deref(s.get("items") or {})
    ctype = (encoding or {}).get("contentType", "") if isinstance(encoding, dict) else ""
    return isinstance(s, dict) and (s.get("format") in ("binary", "base64") or "contentMediaType" in s
                                    or (bool(ctype) and not ctype.startswith(("text/", "application/json"))))


def _output_schema(conv: SchemaConverter, op: dict[str, Any], where: str) -> dict[str, Any] | None:
    responses = op.get("responses") or {}
    if not isinstance(responses, dict):
        return None
    for code in ("200", "201", "202", "203", "2XX", "2xx"):
        if code not in responses:
            continue
        resp = conv.deref(responses[code], where)
        content = resp.get("content") if isinstance(resp, dict) else None
        if not isinstance(content, dict):
            return None
        media = pick_media_type(content)
        if media is None or not _JSON_MEDIA.match(media):
            return None
        raw = (content[media] or {}).get("schema")
        target = conv.deref(raw, where) if isinstance(raw, dict) else None
        if not isinstance(target, dict) or target.get("nullable") is True:
            return None
        t = target.get("type")
        if t != "object" and not (t is None and isinstance(target.get("properties"), dict)):
            return None
        schema, refs = conv.convert(raw, "response", where)
        out = {"type": "object", **schema}
        if refs:
            out["$defs"] = conv.defs_for(refs)
        return out
    return None


def _one(conv: SchemaConverter, cfg: OpenAPIConfig, path: str, method: str, item: dict[str, Any],
         op: dict[str, Any], name: str, measures: Measures) -> Operation:
    where = f"#/paths/{escape_pointer(path)}/{method}"
    b = _Builder()
    params = _merged_params(conv, item, op, where)
    order = {"path": 0, "query": 1, "header": 2, "cookie": 3}
    params.sort(key=lambda p: order.get(str(p.get("in")), 9))
    _param_args(conv, b, params, where)
    body_media, body_required = _body_args(conv, b, op, where)
    schema: dict[str, Any] = {"type": "object", "properties": b.props}
    if b.required:
        schema["required"] = b.required
    if b.dependent:
        schema["dependentRequired"] = b.dependent
    if b.refs:
        schema["$defs"] = conv.defs_for(b.refs)
    override = cfg.overrides.get(op.get("operationId") or "")
    upper = method.upper()
    definition: dict[str, Any] = {"name": name}
    title = op.get("summary") if isinstance(op.get("summary"), str) else None
    if override and override.title is not None:
        title = override.title
    if title:
        definition["title"] = title.strip()[:200]
    desc = _description(op, item, override.description if override else None)
    if desc:
        definition["description"] = desc
    # Loosened to the budget (budget.py): valid arguments and responses stay valid.
    definition["inputSchema"] = fit(schema, cfg.max_schema_bytes, measures) or schema
    full = _output_schema(conv, op, where)
    out = fit(full, cfg.max_schema_bytes, measures) if full is not None else None
    if out is not None:
        definition["outputSchema"] = out
    loosened = definition["inputSchema"] is not schema or out is not full
    definition["annotations"] = _annotations(upper, title)
    if override and override.annotations is not None:
        definition["annotations"].update(override.annotations.model_dump(exclude_none=True))
    servers = op.get("servers") or item.get("servers") or ()
    return Operation(
        name=name, method=upper, path=path, operation_id=op.get("operationId"), pointer=where,
        args=tuple(b.args), body_media=body_media, body_required=body_required, security=_security(op.get("security")),
        servers=tuple(s for s in servers if isinstance(s, dict)), route=_route(cfg.routes, path, method),
        definition=definition, idempotent=upper in _IDEMPOTENT, loosened=loosened,
        wants_authorization=any(p.get("in") == "header" and str(p.get("name", "")).lower() == "authorization"
                                for p in params),
        by_arg={a.arg: a for a in b.args},
    )


def unknown_operations(doc: dict[str, Any], cfg: OpenAPIConfig) -> list[tuple[tuple[str | int, ...], str]]:
    """Where the config names an operationId the document does not have, as (path in the
    connector's config, operationId): an ``overrides`` key or an ``include``/``exclude``
    ``operations`` entry that would silently do nothing."""
    known = {op.get("operationId") for _, _, _, op in iter_operations(doc)}
    found: list[tuple[tuple[str | int, ...], str]] = [(("overrides", name), name) for name in cfg.overrides
                                                      if name not in known]
    for section, selection in (("include", cfg.include), ("exclude", cfg.exclude)):
        found += [((section, "operations", i), name) for i, name in enumerate(selection.operations)
                  if name not in known]
    return found


def map_spec(doc: dict[str, Any], version: str, cfg: OpenAPIConfig, source: str = "spec") -> MappedSpec:
    """Map every selected operation. Raises ``PointerError`` naming the broken ``$ref``."""
    conv = SchemaConverter(doc, version)
    measures = Measures()  # of the $defs entries, for the schema budget
    ops: list[Operation] = []
    taken: set[str] = set()
    warnings = [f"{'.'.join(str(p) for p in where[:2])}: the spec has no operation with operationId {name!r}"
                for where, name in unknown_operations(doc, cfg)]
    for path, method, item, op in iter_operations(doc):
        if not cfg.include.empty and not _matches(cfg.include, path, method, op, every=True):
            continue
        if not cfg.exclude.empty and _matches(cfg.exclude, path, method, op, every=False):
            continue
        override = cfg.overrides.get(op.get("operationId") or "")
        base = sanitize(override.name) if override and override.name else _base_name(path, method, op)
        name, n = base, 2
        while name in taken:
            name = f"{base}_{n}"
            n += 1
        taken.add(name)
        try:
            ops.append(_one(conv, cfg, path, method, item, op, name, measures))
        except PointerError as exc:
            raise PointerError(exc.ref, exc.where or f"#/paths/{escape_pointer(path)}/{method}") from None
    loosened = [op.name for op in ops if op.loosened]
    if loosened:
        warnings.append(f"{len(loosened)} tools have schemas over max_schema_bytes ({cfg.max_schema_bytes}), "
                        f"loosened to fit (e.g. {', '.join(loosened[:3])}); raise the limit to publish them whole")
    schemes = ((doc.get("components") or {}).get("securitySchemes") or {})
    resolved = {k: conv.deref(v) for k, v in schemes.items()} if isinstance(schemes, dict) else {}
    servers = tuple(s for s in doc.get("servers") or () if isinstance(s, dict))
    return MappedSpec(tuple(ops), version, servers, _security(doc.get("security")) or (), resolved,
                      tuple(warnings))


def uri_template_for(connector: str, op: Operation) -> str:
    """``openapi://<connector><path>{?query,args}`` for a resource-routed operation."""
    path = op.path
    for a in op.args:
        if a.location == "path" and a.arg != a.name:
            path = path.replace("{" + a.name + "}", "{" + a.arg + "}")
    query = [a.arg for a in op.args if a.location == "query"]
    return f"openapi://{connector}{path}" + ("{?" + ",".join(query) + "}" if query else "")

"""Swagger 2.0 → OpenAPI 3.0, just enough for the bench (the OpenAPI connector refuses Swagger 2.0).

Two of issue 28's specs (Opsgenie, Vikunja) are Swagger 2.0; the connector asks for a conversion
first ("for example with swagger2openapi", which does not ship offline here). :func:`convert` does
the mechanical part of what swagger2openapi does, for what those documents use: ``definitions`` →
``components/schemas`` (``$ref`` rewritten, ``type: file`` → binary string, a string
``discriminator`` → ``{propertyName}``), shared ``parameters``/``responses`` inlined, a ``body``
parameter → ``requestBody`` (each of ``consumes``), ``formData`` → a form or multipart
``requestBody``, other parameters' type keywords → ``schema``, response ``schema`` → ``content``
(each of ``produces``), ``host``/``basePath``/``schemes`` → ``servers``, security schemes. Paths,
methods, operationIds, summaries, descriptions and tags are kept exactly, so ``METHOD path``
labels (relative to ``basePath``) still name the same operations.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["convert", "is_swagger2"]

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
# Keywords of a non-body Swagger 2.0 parameter that belong to its schema in OpenAPI 3.
_SCHEMA_KEYS = ("type", "format", "items", "enum", "default", "minimum", "maximum", "exclusiveMinimum",
                "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
                "multipleOf")


def is_swagger2(doc: dict[str, Any]) -> bool:
    return str(doc.get("swagger", "")).startswith("2")


def _schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
            out[key] = "#/components/schemas/" + value[len("#/definitions/"):]
        elif key == "discriminator" and isinstance(value, str):
            out[key] = {"propertyName": value}
        elif key == "x-nullable":
            out["nullable"] = bool(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        else:
            out[key] = _schema(value)
    if out.get("type") == "file":
        out["type"], out["format"] = "string", "binary"
    return out


def _resolve(doc: dict[str, Any], node: dict[str, Any], section: str) -> dict[str, Any]:
    ref = node.get("$ref")
    prefix = f"#/{section}/"
    if isinstance(ref, str) and ref.startswith(prefix):
        return dict(doc.get(section, {}).get(ref[len(prefix):], {}))
    return node


def _param_schema(param: dict[str, Any]) -> dict[str, Any]:
    schema = {k: copy.deepcopy(param[k]) for k in _SCHEMA_KEYS if k in param}
    return _schema(schema) or {"type": "string"}


def _parameters(doc: dict[str, Any], item: dict[str, Any], op: dict[str, Any]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or ()), *(op.get("parameters") or ())]:
        param = _resolve(doc, raw, "parameters")
        merged[(param.get("in", ""), param.get("name", ""))] = param
    return list(merged.values())


def _operation(doc: dict[str, Any], item: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    out = {k: copy.deepcopy(v) for k, v in op.items()
           if k not in ("parameters", "responses", "consumes", "produces", "schemes")}
    consumes = op.get("consumes") or doc.get("consumes") or ["application/json"]
    produces = op.get("produces") or doc.get("produces") or ["application/json"]
    params, form, form_required = [], {}, []
    for param in _parameters(doc, item, op):
        where = param.get("in")
        if where == "body":
            schema = _schema(copy.deepcopy(param.get("schema") or {}))
            out["requestBody"] = {"content": {mt: {"schema": schema} for mt in consumes},
                                  "required": bool(param.get("required"))}
            if param.get("description"):
                out["requestBody"]["description"] = param["description"]
        elif where == "formData":
            prop = _param_schema(param)
            if param.get("description"):
                prop["description"] = param["description"]
            form[param["name"]] = prop
            if param.get("required"):
                form_required.append(param["name"])
        elif where in ("query", "path", "header", "cookie"):
            new = {k: param[k] for k in ("name", "in", "description", "required", "allowEmptyValue") if k in param}
            new["schema"] = _param_schema(param)
            if param.get("collectionFormat") == "multi":
                new["explode"] = True
            elif param.get("type") == "array":
                new["explode"] = False
            params.append(new)
    if form:
        binary = any(p.get("format") == "binary" for p in form.values())
        media = "multipart/form-data" if binary or "multipart/form-data" in consumes \
            else "application/x-www-form-urlencoded"
        schema: dict[str, Any] = {"type": "object", "properties": form}
        if form_required:
            schema["required"] = form_required
        out["requestBody"] = {"content": {media: {"schema": schema}}, "required": bool(form_required)}
    if params:
        out["parameters"] = params
    responses = {}
    for code, raw in (op.get("responses") or {}).items():
        resp = _resolve(doc, raw, "responses")
        new = {"description": resp.get("description") or ""}
        if resp.get("schema") is not None:
            schema = _schema(copy.deepcopy(resp["schema"]))
            new["content"] = {mt: {"schema": schema} for mt in produces}
        responses[str(code)] = new
    out["responses"] = responses or {"default": {"description": ""}}
    return out


def _security_scheme(raw: dict[str, Any]) -> dict[str, Any]:
    kind = raw.get("type")
    if kind == "basic":
        return {"type": "http", "scheme": "basic"}
    if kind == "oauth2":
        flow = {"implicit": "implicit", "password": "password", "application": "clientCredentials",
                "accessCode": "authorizationCode"}.get(raw.get("flow", ""), "implicit")
        spec = {k: raw[k] for k in ("authorizationUrl", "tokenUrl") if k in raw}
        spec["scopes"] = raw.get("scopes") or {}
        return {"type": "oauth2", "flows": {flow: spec}}
    return {k: v for k, v in raw.items() if k in ("type", "name", "in", "description")}


def convert(doc: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI 3.0.3 document equivalent to the Swagger 2.0 *doc* (see the module doc)."""
    base = doc.get("basePath") or ""
    host = doc.get("host")
    schemes = doc.get("schemes") or ["https"]
    servers = [{"url": f"{s}://{host}{base}"} for s in schemes] if host else [{"url": base or "/"}]
    out: dict[str, Any] = {"openapi": "3.0.3", "info": copy.deepcopy(doc.get("info") or {}), "servers": servers}
    for key in ("tags", "security", "externalDocs"):
        if key in doc:
            out[key] = copy.deepcopy(doc[key])
    paths: dict[str, Any] = {}
    for path, item in (doc.get("paths") or {}).items():
        new = {m: _operation(doc, item, op) for m, op in item.items() if m in _METHODS and isinstance(op, dict)}
        for key in ("summary", "description"):
            if key in item:
                new[key] = item[key]
        paths[path] = new
    out["paths"] = paths
    components: dict[str, Any] = {"schemas": {k: _schema(copy.deepcopy(v)) for k, v in
                                              (doc.get("definitions") or {}).items()}}
    if doc.get("securityDefinitions"):
        components["securitySchemes"] = {k: _security_scheme(v) for k, v in doc["securityDefinitions"].items()}
    out["components"] = components
    return out

"""Pure mapping: every committed spec maps to valid names and valid 2020-12 schemas; selection,
naming, collisions, annotations and composition survive."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.loader import SpecError, check_version
from connectors.openapi.mapping import map_spec
from connectors.openapi.request import ArgumentError, build_request
from gateway.protocol.names import is_valid_name, public_names

from .upstream import SPECS, load_doc


def cfg(**kw: Any) -> OpenAPIConfig:
    return OpenAPIConfig.model_validate({"name": "t", "type": "openapi", "spec": "x.json", **kw})


@pytest.mark.parametrize("spec", list(SPECS))
def test_every_tool_has_a_valid_name_and_valid_schemas(spec: str) -> None:
    doc = load_doc(SPECS[spec])
    mapped = map_spec(doc, check_version(doc, spec), cfg())
    ops = sum(1 for item in doc["paths"].values() for m in item if m in ("get", "put", "post", "delete", "patch",
                                                                          "head", "options", "trace"))
    assert len(mapped.operations) == ops
    names = [op.name for op in mapped.operations]
    assert len(set(names)) == len(names)
    checked: set[int] = set()

    def check(schema: dict[str, Any]) -> None:
        # $defs entries are shared dicts: meta-validate each once (same verdict, GitHub in seconds).
        Draft202012Validator.check_schema({k: v for k, v in schema.items() if k != "$defs"})
        for sub in schema.get("$defs", {}).values():
            if id(sub) not in checked:
                checked.add(id(sub))
                Draft202012Validator.check_schema(sub)
        assert _refs(schema) <= {"#/$defs/" + k for k in schema.get("$defs", {})}  # every $ref resolves

    # Local names keep the whole operationId (the catalog shortens public names with a digest of it).
    assert all(is_valid_name(n) for n in public_names("t_", names)), names
    for op in mapped.operations:
        check(op.definition["inputSchema"])
        assert op.definition["inputSchema"]["type"] == "object"
        if "outputSchema" in op.definition:
            check(op.definition["outputSchema"])
            assert op.definition["outputSchema"]["type"] == "object"


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        out = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        for k, v in node.items():
            if k not in ("examples", "default", "const", "enum"):
                out |= _refs(v)
        return out
    if isinstance(node, list):
        return set().union(*map(_refs, node)) if node else set()
    return set()


def _doc(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def test_names_selection_overrides_and_annotations() -> None:
    doc = _doc({
        "/a/{id}": {"get": {"operationId": "get thing!", "tags": ["x"], "summary": "Get", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]},
                    "delete": {"tags": ["x"]}, "put": {"operationId": "get thing!", "tags": ["y"]}},
        "/b": {"post": {"operationId": "makeB", "tags": ["y"]}},
    })
    ops = {op.name: op for op in map_spec(doc, "3.0.3", cfg()).operations}
    assert set(ops) == {"get_thing", "delete_a_id", "get_thing_2", "makeB"}
    get = ops["get_thing"].definition
    assert get["annotations"]["readOnlyHint"] and get["annotations"]["idempotentHint"]
    assert ops["delete_a_id"].definition["annotations"]["destructiveHint"] is True
    assert ops["makeB"].definition["annotations"]["idempotentHint"] is False
    assert get["inputSchema"]["required"] == ["id"]
    sel = map_spec(doc, "3.0.3", cfg(include={"tags": ["x"], "methods": ["get", "DELETE"]},
                                      exclude={"paths": ["/b"]}))
    assert [op.name for op in sel.operations] == ["get_thing", "delete_a_id"]
    over = map_spec(doc, "3.0.3", cfg(overrides={"makeB": {"name": "create_b", "description": "Makes B"}},
                                       exclude={"tags": ["x"]}))
    by = {op.name: op for op in over.operations}
    assert by["create_b"].definition["description"] == "Makes B"
    assert over.warnings == ()
    # title and annotations, as for upstream MCP tools (the override model is shared).
    hinted = map_spec(doc, "3.0.3", cfg(overrides={"makeB": {"title": "Make a B", "annotations": {
        "idempotentHint": True, "destructiveHint": True}}}))
    make_b = next(op for op in hinted.operations if op.name == "makeB").definition
    assert make_b["title"] == "Make a B"
    assert make_b["annotations"] == {"readOnlyHint": False, "openWorldHint": True, "destructiveHint": True,
                                     "idempotentHint": True, "title": "Make a B"}
    # Names the spec does not have would do nothing, silently: they become the spec's warnings.
    typo = map_spec(doc, "3.0.3", cfg(overrides={"makeBB": {"name": "create_b"}},
                                       include={"operations": ["makeB", "deleteB"]}))
    assert [op.name for op in typo.operations] == ["makeB"]
    assert typo.warnings == ("overrides.makeBB: the spec has no operation with operationId 'makeBB'",
                             "include.operations: the spec has no operation with operationId 'deleteB'")


def test_argument_collisions_are_renamed_and_routed() -> None:
    doc = _doc({"/items/{id}": {"put": {
        "operationId": "put",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                       {"name": "id", "in": "query", "schema": {"type": "string"}},
                       {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["id"], "properties": {"id": {"type": "integer"},
                                                                  "name": {"type": "string", "readOnly": True}}}}}}}}})
    op = map_spec(doc, "3.0.3", cfg()).operations[0]
    props = op.definition["inputSchema"]["properties"]
    assert list(props) == ["id", "query_id", "X-Trace", "body_id"]  # readOnly 'name' is not writable
    assert op.definition["inputSchema"]["required"] == ["id", "body_id"]
    req = build_request(op, {"id": "a b", "query_id": "q", "body_id": 5, "X-Trace": "t"})
    assert req.path == "/items/a%20b" and req.query == [("id", "q")]
    assert req.headers == {"X-Trace": "t"} and req.body == b'{"id":5}'


def test_composition_recursion_and_nullable_are_kept() -> None:
    doc = _doc({"/pets": {"post": {"operationId": "addPet", "requestBody": {"content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Pet"}}}}}}}, components={"schemas": {
            "Pet": {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}],
                    "discriminator": {"propertyName": "kind", "mapping": {"cat": "#/components/schemas/Cat",
                                                                          "dog": "Dog"}}},
            "Base": {"type": "object", "properties": {
                "friends": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}},
                "age": {"type": "integer", "nullable": True, "minimum": 0, "exclusiveMinimum": True}}},
            "Cat": {"allOf": [{"$ref": "#/components/schemas/Base"}, {"type": "object", "required": ["kind"],
                                                                       "properties": {"kind": {"enum": ["cat"]}}}]},
            "Dog": {"allOf": [{"$ref": "#/components/schemas/Base"}, {"type": "object", "required": ["kind"],
                                                                       "properties": {"kind": {"enum": ["dog"]}}}]},
        }})
    op = map_spec(doc, "3.0.3", cfg()).operations[0]
    schema = op.definition["inputSchema"]
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["body"] == {"$ref": "#/$defs/Pet"}
    defs = schema["$defs"]
    assert set(defs) == {"Pet", "Cat", "Dog", "Base"}
    assert defs["Pet"]["discriminator"]["mapping"] == {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}
    assert defs["Base"]["properties"]["age"] == {"type": ["integer", "null"], "exclusiveMinimum": 0}
    v = Draft202012Validator(schema)
    assert v.is_valid({"body": {"kind": "cat", "friends": [{"kind": "dog", "age": None}]}})
    assert not v.is_valid({"body": {"kind": "cat", "age": 0}})


def test_swagger_1_is_refused_with_its_version() -> None:
    with pytest.raises(SpecError, match=r"Swagger '1.2' is not supported \(2.0, 3.0.x and 3.1.x are\)"):
        check_version({"swagger": "1.2", "paths": {}}, "old.json")
    assert check_version({"swagger": "2.0", "paths": {}}, "two.json") == "2.0"  # converted once bundled
    with pytest.raises(SpecError, match="unsupported OpenAPI version '4.0.0'"):
        check_version({"openapi": "4.0.0"}, "new.json")


def test_query_styles_and_path_styles() -> None:
    doc = _doc({"/s/{m}/{l}": {"get": {"operationId": "s", "parameters": [
        {"name": "m", "in": "path", "required": True, "style": "matrix", "explode": True,
         "schema": {"type": "array", "items": {"type": "integer"}}},
        {"name": "l", "in": "path", "required": True, "style": "label", "schema": {"type": "string"}},
        {"name": "f", "in": "query", "explode": False, "schema": {"type": "array", "items": {"type": "string"}}},
        {"name": "e", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
        {"name": "d", "in": "query", "style": "deepObject", "schema": {"type": "object"}},
        {"name": "p", "in": "query", "style": "pipeDelimited", "explode": False,
         "schema": {"type": "array", "items": {"type": "string"}}},
        {"name": "c", "in": "cookie", "schema": {"type": "string"}}]}}})
    op = map_spec(doc, "3.0.3", cfg()).operations[0]
    req = build_request(op, {"m": [1, 2], "l": "x/y", "f": ["a", "b"], "e": ["a", "b"], "d": {"k": "v"},
                             "p": ["a", "b"], "c": "cv"})
    assert req.path == "/s/;m=1;m=2/.x%2Fy"
    assert req.query_string == "f=a%2Cb&e=a&e=b&d%5Bk%5D=v&p=a%7Cb"
    assert req.cookies == {"c": "cv"}


def test_header_and_cookie_values_are_single_lines_naming_the_argument() -> None:
    doc = _doc({"/h": {"get": {"operationId": "h", "parameters": [
        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
        {"name": "X-Tags", "in": "header", "schema": {"type": "array", "items": {"type": "string"}}},
        {"name": "sid", "in": "cookie", "schema": {"type": "string"}}]}}})
    op = map_spec(doc, "3.0.3", cfg()).operations[0]
    for args, arg in (({"X-Trace": "a\r\nX-Injected: 1"}, "X-Trace"), ({"X-Trace": "a\nb"}, "X-Trace"),
                      ({"X-Trace": "a\rb"}, "X-Trace"), ({"X-Trace": "a\0b"}, "X-Trace"),
                      ({"X-Tags": ["ok", "b\r\nX-Injected: 1"]}, "X-Tags"),
                      ({"sid": "v; admin=1"}, "sid"), ({"sid": "v\r\nX: 1"}, "sid")):
        with pytest.raises(ArgumentError) as info:
            build_request(op, args)
        assert info.value.arg == arg and f"argument {arg!r}" in str(info.value)
    req = build_request(op, {"X-Trace": "a: b\tc", "X-Tags": ["x", "y"], "sid": "v=1,2"})
    assert req.headers == {"X-Trace": "a: b\tc", "X-Tags": "x,y"} and req.cookies == {"sid": "v=1,2"}


def test_dot_segment_path_values_are_percent_encoded() -> None:
    doc = _doc({"/files/{name}/{label}": {"get": {"operationId": "f", "parameters": [
        {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "label", "in": "path", "required": True, "style": "label", "schema": {"type": "string"}}]}}})
    op = map_spec(doc, "3.0.3", cfg()).operations[0]
    cases = {(".", "x"): "/files/%2E/.x", ("..", "x"): "/files/%2E%2E/.x", ("...", "x"): "/files/.../.x",
             ("a/../b", "x"): "/files/a%2F..%2Fb/.x", ("%2e%2e", "x"): "/files/%252e%252e/.x",
             ("n", "."): "/files/n/%2E%2E", ("n", ""): "/files/n/%2E"}
    for (name, label), path in cases.items():
        assert build_request(op, {"name": name, "label": label}).path == path, (name, label)

r"""Tool controls for upstream MCP servers (include/exclude, overrides) and portable patterns in
their schemas: through the gateway, with the official SDK as upstream and as client."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import MCPError
from pydantic import ValidationError

from connectors.base import ToolSpec
from connectors.mcp.config import MCPConfig
from connectors.mcp.controls import present_tools
from gateway.checks import deep_check
from gateway.config import parse_config
from gateway.protocol.portable_schema import UNPORTABLE_NOTE, portable_schema
from tests.connectors.mcp.test_gateway_e2e import all_tools, client, config, mcp_entry
from tests.protocol.test_patterns import javascript
from tests.support import running_gateway


def _cfg(**kw: Any) -> MCPConfig:
    return MCPConfig.model_validate({"name": "up", "type": "mcp", "command": "x", **kw})


def _tool(name: str, **extra: Any) -> ToolSpec:
    return ToolSpec(name, {"name": name, "inputSchema": {"type": "object"}, **extra})


def test_include_exclude_and_overrides_are_applied_to_the_listing() -> None:
    cfg = _cfg(include={"tools": ["get_*", "delete_*", "echo"]}, exclude={"tools": ["delete_*"]},
               overrides={"get_user": {"name": "user", "title": "User", "description": "One user.",
                                       "annotations": {"readOnlyHint": True}}})
    upstream = (_tool("get_user", description="old", annotations={"openWorldHint": False, "readOnlyHint": False}),
                _tool("get_team"), _tool("delete_user"), _tool("echo"), _tool("other"))
    presented = present_tools(upstream, cfg)
    assert [t.name for t in presented.tools] == ["echo", "get_team", "user"]
    user = next(t for t in presented.tools if t.name == "user").definition
    assert user["name"] == "user" and user["title"] == "User" and user["description"] == "One user."
    # annotations merge key by key over the upstream's
    assert user["annotations"] == {"openWorldHint": False, "readOnlyHint": True}
    assert presented.upstream_names == {"user": "get_user"}
    assert presented.problems == ()


def test_overrides_that_cannot_apply_are_reported() -> None:
    # Renaming onto a tool the upstream serves under that name: the upstream's own tool keeps it.
    presented = present_tools((_tool("a"), _tool("b")), _cfg(overrides={"a": {"name": "b"}, "ghost": {"title": "x"}}))
    assert [t.name for t in presented.tools] == ["b"] and presented.tools[0].definition == _tool("b").definition
    assert presented.problems == ("overrides: 'a' renamed to 'b', which upstream tool 'b' already has; it is not served",
                                  "overrides: the upstream has no tool 'ghost'")


def test_two_overrides_onto_one_name_are_a_config_error() -> None:
    with pytest.raises(ValidationError, match="'a' and 'b' are both served as 'x'"):
        _cfg(overrides={"a": {"name": "x"}, "b": {"name": "x"}})
    with pytest.raises(ValidationError, match="'a' and 'b' are both served as 'b'"):
        _cfg(overrides={"a": {"name": "b"}, "b": {"description": "kept under its own name"}})
    with pytest.raises(ValidationError, match="pattern"):
        _cfg(overrides={"a": {"name": "has space"}})
    with pytest.raises(ValidationError, match="extra"):
        _cfg(overrides={"a": {"annotations": {"readOnly": True}}})  # a misspelt hint is an error


def test_portable_schema_rewrites_drops_with_a_note_and_leaves_data_alone() -> None:
    schema = {"type": "object", "properties": {
        "word": {"type": "string", "pattern": r"^\p{L}+$", "description": "A word."},
        "code": {"type": "string", "pattern": r"^\x{41}\d$"},
        "list": {"type": "array", "items": {"type": "string", "pattern": r"\p{ASCII}"}},
        "plain": {"type": "string", "pattern": "^[a-z]+$", "default": {"pattern": r"\p{L}"}}},
        "patternProperties": {r"^\p{Lu}": {"type": "string"}}}
    out = portable_schema(schema, "the upstream server")
    props = out["properties"]
    assert "pattern" not in props["word"]
    assert props["word"]["description"].startswith("A word.\n\n" + UNPORTABLE_NOTE)
    assert r"the value must match ^\p{L}+$" in props["word"]["description"]
    assert props["word"]["description"].endswith("The upstream server checks it.")
    assert props["code"]["pattern"] == r"^\x41\d$"
    assert props["list"]["items"]["pattern"] == r"[\x00-\x7F]"
    assert props["plain"] is schema["properties"]["plain"]  # untouched, data included, not copied
    assert out["patternProperties"] == {} and r"properties named like ^\p{Lu}" in out["description"]
    assert schema["properties"]["word"]["pattern"] == r"^\p{L}+$"  # the input is not changed
    same = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x$"}}}
    assert portable_schema(same) is same


async def test_controls_and_portable_patterns_through_the_gateway() -> None:
    entry = mcp_entry("up", "stdio", "--controls", protocol="legacy",
                      include={"tools": ["echo", "letters", "big", "progress"], "prompts": ["nothing*"],
                               "resources": ["mem://item/*"]},
                      exclude={"tools": ["big"], "resources": ["mem://item/9*"]},
                      overrides={"echo": {"name": "say", "title": "Say", "description": "Say it back.",
                                          "annotations": {"readOnlyHint": True, "idempotentHint": True}}})
    async with running_gateway(config(entry)) as gw, client(gw.mcp_url) as (session, _rec):
        assert sorted(await all_tools(session)) == ["up_letters", "up_progress", "up_say"]
        tools = {t.name: t for t in (await session.list_tools()).tools}
        say = tools["up_say"]
        assert say.title == "Say" and say.description == "Say it back."
        assert say.annotations is not None and say.annotations.read_only_hint and say.annotations.idempotent_hint
        # The renamed tool is called upstream by its own name; the old name is not served.
        result = await session.call_tool("up_say", {"text": "hi"})
        assert not result.is_error and result.content[0].text == "hi"  # type: ignore[union-attr]
        for hidden in ("up_echo", "up_big"):
            with pytest.raises(MCPError):
                await session.call_tool(hidden, {"text": "hi", "size": 1})
        assert (await session.list_prompts()).prompts == []
        assert [r.uri for r in (await session.list_resources()).resources] == []  # mem://static is not included
        assert (await session.read_resource("mem://item/4")).contents[0].text == "item 4"  # type: ignore[arg-type,union-attr]
        with pytest.raises(MCPError, match="not found"):
            await session.read_resource("mem://static")  # type: ignore[arg-type]
        # A URI the served template matches but an exclude names: refused by the connector itself.
        for uri in ("mem://static", "mem://item/9"):
            with pytest.raises(MCPError, match="not found"):
                await session.read_resource(uri)  # type: ignore[arg-type]
            with pytest.raises(MCPError, match="not found"):
                await session.subscribe_resource(uri)  # type: ignore[arg-type]

        # Portable schema: \x{41} rewritten, \p{L} (no form in Python's re) left out and described.
        schema = tools["up_letters"].input_schema
        word, code = schema["properties"]["word"], schema["properties"]["code"]
        assert code["pattern"] == r"^\x41\d$" and "pattern" not in word
        assert UNPORTABLE_NOTE in word["description"] and r"^\p{L}+$" in word["description"]
        patterns = re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(schema))
        assert patterns and all("error" not in v for v in javascript([(json.loads(f'"{p}"'), []) for p in patterns]))
        Draft202012Validator(schema).validate({"word": "héllo", "code": "A1"})  # a Python client can validate
        # The upstream still applies its own rule to the arguments the caller sent.
        ok = await session.call_tool("up_letters", {"word": "héllo", "code": "A7"})
        assert not ok.is_error and ok.content[0].text == "héllo A7"  # type: ignore[union-attr]
        bad = await session.call_tool("up_letters", {"word": "h3llo"})
        assert bad.is_error and "pattern" in bad.content[0].text  # type: ignore[union-attr]


async def test_validate_deep_reports_an_override_for_a_tool_the_upstream_lacks() -> None:
    entry = mcp_entry("up", "stdio", "", protocol="legacy", overrides={"nope": {"description": "x"}})
    cfg = parse_config(config(entry))
    [probe] = await deep_check(cfg, timeout_s=60)
    assert not probe.ok and probe.detail == "overrides: the upstream has no tool 'nope'"

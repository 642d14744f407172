"""The reference server of the conformance runs, built with the official ``mcp`` SDK 2.x (MCPServer).

It serves what the server scenarios of ``@modelcontextprotocol/conformance`` name: the ``test_*``
tools, the ``test://`` resources and resource template, the ``test_*`` prompts, completion,
subscriptions and logging. The 2025-11-25 suite runs *through the gateway*, which chains it with
an empty prefix, so the suite sees these exact names on the gateway's endpoint.

Run: ``python upstream_fixture.py`` (stdio) or ``python upstream_fixture.py --http PORT``, with
``--era dual|legacy|modern`` (:mod:`tests.sdk_server`; ``dual``, the SDK's own behaviour, by default).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's tests package
from tests.sdk_server import ERAS, serve  # noqa: E402

# A 1x1 PNG and a tiny WAV header: the scenarios only check type and mime type.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"},
                                                          "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

mcp: MCPServer[Any] = MCPServer("conformance-upstream", version="1.0.0", log_level="WARNING")


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


@mcp.tool()
def test_simple_text() -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[types.ImageContent]:
    """Returns one image block."""
    return [types.ImageContent(type="image", data=PNG, mime_type="image/png")]


@mcp.tool()
def test_audio_content() -> list[types.AudioContent]:
    """Returns one audio block."""
    return [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@mcp.tool()
def test_embedded_resource() -> list[types.EmbeddedResource]:
    """Returns an embedded text resource."""
    return [types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."))]  # type: ignore[arg-type]


@mcp.tool()
def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
    """Returns text, image and resource blocks."""
    return [
        _text("Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json",  # type: ignore[arg-type]
            text=json.dumps({"test": "data", "value": 123}))),
    ]


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while running."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await asyncio.sleep(0.05)
    meta = ctx.request_context.meta
    return str(meta.get("progress_token", 0) if meta else 0)


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client for an LLM completion of `prompt`."""
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=_text(prompt))], max_tokens=100,
        related_request_id=ctx.request_id)
    content = result.content
    return f"LLM response: {content.text if isinstance(content, types.TextContent) else 'No response'}"


class UserResponse(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for input."""
    result = await ctx.elicit(message=message, schema=UserResponse)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"User response: action={result.action}, content={content}"


class Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(default="active", description="User status",
                        json_schema_extra={"enum": ["active", "inactive", "pending"]})
    verified: bool = Field(default=True, description="Verification status")


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicitation whose schema has defaults for every primitive type (SEP-1034)."""
    result = await ctx.elicit(message="Please provide user information", schema=Defaults)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"Elicitation completed: action={result.action}, content={content}"


class Enums(BaseModel):
    untitledSingle: str = Field(description="Untitled single-select",
                                json_schema_extra={"enum": ["option1", "option2", "option3"]})
    titledSingle: str = Field(description="Titled single-select", json_schema_extra={"oneOf": [
        {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
        {"const": "value3", "title": "Third Option"}]})
    legacyEnum: str = Field(description="Legacy titled enum", json_schema_extra={
        "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]})
    untitledMulti: list[str] = Field(description="Untitled multi-select", json_schema_extra={
        "items": {"type": "string", "enum": ["option1", "option2", "option3"]}})
    titledMulti: list[str] = Field(description="Titled multi-select", json_schema_extra={"items": {"anyOf": [
        {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
        {"const": "value3", "title": "Third Choice"}]}})


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicitation with the five enum schema variants (SEP-1330)."""
    result = await ctx.elicit(message="Please select values using different enum schema types", schema=Enums)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"Elicitation completed: action={result.action}, content={content}"


@mcp.tool()
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """Logs before and after a pause (the SSE polling scenario calls it)."""
    await ctx.info("Before disconnect")
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@mcp.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "", address: dict | None = None) -> str:
    return f"ok {name}"


# The scenario checks that $schema, $defs and additionalProperties survive the listing verbatim.
mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = JSON_SCHEMA_2020_12


@mcp.resource("test://static-text", mime_type="text/plain", description="A static text resource")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png", description="A static binary resource")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@mcp.resource("test://template/{id}/data", mime_type="application/json", description="A templated resource")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource("test://watched-resource", mime_type="text/plain", description="A subscribable resource")
def watched() -> str:
    return "Watched resource content"


@mcp.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [UserMessage(content=_text("This is a simple prompt for testing."))]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [UserMessage(content=_text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt embedding a resource."""
    return [
        UserMessage(content=types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."))),  # type: ignore[arg-type]
        UserMessage(content=_text("Please process the embedded resource above.")),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    return [UserMessage(content=types.ImageContent(type="image", data=PNG, mime_type="image/png")),
            UserMessage(content=_text("Please analyze the image above."))]


_subscriptions: set[str] = set()


async def _subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
    _subscriptions.add(params.uri)
    return types.EmptyResult()


async def _unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    _subscriptions.discard(params.uri)
    return types.EmptyResult()


async def _set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


# MCPServer has no public hook for these legacy methods: the lowlevel server takes them.
_low = mcp._lowlevel_server
_low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
_low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)
_low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)


@mcp.completion()
async def _complete(ref: object, argument: types.CompletionArgument, context: object) -> types.Completion:
    return types.Completion(values=[], total=0, has_more=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0, help="serve Streamable HTTP on this port instead of stdio")
    parser.add_argument("--era", default="dual", choices=ERAS)
    args = parser.parse_args()
    if args.http:
        serve(mcp, "streamable_http", args.era, args.http)
    else:
        serve(mcp, "stdio", args.era)


if __name__ == "__main__":
    main()

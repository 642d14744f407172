"""The reference server of the conformance runs, built with the official ``mcp`` SDK 2.x (MCPServer).

It serves what the server scenarios of ``@modelcontextprotocol/conformance`` name: the ``test_*``
tools, the ``test://`` resources and resource template, the ``test_*`` prompts, completion,
subscriptions and logging. The 2025-11-25 suite runs *through the gateway*, which chains it with
an empty prefix, so the suite sees these exact names on the gateway's endpoint.

It stands in for the SDK's own reference, ``examples/servers/everything-server`` of the SDK's
repository, which neither the ``mcp`` wheel nor the npm conformance packages ship: like it, it is
dual-era (the SDK's default) and asks the way the reference does for each revision's scenarios —
over the session, mid-call, in the 2025-11-25 tools (``test_sampling``, ``test_elicitation*``: a
2026-07-28 request has no back-channel for that), with an ``InputRequiredResult`` in the 2026-07-28
ones (``test_input_required_result_*``, ``test_streaming_elicitation``).

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
from typing import Annotated, Any

from mcp import MCPError, types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's tests package
from tests.sdk_server import ERAS, serve  # noqa: E402

# A 1x1 PNG and a tiny WAV header: the scenarios only check type and mime type.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

JSON_SCHEMA_2020_12 = {  # as the json-schema-2020-12 scenarios describe it (SEP-1613, SEP-2106)
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
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


# The 2025-11-25 scenarios' tools ask the way the official reference server's do: over the session,
# mid-call (ctx.session.create_message, ctx.elicit), which needs the session's back-channel; any
# failure (no back-channel: a 2026-07-28 request) is returned as text, as the reference does.
@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client for an LLM completion of `prompt` (over the session)."""
    try:
        result = await ctx.session.create_message(messages=[types.SamplingMessage(role="user", content=_text(prompt))],
                                                  max_tokens=100, related_request_id=ctx.request_id)
    except Exception as exc:
        return f"Sampling not supported or error: {exc}"
    content = result.content
    return f"LLM response: {content.text if isinstance(content, types.TextContent) else 'No response'}"


class UserResponse(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


async def _ask_over_session(ctx: Context, message: str, schema: type[BaseModel], done: str) -> str:
    try:
        result = await ctx.elicit(message, schema)
    except Exception as exc:
        return f"Elicitation not supported or error: {exc}"
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"{done}: action={result.action}, content={content}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for input (over the session)."""
    return await _ask_over_session(ctx, message, UserResponse, "User response")


class Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(default="active", description="User status",
                        json_schema_extra={"enum": ["active", "inactive", "pending"]})
    verified: bool = Field(default=True, description="Verification status")


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicitation whose schema has defaults for every primitive type (SEP-1034), over the session."""
    return await _ask_over_session(ctx, "Please provide user information", Defaults, "Elicitation completed")


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
    """Elicitation with the five enum schema variants (SEP-1330), over the session."""
    return await _ask_over_session(ctx, "Please select values using different enum schema types", Enums,
                           "Elicitation completed")


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


# The scenarios check that the schema's keywords survive the listing verbatim; MCPServer derives a
# tool's schema from its signature and has no public override, so the registered tool gets it.
mcp._tool_manager._tools["json_schema_2020_12_tool"].parameters = JSON_SCHEMA_2020_12


@mcp.tool()
def test_x_mcp_header(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
                      query: str = "") -> str:
    """Its `region` argument is mirrored in an Mcp-Param-Region header on 2026-07-28 HTTP (SEP-2243)."""
    return f"region={region} query={query}"


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


# --- 2026-07-28 (the stateless revision): what the `--requirements 2026-07-28` server scenarios ask
# of the reference. On that revision a server never sends requests of its own: a tool that needs
# the client returns an InputRequiredResult naming what it needs (SEP-2322) and the client retries
# the call with `inputResponses` (and the echoed `requestState`, sealed by MCPServer's request-state
# boundary, so a tampered one is refused before the tool runs).


def _form(message: str, field: str, kind: str = "string") -> types.ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def _sampling(text: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=_text(text))], max_tokens=max_tokens))


def _answer(ctx: Context, key: str) -> types.InputResponse | None:
    return (ctx.input_responses or {}).get(key)


def _elicited(response: types.InputResponse | None, field: str) -> str | None:
    if isinstance(response, types.ElicitResult) and response.action == "accept" and response.content:
        value = response.content.get(field)
        return None if value is None else str(value)
    return None


def _sampled(response: types.InputResponse | None) -> str | None:
    if isinstance(response, types.CreateMessageResult) and isinstance(response.content, types.TextContent):
        return response.content.text
    return None


def _roots(response: types.InputResponse | None) -> list[str] | None:
    return [root.uri for root in response.roots] if isinstance(response, types.ListRootsResult) else None


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for the user's name (elicitation) before greeting."""
    name = _elicited(_answer(ctx, "user_name"), "name")
    if name is None:  # first round, or a retry without a usable answer: ask (again)
        return types.InputRequiredResult(input_requests={"user_name": _form("What is your name?", "name")})
    return f"Hello, {name}!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | types.InputRequiredResult:
    """Asks the client's model a question (sampling) and returns its answer."""
    answer = _sampled(_answer(ctx, "capital_question"))
    if answer is None:
        return types.InputRequiredResult(
            input_requests={"capital_question": _sampling("What is the capital of France?", 100)})
    return f"The model answered: {answer}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for the client's roots and names them."""
    roots = _roots(_answer(ctx, "client_roots"))
    if roots is None:
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})
    return f"Client roots: {', '.join(roots) or '(none)'}"


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | types.InputRequiredResult:
    """Round-trips a requestState alongside an elicitation."""
    confirmed = _answer(ctx, "confirm")
    if confirmed is None or ctx.request_state != "awaiting-confirmation":
        return types.InputRequiredResult(input_requests={"confirm": _form("Please confirm", "ok", "boolean")},
                                         request_state="awaiting-confirmation")
    return "state-ok: the request state came back intact"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for an elicitation, a sampling and the roots at once."""
    name = _elicited(_answer(ctx, "user_name"), "name")
    greeting = _sampled(_answer(ctx, "greeting"))
    roots = _roots(_answer(ctx, "client_roots"))
    if name is None or greeting is None or roots is None or ctx.request_state != "three-inputs":
        return types.InputRequiredResult(
            input_requests={"user_name": _form("What is your name?", "name"),
                            "greeting": _sampling("Generate a greeting", 50),
                            "client_roots": types.ListRootsRequest()},
            request_state="three-inputs")
    return f"{greeting} {name} (roots: {', '.join(roots) or '(none)'})"


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | types.InputRequiredResult:
    """Two questions in two rounds, the requestState evolving between them."""
    if ctx.request_state == "round-2":
        color = _elicited(_answer(ctx, "step2"), "color")
        if color is not None:
            return f"Your favorite color is {color}"
    if ctx.request_state == "round-1":
        name = _elicited(_answer(ctx, "step1"), "name")
        if name is not None:
            return types.InputRequiredResult(
                input_requests={"step2": _form("Step 2: What is your favorite color?", "color")},
                request_state="round-2")
    return types.InputRequiredResult(input_requests={"step1": _form("Step 1: What is your name?", "name")},
                                     request_state="round-1")


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | types.InputRequiredResult:
    """Issues a sealed requestState; a tampered copy never reaches this body (the SDK refuses it)."""
    if ctx.request_state == "sealed-round-1" and _answer(ctx, "confirm") is not None:
        return "state verified"
    return types.InputRequiredResult(input_requests={"confirm": _form("Please confirm", "ok", "boolean")},
                                     request_state="sealed-round-1")


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str | types.InputRequiredResult:
    """Asks only for what the client declared it can answer."""
    caps = ctx.client_capabilities or types.ClientCapabilities()
    requests: dict[str, types.InputRequest] = {}
    if caps.elicitation is not None:
        requests["user_name"] = _form("What is your name?", "name")
    if caps.sampling is not None:
        requests["greeting"] = _sampling("Generate a greeting", 50)
    if caps.roots is not None:
        requests["client_roots"] = types.ListRootsRequest()
    if not requests or all(_answer(ctx, key) is not None for key in requests):
        return f"answered: {', '.join(sorted(requests)) or '(nothing needed)'}"
    return types.InputRequiredResult(input_requests=requests, request_state="capability-gated")


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | types.InputRequiredResult:
    """A prompt that asks the user for context first (an InputRequiredResult outside tools/call)."""
    context = _elicited(_answer(ctx, "user_context"), "context")
    if context is None:
        return types.InputRequiredResult(
            input_requests={"user_context": _form("What context should the prompt use?", "context")})
    return [UserMessage(content=_text(f"Answer with this context in mind: {context}"))]


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability: without it, -32021 (it is never used, only required)."""
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None:
        raise MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                       message="This tool requires the client's sampling capability",
                       data={"requiredCapabilities": {"sampling": {}}})
    return "the client can sample"


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str | types.InputRequiredResult:
    """Reports progress on its response stream, then asks for a confirmation as an input request."""
    await ctx.report_progress(1, 2, "thinking")
    if _answer(ctx, "confirm") is None:
        return types.InputRequiredResult(input_requests={"confirm": _form("Proceed?", "ok", "boolean")})
    return "confirmed"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs one message: delivered only to a request that opted in with a log level."""
    await ctx.info("test_logging_tool ran")
    return "logged"


def _dynamic() -> str:
    return "dynamic"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Changes the tool list and announces it on subscriptions/listen streams."""
    mcp.add_tool(_dynamic, name="test_dynamic_tool", description="Added and removed by test_trigger_tool_change")
    mcp.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "tool list changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Changes the prompt list and announces it on subscriptions/listen streams."""
    mcp.add_prompt(Prompt.from_function(_dynamic, name="test_dynamic_prompt",
                                        description="Added and removed by test_trigger_prompt_change"))
    mcp.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    return "prompt list changed"


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

"""A real upstream MCP server for the connector's tests, built with the official SDK 2.x (MCPServer).

Run: ``python upstream_server.py --transport stdio|sse|streamable_http [--era dual|legacy|modern]
[--port P] [--tools N --page-size K]``. ``--era`` picks the protocol era it serves (see
:mod:`tests.sdk_server`; the SDK's own behaviour, ``dual``, is the default). Tools: ``echo``, ``progress`` (reports ``steps`` progress notifications),
``sample`` (asks the client for sampling and returns its text), ``elicit_name`` and ``roots``
(ask the client over the session: elicitation, roots/list), ``log_then_echo``, ``hang``
(sleeps, records cancellations by tag), ``die`` (exits the process mid-call), ``pid``, ``grow`` (adds a
tool and sends list_changed), ``touch`` (sends resources/updated to subscribers); a static
resource ``mem://static``, a template ``mem://item/{id}``, a prompt ``greet``. ``--tools N`` adds
``extra_000``... and paginates every tools/list by ``--page-size``; ``--ui TEXT`` adds an MCP Apps
tool ``widget`` whose ``_meta.ui.resourceUri`` is ``ui://widget``; ``--resumable`` keeps SSE events so
``reconnect`` (which cuts its own response stream) can be resumed with ``Last-Event-ID``.

For 2026-07-28 (modern) requests: with ``--mrtr``, ``ask_llm`` and ``ask_name`` answer with an
InputRequiredResult (sampling, elicitation), as does ``ask_roots`` (roots/list), until retried with the answer (and the
``requestState`` they set), as do the prompt ``ask_prompt`` and the template ``ask://{id}``; ``grow`` and ``touch`` also publish to
``subscriptions/listen`` streams; ``region_info`` has a parameter mirrored into the
``Mcp-Param-Region`` header (the SDK checks it against the body) and ``headers`` returns the HTTP
request headers it was sent with (JSON). ``--bad-header-tool`` adds a tool whose x-mcp-header
annotation is invalid to the tools listing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

from mcp import MCPError, types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run as a script: the repo's tests package
from tests.sdk_server import add_era_arguments, serve  # noqa: E402

CANCELLED: list[str] = []
CANCELLED_EVENT = asyncio.Event()


class MemoryEventStore(EventStore):
    """Keeps every SSE event so a client can resume a cut stream with Last-Event-ID."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, types.JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _m in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for s, e, m in self.events:
            if s == stream and int(e) > int(last_event_id) and m is not None:
                await send_callback(EventMessage(m, e))
        return stream


_background: set[asyncio.Task[None]] = set()  # chatter_later's tasks, kept until they finish


def build(args: argparse.Namespace) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("upstream-test", log_level="WARNING")

    @mcp.tool()
    async def reconnect(ctx: Context) -> str:
        """Close this call's SSE stream mid-call (SEP-1699); the client resumes with Last-Event-ID."""
        await ctx.info("before the cut")
        await ctx.close_sse_stream()
        await asyncio.sleep(0.2)
        await ctx.info("after the cut")
        return "survived the cut"

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @mcp.tool()
    async def progress(steps: int, ctx: Context, delay: float = 0.01) -> str:
        """Report `steps` progress notifications, then return."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
            await asyncio.sleep(delay)
        meta = ctx.request_context.meta
        token = meta.get("progress_token") if meta else None
        return f"done {steps} (upstream token {token})"

    @mcp.tool()
    async def sample(prompt: str, ctx: Context) -> str:
        """Ask the client to sample and return what it answered (a refusal is a tool error)."""
        try:
            result = await ctx.session.create_message(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
                max_tokens=20, related_request_id=ctx.request_id)
        except MCPError as exc:  # SDK 2.x would turn it into the tools/call's own JSON-RPC error
            raise ToolError(f"sampling refused: {exc.error.message}") from None
        text = result.content.text if isinstance(result.content, types.TextContent) else "?"
        return f"sampled: {text}"

    @mcp.tool()
    async def elicit_name(ctx: Context) -> str:
        """Ask the client for a name (elicitation over the session, a legacy client's way), then greet."""
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        result = await ctx.session.elicit_form("Your name?", schema, related_request_id=ctx.request_id)
        if result.action != "accept" or not result.content:
            return f"no name ({result.action})"
        return f"Hello, {result.content.get('name')}!"

    @mcp.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots (roots/list over the session, a legacy client's way), comma-separated."""
        result = await ctx.session.list_roots()
        return ",".join(str(r.uri) for r in result.roots)

    @mcp.tool()
    async def log_then_echo(text: str, ctx: Context) -> str:
        """Send two log messages, then echo."""
        await ctx.info(f"first {text}")
        await ctx.info(f"second {text}")
        return text

    @mcp.tool()
    async def chatter(ctx: Context, seconds: float = 2.0, size: int = 1000) -> str:
        """Send log messages of `size` characters (and progress, when asked) as fast as it can for
        `seconds`; answer how many it sent."""
        loop = asyncio.get_running_loop()
        end, sent, line = loop.time() + seconds, 0, "x" * size
        while loop.time() < end:
            await ctx.info(f"{sent} {line}")
            await ctx.report_progress(sent)
            sent += 1
        return str(sent)

    @mcp.tool()
    async def chatter_later(ctx: Context, seconds: float = 2.0) -> str:
        """Answer at once, then send log messages belonging to no request as fast as it can for
        `seconds` (the gateway sends such messages to every session)."""
        session, loop = ctx.session, asyncio.get_running_loop()

        async def chatter() -> None:
            end, sent = loop.time() + seconds, 0
            while loop.time() < end:
                await session.send_log_message("info", f"later {sent}")
                sent += 1
            await session.send_log_message("info", f"later done: {sent}")

        _background.add(task := asyncio.create_task(chatter()))
        task.add_done_callback(_background.discard)
        return "chattering"

    @mcp.tool()
    async def hang(ctx: Context, seconds: float = 30.0, tag: str = "hang") -> str:
        """Log "hanging", then sleep; a cancellation is recorded (as `tag`) and reported by `cancelled`."""
        await ctx.info("hanging")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            CANCELLED.append(tag)
            CANCELLED_EVENT.set()
            raise
        return "woke up"

    @mcp.tool()
    async def cancelled(wait: float = 0.0, tag: str = "") -> str:
        """Which calls were cancelled so far (waiting up to `wait` seconds for a first one, or
        for one tagged `tag`)."""
        async def seen() -> None:
            while not CANCELLED or (tag and tag not in CANCELLED):
                CANCELLED_EVENT.clear()
                await CANCELLED_EVENT.wait()
        if wait:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(seen(), wait)
        return ",".join(CANCELLED)

    @mcp.tool()
    async def die(ctx: Context) -> str:
        """Exit the server process in the middle of the call."""
        await ctx.info("about to die")
        await asyncio.sleep(0.05)
        os._exit(3)

    @mcp.tool()
    def big(size: int) -> str:
        """A text of `size` characters (large results cross every transport)."""
        return "x" * size

    @mcp.tool()
    def seen_meta(ctx: Context) -> str:
        """The request's _meta as this server received it (JSON)."""
        params = ctx.request_context.params or {}  # the wire form: camelCase keys, as sent
        return json.dumps(params.get("_meta") or {})

    @mcp.tool()
    def env(name: str) -> str:
        """The value of an environment variable ("" when unset)."""
        return os.environ.get(name, "")

    @mcp.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    grown: list[str] = []

    @mcp.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool and announce it with notifications/tools/list_changed."""
        name = f"grown_{len(grown)}"
        grown.append(name)
        mcp.add_tool(lambda: name, name=name, description="A tool added at run time")
        await ctx.session.send_tool_list_changed()  # a legacy session (dropped at 2026-07-28)
        await ctx.notify_tools_changed()  # subscriptions/listen streams
        return name

    @mcp.tool()
    async def touch(ctx: Context) -> str:
        """Announce that mem://static changed (sent to subscribers only)."""
        if "mem://static" in subscribed:
            await ctx.session.send_resource_updated("mem://static")
        await ctx.notify_resource_updated("mem://static")  # listen streams that asked for the URI
        return ",".join(sorted(subscribed))

    # -- 2026-07-28: multi round-trip requests, request headers ------------------------------------
    def _answer(ctx: Context, key: str) -> Any:
        return (ctx.input_responses or {}).get(key)

    def _elicit(message: str) -> types.ElicitRequest:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))

    def _elicited(ctx: Context) -> str | None:
        answer = _answer(ctx, "who")
        if isinstance(answer, types.ElicitResult) and answer.action == "accept" and answer.content:
            return str(answer.content.get("name"))
        return None

    if args.mrtr:
        @mcp.tool()
        async def ask_llm(prompt: str, ctx: Context) -> str | types.InputRequiredResult:
            """Ask the client's model (sampling, as an InputRequiredResult) and return its answer."""
            answer = _answer(ctx, "llm")
            if ctx.request_state == "asked-llm" and isinstance(answer, types.CreateMessageResult) \
                    and isinstance(answer.content, types.TextContent):
                return f"sampled: {answer.content.text}"
            ask = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
                max_tokens=20))
            return types.InputRequiredResult(input_requests={"llm": ask}, request_state="asked-llm")

        @mcp.tool()
        async def ask_name(ctx: Context) -> str | types.InputRequiredResult:
            """Ask the user's name (elicitation), then greet."""
            name = _elicited(ctx)
            if name is None:
                return types.InputRequiredResult(input_requests={"who": _elicit("Your name?")}, request_state="asked")
            return f"Hello, {name}!"

        @mcp.tool()
        async def ask_roots(ctx: Context) -> str | types.InputRequiredResult:
            """Ask the client's roots (an InputRequiredResult), then list them comma-separated."""
            answer = _answer(ctx, "roots")
            if isinstance(answer, types.ListRootsResult):
                return ",".join(str(r.uri) for r in answer.roots)
            return types.InputRequiredResult(input_requests={"roots": types.ListRootsRequest()})

        @mcp.prompt()
        def ask_prompt(ctx: Context) -> str | types.InputRequiredResult:
            """A prompt that first asks the user's name."""
            name = _elicited(ctx)
            if name is None:
                return types.InputRequiredResult(input_requests={"who": _elicit("Prompt for whom?")})
            return f"A prompt for {name}"

        @mcp.resource("ask://{id}", mime_type="text/plain")
        def ask_resource(id: str, ctx: Context) -> str | types.InputRequiredResult:
            """A resource that first asks the user's name."""
            name = _elicited(ctx)
            if name is None:
                return types.InputRequiredResult(input_requests={"who": _elicit(f"Read {id} as whom?")})
            return f"{id} read by {name}"

    @mcp.tool()
    def region_info(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
                    query: str = "") -> str:
        """A tool whose region is mirrored into the Mcp-Param-Region header."""
        return f"{region}: {query}"

    @mcp.tool()
    def headers(ctx: Context, zone: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Zone"})] = "") -> str:
        """The HTTP request headers this call arrived with (JSON; {} off HTTP)."""
        found = getattr(ctx.request_context.request, "headers", None)
        return json.dumps(dict(found) if found is not None else {})

    subscribed: set[str] = set()

    async def _subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.add(params.uri)
        return types.EmptyResult()

    async def _unsubscribe(ctx: ServerRequestContext[Any],
                           params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.discard(params.uri)
        return types.EmptyResult()

    # MCPServer has no public hook for these legacy methods: the lowlevel server takes them.
    low = mcp._lowlevel_server
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)

    @mcp.resource("mem://static", mime_type="text/plain")
    def static() -> str:
        """A static text."""
        return "static text"

    @mcp.resource("mem://item/{id}", mime_type="text/plain")
    def item(id: str) -> str:
        """An item by id."""
        return f"item {id}"

    @mcp.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello {name}"

    if args.ui:
        # An MCP Apps tool: its UI is the resource named by _meta.ui.resourceUri.
        @mcp.resource("ui://widget", mime_type="text/html;profile=mcp-app")
        def widget_ui() -> str:
            """The widget's UI."""
            return f"<p>{args.ui}</p>"

        @mcp.tool(meta={"ui": {"resourceUri": "ui://widget"}})
        def widget() -> str:
            """A tool with a UI."""
            return args.ui

    if args.odd_names:
        # Names MCP allows but model APIs refuse (a dot, a slash, a leading digit), and one that the
        # portable spelling of another clashes with.
        for odd in ("search.issues", "search_issues", "2fa/enable"):
            mcp.add_tool(lambda odd=odd: f"called {odd}", name=odd, description=f"The tool {odd}.")

    if args.controls:
        calls = {"n": 0}

        @mcp.tool(annotations=types.ToolAnnotations(read_only_hint=True))
        def counter(key: str = "") -> str:
            """How many times this tool was called (a result that shows whether a call was cached)."""
            calls["n"] += 1
            return f"{key} {calls['n']}"

        @mcp.tool(annotations=types.ToolAnnotations(read_only_hint=True))
        def flaky() -> str:
            """A read-only tool that always fails (error results are never cached)."""
            calls["n"] += 1
            raise ToolError(f"failure {calls['n']}")

        # A Java/PCRE-style pattern (pydantic's Rust regex reads \p{L}; JavaScript's u flag does,
        # Python's re does not): the upstream validates with it, clients cannot all compile it.
        @mcp.tool(annotations=types.ToolAnnotations(read_only_hint=False))
        def letters(word: Annotated[str, Field(pattern=r"^\p{L}+$")],
                    code: Annotated[str, Field(pattern=r"^\x{41}\d$")] = "A1") -> str:
            """Echo a word of letters."""
            return f"{word} {code}"

    for i in range(args.tools):
        def extra(i: int = i) -> str:
            return f"extra {i}"
        mcp.add_tool(extra, name=f"extra_{i:03d}", description=f"Extra tool {i}")

    bad = [types.Tool(name="bad_header", description="x-mcp-header on a number",
                      input_schema={"type": "object", "properties": {
                          "n": {"type": "number", "x-mcp-header": "N"}}})] if args.bad_header_tool else []
    if args.tools or bad:
        page = args.page_size

        async def paged(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams) -> types.ListToolsResult:
            tools = await mcp.list_tools() + bad
            start = int(params.cursor) if params.cursor else 0
            chunk = tools[start:start + page]
            nxt = str(start + page) if start + page < len(tools) else None
            return types.ListToolsResult(tools=chunk, next_cursor=nxt)

        low.add_request_handler("tools/list", types.PaginatedRequestParams, paged)

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    add_era_arguments(parser)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=10)
    parser.add_argument("--resumable", action="store_true", help="keep SSE events for Last-Event-ID resumption")
    parser.add_argument("--ui", default="", help="serve an MCP Apps tool whose UI shows this text")
    parser.add_argument("--mrtr", action="store_true", help="serve the tools, prompt and template that ask for input")
    parser.add_argument("--controls", action="store_true",
                        help="serve a tool whose schema has unportable patterns, and read-only counters")
    parser.add_argument("--odd-names", action="store_true", help="serve tools named search.issues, 2fa/enable ...")
    parser.add_argument("--bad-header-tool", action="store_true", help="list a tool with an invalid x-mcp-header")
    args = parser.parse_args()
    mcp = build(args)
    print(f"upstream-test pid {os.getpid()} transport {args.transport} era {args.era}", file=sys.stderr, flush=True)
    http = {"event_store": MemoryEventStore(), "retry_interval": 50} if args.resumable else {}
    serve(mcp, args.transport, args.era, args.port, **http)


if __name__ == "__main__":
    main()

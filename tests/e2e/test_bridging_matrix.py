"""The bridging matrix (issues 12 and 25): every pair of {SDK client 2025-11-25, SDK client
2026-07-28} × {SDK upstream legacy-only (2025-11-25), modern-only (2026-07-28), dual-era (both, the
SDK's default)}, for every feature a call may use, end to end through the gateway over Streamable
HTTP, and the dual-era upstream over stdio too.

Each cell of :data:`MATRIX` names what the client does and what it must see; the one test below runs
a cell. How each combination is bridged (docs/architecture.md, "Multi round-trip requests"):

* **legacy client × legacy upstream** — sessions on both sides; the upstream's mid-call requests
  (sampling, elicitation, roots/list) are relayed over the client's session, notifications relayed.
* **legacy client × modern upstream** — the upstream answers ``input_required``; the gateway asks
  the client over its session (sampling/createMessage, elicitation/create, roots/list) and retries
  upstream with the answers. Change notifications come from the connector's own
  ``subscriptions/listen`` and reach the client's session (and its ``resources/subscribe``).
* **modern client × legacy upstream** — the upstream asks mid-call; the gateway parks the call and
  answers the client ``input_required`` with a ``requestState`` it seals; the client's retry with
  ``inputResponses`` completes the pending upstream request and gets the tool's result.
* **modern client × modern upstream** — ``input_required`` passes through, its ``requestState``
  sealed around the upstream's.

* **dual-era upstream** — its tools ask in both styles: over the session mid-call (``sample``,
  ``elicit_name``, ``roots``: ``ctx.session.create_message``/``elicit_form``/``list_roots``) and
  with an ``InputRequiredResult`` (``ask_llm``, ``ask_name``, ``ask_roots``). Directly, a
  2025-11-25 client gets the first kind answered and the second refused, a 2026-07-28 client the
  reverse (a stateless request has no back-channel). Through the gateway each caller is served in
  its own era (a legacy caller over an upstream session, a modern one statelessly), so each gets
  what it gets directly (``both_styles``). Over stdio a session is a process: the legacy callers'
  session is a second process of the command, with its own memory, so what it lists after a change
  (``grow``) is re-listed from it and joins the listings, and it is subscribed to every watched URI
  (``touch``): a legacy client sees its changes as it would see its own process's directly
  (connectors/mcp/era_process.py).

Change notifications reach a modern client on its ``subscriptions/listen`` stream. Cancellation: a
legacy client sends ``notifications/cancelled``; a modern client over Streamable HTTP closes the
request's stream (basic/patterns/cancellation.mdx), and the gateway cancels upstream the way the
upstream's revision does (``notifications/cancelled`` over a legacy session, closing the stream of
the forwarded request to a modern one). Every cell works: no combination is refused by the spec.

The HTTP upstream processes are shared by the module (the upstream's ``cancelled`` tool is asked
about the cell's own tag, ``grow`` adds a new tool per call), each cell gets its own gateway (and a
stdio upstream of its own).
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from connectors.mcp.sessions import LEGACY_SHARED
from tests.connectors.mcp.helpers import SERVER
from tests.connectors.mcp.test_gateway_e2e import config, mcp_entry
from tests.e2e.clients import LEGACY, MODERN
from tests.support import free_port, running_gateway

CLIENTS = (LEGACY, MODERN)
UPSTREAMS = ("legacy", "modern", "dual", "dual-stdio")  # era, and stdio where it says so
FEATURES = ("plain", "progress", "sampling", "elicitation", "roots", "list_changed", "resource_updated",
            "cancellation", "both_styles")
# Cells that do not exist: both_styles is the dual-era upstream's.
ABSENT = {(c, u, "both_styles") for c in CLIENTS for u in ("legacy", "modern")}
_tags = itertools.count(1)


class Peer:
    """The downstream client's side: its callbacks' answers and everything it received."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.messages: list[Any] = []
        self.asked: list[str] = []  # the methods the gateway asked this client
        self.arrived = asyncio.Event()

    async def sampling(self, _ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sampling/createMessage")
        text = params.messages[0].content.text  # type: ignore[union-attr]
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text=f"{self.label} saw {text}"))

    async def elicitation(self, _ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append("elicitation/create")
        return types.ElicitResult(action="accept", content={"name": self.label})

    async def roots(self, _ctx: Any) -> types.ListRootsResult:
        self.asked.append("roots/list")
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///work/{self.label}", name=self.label)])  # type: ignore[arg-type]

    async def answer(self, request: Any) -> Any:
        """Answer one request of an ``InputRequiredResult`` with this client's own callback."""
        params = getattr(request, "params", None)
        if request.method == "sampling/createMessage":
            return await self.sampling(None, params)
        if request.method == "elicitation/create":
            return await self.elicitation(None, params)
        assert request.method == "roots/list", request
        return await self.roots(None)

    async def on_message(self, message: Any) -> None:
        self.messages.append(message)
        self.arrived.set()

    async def until(self, found: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not found():
                self.arrived.clear()
                await self.arrived.wait()

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]


def text(result: Any) -> str:
    return result.content[0].text if result.content else ""  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Cell:
    client: str
    upstream: str
    feature: str


# -- the cells: what the client does, what it must see ---------------------------------------------

async def plain(client: Client, peer: Peer, cell: Cell) -> None:
    assert text(await client.call_tool("up_echo", {"text": "hi"})) == "hi"
    assert peer.asked == []


async def progress(client: Client, peer: Peer, cell: Cell) -> None:
    seen: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        seen.append(p)
    result = await client.call_tool("up_progress", {"steps": 3}, progress_callback=on_progress)
    assert text(result).startswith("done 3") and seen == [1, 2, 3]


# The tool that asks, per upstream era: a legacy upstream asks over its session mid-call, a modern
# one answers input_required.
ASKING_TOOL = {("sampling", "legacy"): "up_sample", ("sampling", "modern"): "up_ask_llm",
               ("elicitation", "legacy"): "up_elicit_name", ("elicitation", "modern"): "up_ask_name",
               ("roots", "legacy"): "up_roots", ("roots", "modern"): "up_ask_roots"}


def style(cell: Cell) -> str:
    """How the cell's upstream asks: its era's way; a dual-era upstream the client's era's way
    (the way that works when the client talks to it directly)."""
    if cell.upstream.startswith("dual"):
        return "legacy" if cell.client == LEGACY else "modern"
    return cell.upstream


async def asked_call(client: Client, peer: Peer, cell: Cell, args: dict[str, Any], method: str) -> str:
    """Call the cell's asking tool; the client is asked ``method`` once. A legacy client is asked
    over its session; a modern client gets an ``InputRequiredResult`` (one request of ``method``, a
    gateway-sealed ``requestState``), answers it (its own callback) and retries."""
    tool = ASKING_TOOL[cell.feature, style(cell)]
    if cell.client == LEGACY:
        result = await client.call_tool(tool, args)
    else:
        first = await client.session.call_tool(tool, args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert [r.method for r in (first.input_requests or {}).values()] == [method]
        assert isinstance(first.request_state, str) and first.request_state
        answers: dict[str, Any] = {}
        for key, request in (first.input_requests or {}).items():
            answers[key] = await peer.answer(request)
        result = await client.session.call_tool(tool, args, input_responses=answers,
                                                request_state=first.request_state)
    assert peer.asked == [method] and not result.is_error, result
    return text(result)


async def sampling(client: Client, peer: Peer, cell: Cell) -> None:
    answer = await asked_call(client, peer, cell, {"prompt": "q"}, "sampling/createMessage")
    assert answer == f"sampled: {peer.label} saw q"


async def elicitation(client: Client, peer: Peer, cell: Cell) -> None:
    assert await asked_call(client, peer, cell, {}, "elicitation/create") == f"Hello, {peer.label}!"


async def roots(client: Client, peer: Peer, cell: Cell) -> None:
    assert await asked_call(client, peer, cell, {}, "roots/list") == f"file:///work/{peer.label}"


async def list_changed(client: Client, peer: Peer, cell: Cell) -> None:
    if cell.client == LEGACY:
        grown = text(await client.call_tool("up_grow", {}))
        await peer.until(lambda: bool(peer.of(types.ToolListChangedNotification)))
    else:
        async with client.listen(tools_list_changed=True) as events:
            grown = text(await client.call_tool("up_grow", {}))
            event = await asyncio.wait_for(events.__anext__(), 10)
            assert type(event).__name__ == "ToolsListChanged", event
    assert f"up_{grown}" in [t.name for t in (await client.list_tools()).tools]


async def resource_updated(client: Client, peer: Peer, cell: Cell) -> None:
    if cell.client == LEGACY:
        await client.session.subscribe_resource("mem://static")  # type: ignore[arg-type]
        await client.call_tool("up_touch", {})
        await peer.until(lambda: any(str(m.params.uri) == "mem://static"
                                     for m in peer.of(types.ResourceUpdatedNotification)))
    else:
        async with client.listen(resource_subscriptions=["mem://static"]) as events:
            await client.call_tool("up_touch", {})
            event = await asyncio.wait_for(events.__anext__(), 10)
            assert getattr(event, "uri", None) == "mem://static", event


async def cancellation(client: Client, peer: Peer, cell: Cell) -> None:
    tag = f"cell-{next(_tags)}-{time.monotonic_ns()}"
    call = asyncio.create_task(client.call_tool("up_hang", {"seconds": 30, "tag": tag}))
    if cell.client == LEGACY:  # the upstream's log says the call is running
        await peer.until(lambda: any(m.params.data == "hanging" for m in peer.of(types.LoggingMessageNotification)))
    else:
        await asyncio.sleep(0.5)  # no log reaches a modern client that asked for none: give the call time
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert tag in text(await client.call_tool("up_cancelled", {"wait": 10, "tag": tag})).split(",")


async def both_styles(client: Client, peer: Peer, cell: Cell) -> None:
    """A dual-era upstream's two ways of asking, as the client would see them directly: its own
    era's way is answered (the client asked once), the other is refused (the client never asked)."""
    mine, other = ("up_elicit_name", "up_ask_name") if cell.client == LEGACY else ("up_ask_name", "up_elicit_name")
    assert await asked_call(client, peer, replace(cell, feature="elicitation"), {}, "elicitation/create") \
        == f"Hello, {peer.label}!", mine
    try:
        refused = await client.call_tool(other, {})
    except MCPError as exc:  # the SDK's own refusal (an invalid result, no back-channel) as an error
        assert exc.error.message, exc
    else:
        assert refused.is_error, refused
    assert peer.asked == ["elicitation/create"]


MATRIX: dict[str, Callable[[Client, Peer, Cell], Awaitable[None]]] = {
    "plain": plain, "progress": progress, "sampling": sampling, "elicitation": elicitation, "roots": roots,
    "list_changed": list_changed, "resource_updated": resource_updated, "cancellation": cancellation,
    "both_styles": both_styles}
assert tuple(MATRIX) == FEATURES


# -- the running parts -----------------------------------------------------------------------------

@contextmanager
def _upstream(era: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "--transport", "streamable_http", "--port", str(port),
                             "--era", era, "--mrtr"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import socket
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"upstream ({era}) did not come up") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    """One Streamable HTTP upstream process per era for the whole module."""
    with _upstream("legacy") as legacy, _upstream("modern") as modern, _upstream("dual") as dual:
        yield {"legacy": legacy, "modern": modern, "dual": dual}


def _entry(upstream: str, upstreams: dict[str, str]) -> dict[str, Any]:
    if upstream == "dual-stdio":
        return mcp_entry("up", "stdio", "--era dual --mrtr", ping_interval_s=0)
    return mcp_entry("up", "streamable_http", upstreams[upstream], ping_interval_s=0)


@asynccontextmanager
async def _client(url: str, revision: str, peer: Peer) -> AsyncIterator[Client]:
    mode = "legacy" if revision == LEGACY else revision
    async with Client(streamable_http_client(url), mode=mode, sampling_callback=peer.sampling,  # type: ignore[arg-type]
                      elicitation_callback=peer.elicitation, list_roots_callback=peer.roots,
                      message_handler=peer.on_message) as client:
        assert client.session.protocol_version == revision
        yield client


CELLS = [(c, u, f) for c in CLIENTS for u in UPSTREAMS for f in FEATURES if (c, u, f) not in ABSENT]


@pytest.mark.parametrize("client_revision, upstream, feature", CELLS, ids=["-".join(cell) for cell in CELLS])
async def test_bridging_matrix(client_revision: str, upstream: str, feature: str, upstreams: dict[str, str]) -> None:
    cell = Cell(client_revision, upstream, feature)
    async with running_gateway(config(_entry(upstream, upstreams))) as gw:
        connector = gw.connectors["up"]
        spoken = connector.health().extra["protocol_version"]
        assert spoken == (LEGACY if upstream == "legacy" else MODERN)  # a dual-era one: 2026-07-28 first
        peer = Peer(f"{'new' if client_revision == MODERN else 'old'}-{upstream}-{feature}")
        async with _client(gw.mcp_url, client_revision, peer) as client:
            await MATRIX[feature](client, peer, cell)
        if upstream.startswith("dual"):  # each caller in its own era: a legacy caller over a session
            legacy = connector._clients.get(LEGACY_SHARED)  # type: ignore[attr-defined]
            assert (legacy is not None and not legacy.modern) == (client_revision == LEGACY), connector._clients  # type: ignore[attr-defined]

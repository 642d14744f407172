"""A test-only connector kind, ``testkit``: tools that exercise the session machinery.

Registered for one test through :func:`register` (monkeypatches ``connectors.registry.KINDS``), so
a config can say ``type: testkit``. Its tools:

* ``echo_NNN`` (``tools: N`` of them): returns its arguments as JSON text;
* ``slow``: blocks until cancelled (or ``seconds`` pass), recording ``started`` / ``cancelled``;
* ``progress``: sends ``steps`` progress notifications for its request, then returns;
* ``sample``: asks the requesting client for ``sampling/createMessage`` and returns its text;
* ``log``: sends one ``notifications/message`` at the given level to the requesting session;
* ``ask``: answers like a 2026-07-28 server asking for input (MRTR): ``input_required`` with an
  elicitation request and its own ``requestState`` until it is called again with both, then
  the elicited answer (``rounds`` times in a row: ``rounds: 2`` asks twice).

:meth:`KitConnector.add_tool` adds a tool at run time and reports the change, which drives
``list_changed`` broadcasts. Events are ``asyncio.Event`` objects so tests wait on them instead of
sleeping.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from connectors.base import Connector, ConnectorEvents, ToolSpec
from connectors.config import ConnectorConfig
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from connectors.registry import ConnectorKind
from gateway.protocol.errors import InvalidParams

if TYPE_CHECKING:
    import pytest

    from gateway.context import CallContext

__all__ = ["KitConfig", "KitConnector", "register", "KIND"]
_OBJECT = {"type": "object"}


class KitConfig(ConnectorConfig):
    type: Literal["testkit"]
    tools: int = 3


def _tool(name: str, description: str) -> ToolSpec:
    return ToolSpec(name, {"name": name, "description": description, "inputSchema": _OBJECT})


class KitConnector(Connector):
    kind = "testkit"
    config: KitConfig

    def __init__(self, config: KitConfig, base_dir: Path = Path(".")) -> None:
        super().__init__(config, base_dir)
        specs = [_tool(f"echo_{i:03d}", f"Echo number {i}") for i in range(config.tools)]
        specs += [_tool("slow", "Blocks until cancelled"), _tool("progress", "Reports progress"),
                  _tool("sample", "Asks the client to sample"), _tool("log", "Logs one message"),
                  _tool("ask", "Asks the client for input the 2026-07-28 way")]
        self._tools = tuple(specs)
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.sessions_seen: list[str] = []
        self.answers: list[str] = []

    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)

    def capabilities(self) -> set[str]:
        return {"tools"}

    def tools(self) -> tuple[ToolSpec, ...]:
        return self._tools

    def add_tool(self, name: str) -> None:
        self._tools = (*self._tools, _tool(name, "Added at run time"))
        assert self.events is not None
        self.events.components_changed()

    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        self.sessions_seen.append(ctx.session.id)
        if name.startswith("echo_") or name.startswith("added"):
            return {"content": [{"type": "text", "text": json.dumps(arguments, sort_keys=True)}]}
        if name == "slow":
            self.started.set()
            try:
                await asyncio.sleep(float(arguments.get("seconds", 30)))
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return {"content": [{"type": "text", "text": "finished"}]}
        if name == "progress":
            steps = int(arguments.get("steps", 3))
            for i in range(1, steps + 1):
                await ctx.progress(i, steps, f"step {i}")
            return {"content": [{"type": "text", "text": f"{steps} steps"}]}
        if name == "sample":
            reply = await ctx.session.request(
                "sampling/createMessage",
                {"messages": [{"role": "user", "content": {"type": "text", "text": str(arguments.get("q", "hi"))}}],
                 "maxTokens": 10},
                related_request_id=ctx.request_id)
            text = reply.get("content", {}).get("text", "")
            return {"content": [{"type": "text", "text": f"sampled: {text}"}]}
        if name == "ask":
            return self._ask(arguments, ctx)
        if name == "log":
            await ctx.log(str(arguments.get("level", "info")), arguments.get("data", "hello"), logger="testkit")
            return {"content": [{"type": "text", "text": "logged"}]}
        raise InvalidParams(f"Unknown tool: {name}")


    def _ask(self, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """MRTR as an upstream does it: the state says which round this is; answers accumulate."""
        rounds = int(arguments.get("rounds", 1))
        state = ctx.params.get("requestState")
        responses = ctx.params.get("inputResponses") or {}
        done = 0
        if isinstance(state, str) and state.startswith("kit-round-"):
            done = int(state.removeprefix("kit-round-"))
            reply = responses.get(f"q{done}") or {}
            if reply.get("action") != "accept":
                return {"content": [{"type": "text", "text": f"declined at round {done}"}], "isError": True}
            self.answers.append(str((reply.get("content") or {}).get("name")))
            done += 1
        if done >= rounds:
            return {"content": [{"type": "text", "text": "answers: " + ",".join(self.answers[-rounds:])}]}
        return {"resultType": "input_required", "requestState": f"kit-round-{done}",
                "inputRequests": {f"q{done}": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": f"Your name (round {done + 1})",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                        "required": ["name"]}}}}}


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``type: testkit`` a connector kind for the calling test."""
    from connectors import registry

    monkeypatch.setitem(registry.KINDS, "testkit", KIND)


KIND = ConnectorKind(lambda: KitConfig, lambda: KitConnector)

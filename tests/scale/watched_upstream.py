"""An SDK 2.x upstream whose resource updates go to the sessions that subscribed (for the
subscription failover test): ``resources/subscribe`` records the subscribing session, and the tool
``touch`` sends ``notifications/resources/updated`` for ``mem://watched`` to every one of them
(whichever gateway replica's upstream session calls it). ``subscribers`` says how many there are.
``hold`` answers only after ``seconds`` (at most 60): a call that stays in flight on the replica
serving it, for the tests that kill that replica.

Run: ``python watched_upstream.py --port P`` (Streamable HTTP at ``/mcp``, legacy era).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import MCPServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's tests package
from tests.sdk_server import serve  # noqa: E402

URI = "mem://watched"


def build() -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("watched")
    sessions: dict[int, Any] = {}

    async def _subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        sessions[id(ctx.session)] = ctx.session
        return types.EmptyResult()

    async def _unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        sessions.pop(id(ctx.session), None)
        return types.EmptyResult()

    low = mcp._lowlevel_server
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)

    @mcp.resource(URI, mime_type="text/plain")
    def watched() -> str:
        """A resource that changes when ``touch`` is called."""
        return "watched"

    @mcp.tool()
    async def touch() -> int:
        """Tell every subscribed session that mem://watched changed; how many were told."""
        told = 0
        for key, session in list(sessions.items()):
            try:
                await session.send_resource_updated(URI)
                told += 1
            except Exception:  # that gateway replica is gone
                sessions.pop(key, None)
        return told

    @mcp.tool()
    def subscribers() -> int:
        """How many sessions are subscribed."""
        return len(sessions)

    @mcp.tool()
    async def hold(seconds: float) -> str:
        """Answer after ``seconds`` (at most 60)."""
        await asyncio.sleep(min(max(seconds, 0.0), 60.0))
        return "held"

    return mcp


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    serve(build(), "streamable_http", "legacy", parser.parse_args().port)

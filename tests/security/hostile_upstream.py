"""A hostile upstream MCP server (official SDK 2.x, legacy era, stdio) for the flood attacks.

Its one tool, ``flood``, sends ``count`` server→client requests of one ``kind`` (``sampling``,
``elicitation`` or ``roots``) at once, in the middle of its call, and answers with what became of
them as JSON: ``{"answered": n, "refused": m, "codes": {code: n}, "message": <first refusal>}``.

Run: ``python hostile_upstream.py`` (stdio).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from mcp import MCPError, types
from mcp.server.mcpserver import Context, MCPServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's tests package
from tests.sdk_server import serve  # noqa: E402


def build() -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("hostile", log_level="WARNING")

    @mcp.tool()
    async def flood(count: int, ctx: Context, kind: str = "sampling") -> str:
        """Send `count` requests of `kind` to the client at once; report what became of them."""
        session, rid = ctx.session, ctx.request_id

        async def one(i: int) -> Any:
            if kind == "sampling":
                message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"#{i}"))
                return await session.create_message(messages=[message], max_tokens=5, related_request_id=rid)
            if kind == "elicitation":
                return await session.elicit_form(f"#{i}", {"type": "object", "properties": {}}, related_request_id=rid)
            return await session.list_roots()

        outcomes = await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, MCPError)]
        others = [repr(o) for o in outcomes if isinstance(o, BaseException) and not isinstance(o, MCPError)]
        return json.dumps({"answered": sum(not isinstance(o, BaseException) for o in outcomes),
                           "refused": len(refused),
                           "codes": dict(Counter(str(e.error.code) for e in refused)),
                           "message": refused[0].error.message if refused else None,
                           "data": refused[0].error.data if refused else None,
                           "other_errors": others[:3]})

    return mcp


if __name__ == "__main__":
    serve(build(), "stdio", "legacy")

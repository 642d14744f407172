"""A loopback reverse proxy with the routing rule of deploy/kubernetes/base/haproxy.cfg.

Sticky (the deployed rule): a response carrying ``Mcp-Session-Id`` teaches the proxy which replica
owns that session (HAProxy ``stick store-response``); a request carrying the header goes to that
replica (``stick match``); anything else is balanced round robin. ``sticky=False`` is plain round
robin, to show what breaks without it. Responses are streamed, so SSE works through the proxy.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

__all__ = ["StickyProxy", "sticky_proxy"]

SESSION = "Mcp-Session-Id"
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade",
        "proxy-connection", "te", "trailer"}


class StickyProxy:
    def __init__(self, upstreams: list[str], sticky: bool = True) -> None:
        self.upstreams = upstreams
        self.sticky = sticky
        self.table: dict[str, int] = {}
        self.hits = [0] * len(upstreams)
        self._rr = itertools.cycle(range(len(upstreams)))
        self.url = ""
        self.client: aiohttp.ClientSession | None = None

    def pick(self, session_id: str | None) -> int:
        if self.sticky and session_id is not None and session_id in self.table:
            return self.table[session_id]
        return next(self._rr)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert self.client is not None
        index = self.pick(request.headers.get(SESSION))
        self.hits[index] += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self.client.request(request.method, self.upstreams[index] + request.path_qs,
                                       headers=headers, data=await request.read(),
                                       timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as up:
            learned = up.headers.get(SESSION)
            if learned:
                self.table[learned] = index
            resp = web.StreamResponse(status=up.status, headers={
                k: v for k, v in up.headers.items() if k.lower() not in _HOP})
            await resp.prepare(request)
            try:
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
            except (aiohttp.ClientPayloadError, ConnectionResetError):
                pass
            await resp.write_eof()
            return resp


@asynccontextmanager
async def sticky_proxy(upstreams: list[str], sticky: bool = True) -> AsyncIterator[StickyProxy]:
    proxy = StickyProxy(upstreams, sticky)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    async with aiohttp.ClientSession(auto_decompress=False) as client:
        proxy.client = client
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        proxy.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            yield proxy
        finally:
            await runner.cleanup()

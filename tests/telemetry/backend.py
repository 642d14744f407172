"""A loopback REST backend with an OpenAPI spec, recording the headers of every request.

``GET /items/{id}`` answers at once, ``GET /fail`` answers 500, ``GET /slow`` waits until the
test calls :meth:`Backend.release` (``slow_started`` is set when a slow request arrives), so a
test can hold a tool call in flight for as long as it needs without sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

__all__ = ["Backend", "backend", "openapi_connector_yaml"]


def _spec(base: str) -> dict[str, Any]:
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "telemetry test backend", "version": "1"},
        "servers": [{"url": base}],
        "paths": {
            "/items/{id}": {"get": {"operationId": "getItem", "responses": ok, "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]}},
            "/slow": {"get": {"operationId": "slow", "responses": ok}},
            "/fail": {"get": {"operationId": "fail", "responses": ok}},
        },
    }


class Backend:
    def __init__(self) -> None:
        self.url = ""
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.slow_started = asyncio.Event()
        self.slow_waiting = 0
        self._release = asyncio.Event()

    def release(self) -> None:
        self._release.set()

    async def spec(self, request: web.Request) -> web.Response:
        return web.json_response(_spec(self.url))

    async def item(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, dict(request.headers)))
        return web.json_response({"id": request.match_info["id"], "name": "widget"})

    async def slow(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, dict(request.headers)))
        self.slow_waiting += 1
        self.slow_started.set()
        await self._release.wait()
        return web.json_response({"slow": "done"})

    async def fail(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, dict(request.headers)))
        return web.json_response({"error": "boom"}, status=500)


@asynccontextmanager
async def backend() -> AsyncIterator[Backend]:
    state = Backend()
    app = web.Application()
    app.router.add_get("/openapi.json", state.spec)
    app.router.add_get("/items/{id}", state.item)
    app.router.add_get("/slow", state.slow)
    app.router.add_get("/fail", state.fail)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield state
    finally:
        state.release()
        await runner.cleanup()


def openapi_connector_yaml(url: str, name: str = "api") -> str:
    """A connectors: entry (YAML, indented for a top-level list) for the backend."""
    return (f"  - name: {name}\n    type: openapi\n    spec: {url}/openapi.json\n    retries: 0\n"
            f"    request_timeout_s: 30\n")

"""The tasks extension (``io.modelcontextprotocol/tasks``) passed through the gateway (gateway.tasks).

The upstream is :class:`TaskServer`, a raw-JSON 2026-07-28 server on loopback implementing the
extension as its specification (ext-tasks ``specification/2026-07-28/tasks.md``) writes it: it
advertises the extension in ``server/discover``; a ``tools/call`` of ``slow`` from a caller that
declares the extension gets a ``CreateTaskResult`` (a plain result otherwise); its tasks ask for a
name (``input_required`` with an elicitation), take the answer by ``tasks/update``, then complete;
``tasks/cancel`` cancels; ``tasks/*`` from a caller without the extension are -32021, an unknown
task -32602; it records the ``Mcp-Name`` header of every ``tasks/*`` request (the routing header
the extension requires). The downstream client speaks raw JSON over Streamable HTTP too (SDK 2.3
does not implement the extension), with the headers :func:`expected_headers` says a client sends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.protocol.headers import expected_headers
from gateway.tasks import TaskHandles
from tests.connectors.mcp.test_gateway_e2e import config
from tests.e2e.rawhttp import initialize, messages_of
from tests.support import RunningGateway, running_gateway, serving

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {TASKS: {}}, "elicitation": {}}
STAMP = "2026-07-28T10:00:00Z"


class TaskServer:
    """A 2026-07-28 upstream speaking the tasks extension (module doc)."""

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self.name_headers: list[tuple[str, str | None]] = []  # (method, Mcp-Name) of tasks/* requests
        self.calls: list[dict[str, Any]] = []

    @staticmethod
    def _declares(params: dict[str, Any]) -> bool:
        caps = (params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") or {}
        return TASKS in (caps.get("extensions") or {})

    def _task(self, task_id: str) -> dict[str, Any]:
        state = self.tasks[task_id]
        task = {"taskId": task_id, "status": state["status"], "createdAt": STAMP, "lastUpdatedAt": STAMP,
                "ttlMs": 60000, "pollIntervalMs": 10}
        if state["status"] == "input_required":
            task["inputRequests"] = {"name": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}
        elif state["status"] == "completed":
            task["result"] = {"content": [{"type": "text", "text": f"Hello, {state['name']}!"}], "isError": False}
        return task

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "server/discover":
            return {"supportedVersions": [MODERN], "capabilities": {"tools": {}, "extensions": {TASKS: {}}},
                    "serverInfo": {"name": "task-server", "version": "1"}}
        if method == "tools/list":
            return {"tools": [{"name": "slow", "inputSchema": {"type": "object"}}]}
        if method == "tools/call":
            self.calls.append(params)
            if not self._declares(params):
                return {"content": [{"type": "text", "text": "done at once"}]}
            task_id = f"up-{len(self.tasks) + 1}"
            self.tasks[task_id] = {"status": "input_required", "name": None}
            return {**self._task(task_id), "resultType": "task", "status": "working"}
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            if not self._declares(params):
                raise _Error(-32021, "Missing required client capability",
                             {"requiredCapabilities": {"extensions": {TASKS: {}}}})
            task_id = params.get("taskId")
            if task_id not in self.tasks:
                raise _Error(-32602, "Failed to retrieve task: Task not found")
            if method == "tasks/get":
                return self._task(task_id)
            if method == "tasks/update":
                answer = (params.get("inputResponses") or {}).get("name") or {}
                if answer.get("action") == "accept":
                    self.tasks[task_id].update(status="completed", name=answer["content"]["name"])
            else:
                self.tasks[task_id]["status"] = "cancelled"
            return {}
        if method == "subscriptions/listen":
            raise _Error(-32601, "Method not found")
        raise _Error(-32601, f"Method not found: {method}")

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("MCP-Protocol-Version") != MODERN:
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32022, "message": "Unsupported protocol version", "data": {"supported": [MODERN]}}},
                status=400)
        message = await request.json()
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message:
            return web.Response(status=202)
        if str(method).startswith("tasks/"):
            self.name_headers.append((method, request.headers.get("Mcp-Name")))
        try:
            result = {"resultType": "complete", **self._answer(method, params)}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
        except _Error as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error})


class _Error(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@asynccontextmanager
async def task_server() -> AsyncIterator[tuple[TaskServer, str]]:
    server = TaskServer()
    app = web.Application()
    app.router.add_post("/mcp", server.handle)
    async with serving(app) as url:
        yield server, url + "/mcp"


class Downstream:
    """A raw 2026-07-28 client of the gateway."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self._ids = http, url, 0

    async def send(self, method: str, params: dict[str, Any] | None = None,
                   caps: dict[str, Any] | None = None) -> dict[str, Any]:
        self._ids += 1
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": WITH_TASKS if caps is None else caps}
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": {**(params or {}), "_meta": meta}}
        headers = {**expected_headers(message), "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        async with self.http.post(self.url, data=json.dumps(message), headers=headers) as resp:
            replies = [m for m in await messages_of(resp) if m.get("id") == self._ids]
        assert len(replies) == 1, replies
        return replies[0]


@asynccontextmanager
async def chained() -> AsyncIterator[tuple[TaskServer, RunningGateway, Downstream]]:
    async with task_server() as (server, url), running_gateway(config(
            {"name": "up", "type": "mcp", "transport": "streamable_http", "url": url, "ping_interval_s": 0})) as gw, \
            aiohttp.ClientSession() as http:
        assert gw.connectors["up"].supports_tasks()
        yield server, gw, Downstream(http, gw.mcp_url)


async def test_a_task_passes_through_with_a_sealed_handle_and_its_requests_reach_the_owner() -> None:
    async with chained() as (server, _gw, client):
        discovered = (await client.send("server/discover"))["result"]
        assert discovered["capabilities"]["extensions"] == {TASKS: {}}
        created = (await client.send("tools/call", {"name": "up_slow", "arguments": {}}))["result"]
        assert created["resultType"] == "task" and created["status"] == "working"
        assert created["ttlMs"] == 60000 and "cacheScope" not in created  # the task's lifetime, kept
        handle = created["taskId"]
        assert handle != "up-1" and "up-1" in server.tasks  # the client holds the gateway's handle
        got = (await client.send("tasks/get", {"taskId": handle}))["result"]
        assert got["taskId"] == handle and got["status"] == "input_required" and got["resultType"] == "complete"
        assert got["inputRequests"]["name"]["method"] == "elicitation/create" and got["ttlMs"] == 60000
        ack = await client.send("tasks/update", {"taskId": handle, "inputResponses": {
            "name": {"action": "accept", "content": {"name": "Ada"}}}})
        assert {k: v for k, v in ack["result"].items() if k != "_meta"} == {"resultType": "complete"}
        done = (await client.send("tasks/get", {"taskId": handle}))["result"]
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Hello, Ada!"
        # the upstream saw its own id, in the body and in the routing header
        assert server.name_headers == [("tasks/get", "up-1"), ("tasks/update", "up-1"), ("tasks/get", "up-1")]
        second = (await client.send("tools/call", {"name": "up_slow", "arguments": {}}))["result"]["taskId"]
        assert (await client.send("tasks/cancel", {"taskId": second}))["result"]["resultType"] == "complete"
        assert server.tasks["up-2"]["status"] == "cancelled"


async def test_without_the_extension_a_call_is_plain_and_task_requests_are_refused() -> None:
    async with chained() as (server, _gw, client):
        plain = (await client.send("tools/call", {"name": "up_slow", "arguments": {}}, caps={}))["result"]
        assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "done at once"
        handle = (await client.send("tools/call", {"name": "up_slow", "arguments": {}}))["result"]["taskId"]
        refused = (await client.send("tasks/get", {"taskId": handle}, caps={}))["error"]
        assert refused["code"] == -32021
        assert refused["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
        assert [m for m, _ in server.name_headers] == []  # refused at the gateway


async def test_a_2025_client_never_gets_a_task_nor_the_extension() -> None:
    # Even declaring the extension in its initialize capabilities: 2025-11-25 has no per-request
    # extensions, and its experimental core tasks are another wire.
    async with chained() as (server, gw, client):
        legacy = await initialize(client.http, gw.mcp_url, capabilities=WITH_TASKS)
        init_caps = (await legacy.request("tools/call", {"name": "up_slow", "arguments": {}}))["result"]
        assert init_caps["content"][0]["text"] == "done at once" and "taskId" not in init_caps
        assert not server._declares(server.calls[-1])  # the upstream was not offered the extension
        refused = await legacy.request("tasks/get", {"taskId": "anything"})
        assert refused["error"]["code"] == -32601


@pytest.mark.parametrize("forge", ["tampered", "raw upstream id", "another connector", "another principal"])
async def test_a_handle_the_gateway_did_not_seal_for_this_caller_is_task_not_found(forge: str) -> None:
    async with chained() as (server, gw, client):
        handle = (await client.send("tools/call", {"name": "up_slow", "arguments": {}}))["result"]["taskId"]
        handles: TaskHandles = gw.tasks.handles
        forged = {"tampered": handle[:-3] + ("AAA" if not handle.endswith("AAA") else "BBB"),
                  "raw upstream id": "up-1",
                  "another connector": handles.seal("other", "up-1", "anonymous"),
                  "another principal": handles.seal("up", "up-1", "mallory")}[forge]
        error = (await client.send("tasks/get", {"taskId": forged}))["error"]
        assert error["code"] == -32602 and "Task not found" in error["message"]
        assert server.name_headers == []  # nothing reached the upstream
        assert (await client.send("tasks/get", {"taskId": handle}))["result"]["status"] == "input_required"


async def test_no_extension_is_advertised_without_an_upstream_that_speaks_it() -> None:
    static = {"name": "kit", "type": "static", "prompts": [{"name": "p", "messages": [{"role": "user", "text": "x"}]}]}
    async with running_gateway(config(static)) as gw, aiohttp.ClientSession() as http:
        client = Downstream(http, gw.mcp_url)
        caps = (await client.send("server/discover"))["result"]["capabilities"]
        assert "extensions" not in caps
        handle = TaskHandles(None).seal("kit", "x", "anonymous")
        assert (await client.send("tasks/get", {"taskId": handle}))["error"]["code"] == -32602

"""The connector's one exception edge: what aiohttp and the spec core raise reaches the gateway as
SpecError (loading) or ToolExecutionError (calls) with the same messages and statuses as before,
raised ``from None``; the retry of idempotent requests is control flow under that edge."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.connector import OpenAPIConnector
from connectors.openapi.loader import SpecError
from gateway.protocol.errors import ToolExecutionError

from .upstream import SPECS, RecordingEvents, ctx

AUTH = {"api_key": "k-secret", "bearer": "b-secret"}


def make(spec: str | Path, **kw: Any) -> OpenAPIConnector:
    return OpenAPIConnector(OpenAPIConfig.model_validate({"name": "pets", "type": "openapi", "spec": str(spec), **kw}))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def raw_server(reply: bytes) -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server that reads a request head, writes ``reply`` and hangs up; yields its base URL
    and a one-item list counting the connections it served."""
    served = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served[0] += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", served
    finally:
        server.close()
        await server.wait_closed()


async def test_a_refused_connection_is_unreachable_and_hides_the_url() -> None:
    port = closed_port()
    conn = make(SPECS["petstore"], base_url=f"http://127.0.0.1:{port}", retries=1, auth=AUTH)
    await conn.start(RecordingEvents())
    try:
        c = ctx()
        with pytest.raises(ToolExecutionError) as err:
            await conn.call_tool("getPetById", {"petId": 1}, c)
        assert err.value.message == "GET /pet/{petId}: the request failed (ClientConnectorError)"
        assert err.value.status == "unreachable"
        assert str(port) not in err.value.message
        assert err.value.__cause__ is None and err.value.__suppress_context__
        assert c.record.backend_target == "GET /pet/{petId}" and c.record.backend_status is None
    finally:
        await conn.stop()


async def test_a_dropped_connection_is_retried_for_idempotent_methods_only() -> None:
    async with raw_server(b"") as (url, served):  # accept, read, hang up: ServerDisconnectedError
        once, thrice = (make(SPECS["petstore"], base_url=url, retries=n, auth=AUTH) for n in (0, 2))
        await once.start(RecordingEvents())
        await thrice.start(RecordingEvents())
        try:
            with pytest.raises(ToolExecutionError):
                await once.call_tool("getPetById", {"petId": 1}, ctx())
            per_attempt = served[0]  # aiohttp may itself re-send an idempotent request once
            served[0] = 0
            with pytest.raises(ToolExecutionError) as err:
                await thrice.call_tool("getPetById", {"petId": 1}, ctx())
            assert err.value.message == "GET /pet/{petId}: the request failed (ServerDisconnectedError)"
            assert err.value.status == "unreachable"
            assert served[0] == 3 * per_attempt  # the first attempt and two retries
            served[0] = 0
            with pytest.raises(ToolExecutionError) as err:
                await thrice.call_tool("addPet", {"name": "a", "photoUrls": []}, ctx())
            assert err.value.message == "POST /pet: the request failed (ServerDisconnectedError)"
            assert served[0] == 1  # POST is never sent twice
        finally:
            await once.stop()
            await thrice.stop()


async def test_other_client_errors_name_only_the_type() -> None:
    # A body shorter than its Content-Length: a payload error, not a connection error.
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":"
    async with raw_server(reply) as (url, served):
        conn = make(SPECS["petstore"], base_url=url, retries=2, auth=AUTH)
        await conn.start(RecordingEvents())
        try:
            with pytest.raises(ToolExecutionError) as err:
                await conn.call_tool("getInventory", {}, ctx())
            assert err.value.message == "GET /store/inventory: ClientPayloadError"
            assert err.value.status == "error"
            assert served[0] == 1  # not a connection failure: no retry
        finally:
            await conn.stop()


async def test_unserialisable_arguments_are_invalid_arguments_and_nothing_is_sent() -> None:
    port = closed_port()  # would fail loudly if anything were sent
    conn = make(SPECS["petstore"], base_url=f"http://127.0.0.1:{port}", auth=AUTH)
    await conn.start(RecordingEvents())
    try:
        with pytest.raises(ToolExecutionError) as err:
            await conn.call_tool("getPetById", {"petId": 1, "nope": 1}, ctx())
        assert err.value.status == "invalid_arguments"
        assert err.value.message.startswith("Invalid arguments for getPetById: argument 'nope': is not a parameter")
        assert err.value.__suppress_context__
    finally:
        await conn.stop()


async def test_a_spec_url_that_cannot_be_fetched_fails_start_with_a_spec_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/openapi.json"
    with pytest.raises(SpecError) as err:
        await make(url).start(RecordingEvents())
    assert err.value.path == url
    assert err.value.message.startswith("cannot fetch the spec: ClientConnectorError: ")
    assert err.value.__suppress_context__


async def test_an_unexpected_304_is_an_error_not_an_empty_spec() -> None:
    async with raw_server(b"HTTP/1.1 304 Not Modified\r\n\r\n") as (url, _):
        with pytest.raises(SpecError, match="fetching the spec returned HTTP 304"):
            await make(f"{url}/openapi.json").start(RecordingEvents())


async def test_an_unresolvable_ref_names_the_source_and_the_place(tmp_path: Path) -> None:
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({
        "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {"parameters": [{"$ref": "#/components/parameters/missing"}]}}}}))
    with pytest.raises(SpecError) as err:
        await make(spec).start(RecordingEvents())
    assert err.value.message == "unresolvable $ref '#/components/parameters/missing'"
    assert err.value.path.startswith(str(spec) + "#/paths/~1x/get")
    assert err.value.__suppress_context__

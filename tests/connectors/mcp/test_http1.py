"""The lean HTTP/1.1 client of Streamable HTTP upstreams (connectors/mcp/http1.py), against real
servers on loopback: aiohttp's web server for ordinary HTTP, and a raw asyncio server for replies
no well-behaved server sends (close-delimited bodies, 1xx, garbage, connections cut mid-body)."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from connectors.mcp import http1
from connectors.mcp.http1 import HTTP1Client, HTTPConnectionError, header_block, request_header_block
from tests.support import free_port

NO_HEADERS = header_block({})


class Peers:
    """Remembers the client port of every request, so tests can count connections."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.headers: list[dict[str, str]] = []

    def saw(self, request: web.Request) -> None:
        self.ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        self.headers.append(dict(request.headers))


@asynccontextmanager
async def serve(routes: Callable[[web.Application, Peers], None],
                ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[tuple[str, Peers]]:
    peers = Peers()
    app = web.Application()
    routes(app, peers)
    runner = web.AppRunner(app, keepalive_timeout=30, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    scheme = "https" if ssl_context else "http"
    try:
        yield f"{scheme}://localhost:{port}/mcp" if ssl_context else f"http://127.0.0.1:{port}/mcp", peers
    finally:
        await runner.cleanup()


@asynccontextmanager
async def raw_server(reply: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                     ) -> AsyncIterator[str]:
    """A TCP server whose every connection is handed to ``reply``."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reply(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


async def body_of(client: HTTP1Client, method: str = "POST", body: bytes = b"{}") -> tuple[int, bytes]:
    resp = await client.request(method, NO_HEADERS, body)
    try:
        return resp.status, await resp.read(1 << 30)
    finally:
        resp.release()


def echo_routes(app: web.Application, peers: Peers) -> None:
    async def echo(request: web.Request) -> web.Response:
        peers.saw(request)
        return web.Response(body=await request.read(), content_type="application/json")

    app.router.add_post("/mcp", echo)


async def test_keep_alive_reuses_one_connection_for_sequential_requests() -> None:
    async with serve(echo_routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        for i in range(20):
            assert await body_of(client, body=b'{"n":%d}' % i) == (200, b'{"n":%d}' % i)
        await client.close()
    assert len(peers.ports) == 20 and len(set(peers.ports)) == 1


async def test_concurrent_requests_open_more_connections_and_keep_them() -> None:
    async def slow(request: web.Request) -> web.Response:
        peers_ref.saw(request)
        await asyncio.sleep(0.05)
        return web.Response(text="ok")

    def routes(app: web.Application, peers: Peers) -> None:
        nonlocal peers_ref
        peers_ref = peers
        app.router.add_post("/mcp", slow)

    peers_ref = Peers()
    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        for _ in range(3):
            results = await asyncio.gather(*(body_of(client) for _ in range(4)))
            assert results == [(200, b"ok")] * 4
        await client.close()
    assert len(set(peers.ports)) == 4  # the second and third rounds reused the first round's four


async def test_sse_body_arrives_chunk_by_chunk_and_the_connection_is_reused_after_release_at_end() -> None:
    gate = asyncio.Event()

    def routes(app: web.Application, peers: Peers) -> None:
        async def stream(request: web.Request) -> web.StreamResponse:
            peers.saw(request)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"data: first\n\n")
            await gate.wait()
            await resp.write(b"data: after\n\n")
            return resp

        app.router.add_post("/mcp", stream)

    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        resp = await client.request("POST", header_block({"Accept": "text/event-stream"}), b"{}")
        assert resp.headers["content-type"] == "text/event-stream"
        assert await resp.read_chunk() == b"data: first\n\n"
        assert not resp.complete
        resp.release_at_end(5.0)  # the rest is discarded; the connection waits for the end
        gate.set()
        await asyncio.sleep(0.1)
        gate.clear()
        second = await client.request("POST", NO_HEADERS, b"{}")
        assert await second.read_chunk() == b"data: first\n\n"
        second.release()  # mid-stream: this connection is closed, not reused
        await client.close()
    assert len(peers.ports) == 2 and peers.ports[0] == peers.ports[1]


async def test_a_stream_that_never_ends_is_closed_after_the_grace() -> None:
    def routes(app: web.Application, peers: Peers) -> None:
        async def forever(request: web.Request) -> web.StreamResponse:
            peers.saw(request)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"data: x\n\n")
            await asyncio.sleep(30)
            return resp

        app.router.add_post("/mcp", forever)

    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        resp = await client.request("POST", NO_HEADERS, b"{}")
        await resp.read_chunk()
        resp.release_at_end(0.1)
        for _ in range(500):
            if not client._all:
                break
            await asyncio.sleep(0.01)
        assert not client._all  # closed after the grace, not parked in the pool
        nxt = await client.request("POST", NO_HEADERS, b"{}")
        await nxt.read_chunk()
        nxt.release()
        await client.close()
    assert len(set(peers.ports)) == 2


async def test_gzip_bodies_are_decoded_and_accept_encoding_is_sent() -> None:
    payload = b'{"big": "' + b"x" * 100_000 + b'"}'

    def routes(app: web.Application, peers: Peers) -> None:
        async def zipped(request: web.Request) -> web.Response:
            peers.saw(request)
            return web.Response(body=gzip.compress(payload), headers={"Content-Encoding": "gzip"})

        app.router.add_post("/mcp", zipped)

    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        assert await body_of(client) == (200, payload)
        await client.close()
    assert "gzip" in peers.headers[0]["Accept-Encoding"]


async def test_cookies_are_kept_sent_back_and_deleted() -> None:
    def routes(app: web.Application, peers: Peers) -> None:
        async def cookies(request: web.Request) -> web.Response:
            peers.saw(request)
            resp = web.Response(text="ok")
            n = len(peers.ports)
            if n == 1:
                resp.set_cookie("backend", "pod-7")
                resp.set_cookie("other", "1")
            elif n == 2:
                resp.del_cookie("other")
            return resp

        app.router.add_post("/mcp", cookies)

    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        for _ in range(3):
            await body_of(client)
        await client.close()
    assert "Cookie" not in peers.headers[0]
    assert peers.headers[1]["Cookie"] == "backend=pod-7; other=1"
    assert peers.headers[2]["Cookie"] == "backend=pod-7"


async def test_large_bodies_cross_with_back_pressure() -> None:
    big = bytes(range(256)) * (48 * 1024)  # 12 MiB: over the 4 MiB read-ahead, so reading pauses

    def routes(app: web.Application, peers: Peers) -> None:
        async def large(request: web.Request) -> web.Response:
            peers.saw(request)
            return web.Response(body=big)

        app.router.add_post("/mcp", large)

    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        resp = await client.request("POST", NO_HEADERS, b"{}")
        conn = resp._conn
        for _ in range(1000):  # nothing is read yet: the client buffers up to its limit, then pauses
            if conn._paused:
                break
            await asyncio.sleep(0.01)
        assert conn._paused and conn._buffered <= 5 * 1024 * 1024
        assert await resp.read(1 << 30) == big
        resp.release()
        assert await body_of(client) == (200, big)  # same connection, reading resumed
        with pytest.raises(HTTPConnectionError, match="over 1000 bytes"):
            await (await client.request("POST", NO_HEADERS, b"{}")).read(1000)
        assert await body_of(client) == (200, big)  # that connection was dropped: a new one
        await client.close()
    assert len(peers.ports) == 4 and len(set(peers.ports[:3])) == 1 and peers.ports[3] != peers.ports[0]


async def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    connections = 0

    async def one_reply_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(0.05)  # then close while the client holds it idle (keep-alive expiry)

    async with raw_server(one_reply_then_close) as url:
        client = HTTP1Client(url, connect_timeout_s=5)
        for _ in range(3):
            assert await body_of(client) == (200, b"ok")
            await asyncio.sleep(0.2)
        await client.close()
    assert connections == 3


async def test_close_delimited_bodies_and_informational_responses() -> None:
    async def old_style(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"the end")
        await writer.drain()

    async with raw_server(old_style) as url:
        client = HTTP1Client(url, connect_timeout_s=5)
        assert await body_of(client) == (200, b"until the end")
        assert await body_of(client) == (200, b"until the end")  # a new connection: that one ended
        await client.close()


async def test_broken_responses_are_connection_errors() -> None:
    async def cut_mid_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.5)

    async def silent_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with raw_server(cut_mid_body) as url:
        client = HTTP1Client(url, connect_timeout_s=5)
        resp = await client.request("POST", NO_HEADERS, b"{}")
        with pytest.raises(HTTPConnectionError, match="closed the connection while sending the body"):
            await resp.read(1 << 20)
        await client.close()
    async with raw_server(garbage) as url:
        with pytest.raises(HTTPConnectionError, match="malformed HTTP response"):
            await HTTP1Client(url, connect_timeout_s=5).request("POST", NO_HEADERS, b"{}")
    async with raw_server(silent_close) as url:
        with pytest.raises(HTTPConnectionError, match="closed the connection before answering"):
            await HTTP1Client(url, connect_timeout_s=5).request("POST", NO_HEADERS, b"{}")
    with pytest.raises(HTTPConnectionError, match="[Cc]onnect"):
        await HTTP1Client(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout_s=5).request("POST", NO_HEADERS)


async def test_cancelling_a_request_drops_its_connection() -> None:
    def routes(app: web.Application, peers: Peers) -> None:
        async def slow(request: web.Request) -> web.Response:
            peers.saw(request)
            await asyncio.sleep(0.3)
            return web.Response(text="late")

        app.router.add_post("/mcp", slow)

    async with serve(routes) as (url, peers):
        client = HTTP1Client(url, connect_timeout_s=5)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await client.request("POST", NO_HEADERS, b"{}")
        # The late answer must not be taken for the next request's.
        assert await body_of(client) == (200, b"late")
        await client.close()
    assert len(set(peers.ports)) == 2


def test_header_blocks_refuse_line_breaks() -> None:
    assert header_block({"X-A": "1", "Mcp-Session-Id": "abc"}) == "X-A: 1\r\nMcp-Session-Id: abc\r\n"
    for bad in ({"X-A": "1\r\nX-Injected: 1"}, {"X-A\n": "1"}, {"": "1"}, {"X A": "1"}):
        with pytest.raises(ValueError, match="invalid HTTP header"):
            header_block(bad)
    with pytest.raises(ValueError, match="not an http"):
        HTTP1Client("ftp://example.com/mcp", connect_timeout_s=1)


def test_request_header_blocks_are_remembered_only_when_short_and_checked() -> None:
    headers = {"Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    first = request_header_block(headers)
    assert first == header_block(headers) and request_header_block(dict(headers)) is first
    with pytest.raises(ValueError, match="invalid HTTP header"):  # checked before it is remembered
        request_header_block({"Mcp-Name": "echo\r\nX-Injected: 1"})
    long = {"Mcp-Param-Blob": "x" * 2000}
    assert request_header_block(long) == header_block(long)
    assert tuple(long.items()) not in http1._BLOCKS  # a long value is not kept past its request


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


async def test_https_verifies_the_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert_file, key_file)
    async with serve(echo_routes, ssl_context=server_ctx) as (url, _peers):
        with pytest.raises(HTTPConnectionError, match="TLS handshake failed.*CERTIFICATE_VERIFY_FAILED"):
            await HTTP1Client(url, connect_timeout_s=5).request("POST", NO_HEADERS, b"{}")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # trust it, as an operator would a private CA
        client = HTTP1Client(url, connect_timeout_s=5)
        assert await body_of(client, body=b'{"tls":true}') == (200, b'{"tls":true}')
        await client.close()
        # Loading the CAs is costly: sessions share one context per trust store.
        assert HTTP1Client(url, connect_timeout_s=5)._ssl is client._ssl


def _keeps_answering(reply: bytes) -> tuple[list[int], Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                                 Awaitable[None]]]:
    """A server that answers every request on a connection with ``reply`` and never closes it
    itself; the list counts requests per connection."""
    per_connection: list[int] = []

    async def serve_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        per_connection.append(0)
        index = len(per_connection) - 1
        while True:
            try:
                await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            per_connection[index] += 1
            writer.write(reply)
            await writer.drain()

    return per_connection, serve_all


async def test_idle_connections_past_the_servers_keep_alive_timeout_are_not_reused() -> None:
    # The server says it keeps idle connections 1 s (and, like many, would close one as a request
    # arrives): the client gives a connection up after three quarters of that, before the server.
    per_connection, handler = _keeps_answering(
        b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 2\r\n\r\nok")
    async with raw_server(handler) as url:
        client = HTTP1Client(url, connect_timeout_s=5)
        assert await body_of(client) == (200, b"ok")
        await asyncio.sleep(0.3)  # idle well within the server's timeout: reused
        assert await body_of(client) == (200, b"ok")
        assert per_connection == [2]
        await asyncio.sleep(0.9)  # past 0.75 s: not reused, although the server kept it open
        assert await body_of(client) == (200, b"ok")
        assert per_connection == [2, 1]
        await client.close()


async def test_connection_close_is_honoured_and_the_idle_limit_is_below_common_servers() -> None:
    from connectors.mcp import http1

    assert http1._IDLE_S < 5.0  # uvicorn, Node and gunicorn close idle connections after 5 s
    assert http1.keep_alive_timeout("timeout=5, max=100") == 5.0
    assert http1.keep_alive_timeout("max=100") is None and http1.keep_alive_timeout("timeout=x") is None
    per_connection, handler = _keeps_answering(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    async with raw_server(handler) as url:
        client = HTTP1Client(url, connect_timeout_s=5)
        for _ in range(3):
            assert await body_of(client) == (200, b"ok")
        await client.close()
    assert per_connection == [1, 1, 1]


async def test_a_reused_connection_reset_before_answering_is_retried_only_when_safe() -> None:
    # The server reads a second request on a connection and resets it (the keep-alive race).
    import socket
    import struct

    async def second_request_resets(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await read_request(reader)
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async with raw_server(second_request_resets) as url:
        client = HTTP1Client(url, connect_timeout_s=5)
        assert await body_of(client) == (200, b"ok")
        resp = await client.request("POST", NO_HEADERS, b"{}", retry_safe=True)  # retried, on a new connection
        assert (resp.status, await resp.read(100)) == (200, b"ok")
        resp.release()
        assert client.retries == 1
        with pytest.raises(HTTPConnectionError, match="before answering") as info:
            await client.request("POST", NO_HEADERS, b"{}")  # not idempotent: that request fails
        assert info.value.unanswered and not info.value.connecting and client.retries == 1
        await client.close()


async def test_a_pooled_connection_the_peer_closed_is_discarded_even_before_the_loop_noticed() -> None:
    # A blocking server in a thread: it can answer and close while the client's event loop is
    # blocked (joining it), so the FIN waits in the socket unseen by the loop, and only the poll
    # before reuse can notice it. A POST is not retry-safe: without that poll it would fail.
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    connections = 0

    def answer_once_then_close() -> None:
        nonlocal connections
        conn, _ = listener.accept()
        connections += 1
        with conn:
            data = b""
            while not data.endswith(b"{}"):
                data += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    client = HTTP1Client(f"http://127.0.0.1:{port}/mcp", connect_timeout_s=5)
    try:
        for _ in range(2):
            server = threading.Thread(target=answer_once_then_close)
            server.start()
            resp = await client.request("POST", NO_HEADERS, b"{}")
            assert (resp.status, await resp.read(100)) == (200, b"ok")
            resp.release()
            server.join(5)  # blocks the loop: the close is not seen by it before the next request
    finally:
        await client.close()
        listener.close()
    assert connections == 2 and client.retries == 0

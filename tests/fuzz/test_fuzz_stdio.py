"""Hostile input on the stdio transport: a real ``python -m gateway.cli stdio`` process.

Every line the gateway writes must be valid JSON-RPC, and after every fuzzed frame the same session
still answers a ping (the process and its session survived). Batches are fuzzed both on a session
that negotiated 2025-03-26 (batches allowed) and on one that negotiated 2025-11-25 (refused).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.strategies import check_reply, frames, is_json, static_config
from tests.support import REPO


class StdioGateway:
    """A gateway subprocess with a reader thread that validates every stdout line."""

    def __init__(self, config: Path, version: str) -> None:
        self.stderr = (config.parent / "stderr.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "stdio", "--config", str(config)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd=REPO)
        self.lines: queue.Queue[Any] = queue.Queue()
        self.bad: list[str] = []
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()
        self.probes = 0
        self.others: list[Any] = []
        reply = self.call({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                           "params": {"protocolVersion": version, "capabilities": {},
                                      "clientInfo": {"name": "fuzz", "version": "0"}}})
        assert reply["result"]["protocolVersion"] == version
        self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def _read(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            try:
                message = json.loads(raw)
                check_reply(message)
            except (ValueError, AssertionError) as exc:
                self.bad.append(f"{raw[:300]!r}: {exc}")
                continue
            self.lines.put(message)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def call(self, message: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Send a request and return its response, skipping (already validated) other messages."""
        self.write(json.dumps(message).encode() + b"\n")
        while True:
            reply = self.lines.get(timeout=timeout)
            if isinstance(reply, dict) and reply.get("id") == message["id"]:
                return reply
            self.others.append(reply)

    def probe(self) -> None:
        self.probes += 1
        probe_id = f"probe-{self.probes}"
        assert self.call({"jsonrpc": "2.0", "id": probe_id, "method": "ping"}) == \
            {"jsonrpc": "2.0", "id": probe_id, "result": {}}
        assert not self.bad, self.bad[:3]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stdout is not None
            self.reader.join(timeout=5)
            self.proc.stdout.close()
            self.stderr.close()


@pytest.fixture(scope="module", params=["2025-03-26", "2025-11-25"])
def stdio_gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioGateway]:
    folder = tmp_path_factory.mktemp("stdio-fuzz")
    config = folder / "gateway.yaml"
    config.write_text(static_config())
    gateway = StdioGateway(config, request.param)
    try:
        yield gateway
    finally:
        gateway.close()
    assert gateway.proc.returncode == 0, (folder / "stderr.log").read_text()[-3000:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(frame=frames)
def test_stdio_survives_any_frame(stdio_gateway: StdioGateway, frame: bytes) -> None:
    stdio_gateway.others.clear()
    stdio_gateway.write(frame + b"\n")
    stdio_gateway.probe()
    # Each line that is not JSON is answered with -32700 before anything sent after it.
    # (JSON nested deeper than the interpreter's recursion limit may be refused either way.)
    lines = [line for line in frame.split(b"\n") if line.strip()]
    unparseable = sum(1 for line in lines if not is_json(line))
    deep = sum(1 for line in lines if is_json(line) and line.count(b"[") + line.count(b"{") > 400)
    parse_errors = [m for m in stdio_gateway.others if isinstance(m, dict) and m.get("error", {}).get("code") == -32700]
    assert unparseable <= len(parse_errors) <= unparseable + deep


def test_stdio_session_still_serves_after_the_fuzz(stdio_gateway: StdioGateway) -> None:
    reply = stdio_gateway.call({"jsonrpc": "2.0", "id": "after", "method": "prompts/get",
                                "params": {"name": "fz_greet", "arguments": {"who": "fuzz"}}})
    assert reply["result"]["messages"][0]["content"]["text"] == "hi fuzz"
    # Known replies to known garbage, on the same session.
    stdio_gateway.write(b"{oops\n")
    stdio_gateway.write(b'{"jsonrpc":"2.0","id":"u","method":"nothing/here"}\n')
    assert stdio_gateway.lines.get(timeout=10)["error"]["code"] == -32700
    assert stdio_gateway.lines.get(timeout=10) == \
        {"jsonrpc": "2.0", "id": "u", "error": {"code": -32601, "message": "Method not found: nothing/here"}}
    stdio_gateway.probe()

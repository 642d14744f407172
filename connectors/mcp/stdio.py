"""stdio client transport: spawn the upstream server and talk newline-delimited JSON to it.

The child gets a small safe subset of the gateway's environment (PATH, HOME, locale, proxies:
what a program needs to start, never the gateway's secrets) plus the configured ``env``, or the
whole environment with ``inherit_env: true``. It runs in ``cwd``, in a process group of its own
(:mod:`connectors.mcp.procgroup`: closing the transport ends the whole group, grandchildren
included). When the process exits the transport reports the loss, with the last lines of its
stderr; the connector's reconnect loop spawns a new one.

Its stderr goes to the gateway log under ``connectors.mcp.<name>``: at INFO once the upstream has
spoken MCP on stdout (what a working server says is worth reading), at DEBUG before that, since a
process that fails to start says it again on every retry and its last lines are in the reported
loss (the reconnect loop logs that once per attempt, at WARNING).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Mapping
from typing import Any

from gateway.protocol.jsonrpc import dumps

from . import procgroup
from .transport import MAX_LINE, ClientTransport, Deliver, OnLost, TransportClosed, decode_payload

__all__ = ["StdioTransport", "SAFE_ENV"]

# What a child process needs to run at all; secrets in the gateway's environment stay there.
SAFE_ENV = ("HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ",
            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")

# A single JSON-RPC line may carry a large resource; asyncio's default 64 KiB limit is far too low.
_LINE_LIMIT = MAX_LINE
_TAIL_LINES = 10  # stderr lines a reported exit quotes
_TAIL_LINE_CHARS = 300  # a quoted line longer than this is cut
_STDERR_DRAIN_S = 0.5  # how long an exit's report waits for the rest of the stderr to arrive


class StdioTransport(ClientTransport):
    def __init__(self, name: str, deliver: Deliver, on_lost: OnLost, *, command: str, args: tuple[str, ...],
                 env: dict[str, str], cwd: str | None, inherit_env: bool = False,
                 stop_grace_s: float = 2.0) -> None:
        super().__init__(name, deliver, on_lost)
        self._command = command
        self._args = args
        base = dict(os.environ) if inherit_env else {k: os.environ[k] for k in SAFE_ENV if k in os.environ}
        self._env = {**base, **env}
        self._cwd = cwd
        self._grace = stop_grace_s
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr_log = logging.getLogger(f"connectors.mcp.{name}")
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)  # the last stderr lines
        self._spoke = False  # the upstream wrote a message on stdout: its stderr is logged at INFO

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def connect(self) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self._command, *self._args,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=self._env, cwd=self._cwd, limit=_LINE_LIMIT,
                start_new_session=True,  # its own process group (procgroup), out of reach of the terminal's Ctrl-C
            )
        except OSError as exc:
            raise TransportClosed(f"cannot start {self._command!r}: {exc.strerror or exc}") from None
        procgroup.register(self._proc.pid)
        self._tasks = [asyncio.create_task(self._read_stdout(), name=f"mcp-stdio-out-{self.name}"),
                       asyncio.create_task(self._read_stderr(), name=f"mcp-stdio-err-{self.name}")]

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:  # a line over the limit: the stream is unusable from here on
                    self._stderr_log.error("upstream %s wrote a line over %d bytes", self.name, _LINE_LIMIT)
                    break
                if not line:
                    break
                if line.strip():
                    if not self._spoke:
                        self._spoken()
                    decode_payload(line, self._deliver, None, self.name)
        finally:
            code = None
            if self._proc.returncode is None and not self._closing:
                with contextlib.suppress(asyncio.TimeoutError):
                    code = await asyncio.wait_for(self._proc.wait(), 0.5)
            else:
                code = self._proc.returncode
            if not self._closing and len(self._tasks) > 1:
                # The last stderr lines may still be in the pipe: they say why (bounded, as a
                # grandchild may hold the pipe open). A cancellation here (close() ends the tasks)
                # only cuts the wait short: the loss is still recorded, and the task ends right after.
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self._tasks[1]), _STDERR_DRAIN_S)
            what = f"upstream process exited (code {code})" if code is not None else "upstream closed stdout"
            self._lose(what + self.stderr_tail())

    def stderr_tail(self) -> str:
        """The last lines of the child's stderr, as a report's end on one line, joined by " | "
        (a health detail, a log line, a ``validate --deep`` probe), "" when it wrote none."""
        if not self._tail:
            return ""
        return "; its stderr ended with: " + " | ".join(self._tail)

    def _spoken(self) -> None:
        # The upstream talks MCP: from now on its stderr is worth the log, and so is what it said before.
        self._spoke = True
        for held in self._tail:
            self._stderr_log.info("%s", held)

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            try:
                raw = await self._proc.stderr.readline()
            except ValueError:
                continue
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip()
            if not line:
                continue
            self._tail.append(line if len(line) <= _TAIL_LINE_CHARS else line[: _TAIL_LINE_CHARS - 1] + "…")
            self._stderr_log.log(logging.INFO if self._spoke else logging.DEBUG, "%s", line)

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or not self.is_open:
            raise TransportClosed(f"upstream {self.name} is not running")
        try:
            proc.stdin.write(dumps(message) + b"\n")
            await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._lose(f"cannot write to upstream process: {exc}")
            raise TransportClosed(f"upstream {self.name} is not running") from None

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        proc = self._proc
        if proc is not None:
            # The MCP stdio shutdown (close stdin, wait, SIGTERM, wait, SIGKILL), applied to the
            # whole process group: what the upstream started goes with it.
            await procgroup.end_group(proc, self._grace)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()

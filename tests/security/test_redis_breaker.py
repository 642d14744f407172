"""Issue 14, row 13: a Redis that accepts connections but never answers cost every call 1 s.

The attack: the rate-limit backend's address is a TCP server that accepts and then says nothing (a
hung Redis, a black-holing proxy). Now one decision waits at most ``redis_timeout_s`` (tens of
ms), and after ``breaker_failures`` failures in a row the breaker applies ``on_backend_error`` at
once, without opening a connection, until one probe per ``breaker_cooldown_s``; once Redis
answers again (here: the same address starts forwarding to the real Redis) the probe closes the
breaker and Redis decides again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from gateway.config import RateLimitConfig, RateLimitRule
from gateway.context import CallContext, Principal
from gateway.filters.ratelimit import RateLimitFilter
from gateway.protocol.errors import BackendUnavailable, RateLimited
from gateway.telemetry import metrics
from tests.filters.mcp_http import McpHttp
from tests.support import gateway_process

from .support import healthz, probing


class SilentRedis:
    """A TCP server at a Redis address that accepts and reads, and answers nothing, until
    :meth:`forward_to` makes it a plain proxy to a real Redis. Counts the connections it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self.target: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"redis://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/0"

    async def __aenter__(self) -> SilentRedis:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def forward_to(self, redis_url: str) -> None:
        parts = urlsplit(redis_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 6379)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self.target is None:
                while await reader.read(65536):  # swallow whatever the client sends, say nothing
                    pass
                return
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            self._writers.append(up_writer)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


def _ctx() -> CallContext:
    session: Any = type("S", (), {"id": "s1", "transport": "test", "client_info": None})()
    return CallContext(session=session, method="tools/call", request_id=1, params={}, target="shop_query",
                       principal=Principal("alice"))


async def _ok(ctx: CallContext) -> dict[str, Any]:
    return {"content": []}


async def _timed_call(flt: RateLimitFilter) -> tuple[float, bool]:
    """(seconds, allowed) of one call through the filter (refused: throttled, or unavailable when
    Redis cannot decide and ``on_backend_error`` is closed)."""
    started = time.perf_counter()
    try:
        await flt(_ctx(), _ok)
        allowed = True
    except (RateLimited, BackendUnavailable):
        allowed = False
    return time.perf_counter() - started, allowed


def _breaker_states() -> dict[str, float | None]:
    return {state: metrics.REGISTRY.get_sample_value("mcp_gateway_rate_limit_breaker_state",
                                                     {"backend": "redis", "state": state})
            for state in ("closed", "open", "half_open")}


def _trips() -> float:
    return metrics.REGISTRY.get_sample_value("mcp_gateway_rate_limit_breaker_trips_total", {"backend": "redis"}) or 0.0


def _config(url: str, mode: str, rate: str = "1000/s", burst: int | None = None, prefix: str = "gw:sec") -> RateLimitConfig:
    return RateLimitConfig(backend=url, on_backend_error=mode, redis_prefix=prefix,  # type: ignore[arg-type]
                           redis_timeout_s=0.05, breaker_failures=3, breaker_cooldown_s=0.5,
                           rules=(RateLimitRule(scope="principal", rate=rate, burst=burst),))


@pytest.mark.parametrize("mode", ["open", "closed"])
async def test_a_silent_redis_costs_three_timeouts_then_nothing(mode: str) -> None:
    async with SilentRedis() as silent:
        trips = _trips()
        flt = RateLimitFilter(_config(silent.url, mode))
        try:
            assert _breaker_states() == {"closed": 1, "open": 0, "half_open": 0}
            calls = [await _timed_call(flt) for _ in range(50)]
            connections_when_open = silent.accepted
            # The first three each waited for Redis, bounded by the timeout (x2 for a whole decision),
            # then the breaker opened: no more waiting and no more connections.
            assert all(0.04 <= seconds <= 0.3 for seconds, _ in calls[:3]), calls[:3]
            # An open breaker answers without waiting: under the 0.04 s a wait for Redis takes at least
            # (with room for a busy 2-core machine to stall the process between two calls).
            assert all(seconds < 0.035 for seconds, _ in calls[3:]), max(s for s, _ in calls[3:])
            assert sum(seconds for seconds, _ in calls) < 1.0  # was ~1 s per call
            assert all(allowed is (mode == "open") for _, allowed in calls)
            assert connections_when_open == 3 and flt.breaker is not None and flt.breaker.state == "open"
            assert flt.backend_errors == 50
            # Operators see it: the state gauge and one trip (issue 15, metrics left from issue 14).
            assert _breaker_states() == {"closed": 0, "open": 1, "half_open": 0}
            assert _trips() - trips == 1
            # After the cool-down exactly one call probes (and waits); it fails, the breaker re-opens.
            await asyncio.sleep(0.55)
            probe, *rest = [await _timed_call(flt) for _ in range(10)]
            assert 0.04 <= probe[0] <= 0.3 and all(seconds < 0.035 for seconds, _ in rest)
            assert silent.accepted == connections_when_open + 1
            assert flt.breaker.state == "open"
            assert _trips() - trips == 2  # the failed probe opened it again
            assert _breaker_states()["open"] == 1
        finally:
            await flt.stop()


async def test_the_breaker_closes_when_redis_answers_again_and_redis_decides_again(redis_url: str) -> None:
    async with SilentRedis() as silent:
        # Two calls per hour: once Redis decides again, the third call is refused; while the
        # breaker is open (fail open) every call passes.
        flt = RateLimitFilter(_config(silent.url, "open", rate="2/h", burst=2, prefix=f"gw:sec:{uuid.uuid4().hex}"))
        try:
            assert all(allowed for _, allowed in [await _timed_call(flt) for _ in range(10)])
            assert flt.breaker is not None and flt.breaker.state == "open"
            silent.forward_to(redis_url)  # Redis is healthy again at the same address
            assert all(allowed for _, allowed in [await _timed_call(flt) for _ in range(5)])  # still cooling down
            await asyncio.sleep(0.55)
            decided = [await _timed_call(flt) for _ in range(3)]
            assert [allowed for _, allowed in decided] == [True, True, False]
            assert flt.breaker.state == "closed"
            assert _breaker_states() == {"closed": 1, "open": 0, "half_open": 0}
        finally:
            await flt.stop()


GATEWAY = """
gateway: {{http: {{json_response: true}}, log_level: error}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, messages: [{{text: "hello"}}]}}]
rate_limits:
  backend: {redis}
  on_backend_error: open
  rules: [{{scope: principal, rate: 100/s}}]
audit: {{enabled: false}}
"""


async def test_a_gateway_behind_a_silent_redis_keeps_answering_fast() -> None:
    """The same attack against a gateway process with the default timeout and breaker settings."""
    async with SilentRedis() as silent, gateway_process(GATEWAY.format(redis=silent.url)) as gw, \
            aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url).initialize()
        latencies = []
        async with probing(healthz(http, gw.url)) as probe:
            for _ in range(100):
                started = time.perf_counter()
                reply = await client.call("prompts/get", {"name": "team_hello"})
                latencies.append(time.perf_counter() - started)
                assert "result" in reply, reply  # on_backend_error: open
        latencies.sort()
        assert sum(latencies) < 2.0, latencies[-5:]  # 100 calls; was about 1 s each
        assert latencies[90] < 0.05, latencies[-15:]  # all but the few that waited for Redis
        assert probe.worst < 0.1
        assert 1 <= silent.accepted <= 6  # three failures, then a probe every 2 s at most

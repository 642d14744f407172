"""Rate limiting: buckets per scope, the Redis script against the real Redis, fail open/closed,
per-connector concurrency, and two gateway processes sharing one Redis budget."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from gateway.config import RateLimitConfig, RateLimitRule
from gateway.context import CallContext, Principal
from gateway.filters.ratelimit import MemoryBackend, RateLimitFilter, RedisBackend
from gateway.policy import parse_rate
from gateway.protocol.errors import BackendUnavailable, RateLimited
from gateway.telemetry import metrics
from tests.filters.mcp_http import McpHttp
from tests.support import gateway_process


@dataclass
class _Session:
    id: str = "s1"
    transport: str = "test"
    client_info: dict[str, Any] | None = None


def _ctx(target: str = "shop_query", principal: str = "alice", method: str = "tools/call",
         deadline: float | None = None) -> CallContext:
    return CallContext(session=_Session(), method=method, request_id=1, params={}, target=target,  # type: ignore[arg-type]
                       principal=Principal(principal), deadline=deadline)


async def _ok(ctx: CallContext) -> dict[str, Any]:
    return {"content": []}


async def _allowed(flt: RateLimitFilter, ctx: CallContext) -> bool:
    try:
        await flt(ctx, _ok)
        return True
    except RateLimited as exc:
        assert exc.data["retryAfterMs"] >= 1
        assert ctx.record.outcome == "rate_limited"
        return False


async def test_scopes_key_buckets_separately() -> None:
    cfg = RateLimitConfig(rules=(
        RateLimitRule(scope="principal", rate="1/h", burst=3),
        RateLimitRule(scope="tool", match="shop_*", rate="1/h", burst=2),
    ))
    flt = RateLimitFilter(cfg)
    assert [await _allowed(flt, _ctx("shop_query")) for _ in range(3)] == [True, True, False]
    # The tool bucket refused the third call; the principal bucket still has a token for others.
    assert await _allowed(flt, _ctx("petstore_get"))
    assert not await _allowed(flt, _ctx("petstore_get"))
    assert await _allowed(flt, _ctx("petstore_get", principal="bob"))
    with pytest.raises(RateLimited) as info:
        await flt(_ctx("shop_query", principal="bob"), _ok)
    assert info.value.data["scope"] == "tool"


async def test_redis_script_matches_the_pure_math(redis_url: str) -> None:
    backend = RedisBackend(redis_url, f"gw:test:{uuid.uuid4().hex}")
    try:
        rate = parse_rate("1/h", burst=3)
        results = [(await backend.check(["k"], [rate])).allowed for _ in range(4)]
        assert results == [True, True, True, False]
        denied = await backend.check(["other", "k"], [rate, rate])
        assert not denied.allowed and denied.denied_index == 1
        assert 3590 < denied.retry_after <= 3600  # one token per 3600 s
        # All or nothing: "other" was not charged by the refused call.
        assert [(await backend.check(["other"], [rate])).allowed for _ in range(4)] == [True, True, True, False]
    finally:
        await backend.close()


async def test_two_redis_backends_share_one_budget(redis_url: str) -> None:
    prefix = f"gw:test:{uuid.uuid4().hex}"
    a, b = RedisBackend(redis_url, prefix), RedisBackend(redis_url, prefix)
    memory = MemoryBackend()
    try:
        rate = parse_rate("1/h", burst=10)
        allowed = [(await (a if i % 2 else b).check(["g"], [rate])).allowed for i in range(20)]
        assert sum(allowed) == 10
        assert (await memory.check(["g"], [rate])).allowed  # a separate (per-process) budget
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize("mode", ["open", "closed"])
async def test_unreachable_redis_fails_as_configured(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    cfg = RateLimitConfig(backend="redis://127.0.0.1:1/0", on_backend_error=mode,  # type: ignore[arg-type]
                          rules=(RateLimitRule(scope="principal", rate="10/s"),))
    flt = RateLimitFilter(cfg)
    decision = "allow" if mode == "open" else "deny"
    counter = metrics.RATE_LIMIT_BACKEND_ERRORS.labels(flt.backend_name, decision)
    before = counter._value.get()
    try:
        for _ in range(2):
            ctx = _ctx()
            if mode == "open":
                assert await _allowed(flt, ctx)
                continue
            # Closed: refused as unavailable (-32004), never as throttled: nothing was rate limited.
            with pytest.raises(BackendUnavailable, match="rate-limit backend unavailable"):
                await flt(ctx, _ok)
            assert ctx.record.outcome != "rate_limited"
    finally:
        await flt.stop()
    assert flt.health()["up"] is False and "127.0.0.1" in flt.health()["detail"]  # what /readyz reports
    assert flt.backend_errors == 2
    assert counter._value.get() - before == 2  # operators see it on /metrics too
    assert sum("unavailable" in r.message and f"failing {mode}" in r.message for r in caplog.records) == 1


async def test_connector_concurrency_limit() -> None:
    slow = SimpleNamespace(name="slow")
    flt = RateLimitFilter(RateLimitConfig(), lambda method, target: slow, {"slow": 1})  # type: ignore[arg-type,return-value]
    release = asyncio.Event()
    entered = asyncio.Event()

    async def hold(ctx: CallContext) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return {}

    first = asyncio.create_task(flt(_ctx("slow_tool"), hold))
    await asyncio.wait_for(entered.wait(), 5)
    with pytest.raises(RateLimited) as info:  # no slot frees up before this call's deadline
        await flt(_ctx("slow_tool", deadline=time.monotonic() + 0.05), _ok)
    assert info.value.data["scope"] == "connector"
    waiting = asyncio.create_task(flt(_ctx("slow_tool", deadline=time.monotonic() + 5), _ok))
    release.set()
    await asyncio.wait_for(asyncio.gather(first, waiting), 5)


GATEWAY = """
gateway: {{http: {{json_response: true}}, log_level: warning}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, messages: [{{text: "hello"}}]}}]
rate_limits:
  backend: {redis}
  redis_prefix: "{prefix}"
  rules: [{{scope: global, rate: {rate}/s, burst: {burst}}}]
audit: {{enabled: false}}
"""


async def test_two_gateway_processes_share_the_redis_budget(redis_url: str) -> None:
    rate, burst, run_s = 20, 5, 2.0
    config = GATEWAY.format(redis=redis_url, prefix=f"gw:test:{uuid.uuid4().hex}", rate=rate, burst=burst)
    async with gateway_process(config) as one, gateway_process(config) as two, \
            aiohttp.ClientSession() as http:
        clients = [await McpHttp(http, gw.mcp_url).initialize() for gw in (one, two) for _ in range(3)]
        allowed = {one.url: 0, two.url: 0}
        limited = 0
        start = time.monotonic()

        async def hammer(client: McpHttp) -> None:
            nonlocal limited
            while time.monotonic() - start < run_s:
                resp = await client.call("prompts/get", {"name": "team_hello"})
                if "result" in resp:
                    allowed[client.url[:-4]] += 1
                else:
                    assert resp["error"]["code"] == -32029 and resp["error"]["data"]["retryAfterMs"] > 0
                    limited += 1

        await asyncio.gather(*(hammer(c) for c in clients))
        elapsed = time.monotonic() - start
    total = sum(allowed.values())
    assert total <= burst + rate * elapsed + 1, (allowed, elapsed)
    assert total >= rate * elapsed * 0.5, (allowed, elapsed)
    assert all(n > 0 for n in allowed.values()) and limited > total

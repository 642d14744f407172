"""Policy overhead: auth + access rules + rate limiting + audit, on versus off, in one run.

Rows, all measured in this process on the same static-connector gateway (``prompts/get`` through
the whole filter chain, plus the HTTP authenticator's bearer check per call):

* ``off``            — no auth, no rules, no rate limits, audit disabled;
* ``on (memory)``    — API-key auth, access rules, two rate-limit rules in memory, audit into
                       PostgreSQL (batching writer running concurrently);
* ``on (redis)``     — the same with the Redis rate-limit backend.

Then: rate-limit decisions per second (memory, and Redis with 32 concurrent callers), audit
events per second sustained into PostgreSQL while calls keep running (with the call p50 at the
start and at the end of that run, to show the request latency does not grow), and the cost of
``audit.durability: strict`` against the default batching: the ``on (memory)`` chain with each
mode, into PostgreSQL and into SQLite, sequential calls (p50, calls/s) and 32 concurrent callers
(calls/s, p50), side by side.

Targets (issue 6): added p50 <= 0.3 ms with the memory backend; >= 5,000 audit events/s.
Run: ``.venv/bin/python bench/policy.py [--calls 5000] [--events 50000] [--concurrent-calls 20000]``; needs PostgreSQL and
Redis (BENCH_PG_URL, BENCH_REDIS_URL; defaults are the local test services). A scratch database
``gw_audit_bench_*`` is created and dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from gateway.app import Gateway
from gateway.audit.events import capture
from gateway.audit.writer import AuditWriter
from gateway.config import AuditConfig, parse_config
from gateway.context import CallContext, Principal
from gateway.filters.ratelimit import MemoryBackend, RedisBackend
from gateway.policy import parse_rate
from gateway.session import Session

PG = os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")

BASE = """
connectors:
  - name: team
    type: static
    prompts: [{name: hello, arguments: [{name: who}, {name: password}], messages: [{text: "hello {who}"}]}]
"""
POLICY = """
auth:
  api_keys:
    - {{name: ops-bot, key: bench-key, groups: [ops]}}
    - {{name: ci, key: other-key, groups: [ci]}}
access:
  - {{principals: ["group:ops"], allow: ["team_*"], deny: ["*delete*"]}}
  - {{principals: ["group:ci"], allow: ["nothing_*"]}}
rate_limits:
  backend: {backend}
  redis_prefix: "gw:bench:{uid}"
  rules:
    - {{scope: principal, rate: 1000000/s, burst: 1000000}}
    - {{scope: global, match: "team_*", rate: 1000000/s, burst: 1000000}}
audit: {{store: "{store}", spill_path: "{spill}", durability: {durability}}}
"""


@asynccontextmanager
async def scratch_db() -> AsyncIterator[str]:
    name = f"gw_audit_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(PG).set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def _session(gw: Gateway, principal: Principal) -> Session:
    """A real, initialized session whose outgoing messages go nowhere (calls return results)."""
    async def discard(message: dict[str, Any], related: Any = None) -> None:
        return None

    session = Session(gw, "streamable_http", discard, principal)
    session.lifecycle.initialized()
    session.protocol_version = "2025-11-25"
    session.client_info = {"name": "bench", "version": "1"}
    return session


async def _calls(gw: Gateway, n: int) -> list[float]:
    """Latency (s) of n sequential calls: authenticate the bearer header, then dispatch."""
    headers = {"Authorization": "Bearer bench-key", "Host": "127.0.0.1"}
    params = {"name": "team_hello", "arguments": {"who": "x", "password": "p"}}
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        principal = await gw.authenticator.authenticate(headers)
        await gw.dispatcher.dispatch(_session(gw, principal), i, "prompts/get", params)
        # Yield once, as a server does between requests, so background work (the audit writer)
        # runs inside the measured time instead of being deferred past it.
        await asyncio.sleep(0)
        out.append(time.perf_counter() - t0)
    return out


async def _concurrent(gw: Gateway, total: int, workers: int) -> tuple[float, float]:
    """(calls/s, p50 ms) of ``total`` calls made by ``workers`` concurrent callers."""
    headers = {"Authorization": "Bearer bench-key", "Host": "127.0.0.1"}
    params = {"name": "team_hello", "arguments": {"who": "x", "password": "p"}}
    lat: list[float] = []
    ids = iter(range(total))

    async def worker() -> None:
        for i in ids:
            t0 = time.perf_counter()
            principal = await gw.authenticator.authenticate(headers)
            await gw.dispatcher.dispatch(_session(gw, principal), i, "prompts/get", params)
            lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed = time.perf_counter() - t0
    return total / elapsed, statistics.median(lat) * 1000


async def durability_row(config_text: str, n: int, total: int) -> tuple[float, float, float, float]:
    """(sequential p50 ms, sequential calls/s, 32-concurrent calls/s, 32-concurrent p50 ms)."""
    gw = Gateway(parse_config(config_text))
    await gw.start()
    try:
        await _calls(gw, min(n, 300))  # warm up
        t0 = time.perf_counter()
        lat = await _calls(gw, n)
        seq_rate = n / (time.perf_counter() - t0)
        conc_rate, conc_p50 = await _concurrent(gw, total, 32)
    finally:
        await gw.stop(grace_s=0)
    return statistics.median(lat) * 1000, seq_rate, conc_rate, conc_p50


async def chain_row(config_text: str, n: int) -> tuple[float, float]:
    gw = Gateway(parse_config(config_text))
    await gw.start()
    try:
        await _calls(gw, min(n, 500))  # warm caches (principal views, compiled keys, pools)
        lat = await _calls(gw, n)
    finally:
        await gw.stop(grace_s=0)
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


async def decisions_per_s(seconds: float) -> tuple[float, float]:
    rate = parse_rate("1000000/s", burst=1000000)
    mem = MemoryBackend()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for i in range(1000):
            mem.check_sync([f"p:{i % 50}", "g"], [rate, rate])
        n += 1000
    memory = n / (time.perf_counter() - t0)
    # Throughput, not the failure path: 32 workers open their connections at once, which can take
    # longer than the serving default (50 ms) on a busy machine.
    redis = RedisBackend(REDIS, f"gw:bench:{uuid.uuid4().hex}", timeout_s=2.0)
    count = 0
    t0 = time.perf_counter()

    async def worker(w: int) -> None:
        nonlocal count
        while time.perf_counter() - t0 < seconds:
            await redis.check([f"p:{w}", "g"], [rate, rate])
            count += 1

    await asyncio.gather(*(worker(w) for w in range(32)))
    remote = count / (time.perf_counter() - t0)
    await redis.close()
    return memory, remote


async def audit_sustained(store: str, events: int, calls_config: str, tmp: str) -> dict[str, float]:
    """Submit events at full speed alongside live calls; time until all are in PostgreSQL."""
    writer = AuditWriter(AuditConfig(store=store, spill_path=f"{tmp}/bench.spill", batch_size=1000),
                         retry_s=1.0)
    await writer.start()
    gw = Gateway(parse_config(calls_config))
    await gw.start()
    session = _session(gw, Principal("alice"))
    ctx = CallContext(session=session, method="tools/call", request_id=1, params={},
                      principal=Principal("alice"), target="shop_query", arguments={"q": "x", "token": "t"})
    lat_start = await _calls(gw, 1000)
    t0 = time.perf_counter()
    submitted = 0
    while submitted < events:
        for _ in range(250):  # bursts, with live calls in between, as a busy gateway would see
            writer.submit(capture(ctx, "ok", None, None, 0.2))
        submitted += 250
        await _calls(gw, 2)
    lat_end = await _calls(gw, 1000)
    await writer.flush()
    elapsed = time.perf_counter() - t0
    await gw.stop(grace_s=0)
    await writer.stop()
    assert writer.written == events and writer.spilled == 0, (writer.written, writer.spilled)
    p50 = statistics.median
    return {"events_per_s": events / elapsed, "p50_start_ms": p50(lat_start) * 1000,
            "p50_end_ms": p50(lat_end) * 1000}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--concurrent-calls", type=int, default=20_000)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        async with scratch_db() as store:
            uid = uuid.uuid4().hex
            off = BASE + "audit: {enabled: false}\n"
            on_mem = BASE + POLICY.format(backend="memory", uid=uid, store=store, spill=f"{tmp}/s1", durability="batch")
            on_redis = BASE + POLICY.format(backend=REDIS, uid=uid, store=store, spill=f"{tmp}/s2", durability="batch")
            rows = [("off", await chain_row(off, args.calls)),
                    ("on (memory)", await chain_row(on_mem, args.calls)),
                    ("on (redis)", await chain_row(on_redis, args.calls))]
            mem_rate, redis_rate = await decisions_per_s(args.seconds)
            sustained = await audit_sustained(store, args.events, on_mem, tmp)
            durability: list[tuple[str, str, tuple[float, float, float, float]]] = []
            for store_name, url in (("PostgreSQL", store), ("SQLite", f"sqlite:///{tmp}/durability.db")):
                for mode in ("batch", "strict"):
                    config = BASE + POLICY.format(backend="memory", uid=uid, store=url, spill=f"{tmp}/s-{mode}",
                                                  durability=mode)
                    durability.append((store_name, mode, await durability_row(config, args.calls,
                                                                               args.concurrent_calls)))
    base = rows[0][1][0]
    print(f"policy chain, {args.calls} sequential prompts/get calls per row (auth + dispatch)")
    print(f"{'config':<14}{'p50 ms':>10}{'p99 ms':>10}{'added p50 ms':>15}")
    for name, (p50, p99) in rows:
        print(f"{name:<14}{p50:>10.3f}{p99:>10.3f}{p50 - base:>15.3f}")
    print()
    print(f"{'rate-limit decisions/s':<40}{'memory':>12}{'redis (32 conc.)':>18}")
    print(f"{'(2 buckets per decision)':<40}{mem_rate:>12,.0f}{redis_rate:>18,.0f}")
    print()
    print(f"audit into PostgreSQL: {args.events} events alongside live calls")
    print(f"{'events/s sustained':<28}{'call p50 at start':>20}{'call p50 at end':>18}")
    print(f"{sustained['events_per_s']:<28,.0f}{sustained['p50_start_ms']:>18.3f}ms"
          f"{sustained['p50_end_ms']:>16.3f}ms")
    print()
    print("audit durability: the on (memory) chain, batch (default) vs strict (response after the commit)")
    print(f"{'store':<12}{'mode':<8}{'seq p50 ms':>12}{'seq calls/s':>13}{'32-conc calls/s':>17}{'32-conc p50 ms':>16}")
    for store_name, mode, (seq_p50, seq_rate, conc_rate, conc_p50) in durability:
        print(f"{store_name:<12}{mode:<8}{seq_p50:>12.3f}{seq_rate:>13,.0f}{conc_rate:>17,.0f}{conc_p50:>16.3f}")
    added = rows[1][1][0] - base
    print()
    print(f"targets: added p50 (memory) {added:.3f} ms <= 0.3 ms: {'PASS' if added <= 0.3 else 'FAIL'}; "
          f"audit {sustained['events_per_s']:,.0f}/s >= 5,000/s: "
          f"{'PASS' if sustained['events_per_s'] >= 5000 else 'FAIL'}")


if __name__ == "__main__":
    asyncio.run(main())

"""The phases of ``bench/soak.py --faults``: one coroutine per fault, run in turn under the mixed
load of ``bench/soak_rig.py``, and the report that judges them.

Each phase takes the rig and its share of the run (``seconds``), runs the load for that long and
applies its fault meanwhile:

``steady``  nothing: no errors anywhere.
``resets``  5 requests arriving on used keep-alive connections to ``up``'s upstream are reset
            (spread over the phase): at most one failed call per reset.
``kill``    ``up``'s upstream is SIGKILLed and started again on the same port a fifth of the phase
            later; recovery: from the restarted upstream serving to ``up`` serving through the gateway.
``rest``    the REST backend answers 500 for a third of the phase, then hangs past the connector's
            3 s timeout for a third, then recovers; recovery: from "recovered" to ``rest`` serving.
``sql``     every PostgreSQL backend of the SQL connector's role is terminated
            (``pg_terminate_backend``), 5 times over the phase; recovery: the worst time from a kill
            to ``db`` serving again (the pool reconnects by itself).
``audit``   the audit store (PostgreSQL behind the bench's TCP relay) is unreachable for
            min(20 s, a third of the phase): clients see no error at all, the events are spilled and
            replayed once it is back (``audit_events_spilled_total`` = the ``spill_replay`` share of
            ``audit_events_written_total``), and the gateway's RSS at the end of the phase is within 5%
            of its RSS just before the outage; recovery: from "back" to the spill file replayed.
``reload``  the watched config file is rewritten 4 times, each changing only the ``notes``
            resource's text: each reload restarts ``notes`` alone (the gateway's log line) and the
            new text is served; recovery: the worst time from a write to the new text served.
``hostile`` one more session, opened with a lone surrogate and a NUL in its client info, mixes
            into the load requests carrying what broke the audit record (issue 26): lone
            surrogates, NULs and control characters in arguments, keys, names and URIs, 4-byte
            emoji, and invalid UTF-8 in a ``traceparent`` header. Its answers may be errors (an
            unknown tool); what counts is that each has its audit row, the store stays up (no
            event spilled) and the log has no error.

In every phase no connector but the one it faults may fail (``steady``, ``audit`` and ``hostile``
fault none), and the phase's audit rows equal the requests it had answered. Through ``sql``,
``audit`` and ``hostile`` the gateway's log must show no ERROR and no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from proxy import Caller
from soak_rig import CONNECTORS, Phase, Rig, rig, rss_kib

from tests.audit.hostile import BAD_TRACE, raw_post

__all__ = ["PHASES", "faults", "faults_report"]

OUTAGE_MAX_S = 20.0
MEMORY_TOLERANCE = 0.03
# (connector, method, params) the hostile session cycles: what a store, the JSONL mirror or the
# spill file could not take as it was. Lone surrogates never go to the SDK upstreams (their
# answers are theirs to get right); valid but unusual UTF-8 does.
HOSTILE: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("db", "tools/call", {"name": "db_count", "arguments": {"x": "P-\ud800-x"}}),
    ("rest", "tools/call", {"name": "rest_ok", "arguments": {"id": "\u0000x"}}),
    ("notes", "resources/read", {"uri": "notes://run\u0000book\x1b"}),
    ("gateway", "tools/call", {"name": "nope-\udfff-\u0000", "arguments": {"w\u0000\ud83d": ["\udc80"]}}),
    ("up", "tools/call", {"name": "up_echo", "arguments": {"text": "P-\U0001F600-\x1b[31m\x07\u2028-x"}}),
)
HOSTILE_CLIENT = {"name": "C-\ud800-\u0000", "version": "\U0001F600" * 3}


def log_problems(r: Rig, since: int) -> list[str]:
    """The gateway's log lines after the first ``since`` at level error or critical, or holding a
    traceback."""
    lines = r.log_path.read_text(errors="replace").splitlines()[since:]
    return [line for line in lines
            if '"level": "error"' in line or '"level": "critical"' in line or "Traceback" in line]


def log_length(r: Rig) -> int:
    return len(r.log_path.read_text(errors="replace").splitlines())


def check_log(r: Rig, phase: Phase, since: int) -> None:
    problems = log_problems(r, since)
    if problems:
        phase.notes.append(f"first log problem: {problems[0][:300]}")
    phase.check("no ERROR or traceback in the gateway log", not problems)


@contextlib.asynccontextmanager
async def under_load(r: Rig, phase: Phase, seconds: float) -> AsyncIterator[None]:
    """The mixed load runs for ``seconds`` from the block's start (the block applies the fault);
    leaving the block waits for the load to end."""
    running = asyncio.create_task(r.load(phase, seconds))
    try:
        yield
    except BaseException:
        running.cancel()
        raise
    await running


async def steady(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("steady"))
    await r.load(phase, seconds)
    return phase


async def resets(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("resets"), "up")
    assert r.resetter is not None
    first = r.resetter.resets
    async with under_load(r, phase, seconds):
        for n in range(1, 6):
            await asyncio.sleep(seconds / 6)
            r.resetter.arm()
            with contextlib.suppress(TimeoutError):
                await r.resetter.wait_resets(first + n, timeout=seconds)
    done = r.resetter.resets - first
    phase.notes.append(f"{done} requests on used connections reset")
    phase.check("5 resets, at most one failed call each", done == 5 and phase.errors_of("up") <= done)
    return phase


async def kill(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("kill"), "up")
    async with under_load(r, phase, seconds):
        await asyncio.sleep(seconds / 10)
        await r.kill_up()
        await asyncio.sleep(seconds / 5)
        await r.start_up()  # returns once the new upstream answers HTTP
        phase.recovered_s = await r.until_serves("up", phase, timeout=seconds)
    phase.notes.append(f"upstream SIGKILLed, restarted {seconds / 5:.0f}s later")
    return phase


async def rest(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("rest"), "rest")
    async with under_load(r, phase, seconds):
        for mode in ("500", "hang"):
            r.rest.mode = mode
            await asyncio.sleep(seconds / 3)
        r.rest.mode = "ok"
        phase.recovered_s = await r.until_serves("rest", phase, timeout=seconds)
    phase.notes.append(f"REST backend: 500s for {seconds / 3:.0f}s, then hangs for {seconds / 3:.0f}s")
    return phase


async def sql(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("sql"), "db")
    mark = log_length(r)
    killed, worst = 0, 0.0
    kills: list[str] = []
    async with under_load(r, phase, seconds):
        for _ in range(5):
            await asyncio.sleep(seconds / 6)
            killed += await r.kill_sql_backends()
            kills.append(f"{phase.at():.1f}")
            worst = max(worst, await r.until_serves("db", phase, timeout=seconds))
    phase.recovered_s = worst
    phase.notes.append(f"5 rounds of pg_terminate_backend (at {', '.join(kills)}s): {killed} backends of the "
                       "connector's role killed")
    phase.check("backends were killed and db served after each round", killed >= 5)
    check_log(r, phase, mark)
    return phase


async def audit(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("audit"))  # no connector is faulted: clients must not see the outage at all
    assert r.audit_proxy is not None
    mark = log_length(r)
    outage = min(OUTAGE_MAX_S, seconds / 3)
    spilled0 = await r.metric("mcp_gateway_audit_events_spilled_total")
    replayed0 = await r.metric("mcp_gateway_audit_events_written_total", sink="spill_replay")
    spilled = replayed = 0.0
    async with under_load(r, phase, seconds):
        await asyncio.sleep(seconds / 6)
        before = rss_kib(r.pid)
        await r.audit_proxy.cut()
        await asyncio.sleep(outage)
        down = rss_kib(r.pid)
        await r.audit_proxy.restore()
        back = time.perf_counter()
        async with asyncio.timeout(max(120.0, seconds)):  # the writer retries every second by itself
            while not (spilled and replayed >= spilled and await r.audit_up()):
                await asyncio.sleep(0.2)
                spilled = await r.metric("mcp_gateway_audit_events_spilled_total") - spilled0
                replayed = await r.metric("mcp_gateway_audit_events_written_total", sink="spill_replay") - replayed0
        phase.recovered_s = time.perf_counter() - back
        replayed_rss = rss_kib(r.pid)
    after = rss_kib(r.pid)
    growth = (after - before) / before
    phase.notes.append(f"store unreachable {outage:.0f}s: {spilled:,.0f} events spilled, {replayed:,.0f} replayed")
    phase.notes.append(f"RSS MiB: {before / 1024:.1f} before the outage, {down / 1024:.1f} at its end, "
                       f"{replayed_rss / 1024:.1f} once replayed, {after / 1024:.1f} at the phase's end "
                       f"({100 * growth:+.1f}%)")
    phase.check("events spilled and all replayed", spilled > 0 and replayed == spilled)
    phase.check(f"RSS after the replay within {MEMORY_TOLERANCE:.0%} of before", growth <= MEMORY_TOLERANCE)
    check_log(r, phase, mark)
    return phase


async def hostile(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("hostile"))  # no connector is faulted: hostile input must not fail anyone else
    assert r.http is not None
    mark = log_length(r)
    spilled0 = await r.metric("mcp_gateway_audit_events_spilled_total")
    caller = Caller(r.http, f"{r.base_url}/mcp", "")
    await caller._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": HOSTILE_CLIENT}})
    caller.headers["mcp-protocol-version"] = "2025-06-18"
    await caller._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    sent = 0
    async with under_load(r, phase, seconds):
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            for connector, method, params in HOSTILE:
                await r.request(caller, phase, connector, method, params, count_errors=False)
            await _bad_header(r, phase, caller)
            sent += len(HOSTILE) + 1
            await asyncio.sleep(0.05)  # mixed in, not a flood: the load is the other callers'
    spilled = await r.metric("mcp_gateway_audit_events_spilled_total") - spilled0
    phase.notes.append(f"{sent} hostile requests among {phase.requests}; {spilled:.0f} events spilled")
    phase.check("the audit store stayed up (no event spilled)", spilled == 0 and await r.audit_up())
    check_log(r, phase, mark)
    return phase


async def _bad_header(r: Rig, phase: Phase, caller: Caller) -> None:
    """One request whose ``traceparent`` is not UTF-8 (aiohttp's client cannot send that)."""
    rid = f"{phase.name}.h{phase.requests}"
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": "db_count", "arguments": {}}}).encode()
    headers: dict[str, str | bytes] = {**caller.headers, "traceparent": BAD_TRACE}
    phase.requests += 1
    try:
        status, payload = await raw_post(f"{r.base_url}/mcp", body, headers)
    except (OSError, TimeoutError):
        return
    if status == 200 and f'"id": "{rid}"'.encode() in payload.replace(b'"id":"', b'"id": "'):
        phase.answered += 1



async def reload(r: Rig, seconds: float) -> Phase:
    phase = Phase(r.name_for("reload"), "notes")
    seen = len(r.log_lines("config reloaded (file changed)"))
    worst = 0.0
    written: list[str] = []
    async with under_load(r, phase, seconds):
        for n in range(1, 5):
            await asyncio.sleep(seconds / 5)
            r.write_config(f"# Runbook v{n}")
            written.append(f"{phase.at():.1f}")
            worst = max(worst, await r.until_serves("notes", phase, timeout=seconds, expect=f"Runbook v{n}"))
    phase.recovered_s = worst
    lines = r.log_lines("config reloaded (file changed)")[seen:]
    alone = [line for line in lines if "started ['notes'], stopped ['notes']" in line]
    phase.notes.append(f"4 config changes to notes (at {', '.join(written)}s): {len(lines)} reloads, "
                       f"{len(alone)} restarted notes alone")
    phase.check("4 reloads, each restarting notes alone", len(lines) == len(alone) == 4)
    return phase


PHASES: tuple[Callable[[Rig, float], Awaitable[Phase]], ...] = (steady, resets, kill, rest, sql, audit, hostile,
                                                                 reload)


async def faults(phase_s: float, concurrency: int, pg_url: str,
                 only: tuple[Callable[[Rig, float], Awaitable[Phase]], ...] = PHASES,
                 log_path: Path | None = None) -> list[Phase]:
    """The phases ``only`` (default: all) in turn, ``phase_s`` each; then the gateway is stopped
    (SIGTERM drains and flushes its audit log) and each phase's audit rows are counted. The
    gateway's log is kept at ``log_path`` if given."""
    async with rig(concurrency, pg_url, log_path) as r:
        phases = []
        for run in only:
            phase = await run(r, phase_s)
            phases.append(phase)
            print(f"  {phase.name}: {phase.requests} requests, {sum(phase.errors.values())} errors", flush=True)
        await r.stop_gateway()
        rows = await r.audit_rows()
        for phase in phases:
            phase.audit_rows = rows.get(phase.name, 0)
    return phases


def faults_report(phases: list[Phase]) -> tuple[str, bool]:
    head = "".join(f"{c:>8}" for c in CONNECTORS)
    lines = ["errors by connector (columns); recover s: see each phase's note",
             f"{'phase':<8}{'requests':>9}{'answered':>9}{'audit':>8}{head}{'recover':>9}"
             f"{'RSS MiB start>end (max)':>25}{'fds':>9}", "-" * 133]
    ok = True
    for p in phases:
        counts = "".join(f"{p.errors_of(c):>8}" for c in CONNECTORS)
        recover = f"{p.recovered_s:.2f}" if p.recovered_s is not None else "-"
        rss = [s[0] / 1024 for s in p.samples] or [0.0]
        fds = [s[1] for s in p.samples] or [0]
        trend = f"{rss[0]:.1f}>{rss[-1]:.1f} ({max(rss):.1f})"
        lines.append(f"{p.name:<8}{p.requests:>9}{p.answered:>9}{p.audit_rows:>8}{counts}{recover:>9}"
                     f"{trend:>25}{f'{fds[0]}>{fds[-1]}':>9}")
    lines.append("")
    for p in phases:
        elsewhere = {c: p.errors_of(c) for c in CONNECTORS if c != p.faulted and p.errors_of(c)}
        p.check(f"no errors on {'any connector' if p.faulted is None else 'connectors but ' + p.faulted}",
                not elsewhere)
        p.check("audit rows = answered requests", p.audit_rows == p.answered)
        kinds = "; ".join(f"{c} {k!r} x{n} ({p.seen[(c, k)][0]:.1f}-{p.seen[(c, k)][1]:.1f}s)"
                          for (c, k), n in sorted(p.errors.items()))
        took, where, when = p.slowest
        lines.append(f"{p.name}: " + " | ".join([*p.notes, f"slowest request {took:.2f}s ({where}, sent at {when:.1f}s)"]))
        if kinds:
            lines.append(f"  errors by kind: {kinds}")
        for label, held in p.checks:
            lines.append(f"  [{'ok' if held else 'FAILED'}] {label}")
            ok = ok and held
    answered, rows = sum(p.answered for p in phases), sum(p.audit_rows for p in phases)
    healthy = sum(p.errors_of("other") for p in phases)
    lines.append("")
    lines.append(f"healthy connector 'other' over the whole run: {healthy} errors")
    lines.append(f"audit rows {rows} vs answered requests {answered} (initialize excluded from both)")
    ok = ok and healthy == 0 and rows == answered
    lines.append(f"verdict: {'held' if ok else 'DID NOT HOLD'}")
    return "\n".join(lines), ok

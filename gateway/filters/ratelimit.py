"""Rate-limit filter: GCRA buckets in memory or in Redis, and per-connector concurrency limits.

Rules (``rate_limits.rules``) key their buckets by scope:

* ``principal`` — one bucket per principal, every request counts;
* ``tool`` — one bucket per public tool name (``tools/call`` only), ``match`` globs the tool;
* ``connector`` — one bucket per connector (``match`` globs the connector name);
* ``global`` — one bucket for everything (``match`` globs the target).

``per_principal: true`` splits a tool/connector/global bucket per principal. A request is checked
against all the buckets that apply to it at once, all or nothing (see
:func:`gateway.policy.gcra_check`); a refusal raises :class:`RateLimited` whose ``data`` carries
``retryAfterMs`` and the refusing rule's ``scope``.

Backends: ``memory`` (one process) or ``redis://host:port/db`` — one Lua script decides every key
of a request atomically on the server with the server's clock, so any number of replicas share one
budget. When Redis cannot be reached, or does not answer within ``redis_timeout_s`` (tens of ms by
default: one attempt, no retries), the filter follows ``on_backend_error`` (``open`` lets calls
through, ``closed`` refuses them as unavailable, -32004, not as throttled) and logs it (at most
every 10 s) and counts it (``backend_errors``, metric ``rate_limit_backend_errors_total``). After
``breaker_failures`` failures in a row a circuit breaker (:class:`gateway.policy.CircuitBreaker`)
opens: every call gets ``on_backend_error`` at once, without waiting on Redis, and one call probes
Redis again every ``breaker_cooldown_s``; a probe that succeeds closes the breaker. So a Redis that
accepts connections but never answers costs one timeout per cool-down, not one per call.
:meth:`RateLimitFilter.health` is what ``/readyz`` reports (kept fresh by :meth:`~RateLimitFilter.probe`,
whose success also closes an open breaker).

``max_concurrency`` on a connector bounds its in-flight calls; a call waits for a slot until its
deadline and is refused as rate limited (scope ``connector``) if none frees up.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gateway.config import RateLimitConfig, RateLimitRule
from gateway.context import CallContext
from gateway.filters import SESSION_METHODS, Handler
from gateway.policy import CircuitBreaker, Decision, Rate, gcra_check, parse_rate
from gateway.protocol.errors import BackendUnavailable, RateLimited
from gateway.telemetry import metrics

if TYPE_CHECKING:
    from connectors.base import Connector

__all__ = ["RateLimitFilter", "MemoryBackend", "RedisBackend", "CompiledLimit", "LUA_GCRA", "Owner"]

# (method, public target) -> the connector serving it now, or None (the catalog's ``owner``).
Owner = Callable[[str, str], "Connector | None"]

log = logging.getLogger("gateway.ratelimit")


@dataclass(frozen=True, slots=True)
class CompiledLimit:
    scope: str
    match: re.Pattern[str] | None  # None: matches everything
    rate: Rate
    per_principal: bool
    prefix: str  # stable per rule content, so replicas with the same config share buckets

    @classmethod
    def compile(cls, rule: RateLimitRule) -> CompiledLimit:
        rate = parse_rate(rule.rate, rule.burst)
        ident = f"{rule.scope}|{rule.match}|{rate.per_second}|{rate.burst}|{rule.per_principal}"
        digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
        match = None if rule.match == "*" else re.compile(fnmatch.translate(rule.match))
        return cls(rule.scope, match, rate, rule.per_principal, f"{rule.scope[0]}{digest}")


class Backend(Protocol):
    async def check(self, keys: Sequence[str], rates: Sequence[Rate]) -> Decision: ...
    async def close(self) -> None: ...


class MemoryBackend:
    """TATs in a dict on the monotonic clock; one process only."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self._tats: dict[str, float] = {}
        self._max_keys = max_keys

    def check_sync(self, keys: Sequence[str], rates: Sequence[Rate], now: float | None = None) -> Decision:
        now = time.monotonic() if now is None else now
        tats = self._tats
        decision, new = gcra_check([tats.get(k) for k in keys], rates, now)
        if decision.allowed:
            if len(tats) >= self._max_keys:
                self._sweep(now)
            for k, t in zip(keys, new, strict=True):
                tats[k] = t
        return decision

    async def check(self, keys: Sequence[str], rates: Sequence[Rate]) -> Decision:
        return self.check_sync(keys, rates)

    def _sweep(self, now: float) -> None:
        # A TAT in the past means a full bucket: forgetting it changes no decision.
        for k in [k for k, t in self._tats.items() if t <= now]:
            del self._tats[k]

    async def close(self) -> None:
        self._tats.clear()


# Mirrors gateway.policy.rates.gcra_check; times in seconds on the Redis server's clock.
# KEYS: bucket keys. ARGV: cost, then interval_i, burst_i for each key.
LUA_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cost = tonumber(ARGV[1])
local worst = 0
local denied = -1
local new = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key))
  if tat == nil or tat < now then tat = now end
  local cand = tat + cost * interval
  local wait = cand - burst * interval - now
  if wait > 0.000001 and wait > worst then
    worst = wait
    denied = i - 1
  end
  new[i] = cand
end
if denied >= 0 then
  return {0, string.format('%.6f', worst), denied}
end
for i, key in ipairs(KEYS) do
  local ttl = math.ceil(new[i] - now) + 1
  redis.call('SET', key, string.format('%.6f', new[i]), 'EX', ttl)
end
return {1, '0', -1}
"""


class RedisBackend:
    """Shared buckets in Redis via one atomic Lua script (EVALSHA, loaded on first use).

    One decision is bounded by ``timeout_s`` as a whole (connect, script load, script), with no
    retries: a slow answer is worth less than ``on_backend_error`` applied now."""

    def __init__(self, url: str, key_prefix: str = "gw:rl", timeout_s: float = 0.05) -> None:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.timeout_s = timeout_s
        self.client = aioredis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                        retry=Retry(NoBackoff(), 0), health_check_interval=30)
        self.script = self.client.register_script(LUA_GCRA)
        # One hash tag: every key of a request lives in the same Redis Cluster slot.
        self.key_prefix = "{" + key_prefix + "}:"

    async def check(self, keys: Sequence[str], rates: Sequence[Rate]) -> Decision:
        args: list[float] = [1.0]
        for rate in rates:
            args.extend((rate.interval, rate.burst))
        # The socket timeouts bound each wait; this bounds their sum (a NOSCRIPT answer costs a
        # second round trip).
        async with asyncio.timeout(self.timeout_s * 2):
            ok, wait, index = await self.script(keys=[self.key_prefix + k for k in keys], args=args)
        if int(ok) == 1:
            return Decision(True)
        return Decision(False, float(wait), int(index))

    async def close(self) -> None:
        await self.client.aclose()


class RateLimitFilter:
    def __init__(self, config: RateLimitConfig, owner: Owner | None = None,
                 concurrency: dict[str, int] | None = None) -> None:
        self.config = config
        self.owner = owner
        self.limits = tuple(CompiledLimit.compile(r) for r in config.rules)
        self.fail_open = config.on_backend_error == "open"
        self.backend_name = "redis" if config.backend.startswith(("redis://", "rediss://", "unix://")) else "memory"
        self.backend: Backend = (RedisBackend(config.backend, config.redis_prefix, config.redis_timeout_s)
                                 if self.backend_name == "redis" else MemoryBackend())
        # Only a remote backend can be unhealthy; the memory backend never fails.
        self.breaker = CircuitBreaker(config.breaker_failures, config.breaker_cooldown_s) \
            if self.backend_name == "redis" else None
        if self.breaker is not None:
            _breaker_state(self.backend_name, self.breaker.state)
        self._semaphores = {name: asyncio.Semaphore(n) for name, n in (concurrency or {}).items()}
        self._needs_connector = bool(self._semaphores) or any(lim.scope == "connector" for lim in self.limits)
        self._last_error_log = float("-inf")
        self.backend_errors = 0
        self.limited = 0
        self.backend_error: str | None = None  # why the backend failed last, None once it answers

    def health(self) -> dict[str, Any]:
        """The backend's state for ``/readyz``."""
        out: dict[str, Any] = {"backend": self.backend_name, "up": self.backend_error is None}
        if self.backend_error is not None:
            out["detail"] = self.backend_error
        return out

    async def probe(self) -> None:
        """One round trip to the backend touching no bucket, so health is current without calls."""
        try:
            await self.backend.check((), ())
        except Exception as exc:  # whatever Redis raises: it is the detail readiness reports
            self.backend_error = _describe(exc)
            return
        self.backend_error = None
        if self.breaker is not None and self.breaker.success():  # Redis answers: calls may use it again
            _breaker_state(self.backend_name, "closed")
            log.warning("rate-limit backend %s answers again; limits are enforced by it again", self.backend_name)

    async def stop(self) -> None:
        await self.backend.close()

    def _connector_of(self, ctx: CallContext) -> str | None:
        """The connector serving the target (the catalog records it only later, inside)."""
        if self.owner is None:
            return None
        connector = self.owner(ctx.method, ctx.target)
        return connector.name if connector is not None else None

    def _note_connector(self, ctx: CallContext, connector: str | None) -> None:
        """A refused call never reaches its connector: record whose target it named, for the audit row."""
        if ctx.record.connector is None:
            ctx.record.connector = connector if connector is not None else self._connector_of(ctx)

    def _keys(self, ctx: CallContext, connector: str | None) -> tuple[list[str], list[Rate], list[str]]:
        keys: list[str] = []
        rates: list[Rate] = []
        scopes: list[str] = []
        principal = ctx.principal.name
        for lim in self.limits:
            scope = lim.scope
            if scope == "principal":
                subject, key = ctx.target, principal
            elif scope == "tool":
                if ctx.method != "tools/call":
                    continue
                subject = key = ctx.target
            elif scope == "connector":
                if connector is None:
                    continue
                subject = key = connector
            else:
                subject, key = ctx.target, ""
            if lim.match is not None and lim.match.match(subject) is None:
                continue
            if lim.per_principal and scope != "principal":
                key = f"{key}|{principal}"
            keys.append(f"{lim.prefix}:{key}")
            rates.append(lim.rate)
            scopes.append(scope)
        return keys, rates, scopes

    async def _decide(self, keys: list[str], rates: list[Rate]) -> Decision:
        breaker = self.breaker
        if breaker is not None:
            before = breaker.state
            allowed = breaker.allow(time.monotonic())
            if breaker.state != before:  # open → half_open: this call is the probe
                _breaker_state(self.backend_name, breaker.state)
            if not allowed:
                return self._fallback(None)  # open: Redis is not asked (backend_error keeps the last cause)
        try:
            decision = await self.backend.check(keys, rates)
        except Exception as exc:  # redis errors, OSError, timeouts: apply the configured choice
            self.backend_error = _describe(exc)
            if breaker is not None:
                before = breaker.state
                opened = breaker.failure(time.monotonic())
                if breaker.state != before:  # closed → open (a trip) or half_open → open (failed probe)
                    _breaker_state(self.backend_name, breaker.state)
                    metrics.RATE_LIMIT_BREAKER_TRIPS.labels(self.backend_name).inc()
                if opened:
                    log.error("rate-limit backend %s failed %d times in a row (last: %s); failing %s without "
                              "asking it, probing again every %g s", self.backend_name, breaker.failures,
                              _describe(exc), "open" if self.fail_open else "closed", breaker.cooldown_s)
            return self._fallback(exc)
        self.backend_error = None
        if breaker is not None and breaker.success():
            _breaker_state(self.backend_name, "closed")
            log.warning("rate-limit backend %s answers again; limits are enforced by it again", self.backend_name)
        return decision

    def _fallback(self, exc: BaseException | None) -> Decision:
        """``on_backend_error`` for one call: counted always, logged at most every 10 s. Open: the
        call goes through; closed: :class:`BackendUnavailable` (-32004), never :class:`RateLimited`."""
        self.backend_errors += 1
        _count_backend_error(self.backend_name, "allow" if self.fail_open else "deny")
        now = time.monotonic()
        if now - self._last_error_log > 10.0:
            self._last_error_log = now
            log.error("rate-limit backend %s unavailable (%s); failing %s", self.backend_name,
                      _describe(exc) if exc is not None else "circuit breaker open",
                      "open" if self.fail_open else "closed")
        if self.fail_open:
            return Decision(True)
        # Nothing was throttled: the limiter could not decide. Clients must not back off as if limited.
        raise BackendUnavailable(f"rate-limit backend unavailable ({self.backend_name}); calls are refused "
                                 "until it is back (rate_limits.on_backend_error: closed)") from None

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        if ctx.method in SESSION_METHODS:
            return await call_next(ctx)
        connector = self._connector_of(ctx) if self._needs_connector else None
        if self.limits:
            keys, rates, scopes = self._keys(ctx, connector)
            if keys:
                decision = await self._decide(keys, rates)
                if not decision.allowed:
                    self.limited += 1
                    ctx.record.outcome = "rate_limited"
                    self._note_connector(ctx, connector)
                    scope = scopes[decision.denied_index] if decision.denied_index >= 0 else "backend"
                    raise RateLimited(f"Rate limit exceeded ({scope}); retry in {decision.retry_after_ms} ms",
                                      decision.retry_after_ms, scope)
        sem = self._semaphores.get(connector) if connector is not None else None
        if sem is None:
            return await call_next(ctx)
        if sem.locked():
            try:
                async with asyncio.timeout(ctx.remaining()):
                    await sem.acquire()
            except TimeoutError:
                self.limited += 1
                ctx.record.outcome = "rate_limited"
                self._note_connector(ctx, connector)
                raise RateLimited(f"Connector {connector} is at its concurrency limit", 1000, "connector") from None
        else:
            await sem.acquire()
        try:
            return await call_next(ctx)
        finally:
            sem.release()


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__  # a timeout's message is empty


def _breaker_state(backend: str, state: str) -> None:
    for name in ("closed", "open", "half_open"):
        metrics.RATE_LIMIT_BREAKER_STATE.labels(backend, name).set(1 if name == state else 0)


def _count_backend_error(backend: str, decision: str) -> None:
    metrics.RATE_LIMIT_BACKEND_ERRORS.labels(backend, decision).inc()


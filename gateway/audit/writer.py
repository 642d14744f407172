"""The audit writer: a bounded queue drained by one task into the store, in batches.

Contract:

* :meth:`AuditWriter.submit` never awaits and never blocks on the network: it is called on the
  request path and does ``put_nowait``. If the queue is full (the store is slower than the traffic
  for longer than the queue lasts) the event is appended to the spill file right away instead of
  being dropped, so memory stays bounded and nothing is lost.
* The writer task takes up to ``batch_size`` events at a time: once an event arrives it gives the
  batch up to ``flush_interval_s`` to fill (less when it fills or the writer stops), so a quiet
  gateway commits a few times a second rather than once per request (a commit per event cost
  about 0.85 ms of CPU per request on SQLite). It redacts them, mirrors them as JSON lines (stdout
  or a file) when configured, and inserts them in one transaction.
* When the store fails, the batch goes to the spill file (JSON lines, flushed and fsynced) and
  later batches follow it there; every ``retry_s`` the writer tries to replay the spill file into
  the store. Replay renames the file first, so new spills never interleave with it, and inserts are
  idempotent by ``event_id``, so a replay interrupted half-way is simply done again.
* Hostile input (issue 26): events are made storable where they are finalised (escaped when a
  string cannot be stored, :mod:`gateway.audit.escape`). Behind that, a batch the store refuses
  for what it holds (not for being away) is split in halves until the culprit is alone
  (:mod:`gateway.audit.isolate`); the culprit is written in the strong escaped form, or kept in
  ``<spill_path>.rejected`` with an error logged, so one event never takes its batch with it and
  a replay never stalls on one. The mirror, the spill file and the rejected file share one
  encoding (:mod:`gateway.audit.spill`); a spill line that is not JSON goes to the rejected file.
* :meth:`stop` drains the queue completely (to the store, or to the spill file when the store is
  down) before returning: the gateway calls it on SIGTERM after in-flight requests finished.
* Retention: events older than ``retention_days`` are deleted at start and every hour.

Durability (``audit.durability``):

* ``batch`` (the default): :meth:`submit` returns at once and the response goes out while the event
  waits for its batch, so a process killed with SIGKILL loses what the last ``flush_interval_s``
  collected (SIGTERM loses nothing: :meth:`stop` drains).
* ``strict``: :meth:`submit` returns a future the audit filter awaits before the response is
  sent; it is resolved once the event's batch is committed to the store or appended to the spill
  file and fsync'd. The writer does not linger for company: whatever queued while the previous
  commit ran goes in the next one (group commit), so concurrent requests share a commit and
  sequential ones pay about one commit each (see ``bench/policy.py``). When neither the store nor
  the spill file can take an event (a full disk) its future fails with :class:`NotRecorded` and
  the call is answered with an error, never its result. In ``batch`` mode the response is still
  sent and the failure logged at error level.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import gateway.audit.spill as spill
from gateway.config import AuditConfig
from gateway.telemetry import metrics

from .events import Redactor, finalize
from .isolate import insert_isolating, reason
from .store import AuditStore

__all__ = ["AuditWriter", "NotRecorded"]

log = logging.getLogger("gateway.audit")

_STOP: Any = object()  # sentinel put on the queue to wake the writer at stop
_RETENTION_EVERY_S = 3600.0
# Events per INSERT when replaying the spill file: each batch is decoded, copied into rows and
# bound at once, and that peak stays in the heap after the replay (bench/audit_replay.py-style
# outage of ~3,800 events: +2.9% RSS after the replay with 500, +1.6% with 100).
_REPLAY_BATCH = 100


class NotRecorded(Exception):
    """Strict durability: the event was neither committed nor spilled (its call must not be
    answered with a result)."""


class AuditWriter:
    def __init__(self, config: AuditConfig, base_dir: str | Path = ".",
                 secret_digests: Iterable[bytes] = (), retry_s: float = 1.0,
                 digest_key: str | bytes | None = None) -> None:
        """``digest_key``: the key of each event's ``arguments_digest`` (none: no digest)."""
        self.config = config
        self._digest_key = digest_key.encode() if isinstance(digest_key, str) else digest_key
        base = self.base_dir = Path(base_dir)
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(config.queue_size)
        self._batch_size = config.batch_size
        self._full = asyncio.Event()  # a batch is ready (or the writer is stopping): stop lingering
        store_url = (config.store or "").strip()
        self.store = AuditStore(store_url, base) if store_url and store_url != "none" else None
        self.redactor = Redactor(config.redact, secret_digests)
        spill = Path(config.spill_path)
        self.spill_path = spill if spill.is_absolute() else (base / spill).resolve()
        self.replay_path = self.spill_path.with_name(self.spill_path.name + ".replaying")
        # Lines and events no store took even escaped: kept for a person, never retried.
        self.rejected_path = self.spill_path.with_name(self.spill_path.name + ".rejected")
        self.retry_s = retry_s
        self.store_up = False
        self._next_retry = 0.0
        self._next_retention = 0.0
        self._task: asyncio.Task[None] | None = None
        self._mirror: IO[str] | None = None
        self._mirror_owned = False
        self.strict = config.durability == "strict"
        self._waiters: dict[str, asyncio.Future[None]] = {}  # strict: event_id -> "durable now"
        # Counters (exported as metrics by the audit filter; read by tests and the bench).
        self.submitted = 0
        self.written = 0
        self.spilled = 0
        self.replayed = 0
        self.overflowed = 0
        self.store_errors = 0
        self.trims = 0  # replays after which freed heap pages were handed back to the OS
        self.escaped = 0  # events a store refused until they were written in the strong escaped form
        self.rejected = 0  # events no store took even so (in rejected_path)

    # -- request path -----------------------------------------------------------------------

    def submit(self, event: dict[str, Any]) -> asyncio.Future[None] | None:
        """Queue an event. In strict mode, returns a future resolved once the event is durable
        (None when it already is); in batch mode, None."""
        self.submitted += 1
        if self.strict and self._task is None:
            # No writer task to wait for (not started, or stopped): durable right here, or the
            # OSError tells the filter it is not.
            self._spill([self._finalize(event)])
            return None
        try:
            self.queue.put_nowait(event)
            if self.queue.qsize() >= self._batch_size:
                self._full.set()
        except asyncio.QueueFull:
            self.overflowed += 1
            self._spill([self._finalize(event)])  # an OSError: strict tells the caller
            return None
        if not self.strict:
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A cancelled call never awaits its waiter: mark a NotRecorded set on it as seen, so
        # asyncio does not log "exception was never retrieved".
        waiter.add_done_callback(_retrieve)
        self._waiters[event["event_id"]] = waiter
        return waiter

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if self.config.jsonl:
            if self.config.jsonl == "stdout":
                self._mirror = sys.stdout
            elif self.config.jsonl == "stderr":
                self._mirror = sys.stderr
            else:
                path = Path(self.config.jsonl)
                if not path.is_absolute():
                    path = self.base_dir / path
                self._mirror = _open_append(path)  # closed in stop()
                self._mirror_owned = True
        if self.store is not None:
            try:
                await self.store.open()
                self.store_up = True
            except Exception as exc:  # any driver error: run spilled until the store returns
                self._store_failed(exc)
            if self.store_up:
                await self._replay()
                await self._retention()
        self._task = asyncio.create_task(self._run(), name="audit-writer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.put_nowait(_STOP)
            self._full.set()
            try:
                await task
            except asyncio.CancelledError:
                # Cancelled while draining: write whatever is left straight to the spill file.
                left = self._drain_nowait()[0]
                self._spill([self._finalize(e) for e in left])
                self._release(left)
                for _ in left:
                    self.queue.task_done()
                raise
        if self.store is not None:
            await self.store.close()
        if self._mirror is not None and self._mirror_owned:
            self._mirror.close()
        self._mirror = None

    async def flush(self) -> None:
        """Wait until every event submitted so far has been written or spilled."""
        await self.queue.join()

    # -- writer task ---------------------------------------------------------------------------

    def _drain_nowait(self, limit: int | None = None) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` queued events, and whether the stop sentinel was among them.

        The caller marks them done (``task_done``) once they are written, so :meth:`flush` means
        "stored or spilled", not merely "taken off the queue".
        """
        out: list[dict[str, Any]] = []
        saw_stop = False
        while limit is None or len(out) < limit:
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if item is _STOP:
                self.queue.task_done()
                saw_stop = True
            else:
                out.append(item)
        return out, saw_stop

    async def _run(self) -> None:
        stopping = False
        while True:
            try:
                first = await asyncio.wait_for(self.queue.get(), self.config.flush_interval_s * 5)
            except TimeoutError:
                await self._maintain()
                continue
            batch = [] if first is _STOP else [first]
            if first is _STOP:
                self.queue.task_done()
            elif not self.strict:  # strict: no lingering, what queued meanwhile is the batch
                await self._linger()
            more, saw_stop = self._drain_nowait(self.config.batch_size - len(batch))
            batch.extend(more)
            stopping = stopping or saw_stop or first is _STOP
            if batch:
                try:
                    await self._write(batch)
                except asyncio.CancelledError:
                    # Cancelled mid-insert: keep the batch. If the insert did commit, the replay
                    # skips these rows by event_id, so this never duplicates.
                    self._spill(batch)
                    raise
                except Exception as exc:  # neither store nor spill file took it (disk full): keep going
                    log.exception("could not write %d audit events to the store or the spill file", len(batch))
                    self._release(batch, exc)
                finally:
                    self._release(batch)
                    for _ in batch:
                        self.queue.task_done()
            if stopping and self.queue.empty():
                return
            await self._maintain()

    def _release(self, batch: list[dict[str, Any]], lost: BaseException | None = None) -> None:
        """Strict mode: the batch is durable, its responses may go; or ``lost`` (neither stored
        nor spilled, and logged): its calls are answered with an error (:class:`NotRecorded`)."""
        if not self._waiters:
            return
        for event in batch:
            waiter = self._waiters.pop(event["event_id"], None)
            if waiter is not None and not waiter.done():
                if lost is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(NotRecorded(f"audit event not recorded: {reason(lost)}"))
        if not self._waiters:
            # A dict keeps the table it grew to (thousands of slots after a burst); start afresh.
            self._waiters = {}

    async def _linger(self) -> None:
        """Give the batch up to ``flush_interval_s`` to fill; back sooner when it is full or the
        writer is stopping."""
        if self._full.is_set() or self.queue.qsize() + 1 >= self._batch_size:
            self._full.clear()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.flush_interval_s):
                await self._full.wait()
        self._full.clear()

    async def _maintain(self) -> None:
        now = time.monotonic()
        if self.store is None:
            return
        if not self.store_up and now >= self._next_retry:
            await self._replay()
        elif self.store_up and now >= self._next_retention:
            await self._retention()

    def _finalize(self, event: dict[str, Any]) -> dict[str, Any]:
        return finalize(event, self.redactor, self._digest_key)

    def _mirror_lines(self, events: list[dict[str, Any]]) -> None:
        if self._mirror is not None:
            try:
                self._mirror.write(b"".join(spill.line(e) for e in events).decode("utf-8"))
                self._mirror.flush()
            except OSError:
                log.warning("audit JSON-lines mirror failed", exc_info=True)
            metrics.AUDIT_EVENTS_WRITTEN.labels("jsonl").inc(len(events))

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        events = [self._finalize(e) for e in batch]
        self._mirror_lines(events)
        metrics.AUDIT_QUEUE_DEPTH.set(self.queue.qsize())
        if self.store is None:
            self.written += len(events)
            return
        if not self.store_up and time.monotonic() >= self._next_retry:
            await self._replay()
        if self.store_up:
            try:
                await self._insert(events)
                self.written += len(events)
                metrics.AUDIT_EVENTS_WRITTEN.labels("store").inc(len(events))
                return
            except Exception as exc:
                self._store_failed(exc)
        self._spill(events)

    async def _write_queued(self) -> None:
        """During a replay: once a batch of events has queued, write it to the store between two
        replay batches, so the queue does not pile up while a long spill file is replayed (what
        piles up raises the heap's high-water mark for good). Should the store fail, they are
        spilled (the replay, which sees the error, resumes later) or, if even that fails, lost
        (logged; strict: their calls answer an error)."""
        if self.queue.qsize() < self._batch_size:
            return
        batch, saw_stop = self._drain_nowait(self._batch_size)
        if saw_stop:
            self.queue.put_nowait(_STOP)  # the writer task still has to see it (there is room)
        lost: BaseException | None = NotRecorded("not written")  # until stored or spilled
        try:
            events = [self._finalize(e) for e in batch]
            self._mirror_lines(events)
            try:
                await self._insert(events)
                lost = None
            except BaseException:  # cancelled too (stop): keep them, as the writer task does
                try:
                    self._spill(events)
                    lost = None
                except Exception as exc:
                    lost = exc
                    log.exception("could not write %d audit events to the store or the spill file", len(events))
                raise
            self.written += len(events)
            metrics.AUDIT_EVENTS_WRITTEN.labels("store").inc(len(events))
        finally:
            self._release(batch, lost)
            for _ in batch:
                self.queue.task_done()

    def _store_failed(self, exc: BaseException) -> None:
        self.store_errors += 1
        if self.store_up or self.store_errors == 1:
            # A warning: nothing is lost (the spill file keeps every event; losing one is an error).
            log.warning("audit store unavailable, spilling events to %s: %s", self.spill_path, reason(exc))
        self.store_up = False
        self._next_retry = time.monotonic() + self.retry_s

    async def _insert(self, events: list[dict[str, Any]]) -> None:
        """Insert events into the store, isolating any it refuses for what they hold
        (:func:`~gateway.audit.isolate.insert_isolating`); raises when the store is unavailable
        (the caller spills; inserts are idempotent, so what a half already stored is skipped by
        the replay)."""
        assert self.store is not None
        escaped, rejected = await insert_isolating(self.store, events, self.rejected_path)
        self.escaped += escaped
        self.rejected += rejected

    def _spill(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        spill.append(self.spill_path, b"".join(spill.line(e) for e in events))
        self.spilled += len(events)
        metrics.AUDIT_EVENTS_SPILLED.inc(len(events))

    async def _replay(self) -> None:
        """Move spilled events into the store; sets ``store_up`` on success.

        A store still away is found by one connection attempt (:meth:`AuditStore.open`) before
        any of the file is read: an outage costs a refused connect per ``retry_s``, not a batch
        decoded and bound each time. Memory is bounded by one replay batch
        (:data:`_REPLAY_BATCH` events at most) plus the queue, which :meth:`_write_queued` keeps
        under about ``batch_size`` while the replay runs."""
        assert self.store is not None
        try:
            if not self.store_up:
                await self.store.open()  # probes the store (and migrates a recreated one)
            total = 0
            size = min(self.config.batch_size, _REPLAY_BATCH)
            while True:
                if not self.replay_path.exists():
                    if not self.spill_path.exists() or self.spill_path.stat().st_size == 0:
                        break
                    os.replace(self.spill_path, self.replay_path)
                # Streamed one batch at a time: a 20,000-event outage held as one list left the
                # process ~5 MB bigger for good (freed small objects do not go back to the OS).
                count = 0
                for batch in spill.read_batches(self.replay_path, size, self.rejected_path):
                    await self._insert(batch)
                    count += len(batch)
                    await self._write_queued()
                self.replay_path.unlink()
                self.replayed += count
                total += count
                metrics.AUDIT_EVENTS_WRITTEN.labels("spill_replay").inc(count)
                if count:
                    log.info("audit store back: replayed %d spilled events", count)
            if total:
                gc.collect()  # the outage's exceptions hold frames (and batches) in cycles
                self.trims += spill.return_freed_memory()
            self.store_up = True
        except Exception as exc:
            self._store_failed(exc)

    async def _retention(self) -> None:
        assert self.store is not None
        self._next_retention = time.monotonic() + _RETENTION_EVERY_S
        try:
            removed = await self.store.prune(self.config.retention_days)
        except Exception as exc:
            self._store_failed(exc)
            return
        if removed:
            log.info("audit retention: deleted %d events older than %d days", removed, self.config.retention_days)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _open_append(path: Path) -> IO[str]:
    return open(path, "a", encoding="utf-8")  # noqa: SIM115 - the writer owns and closes it

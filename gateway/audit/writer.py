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
  the spill file can take an event (a full disk) the response is still sent, and the failure is
  logged at error level: auditing never turns a served request into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from gateway.config import AuditConfig
from gateway.telemetry import metrics

from .events import Redactor, finalize, from_jsonable, to_jsonable
from .store import AuditStore

__all__ = ["AuditWriter"]

log = logging.getLogger("gateway.audit")

_STOP: Any = object()  # sentinel put on the queue to wake the writer at stop
_RETENTION_EVERY_S = 3600.0


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(to_jsonable(event), separators=(",", ":"), ensure_ascii=False, default=str)


class AuditWriter:
    def __init__(self, config: AuditConfig, base_dir: str | Path = ".",
                 secret_digests: Iterable[bytes] = (), retry_s: float = 1.0) -> None:
        self.config = config
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

    # -- request path -----------------------------------------------------------------------

    def submit(self, event: dict[str, Any]) -> asyncio.Future[None] | None:
        """Queue an event. In strict mode, returns a future resolved once the event is durable
        (None when it already is); in batch mode, None."""
        self.submitted += 1
        if self.strict and self._task is None:
            # No writer task to wait for (not started, or stopped): durable right here.
            self._spill([finalize(event, self.redactor)])
            return None
        try:
            self.queue.put_nowait(event)
            if self.queue.qsize() >= self._batch_size:
                self._full.set()
        except asyncio.QueueFull:
            self.overflowed += 1
            self._spill([finalize(event, self.redactor)])
            return None
        if not self.strict:
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
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
                self._spill([finalize(e, self.redactor) for e in left])
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
                except Exception:  # neither store nor spill file took it (disk full): keep going
                    log.exception("could not write %d audit events to the store or the spill file", len(batch))
                finally:
                    self._release(batch)
                    for _ in batch:
                        self.queue.task_done()
            if stopping and self.queue.empty():
                return
            await self._maintain()

    def _release(self, batch: list[dict[str, Any]]) -> None:
        """Strict mode: the batch is durable (or lost, and logged): its responses may go."""
        if not self._waiters:
            return
        for event in batch:
            waiter = self._waiters.pop(event["event_id"], None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

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

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        events = [finalize(e, self.redactor) for e in batch]
        if self._mirror is not None:
            try:
                self._mirror.write("".join(_dumps(e) + "\n" for e in events))
                self._mirror.flush()
            except OSError:
                log.warning("audit JSON-lines mirror failed", exc_info=True)
            metrics.AUDIT_EVENTS_WRITTEN.labels("jsonl").inc(len(events))
        metrics.AUDIT_QUEUE_DEPTH.set(self.queue.qsize())
        if self.store is None:
            self.written += len(events)
            return
        if not self.store_up and time.monotonic() >= self._next_retry:
            await self._replay()
        if self.store_up:
            try:
                await self.store.write(events)
                self.written += len(events)
                metrics.AUDIT_EVENTS_WRITTEN.labels("store").inc(len(events))
                return
            except Exception as exc:
                self._store_failed(exc)
        self._spill(events)

    def _store_failed(self, exc: BaseException) -> None:
        self.store_errors += 1
        if self.store_up or self.store_errors == 1:
            log.error("audit store unavailable, spilling events to %s: %s", self.spill_path, _reason(exc))
        self.store_up = False
        self._next_retry = time.monotonic() + self.retry_s

    def _spill(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.spill_path, "a", encoding="utf-8") as fh:
            fh.write("".join(_dumps(e) + "\n" for e in events))
            fh.flush()
            os.fsync(fh.fileno())
        self.spilled += len(events)
        metrics.AUDIT_EVENTS_SPILLED.inc(len(events))

    async def _replay(self) -> None:
        """Move spilled events into the store; sets ``store_up`` on success."""
        assert self.store is not None
        try:
            total = 0
            while True:
                if not self.replay_path.exists():
                    if not self.spill_path.exists() or self.spill_path.stat().st_size == 0:
                        break
                    os.replace(self.spill_path, self.replay_path)
                # Streamed one batch at a time: a 20,000-event outage held as one list left the
                # process ~5 MB bigger for good (freed small objects do not go back to the OS).
                count = 0
                for batch in _read_spill(self.replay_path, self.config.batch_size):
                    await self.store.write(batch)
                    count += len(batch)
                self.replay_path.unlink()
                self.replayed += count
                total += count
                metrics.AUDIT_EVENTS_WRITTEN.labels("spill_replay").inc(count)
                if count:
                    log.info("audit store back: replayed %d spilled events", count)
            if total:
                self.trims += _return_freed_memory()
            if not self.store_up:
                await self.store.open()  # probes the store (and migrates a recreated one)
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


def _reason(exc: BaseException) -> str:
    """What went wrong with the store, as the driver said it, on one bounded line.

    SQLAlchemy's own message carries the statement (a batch's INSERT runs to kilobytes) and, but
    for the store's ``hide_parameters``, the rows: principals, session ids, arguments. The log
    gets neither.
    """
    orig = getattr(exc, "orig", None)
    cause = orig if isinstance(orig, BaseException) else exc
    text = " ".join(str(cause).split()) or "no detail"
    return f"{type(cause).__name__}: {text}"[:300]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


def _return_freed_memory() -> bool:
    """Hand the heap pages freed since the last trim back to the OS (``malloc_trim(0)``); False
    where that call does not exist.

    A replay decodes and binds ``batch_size`` events at a time, more at once than steady traffic
    usually holds, and glibc keeps the pages it freed mapped: after a 20,000-event outage a 65 MiB
    writer process stayed +5.1% bigger without this, +4.4% with it (``bench/audit_replay.py``; the
    rest is pymalloc arenas left part-used, paid once: a second outage adds 0.1%). Called once
    per replay; it took 4 ms in a 180 MiB process with a fragmented heap.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def _open_append(path: Path) -> IO[str]:
    return open(path, "a", encoding="utf-8")  # noqa: SIM115 - the writer owns and closes it


def _read_spill(path: Path, batch_size: int) -> Iterator[list[dict[str, Any]]]:
    """Yield the spilled events of ``path`` in batches of at most ``batch_size``.

    Memory stays bounded by one batch whatever the file's size; the caller deletes the file only
    after the last batch is stored, so an interrupted replay starts over (inserts are idempotent).
    """
    events: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                events.append(from_jsonable(json.loads(line)))
            except ValueError:
                # A torn last line (killed mid-write) cannot be recovered; say so, keep the rest.
                log.error("skipping unreadable spilled audit line: %.200s", line)
                continue
            if len(events) >= batch_size:
                yield events
                events = []
    if events:
        yield events

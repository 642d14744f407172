"""The audit writer's files: JSON lines of events (the mirror, the spill file, the rejected file),
and handing freed memory back after a replay.

One encoding for every file: :func:`line` writes an event as one JSON line of UTF-8, and an event
that could not be encoded (a lone surrogate the boundary missed) is escaped
(:func:`~gateway.audit.escape.escape_event`) rather than failing the write of every event with it.
:func:`read_batches` reads the spill file back in batches, each line made storable again
(:func:`~gateway.audit.events.from_jsonable`); a line that is not JSON is copied to the rejected
file and reported, never retried.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .escape import escape_event
from .events import from_jsonable, to_jsonable

__all__ = ["line", "append", "read_batches", "return_freed_memory"]

log = logging.getLogger("gateway.audit")
_LINE_ENDS = re.compile("[\u0085\u2028\u2029]")


def line(event: dict[str, Any]) -> bytes:
    """The event as one JSON line, UTF-8 (escaped first when it holds what UTF-8 cannot encode).

    Characters other readers take for a line end (U+0085, U+2028, U+2029: ``str.splitlines``,
    JavaScript) are written as JSON escapes too, so a line is one event for every reader."""
    try:
        data = _dumps(event).encode("utf-8")
    except UnicodeEncodeError:
        data = _dumps(escape_event(event)).encode("utf-8", "backslashreplace")
    return data + b"\n"


def _dumps(event: dict[str, Any]) -> str:
    text = json.dumps(to_jsonable(event), separators=(",", ":"), ensure_ascii=False, default=str)
    # Inside JSON strings only (the structure is ASCII), so the escape reads back the same.
    return _LINE_ENDS.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _LINE_ENDS.search(text) else text


def append(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and fsync it (raises OSError when the disk refuses)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def read_batches(path: Path, batch_size: int, rejected: Path) -> Iterator[list[dict[str, Any]]]:
    """Yield the spilled events of ``path`` in batches of at most ``batch_size``.

    Memory stays bounded by one batch whatever the file's size; the caller deletes the file only
    after the last batch is stored, so an interrupted replay starts over (inserts are idempotent).
    A line that is not an event (torn by a kill mid-write, or damaged) is appended to ``rejected``
    once and skipped: a replay never stops on it, and what it held is kept for a person.
    """
    events: list[dict[str, Any]] = []
    with open(path, "rb") as fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                data = json.loads(raw.decode("utf-8", "surrogateescape"))
                if not isinstance(data, dict):
                    raise ValueError("not an object")
                events.append(from_jsonable(data))
            except ValueError:
                log.error("unreadable spilled audit line moved to %s: %.200r", rejected, raw)
                append(rejected, raw + b"\n")
                continue
            if len(events) >= batch_size:
                yield events
                events = []
    if events:
        yield events


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


def return_freed_memory() -> bool:
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

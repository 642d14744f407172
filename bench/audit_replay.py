"""Audit spill replay: the process's resident memory before an audit-store outage and after the
spilled events are replayed, with the replay streamed in batches (the writer) next to the whole
file loaded as one list first (what the writer did before issue 19).

    .venv/bin/python bench/audit_replay.py [--events N] [--batch-size B] [--store sqlite|PG-URL]

Each mode runs in its own child process (RSS is per process and never shrinks back across modes):
an :class:`~gateway.audit.writer.AuditWriter` writes and commits one event (engine, statement cache
and imports warmed), RSS is read ("before"); then N events are spilled as during an outage, RSS is
read ("spilled"), the replay runs, and RSS is read after a ``gc.collect()`` ("after"). That is done
twice ("after 2nd"): a bounded cache is paid once, memory held per replayed event grows again.

``--store sqlite`` (default) writes the spill file directly; with a PostgreSQL URL a scratch
database is created there and taken down for real (``ALLOW_CONNECTIONS false``, sessions
terminated, as in tests/audit), events are submitted while it refuses connections, and the
writer's own retry replays them once it is back. Measured 2026-11-23, 20,515 events, batch 500,
PostgreSQL: whole file 65.2 -> 76.9 MiB (+17.9%, the file is also re-read on every failed retry
during the outage), streamed 65.3 -> 68.6 MiB (+5.2%; the replay itself +0.5 MiB) and +0.2 MiB
more after a second outage. 2026-11-24, with ``malloc_trim(0)`` after each replay (the writer's
``spill.return_freed_memory``): streamed 64.8 -> 67.7 MiB (+4.4%, +4.5% after the second outage),
against +5.1% / +5.3% without it in the same run; whole file +11.7%. What stays is paid once:
pymalloc arenas the replay's batches needed, left part-used (``sys._debugmallocstats``: 30 -> 32
arenas, the same live bytes), which later outages reuse. 2026-11-27 (issue 26: the store probed
before the file is read, 100 events per replay INSERT, events queued meanwhile written between
replay batches, ``gc.collect()`` before the trim), 10,000 events, PostgreSQL, a busy 2-core
machine: streamed 65.9 -> 67.7 MiB (+2.7%, +2.8% after the second outage); whole file +5.8%.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _child(mode: str, events: int, batch_size: int, store: str) -> dict[str, int]:
    if store == "sqlite":
        return await _measure(mode, events, batch_size, None)
    from tests.audit.pgdb import scratch_database
    async with scratch_database(store) as db:
        return await _measure(mode, events, batch_size, db)


async def _measure(mode: str, events: int, batch_size: int, db: Any) -> dict[str, int]:
    from gateway.audit import spill as spill_mod
    from gateway.audit import writer as writer_mod
    from gateway.audit.events import finalize
    from gateway.config import AuditConfig
    from tests.audit.sample import sample_event as _event

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cfg = AuditConfig(store=db.url if db else f"sqlite:///{base / 'a.db'}", spill_path=str(base / "spill.jsonl"),
                          flush_interval_s=0.02, batch_size=batch_size)
        writer = writer_mod.AuditWriter(cfg, base, retry_s=0.2)
        if mode == "whole file":  # the pre-fix replay: every spilled event in one list, then batches
            streamed = spill_mod.read_batches

            def whole(path: Path, size: int, rejected: Path):  # type: ignore[no-untyped-def]
                every = [e for batch in streamed(path, size, rejected) for e in batch]
                for i in range(0, len(every), size):
                    yield every[i:i + size]
            spill_mod.read_batches = whole  # type: ignore[assignment]
        await writer.start()
        writer.submit(_event(-1))
        await asyncio.wait_for(writer.flush(), 30)
        gc.collect()
        before = rss_kib()
        marks = []
        for cycle in range(2):  # two outages: a bounded cache is paid once, a leak grows again
            first = cycle * events
            if db:  # a real outage: the database refuses connections, the writer spills
                await db.go_down()
                for start in range(first, first + events, batch_size):
                    for i in range(start, min(first + events, start + batch_size)):
                        writer.submit(_event(i))
                    await asyncio.wait_for(writer.flush(), 60)
                assert not writer.store_up
                await db.come_back()
            else:
                for start in range(first, first + events, batch_size):  # spilled batch by batch
                    writer._spill([finalize(_event(i), writer.redactor)
                                   for i in range(start, min(first + events, start + batch_size))])
            gc.collect()
            marks.append(rss_kib())
            async with asyncio.timeout(120):  # the writer's own retry replays; wait for it
                while writer.replayed < (cycle + 1) * events:
                    if not db:
                        await writer._replay()
                    await asyncio.sleep(0.1)
            assert writer.replayed == (cycle + 1) * events, writer.replayed
            gc.collect()
            marks.append(rss_kib())
        spilled, after, _, after2 = marks
        await writer.stop()
    return {"before": before, "spilled": spilled, "after": after, "after2": after2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_515)
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--store", default="sqlite",
                    help="sqlite (a file; the spill written directly) or a PostgreSQL URL: a scratch "
                         "database is created there and taken down for real (connections refused)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child, args.events, args.batch_size, args.store))))
        return
    rows = []
    for mode in ("whole file", "streamed"):
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--events", str(args.events),
                              "--batch-size", str(args.batch_size), "--store", args.store], capture_output=True, text=True,
                             check=True, timeout=600)
        rows.append((mode, json.loads(out.stdout.strip().splitlines()[-1])))
    print(f"audit spill replay of {args.events:,} events (batch {args.batch_size}), store {args.store}")
    print(f"{'replay':<12}{'RSS before MiB':>16}{'spilled MiB':>13}{'after MiB':>11}{'growth':>9}{'after 2nd MiB':>15}{'growth':>9}")
    print("-" * 85)
    for mode, r in rows:
        growth = (r["after"] - r["before"]) / r["before"]
        growth2 = (r["after2"] - r["before"]) / r["before"]
        print(f"{mode:<12}{r['before'] / 1024:>16.1f}{r['spilled'] / 1024:>13.1f}{r['after'] / 1024:>11.1f}"
              f"{100 * growth:>+8.1f}%{r['after2'] / 1024:>15.1f}{100 * growth2:>+8.1f}%")


if __name__ == "__main__":
    main()

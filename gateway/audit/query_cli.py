"""``mcp-gateway audit query --config F [--since ...] [--until ...] [--principal P] [--target T]
[--outcome O] [--method M] [--limit N] [--oldest-first] [--follow [--follow-for S]] [--json]`` and
``mcp-gateway audit prune --config F``.

Reads the audit store named by the config (the same URL the gateway writes to). ``--since`` and
``--until`` take an ISO 8601 time or a duration back from now (``90s``, ``15m``, ``2h``, ``7d``);
``--target`` may use ``*`` wildcards. The answer is the newest ``--limit`` events, newest first
(``--oldest-first``: the oldest ones, in time order). ``--follow`` prints the newest ``--limit``
events in time order, like ``tail -f``, then polls the store every ``--interval`` seconds and prints
rows inserted since, until SIGINT (exit 0) or ``--follow-for`` seconds. Rows are tailed by their
insertion ``id``; the last :data:`LOOKBACK` ids are read again on each poll so a batch another
replica committed late (with lower ids) is still printed, once. Output: an aligned table, or one
JSON object per line with ``--json``. Exit status 0 on success, 2 on bad arguments or config, 1 when
the store cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.config import load_config
from gateway.protocol.errors import ConfigError

from .events import to_jsonable
from .store import AuditStore

__all__ = ["main", "parse_when", "LOOKBACK"]

# Ids re-read on each --follow poll: batches of several writers commit out of id order.
LOOKBACK = 1000

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_COLUMNS = ("time", "principal", "method", "target", "outcome", "error_code", "latency_ms", "connector",
            "session_id", "request_id")


def parse_when(text: str, now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    match = _DURATION.match(text.strip())
    if match:
        return now - timedelta(**{_UNIT[match.group(2)]: float(match.group(1))})
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-gateway audit", description="Read the audit log.")
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("query", help="list audit events matching filters")
    q.add_argument("--config", required=True, help="gateway config file (its audit.store is read)")
    q.add_argument("--since", help="ISO time or duration back from now (15m, 2h, 7d)")
    q.add_argument("--until", help="ISO time or duration back from now")
    q.add_argument("--principal")
    q.add_argument("--target", help="public target; * is a wildcard")
    q.add_argument("--outcome", help="ok | tool_error | denied | rate_limited | invalid | not_found | ...")
    q.add_argument("--method")
    q.add_argument("--limit", type=_positive_int, default=1000, help="at most this many events (the newest)")
    q.add_argument("--oldest-first", action="store_true", help="the oldest events, in time order")
    q.add_argument("--follow", action="store_true", help="then print new events as they are written")
    q.add_argument("--follow-for", type=_positive_float, metavar="SECONDS", help="stop following after this long")
    q.add_argument("--interval", type=_positive_float, default=1.0, help="seconds between polls (--follow)")
    q.add_argument("--json", action="store_true", help="one JSON object per line")
    p = sub.add_parser("prune", help="delete events older than audit.retention_days now")
    p.add_argument("--config", required=True)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _table(rows: Sequence[dict[str, Any]], header: bool = True) -> str:
    cells = [[_cell(r.get(c)) for c in _COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths, strict=True)).rstrip()] if header else []
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _emit(rows: Sequence[dict[str, Any]], as_json: bool, header: bool = True) -> None:
    if as_json:
        for row in rows:
            item = {k: v for k, v in row.items() if k != "id"}
            sys.stdout.write(json.dumps(to_jsonable(item), ensure_ascii=False, default=str) + "\n")
    elif rows or header:
        print(_table(rows, header))
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return str(value)


async def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    store = AuditStore(config.audit.store, config.base_dir)
    try:
        if args.command == "prune":
            removed = await store.prune(config.audit.retention_days)
            print(f"deleted {removed} events older than {config.audit.retention_days} days")
            return 0
        filters: dict[str, Any] = {
            "since": parse_when(args.since) if args.since else None,
            "until": parse_when(args.until) if args.until else None,
            "principal": args.principal, "target": args.target, "outcome": args.outcome, "method": args.method}
        rows = await store.query(**filters, limit=args.limit, newest_first=not args.oldest_first or args.follow)
        if args.follow:
            rows.reverse()  # tail -f: the newest events, in the order they happened
            _emit(rows, args.json)
            await _follow(store, filters, rows, args)
            return 0
    finally:
        await store.close()
    _emit(rows, args.json)
    if not args.json:
        print(f"({len(rows)} events)")
    return 0


async def _follow(store: AuditStore, filters: dict[str, Any], shown: Sequence[dict[str, Any]],
                  args: argparse.Namespace) -> None:
    """Poll for rows inserted after the newest one shown; each row is printed once."""
    mark = max((int(r["id"]) for r in shown), default=0)
    # Rows already in the look-back window but left out of the first page (older than the newest
    # --limit) are not new: only rows that appear in the window from now on are printed.
    window = await store.query(**filters, after_id=max(0, mark - LOOKBACK), limit=2 * LOOKBACK)
    seen = {int(r["id"]) for r in shown} | {int(r["id"]) for r in window if int(r["id"]) <= mark}
    deadline = None if args.follow_for is None else time.monotonic() + args.follow_for
    while True:
        wait = args.interval if deadline is None else min(args.interval, deadline - time.monotonic())
        if wait <= 0:
            return
        await asyncio.sleep(wait)
        rows = await store.query(**filters, after_id=max(0, mark - LOOKBACK), limit=LOOKBACK + args.limit)
        fresh = [r for r in rows if int(r["id"]) not in seen]
        if not fresh:
            continue
        seen.update(int(r["id"]) for r in fresh)
        mark = max(mark, *(int(r["id"]) for r in fresh))
        seen = {i for i in seen if i > mark - LOOKBACK}  # bounded: only ids a poll can return again
        _emit(fresh, args.json, header=False)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "audit":
        argv = argv[1:]
    args = _parser().parse_args(argv)
    try:
        for flag in ("since", "until"):
            if getattr(args, flag, None):
                parse_when(getattr(args, flag))
    except ValueError as exc:
        print(f"mcp-gateway audit: bad time: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:  # Ctrl-C ends --follow; what was printed is complete
        return 0
    except ConfigError as exc:
        print(f"mcp-gateway audit: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"mcp-gateway audit: cannot read the audit store: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # driver errors (asyncpg, sqlite) differ by backend
        print(f"mcp-gateway audit: cannot read the audit store: {exc}", file=sys.stderr)
        return 1

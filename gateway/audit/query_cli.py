"""``mcp-gateway audit query --config F [--since ...] [--until ...] [--principal P] [--target T]
[--outcome O] [--method M] [--limit N] [--json]`` and ``mcp-gateway audit prune --config F``.

Reads the audit store named by the config (the same URL the gateway writes to). ``--since`` and
``--until`` take an ISO 8601 time or a duration back from now (``90s``, ``15m``, ``2h``, ``7d``);
``--target`` may use ``*`` wildcards. Output: an aligned table, or one JSON object per line with
``--json``. Exit status 0 on success, 2 on bad arguments or config, 1 when the store cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.config import load_config
from gateway.protocol.errors import ConfigError

from .events import to_jsonable
from .store import AuditStore

__all__ = ["main", "parse_when"]

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
    q.add_argument("--limit", type=int, default=1000)
    q.add_argument("--json", action="store_true", help="one JSON object per line")
    p = sub.add_parser("prune", help="delete events older than audit.retention_days now")
    p.add_argument("--config", required=True)
    return parser


def _table(rows: list[dict[str, Any]]) -> str:
    cells = [[_cell(r.get(c)) for c in _COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


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
        rows = await store.query(
            since=parse_when(args.since) if args.since else None,
            until=parse_when(args.until) if args.until else None,
            principal=args.principal, target=args.target, outcome=args.outcome, method=args.method,
            limit=args.limit)
    finally:
        await store.close()
    if args.json:
        for row in rows:
            row.pop("id", None)
            sys.stdout.write(json.dumps(to_jsonable(row), ensure_ascii=False, default=str) + "\n")
    else:
        print(_table(rows))
        print(f"({len(rows)} events)")
    return 0


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
    except ConfigError as exc:
        print(f"mcp-gateway audit: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"mcp-gateway audit: cannot read the audit store: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # driver errors (asyncpg, sqlite) differ by backend
        print(f"mcp-gateway audit: cannot read the audit store: {exc}", file=sys.stderr)
        return 1

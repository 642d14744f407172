"""``mcp-gateway oauth list|revoke``: the grants in a config's token store, shown and removed.

    mcp-gateway oauth list CONFIG [--json]
        connector, issuer, principal ((service) for the service identity), scopes, expiry;
        never a token
    mcp-gateway oauth revoke CONFIG --connector C [--principal P] [--issuer I]
        forgets the matching grants (all principals and issuers of C unless narrowed;
        --principal '' is the service identity); exit 1 when none matched

The store is the one the config names (:func:`~.service.open_token_store`, the same key), so it
can run next to a serving gateway: a file store is changed under its lock and the gateway sees the
change on its next read; a Redis store is shared anyway. Revoking forgets the grant here; it does
not call the authorization server's revocation endpoint (revoke there too for a leaked token).
Exit 2 for a config or store problem, with the message.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from connectors.oauth.port import GrantKey
from gateway.config import load_config
from gateway.protocol.errors import ConfigError

from .sealing import StoreError
from .service import open_token_store

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-gateway oauth", description="Upstream OAuth grants in the token store.")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="show grants (never their tokens)")
    listing.add_argument("config")
    listing.add_argument("--json", action="store_true")
    revoke = sub.add_parser("revoke", help="forget grants")
    revoke.add_argument("config")
    revoke.add_argument("--connector", required=True)
    revoke.add_argument("--principal", help="one principal ('' for the service identity); default all")
    revoke.add_argument("--issuer", help="one authorization server (exact issuer); default all")
    return parser


def _expiry(expires_at: float | None, now: float) -> str:
    if expires_at is None:
        return "-"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
    return stamp + (" (expired)" if expires_at <= now else "")


async def _list(args: argparse.Namespace) -> int:
    store = await open_token_store(load_config(args.config))
    try:
        rows: list[dict[str, Any]] = []
        for key in sorted(await store.keys(), key=lambda k: (k.connector, k.issuer, k.principal)):
            grant = await store.get(key)
            if grant is None:  # revoked meanwhile
                continue
            rows.append({"connector": key.connector, "issuer": key.issuer, "principal": key.principal,
                         "scopes": list(grant.scopes), "expires_at": grant.expires_at,
                         "refreshable": grant.refresh_token is not None})
    finally:
        await store.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    now = time.time()
    table = [("CONNECTOR", "ISSUER", "PRINCIPAL", "SCOPES", "EXPIRES")] + [
        (r["connector"], r["issuer"], r["principal"] or "(service)", " ".join(r["scopes"]) or "-",
         _expiry(r["expires_at"], now)) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[4])
    print(f"{len(rows)} grant(s)", file=sys.stderr)
    return 0


async def _revoke(args: argparse.Namespace) -> int:
    store = await open_token_store(load_config(args.config))
    try:
        matched: list[GrantKey] = [
            k for k in await store.keys()
            if k.connector == args.connector and (args.principal is None or k.principal == args.principal)
            and (args.issuer is None or k.issuer == args.issuer)]
        removed = [k for k in matched if await store.delete(k)]
    finally:
        await store.close()
    for key in removed:
        print(f"revoked {key.connector} {key.issuer} {key.principal or '(service)'}")
    if not removed:
        print(f"no grant of connector {args.connector!r} matched", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    runner = _list if args.command == "list" else _revoke
    try:
        return asyncio.run(runner(args))
    except (ConfigError, StoreError) as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2

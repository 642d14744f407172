"""The shared record of an older client's session, and a session rebuilt from it (pure).

What a replica needs to serve any request of a session it did not start: the negotiated revision,
the client's capabilities and info (which server→client requests it may get), the principal the
session is bound to (a request from anyone else is refused, as on the replica that started it),
its log level and the resources it subscribed to. What is alive only in one process (in-flight
requests, pending server→client requests, open streams) is not in it: those are reached by
routing (:mod:`gateway.state`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.context import Principal
from gateway.session import Session

__all__ = ["session_record", "principal_of", "restore", "RECORD_VERSION"]

RECORD_VERSION = 1


def session_record(session: Session, subscriptions: Iterable[str] = ()) -> dict[str, Any]:
    principal = session.principal
    return {
        "v": RECORD_VERSION,
        "transport": session.transport,
        "protocol_version": session.protocol_version,
        "client_info": session.client_info,
        "client_capabilities": session.client_capabilities,
        "log_level": session.log_level,
        "principal": {"name": principal.name, "groups": sorted(principal.groups), "kind": principal.kind},
        "subscriptions": sorted(subscriptions),
    }


def principal_of(record: dict[str, Any]) -> Principal | None:
    """The principal a record binds its session to; None for a record this version cannot read."""
    raw = record.get("principal")
    if record.get("v") != RECORD_VERSION or not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    groups = raw.get("groups")
    return Principal(raw["name"], frozenset(g for g in groups if isinstance(g, str)) if isinstance(groups, list)
                     else frozenset(), str(raw.get("kind", "anonymous")))


def restore(session: Session, session_id: str, record: dict[str, Any]) -> None:
    """Make a fresh session (state NEW) the READY session the record describes."""
    session.id = session_id
    session.protocol_version = str(record.get("protocol_version", ""))
    info, caps = record.get("client_info"), record.get("client_capabilities")
    session.client_info = info if isinstance(info, dict) else {}
    session.client_capabilities = caps if isinstance(caps, dict) else {}
    level = record.get("log_level")
    if isinstance(level, str):
        session.log_level = level
    session.lifecycle.initialized()

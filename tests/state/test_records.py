"""The session record and the owner encoded in server→client request ids (pure)."""

from __future__ import annotations

from typing import Any

from gateway.context import Principal
from gateway.protocol.lifecycle import SessionState
from gateway.session import Session
from gateway.state.records import principal_of, restore, session_record
from gateway.transports.replicas import owner_of


def test_a_record_round_trips_into_a_ready_session() -> None:
    host: Any = object()
    first = Session(host, "streamable_http", send=None, principal=Principal("alice", frozenset({"ops"}), "api_key"))  # type: ignore[arg-type]
    first.protocol_version = "2025-06-18"
    first.client_capabilities = {"sampling": {}}
    first.client_info = {"name": "c", "version": "1"}
    first.log_level = "warning"
    record = session_record(first, {"docs://b", "docs://a"})
    assert record["subscriptions"] == ["docs://a", "docs://b"]
    assert principal_of(record) == Principal("alice", frozenset({"ops"}), "api_key")
    copy = Session(host, "streamable_http", send=None, principal=principal_of(record))  # type: ignore[arg-type]
    restore(copy, first.id, record)
    assert copy.id == first.id and copy.state is SessionState.READY
    assert (copy.protocol_version, copy.client_capabilities, copy.log_level) == ("2025-06-18", {"sampling": {}}, "warning")


def test_a_record_of_another_version_binds_nobody() -> None:
    assert principal_of({"v": 99, "principal": {"name": "alice"}}) is None
    assert principal_of({"v": 1}) is None


def test_owner_of_a_request_id() -> None:
    assert owner_of("gw.ab12cd.7") == "ab12cd"
    assert owner_of("gw-7") is None and owner_of(7) is None and owner_of("gw.x") is None

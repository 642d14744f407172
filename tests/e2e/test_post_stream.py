"""PostStream's bounded memory of events for resumption (the wire behaviour is in
test_streamable_http.py)."""

from __future__ import annotations

import pytest

from gateway.transports import post_stream
from gateway.transports.post_stream import PostStream, parse_event_id


async def test_kept_events_are_bounded_and_older_ones_cannot_be_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(post_stream, "MAX_EVENTS", 3)
    stream = PostStream(None, "7", True, "2025-11-25", lambda _s: None)  # type: ignore[arg-type]
    for seq in range(1, 6):
        stream._keep(seq, b"event")
    assert [seq for seq, _frame in stream._events] == [3, 4, 5]
    refused = await stream.resume(None, 1, 15.0)  # type: ignore[arg-type]
    assert refused.status == 400 and b"no longer kept" in refused.body  # type: ignore[operator,attr-defined]
    monkeypatch.setattr(post_stream, "MAX_EVENTS", 100)
    monkeypatch.setattr(post_stream, "MAX_BYTES", 12)
    for seq in range(6, 9):
        stream._keep(seq, b"12345")
    assert [seq for seq, _frame in stream._events] == [7, 8] and stream._bytes == 10


def test_event_ids() -> None:
    assert parse_event_id("12:0") == ("12", 0) and parse_event_id("a:b:3") == ("a:b", 3)
    for bad in ("12", ":3", "12:", "12:x", "12:-1"):
        assert parse_event_id(bad) is None

"""Server-Sent Events decoding (pure): lines in, events out.

Implements the WHATWG event-stream parsing rules the MCP transports rely on: ``data`` lines are
joined with ``\\n``, ``id`` sets the last event id (kept across events, as the spec says), ``retry``
sets the reconnection delay, comments (``:``) are ignored, and a blank line dispatches the event.
An event with an ``id`` and no data is still reported (Streamable HTTP servers send such "priming"
events so a client can resume with ``Last-Event-ID`` before any message arrived).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEDecoder"]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None
    retry_ms: int | None


class SSEDecoder:
    """Feed it one line at a time (bytes, with or without the line ending)."""

    __slots__ = ("_data", "_event", "_id_seen", "last_event_id", "retry_ms")

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id_seen = False
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed_line(self, raw: bytes) -> SSEEvent | None:
        """Returns the event a blank line completes, else None."""
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        field, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\x00" not in value:
                self.last_event_id = value
                self._id_seen = True
        elif field == "retry":
            if value.isdigit():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data and not self._id_seen:
            self._event = ""
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data), self.last_event_id if self._id_seen else None,
                         self.retry_ms)
        self._data = []
        self._event = ""
        self._id_seen = False
        return event

"""What a transport needs of the running gateway: a way to make and register sessions.

Transports know framing (HTTP, SSE, stdio) and nothing of MCP semantics; they get this protocol
and their own config section, never the gateway object. :class:`gateway.app.Gateway` implements it.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.context import Principal
from gateway.session import Send, Session
from gateway.state import StateStore

__all__ = ["SessionFactory"]


class SessionFactory(Protocol):
    @property
    def accepting(self) -> bool:
        """False once the gateway drains: new sessions are refused (HTTP 503)."""

    def open_session(self, transport: str, send: Send, principal: Principal) -> Session:
        """A new session, not yet registered (a failed ``initialize`` leaves nothing behind)."""

    def add_session(self, session: Session) -> None:
        """Register an established session: broadcasts, metrics and shutdown reach it from now on."""

    @property
    def state(self) -> StateStore:
        """What replicas share (``state.store``); ``state.shared`` is False with one process."""

    def session_record(self, session: Session) -> dict[str, Any]:
        """The shared record of an established session."""

    def adopt_session(self, transport: str, send: Send, session_id: str, record: dict[str, Any],
                      principal: Principal) -> Session:
        """A session another replica started, rebuilt from its record and registered here."""

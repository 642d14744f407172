"""The lifecycle of one downstream MCP session, as a pure state machine (in the style of h11's ``_state``).

Contract: this module holds state and answers questions; it never performs I/O, never awaits and
imports only the standard library and the pure :mod:`gateway.protocol` modules. The
session that owns a lifecycle asks :meth:`Lifecycle.admit` before serving each request, writes the
refusal it gets back as a JSON-RPC error, and reports what happened (``initialized``, ``close``).

:class:`SessionLifecycle` encodes the stateful revisions (2024-11-05 .. 2025-11-25)::

    NEW --initialize succeeded--> READY --close--> CLOSED     (close is allowed from any state)

* ``ping`` is admitted in NEW and READY (liveness is answered even before ``initialize``).
* ``initialize`` is admitted only in NEW; in READY it is refused with "Session already initialized".
  The session is READY as soon as ``initialize`` succeeds: clients may pipeline requests before
  ``notifications/initialized``. A failed ``initialize`` (bad params) does not call
  :meth:`SessionLifecycle.initialized`, so the session stays NEW.
* Any other request in NEW is refused: "Session not initialized: send initialize before {method}".
* In CLOSED every request is refused and notifications to the client are dropped
  (:attr:`SessionLifecycle.can_notify` is false). ``close`` is idempotent.

All its refusals use JSON-RPC Invalid Request (-32600). A refusal (:class:`Admission`) carries a
code, a message and, where the error defines one, ``data``.

Revision 2026-07-28 is stateless: no handshake, and every request carries its protocol version in
``_meta``. :class:`StatelessLifecycle` implements the same :class:`Lifecycle` protocol for it::

    READY --close--> CLOSED

* It starts READY and stays READY: nothing a request does changes it.
* ``initialize`` is admitted (a dual-era server serves it: the transport hands it to a legacy
  session, so this lifecycle is not the one that judges it).
* Given ``params``, a request is judged on its own ``_meta``
  (:func:`gateway.protocol.meta.require_request_meta`): a missing or malformed required field is
  refused with -32602, an unsupported version with -32022 and its ``data``. Without ``params``
  only the method is judged, against the latest modern revision.
* A method the request's revision does not define (``ping``, ``logging/setLevel``,
  ``resources/subscribe``/``unsubscribe``, anything unknown) is refused with -32601.
* In CLOSED every request is refused ("Session is closed", -32600), as above.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from gateway.protocol.errors import INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from gateway.protocol.meta import require_request_meta
from gateway.protocol.revisions import revision
from gateway.protocol.versions import LATEST_VERSION

__all__ = ["SessionState", "Admission", "ADMITTED", "LifecycleError", "Lifecycle", "SessionLifecycle",
           "StatelessLifecycle"]


class SessionState(enum.StrEnum):
    """Where a session is; string values so ``state == "ready"`` keeps working for old callers."""

    NEW = "new"
    READY = "ready"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer to "may this request be served now?"; a refusal carries its JSON-RPC error."""

    allowed: bool
    code: int | None = None
    message: str | None = None
    data: Any = None

    @classmethod
    def refuse(cls, message: str, code: int = INVALID_REQUEST, data: Any = None) -> Admission:
        return cls(False, code, message, data)

    @classmethod
    def from_error(cls, exc: ProtocolError) -> Admission:
        """The refusal that reports ``exc`` (code, message and data)."""
        return cls(False, exc.code, exc.message, exc.data)

    def check(self) -> None:
        """Raise :class:`LifecycleError` if this is a refusal; do nothing otherwise."""
        if not self.allowed:
            raise LifecycleError(self)


ADMITTED = Admission(True)


class LifecycleError(ProtocolError):
    """A request or transition the lifecycle refuses; reaches the client as a JSON-RPC error."""

    def __init__(self, admission: Admission) -> None:
        if admission.allowed or admission.code is None or admission.message is None:
            raise ValueError("LifecycleError needs a refusal with a code and a message")
        super().__init__(admission.message, admission.data, code=admission.code)
        self.admission = admission


@runtime_checkable
class Lifecycle(Protocol):
    """What a session needs from any lifecycle, stateful or stateless."""

    @property
    def state(self) -> SessionState: ...

    def admit(self, method: str, params: Mapping[str, Any] | None = None) -> Admission: ...

    def close(self) -> bool: ...


_CLOSED = Admission.refuse("Session is closed")
_ALREADY_INITIALIZED = Admission.refuse("Session already initialized")


class _StateHolder:
    """What both lifecycles share: the state, notification gating and an idempotent close."""

    __slots__ = ("_state",)

    def __init__(self, state: SessionState) -> None:
        self._state = state

    def __repr__(self) -> str:
        return f"{type(self).__name__}(state={self._state.value!r})"

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def can_notify(self) -> bool:
        """Whether notifications to the client are sent (anything but CLOSED) or dropped."""
        return self._state is not SessionState.CLOSED

    def close(self) -> bool:
        """Any state → CLOSED; True the first time, False if already closed (idempotent)."""
        if self._state is SessionState.CLOSED:
            return False
        self._state = SessionState.CLOSED
        return True


class SessionLifecycle(_StateHolder):
    """NEW → READY → CLOSED for one session of a stateful protocol revision (see the module doc)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(SessionState.NEW)

    def admit(self, method: str, params: Mapping[str, Any] | None = None) -> Admission:
        """Whether a request for ``method`` may be served in the current state; changes nothing."""
        if self._state is SessionState.CLOSED:
            return _CLOSED
        if method == "ping":
            return ADMITTED
        if method == "initialize":
            return ADMITTED if self._state is SessionState.NEW else _ALREADY_INITIALIZED
        if self._state is SessionState.NEW:
            return Admission.refuse(f"Session not initialized: send initialize before {method}")
        return ADMITTED

    def initialized(self) -> None:
        """NEW → READY, once ``initialize`` has succeeded.

        Raises :class:`LifecycleError` (and changes nothing) when the session is not NEW: another
        ``initialize`` won the race ("Session already initialized"), or the session was closed.
        """
        if self._state is SessionState.CLOSED:
            raise LifecycleError(_CLOSED)
        if self._state is not SessionState.NEW:
            raise LifecycleError(_ALREADY_INITIALIZED)
        self._state = SessionState.READY


class StatelessLifecycle(_StateHolder):
    """READY → CLOSED for a connection of a stateless protocol revision (see the module doc)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(SessionState.READY)

    def admit(self, method: str, params: Mapping[str, Any] | None = None) -> Admission:
        """Whether a request for ``method`` (with ``params``, when given) may be served."""
        if self._state is SessionState.CLOSED:
            return _CLOSED
        if method == "initialize":
            return ADMITTED
        version = LATEST_VERSION
        if params is not None:
            try:
                version = require_request_meta(params).version
            except ProtocolError as exc:
                return Admission.from_error(exc)
        if not revision(version).knows(method):
            return Admission.refuse(f"Method not found: {method}", METHOD_NOT_FOUND)
        return ADMITTED

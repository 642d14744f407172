"""The session lifecycle state machine, driven with plain values (no asyncio, no sessions)."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.protocol.errors import INVALID_REQUEST, InvalidRequest, ProtocolError, UnsupportedProtocolVersion
from gateway.protocol.lifecycle import (
    ADMITTED,
    Admission,
    Lifecycle,
    LifecycleError,
    SessionLifecycle,
    SessionState,
    StatelessLifecycle,
)
from gateway.protocol.meta import CLIENT_CAPABILITIES, PROTOCOL_VERSION
from gateway.protocol.versions import MODERN_VERSIONS

OTHER_METHODS = ["tools/list", "tools/call", "resources/read", "logging/setLevel", "completion/complete"]


def _ready() -> SessionLifecycle:
    lc = SessionLifecycle()
    lc.initialized()
    return lc


def _closed(initialize: bool) -> SessionLifecycle:
    lc = _ready() if initialize else SessionLifecycle()
    assert lc.close() is True
    return lc


def _refused(admission: Admission, message: str) -> None:
    assert admission.allowed is False
    assert admission.code == INVALID_REQUEST == -32600
    assert admission.message == message


# -- NEW ------------------------------------------------------------------------------------------
def test_starts_new_and_can_notify() -> None:
    lc = SessionLifecycle()
    assert lc.state is SessionState.NEW
    assert isinstance(lc.state, str) and str(lc.state) == "new"
    assert lc.can_notify is True


def test_ping_is_admitted_before_initialize() -> None:
    lc = SessionLifecycle()
    assert lc.admit("ping") == ADMITTED
    assert lc.state is SessionState.NEW


def test_initialize_is_admitted_in_new_without_changing_state() -> None:
    lc = SessionLifecycle()
    assert lc.admit("initialize").allowed is True
    assert lc.state is SessionState.NEW  # admission is a question, not a transition


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_other_requests_are_refused_before_initialize(method: str) -> None:
    lc = SessionLifecycle()
    _refused(lc.admit(method), f"Session not initialized: send initialize before {method}")
    assert lc.state is SessionState.NEW


def test_failed_initialize_keeps_new() -> None:
    # initialize admitted, then its params are rejected: the caller never reports initialized().
    lc = SessionLifecycle()
    assert lc.admit("initialize").allowed
    assert lc.state is SessionState.NEW
    assert lc.admit("initialize").allowed  # the client may try again
    _refused(lc.admit("tools/list"), "Session not initialized: send initialize before tools/list")


# -- NEW → READY ----------------------------------------------------------------------------------
def test_initialized_moves_new_to_ready() -> None:
    lc = SessionLifecycle()
    lc.initialized()
    assert lc.state is SessionState.READY
    assert isinstance(lc.state, str) and str(lc.state) == "ready"
    assert lc.can_notify is True


@pytest.mark.parametrize("method", ["ping", *OTHER_METHODS])
def test_requests_are_admitted_when_ready(method: str) -> None:
    assert _ready().admit(method) == ADMITTED


def test_initialize_is_refused_when_ready() -> None:
    lc = _ready()
    _refused(lc.admit("initialize"), "Session already initialized")
    assert lc.state is SessionState.READY


def test_second_initialized_raises_and_stays_ready() -> None:
    lc = _ready()
    with pytest.raises(LifecycleError) as info:
        lc.initialized()
    assert info.value.code == INVALID_REQUEST
    assert info.value.message == "Session already initialized"
    assert info.value.to_error() == {"code": -32600, "message": "Session already initialized"}
    assert lc.state is SessionState.READY


def test_initialized_after_close_raises_and_stays_closed() -> None:
    lc = _closed(initialize=False)
    with pytest.raises(LifecycleError, match="^Session is closed$") as info:
        lc.initialized()
    assert info.value.code == INVALID_REQUEST
    assert lc.state is SessionState.CLOSED


# -- CLOSED ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("initialize", [False, True], ids=["from-new", "from-ready"])
def test_close_from_any_state(initialize: bool) -> None:
    lc = _closed(initialize)
    assert lc.state is SessionState.CLOSED
    assert isinstance(lc.state, str) and str(lc.state) == "closed"


@pytest.mark.parametrize("initialize", [False, True], ids=["from-new", "from-ready"])
def test_close_is_idempotent(initialize: bool) -> None:
    lc = _closed(initialize)
    assert lc.close() is False
    assert lc.close() is False
    assert lc.state is SessionState.CLOSED


@pytest.mark.parametrize("initialize", [False, True], ids=["from-new", "from-ready"])
@pytest.mark.parametrize("method", ["ping", "initialize", *OTHER_METHODS])
def test_requests_after_close_are_refused(initialize: bool, method: str) -> None:
    _refused(_closed(initialize).admit(method), "Session is closed")


@pytest.mark.parametrize("initialize", [False, True], ids=["from-new", "from-ready"])
def test_notifications_after_close_are_dropped(initialize: bool) -> None:
    lc = _ready() if initialize else SessionLifecycle()
    assert lc.can_notify is True
    lc.close()
    assert lc.can_notify is False


# -- values ---------------------------------------------------------------------------------------
def test_admission_is_a_frozen_slotted_value() -> None:
    refusal = Admission.refuse("nope")
    assert refusal == Admission(False, INVALID_REQUEST, "nope")
    assert ADMITTED == Admission(True) and ADMITTED.code is None and ADMITTED.message is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        refusal.allowed = True  # type: ignore[misc]
    assert not hasattr(refusal, "__dict__")


def test_admission_check_raises_only_for_refusals() -> None:
    ADMITTED.check()
    refusal = Admission.refuse("Session already initialized")
    with pytest.raises(LifecycleError) as info:
        refusal.check()
    assert info.value.admission is refusal
    # A LifecycleError is an ordinary ProtocolError, so the session's existing handler maps it.
    assert isinstance(info.value, ProtocolError)
    assert info.value.code == InvalidRequest.code


def test_lifecycle_error_needs_a_refusal() -> None:
    with pytest.raises(ValueError):
        LifecycleError(ADMITTED)
    with pytest.raises(ValueError):
        LifecycleError(Admission(False))


def test_session_lifecycle_implements_the_lifecycle_protocol() -> None:
    lc: Lifecycle = SessionLifecycle()
    assert isinstance(lc, Lifecycle)
    assert lc.admit("ping", {"_meta": {}}).allowed  # params are accepted and ignored
    assert lc.close() is True and lc.state is SessionState.CLOSED


def test_lifecycles_are_independent() -> None:
    a, b = SessionLifecycle(), SessionLifecycle()
    a.initialized()
    b.close()
    assert (a.state, b.state) == (SessionState.READY, SessionState.CLOSED)
    assert repr(a) == "SessionLifecycle(state='ready')"


# -- StatelessLifecycle (2026-07-28) --------------------------------------------------------------
MODERN_METHODS = ["server/discover", "subscriptions/listen", "tools/list", "tools/call", "resources/list",
                  "resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"]
LEGACY_ONLY = ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"]


def _modern(version: object = "2026-07-28", **extra: object) -> dict[str, object]:
    return {"_meta": {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: {}}, **extra}


def test_stateless_is_always_ready() -> None:
    lc = StatelessLifecycle()
    assert lc.state is SessionState.READY and lc.can_notify is True
    for method in MODERN_METHODS:
        lc.admit(method, _modern())
    assert lc.state is SessionState.READY
    assert repr(lc) == "StatelessLifecycle(state='ready')"


@pytest.mark.parametrize("method", MODERN_METHODS)
def test_stateless_admits_the_modern_methods(method: str) -> None:
    assert StatelessLifecycle().admit(method, _modern()) == ADMITTED
    assert StatelessLifecycle().admit(method) == ADMITTED  # without params: the method alone


# (tasks/get, tasks/update, tasks/cancel are the tasks extension's: admitted, and served to a
# request that negotiates it; tasks/list and tasks/result were 2025-11-25's experimental tasks.)
@pytest.mark.parametrize("method", [*LEGACY_ONLY, "notifications/roots/list_changed", "tasks/list", "tasks/result",
                                    "no/such"])
def test_stateless_refuses_methods_the_revision_does_not_define(method: str) -> None:
    for admission in (StatelessLifecycle().admit(method, _modern()), StatelessLifecycle().admit(method)):
        assert admission == Admission(False, -32601, f"Method not found: {method}")


def test_stateless_does_not_refuse_initialize() -> None:
    # The transport hands initialize to a legacy session; this lifecycle never judges it.
    assert StatelessLifecycle().admit("initialize") == ADMITTED
    assert StatelessLifecycle().admit("initialize", {"protocolVersion": "2025-11-25"}) == ADMITTED


@pytest.mark.parametrize("version", ["1900-01-01", "2025-11-25", 20260728, None])
def test_stateless_refuses_an_unsupported_version_with_its_data(version: object) -> None:
    admission = StatelessLifecycle().admit("tools/list", _modern(version))
    assert admission.allowed is False and admission.code == -32022
    assert admission.message == "Unsupported protocol version"
    # A request's _meta may name only the modern revisions (older ones go through initialize).
    assert admission.data == UnsupportedProtocolVersion(version if isinstance(version, str) else None,
                                                        MODERN_VERSIONS).data
    with pytest.raises(LifecycleError) as info:
        admission.check()
    assert info.value.to_error() == {"code": -32022, "message": "Unsupported protocol version",
                                     "data": admission.data}


def test_stateless_refuses_missing_required_meta() -> None:
    missing_version = StatelessLifecycle().admit("tools/list", {"cursor": "x"})
    assert (missing_version.code, missing_version.message) == (
        -32602, "Missing required _meta field io.modelcontextprotocol/protocolVersion")
    missing_caps = StatelessLifecycle().admit("tools/list", {"_meta": {PROTOCOL_VERSION: "2026-07-28"}})
    assert (missing_caps.code, missing_caps.message) == (
        -32602, "Missing required _meta field io.modelcontextprotocol/clientCapabilities")


def test_stateless_judges_the_version_before_the_method() -> None:
    assert StatelessLifecycle().admit("ping", _modern("1900-01-01")).code == -32022


def test_stateless_close() -> None:
    lc: Lifecycle = StatelessLifecycle()
    assert isinstance(lc, Lifecycle)
    assert lc.close() is True and lc.close() is False
    assert lc.state is SessionState.CLOSED
    assert isinstance(lc, StatelessLifecycle) and lc.can_notify is False
    for method in ("tools/list", "initialize", "ping"):
        _refused(lc.admit(method, _modern()), "Session is closed")


def test_admission_carries_data() -> None:
    refusal = Admission.refuse("nope", -32022, {"supported": ["2026-07-28"]})
    with pytest.raises(LifecycleError) as info:
        refusal.check()
    assert info.value.data == {"supported": ["2026-07-28"]}
    assert Admission.from_error(UnsupportedProtocolVersion("x")) == Admission(
        False, -32022, "Unsupported protocol version", UnsupportedProtocolVersion("x").data)
    assert Admission.refuse("nope").data is None and Admission.refuse("nope") == Admission(False, -32600, "nope")

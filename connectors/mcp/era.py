"""Which era an upstream speaks, found out when it is opened (specification 2026-07-28,
"Backward Compatibility" in versioning.mdx and the stdio and Streamable HTTP binding pages).

:func:`open_upstream` connects an :class:`~connectors.mcp.client.UpstreamSession` and settles its
era, per the connector's ``protocol`` setting:

* ``legacy``: the ``initialize`` handshake, as before 2026-07-28 (the legacy HTTP+SSE transport
  is always legacy);
* ``modern``: ``server/discover`` at 2026-07-28; anything but a DiscoverResult listing 2026-07-28
  leaves the upstream unavailable;
* ``auto`` (default): the same probe, then :func:`verdict` decides. A DiscoverResult listing
  2026-07-28 is modern. A recognized modern error is modern evidence: ``UnsupportedProtocolVersion``
  (-32022) naming only legacy versions falls back to legacy, naming no version the gateway speaks
  leaves the upstream unavailable (with the versions in the message), naming 2026-07-28 (the version
  sent) is answered with one more probe (SEP-2575: a client retries with a supported version when
  its first choice is rejected), a second such refusal leaves it unavailable; ``HeaderMismatch`` and
  ``MissingRequiredClientCapability`` mean a modern server refused us (unavailable, no fallback).
  Anything else falls back to ``initialize`` on the same connection: any other JSON-RPC error, a
  DiscoverResult without 2026-07-28, an HTTP 4xx without a JSON-RPC error, and on stdio no answer
  within ``probe_timeout_s`` (a legacy server may ignore a request before ``initialize``). A
  transport failure, an HTTP 5xx or an HTTP timeout is no verdict: the upstream is unavailable and
  the reconnect loop probes again later. When the fallback ``initialize`` itself is refused with
  -32022 naming 2026-07-28 (a slow stdio server answered the timed-out probe after all, which
  fixed its connection's era), the probe is sent once more.

A 2026-07-28 server may serve the handshake revisions too (a dual-era server: the official SDK 2.x
by default). Under ``auto`` the connector serves such an upstream to each caller in the caller's own
era (a legacy caller over an upstream session, :mod:`connectors.mcp.sessions`), so a tool that asks
mid-call over its session keeps its back-channel. ``UpstreamSession.dual_era`` says what is known:
True when the DiscoverResult lists a handshake revision, else None until the first legacy caller's
call tries ``initialize`` (the SDK's DiscoverResult lists 2026-07-28 alone). ``modern`` sets False:
every caller is served statelessly.

The era is found again on every (re)connect: an upstream may have been upgraded meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway.protocol.errors import (
    HEADER_MISMATCH,
    MISSING_CLIENT_CAPABILITY,
    BackendUnavailable,
    ProtocolError,
    RequestTimeout,
)
from gateway.protocol.meta import SERVER_INFO
from gateway.protocol.versions import LEGACY_VERSIONS, MODERN_VERSIONS

from .client import UpstreamSession, opening_error
from .modern import ModernStamp, supported_versions
from .transport import HTTPStatusError

__all__ = ["Mode", "Verdict", "verdict", "open_upstream"]

log = logging.getLogger("connectors.mcp")

Mode = Literal["auto", "modern", "legacy"]
_REFUSED = frozenset({HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY})


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a ``server/discover`` probe said: ``modern`` with the DiscoverResult, or legacy
    (``reason`` says why, for the log)."""

    modern: bool
    result: Mapping[str, Any] | None = None
    reason: str = ""
    retry: bool = False  # refused with -32022 listing the version we sent: ask once more


def verdict(name: str, outcome: Mapping[str, Any] | BaseException, *, http: bool) -> Verdict:
    """The era the probe's outcome (a result, or what ``request`` raised) shows; raises
    ``BackendUnavailable`` when it shows none the gateway can speak, or no era at all (pure)."""
    if isinstance(outcome, Mapping):
        versions = outcome.get("supportedVersions")
        if isinstance(versions, list) and any(v in MODERN_VERSIONS for v in versions):
            return Verdict(True, outcome)
        return Verdict(False, reason=f"server/discover lists no modern version ({versions!r})")
    if isinstance(outcome, TimeoutError):
        if http:
            raise BackendUnavailable(f"upstream {name} did not answer server/discover in time")
        return Verdict(False, reason="no answer to server/discover")
    if isinstance(outcome, HTTPStatusError):
        if 400 <= outcome.status < 500:
            return Verdict(False, reason=f"HTTP {outcome.status} without a modern error")
        raise outcome
    if isinstance(outcome, BackendUnavailable) or not isinstance(outcome, ProtocolError):
        raise outcome  # a transport failure (or a bug) is no verdict
    supported = supported_versions(outcome)
    if supported is not None:
        if any(v in MODERN_VERSIONS for v in supported):
            # A client retries with a supported version when its first choice is rejected
            # (SEP-2575); the one the server lists is the one we sent, so the retry repeats it.
            return Verdict(True, reason=f"refused protocol {MODERN_VERSIONS[-1]} although it lists it", retry=True)
        if any(v in LEGACY_VERSIONS for v in supported):
            return Verdict(False, reason=f"it supports only {', '.join(supported)}")
        raise BackendUnavailable(f"upstream {name} supports only protocol versions {', '.join(supported) or '(none)'};"
                                 f" the gateway speaks {', '.join(LEGACY_VERSIONS + MODERN_VERSIONS)}")
    if outcome.code in _REFUSED:
        raise BackendUnavailable(f"upstream {name} is a {MODERN_VERSIONS[-1]} server but refused server/discover: "
                                 f"{outcome.message}")
    return Verdict(False, reason=f"server/discover failed with {outcome.code} {outcome.message}")


async def open_upstream(session: UpstreamSession, mode: Mode, stamp: ModernStamp, *, connect_timeout_s: float,
                        probe_timeout_s: float) -> None:
    """Connect ``session`` and settle its era (module doc). On return it is either initialized
    (legacy) or a modern request channel (``session.modern``) holding the discover result. Raises
    ``BackendUnavailable`` with a readable reason, and then leaves nothing running."""
    try:
        await session.connect(connect_timeout_s)
        if mode == "legacy":
            await _initialize(session, connect_timeout_s)
            return
        refusals = fallbacks = 0
        while True:  # at most 4 probes: one refusal (-32022) retried, one refused fallback retried
            # (On HTTP no answer is no verdict: the probe may take as long as connecting may.)
            wait = connect_timeout_s if stamp.http else min(probe_timeout_s, connect_timeout_s)
            found = await _probe(session, stamp, wait)
            if found.retry:
                refusals += 1
                if refusals > 1:
                    raise BackendUnavailable(f"upstream {session.name} {found.reason}")
                continue
            if found.modern:
                assert found.result is not None
                _adopt(session, found.result, dual=mode == "auto")
                return
            if mode == "modern":
                raise BackendUnavailable(f"upstream {session.name} is not a {MODERN_VERSIONS[-1]} server "
                                         f"({found.reason})")
            log.info("upstream %s: legacy protocol (%s)", session.name, found.reason)
            _use_legacy(session)
            try:
                await session.handshake(connect_timeout_s)
                return
            except ProtocolError as exc:
                fallbacks += 1
                if fallbacks > 1 or not any(v in MODERN_VERSIONS for v in supported_versions(exc) or ()):
                    raise
    except BaseException as exc:
        await session.close()
        raise opening_error(session.name, exc, f"did not answer within {connect_timeout_s:g}s") from None


async def _initialize(session: UpstreamSession, timeout_s: float) -> None:
    try:
        await session.handshake(timeout_s)
    except BaseException as exc:
        raise opening_error(session.name, exc, f"did not initialize within {timeout_s:g}s") from None


async def _probe(session: UpstreamSession, stamp: ModernStamp, timeout_s: float) -> Verdict:
    session.stamper = stamp
    session.cancel_by_close = stamp.http
    session.transport.stateless = stamp.http
    outcome: Mapping[str, Any] | BaseException
    try:
        outcome = await session.request("server/discover", None, timeout_s=timeout_s, cancellable=False)
    except RequestTimeout:  # the session's own timeout (an upstream's -32001 is a plain ProtocolError)
        outcome = TimeoutError()
    except ProtocolError as exc:
        outcome = exc
    return verdict(session.name, outcome, http=stamp.http)


def _adopt(session: UpstreamSession, result: Mapping[str, Any], *, dual: bool) -> None:
    version = MODERN_VERSIONS[-1]
    # ``protocol: modern`` forces the stateless revision on every caller: no dual era then. Under
    # ``auto`` a DiscoverResult listing a handshake revision too says so; one that does not proves
    # nothing (the SDK lists only 2026-07-28 while serving both): the first legacy call finds out.
    listed = result.get("supportedVersions")
    session.dual_era = (True if isinstance(listed, list) and any(v in LEGACY_VERSIONS for v in listed) else None) \
        if dual else False
    session.protocol_version = version
    session.transport.protocol_version = version
    caps = result.get("capabilities")
    session.server_capabilities = dict(caps) if isinstance(caps, Mapping) else {}
    meta = result.get("_meta")
    info = meta.get(SERVER_INFO) if isinstance(meta, Mapping) else None
    session.server_info = dict(info) if isinstance(info, Mapping) else {}
    instructions = result.get("instructions")
    session.instructions = instructions if isinstance(instructions, str) else None


def _use_legacy(session: UpstreamSession) -> None:
    session.stamper = None
    session.cancel_by_close = False
    session.transport.stateless = False

"""One :class:`Revision` per protocol revision: every wire difference between revisions, in one table.

Code elsewhere never branches on a version string; it asks the revision of the request::

    rev = revision(session.protocol_version)        # or revision(request_meta.version)
    rev.knows("ping"); rev.batches; rev.supports("icons")
    rev.shape_result("tools/list", result, cache=CacheHint(60_000, "private"), server_info=info)
    rev.error_code(exc)                             # ResourceNotFound: -32002, or -32602 when modern

What the table holds, per revision:

* ``modern``: stateless (per-request ``_meta``, no ``initialize``), 2026-07-28 and later.
* ``batches``: JSON-RPC batches are allowed (2025-03-26 only).
* ``features``: what results may contain; :data:`FEATURES` names them all. A feature the table
  does not name is assumed to exist everywhere (so an unknown field just passes through).
* ``methods``: the client-to-server requests and notifications the revision defines (``knows``);
  a method it does not define is "Method not found" at that revision, whether or not the gateway
  serves it at another.
* ``remap``: error codes the revision's clients must not see, and what replaces them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RATE_LIMITED,
    RESOURCE_NOT_FOUND,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from .results import CacheHint, legacy_result, modern_result
from .versions import LEGACY_VERSIONS, MODERN_VERSIONS, SUPPORTED_VERSIONS, allows_batches

__all__ = ["Revision", "CacheHint", "REVISIONS", "FEATURES", "MODERN_RATE_LIMITED", "revision"]

# Feature -> the revisions that define it.
_SINCE_2025_03 = frozenset({"2025-03-26", "2025-06-18", "2025-11-25", *MODERN_VERSIONS})
_SINCE_2025_06 = frozenset({"2025-06-18", "2025-11-25", *MODERN_VERSIONS})
_SINCE_2025_11 = frozenset({"2025-11-25", *MODERN_VERSIONS})
_FEATURE_REVISIONS: Mapping[str, frozenset[str]] = {
    "annotations": _SINCE_2025_03,  # tool annotations
    "audio": _SINCE_2025_03,  # audio content
    "completions": _SINCE_2025_03,  # the completions capability
    "structuredContent": _SINCE_2025_06,
    "outputSchema": _SINCE_2025_06,
    "title": _SINCE_2025_06,
    "resource_link": _SINCE_2025_06,
    "elicitation": _SINCE_2025_06,
    "icons": _SINCE_2025_11,
    "tasks": frozenset({"2025-11-25"}),  # tool `execution`; an extension from 2026-07-28 on
    "sessions": frozenset(LEGACY_VERSIONS),  # initialize handshake, session-scoped state
    "resultType": frozenset(MODERN_VERSIONS),
    "caching": frozenset(MODERN_VERSIONS),  # ttlMs / cacheScope
    "mrtr": frozenset(MODERN_VERSIONS),  # input_required results, inputResponses, requestState
    "requestHeaders": frozenset(MODERN_VERSIONS),  # Mcp-Method, Mcp-Name, Mcp-Param-* (HTTP)
}
FEATURES = frozenset(_FEATURE_REVISIONS)

_CATALOG = frozenset({"tools/list", "tools/call", "resources/list", "resources/templates/list",
                      "resources/read", "prompts/list", "prompts/get", "completion/complete"})
_LEGACY_METHODS = _CATALOG | {
    "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed",
}
_TASKS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "notifications/tasks/status"})
# The tasks extension's methods (io.modelcontextprotocol/tasks): known at 2026-07-28, served to
# a request that negotiates the extension (gateway.tasks).
_TASK_EXTENSION = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_MODERN_METHODS = _CATALOG | _TASK_EXTENSION | {"server/discover", "subscriptions/listen", "notifications/cancelled"}

# 2026-07-28 "Error Codes": -32002 is replaced by -32602, and -32020..-32099 holds only codes the
# specification defines. The gateway's rate-limit code (-32029) sits in that range, so modern
# clients get it from the application range instead (JSON-RPC: outside -32768..-32000).
MODERN_RATE_LIMITED = -31029
_MODERN_DEFINED = frozenset({-32020, -32021, -32022})
_MODERN_REMAP = ((RESOURCE_NOT_FOUND, INVALID_PARAMS), (RATE_LIMITED, MODERN_RATE_LIMITED))


@dataclass(frozen=True, slots=True)
class Revision:
    """The wire rules of one protocol revision (see the module doc); build none, use :func:`revision`."""

    version: str
    modern: bool
    batches: bool
    features: frozenset[str] = field(repr=False)
    methods: frozenset[str] = field(repr=False)
    remap: tuple[tuple[int, int], ...] = field(default=(), repr=False)

    def supports(self, feature: str) -> bool:
        """Whether results at this revision may carry ``feature`` (unknown features: yes)."""
        return feature in self.features or feature not in FEATURES

    def knows(self, method: str) -> bool:
        """Whether this revision defines ``method`` (a client request or notification)."""
        return method in self.methods

    def error_code(self, exc: ProtocolError) -> int:
        """The code ``exc`` carries on the wire at this revision (its data is unchanged)."""
        code = exc.code
        for old, new in self.remap:
            if code == old:
                return new
        if self.modern and -32099 <= code <= -32020 and code not in _MODERN_DEFINED:
            return INTERNAL_ERROR  # e.g. -32042 passed through from a 2025-11-25 upstream
        return code

    def to_error(self, exc: ProtocolError) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for ``exc`` at this revision."""
        err = exc.to_error()
        err["code"] = self.error_code(exc)
        return err

    def shape_result(self, method: str, result: dict[str, Any], *, cache: CacheHint | None = None,
                     server_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``result`` of ``method`` fit for this revision; never mutates ``result``.

        Legacy: features the revision lacks are removed or downgraded, modern-only fields are
        removed; ``cache`` and ``server_info`` are ignored (no legacy revision defines them).
        Modern: see :func:`gateway.protocol.results.modern_result`.
        """
        if self.modern:
            return modern_result(method, result, self.supports, cache=cache, server_info=server_info)
        return legacy_result(method, result, self.supports)


def _build(version: str) -> Revision:
    modern = version in MODERN_VERSIONS
    features = frozenset(f for f, versions in _FEATURE_REVISIONS.items() if version in versions)
    if modern:
        methods = _MODERN_METHODS
    else:
        methods = _LEGACY_METHODS | (_TASKS if "tasks" in features else frozenset())
    return Revision(version, modern, allows_batches(version), features, frozenset(methods),
                    _MODERN_REMAP if modern else ())


REVISIONS: Mapping[str, Revision] = MappingProxyType({v: _build(v) for v in SUPPORTED_VERSIONS})


def revision(version: str) -> Revision:
    """The :class:`Revision` of ``version``; :class:`UnsupportedProtocolVersion` if we do not speak it."""
    try:
        return REVISIONS[version]
    except (KeyError, TypeError):
        raise UnsupportedProtocolVersion(version if isinstance(version, str) else None) from None

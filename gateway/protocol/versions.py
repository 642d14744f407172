"""MCP protocol revisions the gateway speaks, and the ``initialize`` negotiation.

Two eras (specification 2026-07-28, "Versioning and Compatibility"):

* **legacy** revisions (:data:`LEGACY_VERSIONS`) open a session with an ``initialize`` handshake;
* **modern** revisions (:data:`MODERN_VERSIONS`) carry the version in every request's ``_meta``.

The gateway is dual-era. :func:`negotiate` answers ``initialize`` and therefore only ever returns a
legacy version. What differs on the wire per revision lives in :mod:`gateway.protocol.revisions`.
"""

from __future__ import annotations

__all__ = [
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "LATEST_VERSION",
    "LATEST_LEGACY_VERSION",
    "negotiate",
    "is_supported",
    "is_modern",
    "is_legacy",
    "allows_batches",
]

LEGACY_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
SUPPORTED_VERSIONS: tuple[str, ...] = LEGACY_VERSIONS + MODERN_VERSIONS  # oldest → newest
LATEST_VERSION = MODERN_VERSIONS[-1]
LATEST_LEGACY_VERSION = LEGACY_VERSIONS[-1]

_BATCH_VERSIONS = frozenset({"2025-03-26"})


def is_supported(version: str) -> bool:
    """Whether ``version`` is any revision the gateway speaks (legacy or modern)."""
    return version in SUPPORTED_VERSIONS


def is_modern(version: str) -> bool:
    """Whether ``version`` is a stateless revision (per-request ``_meta``, no handshake)."""
    return version in MODERN_VERSIONS


def is_legacy(version: str) -> bool:
    """Whether ``version`` is a revision negotiated by ``initialize``."""
    return version in LEGACY_VERSIONS


def negotiate(requested: object) -> str:
    """The server's answer to ``initialize``: the client's version if it is a legacy revision we
    speak, else :data:`LATEST_LEGACY_VERSION` (never a modern one: modern revisions have no
    ``initialize``, so a client that sends it is speaking a legacy revision)."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LATEST_LEGACY_VERSION


def allows_batches(version: str) -> bool:
    """JSON-RPC batches exist only in revision 2025-03-26 (removed in 2025-06-18).

    Kept for existing callers; new code asks ``revision(version).batches``, which is built from it.
    """
    return version in _BATCH_VERSIONS

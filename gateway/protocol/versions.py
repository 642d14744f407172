"""MCP protocol revisions the gateway speaks, and version negotiation."""

from __future__ import annotations

__all__ = ["SUPPORTED_VERSIONS", "LATEST_VERSION", "negotiate", "is_supported",
           "allows_batches", "supports"]

SUPPORTED_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]


def is_supported(version: str) -> bool:
    return version in SUPPORTED_VERSIONS


def negotiate(requested: object) -> str:
    """The server's answer to ``initialize``: the client's version if we speak it, else our latest."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION


def allows_batches(version: str) -> bool:
    """JSON-RPC batches exist only in revision 2025-03-26 (removed in 2025-06-18)."""
    return version == "2025-03-26"


def supports(version: str, feature: str) -> bool:
    """Whether ``feature`` exists at ``version``; used to shape results at the edge.

    Features: ``structuredContent``/``outputSchema``/``title``/``resource_link`` (2025-06-18+),
    ``annotations``/``audio``/``completions`` (2025-03-26+), ``icons`` (2025-11-25).
    """
    since = {
        "annotations": "2025-03-26",
        "audio": "2025-03-26",
        "completions": "2025-03-26",
        "structuredContent": "2025-06-18",
        "outputSchema": "2025-06-18",
        "title": "2025-06-18",
        "resource_link": "2025-06-18",
        "elicitation": "2025-06-18",
        "icons": "2025-11-25",
    }.get(feature)
    return since is None or version >= since

"""Per-principal upstream channels of the MCP connector (upstream identity: see
:mod:`connectors.oauth.identity`): a 2026-07-28 upstream has no session, so a principal's
"session" is a request channel like the shared one, carrying that principal's credential."""

from __future__ import annotations

from .client import UpstreamSession

__all__ = ["adopt_channel"]


def adopt_channel(session: UpstreamSession, shared: UpstreamSession) -> None:
    """Make ``session`` a 2026-07-28 request channel like ``shared`` (same era, capabilities and
    stamp; no handshake): only its transport's credential differs."""
    session.stamper = shared.stamper
    session.cancel_by_close = shared.cancel_by_close
    session.transport.stateless = shared.transport.stateless
    session.protocol_version = shared.protocol_version
    session.transport.protocol_version = shared.transport.protocol_version
    session.server_capabilities = shared.server_capabilities
    session.server_info = shared.server_info

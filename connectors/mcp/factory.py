"""The client transport a connector's config asks for, as a factory of fresh transports (one per
upstream session: a reconnect builds a new one).

stdio: the child runs in ``cwd`` or else the config file's folder, and a relative ``command`` path
resolves against that folder too, so a config works from whatever directory it is served. The
legacy SSE transport shares the connector's aiohttp client (its cookie jar keeps load-balancer
stickiness); Streamable HTTP brings its own lean client per transport (http1.py: the hot path).
"""

from __future__ import annotations

from pathlib import Path

import aiohttp

from connectors.egress import EgressPolicy
from connectors.oauth.requestauth import RequestAuth

from .client import TransportFactory
from .config import MCPConfig
from .legacy_sse import LegacySSETransport
from .stdio import StdioTransport
from .streamable_http import StreamableHTTPTransport

__all__ = ["transport_factory"]


def transport_factory(name: str, cfg: MCPConfig, base_dir: Path, http: aiohttp.ClientSession | None,
                      policy: EgressPolicy | None = None, auth: RequestAuth | None = None) -> TransportFactory:
    """Fresh transports to the upstream of ``cfg`` (``http``: the legacy SSE transport's client,
    built on ``policy``; ``policy``: the connector's egress policy, for Streamable HTTP's own;
    ``auth``: the upstream credential of the sessions they carry, over HTTP)."""
    if cfg.transport == "stdio":
        cwd = base_dir if cfg.cwd is None else Path(cfg.cwd)
        if not cwd.is_absolute():
            cwd = base_dir / cwd
        command = cfg.command or ""
        if "/" in command and not Path(command).is_absolute():
            command = str((base_dir / command).resolve())
        return lambda deliver, lost: StdioTransport(name, deliver, lost, command=command, args=cfg.args,
                                                    env=cfg.env, cwd=str(cwd), inherit_env=cfg.inherit_env)
    assert cfg.url is not None
    url = cfg.url
    if cfg.transport == "sse":
        assert http is not None
        session = http
        return lambda deliver, lost: LegacySSETransport(name, deliver, lost, url=url, headers=cfg.headers,
                                                        http=session, connect_timeout_s=cfg.connect_timeout_s,
                                                        max_response_bytes=cfg.max_response_bytes, auth=auth)
    return lambda deliver, lost: StreamableHTTPTransport(name, deliver, lost, url=url, headers=cfg.headers,
                                                         connect_timeout_s=cfg.connect_timeout_s, policy=policy,
                                                         max_response_bytes=cfg.max_response_bytes, auth=auth)

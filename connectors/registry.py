"""Connector kinds: the ``type`` of a config entry → its config model and its Connector class.

Both are loaded lazily, each on its own: validating a file (``mcp-gateway validate``) imports
only the kinds' pydantic models, never a database driver; a gateway with only static connectors
never imports asyncpg; one kind's import failure names that kind instead of breaking the others.
Tests register a kind of their own with ``monkeypatch.setitem(KINDS, name, ConnectorKind(...))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connectors.base import Connector
    from connectors.config import ConnectorConfig

__all__ = ["ConnectorKind", "KINDS", "config_model", "connector_class"]


@dataclass(frozen=True, slots=True)
class ConnectorKind:
    """How to load one kind: its config model and its connector class, each on demand."""

    config: Callable[[], type[ConnectorConfig]]
    connector: Callable[[], type[Connector]]


def _static_config() -> type[ConnectorConfig]:
    from connectors.static.config import StaticConfig
    return StaticConfig


def _static() -> type[Connector]:
    from connectors.static.connector import StaticConnector
    return StaticConnector


def _openapi_config() -> type[ConnectorConfig]:
    from connectors.openapi.config import OpenAPIConfig
    return OpenAPIConfig


def _openapi() -> type[Connector]:
    from connectors.openapi.connector import OpenAPIConnector
    return OpenAPIConnector


def _sql_config() -> type[ConnectorConfig]:
    from connectors.sql.config import SQLConfig
    return SQLConfig


def _sql() -> type[Connector]:
    from connectors.sql.connector import SQLConnector
    return SQLConnector


def _mcp_config() -> type[ConnectorConfig]:
    from connectors.mcp.config import MCPConfig
    return MCPConfig


def _mcp() -> type[Connector]:
    from connectors.mcp.connector import MCPConnector
    return MCPConnector


KINDS: dict[str, ConnectorKind] = {
    "static": ConnectorKind(_static_config, _static),
    "openapi": ConnectorKind(_openapi_config, _openapi),
    "sql": ConnectorKind(_sql_config, _sql),
    "mcp": ConnectorKind(_mcp_config, _mcp),
}


def config_model(kind: str) -> type[ConnectorConfig]:
    """The pydantic model validating an entry of this kind (KeyError for an unknown kind)."""
    return KINDS[kind].config()


def connector_class(kind: str) -> type[Connector]:
    """The Connector class serving this kind (KeyError for an unknown kind)."""
    return KINDS[kind].connector()

"""Connector kinds: the ``type`` of a config entry → its Connector class (imported lazily).

Lazy so that a gateway with only static connectors does not import database drivers, and so that
one kind's import failure names that kind instead of breaking the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connectors.base import Connector

__all__ = ["KINDS", "connector_class"]

KINDS: dict[str, str] = {
    "static": "connectors.static.connector:StaticConnector",
    "openapi": "connectors.openapi.connector:OpenAPIConnector",
    "sql": "connectors.sql.connector:SQLConnector",
    "mcp": "connectors.mcp.connector:MCPConnector",
}


def connector_class(kind: str) -> type[Connector]:
    module_name, _, attr = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]

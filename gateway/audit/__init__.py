"""The audit log: event schema (:mod:`.events`), SQLAlchemy store (:mod:`.store`), batching writer
with spill and replay (:mod:`.writer`) and the ``mcp-gateway audit query`` command
(:mod:`.query_cli`). The filter that feeds it is :mod:`gateway.filters.audit`."""

from __future__ import annotations

from .events import FIELDS, Redactor, capture
from .store import AuditStore
from .writer import AuditWriter

__all__ = ["FIELDS", "Redactor", "capture", "AuditStore", "AuditWriter"]

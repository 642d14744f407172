"""Search text for tools made from OpenAPI operations: the tool object plus the operation's tags
and path, which the tool object does not carry but callers' words often match ("actions",
"/repos/{owner}/{repo}/pulls")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gateway.discovery.index import ToolDoc, doc_from_tool

__all__ = ["operation_docs"]


def operation_docs(doc: dict[str, Any], operations: Any, prefix: str = "") -> Iterator[ToolDoc]:
    """One :class:`ToolDoc` per mapped operation (``connectors.openapi.mapping.Operation``) of
    the OpenAPI document *doc*, named ``prefix + op.name`` as the catalog names it."""
    paths = doc.get("paths") or {}
    for op in operations:
        raw = (paths.get(op.path) or {}).get(op.method.lower()) or {}
        tags = [t for t in raw.get("tags") or () if isinstance(t, str)]
        tool = {**op.definition, "name": prefix + op.name}
        yield doc_from_tool(tool, tags=tags, path=op.path, prefix=prefix, deprecated=raw.get("deprecated") is True)

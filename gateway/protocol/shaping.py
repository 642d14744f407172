"""Shaping results for the negotiated protocol revision, at the edge only (the legacy entry point).

:func:`shape_result` is kept for existing callers: it is ``revision(version).shape_result(method,
result)`` (see :mod:`gateway.protocol.revisions`, where every revision's wire rules live, and
:mod:`gateway.protocol.results` for the mechanics). A modern result shaped here gets the default
caching hints and no ``serverInfo``; callers serving modern requests call the revision directly.
"""

from __future__ import annotations

from typing import Any

from .revisions import REVISIONS

__all__ = ["shape_result"]


def shape_result(method: str, result: dict[str, Any], version: str) -> dict[str, Any]:
    """Return ``result`` fit for ``version``; the same object when nothing needs to change
    (including for an empty version, a session not initialized yet, or one we do not know)."""
    rev = REVISIONS.get(version)
    if rev is None:
        return result
    return rev.shape_result(method, result)

"""Access filter: per-principal allow/deny rules over public names (``access:`` in the config).

Listings pass inward a context whose ``visible`` predicate hides what the caller may not use, so
a client only ever sees tools, prompts, resources and templates it may call. A call to a target
the caller may not use raises :class:`AccessDenied` (-32003, "denied" in the audit log, which
sits outside this filter); the refused call's ``ctx.record.connector`` is the connector of the
target it named, so the audit row of a denial says which backend was protected. Authentication
itself happens earlier, in the HTTP transports (:mod:`gateway.auth`); this filter only reads
``ctx.principal``.

Rules are compiled once at build (:class:`gateway.policy.AccessPolicy`); per-principal views and
their answers are cached, so the hot path is dictionary lookups. With no rules configured the
filter is not built at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.context import CallContext
from gateway.filters import Handler
from gateway.policy import AccessPolicy
from gateway.protocol.errors import AccessDenied

if TYPE_CHECKING:
    from connectors.base import Connector

__all__ = ["AccessFilter", "LIST_METHODS"]

LIST_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
# Kind of the target each targeted method names (for the catalog's access_name).
_KIND = {
    "tools/call": "tool",
    "prompts/get": "prompt",
    "resources/read": "resource",
    "resources/subscribe": "resource",
    "resources/unsubscribe": "resource",
}


# (kind, public target) -> the public name access rules match (the catalog's access_name).
AccessName = Callable[[str, str], str]
# (method, public target) -> the connector serving it now, or None (the catalog's ``owner``).
Owner = Callable[[str, str], "Connector | None"]


class AccessFilter:
    def __init__(self, policy: AccessPolicy, access_name: AccessName | None = None,
                 owner: Owner | None = None) -> None:
        self.policy = policy
        self.access_name = access_name
        self.owner = owner
        self.denied = 0

    def _name(self, ctx: CallContext) -> str:
        kind = _KIND.get(ctx.method)
        if kind is None and ctx.method == "completion/complete":
            ref = ctx.params.get("ref") or {}
            kind = "prompt" if ref.get("type") == "ref/prompt" else "resource"
        if kind in (None, "tool", "prompt") or self.access_name is None:
            return ctx.target
        # Resources are governed by their public name, as the listing shows them.
        return self.access_name(kind, ctx.target)

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        view = self.policy.for_principal(ctx.principal)
        if ctx.method in LIST_METHODS:
            if view.allow_all:
                return await call_next(ctx)
            return await call_next(dataclasses.replace(ctx, visible=view.visible))
        # A request the gateway serves itself (an endpoint's find_tools) names no catalog target.
        if ctx.target and ctx.local is None:
            name = self._name(ctx)
            # A resource is usable by its public name or by its URI.
            if not view.allowed(name) and (name == ctx.target or not view.allowed(ctx.target)):
                self.denied += 1
                ctx.record.outcome = "denied"
                if self.owner is not None and ctx.record.connector is None:
                    # The call never reaches its connector; the catalog still knows whose it is.
                    conn = self.owner(ctx.method, ctx.target)
                    ctx.record.connector = conn.name if conn is not None else None
                raise AccessDenied(f"Access denied: {ctx.principal.name!r} may not use {ctx.target!r}",
                                   {"target": ctx.target, "principal": ctx.principal.name})
        return await call_next(ctx)


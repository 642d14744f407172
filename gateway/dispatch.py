"""Method → handler. Builds the CallContext, runs the filter chain, ends at the catalog.

Validates the shape of each method's params (wrong types are -32602 before any filter runs),
extracts the public target, the progress token and the trace context, sets the deadline, and
routes the call through the composed chain (built once per start or reload). The endpoint at the
end of the chain resolves the target in the catalog and calls the owning connector, recording the
connector and local target in ``ctx.notes`` for audit and telemetry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.context import CallContext
from gateway.filters import Filter, Handler, compose
from gateway.protocol.errors import InvalidParams, MethodNotFound, ProtocolError, ToolExecutionError
from gateway.protocol.shaping import shape_result

if TYPE_CHECKING:
    from gateway.app import Gateway
    from gateway.session import Session

__all__ = ["Dispatcher", "CATALOG_METHODS"]

CATALOG_METHODS = frozenset({
    "tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
    "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
})


def _str_param(params: dict[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"{method}: params.{key} must be a non-empty string")
    return value


def _dict_param(params: dict[str, Any], key: str, method: str) -> dict[str, Any]:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParams(f"{method}: params.{key} must be an object")
    return value


class Dispatcher:
    """Routes catalog methods through the filter chain."""

    def __init__(self, gateway: Gateway, filters: Sequence[Filter] = ()) -> None:
        self.gateway = gateway
        self.filters = tuple(filters)
        self.handler: Handler = compose(self.filters, self._endpoint)

    def _target(self, method: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if method == "tools/call":
            return _str_param(params, "name", method), _dict_param(params, "arguments", method)
        if method == "prompts/get":
            args = _dict_param(params, "arguments", method)
            bad = [k for k, v in args.items() if not isinstance(v, str)]
            if bad:
                raise InvalidParams(f"prompts/get: argument values must be strings ({', '.join(bad)})")
            return _str_param(params, "name", method), args
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            return _str_param(params, "uri", method), {}
        if method == "completion/complete":
            ref = _dict_param(params, "ref", method)
            argument = _dict_param(params, "argument", method)
            if ref.get("type") == "ref/prompt":
                target = ref.get("name")
            elif ref.get("type") == "ref/resource":
                target = ref.get("uri")
            else:
                raise InvalidParams("completion/complete: ref.type must be ref/prompt or ref/resource")
            if not isinstance(target, str) or not isinstance(argument.get("name"), str):
                raise InvalidParams("completion/complete: ref and argument.name are required")
            return target, argument
        if "cursor" in params and params["cursor"] is not None and not isinstance(params["cursor"], str):
            raise InvalidParams(f"{method}: params.cursor must be a string")
        return "", {}

    def _timeout(self, method: str, target: str) -> float:
        default = self.gateway.config.gateway.request_timeout_s
        catalog = self.gateway.catalog
        try:
            if method == "tools/call":
                connector = catalog.tool(target).connector
            elif method == "prompts/get":
                connector = catalog.prompt(target).connector
            else:
                return default
        except ProtocolError:  # unknown or unavailable: the endpoint reports it inside the chain
            return default
        return connector.config.timeout_s or default

    async def dispatch(self, session: Session, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: Handler | None = None) -> dict[str, Any]:
        """Run one request through the chain. ``local`` serves a session method (initialize,
        logging/setLevel) at the end of the chain instead of the catalog.

        A request that is refused before reaching a backend (unknown method, malformed params)
        still travels the chain, so that it is counted, traced and audited like any other; the
        endpoint raises the refusal.
        """
        rejected: ProtocolError | None = None
        target: str = ""
        arguments: dict[str, Any] = {}
        if local is None and method not in CATALOG_METHODS:
            rejected = MethodNotFound(f"Method not found: {method}")
        else:
            try:
                target, arguments = self._target(method, params)
            except ProtocolError as exc:
                rejected = exc
        meta = params.get("_meta")
        progress_token = None
        if isinstance(meta, dict):
            token = meta.get("progressToken")
            if isinstance(token, (str, int)) and not isinstance(token, bool):
                progress_token = token
            if isinstance(meta.get("traceparent"), str):
                traceparent = meta["traceparent"]
        ctx = CallContext(
            session=session,
            method=method,
            request_id=request_id,
            params=params,
            principal=session.principal,
            target=target,
            arguments=arguments,
            deadline=time.monotonic() + self._timeout(method, target),
            traceparent=traceparent,
            progress_token=progress_token,
        )
        if session.caller_authorization is not None:
            ctx.notes["caller_authorization"] = session.caller_authorization
        if rejected is not None:
            ctx.notes["rejected"] = rejected
        elif local is not None:
            ctx.notes["local"] = local
        result = await self.handler(ctx)
        return shape_result(method, result, session.protocol_version)

    async def _endpoint(self, ctx: CallContext) -> dict[str, Any]:
        """The innermost handler: the catalog and the connectors."""
        catalog = self.gateway.catalog
        method = ctx.method
        notes = ctx.notes
        if "rejected" in notes:
            raise notes["rejected"]
        if "local" in notes:
            return await notes["local"](ctx)  # type: ignore[no-any-return]
        if method.endswith("/list"):
            return catalog.list_page(method, ctx.params.get("cursor"), ctx)
        if method == "tools/call":
            entry = catalog.tool(ctx.target)
            notes["connector"], notes["backend_target"] = entry.connector.name, entry.local
            try:
                result = await entry.connector.call_tool(entry.local, ctx.arguments, ctx)
            except ToolExecutionError as exc:
                notes["backend_status"] = exc.status
                notes["outcome"] = "tool_error"
                return exc.to_result()
            if result.get("isError"):
                notes["outcome"] = "tool_error"
            return result
        if method == "prompts/get":
            entry = catalog.prompt(ctx.target)
            notes["connector"], notes["backend_target"] = entry.connector.name, entry.local
            return await entry.connector.get_prompt(entry.local, ctx.arguments, ctx)
        if method == "completion/complete":
            ref = dict(ctx.params["ref"])
            if ref["type"] == "ref/prompt":
                entry = catalog.prompt(ctx.target)
                connector, ref["name"] = entry.connector, entry.local
            else:
                connector, ref["uri"], _ = catalog.resource_owner(ctx.target)
            notes["connector"] = connector.name
            return await connector.complete(ref, ctx.arguments, ctx)
        # resources/read, subscribe, unsubscribe
        connector, local, _ = catalog.resource_owner(ctx.target)
        notes["connector"], notes["backend_target"] = connector.name, local
        if method == "resources/read":
            result = await connector.read_resource(local, ctx)
            if local != ctx.target:  # namespaced URI: show clients the URI they asked for
                for item in result.get("contents", ()):
                    if item.get("uri") == local:
                        item["uri"] = ctx.target
            return result
        if method == "resources/subscribe":
            await self.gateway.subscribe(ctx.session, ctx.target, connector, local, ctx)
        else:
            await self.gateway.unsubscribe(ctx.session, ctx.target, connector, local, ctx)
        return {}

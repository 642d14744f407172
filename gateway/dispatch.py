"""Method → handler. Builds the CallContext, runs the filter chain, ends at the catalog.

Validates the shape of each method's params (wrong types are -32602 before any filter runs),
extracts the public target, the progress token and the trace context, sets the deadline, and
routes the call through the composed chain (built once per start or reload). The endpoint at the
end of the chain serves session methods through the handler the session passed, and catalog
methods through :data:`ROUTES`, a table from method to the function that resolves the target in
the catalog and calls the owning connector, recording the connector and local target in
``ctx.record`` for audit and telemetry.

The dispatcher holds exactly what it uses: the catalog, the subscriptions, the filter chain, the
default request timeout, the server's identity and the cache hints. It knows nothing of
transports or of the gateway object. Results are shaped for the caller's revision at the end
(:mod:`gateway.protocol.revisions`): 2026-07-28 callers get ``resultType``, ``ttlMs``/
``cacheScope`` and ``serverInfo``; older ones lose what their revision does not know.

Multi round-trip requests: a connector may answer ``input_required`` (a 2026-07-28 upstream
asking for sampling, elicitation or roots). A 2026-07-28 caller gets that result (its
``requestState`` sealed by :mod:`gateway.stateless`); for an older caller the dispatcher asks
the client itself, over its session, and calls the connector again with the answers — at most
:data:`MAX_INPUT_ROUNDS` times. Each input goes through the session's ``request``, so the caps on
server→client requests (``gateway.server_requests``) hold: past them the call fails with -32029.

Tasks (the ``io.modelcontextprotocol/tasks`` extension): a ``tools/call`` a connector answers with
``resultType: "task"`` gets its ``taskId`` sealed by :class:`gateway.tasks.TaskRouter`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.catalog import Catalog
from gateway.context import CallContext, LocalHandler, SessionHandle
from gateway.filters import Filter, Handler, compose
from gateway.protocol.errors import (
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    RequestTimeout,
    ToolExecutionError,
)
from gateway.protocol.revisions import CacheHint, revision
from gateway.protocol.versions import LATEST_LEGACY_VERSION, is_modern
from gateway.subscriptions import Subscriptions
from gateway.tasks import TaskRouter

__all__ = ["Dispatcher", "CacheHints", "CATALOG_METHODS", "MODERN_CATALOG_METHODS", "ROUTES", "MAX_INPUT_ROUNDS"]

# Rounds of input requests one call of an older client may go through (a hostile upstream could
# otherwise keep asking forever).
MAX_INPUT_ROUNDS = 8
_INPUT_METHODS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})


@dataclass(frozen=True, slots=True)
class CacheHints:
    """How long 2026-07-28 clients may cache results, and for whom: listings are ``public`` unless
    access rules make them differ between principals; resource contents are always ``private``."""

    ttl_s: float = 60.0
    private_listings: bool = False

    def for_method(self, method: str) -> CacheHint | None:
        ttl_ms = int(self.ttl_s * 1000)
        if method == "resources/read":
            return CacheHint(ttl_ms, "private")
        if method in _CACHEABLE:
            return CacheHint(ttl_ms, "private" if self.private_listings else "public")
        if method == "server/discover":  # the same for every caller
            return CacheHint(ttl_ms, "public")
        return None


_CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})


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


def parse_target(method: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(public target, arguments) of a catalog request; InvalidParams when malformed."""
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


# -- the catalog endpoint, one function per method ------------------------------------------------

Route = Callable[["Dispatcher", CallContext], Awaitable[dict[str, Any]]]


async def _list(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    return d.catalog.list_page(ctx.method, ctx.params.get("cursor"), ctx)


async def _call_tool(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    entry = d.catalog.tool(ctx.target)
    record = ctx.record
    record.connector, record.backend_target = entry.connector.name, entry.local

    def call(c: CallContext) -> Awaitable[dict[str, Any]]:
        return entry.connector.call_tool(entry.local, c.arguments, c)

    try:
        result = await _with_input_rounds(ctx, call)
        if result.get("resultType") == "task":  # the tasks extension: a handle the gateway seals
            if d.tasks is None:
                raise InternalError(f"connector {entry.connector.name} answered with a task; tasks are not served")
            result = d.tasks.seal_result(entry.connector.name, ctx, result)
    except RequestTimeout as exc:
        # The connector's own clock ran out before the deadline's (TimeoutFilter): they race, so the
        # client gets the same shape and the same words ("timed out") whichever wins.
        failure = ToolExecutionError.timed_out(f"{ctx.method} {ctx.target} timed out: {exc.message}")
        record.backend_status, record.outcome = failure.status, "timeout"
        return failure.to_result()
    except ToolExecutionError as exc:
        record.backend_status = exc.status
        record.outcome = "tool_error"
        return exc.to_result()
    if result.get("isError"):
        record.outcome = "tool_error"
    return result


async def _get_prompt(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    entry = d.catalog.prompt(ctx.target)
    ctx.record.connector, ctx.record.backend_target = entry.connector.name, entry.local

    async def call(c: CallContext) -> dict[str, Any]:
        return await entry.connector.get_prompt(entry.local, c.arguments, c)

    return await _with_input_rounds(ctx, call)


async def _with_input_rounds(ctx: CallContext, call: Callable[[CallContext], Awaitable[dict[str, Any]]]
                             ) -> dict[str, Any]:
    """Call the connector; when it answers ``input_required`` and the caller is an older client,
    ask the client over its session and call again with its answers (module doc)."""
    result = await call(ctx)
    if result.get("resultType") != "input_required" or is_modern(ctx.session.protocol_version):
        return result
    for _round in range(MAX_INPUT_ROUNDS):
        requests = result.get("inputRequests") or {}
        if not isinstance(requests, dict):
            raise InvalidParams("the backend asked for input in a malformed inputRequests")
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            if method not in _INPUT_METHODS:
                raise MethodNotFound(f"the backend asked for an input of unknown kind {method!r}")
            responses[key] = await ctx.session.request(method, request.get("params"),
                                                       related_request_id=ctx.request_id, timeout=ctx.remaining())
        params = {k: v for k, v in ctx.params.items() if k not in ("inputResponses", "requestState")}
        params["inputResponses"] = responses
        if isinstance(result.get("requestState"), str):
            params["requestState"] = result["requestState"]
        result = await call(dataclasses.replace(ctx, params=params))
        if result.get("resultType") != "input_required":
            return result
    raise InvalidParams(f"the backend asked for input more than {MAX_INPUT_ROUNDS} times in one call")


async def _complete(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    ref = dict(ctx.params["ref"])
    if ref["type"] == "ref/prompt":
        entry = d.catalog.prompt(ctx.target)
        connector, ref["name"] = entry.connector, entry.local
    else:
        connector, ref["uri"], _ = d.catalog.resource_owner(ctx.target)
    ctx.record.connector = connector.name
    return await connector.complete(ref, ctx.arguments, ctx)


async def _read_resource(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    connector, local, _ = d.catalog.resource_owner(ctx.target)
    ctx.record.connector, ctx.record.backend_target = connector.name, local

    async def call(c: CallContext) -> dict[str, Any]:
        return await connector.read_resource(local, c)

    result = await _with_input_rounds(ctx, call)
    if local != ctx.target:  # namespaced URI: show clients the URI they asked for
        for item in result.get("contents", ()):
            if item.get("uri") == local:
                item["uri"] = ctx.target
    return result


async def _subscribe(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    connector, local, _ = d.catalog.resource_owner(ctx.target)
    ctx.record.connector, ctx.record.backend_target = connector.name, local
    await d.subscriptions.subscribe(ctx.session, ctx.target, connector, local, ctx)
    return {}


async def _unsubscribe(d: Dispatcher, ctx: CallContext) -> dict[str, Any]:
    connector, local, _ = d.catalog.resource_owner(ctx.target)
    ctx.record.connector, ctx.record.backend_target = connector.name, local
    await d.subscriptions.unsubscribe(ctx.session, ctx.target, connector, local, ctx)
    return {}


ROUTES: dict[str, Route] = {
    "tools/list": _list,
    "resources/list": _list,
    "resources/templates/list": _list,
    "prompts/list": _list,
    "tools/call": _call_tool,
    "prompts/get": _get_prompt,
    "completion/complete": _complete,
    "resources/read": _read_resource,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
}
CATALOG_METHODS = frozenset(ROUTES)
# 2026-07-28 has no resources/subscribe or unsubscribe (subscriptions/listen replaces them).
MODERN_CATALOG_METHODS = CATALOG_METHODS - {"resources/subscribe", "resources/unsubscribe"}
# Long-lived by design: no request deadline.
_UNBOUNDED = frozenset({"subscriptions/listen"})


class Dispatcher:
    """Routes requests through the filter chain to the catalog (or to a session method)."""

    def __init__(self, catalog: Catalog, subscriptions: Subscriptions, request_timeout_s: float,
                 filters: Sequence[Filter] = (), server_info: dict[str, Any] | None = None,
                 cache: CacheHints | None = None, tasks: TaskRouter | None = None) -> None:
        self.catalog = catalog
        self.tasks = tasks  # seals the task handles of the tasks extension (gateway.tasks)
        self.subscriptions = subscriptions
        self.request_timeout_s = request_timeout_s
        self.server_info = server_info
        self.cache = cache or CacheHints()
        self.filters = tuple(filters)
        self.handler: Handler = compose(self.filters, self._endpoint)
        # An endpoint's dispatcher (gateway.endpoints): its name, for telemetry and audit, and the
        # hook that rewrites its names to the catalog's before the context is built.
        self.endpoint = ""
        self.translate: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None

    def _timeout(self, method: str, target: str) -> float | None:
        if method in _UNBOUNDED:
            return None
        if method not in ("tools/call", "prompts/get"):
            return self.request_timeout_s
        connector = self.catalog.owner(method, target)
        if connector is None:  # unknown or unavailable: the endpoint reports it inside the chain
            return self.request_timeout_s
        return connector.config.timeout_s or self.request_timeout_s

    async def dispatch(self, session: SessionHandle, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: LocalHandler | None = None,
                       *, authorization: str | None = None) -> dict[str, Any]:
        """Run one request through the chain. ``local`` serves a session method (initialize,
        logging/setLevel) at the end of the chain instead of the catalog. ``authorization`` is the
        caller's Authorization header of this request (``ctx.caller_authorization``), never a
        session's: a session's concurrent requests may carry different credentials.

        A request that is refused before reaching a backend (unknown method, malformed params)
        still travels the chain, so that it is counted, traced and audited like any other; the
        endpoint raises the refusal.
        """
        rejection: ProtocolError | None = None
        target: str = ""
        arguments: dict[str, Any] = {}
        if local is None and method not in CATALOG_METHODS:
            rejection = MethodNotFound(f"Method not found: {method}")
        else:
            try:
                if self.translate is not None:
                    params = self.translate(method, params)
                target, arguments = parse_target(method, params)
            except ProtocolError as exc:
                rejection = exc
        meta = params.get("_meta")
        progress_token = None
        if isinstance(meta, dict):
            token = meta.get("progressToken")
            if isinstance(token, (str, int)) and not isinstance(token, bool):
                progress_token = token
            if isinstance(meta.get("traceparent"), str):
                traceparent = meta["traceparent"]
        timeout = self._timeout(method, target)
        ctx = CallContext(
            session=session,
            method=method,
            request_id=request_id,
            params=params,
            principal=session.principal,
            target=target,
            arguments=arguments,
            deadline=None if timeout is None else time.monotonic() + timeout,
            traceparent=traceparent,
            progress_token=progress_token,
            caller_authorization=authorization,
            rejection=rejection,
            local=local if rejection is None else None,
            endpoint=self.endpoint,
        )
        result = await self.handler(ctx)
        return revision(session.protocol_version or LATEST_LEGACY_VERSION).shape_result(
            method, result, cache=self.cache.for_method(method), server_info=self.server_info)

    def _endpoint(self, ctx: CallContext) -> Awaitable[dict[str, Any]]:
        """The innermost handler: a refusal, a session method, or the catalog and connectors.
        It hands back the callee's coroutine (no frame of its own on every call); a refusal is
        raised where the filter calls it, inside the filter's own handling, as from an await."""
        if ctx.rejection is not None:
            raise ctx.rejection
        if ctx.local is not None:
            return ctx.local(ctx)
        return ROUTES[ctx.method](self, ctx)

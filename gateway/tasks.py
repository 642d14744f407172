"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663), passed through to upstreams.

The normative text is the extension's own specification, ``specification/2026-07-28/tasks.md`` of
``modelcontextprotocol/ext-tasks`` (the 2026-07-28 core only names it). What the gateway does:

* **Negotiation.** ``server/discover`` lists the extension only while an upstream that advertised
  it is connected (:meth:`TaskRouter.available`). A caller negotiates it per request, in its
  ``clientCapabilities.extensions``; the MCP connector forwards the caller's capabilities, so an
  upstream only answers with a task a caller that declared the extension.
* **Task handles.** A ``tools/call`` answered with ``resultType: "task"`` (a ``CreateTaskResult``)
  reaches the caller with its ``taskId`` replaced by a handle the gateway seals
  (:class:`TaskHandles`): the owning connector, the upstream's task id and a digest of the
  caller's principal, HMAC-signed. A client therefore cannot address another connector's task,
  nor another principal's, nor forge an id; a garbled, forged or foreign handle is "task not
  found" (-32602), as the extension specifies for an unknown ``taskId``.
* **tasks/get, tasks/update, tasks/cancel** (:meth:`TaskRouter.handle`): refused with -32021
  (``requiredCapabilities.extensions``) when the request does not declare the extension; else
  the handle is opened and the request goes to the owning connector with the upstream's task id
  (and ``Mcp-Name`` set to it over HTTP), and a ``tasks/get`` result shows the caller's handle
  again. Results pass through otherwise (``inputRequests``, ``result``, ``error``, ``ttlMs``).

Not passed through (README, "Protocol revisions"): ``notifications/tasks`` on
``subscriptions/listen`` (``taskIds`` filters), tasks to 2025-11-25 callers (that revision's
experimental core tasks are another wire), and tasks of legacy upstreams.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gateway.context import CallContext
from gateway.protocol.errors import InternalError, InvalidParams, MissingRequiredClientCapability
from gateway.protocol.meta import TASKS_EXTENSION
from gateway.protocol.signing import SignatureError, Signer
from gateway.protocol.versions import is_modern

__all__ = ["TASKS_EXTENSION", "TASK_METHODS", "TaskHandles", "TaskRouter", "negotiated"]

TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_CONTEXT = b"mcp-gateway/task-handle/v1"
_MAX_HANDLE = 4096  # characters of one handle (an upstream id is short; this bounds the work)
_FORMAT = 1


class TaskConnector(Protocol):
    """What a connector offers for tasks (the MCP connector): whether its upstream speaks the
    extension now, and one request about one of its tasks."""

    name: str

    def supports_tasks(self) -> bool: ...

    async def task_request(self, method: str, task_id: str, params: dict[str, Any],
                           ctx: CallContext) -> dict[str, Any]: ...


def negotiated(session: Any) -> bool:
    """Whether the caller negotiated the tasks extension: a 2026-07-28 request whose client
    capabilities declare it (a 2025-11-25 session's capabilities may name it, but that revision
    negotiates no extension per request; the connector does not forward it for such a caller)."""
    version = getattr(session, "protocol_version", None)
    if not (isinstance(version, str) and is_modern(version)):
        return False
    extensions = (getattr(session, "client_capabilities", None) or {}).get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def _principal_tag(principal: str) -> str:
    return hashlib.sha256(b"task-principal\0" + principal.encode()).hexdigest()[:32]


def _not_found() -> InvalidParams:
    return InvalidParams("Failed to retrieve task: Task not found")


class TaskHandles:
    """Seals (connector, upstream task id, principal) into the ``taskId`` a client sees, and opens
    it again for the same principal only; deterministic, so a task keeps one handle."""

    __slots__ = ("_signer",)

    def __init__(self, secret: bytes | str | None) -> None:
        self._signer = Signer(secret, mac_len=32, context=_CONTEXT)

    def seal(self, connector: str, task_id: str, principal: str) -> str:
        body = {"v": _FORMAT, "c": connector, "t": task_id, "p": _principal_tag(principal)}
        return self._signer.sign(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())

    def open(self, handle: object, principal: str) -> tuple[str, str]:
        """(connector, upstream task id) of ``handle``; -32602 "task not found" for anything not
        sealed by this secret for ``principal``."""
        if not isinstance(handle, str) or not handle:
            raise InvalidParams("tasks: params.taskId must be a non-empty string")
        try:
            body = json.loads(self._signer.unsign(handle, _MAX_HANDLE))
        except (SignatureError, ValueError):
            raise _not_found() from None
        if (not isinstance(body, dict) or body.get("v") != _FORMAT or body.get("p") != _principal_tag(principal)
                or not isinstance(body.get("c"), str) or not isinstance(body.get("t"), str)):
            raise _not_found()
        return body["c"], body["t"]


class TaskRouter:
    """Task handles on results, and the gateway's handlers of the extension's methods."""

    def __init__(self, handles: TaskHandles, connectors: Callable[[], Mapping[str, Any]]) -> None:
        self.handles = handles
        self._connectors = connectors

    def _speaking(self, connector: object) -> bool:
        supports = getattr(connector, "supports_tasks", None)
        return callable(supports) and bool(supports())

    def available(self) -> bool:
        """Whether an upstream that speaks the extension is connected (``server/discover``)."""
        return any(self._speaking(c) for c in self._connectors().values())

    def seal_result(self, connector: str, ctx: CallContext, result: dict[str, Any]) -> dict[str, Any]:
        """A ``CreateTaskResult`` of ``connector`` with its ``taskId`` sealed for the caller."""
        task_id = result.get("taskId")
        if not negotiated(ctx.session):
            # The extension forbids it; the connector forwarded the caller's capabilities, so the
            # upstream broke the rule. The task is unreachable for this caller: say so.
            raise InternalError(f"upstream {connector} answered with a task a caller that did not negotiate "
                                f"{TASKS_EXTENSION}")
        if not isinstance(task_id, str) or not task_id:
            raise InternalError(f"upstream {connector} answered with a task without a taskId")
        return {**result, "taskId": self.handles.seal(connector, task_id, ctx.principal.name)}

    async def handle(self, ctx: CallContext) -> dict[str, Any]:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (module doc)."""
        if not negotiated(ctx.session):
            raise MissingRequiredClientCapability({"extensions": {TASKS_EXTENSION: {}}},
                                                  f"{ctx.method} needs the {TASKS_EXTENSION} extension")
        handle = ctx.params.get("taskId")
        name, task_id = self.handles.open(handle, ctx.principal.name)
        connector = self._connectors().get(name)
        if connector is None or not self._speaking(connector):
            raise _not_found()
        ctx.record.connector, ctx.record.backend_target = name, task_id
        params = {k: v for k, v in ctx.params.items() if k not in ("taskId", "_meta")}
        if ctx.method == "tasks/update" and not isinstance(params.get("inputResponses"), dict):
            raise InvalidParams("tasks/update: params.inputResponses must be an object")
        result: dict[str, Any] = await connector.task_request(ctx.method, task_id, params, ctx)
        if ctx.method == "tasks/get" and "taskId" in result:
            result = {**result, "taskId": handle}
        return result

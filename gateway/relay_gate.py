"""The cap on notifications relayed about one call, where a session sends them.

Upstream ``notifications/message`` and ``notifications/progress`` reach a caller through its
session's ``notify`` with the id of the call they belong to (``related_request_id``). A
:class:`RelayGate` (one per session; for a 2026-07-28 request, one for its one call) decides each
against a :class:`~gateway.policy.RelayBudget` built from ``gateway.relayed_notifications`` on
first use: what does not fit is dropped and counted (``relayed_notifications_dropped_total``,
and its bytes), and the first drop of a call brings the caller one ``notifications/message``
(level ``warning``, logger ``mcp-gateway``) saying so. Notifications that belong to no call in
flight (a late one) pass; a connector's log messages that belong to no call, which go to every
session, pass :func:`admit_broadcast` first: the same caps per connector, and one warning in the
gateway's log instead of a notice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from gateway.config import RelayLimits
from gateway.policy import RelayBudget, Verdict
from gateway.protocol import jsonrpc
from gateway.telemetry import metrics

__all__ = ["RelayGate", "RELAYED", "NOTICE_LOGGER", "admit_broadcast"]

log = logging.getLogger("gateway.relay")

RELAYED = frozenset({"notifications/message", "notifications/progress"})
NOTICE_LOGGER = "mcp-gateway"


class RelayGate:
    """One session's relay cap (the budget is made when a call first relays something)."""

    __slots__ = ("_limits", "_budget", "_clock")

    def __init__(self, limits: Callable[[], RelayLimits], clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = limits
        self._budget: RelayBudget | None = None
        self._clock = clock

    def check(self, method: str, params: dict[str, Any] | None, call: Hashable) -> tuple[bool, dict[str, Any] | None]:
        """Whether to relay this notification of ``call``, and the notice (``notifications/message``
        params) to send the caller first, on the call's first drop only."""
        budget = self._budget
        if budget is None:
            cfg = self._limits()
            budget = self._budget = RelayBudget(cfg.per_s, cfg.burst, cfg.bytes_per_s, cfg.bytes_burst)
        size = len(jsonrpc.dumps(params)) if params is not None else 0
        verdict = budget.admit(call, size, self._clock())
        if verdict is Verdict.PASS:
            return True, None
        metrics.relay_dropped(method, size)
        if verdict is Verdict.DROP:
            return False, None
        return False, {"level": "warning", "logger": NOTICE_LOGGER, "data": (
            "The gateway is dropping log and progress notifications of this request: the upstream sent "
            "more than gateway.relayed_notifications allows (messages or bytes per second). The result "
            "is not affected.")}

    def call_ended(self, call: Hashable) -> None:
        if self._budget is not None:
            self._budget.call_ended(call)


def admit_broadcast(gate: RelayGate, connector: str, params: dict[str, Any]) -> bool:
    """Whether a log message of ``connector`` that belongs to no call may go to every session
    (``gate``: the connector's own, keyed by its name)."""
    relay, notice = gate.check("notifications/message", params, connector)
    if notice is not None:
        log.warning("connector %s sends more log messages than gateway.relayed_notifications allows: "
                    "dropping the excess (counted in relayed_notifications_dropped_total)", connector)
    return relay

"""MRTR retries of a call parked on another replica (``state.store`` shared).

A call that asked the client for input keeps running, parked, on the replica that served it
(:mod:`gateway.mrtr`); the sealed ``requestState`` names that replica (``at``). Its retry may land
anywhere: a replica that is not ``at`` sends the retry to it over the bus (:class:`Bus.ask`) and
relays what comes back — the events of the resumed call (progress, log lines) onto the retry's own
reply stream, then the retry's response.

The wait is bounded by the request timeout. A replica that is gone is known at once and the client
is told to send the request again without ``requestState`` (the call died with its replica).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import InvalidParams, ProtocolError, RequestTimeout
from gateway.protocol.meta import require_request_meta
from gateway.state.bus import Bus, ReplicaGone
from gateway.stateless import StatelessHost, StatelessSession

__all__ = ["ParkedElsewhere", "KIND"]

log = logging.getLogger("gateway.mrtr")

KIND = "mrtr"


class ParkedElsewhere:
    """Both ends of a retry routed to the replica holding its parked call."""

    def __init__(self, bus: Bus, host: StatelessHost) -> None:
        self.bus = bus
        self.host = host
        self._tasks: set[asyncio.Task[None]] = set()
        bus.on(KIND, self._received)

    # -- the replica the retry landed on -----------------------------------------------------------
    async def resume(self, replica: str, message: dict[str, Any], session: StatelessSession) -> dict[str, Any]:
        """Serve ``message`` (a retry whose call is parked on ``replica``) there; its response."""
        rid = message["id"]

        async def relay(event: dict[str, Any]) -> None:
            await session.relay(event, rid)

        principal = session.principal
        body = {"msg": message, "principal": {"name": principal.name, "groups": sorted(principal.groups),
                                              "kind": principal.kind}}
        try:
            return await self.bus.ask(replica, KIND, body, relay, self.host.request_timeout_s)
        except ReplicaGone:
            raise InvalidParams("requestState: the replica running the call it continues is gone (the call "
                                "ended with it); send the request again without requestState") from None
        except TimeoutError:
            raise RequestTimeout("The replica running this call did not answer in time") from None
        except ProtocolError:
            raise
        except Exception as exc:  # the store failed: this request fails, the others go on
            log.warning("routing an MRTR retry to replica %s failed: %r", replica, exc)
            raise RequestTimeout("The replica running this call cannot be reached") from None

    # -- the replica holding the parked call ---------------------------------------------------------
    def _received(self, request: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, request: dict[str, Any]) -> None:
        msg, raw = request.get("msg"), request.get("principal")
        if not isinstance(msg, dict) or not isinstance(raw, dict) or not isinstance(msg.get("params"), dict):
            return
        rid = msg.get("id")
        try:
            meta = require_request_meta(msg["params"])
        except ProtocolError as exc:
            await self.bus.reply(request, jsonrpc.error_from_exception(rid, exc))
            return
        principal = Principal(str(raw.get("name")), frozenset(raw.get("groups") or ()), str(raw.get("kind")))

        async def send(event: dict[str, Any], related_request_id: str | int | None = None) -> None:
            await self.bus.event(request, event)

        session = StatelessSession(self.host, "streamable_http", send, principal, meta)
        reply = await session.handle_request(msg)
        await self.bus.reply(request, reply)

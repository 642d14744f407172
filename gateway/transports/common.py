"""What every transport does with a decoded frame: route each message to the session.

Requests in one frame run concurrently; their responses come back in the order of the requests.
Invalid messages get the error prepared by the parser. Batches are accepted only for protocol
revision 2025-03-26, the one revision that had them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.protocol import jsonrpc
from gateway.protocol.errors import INVALID_REQUEST
from gateway.protocol.jsonrpc import Incoming
from gateway.protocol.versions import allows_batches
from gateway.session import Session

__all__ = ["process_frame", "batch_refused"]


def batch_refused(session: Session | None, was_batch: bool) -> dict[str, Any] | None:
    """The error for a batch the negotiated revision does not allow, else None."""
    if not was_batch:
        return None
    version = session.protocol_version if session is not None else ""
    if version and allows_batches(version):
        return None
    return jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported "
                                  "by this protocol version")


async def process_frame(session: Session, messages: list[Incoming], traceparent: str | None = None,
                        authorization: str | None = None) -> list[dict[str, Any]]:
    """Handle every message of a frame; returns the responses to send (possibly none).
    ``traceparent`` and ``authorization`` are the frame's own (its HTTP request's headers)."""
    requests = []
    replies: list[dict[str, Any] | None] = []
    for inc in messages:
        if inc.kind == "request":
            requests.append((len(replies), session.handle_request(inc.message, traceparent, authorization)))
            replies.append(None)
        elif inc.kind == "notification":
            await session.handle_notification(inc.message)
        elif inc.kind == "response":
            session.handle_response(inc.message)
        elif inc.error is not None:
            replies.append(inc.error)
    if len(requests) == 1:
        index, coro = requests[0]
        replies[index] = await coro
    elif requests:
        results = await asyncio.gather(*(coro for _, coro in requests))
        for (index, _), result in zip(requests, results, strict=True):
            replies[index] = result
    return [r for r in replies if r is not None]

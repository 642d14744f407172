"""The ``/status`` response: query parsed, view collected, page rendered, headers that fit it.

One function, :func:`respond`, shared by the main port (after its guard) and the metrics port.
A bad query string is a 400 naming what is wrong; the page is never cached (it shows live state
and, behind auth, what others did) and may not be framed or run scripts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from .render import CSP, render
from .view import BadQuery, StatusQuery, StatusView, parse_query

__all__ = ["respond", "refusal", "ViewSource"]

ViewSource = Callable[[StatusQuery], Awaitable[StatusView]]

_HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}


def refusal(status: int, message: str) -> web.Response:
    """A short plain-text answer (bad query, forbidden): no markup to escape, nothing to render."""
    return web.Response(status=status, text=message + "\n", headers=_HEADERS)


async def respond(request: web.Request, source: ViewSource) -> web.Response:
    try:
        query = parse_query(request.query)
    except BadQuery as exc:
        return refusal(400, f"Bad Request: {exc}")
    view = await source(query)
    return web.Response(text=render(view), content_type="text/html", charset="utf-8", headers=_HEADERS)

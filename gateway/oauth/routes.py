"""The gateway's OAuth routes: ``GET /oauth/start/{id}``, ``GET /oauth/callback`` and the Client
ID Metadata Document at the path of ``oauth.client_metadata_url``.

A person's browser reaches these, not an MCP client: no credential is asked (a start id and a
``state`` are the capabilities, :mod:`.broker`), answers are small HTML pages with every value
escaped, ``Cache-Control: no-store`` and ``Referrer-Policy: no-referrer`` (the callback's URL
carries the code: no page it links to learns it), a CSP allowing nothing to load, and every
refusal a 400-class page saying what happened and that nothing was stored. A callback repeating a
parameter (two ``state`` or ``iss`` values) is refused before anything is looked up.
"""

from __future__ import annotations

import html
import json
from typing import Protocol

from aiohttp import web

from .broker import GatewayBroker, Page, Redirect

__all__ = ["add_routes", "OAuthRoutesHost", "render"]

_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
}


class OAuthRoutesHost(Protocol):
    """What the routes read per request (a reload replaces the config)."""

    @property
    def broker(self) -> GatewayBroker | None: ...

    @property
    def public_url(self) -> str: ...

    def metadata(self) -> dict[str, object] | None: ...

    def metadata_path(self) -> str | None: ...


def render(page: Page) -> web.Response:
    body = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(page.title)}</title>"
            "<style>body{font-family:sans-serif;max-width:40em;margin:4em auto}</style></head>"
            f"<body><h1>{html.escape(page.title)}</h1><p>{html.escape(page.text)}</p></body></html>")
    return web.Response(status=page.status, text=body, content_type="text/html", charset="utf-8", headers=_HEADERS)


def _unknown_link() -> web.Response:
    return render(Page(400, "Link expired", "This authorization link is unknown or has expired. Ask for the tool "
                                            "again to get a new one."))


def add_routes(app: web.Application, host: OAuthRoutesHost) -> None:
    async def start(request: web.Request) -> web.StreamResponse:
        broker = host.broker
        if broker is None:
            return _unknown_link()
        user = request.headers.get(broker.user_header) if broker.user_header else None
        outcome = await broker.start(request.match_info["id"], user)
        if isinstance(outcome, Redirect):
            return web.Response(status=302, headers={**_HEADERS, "Location": outcome.location})
        return render(outcome)

    async def callback(request: web.Request) -> web.StreamResponse:
        query = request.query
        repeated = sorted({k for k in query if len(query.getall(k)) > 1})
        if repeated:
            return render(Page(400, "Authorization failed", f"The response repeats {', '.join(repeated)}. "
                                                            "Nothing was stored."))
        broker = host.broker
        if broker is None:
            return _unknown_link()
        outcome = await broker.callback({k: query[k] for k in query})
        if isinstance(outcome, Redirect):  # never for a callback; rendered safely all the same
            return render(Page(400, "Authorization failed", "Unexpected response."))
        return render(outcome)

    app.router.add_get("/oauth/start/{id}", start)
    app.router.add_get("/oauth/callback", callback)

    path = host.metadata_path()  # never one of the gateway's own paths (oauth/config.py checks)
    if path is not None:
        async def metadata(request: web.Request) -> web.Response:
            document = host.metadata()
            if document is None:  # a reload removed it
                raise web.HTTPNotFound()
            return web.Response(text=json.dumps(document), content_type="application/json",
                                headers={"Cache-Control": "public, max-age=300"})

        app.router.add_get(path, metadata)


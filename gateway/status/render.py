"""A :class:`~.view.StatusView` as one self-contained HTML page.

PURE. No JavaScript, no external assets (a cluster has no CDN): inline CSS only, so the page can
be served with ``Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'``. Every
value from outside the gateway's code (names, descriptions, errors, principals, the search) goes
through :func:`html.escape` with quotes, in text and in attributes alike; links carry their query
through :func:`urllib.parse.urlencode`. The search is a plain GET form, so it works in any browser.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from urllib.parse import urlencode

from .view import CatalogPage, RateLimitPart, StatusView

__all__ = ["render", "CSP"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#1f2933;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px} header p{margin:4px 0 0;color:#cbd2d9}
main{padding:8px 24px 32px;max-width:1200px}
section{background:#fff;border:1px solid #d9dde3;border-radius:6px;margin:16px 0;padding:12px 16px}
h2{font-size:17px;margin:4px 0 10px}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e6e9ed;vertical-align:top}
th{font-weight:600;color:#52606d;font-size:13px} td.num{text-align:right;font-variant-numeric:tabular-nums}
.up{color:#0b7a3b;font-weight:600} .down{color:#b42318;font-weight:600} .muted{color:#6b7785}
code{font:13px ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-all}
form{margin:0 0 10px} input[type=search]{font:inherit;padding:4px 8px;width:320px} button{font:inherit;padding:4px 12px}
nav a{margin-right:10px}
header .up{color:#8ef0b6} header .down{color:#ffb4ab}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(epoch: float) -> str:
    if not epoch:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    parts = [f"{days}d"] if days else []
    if days or hours:
        parts.append(f"{hours}h")
    parts += [f"{minutes}m", f"{s}s"]
    return " ".join(parts)


def _state(up: bool, good: str = "up", bad: str = "down") -> str:
    return f'<span class="up">{good}</span>' if up else f'<span class="down">{bad}</span>'


def _table(head: tuple[str, ...], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{_e(empty)}</p>'
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _connectors(view: StatusView) -> str:
    rows = [f"<tr><td><code>{_e(c.name)}</code></td><td>{_e(c.kind)}</td><td>{_state(c.up)}</td>"
            f'<td class="num">{c.tools}</td><td class="num">{c.resources}</td><td class="num">{c.prompts}</td>'
            f'<td class="num">{c.reconnects}</td><td>{_e(c.state)}</td><td>{_e(c.last_error)}</td></tr>' for c in view.connectors]
    up = sum(c.up for c in view.connectors)
    clashes = "".join(f"<li>{_e(c)}</li>" for c in view.collisions)
    clash = (f'<h3 id="collisions">Name collisions ({len(view.collisions)})</h3><ul>{clashes}</ul>'
             if clashes else "")
    return (f'<section id="connectors"><h2>Connectors ({up} of {len(view.connectors)} up)</h2>'
            + _table(("name", "kind", "health", "tools", "resources", "prompts", "reconnects", "state", "last error"),
                     rows, "No connectors are configured.") + clash + "</section>")


def _page_link(page: CatalogPage, number: int, label: str) -> str:
    params = {"q": page.query.q, "page": str(number)} if page.query.q else {"page": str(number)}
    return f'<a href="?{_e(urlencode(params))}#catalog">{_e(label)}</a>'


def _catalog(view: StatusView) -> str:
    page = view.catalog
    counts = ", ".join(f"{n} {_e(k)}" for k, n in view.catalog_counts.items())
    form = ('<form method="get" action="#catalog" role="search"><label for="q">Search the catalog </label>'
            f'<input type="search" id="q" name="q" value="{_e(page.query.q)}" maxlength="200"> '
            '<button type="submit">Search</button></form>')
    rows = [f"<tr><td>{_e(r.kind)}</td><td><code>{_e(r.name)}</code></td><td><code>{_e(r.connector)}</code></td>"
            f"<td>{_e(r.description)}</td></tr>" for r in page.rows]
    what = f"{page.total} match{'es' if page.total != 1 else ''} for “{_e(page.query.q)}”" if page.query.q \
        else f"{page.total} entries"
    nav = []
    if page.query.page > 1:
        nav.append(_page_link(page, page.query.page - 1, "← previous"))
    if page.query.page < page.pages:
        nav.append(_page_link(page, page.query.page + 1, "next →"))
    return (f'<section id="catalog"><h2>Catalog</h2><p class="muted">{counts}</p>{form}'
            f'<p>{what}; page {page.query.page} of {page.pages}</p>'
            + _table(("kind", "name", "connector", "description"), rows, "Nothing matches.")
            + (f"<nav>{''.join(nav)}</nav>" if nav else "") + "</section>")


def _sessions(view: StatusView) -> str:
    groups = [f"<tr><td>{_e(g.transport)}</td><td>{_e(g.revision or '(initializing)')}</td>"
              f'<td class="num">{g.count}</td></tr>' for g in view.session_groups]
    rows = [f"<tr><td>{_e(s.principal)}</td><td>{_e(s.transport)}</td><td>{_e(s.revision or '—')}</td>"
            f"<td>{_e(s.client or '—')}</td><td>{_e(s.state)}</td><td>{_e(_duration(s.idle_s))}</td></tr>"
            for s in view.sessions]
    shown = f" (the {len(view.sessions)} most recently active)" if len(view.sessions) < view.sessions_total else ""
    return (f'<section id="sessions"><h2>Live sessions: {view.sessions_total}</h2>'
            + _table(("transport", "revision", "sessions"), groups, "No live sessions.")
            + (f"<h3>Sessions{_e(shown)}</h3>" if rows else "")
            + (_table(("principal", "transport", "revision", "client", "state", "idle"), rows, "") if rows else "")
            + '<p class="muted">2026-07-28 clients have no session; their requests appear in the audit log.</p>'
            + "</section>")


def _audit(view: StatusView) -> str:
    audit = view.audit
    rows = [f"<tr><td>{_e(a.time)}</td><td>{_e(a.principal)}</td><td>{_e(a.method)}</td>"
            f"<td><code>{_e(a.target)}</code></td><td>{_e(a.outcome)}</td>"
            f'<td class="num">{"" if a.latency_ms is None else f"{a.latency_ms:.1f}"}</td></tr>' for a in audit.rows]
    body = _table(("time", "principal", "method", "target", "outcome", "ms"), rows, "No events yet.") \
        if audit.state == "ok" else ""
    note = f'<p class="{"muted" if audit.state != "unavailable" else "down"}">{_e(audit.detail)}</p>'
    return f'<section id="audit"><h2>Recent audit events</h2>{note}{body}</section>'


def _rate_limit(part: RateLimitPart | None) -> str:
    if part is None:
        return ('<section id="rate-limits"><h2>Rate limits</h2>'
                '<p class="muted">No rate limits and no connector concurrency caps are configured.</p></section>')
    breaker = f", circuit breaker {_e(part.breaker)}" if part.breaker else ""
    head = (f"<p>Backend {_e(part.backend)}: {_state(part.up)}{breaker}; when it fails, calls are "
            f"{'allowed' if part.on_backend_error == 'open' else 'refused'} (on_backend_error: "
            f"{_e(part.on_backend_error)}). Refused by a limit: {part.limited}; backend errors: "
            f"{part.backend_errors}.</p>" + (f'<p class="down">{_e(part.detail)}</p>' if part.detail else ""))
    rules = [f"<tr><td>{_e(r.scope)}</td><td><code>{_e(r.match)}</code></td><td>{_e(r.rate)}</td>"
             f"<td>{_e(r.burst or '—')}</td><td>{'yes' if r.per_principal else 'no'}</td></tr>" for r in part.rules]
    caps = [f'<tr><td><code>{_e(name)}</code></td><td class="num">{n}</td></tr>' for name, n in part.concurrency]
    return ('<section id="rate-limits"><h2>Rate limits</h2>' + head
            + _table(("scope", "match", "rate", "burst", "per principal"), rules, "No rate-limit rules.")
            + (_table(("connector", "max concurrent calls"), caps, "") if caps else "") + "</section>")


def render(view: StatusView) -> str:
    """The whole page."""
    state = "draining" if view.draining else "ready" if view.ready else "starting"
    uptime = _duration(view.now - view.started_at) if view.started_at else "not started"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(view.name)} status</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>{_e(view.name)} {_e(view.version)}: {_state(view.ready, state, state)}</h1>"
        f"<p>Up {_e(uptime)} (since {_e(_when(view.started_at))}); config loaded {_e(_when(view.config_loaded_at))}; "
        f"page generated {_e(_when(view.now))}</p></header><main>"
        '<nav><a href="#connectors">Connectors</a><a href="#catalog">Catalog</a><a href="#sessions">Sessions</a>'
        '<a href="#audit">Audit</a><a href="#rate-limits">Rate limits</a></nav>'
        + _connectors(view) + _catalog(view) + _sessions(view) + _audit(view) + _rate_limit(view.rate_limit)
        + "</main></body></html>")

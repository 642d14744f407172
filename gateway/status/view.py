"""What ``/status`` shows, as plain values, and the pure rules that shape it.

PURE: no I/O, no aiohttp. :mod:`.collect` fills a :class:`StatusView` from the running gateway;
:mod:`.render` turns it into HTML. Everything here is bounded (the catalog is searched and shown
a page at a time; sessions and audit events are capped) so that a gateway with ten thousand tools
or sessions still answers with a page of a few hundred kilobytes at most.

Credentials never reach a view: :func:`scrub` removes the password of any ``scheme://user:pw@``
URL and the value of a bearer or basic credential from every free text a view carries (connector
errors, backend errors), and the collector never copies headers, keys or DSNs into a view.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["StatusQuery", "BadQuery", "parse_query", "scrub", "search", "ConnectorRow", "CatalogRow",
           "CatalogPage", "SessionGroup", "SessionRow", "AuditRow", "AuditPart", "RuleRow", "RateLimitPart",
           "StatusView", "PAGE_SIZE", "MAX_QUERY_CHARS", "MAX_SESSIONS_SHOWN", "AUDIT_SHOWN", "MAX_TEXT"]

PAGE_SIZE = 50  # catalog rows per page
MAX_QUERY_CHARS = 200  # a search longer than this is refused (400), not truncated silently
MAX_PAGE = 100_000
MAX_SESSIONS_SHOWN = 50  # the most recently active; the groups count all of them
AUDIT_SHOWN = 25  # newest first
MAX_TEXT = 300  # a description or error longer than this is cut (with an ellipsis)

# The password of a URL's userinfo, and a credential after an HTTP auth scheme.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@/]*@")
_AUTH_VALUE = re.compile(r"\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]+", re.I)


class BadQuery(ValueError):
    """A query string ``/status`` refuses (400), with the reason a person can act on."""


@dataclass(frozen=True, slots=True)
class StatusQuery:
    """The page's parameters: a catalog search (``q``, empty for all) and its page (from 1)."""

    q: str = ""
    page: int = 1


def parse_query(params: Mapping[str, str]) -> StatusQuery:
    """``?q=...&page=N`` as a :class:`StatusQuery`; :class:`BadQuery` says what is wrong."""
    q = params.get("q", "").strip()
    if len(q) > MAX_QUERY_CHARS:
        raise BadQuery(f"q is {len(q)} characters long; the most is {MAX_QUERY_CHARS}")
    raw = params.get("page", "1").strip() or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise BadQuery(f"page must be a whole number from 1 to {MAX_PAGE}")
    return StatusQuery(q, int(raw))


def scrub(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` without URL passwords or auth-scheme credentials, cut to ``limit`` characters."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + "***@", text)
    text = _AUTH_VALUE.sub(lambda m: m.group("scheme") + " ***", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class ConnectorRow:
    name: str
    kind: str
    up: bool
    state: str  # what the connector says of itself now ("18 tools", "connected (…)"; down: why, and its retry)
    last_error: str  # the last failure it reported (a failed start, going down), kept after it recovers; scrubbed
    tools: int
    resources: int  # resources and resource templates
    prompts: int
    reconnects: int  # times it came back up after being down, since this process started


@dataclass(frozen=True, slots=True)
class CatalogRow:
    kind: str  # tool | resource | template | prompt
    name: str  # the public name (resources: their public URI)
    connector: str
    description: str


@dataclass(frozen=True, slots=True)
class CatalogPage:
    query: StatusQuery
    total: int  # matches of the search, over all pages
    pages: int
    rows: tuple[CatalogRow, ...]


def search(rows: Iterable[CatalogRow], query: StatusQuery, page_size: int = PAGE_SIZE) -> CatalogPage:
    """The rows whose name, connector or description contains every word of ``query.q``
    (case-insensitive), in the order given, cut to ``query.page``. A page past the last is empty."""
    words = query.q.casefold().split()
    matches = [r for r in rows
               if all(w in f"{r.name}\n{r.connector}\n{r.description}\n{r.kind}".casefold() for w in words)]
    pages = max(1, -(-len(matches) // page_size))
    start = (query.page - 1) * page_size
    return CatalogPage(query, len(matches), pages, tuple(matches[start:start + page_size]))


@dataclass(frozen=True, slots=True)
class SessionGroup:
    transport: str
    revision: str  # the negotiated protocol revision ("" before initialize finished)
    count: int


@dataclass(frozen=True, slots=True)
class SessionRow:
    principal: str
    transport: str
    revision: str
    client: str  # clientInfo name and version, as the client sent them
    state: str
    idle_s: float


@dataclass(frozen=True, slots=True)
class AuditRow:
    time: str  # ISO 8601, UTC
    principal: str
    method: str
    target: str
    outcome: str
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class AuditPart:
    state: str  # "ok" | "off" (no store configured) | "unavailable" (the query failed)
    detail: str
    rows: tuple[AuditRow, ...] = ()


@dataclass(frozen=True, slots=True)
class RuleRow:
    scope: str
    match: str
    rate: str
    burst: str
    per_principal: bool


@dataclass(frozen=True, slots=True)
class RateLimitPart:
    backend: str  # "memory" or "redis": never the backend's URL
    up: bool
    detail: str
    breaker: str  # closed | open | half_open | "" (no breaker: the memory backend)
    on_backend_error: str
    rules: tuple[RuleRow, ...]
    concurrency: tuple[tuple[str, int], ...]  # connector → max_concurrency
    limited: int  # calls refused by a limit since the chain was built
    backend_errors: int


@dataclass(frozen=True, slots=True)
class StatusView:
    name: str
    version: str
    ready: bool
    draining: bool
    started_at: float  # epoch seconds; 0 before start
    config_loaded_at: float  # epoch seconds of the last start or reload
    now: float
    connectors: tuple[ConnectorRow, ...]
    catalog: CatalogPage
    catalog_counts: Mapping[str, int]
    sessions_total: int
    session_groups: tuple[SessionGroup, ...]
    sessions: tuple[SessionRow, ...]  # at most MAX_SESSIONS_SHOWN, most recently active first
    audit: AuditPart
    rate_limit: RateLimitPart | None  # None: no rules and no connector concurrency configured
    collisions: tuple[str, ...] = ()  # public names left out: which connector's, served from where

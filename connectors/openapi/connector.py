"""The OpenAPI connector: loads a spec, serves each operation as a tool, calls the real API.

Lifecycle: :meth:`start` loads the spec (file or URL, JSON/YAML, optionally gzip), maps it and opens
one pooled ``aiohttp.ClientSession``; with ``refresh_s`` a background task re-fetches the spec
(``If-None-Match`` with the last ETag) and, when it changed, swaps the mapping in one assignment and
reports ``components_changed``. A spec that cannot be loaded raises :class:`loader.SpecError` from
``start`` (this connector fails, not the gateway); a refresh that fails keeps the old mapping.

A call: arguments → :func:`request.build_request` → openapi-core validation (nothing is sent when it
fails; the error names the argument) → credentials → HTTP with timeout, size limit and retries for
idempotent methods only → a ``CallToolResult`` (text, plus ``structuredContent`` for JSON). Non-2xx
raises ``ToolExecutionError(status=...)`` with the status and an excerpt of the body in its text
and no ``structuredContent``, which could only contradict the tool's ``outputSchema``; a response
over ``max_response_bytes`` fails that call only.

Egress. Every request (spec, ``$ref`` targets, token, calls) goes through the connector's
:class:`~connectors.egress.EgressPolicy` (``egress:`` in its config): addresses checked after DNS,
redirects followed within the same origin for GET/HEAD only, so credentials never leave the origin
they are sent to. The origins the config itself writes as IP literals (``base_url``, ``spec``, the
OAuth2 ``token_url``) are trusted as written; a spec's ``servers`` and ``$ref`` URLs are not.

Exceptions. What the libraries under this connector raise (aiohttp's errors and timeouts, the spec
core's :class:`~refs.PointerError` and :class:`~request.ArgumentError`) becomes the gateway's
exceptions in one place, the edge section below: :func:`_spec_edge` around every spec fetch and
mapping (→ :class:`loader.SpecError`), :func:`_call_edge` around every call (→
:class:`ToolExecutionError`). The only other ``except`` clauses are control flow: the retry of an
idempotent request, the refresh loop, clean-up when ``start`` fails.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote

import aiohttp
from yarl import URL

from connectors.base import Components, Connector, ConnectorEvents, Health, ResourceTemplateSpec, ToolSpec
from connectors.egress import EgressPolicy, EgressRefused, Lookup, RedirectRefused
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from connectors.oauth.client import AuthorizationRequired
from connectors.oauth.identity import UpstreamIdentity
from connectors.oauth.requestauth import MAX_ATTEMPTS, RequestAuth
from gateway.protocol.errors import (
    BackendUnavailable,
    ExceptionMap,
    InvalidParams,
    ResourceNotFound,
    ToolExecutionError,
    map_exceptions,
)

from . import loader, swagger2
from .auth import Authenticator
from .config import OpenAPIConfig
from .mapping import MappedSpec, Operation, map_spec, uri_template_for
from .refs import PointerError
from .request import ArgumentError, PreparedRequest, build_request, server_url
from .validate import RequestValidator, describe

if TYPE_CHECKING:
    from gateway.context import CallContext

__all__ = ["OpenAPIConnector"]

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({502, 503, 504})
_EXCERPT = 2000


class _State:
    """Everything derived from one version of the spec; replaced as a whole on refresh."""

    def __init__(self, doc: dict[str, Any], mapped: MappedSpec, connector: str, cfg: OpenAPIConfig) -> None:
        self.doc = doc
        self.mapped = mapped
        self.tools = {op.name: op for op in mapped.operations if op.route == "tool"}
        self.origins: dict[str, tuple[tuple[str, ...], str]] | None = None  # tool → (tags, path), on demand
        self.templates = {op.name: op for op in mapped.operations if op.route == "resource"}
        self.tool_specs = tuple(ToolSpec(name, op.definition) for name, op in self.tools.items())
        self.template_specs = tuple(_template_spec(connector, op) for op in self.templates.values())
        self.template_patterns = [(_uri_regex(uri_template_for(connector, op)), op) for op in self.templates.values()]
        spec_server = server_url(mapped.servers, cfg.server_variables)
        self.base_url = (cfg.base_url or spec_server).rstrip("/")
        self.validator = RequestValidator(doc, spec_server, mapped.version)
        self.auth = Authenticator(cfg.auth, mapped.security_schemes)


def _template_spec(connector: str, op: Operation) -> ResourceTemplateSpec:
    d = op.definition
    definition = {"uriTemplate": uri_template_for(connector, op), "name": op.name}
    for k in ("title", "description"):
        if k in d:
            definition[k] = d[k]
    definition["mimeType"] = "application/json"
    return ResourceTemplateSpec(definition["uriTemplate"], op.name, definition)


def _uri_regex(template: str) -> re.Pattern[str]:
    base, _, _ = template.partition("{?")
    out, pos = "", 0
    for m in re.finditer(r"\{([^}]+)\}", base):
        out += re.escape(base[pos:m.start()]) + f"(?P<{_group(m.group(1))}>[^/?#]+)"
        pos = m.end()
    return re.compile("^" + out + re.escape(base[pos:]) + r"(?:\?(?P<__query>.*))?$")


def _group(name: str) -> str:
    return "g_" + re.sub(r"\W", "_", name) + "_" + hashlib.sha1(name.encode()).hexdigest()[:6]


# -- the exception edge -------------------------------------------------------------------------
# The one place where third-party exceptions become the gateway's. Two surfaces, one mapping each;
# every other exception passes through (GatewayErrors already raised inside the blocks included:
# a non-200 spec fetch, an HTTP error status, an OAuth2 failure from auth.py).


def _spec_edge(where: str) -> ExceptionMap:
    """Loading a spec: fetching ``where`` (a URL) or mapping the document read from ``where``.
    Raises :class:`loader.SpecError`, which fails ``start`` (a refresh logs it and keeps the old
    mapping)."""

    def failed(exc: Exception) -> loader.SpecError:
        if isinstance(exc, PointerError):
            return loader.SpecError(f"unresolvable $ref {exc.ref!r}", f"{where}{exc.where}")
        if isinstance(exc, EgressRefused):  # for the operator: host, address, rule, how to allow it
            return loader.SpecError(f"cannot fetch the spec: {exc}", where)
        return loader.SpecError(f"cannot fetch the spec: {type(exc).__name__}: {exc}", where)

    return map_exceptions({PointerError: failed, EgressRefused: failed, aiohttp.ClientError: failed,
                           TimeoutError: failed})


def _call_edge(op: Operation, connector: str) -> ExceptionMap:
    """Calling ``op``: serialising the arguments, credentials, then the HTTP exchange. Raises
    :class:`ToolExecutionError` (``isError``: the model reads what went wrong) whose ``status``
    tells audit and metrics what happened: ``invalid_arguments``, ``egress_refused``,
    ``unreachable`` or ``error``. Messages name only the exception type or the egress rule, never
    the URL, an address or the backend's text (an egress refusal is logged in full for operators)."""

    def failed(exc: Exception) -> ToolExecutionError:
        if isinstance(exc, ArgumentError):
            return ToolExecutionError(f"Invalid arguments for {op.name}: {exc}", status="invalid_arguments")
        if isinstance(exc, EgressRefused):
            log.warning("openapi connector %s, %s %s: %s", connector, op.method, op.path, exc)
            if isinstance(exc, RedirectRefused):
                return ToolExecutionError(f"{op.method} {op.path}: the backend answered HTTP {exc.status}, a redirect "
                                          f"the gateway does not follow: {exc.reason}", status="egress_refused")
            return ToolExecutionError(f"{op.method} {op.path}: refused by the gateway's egress policy ({exc.reason})",
                                      status="egress_refused")
        if isinstance(exc, TimeoutError):  # aiohttp's socket/connect timeouts are TimeoutErrors too
            return ToolExecutionError(f"{op.method} {op.path}: the request timed out", status="unreachable")
        if isinstance(exc, aiohttp.ClientConnectionError):
            return ToolExecutionError(f"{op.method} {op.path}: the request failed ({type(exc).__name__})",
                                      status="unreachable")
        return ToolExecutionError(f"{op.method} {op.path}: {type(exc).__name__}", status="error")

    return map_exceptions({ArgumentError: failed, EgressRefused: failed, aiohttp.ClientError: failed,
                           TimeoutError: failed})


class OpenAPIConnector(Connector):
    kind = "openapi"
    config: OpenAPIConfig

    def __init__(self, config: OpenAPIConfig, base_dir: Path = Path("."), *, lookup: Lookup | None = None) -> None:
        """``lookup`` replaces the system resolver (tests map names to loopback addresses)."""
        super().__init__(config, base_dir)
        self._state: _State | None = None
        self._http: aiohttp.ClientSession | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._etag: str | None = None
        self._digest: str | None = None
        self._health = Health(False, "not started")
        self._identity: UpstreamIdentity | None = None  # with oauth/credentials, made at the first call
        self._source = config.spec if loader.is_url(config.spec) else str(self._resolve(config.spec))
        oauth2 = config.auth.oauth2
        self._egress = EgressPolicy(config.egress, lookup=lookup, trusted=(
            config.spec if loader.is_url(config.spec) else None, config.base_url, oauth2.token_url if oauth2 else None))

    def _resolve(self, spec: str) -> Path:
        p = Path(spec[7:] if spec.startswith("file://") else spec)
        return p if p.is_absolute() else self.base_dir / p

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)
        if self._http is None:
            self._http = self._egress.client_session(
                limit=self.config.max_concurrency or 100,
                timeout=aiohttp.ClientTimeout(total=self.config.request_timeout_s),
                cookie_jar=aiohttp.DummyCookieJar(),  # cookies are per call, never shared between callers
            )
        try:
            self._state = None
            self.components = Components()
            await self.load()
            assert self._state is not None
        except BaseException:
            await self.stop()
            raise
        self._health = Health(True, f"{len(self._state.tools)} tools")
        if self.config.refresh_s and self._refresh_task is None:
            self._refresh_task = asyncio.create_task(self._refresh_loop(), name=f"openapi-refresh-{self.name}")

    async def stop(self) -> None:
        task, self._refresh_task = self._refresh_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        http, self._http = self._http, None
        if http is not None:
            await http.close()
        identity, self._identity = self._identity, None
        if identity is not None:
            await identity.aclose()
        self._health = Health(False, "stopped")

    def health(self) -> Health:
        return self._health

    def problems(self) -> tuple[str, ...]:
        return self._state.mapped.warnings if self._state is not None else ()

    def capabilities(self) -> set[str]:
        caps = {"tools"}
        if self.config.routes:
            caps.add("resources")
        return caps

    # -- loading -----------------------------------------------------------------------------
    async def _get(self, url: str, conditional: bool) -> bytes | None:
        """The document at ``url``; None when ``conditional`` and the server says 304."""
        assert self._http is not None
        headers = {"Accept": "application/json, application/yaml;q=0.9, */*;q=0.5"}
        if conditional and self._etag:
            headers["If-None-Match"] = self._etag
        with _spec_edge(url):
            async with self._egress.request(self._http, "GET", url, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=self.config.spec_timeout_s)) as resp:
                if resp.status == 304 and conditional:
                    return None
                if resp.status != 200:
                    raise loader.SpecError(f"fetching the spec returned HTTP {resp.status}", url)
                data = await _read_limited(resp, self.config.max_spec_bytes)
                if data is None:
                    raise loader.SpecError(f"the spec is larger than max_spec_bytes={self.config.max_spec_bytes}", url)
                if url == self._source:
                    self._etag = resp.headers.get("ETag")
                return data

    async def _fetch_url(self, url: str) -> bytes:
        """The loader's :data:`loader.Fetch`: the spec or a ``$ref`` target at ``url``."""
        data = await self._get(url, conditional=False)
        assert data is not None  # None only answers a conditional request
        return data

    async def _fetch_spec(self, conditional: bool) -> bytes | None:
        if loader.is_url(self._source):
            return await self._get(self._source, conditional)
        return await loader.read_source(self._source, self._fetch_url)

    def _build_doc(self, doc: dict[str, Any], version: str) -> _State:
        with _spec_edge(self._source):
            mapped = map_spec(doc, version, self.config, self._source)
        state = _State(doc, mapped, self.name, self.config)
        # What needs no DNS (an IP literal, a metadata name) is refused now, not at the first call.
        # A base URL that is not an absolute http(s) URL fails each call, as it always did.
        with contextlib.suppress(ValueError):
            url = URL(state.base_url)
            if url.scheme in ("http", "https") and url.host:
                try:
                    self._egress.check_url(url)
                except EgressRefused as exc:
                    where = "base_url" if self.config.base_url else f"{self._source}#/servers"
                    raise loader.SpecError(f"the base URL is refused: {exc}", where) from None
        return state

    async def load(self) -> None:
        """(Re)load now: bundle external refs too (async), then swap the state."""
        raw = await self._fetch_spec(conditional=self._state is not None)
        if raw is None:
            return
        if self._state is not None and hashlib.sha256(raw).hexdigest() == self._digest:
            return
        self._digest = hashlib.sha256(raw).hexdigest()
        doc = loader.parse_document(raw, self._source)
        version = loader.check_version(doc, self._source)
        doc = await loader.bundle(doc, raw, self._source, self._fetch_url)
        if version == "2.0":
            doc, version = swagger2.convert(doc), swagger2.VERSION
        old = self._state
        self._state = self._build_doc(doc, version)
        for warning in self._state.mapped.warnings:
            if old is None or warning not in old.mapped.warnings:
                log.warning("openapi connector %s: %s", self.name, warning)
        self.components = Components(tools=self._state.tool_specs, resource_templates=self._state.template_specs)
        if old is not None and self.events is not None and _listing(old) != _listing(self._state):
            self.events.components_changed()

    async def _refresh_loop(self) -> None:
        assert self.config.refresh_s
        while True:
            await asyncio.sleep(self.config.refresh_s)
            # Control flow: a refresh that fails keeps the old mapping, and the loop never dies.
            try:
                await self.load()
            except loader.SpecError as exc:  # what the edge made of the failure: tell the clients
                if self.events is not None:
                    self.events.log("warning", {"connector": self.name, "error": str(exc)}, "openapi")
            except Exception:  # not from the edge, so a bug: log it, keep refreshing
                log.exception("openapi connector %s: refreshing the spec failed unexpectedly", self.name)

    # -- components --------------------------------------------------------------------------
    def tool_origin(self, name: str) -> tuple[tuple[str, ...], str]:
        """(OpenAPI tags, path) of the operation behind the local tool ``name`` (endpoints select
        by tags; tool search indexes both); ``((), "")`` when unknown."""
        state = self._state
        if state is None:
            return (), ""
        if state.origins is None:  # once per version of the spec, for every tool
            paths = state.doc.get("paths") or {}
            origins: dict[str, tuple[tuple[str, ...], str]] = {}
            for tool, op in state.tools.items():
                raw = (paths.get(op.path) or {}).get(op.method.lower()) or {}
                tags = raw.get("tags") if isinstance(raw, dict) else None
                origins[tool] = (tuple(t for t in tags or () if isinstance(t, str)), op.path)
            state.origins = origins
        return state.origins.get(name, ((), ""))

    def owns_uri(self, uri: str) -> bool:
        return self._match_uri(uri) is not None

    def _match_uri(self, uri: str) -> tuple[Operation, dict[str, Any]] | None:
        if self._state is None or not uri.startswith(f"openapi://{self.name}/"):
            return None
        for pattern, op in self._state.template_patterns:
            m = pattern.match(uri)
            if m is None:
                continue
            args: dict[str, Any] = {}
            for a in op.args:
                if a.location == "path":
                    args[a.arg] = unquote(m.group(_group(a.arg)))
            query = m.group("__query")
            if query:
                for k, v in parse_qsl(query, keep_blank_values=True):
                    if k in op.by_arg:
                        args[k] = v
            return op, args
        return None

    # -- calls -------------------------------------------------------------------------------
    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        state = self._state
        op = state.tools.get(name) if state else None
        if op is None or state is None:
            raise InvalidParams(f"Unknown tool: {name}")
        return await self._call(state, op, arguments or {}, ctx)

    async def read_resource(self, uri: str, ctx: CallContext) -> dict[str, Any]:
        state = self._state
        found = self._match_uri(uri)
        if found is None or state is None:
            raise ResourceNotFound(uri)
        op, args = found
        args = _coerce(op, args)
        result = await self._call(state, op, args, ctx)
        structured = result.get("structuredContent")
        if structured is not None:
            text = json.dumps(structured, ensure_ascii=False)
            return {"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}
        item = result["content"][0] if result.get("content") else {"type": "text", "text": ""}
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": item.get("text", "")}]}

    async def _call(self, state: _State, op: Operation, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        ctx.record.backend_target = f"{op.method} {op.path}"
        edge = _call_edge(op, self.name)  # entered three times: serialising, credentials, HTTP (in the span)
        with edge:
            req = build_request(op, arguments)
        if self.config.validate_requests:
            errors = state.validator.errors(req, server_url(op.servers, self.config.server_variables)
                                            if op.servers else None)
            if errors:
                raise ToolExecutionError(f"Invalid arguments for {op.name}: {describe(errors, state.validator.originals)}."
                                         " No request was sent.",
                                         status="invalid_arguments")
        if self._http is None:
            raise BackendUnavailable.connector_down(self.name, "not running")
        for k, v in self.config.headers.items():
            req.headers.setdefault(k, v)
        requirements = op.security if op.security is not None else state.mapped.security
        with edge:  # an OAuth2 token request goes through the egress policy too
            await state.auth.apply(req, requirements, self._http, op.wants_authorization)
        if self.config.auth.forward_caller:
            token = ctx.caller_authorization
            if token:
                req.headers["Authorization"] = token
        # A CLIENT span for the backend call (retries included); the backend gets its traceparent.
        instrumentation = self.instrumentation
        with instrumentation.backend_call(f"{op.method} {op.path}",
                                          {"http.request.method": op.method, "http.route": op.path}) as call:
            instrumentation.inject(req.headers)
            try:
                with edge:  # inside the span, so the span records the translated error, as before
                    identity = self._upstream_identity(state)
                    if identity is None:
                        return await self._send(state, op, req, ctx)
                    for _ in range(1 + identity.max_authorizations):
                        try:
                            return await self._send(state, op, req, ctx, self._upstream_auth(identity, ctx))
                        except AuthorizationRequired as exc:  # the caller (or an operator) authorises
                            await identity.authorize(exc, ctx)
                    raise ToolExecutionError(f"{op.method} {op.path}: the backend kept asking for authorization",
                                             status="unauthorized")
            finally:
                if isinstance(ctx.record.backend_status, int):
                    call.status(ctx.record.backend_status)

    def _upstream_identity(self, state: _State) -> UpstreamIdentity | None:
        cfg = self.config
        if cfg.oauth is None and cfg.credentials is None:
            return None
        if self._identity is None:
            self._identity = UpstreamIdentity(self.name, state.base_url, cfg.oauth, cfg.credentials, self._egress,
                                              lambda: self.oauth_port)
        return self._identity

    @staticmethod
    def _upstream_auth(identity: UpstreamIdentity, ctx: CallContext) -> RequestAuth | None:
        return identity.auth_for(ctx) if identity.per_principal else identity.service_auth()

    async def _send(self, state: _State, op: Operation, req: PreparedRequest, ctx: CallContext,
                    auth: RequestAuth | None = None) -> dict[str, Any]:
        """The HTTP exchange (retried for idempotent methods); with ``auth`` each attempt carries
        the upstream credential and a 401/403 challenge it answers is sent again (bounded)."""
        assert self._http is not None
        url = URL(state.base_url + req.target(), encoded=True)
        headers = dict(req.headers)
        headers.setdefault("Accept", "application/json, */*;q=0.5")
        if req.content_type:
            headers["Content-Type"] = req.content_type
        # aiohttp labels every POST/PUT/PATCH "application/octet-stream", a body or not: a request
        # without a body carries no Content-Type (some servers refuse the made-up one with 415).
        skip = ("Content-Type",) if req.body is None and not req.content_type else ()
        if req.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in req.cookies.items())
        attempts = 1 + (self.config.retries if op.idempotent else 0)
        attempt = challenges = 0
        while attempt < attempts:
            value = await auth.authorization() if auth is not None else None
            if auth is not None and value:
                headers[auth.header] = value
            timeout = self.config.request_timeout_s
            remaining = ctx.remaining()
            if remaining is not None:
                timeout = min(timeout, max(remaining, 0.001))
            try:
                async with self._egress.request(self._http, req.method, url, headers=headers, data=req.body,
                                                skip_auto_headers=skip,
                                                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                    if auth is not None and resp.status in (401, 403) and challenges < MAX_ATTEMPTS and \
                            await auth.challenged(resp.status, resp.headers.get("WWW-Authenticate"), value):
                        challenges += 1
                        continue
                    if resp.status in _RETRY_STATUS and attempt + 1 < attempts:
                        await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
                        attempt += 1
                        continue
                    data = await _read_limited(resp, self.config.max_response_bytes)
                    ctx.record.backend_status = resp.status
                    if data is None:
                        raise ToolExecutionError(
                            f"{op.method} {op.path}: the response exceeded {self.config.max_response_bytes} bytes",
                            status=resp.status)
                    return _result(op, resp.status, resp.reason or "", resp.content_type, data)
            except aiohttp.ClientConnectionError as exc:
                # Control flow, not translation: a refused or reset connection is tried again
                # (idempotent methods only); a timeout is not, it has used the call's time. What
                # is not retried leaves for the call's edge (_call_edge), which translates it.
                if attempt + 1 < attempts and not isinstance(exc, TimeoutError):
                    await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
                    attempt += 1
                    continue
                raise
        raise ToolExecutionError(f"{op.method} {op.path}: no response", status="unreachable")


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    if resp.content_length is not None and resp.content_length > limit:
        return None
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(65536):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _is_json(content_type: str) -> bool:
    ct = content_type.lower()
    return ct == "application/json" or ct.endswith("+json")


def _result(op: Operation, status: int, reason: str, content_type: str, data: bytes) -> dict[str, Any]:
    parsed: Any = None
    is_json = False
    if data and (_is_json(content_type) or (not content_type or content_type == "application/octet-stream")
                 and data[:1] in (b"{", b"[")):
        try:
            parsed = json.loads(data)
            is_json = True
        except ValueError:
            pass
    text = data.decode("utf-8", errors="replace") if (is_json or _is_textual(content_type, data)) else None
    if not 200 <= status < 300:
        # Status and body go in the text only: a structuredContent here would have to match the
        # tool's outputSchema (the success shape), and clients that validate it show the schema
        # violation instead of the API's own message.
        excerpt = (text if text is not None else f"<{len(data)} bytes of {content_type}>")[:_EXCERPT]
        raise ToolExecutionError(f"HTTP {status} {reason} from {op.method} {op.path}: {excerpt}".rstrip(": "),
                                 status=status)
    if not data:
        return {"content": [{"type": "text", "text": f"HTTP {status} {reason}".strip()}]}
    if is_json:
        structured = parsed if isinstance(parsed, dict) else {"result": parsed}
        if "outputSchema" not in op.definition or isinstance(parsed, dict):
            return {"content": [{"type": "text", "text": text}], "structuredContent": structured}
        return {"content": [{"type": "text", "text": text}]}
    if text is not None:
        return {"content": [{"type": "text", "text": text}]}
    b64 = base64.b64encode(data).decode()
    if content_type.startswith("image/"):
        return {"content": [{"type": "image", "data": b64, "mimeType": content_type}]}
    return {"content": [{"type": "resource", "resource": {
        "uri": f"openapi://response{op.path}", "mimeType": content_type or "application/octet-stream", "blob": b64}}]}


def _is_textual(content_type: str, data: bytes) -> bool:
    ct = content_type.lower()
    if ct.startswith("text/") or ct.endswith(("+xml", "/xml", "/yaml", "/javascript")):
        return True
    if ct and ct != "application/octet-stream":
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _coerce(op: Operation, args: dict[str, Any]) -> dict[str, Any]:
    """URI values are strings; convert them to the types the inputSchema declares."""
    props = op.definition["inputSchema"].get("properties", {})
    out: dict[str, Any] = {}
    for k, v in args.items():
        t = props.get(k, {}).get("type") if isinstance(props.get(k), dict) else None
        types = t if isinstance(t, list) else [t]
        try:
            if "integer" in types:
                v = int(v)
            elif "number" in types:
                v = float(v)
            elif "boolean" in types:
                v = v.lower() == "true"
        except (TypeError, ValueError):
            pass
        out[k] = v
    return out


def _listing(state: _State) -> str:
    return json.dumps([[t.definition for t in state.tool_specs], [t.definition for t in state.template_specs]],
                      sort_keys=True, default=str)

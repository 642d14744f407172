"""What ``mcp-gateway validate`` checks beyond the config's schema (the schema itself, formats and
URL schemes included, is :mod:`gateway.config`'s).

:func:`problems` finds what the config alone can tell. It reads local files and PATH, and opens
no connection:

* **policy** (:func:`policy_problems`, also logged by ``serve`` at start): a ``key_file`` that
  cannot be read or is empty, one key for two principals (key files included), an access rule
  naming a group no API key has or a principal nobody is (not checked where JWTs, whose subjects
  and groups are unknown in advance, could supply them);
* **connectors**: an OpenAPI spec *file* that is missing or not OpenAPI 3, ``overrides`` /
  ``include`` / ``exclude`` naming an operationId the spec file lacks; a SQLite database file that
  does not exist; a stdio upstream whose ``command`` is not on its PATH or whose ``cwd`` is
  missing; a static resource file that is missing;
* **endpoints** (:func:`endpoint_problems`): a selection rule naming a connector that is not
  configured; a search endpoint's ``embeddings.api_key_env`` naming a variable that is not set.

:func:`config_warnings` finds what is legal but probably not meant (``validate`` prints them, the
gateway logs them at start, neither refuses the config): a stdio principal that no access rule
admits (``mcp-gateway stdio`` would serve it nothing).

A spec given as a URL is fetched only by :func:`deep_check` (``validate --deep``): it starts every
connector it is given as the gateway would (``validate`` gives it each connector whose own entry
passed the checks above, whatever the others' problems) (loads specs, connects to databases and upstreams), pings the Redis
rate-limit backend, opens the audit store and fetches the JWKS, and reports one :class:`Probe`
each. A connector's ``problems()`` fail its probe: an upstream MCP ``overrides`` entry naming a tool
the upstream does not list is one (two overrides onto one name are a schema error already). A
connector that failed reports what its upstream process last wrote to stderr (npm's 404, a Python
traceback's last line), unless its own error already says it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from connectors.base import Connector, Health
from connectors.instrumentation import NO_INSTRUMENTATION
from connectors.mcp.config import MCPConfig
from connectors.openapi import loader
from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.mapping import unknown_operations
from connectors.registry import connector_class
from connectors.sql.config import SQLConfig
from connectors.static.config import StaticConfig
from gateway.config import ConnectorConfig, GatewayConfig, PathKey
from gateway.context import ANONYMOUS
from gateway.oauth.service import probe_token_store, uses_oauth
from gateway.stderr_tail import StderrTail

__all__ = ["Problem", "Probe", "problems", "policy_problems", "connector_problems", "deep_check",
           "endpoint_problems", "config_warnings", "shared_calls_problems"]


@dataclass(frozen=True, slots=True)
class Problem:
    """``path`` is where in the config (``("connectors", 2, "command")``), for :func:`gateway.config.locate`."""

    path: PathKey
    message: str


@dataclass(frozen=True, slots=True)
class Probe:
    """One line of ``validate --deep``: what was tried, whether it worked, and what was found."""

    subject: str
    ok: bool
    detail: str


def problems(config: GatewayConfig) -> list[Problem]:
    return policy_problems(config) + connector_problems(config) + endpoint_problems(config)


def config_warnings(config: GatewayConfig) -> list[Problem]:
    """What is legal but probably not meant (see the module docstring); each is worth a WARNING."""
    return stdio_principal_warnings(config)


def stdio_principal_warnings(config: GatewayConfig) -> list[Problem]:
    """Access is default-deny once any rule exists: ``auth.stdio_principal`` (``local`` unless set)
    that no rule names (``*``, or its name: a stdio principal has no groups) with an ``allow``
    would be served nothing by ``mcp-gateway stdio``, with no error anywhere to say why."""
    if not config.access:
        return []
    name = config.auth.stdio_principal
    if any(rule.allow and ("*" in rule.principals or name in rule.principals) for rule in config.access):
        return []
    return [Problem(("auth", "stdio_principal"),
                    f"no access rule allows anything to the stdio principal {name!r}: `mcp-gateway stdio` "
                    f"would serve it no tools, resources or prompts (access is default-deny once rules exist); "
                    f"name {name!r} (or \"*\") in a rule's principals, or set auth.stdio_principal to a "
                    f"principal a rule allows")]


def endpoint_problems(config: GatewayConfig) -> list[Problem]:
    """What the ``endpoints:`` section gets wrong without the catalog: a rule naming a connector
    that is not configured; a ``search.embeddings.api_key_env`` naming a variable that is not set
    (or empty) here, or a local model asked for that is not there, which ``serve`` would answer by
    ranking that endpoint lexically alone. (A rule matching nothing, a rename colliding or naming nothing served
    need the live catalog: ``validate --deep`` and ``list --endpoint`` report them, from the
    endpoint's :attr:`~gateway.endpoints.view.EndpointView.selection`.)"""
    names = {c.name for c in config.connectors}
    out: list[Problem] = []
    for i, endpoint in enumerate(config.endpoints):
        for j, rule in enumerate(endpoint.select):
            if rule.connector is not None and rule.connector not in names:
                out.append(Problem(("endpoints", i, "select", j, "connector"),
                                   f"no connector is named {rule.connector!r}"))
        embeddings = endpoint.search.embeddings if endpoint.search is not None else None
        if embeddings is not None and embeddings.api_key_env and not os.environ.get(embeddings.api_key_env):
            out.append(Problem(("endpoints", i, "search", "embeddings", "api_key_env"),
                               f"the environment variable {embeddings.api_key_env} is not set (or empty): this "
                               "endpoint would rank lexically alone"))
        out += _local_model_problems(config, i)
    return out


def _local_model_problems(config: GatewayConfig, i: int) -> list[Problem]:
    """A search endpoint that asks for the local model by name (``semantic: local``, or a
    ``local.path``) where there is none: ``serve`` would log an ERROR and rank lexically alone.
    (The files' hashes are checked when the model loads.)"""
    search = config.endpoints[i].search
    if search is None or search.embeddings is not None or search.semantic == "off":
        return []
    if search.semantic == "auto" and search.local.path is None:
        return []  # auto without the model: lexical, on purpose
    from gateway.discovery.local_model import ModelMissing, model_dir

    path = None if search.local.path is None else str(Path(config.base_dir) / search.local.path)
    try:
        model_dir(path)
    except ModelMissing as exc:
        where = ("endpoints", i, "search", "local", "path") if path is not None else ("endpoints", i, "search",
                                                                                        "semantic")
        return [Problem(where, f"{exc}: this endpoint would rank lexically alone")]
    return []


def shared_calls_problems(config: GatewayConfig) -> list[Problem]:
    """Warnings (the config is valid): an upstream MCP server over stdio or legacy SSE whose shared
    session runs several clients' calls together (``shared_calls: concurrent``) cannot say which
    client its sampling, elicitation or roots request is for while they overlap; it gets an error
    then. ``session: per_client`` (or the default ``shared_calls: queued``) avoids it."""
    out = []
    for i, cfg in enumerate(config.connectors):
        if (isinstance(cfg, MCPConfig) and cfg.transport != "streamable_http" and cfg.session == "shared"
                and cfg.shared_calls == "concurrent"):
            out.append(Problem(("connectors", i, "shared_calls"), (
                "sampling, elicitation and roots requests of this upstream fail while calls of several "
                "client sessions are in flight on it; set session: per_client (one upstream session per "
                "client) or shared_calls: queued (one client's calls at a time)")))
    return out


def _resolve(base: Path, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else base / p


# -- policy ----------------------------------------------------------------------------------------

def policy_problems(config: GatewayConfig) -> list[Problem]:
    out: list[Problem] = []
    base = Path(config.base_dir)
    owners: dict[bytes, str] = {}
    for i, key in enumerate(config.auth.api_keys):
        digest = key.digest()
        if key.key_file:
            path = _resolve(base, key.key_file)
            try:
                secret = path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                out.append(Problem(("auth", "api_keys", i, "key_file"), f"cannot read {path}: {exc.strerror or exc}"))
                continue
            if not secret:
                out.append(Problem(("auth", "api_keys", i, "key_file"), f"{path} is empty"))
                continue
            digest = hashlib.sha256(secret.encode()).digest()
        if digest is not None and owners.setdefault(digest, key.name) != key.name:
            out.append(Problem(("auth", "api_keys", i), f"the same key as api key {owners[digest]!r}: a key must "
                                                        "identify one principal"))
    jwt = config.auth.jwt
    groups = {g for key in config.auth.api_keys for g in key.groups}
    names = {key.name for key in config.auth.api_keys} | {config.auth.stdio_principal}
    if not config.auth.enabled:
        names.add(ANONYMOUS.name)
    for i, rule in enumerate(config.access):
        for j, selector in enumerate(rule.principals):
            where = ("access", i, "principals", j)
            if selector == "*":
                continue
            if selector.startswith("group:"):
                if selector[6:] not in groups and not (jwt is not None and jwt.groups_claim):
                    why = "no api key lists it" + (" and auth.jwt has no groups_claim" if jwt is not None else "")
                    out.append(Problem(where, f"no principal has the group {selector[6:]!r} ({why})"))
            elif selector not in names and jwt is None:
                out.append(Problem(where, f"no principal is named {selector!r} (known: {', '.join(sorted(names))})"))
    return out


# -- connectors --------------------------------------------------------------------------------------

def connector_problems(config: GatewayConfig, indices: Sequence[int] | None = None) -> list[Problem]:
    """``indices``: each connector's position in the file, when ``config`` holds only some of its
    entries (:class:`gateway.config.PartialConfig`); problems name that position."""
    out: list[Problem] = []
    base = Path(config.base_dir)
    for i, cfg in zip(range(len(config.connectors)) if indices is None else indices, config.connectors, strict=True):
        where: PathKey = ("connectors", i)
        if isinstance(cfg, OpenAPIConfig):
            out += _openapi(cfg, base, where)
        elif isinstance(cfg, SQLConfig):
            out += _sqlite(cfg, base, where)
        elif isinstance(cfg, MCPConfig):
            out += _stdio(cfg, base, where)
        elif isinstance(cfg, StaticConfig):
            out += [Problem(where + ("resources", j, "path"), f"file not found: {_resolve(base, r.path)}")
                    for j, r in enumerate(cfg.resources) if r.path and not _resolve(base, r.path).is_file()]
    return out


def _openapi(cfg: OpenAPIConfig, base: Path, where: PathKey) -> list[Problem]:
    """A spec file is read (a URL waits for ``--deep``): it exists, is OpenAPI 3, and has every
    operationId the config names."""
    if loader.is_url(cfg.spec):
        return []
    path = _resolve(base, cfg.spec[7:] if cfg.spec.startswith("file://") else cfg.spec)
    try:
        if path.stat().st_size > cfg.max_spec_bytes:
            return [Problem(where + ("spec",), f"{path} is larger than max_spec_bytes={cfg.max_spec_bytes}")]
        raw = path.read_bytes()
    except OSError as exc:
        return [Problem(where + ("spec",), f"cannot read the spec file {path}: {exc.strerror or exc}")]
    try:
        doc = loader.parse_document(raw, str(path))
        loader.check_version(doc, str(path))
    except loader.SpecError as exc:
        return [Problem(where + ("spec",), str(exc))]
    return [Problem(where + path, f"the spec has no operation with operationId {name!r}")
            for path, name in unknown_operations(doc, cfg)]


def _sqlite(cfg: SQLConfig, base: Path, where: PathKey) -> list[Problem]:
    if cfg.dialect != "sqlite":
        return []
    from sqlalchemy.engine import make_url

    database = make_url(cfg.url).database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return [Problem(where + ("url",), "sqlite url must name a database file (sqlite+aiosqlite:///path/to/file.db)")]
    path = _resolve(base, database)
    return [] if path.is_file() else [Problem(where + ("url",), f"sqlite database file not found: {path}")]


def _stdio(cfg: MCPConfig, base: Path, where: PathKey) -> list[Problem]:
    """The child's command as the gateway will start it: in ``cwd`` (default: the config file's
    folder), a path with a slash relative to the config file, a bare name looked up on its PATH."""
    if cfg.transport != "stdio" or not cfg.command:
        return []
    out = []
    if cfg.cwd is not None and not _resolve(base, cfg.cwd).is_dir():
        out.append(Problem(where + ("cwd",), f"{_resolve(base, cfg.cwd)} is not a folder"))
    command = cfg.command
    if "/" in command:
        path = _resolve(base, command)
        if not (path.is_file() and os.access(path, os.X_OK)):
            out.append(Problem(where + ("command",), f"{path} is not an executable file"))
    else:
        search = cfg.env.get("PATH") or os.environ.get("PATH", os.defpath)
        if shutil.which(command, path=search) is None:
            out.append(Problem(where + ("command",), f"command {command!r} is not on PATH ({search})"))
    return out


# -- validate --deep ----------------------------------------------------------------------------------

class _Silent:
    """The ConnectorEvents of a probe: nobody listens."""

    def components_changed(self, announced: frozenset[str] = frozenset()) -> None:
        pass

    def resource_updated(self, uri: str) -> None:
        pass

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        pass

    def health_changed(self, health: Health) -> None:
        pass


async def deep_check(config: GatewayConfig, timeout_s: float = 60.0, connectors_only: bool = False) -> list[Probe]:
    """Start each connector and reach each backend the config names, all at once;
    ``connectors_only``: the connectors alone (the rest of ``config`` is not the file's)."""
    probes = [_probe_connector(config, cfg, timeout_s) for cfg in config.connectors]
    if connectors_only:
        return list(await asyncio.gather(*probes))
    if config.rate_limits.backend != "memory":
        probes.append(_probe_redis(config, timeout_s))
    if config.audit.enabled and config.audit.store.strip() not in ("", "none"):
        probes.append(_probe_audit(config, timeout_s))
    if config.auth.jwt is not None:
        probes.append(_probe_jwks(config.auth.jwt.jwks_url, timeout_s))
    if uses_oauth(config):
        probes.append(_probe_oauth(config))
    return list(await asyncio.gather(*probes))


async def _probe_oauth(config: GatewayConfig) -> Probe:
    ok, detail = await probe_token_store(config)  # the key, a file sealed with another one, Redis
    return Probe("oauth token store", ok, detail)


def _counts(connector: Connector) -> str:
    parts = [(len(connector.tools()), "tools"), (len(connector.resources()), "resources"),
             (len(connector.resource_templates()), "resource templates"), (len(connector.prompts()), "prompts")]
    return ", ".join(f"{n} {what[:-1] if n == 1 else what}" for n, what in parts if n) or "nothing to serve"


async def _probe_connector(config: GatewayConfig, cfg: ConnectorConfig, timeout_s: float) -> Probe:
    subject = f"connector {cfg.name} ({cfg.type})"
    connector = connector_class(cfg.type)(cfg, base_dir=Path(config.base_dir))
    with StderrTail(cfg) as stderr:
        try:
            async with asyncio.timeout(timeout_s):
                await connector.start(_Silent(), NO_INSTRUMENTATION)
            health = connector.health()
            if not health.up:
                return Probe(subject, False, stderr.explain(f"down: {health.detail or 'no detail'}"))
            found = connector.problems()
            if found:
                return Probe(subject, False, "; ".join(found))
            return Probe(subject, True, _counts(connector))
        except TimeoutError:
            return Probe(subject, False, stderr.explain(f"did not start within {timeout_s:g}s"))
        except Exception as exc:
            return Probe(subject, False, stderr.explain(str(exc) or type(exc).__name__))
        finally:
            try:
                await connector.stop()
            except Exception:  # noqa: S110 - a probe reports the start; stopping what half-started may fail too
                pass


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=netloc[0].split(":", 1)[0] + ":***@" + netloc[1]))


async def _probe_redis(config: GatewayConfig, timeout_s: float) -> Probe:
    from gateway.filters.ratelimit import RedisBackend

    subject = f"rate-limit backend {_redacted(config.rate_limits.backend)}"
    # The probe asks "reachable?" within the deep check's own budget, not within the serving
    # decision timeout (tens of ms), which a busy host or a first connection can exceed.
    backend = RedisBackend(config.rate_limits.backend, config.rate_limits.redis_prefix, timeout_s=timeout_s)
    try:
        async with asyncio.timeout(timeout_s):
            await backend.check([], [])  # one round trip through the limiter's own script
        return Probe(subject, True, "reachable")
    except Exception as exc:
        return Probe(subject, False, str(exc) or type(exc).__name__)
    finally:
        await backend.close()


async def _probe_audit(config: GatewayConfig, timeout_s: float) -> Probe:
    from sqlalchemy import text

    from gateway.audit.store import AuditStore

    subject = f"audit store {_redacted(config.audit.store)}"
    try:
        store = AuditStore(config.audit.store, config.base_dir)
    except ValueError as exc:
        return Probe(subject, False, str(exc))
    try:
        async with asyncio.timeout(timeout_s), store.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return Probe(subject, True, "reachable")
    except Exception as exc:
        return Probe(subject, False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    finally:
        await store.close()


async def _probe_jwks(url: str, timeout_s: float) -> Probe:
    import aiohttp

    subject = f"JWKS {url}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http, \
                http.get(url, headers={"Accept": "application/json"}) as resp:
            if resp.status != 200:
                return Probe(subject, False, f"HTTP {resp.status}")
            keys = (await resp.json(content_type=None)).get("keys")
        if not isinstance(keys, list) or not keys:
            return Probe(subject, False, "the document has no keys")
        return Probe(subject, True, f"{len(keys)} keys")
    except Exception as exc:
        return Probe(subject, False, str(exc) or type(exc).__name__)

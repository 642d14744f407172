"""gateway.yaml → typed, validated, frozen configuration.

Loading is three steps: YAML is composed into nodes (so every value's line is known), ``${ENV}`` and
``${ENV:-default}`` are interpolated inside string values, and pydantic validates the result.
Each connector entry is validated by the model of its own ``type`` (found through
:mod:`connectors.registry`, which imports no driver to do it; the contract ``Model`` and
``ConnectorConfig`` live in :mod:`connectors.config`). Every problem is reported as
``connectors[2].spec (line 14): message``; :class:`ConfigError` carries all of them.

Models are frozen, so ``==`` between two loads tells hot reload which connectors changed. The
top-level ``egress:`` block is folded into each connector entry whose kind accepts one (the
connector's own keys win), so a connector still receives only its own config, and a change of the
gateway-wide block restarts exactly the connectors it applies to.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from sqlalchemy.engine import make_url

from connectors.config import ConnectorConfig, EgressConfig, Model
from connectors.registry import KINDS, config_model
from gateway.config_sections import (
    GatewaySection,
    HttpConfig,
    NamesConfig,
    RelayLimits,
    ServerRequestLimits,
    StartRetry,
)
from gateway.endpoints.config import EndpointList
from gateway.oauth.config import GatewayOAuthConfig, identity_problems
from gateway.protocol.errors import ConfigError

__all__ = [
    "Model",
    "HttpConfig",
    "ServerRequestLimits",
    "NamesConfig",
    "RelayLimits",
    "StartRetry",
    "GatewaySection",
    "ConnectorConfig",
    "ApiKeyConfig",
    "JwtConfig",
    "AuthConfig",
    "StatusConfig",
    "AccessRule",
    "RateLimitRule",
    "RateLimitConfig",
    "StateConfig",
    "AuditConfig",
    "TelemetryConfig",
    "EgressConfig",
    "GatewayConfig",
    "load_config",
    "load_partial",
    "parse_config",
    "parse_partial",
    "PartialConfig",
    "interpolate",
    "locate",
    "PathKey",
]


def _http_url(value: str, what: str) -> str:
    """``value`` if it is an http(s) URL with a host; a clear error otherwise."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{what} must be an http:// or https:// URL")
    return value


class ApiKeyConfig(Model):
    name: str
    key_sha256: str | None = None
    key: str | None = None
    key_file: str | None = None
    groups: tuple[str, ...] = ()

    @field_validator("key_sha256")
    @classmethod
    def _hex_digest(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", value.strip()):
            raise ValueError("key_sha256 must be 64 hexadecimal characters: the SHA-256 of the key "
                             "(printf %s \"$KEY\" | sha256sum)")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ApiKeyConfig:
        if sum(1 for v in (self.key_sha256, self.key, self.key_file) if v) != 1:
            raise ValueError("set exactly one of key_sha256, key, key_file")
        return self

    def digest(self) -> bytes | None:
        """The SHA-256 of the key when the config alone tells it (not for ``key_file``)."""
        if self.key_sha256:
            return bytes.fromhex(self.key_sha256.strip())
        return hashlib.sha256(self.key.encode()).digest() if self.key else None


class JwtConfig(Model):
    jwks_url: str
    issuer: str | None = None
    audience: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    principal_claim: str = "sub"
    groups_claim: str | None = None
    leeway_s: float = 30.0
    jwks_cache_s: float = 300.0
    # Unknown kid (key rotation) forces a refetch, but no more often than this.
    jwks_min_refresh_s: float = Field(10.0, ge=0)

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url(cls, value: str) -> str:
        return _http_url(value, "jwks_url")

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # "none" and HMAC are never accepted (a public JWKS key must not become an HMAC secret).
        if not set(value) & {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                             "EdDSA"}:
            raise ValueError("algorithms must include an asymmetric algorithm (RS256, ES256, EdDSA ...)")
        return value


class AuthConfig(Model):
    api_keys: tuple[ApiKeyConfig, ...] = ()
    jwt: JwtConfig | None = None
    stdio_principal: str = "local"
    # OAuth 2.0 protected-resource metadata (RFC 9728) served at /.well-known/oauth-protected-resource.
    resource: str | None = None
    authorization_servers: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.api_keys) or self.jwt is not None

    @model_validator(mode="after")
    def _one_principal_per_key(self) -> AuthConfig:
        # The same key for two principals: a request would get whichever matches last.
        seen: dict[bytes, str] = {}
        for entry in self.api_keys:
            digest = entry.digest()
            if digest is None:
                continue
            other = seen.setdefault(digest, entry.name)
            if other != entry.name:
                raise ValueError(f"api_keys {other!r} and {entry.name!r} have the same key: "
                                 "a key must identify one principal")
        return self


class AccessRule(Model):
    principals: tuple[str, ...]
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


class RateLimitRule(Model):
    scope: Literal["principal", "tool", "connector", "global"]
    match: str = "*"
    rate: str  # "10/s", "600/min", "1000/h"
    burst: int | None = Field(None, ge=1)
    # Split a tool/connector/global bucket per principal (a principal-scope rule always is).
    per_principal: bool = False

    @field_validator("rate")
    @classmethod
    def _rate_format(cls, value: str) -> str:
        if not re.fullmatch(r"\s*\d+(\.\d+)?\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*", value):
            raise ValueError("rate must look like 10/s, 600/min or 1000/h")
        return value


class RateLimitConfig(Model):
    backend: str = "memory"  # memory | redis://host:port/db (rediss:// with TLS, unix:///path.sock)
    on_backend_error: Literal["open", "closed"] = "open"
    rules: tuple[RateLimitRule, ...] = ()
    # Redis key prefix: gateways sharing a prefix (and rules) share budgets.
    redis_prefix: str = "gw:rl"
    # One Redis decision (connect, script) may take this long before on_backend_error applies.
    redis_timeout_s: float = Field(0.05, gt=0, le=10)
    # After this many failed decisions in a row the breaker opens: on_backend_error applies at
    # once, without asking Redis, until one probe after breaker_cooldown_s succeeds.
    breaker_failures: int = Field(3, ge=1)
    breaker_cooldown_s: float = Field(2.0, gt=0)

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        if value != "memory" and not (urlsplit(value).scheme in ("redis", "rediss", "unix") and "://" in value):
            raise ValueError("backend must be memory, redis://HOST:PORT/DB, rediss://... or unix:///PATH")
        return value


class AuditConfig(Model):
    enabled: bool = True
    store: str = "sqlite:///./audit.db"
    redact: tuple[str, ...] = ("password", "token", "secret", "authorization", "api_key")
    jsonl: str | None = None  # stdout | stderr | a file path (under stdio, stdout means stderr)
    retention_days: int = Field(90, ge=1)
    queue_size: int = Field(100_000, ge=100)
    batch_size: int = Field(500, ge=1)
    flush_interval_s: float = Field(0.2, gt=0)
    # Where events go while the store is down (JSON lines, replayed into the store when it is back).
    spill_path: str = "./audit.spill.jsonl"
    # batch: events are committed in batches after their responses (a crash loses the last
    # flush_interval_s). strict: a response waits until its event is committed to the store or
    # fsync'd to the spill file (group commit: concurrent requests share one commit).
    durability: Literal["batch", "strict"] = "batch"
    # Key of each event's arguments_digest (HMAC-SHA256 of the unredacted arguments: proves what
    # ran without showing a secret). Unset: gateway.cursor_secret; neither set: no digest.
    digest_key: str | None = None

    @field_validator("store")
    @classmethod
    def _store(cls, value: str) -> str:
        text = value.strip()
        if text in ("", "none"):
            return value
        try:
            backend = make_url("postgresql" + text[len("postgres"):] if text.startswith("postgres://") else text)
            name = backend.get_backend_name()
        except Exception:
            name = ""
        if name not in ("sqlite", "postgresql"):  # never echo the URL: it may hold a password
            raise ValueError("store must be sqlite:///PATH or postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DB "
                             "(postgres:// and postgresql:// are read as postgresql+asyncpg://), or none")
        return value


class TelemetryConfig(Model):
    metrics: bool = True
    metrics_port: int | None = Field(None, ge=0, le=65535)
    # Opt-in "who": a principal (or group) label on requests_total and the refusal counters; past
    # metrics_max_principals distinct values a new one is reported as _other.
    metrics_principal_label: Literal["none", "principal", "group"] = "none"
    metrics_max_principals: int = Field(50, ge=1, le=1000)
    otlp_endpoint: str | None = None
    service_name: str = "mcp-gateway"
    trace_sample_ratio: float = Field(1.0, ge=0, le=1)

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp(cls, value: str | None) -> str | None:
        # Empty means off too (``${OTEL_EXPORTER_OTLP_ENDPOINT:-}`` in the shipped configs).
        return value if not value else _http_url(value, "otlp_endpoint (OTLP/HTTP)")


class StateConfig(Model):
    """Where what replicas share lives: sessions of older clients, routing between replicas.

    ``memory`` (one process: nothing is shared) or ``redis://host:port/db`` (``rediss://`` with TLS,
    ``unix:///path.sock``): every replica pointing at the same Redis and prefix serves every session."""

    store: str = "memory"
    # Redis key and channel prefix: replicas sharing it share sessions.
    redis_prefix: str = "gw:st"
    # One Redis operation (connect included) may take this long; then the request it serves fails.
    redis_timeout_s: float = Field(0.5, gt=0, le=10)

    @field_validator("store")
    @classmethod
    def _store(cls, value: str) -> str:
        if value != "memory" and not (urlsplit(value).scheme in ("redis", "rediss", "unix") and "://" in value):
            raise ValueError("store must be memory, redis://HOST:PORT/DB, rediss://... or unix:///PATH")
        return value

    @property
    def shared(self) -> bool:
        return self.store != "memory"


class StatusConfig(Model):
    """``/status``, the operator's HTML page: on the metrics port when it has one (no credential,
    like its ``/readyz``); on the main port to a caller whose principal matches ``principals``
    (``*``, ``group:<g>`` or a name) when auth is on, to anyone when auth is off."""

    enabled: bool = True
    principals: tuple[str, ...] = ()


class GatewayConfig(Model):
    gateway: GatewaySection = GatewaySection()
    connectors: tuple[ConnectorConfig, ...] = ()
    auth: AuthConfig = AuthConfig()
    access: tuple[AccessRule, ...] = ()
    rate_limits: RateLimitConfig = RateLimitConfig()
    audit: AuditConfig = AuditConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    state: StateConfig = StateConfig()
    status: StatusConfig = StatusConfig()
    # Curated virtual servers at /mcp/{name} (gateway.endpoints.config)
    endpoints: EndpointList = ()
    # The default `egress:` of every connector kind that has one (openapi; mcp over HTTP): a
    # connector's own block replaces the keys it sets and inherits the others.
    egress: EgressConfig = EgressConfig()
    # Upstream OAuth, the gateway's side (gateway/oauth/config.py): token store, routes, client metadata.
    oauth: GatewayOAuthConfig = GatewayOAuthConfig()
    # Where the file was read from; relative paths in connector configs resolve against it.
    base_dir: str = "."

    @model_validator(mode="after")
    def _replicas_share_a_secret(self) -> GatewayConfig:
        # Replicas sharing sessions serve each other's requests: a cursor or requestState minted by
        # one must verify on all, which a per-process random key cannot do.
        if self.state.shared and not self.gateway.cursor_secret:
            raise ValueError("state.store is shared by replicas: set gateway.cursor_secret (the same on every "
                             "replica) so each accepts the cursors and request states the others issue")
        return self

    def connector(self, name: str) -> ConnectorConfig | None:
        return next((c for c in self.connectors if c.name == name), None)


# -- YAML with line numbers ---------------------------------------------------------------------

PathKey = tuple[str | int, ...]


def _lines(node: yaml.Node, path: PathKey, out: dict[PathKey, int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            out[path + (key,)] = key_node.start_mark.line + 1
            _lines(value_node, path + (key,), out)
            out[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, path + (i,), out)


def _format_path(path: PathKey) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def locate(path: PathKey, lines: Mapping[PathKey, int]) -> tuple[str, int | None]:
    """``("connectors", 2, "spec")`` → ``("connectors[2].spec", its line)``: for problems found
    after loading (``load_config(..., lines=...)`` fills ``lines``)."""
    return _format_path(path), _line_for(path, dict(lines))


def _line_for(path: PathKey, lines: dict[PathKey, int]) -> int | None:
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(value: Any, env: Mapping[str, str] | None = None, path: PathKey = (),
                lines: dict[PathKey, int] | None = None) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string; ``$${`` escapes a literal ``${``.
    Every variable that is not set is reported, all in one :class:`ConfigError`."""
    variables: Mapping[str, str] = os.environ if env is None else env
    errors: list[ConfigError] = []
    out = _interpolate(value, variables, path, lines, errors)
    _raise(errors)
    return out


def _interpolate(value: Any, env: Mapping[str, str], path: PathKey, lines: dict[PathKey, int] | None,
                 errors: list[ConfigError]) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, env, path + (k,), lines, errors) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, path + (i,), lines, errors) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def repl(match: re.Match[str]) -> str:
        var, default = match.group(1), match.group(2)
        if var in env and (env[var] != "" or default is None):
            return env[var]
        if default is not None:
            return default
        errors.append(ConfigError(f"environment variable {var} is not set (use ${{{var}:-default}} for a default)",
                                  _format_path(path), _line_for(path, lines or {})))
        return ""

    escaped = value.replace("$${", "\x00")
    return _ENV.sub(repl, escaped).replace("\x00", "${")


def _errors_from(exc: ValidationError, prefix: PathKey, lines: dict[PathKey, int]) -> list[ConfigError]:
    out = []
    for err in exc.errors():
        loc = prefix + tuple(p for p in err["loc"] if isinstance(p, (str, int)))
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["type"] == "value_error":
            message = message.removeprefix("Value error, ")  # our own validators' words, as written
        out.append(ConfigError(message, _format_path(loc), _line_for(loc, lines)))
    return out


def _raise(errors: list[ConfigError]) -> None:
    if not errors:
        return
    first = errors[0]
    if len(errors) > 1:
        combined = ConfigError(first.message, first.path, first.line)
        combined.args = ("\n".join(str(e) for e in errors),)
        combined.errors = errors  # type: ignore[attr-defined]
        raise combined
    raise first


def parse_config(text: str, base_dir: str | Path = ".", env: dict[str, str] | None = None,
                 lines: dict[PathKey, int] | None = None) -> GatewayConfig:
    """Validate config text. Raises :class:`ConfigError` naming the path and line of each problem;
    ``lines``, when given, receives the line of every path (see :func:`locate`)."""
    partial = parse_partial(text, base_dir, env, lines)
    _raise(list(partial.errors))
    return partial.config


@dataclass(frozen=True, slots=True)
class PartialConfig:
    """What a file with schema errors still tells (``validate`` checks it, to report every problem
    in one run): ``config`` holds the connector entries that are valid on their own (``indices``:
    each one's position in the file) and, when ``complete``, every other section as written; when
    not, the other sections are their defaults and say nothing about the file. ``errors`` are the
    schema errors (none: ``config`` is the whole, valid config)."""

    config: GatewayConfig
    complete: bool
    indices: tuple[int, ...]
    errors: tuple[ConfigError, ...]


def parse_partial(text: str, base_dir: str | Path = ".", env: dict[str, str] | None = None,
                  lines: dict[PathKey, int] | None = None) -> PartialConfig:
    """:func:`parse_config` without raising for schema errors (they are returned, with what is
    valid despite them); what makes the file unreadable as a whole (YAML, an unset variable, a top
    level that is not a mapping) still raises :class:`ConfigError`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"invalid YAML: {getattr(exc, 'problem', exc)}", "",
                          mark.line + 1 if mark else None) from None
    if node is None:
        raise ConfigError("the config file is empty")
    lines = {} if lines is None else lines
    _lines(node, (), lines)
    raw = yaml.safe_load(text)
    if not isinstance(raw, dict):
        raise ConfigError("the top level must be a mapping", "", 1)
    raw = interpolate(raw, env, (), lines)

    errors: list[ConfigError] = []
    connectors: list[ConnectorConfig] = []
    indices: list[int] = []
    raw_connectors = raw.get("connectors") or []
    if not isinstance(raw_connectors, list):
        _raise([ConfigError("must be a list of connectors", "connectors", _line_for(("connectors",), lines))])
    egress_default = _egress_default(raw.get("egress"))
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw_connectors):
        where: PathKey = ("connectors", i)
        if not isinstance(entry, dict):
            errors.append(ConfigError("must be a mapping", _format_path(where), _line_for(where, lines)))
            continue
        kind = entry.get("type")
        if kind not in KINDS:
            errors.append(ConfigError(f"unknown connector type {kind!r} (expected one of {', '.join(KINDS)})",
                                      _format_path(where + ("type",)), _line_for(where + ("type",), lines)))
            continue
        model = config_model(kind)
        if egress_default and "egress" in model.model_fields:
            own = entry.get("egress")
            entry = {**entry, "egress": {**egress_default, **own} if isinstance(own, dict) else
                     egress_default if own is None else own}
        try:
            cfg = model.model_validate(entry)
        except ValidationError as exc:
            errors.extend(_errors_from(exc, where, lines))
            continue
        if cfg.name in seen:
            errors.append(ConfigError(f"duplicate connector name {cfg.name!r} (also connectors[{seen[cfg.name]}])",
                                      _format_path(where + ("name",)), _line_for(where + ("name",), lines)))
        seen[cfg.name] = i
        connectors.append(cfg)
        indices.append(i)
    rest = {k: v for k, v in raw.items() if k != "connectors"}
    complete = True
    try:
        config = GatewayConfig.model_validate({**rest, "base_dir": str(base_dir)})
    except ValidationError as exc:
        errors.extend(_errors_from(exc, (), lines))
        config, complete = GatewayConfig(base_dir=str(base_dir)), False
    errors.extend(ConfigError(m, _format_path(p), _line_for(p, lines)) for p, m in identity_problems(raw))
    return PartialConfig(config.model_copy(update={"connectors": tuple(connectors)}), complete, tuple(indices),
                         tuple(errors))


def _egress_default(raw: Any) -> dict[str, Any]:
    """The top-level ``egress`` keys to fold into connector entries ({} when absent or invalid:
    an invalid block is reported once, at its own path, by the model of the whole file)."""
    if not isinstance(raw, dict):
        return {}
    try:
        EgressConfig.model_validate(raw)
    except ValidationError:
        return {}
    return raw


def load_config(path: str | Path, env: dict[str, str] | None = None,
                lines: dict[PathKey, int] | None = None) -> GatewayConfig:
    """Read and validate a config file; relative paths inside resolve against its folder."""
    partial = load_partial(path, env, lines)
    _raise(list(partial.errors))
    return partial.config


def load_partial(path: str | Path, env: dict[str, str] | None = None,
                 lines: dict[PathKey, int] | None = None) -> PartialConfig:
    """:func:`load_config` as :func:`parse_partial` (schema errors returned, not raised)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {p}: {exc.strerror or exc}") from None
    return parse_partial(text, base_dir=p.resolve().parent, env=env, lines=lines)

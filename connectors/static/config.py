"""Config model of a ``type: static`` connector entry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from connectors.config import ConnectorConfig, Model

__all__ = ["StaticConfig", "StaticPrompt", "StaticPromptArgument", "StaticMessage", "StaticResource"]


class StaticPromptArgument(Model):
    name: str
    description: str | None = None
    required: bool = False


class StaticMessage(Model):
    role: Literal["user", "assistant"] = "user"
    text: str


class StaticPrompt(Model):
    name: str = Field(min_length=1)
    title: str | None = None
    description: str | None = None
    arguments: tuple[StaticPromptArgument, ...] = ()
    messages: tuple[StaticMessage, ...] = Field(min_length=1)


class StaticResource(Model):
    uri: str = Field(min_length=1)
    name: str = Field(min_length=1)
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    text: str | None = None
    path: str | None = None  # read at start-up, relative to the config file

    @model_validator(mode="after")
    def _one_source(self) -> StaticResource:
        if (self.text is None) == (self.path is None):
            raise ValueError("give exactly one of text or path")
        return self


class StaticConfig(ConnectorConfig):
    type: Literal["static"]
    prompts: tuple[StaticPrompt, ...] = ()
    resources: tuple[StaticResource, ...] = ()

"""The config contract of a connector: the fields every ``connectors:`` entry has.

Each kind validates its entry with its own model, a subclass of :class:`ConnectorConfig`, defined
in that kind's ``config.py`` (pydantic only: no driver is imported to validate a file). The app's
config module (:mod:`gateway.config`) builds on these two classes; nothing here knows the app.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Model", "ConnectorConfig", "NAME_PATTERN"]

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,40}$"


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values are immutable (so ``==``
    between two loads tells hot reload which connectors changed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConnectorConfig(Model):
    """Fields every connector entry has; each kind's model subclasses this one."""

    name: str = Field(pattern=NAME_PATTERN)
    type: str
    # Public names are prefix + local name; None means "{name}_", "" means no prefix.
    prefix: str | None = None
    timeout_s: float | None = Field(None, gt=0)
    max_concurrency: int | None = Field(None, ge=1)

    @property
    def public_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

"""Public names: ``{prefix}{local}``, valid for MCP clients, shortened deterministically.

MCP clients accept tool and prompt names matching ``^[A-Za-z0-9_.-]{1,64}$``. Characters outside
that set become ``_``; a name longer than 64 keeps its first 55 characters plus ``_`` and an
8-character hash of the full original, so the same input always gives the same public name and two
long names sharing a prefix stay distinct.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["NAME_RE", "MAX_NAME", "sanitize", "public_name", "is_valid_name"]

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def is_valid_name(name: str) -> bool:
    return bool(NAME_RE.match(name))


def sanitize(name: str) -> str:
    """Replace characters clients reject; never returns an empty string."""
    cleaned = _BAD.sub("_", name)
    return cleaned or "_"


def public_name(prefix: str, local: str) -> str:
    """``prefix + local``, sanitised, shortened with a stable hash when over 64 characters."""
    full = sanitize(prefix + local)
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256((prefix + local).encode()).hexdigest()[:8]
    return f"{full[: MAX_NAME - 9]}_{digest}"

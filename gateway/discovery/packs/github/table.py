"""The GitHub pack's vocabulary map: :data:`GITHUB` and :func:`add`, which its modules call."""

from __future__ import annotations

from gateway.discovery.lexicon import Vocabulary

__all__ = ["GITHUB", "add"]

GITHUB = Vocabulary()
add = GITHUB.add

"""The GitHub pack as the GitHub labelled sets and sense tests use it: queries over GitHub's
catalog are read with ``packs: [github]`` (docs/discovery.md, "Domain packs")."""

from __future__ import annotations

from functools import partial

from gateway.discovery import query
from gateway.discovery.packs import lexicon

__all__ = ["GITHUB", "PACKS", "parse", "expand"]

PACKS = ("github",)
GITHUB = lexicon(PACKS)
parse = partial(query.parse, lexicon=GITHUB)
expand = partial(query.expand, lexicon=GITHUB)

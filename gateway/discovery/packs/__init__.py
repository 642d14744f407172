"""Domain packs: the knowledge of one API's world, enabled per endpoint.

``search: {packs: [github]}`` on a ``discovery: search`` endpoint reads its queries with the
general core (:mod:`gateway.discovery.vocabulary`, :mod:`gateway.discovery.fillers`, the rules of
:mod:`gateway.discovery.senses`) plus each named pack (a :class:`~gateway.discovery.lexicon.Pack`:
data only). An endpoint that enables none gets the core alone: no pack is ever applied to a
catalog that did not ask for it. :data:`KNOWN` names the packs (the config validates against it);
:func:`lexicon` builds, once per combination, the :class:`~gateway.discovery.lexicon.Lexicon` a
query is read with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache

from gateway.discovery.lexicon import Lexicon, Pack

__all__ = ["KNOWN", "lexicon", "load", "core"]

def _github() -> Pack:
    from gateway.discovery.packs.github import PACK

    return PACK


# Pack name → its loader (an explicit import, run when an endpoint enables the pack).
_LOADERS: dict[str, Callable[[], Pack]] = {"github": _github}
KNOWN: tuple[str, ...] = tuple(sorted(_LOADERS))


def load(name: str) -> Pack:
    """The pack called *name* (ValueError naming the known ones if there is none)."""
    if name not in _LOADERS:
        raise ValueError(f"unknown search pack {name!r}; known packs: {', '.join(KNOWN)}")
    return _LOADERS[name]()


@cache
def _lexicon(names: tuple[str, ...]) -> Lexicon:
    from gateway.discovery.arguments import HINTS
    from gateway.discovery.core_senses import CORE_SENSES
    from gateway.discovery.soft import SOFT
    from gateway.discovery.vocabulary import SYNONYMS

    return Lexicon(SYNONYMS, SOFT, HINTS, tuple(load(n) for n in names), CORE_SENSES)


def lexicon(names: Iterable[str] = ()) -> Lexicon:
    """The core merged with the packs *names*, in order (the same object for the same names)."""
    return _lexicon(tuple(dict.fromkeys(names)))


def core() -> Lexicon:
    """The core alone: what an endpoint that enabled no pack reads queries with."""
    return _lexicon(())

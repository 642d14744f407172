"""How people ask → how API descriptions say it: the core vocabulary map, true of any API.

Callers say "remove", "show all", "turn off"; specs say "delete", "list", "disable".
:data:`SYNONYMS` maps each caller's word or phrase (a key) to the spec words that mean the same
(its alternatives); :mod:`gateway.discovery.query` reads a query with it, merged with the maps of
the domain packs an endpoint enabled (:mod:`gateway.discovery.packs`).

Only English that is not about one API belongs here: :mod:`.verbs` (how an action is asked for)
:mod:`.nouns` (people, accounts, deployments, logs ...: paraphrases any API's callers use) and
:mod:`.general` (time, spelling). A word whose meaning is one API's ("ticket" → issue,
"project" → repository, "move" → transfer) is that API's pack's, never the core's. Keys are
lower-case word sequences as :func:`gateway.discovery.words.split_words` yields them; a key is also
found in an inflected form (deleting, removes). A key added to the map must not come from a
measurement-only labelled set (see docs/discovery.md, "How it is measured").
"""

from __future__ import annotations

# Importing a module adds its entries to the map.
from gateway.discovery.vocabulary import general, nouns, verbs  # noqa: F401
from gateway.discovery.vocabulary.table import SYNONYMS

__all__ = ["SYNONYMS"]

"""How people ask → how API descriptions say it: the vocabulary map, by domain.

Callers say "PR", "ticket", "pipeline", "ship"; specs say "pull request", "issue", "workflow run",
"release". :data:`SYNONYMS` maps each caller's word or phrase (a key) to the spec words that mean
the same (its alternatives); :mod:`gateway.discovery.query` reads a query with it.

The map is a general DevOps/API vocabulary (source hosting, CI, tickets, deploys, people, verbs,
phrasal verbs), not a list of one spec's operation names. It is kept by domain, one module each:
:mod:`.code` (repositories, pull requests, commits, releases), :mod:`.tickets`, :mod:`.ci`
(workflows, deployments, packages, Pages), :mod:`.security` (alerts, keys, secrets, rules),
:mod:`.people`, :mod:`.verbs` (how an action is asked for) and :mod:`.general`. Keys are lower-case
word sequences as :func:`gateway.discovery.words.split_words` yields them; a key is also found in
an inflected form (tickets, deploying). A key added to the map must not come from the
measurement-only labelled sets (tests/discovery/test_recall.py checks it; see docs/discovery.md,
"How it is measured").
"""

from __future__ import annotations

# Importing a domain module adds its entries to the map.
from gateway.discovery.vocabulary import ci, code, general, people, security, tickets, verbs  # noqa: F401
from gateway.discovery.vocabulary.table import SYNONYMS

__all__ = ["SYNONYMS"]

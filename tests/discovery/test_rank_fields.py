"""The re-rank's batched field matching (:func:`gateway.discovery.rank._best_fields`) gives each
candidate exactly what :func:`gateway.discovery.rank._match` gives it, on the GitHub catalog's
tools and the concepts of a tuned set's queries (every weighting, scoped or not)."""

from __future__ import annotations

from gateway.discovery import SearchIndex
from gateway.discovery.query import parse
from gateway.discovery.rank import (
    _ANSWER_WEIGHTS,
    _QUESTION_WEIGHTS,
    _STATE_WEIGHTS,
    FIELD_WEIGHTS,
    _best_fields,
    _match,
    _phrase,
)
from tests.discovery.labelled import BLIND2, github_corpus, load_tasks


def test_batched_field_matching_is_match_for_every_candidate() -> None:
    index = SearchIndex(("github",))
    index.sync(github_corpus("").docs)
    profs = list(index._profiles.values())
    checked = 0
    for task in load_tasks(BLIND2)[:40]:
        parsed = parse(task["query"], lexicon=index.lexicon)
        for concept in parsed.concepts + parsed.soft:
            phrases = [_phrase(p) for p in concept.phrases] + [()]  # a phrase of no word matches nowhere
            for weights in (FIELD_WEIGHTS, _QUESTION_WEIGHTS, _STATE_WEIGHTS, _ANSWER_WEIGHTS):
                for scoped in (True, False):
                    assert _best_fields(profs, phrases, weights, scoped) == \
                        [_match(p, phrases, weights, scoped) for p in profs], concept
                    checked += 1
    assert checked > 500

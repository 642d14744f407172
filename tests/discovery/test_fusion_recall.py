"""Hybrid ranking with a real model, offline: the fusion against its parts on every labelled set.

The vectors are all-MiniLM-L6-v2's, committed under ``tests/data/discovery/vectors`` (made by
``bench/discovery_vectors.py``; a tool whose served text changed since fails the run with the
command that regenerates them). ``tests/discovery/fusion_eval.py`` serves every catalog as the
bench does (one gateway, ``discovery: search``, the catalog's packs) and ranks each task four ways:
plain BM25, the lexical ranker alone, the cosine alone, and ``CatalogSearch.find`` with the query's
vector (the served hybrid path through :func:`gateway.discovery.hybrid.fuse`).

Asserted, per catalog, set and wording (``by: person``, ``by: model``, and all):

* the fused ranking is not below the better single ranking at 1 and at 5, except the gaps listed
  in ``GAPS``, which must never grow (the fusion does not reach its goal there yet, see the note
  by ``GAPS``; lower an entry when a change closes it, as the floors are raised);
* on the tuning sets, the fused recall is at least ``FLOORS`` (measured minus 0.02);
* on the measurement-only sets (box, digitalocean, slack, sendgrid, GitHub's blind5), the fused
  and the lexical rankings are not below plain BM25, except the listed ``BM25_GAPS``. For those
  sets only counts are ever computed or shown, never a query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.discovery.fusion_eval import (
    LIMIT,
    StaleVectors,
    Task,
    Vectors,
    catalogs,
    evaluate,
    recall,
    text_hash,
    wordings,
)

Key = tuple[str, str, str]  # (catalog, set without .yaml, wording)

# Measured 2026-11-27 (all-MiniLM-L6-v2; the lexical ranker of main at 377dcfd): where the fusion
# is still below the better of its parts, in queries, at (1, 5). The largest on the tuning sets is
# the cosine winning on the agents' wording of a small API (vikunja, by: model: the cosine finds 21
# of 30 first, the lexical ranker 9, the fusion 15) where the lexical top score is middling (0.5-1)
# and does not tell which one is right. The measurement-only rows (digitalocean, box, slack,
# sendgrid) were found by this check, never tuned on. Lower an entry when it shrinks; never raise
# one to pass.
GAPS: dict[Key, tuple[int, int]] = {
    ('stripe', 'stripe-tasks', 'person'): (2, 0),
    ('twilio', 'twilio-api-tasks', 'person'): (0, 1),
    ('twilio', 'twilio-api-tasks', 'model'): (1, 1),
    ('vikunja', 'vikunja-tasks', 'model'): (6, 2),
    ('vikunja', 'vikunja-tasks', 'all'): (3, 1),
    ('digitalocean', 'digitalocean-tasks', 'person'): (0, 1),
    ('digitalocean', 'digitalocean-tasks', 'model'): (5, 4),
    ('digitalocean', 'digitalocean-tasks', 'all'): (4, 5),
    ('box', 'box-tasks', 'model'): (0, 4),
    ('slack', 'slack-tasks', 'person'): (7, 8),
    ('slack', 'slack-tasks', 'model'): (4, 0),
    ('slack', 'slack-tasks', 'all'): (11, 7),
    ('sendgrid', 'sendgrid-tasks', 'person'): (5, 3),
    ('sendgrid', 'sendgrid-tasks', 'all'): (4, 2),
    ('github', 'github-tasks', 'all'): (0, 1),
}

# Fused recall (@1, @5) on the tuning sets, measured 2026-11-27 minus 0.02.
FLOORS: dict[Key, tuple[float, float]] = {
    ('stripe', 'stripe-tasks', 'person'): (0.31, 0.55),
    ('stripe', 'stripe-tasks', 'model'): (0.58, 0.91),
    ('stripe', 'stripe-tasks', 'all'): (0.45, 0.73),
    ('twilio', 'twilio-api-tasks', 'person'): (0.45, 0.61),
    ('twilio', 'twilio-api-tasks', 'model'): (0.48, 0.81),
    ('twilio', 'twilio-api-tasks', 'all'): (0.46, 0.71),
    ('opsgenie', 'opsgenie-tasks', 'person'): (0.25, 0.41),
    ('opsgenie', 'opsgenie-tasks', 'model'): (0.58, 0.85),
    ('opsgenie', 'opsgenie-tasks', 'all'): (0.41, 0.63),
    ('vikunja', 'vikunja-tasks', 'person'): (0.35, 0.75),
    ('vikunja', 'vikunja-tasks', 'model'): (0.48, 0.88),
    ('vikunja', 'vikunja-tasks', 'all'): (0.41, 0.81),
    ('github', 'github-tasks-blind', 'all'): (0.78, 0.96),
    ('github', 'github-tasks-blind2', 'all'): (0.78, 0.97),
    ('github', 'github-tasks-blind3', 'all'): (0.81, 0.96),
    ('github', 'github-tasks-blind4', 'all'): (0.72, 0.93),
    ('github', 'github-tasks-dev', 'all'): (0.65, 0.93),
    ('github', 'github-tasks-fresh', 'all'): (0.83, 0.98),
    ('github', 'github-tasks-heldout', 'all'): (0.77, 0.98),
    ('github', 'github-tasks', 'all'): (0.79, 0.97),
}

# Measurement-only: where the fused or the lexical ranking is below plain BM25, in queries, at
# (1, 5), measured 2026-11-27. Not tuned on; the lexical ranker is another helper's (rank.py).
BM25_GAPS: dict[tuple[str, str, str, str], tuple[int, int]] = {
    ('digitalocean', 'digitalocean-tasks', 'person', 'fused'): (5, 1),
    ('digitalocean', 'digitalocean-tasks', 'person', 'lexical'): (6, 3),
    ('digitalocean', 'digitalocean-tasks', 'all', 'fused'): (4, 0),
    ('digitalocean', 'digitalocean-tasks', 'all', 'lexical'): (4, 2),
    ('box', 'box-tasks', 'model', 'lexical'): (0, 2),
    ('slack', 'slack-tasks', 'model', 'fused'): (1, 0),
    ('slack', 'slack-tasks', 'model', 'lexical'): (4, 2),
    ('slack', 'slack-tasks', 'all', 'lexical'): (3, 2),
}


@pytest.fixture(scope="module")
def evaluated() -> list[Any]:
    return asyncio.run(evaluate())


def _rows(evaluated: list[Any]) -> list[tuple[Key, bool, list[Task]]]:
    return [((ev.catalog.name, ev.tasks_file.removesuffix(".yaml"), wording), ev.measurement_only, tasks)
            for ev in evaluated for wording, tasks in wordings(ev.tasks).items()]


def _count(tasks: list[Task], ranking: Callable[[Task], list[str]]) -> tuple[int, int]:
    r1, r5 = recall(tasks, ranking)
    return round(r1 * len(tasks)), round(r5 * len(tasks))


def test_fused_is_not_below_the_better_single_ranking(evaluated: list[Any]) -> None:
    found: dict[Key, tuple[int, int]] = {}
    for key, _, tasks in _rows(evaluated):
        lex, dense, fused = (_count(tasks, f) for f in (lambda t: t.lexical, lambda t: t.dense, lambda t: t.fused))
        gap = (max(lex[0], dense[0]) - fused[0], max(lex[1], dense[1]) - fused[1])
        if gap[0] > 0 or gap[1] > 0:
            found[key] = (max(gap[0], 0), max(gap[1], 0))
    worse = {k: (v, GAPS.get(k, (0, 0))) for k, v in found.items()
             if v[0] > GAPS.get(k, (0, 0))[0] or v[1] > GAPS.get(k, (0, 0))[1]}
    assert not worse, f"fused below max(lexical, dense) by more queries than recorded (found, recorded): {worse}"


def test_fused_recall_floors_on_the_tuning_sets(evaluated: list[Any]) -> None:
    measured = {key: recall(tasks, lambda t: t.fused) for key, m_only, tasks in _rows(evaluated) if not m_only}
    assert set(measured) == set(FLOORS), "a tuning set or wording without a floor (or a floor without a set)"
    low = {k: (round(measured[k][0], 3), round(measured[k][1], 3), FLOORS[k]) for k in FLOORS
           if measured[k][0] < FLOORS[k][0] or measured[k][1] < FLOORS[k][1]}
    assert not low, f"fused recall (@1, @5) below its floor: {low}"


def test_measurement_only_sets_are_not_below_plain_bm25(evaluated: list[Any]) -> None:
    found: dict[tuple[str, str, str, str], tuple[int, int]] = {}
    for key, m_only, tasks in _rows(evaluated):
        if not m_only:
            continue
        bm25 = _count(tasks, lambda t: t.bm25)
        for name, ranking in (("fused", lambda t: t.fused), ("lexical", lambda t: t.lexical)):
            got = _count(tasks, ranking)
            gap = (max(bm25[0] - got[0], 0), max(bm25[1] - got[1], 0))
            if gap != (0, 0):
                found[(*key, name)] = gap
    worse = {k: (v, BM25_GAPS.get(k, (0, 0))) for k, v in found.items()
             if v[0] > BM25_GAPS.get(k, (0, 0))[0] or v[1] > BM25_GAPS.get(k, (0, 0))[1]}
    assert not worse, f"below plain BM25 by more queries than recorded (found, recorded; counts only): {worse}"


def test_every_catalog_and_set_is_measured(evaluated: list[Any]) -> None:
    names = {ev.catalog.name for ev in evaluated}
    assert names == {c.name for c in catalogs()}
    assert all(len(ev.tasks) >= 24 and all(len(t.fused) == LIMIT for t in ev.tasks) for ev in evaluated)


def test_a_changed_tool_text_is_reported_stale_with_how_to_regenerate() -> None:
    vectors = Vectors({"a": np.ones(2, dtype=np.float32)}, {"a": text_hash("old text")},
                      {"q": np.ones(2, dtype=np.float32)})
    vectors.check("cat", {"a": "old text"}, ["q"])  # current: nothing raised
    with pytest.raises(StaleVectors, match=r"1 tool text\(s\) changed.*bench/discovery_vectors.py dump"):
        vectors.check("cat", {"a": "new text"}, ["q"])
    with pytest.raises(StaleVectors, match=r"1 query\(ies\) without a vector"):
        vectors.check("cat", {"a": "old text"}, ["q", "another"])

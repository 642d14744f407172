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
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.discovery import fusion_eval
from tests.discovery.fusion_eval import (
    LIMIT,
    REPO,
    StaleVectors,
    Task,
    Vectors,
    catalogs,
    evaluate,
    recall,
    replay,
    text_hash,
    wordings,
)

Key = tuple[str, str, str]  # (catalog, set without .yaml, wording)

# Measured 2026-11-27, fusion round 5 (all-MiniLM-L6-v2 over what round 5 embeds: two views of a
# tool, the query without its values, hybrid.tool_texts / query_text; the general lexical ranker
# with bm25_share 0.75; gateway/discovery/fusion.py's CALIBRATION as refitted on those inputs by
# bench/fusion_fit.py: core 0.6 from 1.8, the pack's 0.02 from 2.2, the lexical first kept within
# the fused top 3): where the fusion is still below the better of its parts, in queries, at (1,
# 5). On the tuning sets: the lexical ranker on the agents' wording of Stripe (by: model, 17 first
# against the fusion's 16) and the cosine on vikunja's (22/29 against 21/28): without a domain
# pack no per-query signal measured (lexical top score or lead, the cosine's z or lead, a listwise
# logistic over them, pseudo-relevance feedback: fusion.py) tells them apart under
# leave-one-catalog-out cross-validation. Round 5 closed Opsgenie's (person, 2 at 1), Twilio's
# (person, 1 at 5) and one of Stripe's; it opened vikunja by: model's (1, 1), the trade for them
# (the inputs gained 9 found at 1 + 5 held out and 4 fewer gaps held out on the core: fusion.py).
# The measurement-only rows (digitalocean, box, slack, sendgrid, GitHub's blind5) were found by
# this check, never tuned on; round 5 closed seven of their entries and moved Slack's by one query
# at 5 (model (1, 0) -> (2, 1), all (3, 1) -> (1, 2)). Lower an entry when it shrinks; never raise
# one to pass.
GAPS: dict[Key, tuple[int, int]] = {
    ('stripe', 'stripe-tasks', 'model'): (1, 0),
    ('vikunja', 'vikunja-tasks', 'model'): (1, 1),
    ('slack', 'slack-tasks', 'person'): (0, 1),
    ('slack', 'slack-tasks', 'model'): (2, 1),
    ('slack', 'slack-tasks', 'all'): (1, 2),
}

# Fused recall (@1, @5) on the tuning sets, measured 2026-11-27 (fusion round 5) minus 0.02 (rounded
# down). Lower than round 4's by one query each (the trade for Twilio by: person's +2/+2, Opsgenie's
# +2/+1 and +1/+1, Stripe by: person's +1 at 5 and by: model's +1 at 1, GitHub blind's +1/+1,
# blind2's and blind4's +1 at 1, dev's +1 at 5): Stripe by: person at 1 (0.41 -> 0.38) and by:
# model at 5 (0.94 -> 0.91), Twilio by: model at 5 (0.91 -> 0.88), vikunja by: person at 1 (0.41 ->
# 0.38), by: model at 1 and 5 (0.71/0.94 -> 0.68/0.91) and all, GitHub blind2 at 5 and blind3 at 1.
FLOORS: dict[Key, tuple[float, float]] = {
    ('stripe', 'stripe-tasks', 'person'): (0.38, 0.54),
    ('stripe', 'stripe-tasks', 'model'): (0.51, 0.91),
    ('stripe', 'stripe-tasks', 'all'): (0.44, 0.73),
    ('twilio', 'twilio-api-tasks', 'person'): (0.54, 0.71),
    ('twilio', 'twilio-api-tasks', 'model'): (0.61, 0.88),
    ('twilio', 'twilio-api-tasks', 'all'): (0.57, 0.79),
    ('opsgenie', 'opsgenie-tasks', 'person'): (0.34, 0.57),
    ('opsgenie', 'opsgenie-tasks', 'model'): (0.68, 0.88),
    ('opsgenie', 'opsgenie-tasks', 'all'): (0.51, 0.73),
    ('vikunja', 'vikunja-tasks', 'person'): (0.38, 0.81),
    ('vikunja', 'vikunja-tasks', 'model'): (0.68, 0.91),
    ('vikunja', 'vikunja-tasks', 'all'): (0.53, 0.86),
    ('github', 'github-tasks-blind', 'all'): (0.79, 0.97),
    ('github', 'github-tasks-blind2', 'all'): (0.8, 0.96),
    ('github', 'github-tasks-blind3', 'all'): (0.8, 0.95),
    ('github', 'github-tasks-blind4', 'all'): (0.73, 0.92),
    ('github', 'github-tasks-dev', 'all'): (0.67, 0.95),
    ('github', 'github-tasks-fresh', 'all'): (0.82, 0.98),
    ('github', 'github-tasks-heldout', 'all'): (0.77, 0.98),
    ('github', 'github-tasks', 'all'): (0.79, 0.98),
}

# Measurement-only: where the fused or the lexical ranking is below plain BM25, in queries, at
# (1, 5), measured 2026-11-27 (the general core's lexical ranker, fusion round 5's inputs and
# constants). Not tuned on: these counts are only ever read, never fitted to.
BM25_GAPS: dict[tuple[str, str, str, str], tuple[int, int]] = {
    ('digitalocean', 'digitalocean-tasks', 'person', 'fused'): (2, 0),
    ('digitalocean', 'digitalocean-tasks', 'person', 'lexical'): (6, 2),
    ('digitalocean', 'digitalocean-tasks', 'all', 'lexical'): (4, 0),
    ('box', 'box-tasks', 'model', 'lexical'): (0, 1),
    ('slack', 'slack-tasks', 'model', 'lexical'): (2, 1),
    ('slack', 'slack-tasks', 'all', 'lexical'): (1, 0),
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


def test_replay_reproduces_the_served_fusion(evaluated: list[Any]) -> None:
    # What lets another fusion be tried on the recorded inputs (bench, tuning) without a gateway:
    # the served fuse replayed must answer exactly what CatalogSearch.find answered (counts only).
    from gateway.discovery.fusion import fuse
    differ = sum(replay(t, fuse, domain_pack=t.domain_pack) != t.fused for ev in evaluated for t in ev.tasks)
    assert differ == 0, f"{differ} task(s) answered otherwise when replayed"
    assert any(t.domain_pack for ev in evaluated for t in ev.tasks)  # GitHub's pack reaches the fusion


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


def test_embed_local_writes_what_the_evaluation_loads_and_the_committed_vectors_agree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `bench/discovery_vectors.py embed --local` embeds with the gateway's numpy encoder (no
    # sentence-transformers venv), as the committed vectors were made: the same embedded query text
    # gives the same vector up to float16 rounding (a step of 1.2e-4 at most; rows are renormalised
    # when loaded, hence twice that). A tool given as views gets one row per view.
    spec = importlib.util.spec_from_file_location("bench_discovery_vectors", REPO / "bench" / "discovery_vectors.py")
    assert spec is not None and spec.loader is not None
    bench_vectors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_vectors)
    committed = Vectors.load("vikunja")
    queries = list(committed.queries)[:3]
    texts = tmp_path / "texts.json"
    embedded = {q: committed.query_texts[q] for q in queries}  # hybrid.query_text of each
    views = ["delete a task", "delete task\nDelete a task"]
    texts.write_text(json.dumps({"vikunja": {"tools": {"vikunja_a": views}, "queries": queries,
                                             "query_texts": list(embedded.values())}}))
    bench_vectors.embed(texts, tmp_path, local=True)
    monkeypatch.setattr(fusion_eval, "VECTORS", tmp_path)
    made = Vectors.load("vikunja")
    made.check("vikunja", {"vikunja_a": views}, embedded)
    assert made.tools["vikunja_a"].shape == committed.tools[next(iter(committed.tools))].shape == (2, 384)
    with pytest.raises(StaleVectors, match=r"1 query\(ies\) without a vector"):
        made.check("vikunja", {"vikunja_a": views}, {**embedded, queries[0]: queries[0] + " changed"})
    for q in queries:
        assert float(np.abs(made.queries[q] - committed.queries[q]).max()) <= 2.5e-4

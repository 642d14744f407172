"""Ranking on how people ask: plain-words tasks over GitHub's real REST API (1,223 tools).

Prints recall@1 and recall@5 per set (run with ``-s`` to see them, misses included). The sets:

* tuned on -- their misses may drive general changes to the ranker (a rule of English or of HTTP,
  a field weight, a vocabulary entry a developer would use anywhere; never a rule keyed to one
  query): ``github-tasks.yaml`` (main, the issue's target: recall@5 ≥ 0.9), ``-heldout.yaml``,
  ``-dev.yaml``, since round 3 ``-fresh.yaml`` and ``-blind.yaml`` (measurement only in
  round 2), since round 4 ``-blind2.yaml`` (an independent author's, measurement only in
  round 3), since round 5 ``-blind3.yaml`` (another's, measurement only in round 4) and since
  round 6 ``-blind4.yaml`` (a fourth author's, measurement only in round 5).
* measurement only -- NEVER tuned on, its misses never looked at: ``-blind5.yaml``, written by a
  fifth independent author while round 6 was made (half its queries as a person types them, half
  as an agent searching for a tool), guarded against vocabulary taken from it
  (:func:`test_vocabulary_added_since_blind5_was_commissioned_was_not_taken_from_it`).

The vocabulary guards
  of the sets once measurement only are kept as historical records of their rounds: each checks
  the keys added *during* that round against the sets then tuned on.

The floors below are what was measured minus a small margin, as regression guards; raise them
when the ranker gets better, never lower them to make a change pass (docs/discovery.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.discovery import SearchIndex
from gateway.discovery.words import split_words
from tests.discovery.github_pack import GITHUB, PACKS
from tests.discovery.labelled import (
    BLIND,
    BLIND2,
    BLIND3,
    BLIND4,
    BLIND5,
    DEV,
    FRESH,
    HELDOUT,
    TASKS,
    Corpus,
    Recall,
    evaluate,
    github_corpus,
    load_tasks,
)

# The GitHub sets are read with the github pack; the snapshots record its map merged with the core.
SYNONYMS, SOFT = GITHUB.synonyms, GITHUB.soft

SETS = {"main": TASKS, "held-out": HELDOUT, "dev": DEV, "fresh": FRESH, "blind": BLIND, "blind-2": BLIND2,
        "blind-3": BLIND3, "blind-4": BLIND4}
TUNED = dict(SETS)
ROUND3_TUNED = [TASKS, HELDOUT, DEV, FRESH, BLIND]  # the sets tuned on while blind-2 was measurement only
ROUND4_TUNED = ROUND3_TUNED + [BLIND2]  # the sets tuned on while blind-3 was measurement only
ROUND5_TUNED = ROUND4_TUNED + [BLIND3]  # the sets tuned on while blind-4 was measurement only
SETS["blind-5"] = BLIND5  # measurement only (see the vocabulary guard below)
# (recall@1, recall@5) floors, a margin under what the ranker measured when they were set (round 4):
# main 0.784/1.000, held-out 0.792/1.000, dev 0.595/0.952, fresh 0.769/1.000, blind 0.752/0.980,
# blind-2 0.720/0.975 (0.636/0.856 when it was first measured, measurement only, in round 3).
# blind-3, first measured when merged after round 4: 0.637/0.871 (0.589/0.823 with round 3's
# ranker, 0.468/0.742 with round 2's); tuned on since round 5: 0.734/0.984 after it (round 5 also
# measured dev 0.619/0.952 and blind-2 0.737/0.975; the rest unchanged).
# blind-4 (measurement only), first measured when merged after round 5: 0.550/0.783 (0.543/0.752
# with round 4's ranker, 0.527/0.729 with round 3's); tuned on since round 6: 0.705/0.930 after it
# (round 6 also measured main 0.811/1.000, dev 0.667/0.952, fresh 0.808/1.000, blind 0.762/0.980,
# blind-2 0.805/0.983 and blind-3 0.815/0.984; held-out unchanged at 0.792/1.000).
# blind-5 (measurement only, 127 tasks), first measured when merged after round 6: 0.732/0.937
# (0.638/0.890 with round 5's ranker).
FLOORS = {"main": (0.78, 0.96), "held-out": (0.75, 0.95), "dev": (0.62, 0.9), "fresh": (0.76, 0.95),
          "blind": (0.72, 0.95), "blind-2": (0.75, 0.95), "blind-3": (0.76, 0.95), "blind-4": (0.66, 0.9),
          "blind-5": (0.7, 0.9)}
_DATA = Path(__file__).resolve().parents[1] / "data" / "discovery"
VOCABULARY_AT_BLIND2 = _DATA / "vocabulary-at-blind2.txt"
VOCABULARY_AT_BLIND3 = _DATA / "vocabulary-at-blind3.txt"
VOCABULARY_AT_BLIND4 = _DATA / "vocabulary-at-blind4.txt"
VOCABULARY_AT_BLIND5 = _DATA / "vocabulary-at-blind5.txt"


def _require(path: Path) -> None:
    """Fail, saying why, when a measurement-only set merged separately is not in the tree yet."""
    if not path.exists():
        pytest.fail(f"{path.relative_to(path.parents[3])} is missing: the measurement-only set "
                    "written by an independent author is merged separately; this test needs it")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return github_corpus("gh_")


@pytest.fixture(scope="module")
def index(corpus: Corpus) -> SearchIndex:
    idx = SearchIndex(PACKS)
    idx.sync(corpus.docs)
    return idx


def _report(label: str, recall: Recall) -> None:
    print(f"\n{label}: {recall.tasks} tasks, recall@1 {recall.at1:.3f}, recall@5 {recall.at5:.3f}")
    for query, top in recall.misses:
        print(f"  miss: {query!r} -> {list(top)}")


def test_labelled_sets_are_big_enough_and_name_real_operations(corpus: Corpus) -> None:
    present = {label: path for label, path in SETS.items() if path.exists()}
    sizes = {label: len(load_tasks(path)) for label, path in present.items()}
    for path in present.values():
        assert all(op in corpus.name_of for t in load_tasks(path) for op in t["ops"])
    assert sizes["main"] >= 60 and sizes["blind"] >= 60
    # No task is in two sets: a blind task copied into a tuned set would be tuned on.
    queries = [t["query"].lower() for path in present.values() for t in load_tasks(path)]
    assert len(queries) == len(set(queries))
    assert len(corpus.docs) == 1223


@pytest.mark.parametrize("label", list(SETS))
def test_recall_on_plain_words_tasks(index: SearchIndex, corpus: Corpus, label: str) -> None:
    _require(SETS[label])
    recall = evaluate(index, corpus, load_tasks(SETS[label]))
    _report(label, recall)
    at1, at5 = FLOORS[label]
    assert recall.at5 >= at5
    assert recall.at1 >= at1


def _snapshot(path: Path) -> tuple[set[tuple[str, ...]], set[str]]:
    """The map keys and soft-hint words a vocabulary snapshot file records."""
    keys: set[tuple[str, ...]] = set()
    soft: set[str] = set()
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("soft:"):
            soft.add(line[len("soft:"):])
        else:
            keys.add(tuple(line.split()))
    return keys, soft


def _taken(snapshot: Path, measured: list[Path], tuned: list[Path],
           until: Path | None = None) -> list[tuple[str, str]]:
    """(key, query) for each map key or soft word added since *snapshot* (and, with *until*, present
    in that later snapshot: added between the two) that occurs in a query of the *measured* sets but
    in no query of the *tuned* ones."""
    keys, soft = _snapshot(snapshot)
    added = [k for k in SYNONYMS if k not in keys] + [(w,) for w in SOFT if w not in soft]
    if until is not None:
        later_keys, later_soft = _snapshot(until)
        added = [k for k in added if k in later_keys or (len(k) == 1 and k[0] in later_soft)]
    tuned_words = [split_words(t["query"]) for p in tuned for t in load_tasks(p)]
    taken = []
    for path in measured:
        for task in load_tasks(path):
            words = split_words(task["query"])
            for key in added:
                if _has(words, key) and not any(_has(t, key) for t in tuned_words):
                    taken.append((" ".join(key), task["query"]))
    return taken


def test_the_vocabulary_snapshot_at_blind2_is_the_map_of_its_commission() -> None:
    # The snapshot was taken before round 3 changed the map: every key then is still a key or was
    # removed on purpose; round 3 added keys after it (so the guard below guards something).
    keys, soft = _snapshot(VOCABULARY_AT_BLIND2)
    assert len(keys) > 300 and {"my", "who"} <= soft
    assert [k for k in SYNONYMS if k not in keys]


def test_vocabulary_added_since_blind2_was_commissioned_was_not_taken_from_it() -> None:
    # Historical (round 3, when blind-2 was measurement only): a key added to the map during round
    # 3 -- after the blind-2 snapshot, present in the blind-3 one -- may occur in a blind-2 query
    # only if a set tuned in round 3 has it too. Since round 4 blind-2 is tuned on, so keys added in
    # round 4 may come from its misses; they are outside this guard (its *until* snapshot).
    _assert_only_coincidences(_taken(VOCABULARY_AT_BLIND2, [BLIND2], ROUND3_TUNED, until=VOCABULARY_AT_BLIND3),
                              ROUND3_COINCIDENCES)


# Keys round 3 added from the ranker author's own practice queries (written and tuned on, not kept),
# before blind-2 was merged or seen, that happen to occur in blind-2 queries. Ranked without them,
# blind-2's recall@5 is 0.847 instead of 0.856 (docs/discovery.md). No other added key may occur in
# a blind-2 query unless a tuned query has it too; this list only ever shrinks.
ROUND3_COINCIDENCES = frozenset({
    "between", "billing", "changelog", "child task", "custom domain", "domain", "env", "epic", "hour",
    "https", "invitation", "mandatory", "markdown to html", "non members", "nuke", "paying", "react",
    "render", "revoke", "stuck", "usage",
})


def test_the_vocabulary_snapshot_at_blind3_is_the_map_of_its_commission() -> None:
    # Taken before round 4 changed the map: it holds every key of the blind-2 snapshot still kept,
    # and more (round 3's).
    keys, soft = _snapshot(VOCABULARY_AT_BLIND3)
    keys2, _ = _snapshot(VOCABULARY_AT_BLIND2)
    assert len(keys) > len(keys2) > 300 and {"my", "who"} <= soft


def test_vocabulary_added_since_blind3_was_commissioned_was_not_taken_from_it() -> None:
    # Historical (round 4, when blind-3 was measurement only): a key added to the map during round
    # 4 -- after the blind-3 snapshot, present in the blind-4 one -- may occur in a blind-3 query
    # only if a set tuned in round 4 has it too. Since round 5 blind-3 is tuned on, so keys added in
    # round 5 may come from its misses; they are outside this guard (its *until* snapshot).
    _require(BLIND3)
    _assert_only_coincidences(_taken(VOCABULARY_AT_BLIND3, [BLIND3], ROUND4_TUNED, until=VOCABULARY_AT_BLIND4),
                              ROUND4_COINCIDENCES)


# As ROUND3_COINCIDENCES for blind-2: keys round 4 added (from blind-2's misses and its author's
# practice queries) that happen to occur in blind-3 queries. Ranked without them blind-3 scores the
# same (0.871 at 5). This list only ever shrinks.
ROUND4_COINCIDENCES = frozenset({"developers", "force pushed", "star count", "test results"})


def test_the_vocabulary_snapshot_at_blind4_is_the_map_of_its_commission() -> None:
    # Taken before round 5 changed the map: it holds more keys than the blind-3 snapshot (round 4's).
    keys, soft = _snapshot(VOCABULARY_AT_BLIND4)
    keys3, _ = _snapshot(VOCABULARY_AT_BLIND3)
    assert len(keys) > len(keys3) > 300 and {"my", "who"} <= soft


def test_vocabulary_added_since_blind4_was_commissioned_was_not_taken_from_it() -> None:
    # Historical (round 5, when blind-4 was measurement only): a key added to the map during round
    # 5 -- after the blind-4 snapshot, present in the blind-5 one -- may occur in a blind-4 query
    # only if a set tuned in round 5 has it too. Since round 6 blind-4 is tuned on, so keys added in
    # round 6 may come from its misses; they are outside this guard (its *until* snapshot).
    _require(BLIND4)
    _assert_only_coincidences(_taken(VOCABULARY_AT_BLIND4, [BLIND4], ROUND5_TUNED, until=VOCABULARY_AT_BLIND5),
                              ROUND5_COINCIDENCES)


# As ROUND4_COINCIDENCES for blind-3: keys round 5 added (from blind-3's misses and practice
# queries) that happen to occur in blind-4 queries. Ranked without it blind-4 scores the same at 5
# (0.783; 0.558 at 1 instead of 0.550). This list only ever shrinks.
ROUND5_COINCIDENCES: frozenset[str] = frozenset({"recursively"})


def test_the_vocabulary_snapshot_at_blind5_is_the_map_of_its_commission() -> None:
    # Taken before round 6 changed the map: it holds more keys than the blind-4 snapshot (round 5's).
    keys, soft = _snapshot(VOCABULARY_AT_BLIND5)
    keys4, _ = _snapshot(VOCABULARY_AT_BLIND4)
    assert len(keys) > len(keys4) > 300 and {"my", "who"} <= soft
    assert [k for k in SYNONYMS if k not in keys]  # round 6 added keys since: the guard below guards something


def test_vocabulary_added_since_blind5_was_commissioned_was_not_taken_from_it() -> None:
    # A key added to the map after blind-5 was commissioned (round 6) may occur in a blind-5 query
    # only if a tuned query has it too: otherwise the measurement-only set would be tuned on.
    _require(BLIND5)
    _assert_only_coincidences(_taken(VOCABULARY_AT_BLIND5, [BLIND5], list(TUNED.values())), ROUND6_COINCIDENCES)


# As ROUND5_COINCIDENCES for blind-4: keys round 6 added (from blind-4's misses and practice
# queries) that happen to occur in blind-5 queries. Ranked without them blind-5 scores 0.929 at 5
# instead of 0.937 (0.701 at 1 instead of 0.732). This list only ever shrinks.
ROUND6_COINCIDENCES = frozenset({"approving reviews", "copilot license", "introduced", "organization role"})


def _assert_only_coincidences(taken: list[tuple[str, str]], coincidences: frozenset[str]) -> None:
    """Every (key, query) a guard found is one of the keys listed as a round's coincidences."""
    assert [(key, query) for key, query in taken if key not in coincidences] == []


def _has(words: list[str], key: tuple[str, ...]) -> bool:
    n = len(key)
    return any(tuple(words[i:i + n]) == key for i in range(len(words) - n + 1))


def test_prefix_does_not_change_ranking(corpus: Corpus) -> None:
    # Catalog prefixes ("gh_") are namespaces; the same spec without one ranks the same.
    bare = github_corpus("")
    a, b = SearchIndex(PACKS), SearchIndex(PACKS)
    a.sync(corpus.docs)
    b.sync(bare.docs)
    for task in load_tasks():
        q = task["query"]
        assert [h.name[3:] for h in a.search(q, 5)] == [h.name for h in b.search(q, 5)], q

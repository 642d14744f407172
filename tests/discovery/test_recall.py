"""Ranking on how people ask: plain-words tasks over GitHub's real REST API (1,223 tools).

Prints recall@1 and recall@5 (run with ``-s`` to see them, misses included). The main set is the
target (recall@5 ≥ 0.9); the held-out and fresh sets were written after tuning and are floors
against regressions, reported so the gap between tuned and new wording stays visible.
"""

from __future__ import annotations

import pytest

from gateway.discovery import SearchIndex
from gateway.discovery.labelled import FRESH, HELDOUT, Corpus, evaluate, github_corpus, load_tasks


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return github_corpus("gh_")


@pytest.fixture(scope="module")
def index(corpus: Corpus) -> SearchIndex:
    idx = SearchIndex()
    idx.sync(corpus.docs)
    return idx


def _report(label: str, recall) -> None:  # type: ignore[no-untyped-def]
    print(f"\n{label}: {recall.tasks} tasks, recall@1 {recall.at1:.3f}, recall@5 {recall.at5:.3f}")
    for query, top in recall.misses:
        print(f"  miss: {query!r} -> {list(top)}")


def test_labelled_set_is_big_enough_and_names_real_operations(corpus: Corpus) -> None:
    for path in (None, HELDOUT, FRESH):
        tasks = load_tasks() if path is None else load_tasks(path)
        assert all(op in corpus.name_of for t in tasks for op in t["ops"])
    assert len(load_tasks()) >= 60
    assert len(corpus.docs) == 1223


def test_recall_on_plain_words_tasks(index: SearchIndex, corpus: Corpus) -> None:
    recall = evaluate(index, corpus, load_tasks())
    _report("github-tasks", recall)
    assert recall.at5 >= 0.9
    assert recall.at1 >= 0.6


def test_recall_on_held_out_tasks(index: SearchIndex, corpus: Corpus) -> None:
    recall = evaluate(index, corpus, load_tasks(HELDOUT))
    _report("github-tasks-heldout", recall)
    assert recall.at5 >= 0.5


def test_recall_on_fresh_tasks(index: SearchIndex, corpus: Corpus) -> None:
    recall = evaluate(index, corpus, load_tasks(FRESH))
    _report("github-tasks-fresh", recall)
    assert recall.at5 >= 0.5


def test_prefix_does_not_change_ranking(corpus: Corpus) -> None:
    # Catalog prefixes ("gh_") are namespaces; the same spec without one ranks the same.
    bare = github_corpus("")
    a, b = SearchIndex(), SearchIndex()
    a.sync(corpus.docs)
    b.sync(bare.docs)
    for task in load_tasks():
        q = task["query"]
        assert [h.name[3:] for h in a.search(q, 5)] == [h.name for h in b.search(q, 5)], q

"""Incremental sync: the index and the vector store end where a fresh build of the same tools
would, bit for bit (rankings, scores, the matrix searched), and take their cheap paths."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.discovery import SearchIndex, ToolDoc
from gateway.discovery.vectors import VectorStore
from gateway.discovery.words import split_words
from tests.discovery.github_pack import PACKS
from tests.discovery.labelled import github_corpus

_QUERIES = ("list the open pull requests", "star a repository", "delete a webhook", "who can push to main",
            "add a label to an issue", "cancel the workflow run", "create a release", "get the readme")


def _camel_reference(text: str) -> list[str]:
    """split_words as it was: the camel-case regex on every chunk."""
    camel = re.compile(r"(?<=[a-z0-9])(?<![A-Z]s)(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s\b)")
    return [w.lower() for chunk in re.split(r"[^0-9A-Za-z]+", text) if chunk for w in camel.split(chunk) if w]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aAbBsSzZ09 _-./é", max_size=40))
def test_split_words_fast_path_splits_as_the_regex(text: str) -> None:
    assert split_words(text) == _camel_reference(text)


def test_split_words_keeps_camel_and_acronyms() -> None:
    assert split_words("listPullRequests getHTTPStatus PRs v2 repo_name") == \
        ["list", "pull", "requests", "get", "http", "status", "prs", "v2", "repo", "name"]


def test_a_docs_fingerprint_is_computed_once_and_follows_its_text() -> None:
    doc = ToolDoc("t", "Title", "Text")
    first = doc.fingerprint()
    assert doc.fingerprint() is first  # the memo, not a second hash
    assert ToolDoc("t", "Title", "Text").fingerprint() == first and ToolDoc("t", "Title", "Text") == doc
    assert replace(doc, description="Other").fingerprint() != first
    assert "_print" not in repr(doc)


def _ranked(index: SearchIndex) -> list[list[tuple[str, float]]]:
    return [[(h.name, h.score) for h in index.search(q, 10)] for q in _QUERIES]


def test_an_incremental_index_ranks_as_a_fresh_build_of_the_same_tools() -> None:
    docs = list(github_corpus("gh_").docs[:400])
    index = SearchIndex(PACKS)
    index.sync(docs)
    rng = random.Random(7)
    for step in range(4):
        kept = [d for d in docs if rng.random() > 0.1]  # some tools gone, from anywhere
        changed = {d.name for d in rng.sample(kept, 20)}
        current = [replace(d, description=f"{d.description} (rev {step})") if d.name in changed else d for d in kept]
        written, deleted = index.sync(current)
        assert (written, deleted) == (20, len(docs) - len(kept))
        assert index.sync(current) == (0, 0)
        # A fresh index given the tools in the incremental one's row order (ties go by rowid).
        by_name = {d.name: d for d in current}
        fresh = SearchIndex(PACKS)
        fresh.sync(by_name[n] for n in index.fingerprints)
        assert dict(index.fingerprints) == dict(fresh.fingerprints)
        assert _ranked(index) == _ranked(fresh)
        docs = current + [d for d in docs if d.name not in by_name][:15]  # some come back (at the end)
        index.sync(docs)


def _store(prints: dict[str, str], vectors: dict[str, np.ndarray]) -> VectorStore:
    store = VectorStore()
    store.put(list(prints.values()), np.stack([vectors[fp] for fp in prints.values()]))
    return store


def test_the_vector_matrix_is_updated_in_place_and_ranks_as_a_fresh_one() -> None:
    rng = np.random.default_rng(3)
    vectors: dict[str, np.ndarray] = {}

    def vector(fp: str) -> np.ndarray:
        if fp not in vectors:
            v = rng.standard_normal((2, 24)).astype(np.float32)
            vectors[fp] = v / np.linalg.norm(v, axis=1, keepdims=True)
        return vectors[fp]

    prints = {f"t{i:03}": f"f{i}" for i in range(300)}
    for fp in prints.values():
        vector(fp)
    vectors["f7"] = vectors["f8"].copy()  # equal cosines: ranked by row, i.e. by the catalog's order
    store = _store(prints, vectors)
    query = rng.standard_normal(24).astype(np.float32)
    query /= np.linalg.norm(query)
    store.nearest(query, prints, 5)
    buffer = store._buffer
    picks = random.Random(5)
    for step in range(6):
        # A sync: tools gone from anywhere, changed ones and new ones at the end of the catalog.
        names = list(prints)
        gone = set(picks.sample(names, 12))
        changed = set(picks.sample([n for n in names if n not in gone], 8))
        now = {n: fp for n, fp in prints.items() if n not in gone and n not in changed}
        now.update({n: f"{prints[n]}.{step}" for n in changed})
        added = {f"new{step}-{i}": f"n{step}-{i}" for i in range(10)}
        now.update(added)
        todo = store.missing(now.values())
        assert sorted(todo) == sorted([now[n] for n in changed] + list(added.values()))
        store.put(todo, np.stack([vector(fp) for fp in todo]))
        got = store.nearest(query, now, 40)
        assert store._buffer is buffer  # kept rows moved within the buffer, no new matrix
        fresh = _store(now, vectors)
        assert [(h.name, h.score) for h in got] == [(h.name, h.score) for h in fresh.nearest(query, now, 40)]
        assert np.array_equal(store._matrix, fresh._matrix) and store._names == fresh._names
        assert len(store) == len(now) and all(fp in store for fp in now.values())
        prints = now
    # A catalog that reorders its tools: a new matrix, still in the catalog's order.
    shuffled = dict(reversed(list(prints.items())))
    got = store.nearest(query, shuffled, 40)
    assert store._buffer is not buffer
    assert [(h.name, h.score) for h in got] == [(h.name, h.score) for h in _store(shuffled, vectors).nearest(query, shuffled, 40)]
    # A catalog that shrinks below half the buffer: a smaller one (memory follows the catalog).
    few = dict(list(shuffled.items())[:50])
    store.nearest(query, few, 5)
    assert len(store._buffer) < 100 and len(store) == 50

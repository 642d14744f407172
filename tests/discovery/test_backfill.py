"""``find_tools`` answers ``min(limit, visible tools)`` tools (issue 28): when the ranked candidates
are fewer, the tools holding any word of the query follow, then the other visible tools, never a
tool the caller may not see, scores never rising down the list; the ranked head is unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.discovery.catalog_search import CatalogSearch
from gateway.discovery.index import SearchIndex, ToolDoc
from tests.discovery.labelled import github_corpus
from tests.discovery.test_catalog_search import Described, _names
from tests.test_catalog import _catalog

_GITHUB = SearchIndex()
_GITHUB.sync(github_corpus().docs)

QUERIES = ["how much credit do I have left", "the", "zzzqqq", "hello there", "list open pull requests",
           "what is left", "a", "?!"]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("limit", [1, 5, 8, 50])
def test_always_limit_tools_from_a_large_catalog(query: str, limit: int) -> None:
    hits = _GITHUB.search(query, limit)
    assert len(hits) == limit
    assert len({h.name for h in hits}) == limit
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_the_words_of_the_query_come_before_the_rest_and_the_ranked_head_stays() -> None:
    query = "how much credit do I have left"
    ranked = _GITHUB.search(query, 50, fill=False)
    assert 2 <= len(ranked)  # "credit": the billing reports, then tools holding "left", "much" ...
    assert ranked[0].name.startswith("billing_") and "credit" in ranked[0].name
    assert [h.name for h in _GITHUB.search(query, 8)] == [h.name for h in ranked[:8]]
    assert [h.name for h in _GITHUB.search(query, 1)] == [ranked[0].name]


def test_never_a_tool_the_caller_may_not_see() -> None:
    def visible(name: str) -> bool:
        return name.startswith(("billing_", "gists_"))

    count = sum(1 for d in github_corpus().docs if visible(d.name))
    assert 8 < count < 50
    for query in ("how much credit do I have left", "zzzqqq", "list open pull requests"):
        hits = _GITHUB.search(query, 50, visible)
        assert len(hits) == count and all(visible(h.name) for h in hits)
        assert len(_GITHUB.search(query, 8, visible)) == 8


def test_a_small_catalog_gives_what_it_has() -> None:
    index = SearchIndex()
    index.sync([ToolDoc("a_tool", "Alpha"), ToolDoc("b_tool", "Beta"), ToolDoc("c_tool", "Gamma")])
    assert [h.name for h in index.search("beta", 8)][0] == "b_tool"
    assert len(index.search("beta", 8)) == 3 and len(index.search("nothing here", 8)) == 3
    assert [h.name for h in index.search("beta", 8, visible=lambda n: n != "a_tool")] == ["b_tool", "c_tool"]


def test_find_tools_answers_limit_tools() -> None:
    gh = Described("gh", ["create_issue", "list_issues", "cancel_run"])
    db = Described("db", ["query"])
    search = CatalogSearch(_catalog((gh, "gh_"), (db, "db_")))
    assert len(_names(search.find("how much credit do I have left", 3))) == 3
    assert _names(search.find("stop the pipeline", 4))[0] == "gh_cancel_run"
    assert len(_names(search.find("stop the pipeline", 4))) == 4
    assert _names(search.find("zebra", 8, visible=lambda n: n.startswith("db_"))) == ["db_query"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["credit", "left", "the", "pull", "requests", "zz", "how", "much", "my", "delete",
                                 "open", "?", "list", "billing", "a", "is"]), max_size=6).map(" ".join),
       st.integers(min_value=1, max_value=50))
def test_any_query_gets_min_of_limit_and_visible(query: str, limit: int) -> None:
    def visible(name: str) -> bool:
        return not name.startswith("repos_")

    hits = _GITHUB.search(query, limit, visible)
    assert len(hits) == limit and all(visible(h.name) for h in hits)

"""SearchIndex: incremental sync, visibility applied before the top k, bounds."""

from __future__ import annotations

import pytest

from gateway.discovery import SearchIndex, ToolDoc, doc_from_tool


def _docs() -> list[ToolDoc]:
    return [
        ToolDoc("tickets_create", "Create an issue", "Opens a new issue in a repository."),
        ToolDoc("tickets_list", "List issues", "Lists the issues of a repository."),
        ToolDoc("runs_cancel", "Cancel a workflow run", "Stops a running workflow run."),
        ToolDoc("sql_query", "Run a read-only SQL query", "Runs SELECT against the reporting database."),
    ]


def test_finds_by_callers_words_best_first() -> None:
    index = SearchIndex()
    index.sync(_docs())
    assert index.search("open a ticket", 2)[0].name == "tickets_create"
    assert index.search("stop the pipeline", 1)[0].name == "runs_cancel"
    assert index.search("zebra", 5) == []
    assert index.search("", 5) == []


def test_sync_writes_only_what_changed() -> None:
    index = SearchIndex()
    assert index.sync(_docs()) == (4, 0)
    assert index.sync(_docs()) == (0, 0)
    changed = _docs()[:3] + [ToolDoc("sql_query", "Run SQL", "Query the warehouse for zebra counts.")]
    assert index.sync(changed) == (1, 0)
    assert [h.name for h in index.search("zebra", 5)] == ["sql_query"]
    assert index.sync(changed[:2]) == (0, 2)
    assert len(index) == 2
    assert index.search("zebra", 5) == [] and index.search("cancel workflow run", 5) == []


def test_visibility_applies_before_the_top_k() -> None:
    # 30 tools match "issue" better than the one the caller may see; it still comes back, alone.
    docs = [ToolDoc(f"issue_tool_{i}", "Issue issue issue", "issue") for i in range(30)]
    docs.append(ToolDoc("mine", "Close an issue", "Closes an issue."))
    index = SearchIndex()
    index.sync(docs)
    hits = index.search("issue", 5, visible=lambda name: name == "mine")
    assert [h.name for h in hits] == ["mine"]
    assert index.search("issue", 5, visible=lambda name: False) == []


@pytest.mark.parametrize("limit,expected", [(0, 1), (-3, 1), (3, 3), (10_000, 50)])
def test_limit_is_bounded(limit: int, expected: int) -> None:
    index = SearchIndex()
    index.sync(ToolDoc(f"t{i}", "Widget tool", "widget") for i in range(80))
    assert len(index.search("widget", limit)) == expected


def test_hostile_queries_are_plain_words() -> None:
    index = SearchIndex()
    index.sync(_docs())
    # FTS5 syntax in a query is text, never an expression (and never an error).
    for q in ['"', 'NEAR(issue', 'issue* OR', "name:issue", "x" * 5000, "\x00issue"]:
        index.search(q, 5)
    assert index.search('issue" OR "cancel', 5)


def test_doc_from_tool_reads_the_wire_object() -> None:
    doc = doc_from_tool({
        "name": "gh_pulls_list", "description": "See [the docs](https://x.example) for more.",
        "annotations": {"title": "List pull requests"},
        "inputSchema": {"type": "object", "properties": {"perPage": {"type": "integer", "description": "Page size."}}},
    }, tags=["pulls"], path="/repos/{owner}/{repo}/pulls")
    assert doc.title == "List pull requests"
    assert "the docs" in doc.description and "https" not in doc.description
    assert doc.params.startswith("per page Page size.")
    assert doc.tags == "pulls" and doc.path == "repos owner repo pulls"


def test_find_result_carries_full_tool_objects_best_first() -> None:
    from gateway.discovery import SearchHit
    from gateway.discovery.tools import FIND_TOOLS, find_result

    tools = {"b": {"name": "b", "description": "Bee " * 50, "inputSchema": {"type": "object"}},
             "a": {"name": "a", "title": "Ay", "inputSchema": {"type": "object"}}}
    res = find_result([SearchHit("b", 2.0), SearchHit("gone", 1.5), SearchHit("a", 1.0)], tools)
    assert res["structuredContent"] == {"tools": [tools["b"], tools["a"]]}
    assert res["content"][0]["text"].splitlines()[1:] == [f"- b: {('Bee ' * 25)[:100]}…", "- a: Ay"]
    assert find_result([], tools)["structuredContent"] == {"tools": []}
    assert FIND_TOOLS["inputSchema"]["properties"]["limit"]["maximum"] == 50

"""SearchIndex: incremental sync, visibility applied before the top k, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.discovery import SearchIndex, ToolDoc, doc_from_tool
from tests.discovery.github_pack import PACKS


def _docs() -> list[ToolDoc]:
    return [
        ToolDoc("tickets_create", "Create an issue", "Opens a new issue in a repository."),
        ToolDoc("tickets_list", "List issues", "Lists the issues of a repository."),
        ToolDoc("runs_cancel", "Cancel a workflow run", "Stops a running workflow run."),
        ToolDoc("sql_query", "Run a read-only SQL query", "Runs SELECT against the reporting database."),
    ]


def test_finds_by_callers_words_best_first() -> None:
    index = SearchIndex(PACKS)
    index.sync(_docs())
    assert index.search("open a ticket", 2)[0].name == "tickets_create"
    assert index.search("stop the pipeline", 1)[0].name == "runs_cancel"
    assert index.search("zebra", 5, fill=False) == []  # no tool holds the word
    assert index.search("", 5, fill=False) == []


def test_sync_writes_only_what_changed() -> None:
    index = SearchIndex(PACKS)
    assert index.sync(_docs()) == (4, 0)
    assert index.sync(_docs()) == (0, 0)
    changed = _docs()[:3] + [ToolDoc("sql_query", "Run SQL", "Query the warehouse for zebra counts.")]
    assert index.sync(changed) == (1, 0)
    assert [h.name for h in index.search("zebra", 5, fill=False)] == ["sql_query"]
    assert index.sync(changed[:2]) == (0, 2)
    assert len(index) == 2
    assert index.search("zebra", 5, fill=False) == [] and index.search("cancel workflow run", 5, fill=False) == []


def test_visibility_applies_before_the_top_k() -> None:
    # 30 tools match "issue" better than the one the caller may see; it still comes back, alone.
    docs = [ToolDoc(f"issue_tool_{i}", "Issue issue issue", "issue") for i in range(30)]
    docs.append(ToolDoc("mine", "Close an issue", "Closes an issue."))
    index = SearchIndex(PACKS)
    index.sync(docs)
    hits = index.search("issue", 5, visible=lambda name: name == "mine")
    assert [h.name for h in hits] == ["mine"]
    assert index.search("issue", 5, visible=lambda name: False) == []


@pytest.mark.parametrize("limit,expected", [(0, 1), (-3, 1), (3, 3), (10_000, 50)])
def test_limit_is_bounded(limit: int, expected: int) -> None:
    index = SearchIndex(PACKS)
    index.sync(ToolDoc(f"t{i}", "Widget tool", "widget") for i in range(80))
    assert len(index.search("widget", limit)) == expected


def test_hostile_queries_are_plain_words() -> None:
    index = SearchIndex(PACKS)
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


def _ann(kind: str) -> dict[str, bool]:
    return {"read": {"readOnlyHint": True}, "write": {"readOnlyHint": False, "destructiveHint": False},
            "delete": {"readOnlyHint": False, "destructiveHint": True}}[kind]


def _tool(name: str, title: str, kind: str, description: str = "", **props: object) -> dict[str, object]:
    return {"name": name, "title": title, "description": description, "annotations": _ann(kind),
            "inputSchema": {"type": "object", "properties": props}}


def test_the_kind_of_operation_asked_for_decides_between_same_worded_tools() -> None:
    index = SearchIndex(PACKS)
    index.sync(doc_from_tool(t) for t in [
        _tool("labels_list", "List labels on an issue", "read"),
        _tool("labels_add", "Add labels to an issue", "write"),
        _tool("labels_remove", "Remove a label from an issue", "delete"),
    ])
    assert doc_from_tool(_tool("x", "X", "delete")).kind == "delete"
    assert index.search("which labels does the ticket have", 1)[0].name == "labels_list"
    assert index.search("take the label off the ticket", 1)[0].name == "labels_remove"
    assert index.search("add a label to the ticket", 1)[0].name == "labels_add"


def test_the_catalogs_own_verbs_give_a_sentence_its_intent() -> None:
    index = SearchIndex(PACKS)
    index.sync(doc_from_tool(t) for t in [
        _tool("activity_star-repo", "Star a repository", "write"),
        _tool("activity_star-gist", "Star a gist", "write"),
        _tool("activity_list-starred-repos", "List repositories starred by a user", "read",
              "Lists the repositories a user has starred, newest first, with the repo details."),
    ])
    # "star" opens two write tools' names: "star the repo" asks for a write, not a list.
    assert index.search("star the repo", 1)[0].name == "activity_star-repo"
    assert index.search("repos starred by octocat", 1)[0].name == "activity_list-starred-repos"


def test_deprecated_tools_rank_below_current_ones() -> None:
    current = _tool("teams_delete", "Delete a team", "delete")
    legacy = _tool("teams_delete-legacy", "Delete a team (Legacy)", "delete")
    assert doc_from_tool(legacy).deprecated and not doc_from_tool(current).deprecated
    assert doc_from_tool({**current, "description": "Deletes it.\n\n(deprecated)"}).deprecated
    index = SearchIndex(PACKS)
    index.sync([doc_from_tool(legacy), doc_from_tool(current)])
    assert [h.name for h in index.search("delete the team", 2)] == ["teams_delete", "teams_delete-legacy"]


def test_enum_values_are_searchable_words() -> None:
    doc = doc_from_tool(_tool("pulls_list", "List pull requests", "read",
                              state={"type": "string", "enum": ["open", "closed", "all"]},
                              labels={"type": "array", "items": {"enum": ["needs-triage"]}}))
    assert doc.param_names == "state open closed all labels needs triage"


def test_a_tool_named_for_what_was_asked_is_found_under_many_wordy_ones() -> None:
    # Sixty tools whose long descriptions repeat "markdown" and "html" outrank, by BM25, the one
    # whose name says it; the name/title candidates bring it into the re-rank, which puts it first.
    docs = [ToolDoc(f"comments_get-{i}", f"Get comment {i}", "Markdown and HTML " * 20) for i in range(80)]
    docs.append(ToolDoc("markdown_render", "Render a Markdown document", "Renders text."))
    index = SearchIndex(PACKS)
    index.sync(docs)
    assert index.search("render markdown", 1)[0].name == "markdown_render"
    # And forgets it when it is gone.
    index.sync(docs[:-1])
    assert all(h.name != "markdown_render" for h in index.search("render markdown", 50))


def test_the_plain_operation_on_a_namespace_is_a_candidate() -> None:
    # "rename the repo": the tool named only by its namespace and verb (repos_update) has no word
    # of the query in its name or description; it joins the candidates by (namespace, verb), and
    # is forgotten when it is gone.
    docs = [ToolDoc(f"repos_rename-thing-{i}", f"Rename a repository thing {i}", "Rename or update the repository thing.",
                    kind="write") for i in range(80)]
    docs.append(ToolDoc("repos_update", "Update a repository", "Edit settings.", kind="write"))
    index = SearchIndex(PACKS)
    index.sync(docs)
    assert "repos_update" in [h.name for h in index.search("rename the repo to api-v2", 3)]
    index.sync(docs[:-1])
    assert all(h.name != "repos_update" for h in index.search("rename the repo", 50))


_FUZZ_INDEX = SearchIndex(PACKS)
_FUZZ_INDEX.sync(doc_from_tool(t) for t in [
    _tool("labels_list", "List labels on an issue", "read"), _tool("labels_add", "Add labels", "write"),
    _tool("labels_remove", "Remove a label", "delete"), _tool("users_unfollow", "Unfollow a user", "delete"),
    _tool("teams_delete-legacy", "Delete a team (Legacy)", "delete"),
])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["stop", "following", "show", "me", "my", "who", "label", "labels", "add",
                                 "remove", "take", "off", "team", "legacy", '"', "NEAR(", "*", "OR", "ing",
                                 "make", "open", "a", "to", "acme/api", "#3", "kick", "bob", "who", "starred",
                                 "'x'", "v1.0", "is", "without", "making"]),
                max_size=8).map(" ".join), st.integers(min_value=-2, max_value=60))
def test_any_query_ranks_only_visible_tools_within_the_limit(query: str, limit: int) -> None:
    hidden = "labels_add"
    hits = _FUZZ_INDEX.search(query, limit, visible=lambda name: name != hidden)
    assert len(hits) <= max(1, min(limit, 50))
    assert all(h.name != hidden for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

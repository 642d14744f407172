"""CatalogSearch: the index follows the real Catalog's rebuilds, re-reading only what changed,
and applies the caller's visibility before the top k."""

from __future__ import annotations

from collections.abc import Sequence

from connectors.base import ToolSpec
from gateway.discovery.catalog_search import CatalogSearch
from tests.test_catalog import Fake, _catalog

_DESCRIPTIONS = {
    "create_issue": "Open a new issue in a repository.",
    "list_issues": "List the issues of a repository.",
    "cancel_run": "Cancel a workflow run that is in progress.",
    "query": "Run a read-only SQL query against the reporting database.",
}


class Described(Fake):
    """The catalog tests' connector, with tools that say what they do."""

    def __init__(self, name: str, tools: Sequence[str]) -> None:
        super().__init__(name, tools)
        self.wires = {n: {"name": n, "description": _DESCRIPTIONS.get(n, n), "inputSchema": {"type": "object"}}
                      for n in tools}

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(n, self.wires[n]) for n in self.tool_names]


def _names(result: dict) -> list[str]:  # type: ignore[type-arg]
    return [t["name"] for t in result["structuredContent"]["tools"]]


def test_finds_public_names_with_full_tool_objects() -> None:
    gh = Described("gh", ["create_issue", "list_issues", "cancel_run"])
    db = Described("db", ["query"])
    catalog = _catalog((gh, "gh_"), (db, "db_"))
    search = CatalogSearch(catalog)
    result = search.find("open a ticket", 2)
    assert _names(result)[0] == "gh_create_issue"
    assert result["structuredContent"]["tools"][0] == catalog.snapshot("tools").by_key["gh_create_issue"].wire
    assert _names(search.find("stop the pipeline", 1)) == ["gh_cancel_run"]


def test_follows_rebuilds_and_rereads_only_changed_tools() -> None:
    gh = Described("gh", ["create_issue", "list_issues"])
    catalog = _catalog((gh, "gh_"))
    search = CatalogSearch(catalog)
    assert search.refresh() == (2, 0)
    assert search.refresh() == (0, 0)  # same snapshot: nothing read
    catalog.rebuild()
    assert search.refresh() == (0, 0)  # new snapshot, same tools: nothing written
    gh.tool_names.append("cancel_run")
    gh.wires["cancel_run"] = {"name": "cancel_run", "description": "Cancel a workflow run.", "inputSchema": {}}
    gh.wires["list_issues"] = {**gh.wires["list_issues"], "description": "List tickets, zebra-striped."}
    catalog.rebuild()
    assert search.refresh() == (2, 0)
    assert _names(search.find("zebra", 1)) == ["gh_list_issues"]  # the best; 5 would back-fill the rest
    gh.tool_names.remove("create_issue")
    catalog.rebuild()
    assert _names(search.find("open a ticket", 5)) == ["gh_list_issues", "gh_cancel_run"]  # create_issue is gone


def test_visibility_is_applied_before_the_top_k() -> None:
    gh = Described("gh", ["create_issue", "list_issues", "cancel_run"])
    search = CatalogSearch(_catalog((gh, "gh_")))
    assert _names(search.find("issue", 1, visible=lambda n: n == "gh_list_issues")) == ["gh_list_issues"]
    assert _names(search.find("issue", 5, visible=lambda n: False)) == []

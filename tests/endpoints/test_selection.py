"""The pure selection of an endpoint (gateway.endpoints.selection) and its config model."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import parse_config
from gateway.endpoints.config import EndpointConfig, SelectRule
from gateway.endpoints.selection import Component, fixed_schema, rule_matches, select, with_defaults
from gateway.protocol.errors import ConfigError


def tool(name: str, connector: str = "gh", tags: tuple[str, ...] = (), **annotations: Any) -> Component:
    wire: dict[str, Any] = {"name": name, "description": f"the {name} tool",
                            "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"},
                                                                             "title": {"type": "string"}},
                                            "required": ["owner", "title"]}}
    if annotations:
        wire["annotations"] = annotations
    return Component(name, name, connector, wire, tags)


def resource(uri: str, name: str, connector: str = "docs") -> Component:
    return Component(uri, name, connector, {"uri": uri, "name": name})


def prompt(name: str, connector: str = "kit") -> Component:
    return Component(name, name, connector, {"name": name})


CATALOG = {
    "tools": [tool("gh_issues_create", tags=("issues",)), tool("gh_issues_list", tags=("issues",), readOnlyHint=True),
              tool("gh_pulls_list", tags=("pulls",), readOnlyHint=True), tool("gh_pulls_merge", tags=("pulls",)),
              tool("rb_restart", connector="runbooks")],
    "resources": [resource("docs://runbook/db", "docs_db"), resource("docs://faq", "docs_faq")],
    "resourceTemplates": [Component("docs://runbook/{id}", "docs_page", "docs", {"uriTemplate": "docs://runbook/{id}"})],
    "prompts": [prompt("kit_triage"), prompt("kit_other")],
}


def endpoint(**kw: Any) -> EndpointConfig:
    return EndpointConfig.model_validate({"name": "e", **kw})


def keys(selection: Any, listing: str) -> list[str]:
    return [item.key for item in selection.listings[listing]]


def test_union_of_rules_by_connector_globs_tags_and_annotations() -> None:
    cfg = endpoint(select=[{"connector": "runbooks"},
                           {"tools": ["gh_issues_*", "gh_pulls_*"], "annotations": {"readOnlyHint": True}},
                           {"resources": ["docs://runbook*"], "prompts": ["kit_triage"]}])
    sel = select(cfg, CATALOG)
    assert keys(sel, "tools") == ["gh_issues_list", "gh_pulls_list", "rb_restart"]
    assert keys(sel, "resources") == ["docs://runbook/db"]
    assert keys(sel, "resourceTemplates") == ["docs://runbook/{id}"]
    assert keys(sel, "prompts") == ["kit_triage"]
    assert sel.problems == ()


def test_tags_select_tools_only_and_a_rule_is_a_conjunction() -> None:
    sel = select(endpoint(select=[{"tags": ["pulls"]}]), CATALOG)
    assert keys(sel, "tools") == ["gh_pulls_list", "gh_pulls_merge"]
    assert keys(sel, "prompts") == [] and keys(sel, "resources") == []
    rule = SelectRule(connector="gh", tools=("*_merge",), tags=("issues",))
    assert not rule_matches(rule, "tool", CATALOG["tools"][3])  # the glob matches, the tag does not


def test_resource_globs_match_the_uri_or_the_name() -> None:
    assert keys(select(endpoint(select=[{"resources": ["docs_faq"]}]), CATALOG), "resources") == ["docs://faq"]


def test_rename_description_and_fixed_arguments() -> None:
    cfg = endpoint(select=[{"tools": ["gh_issues_create"]}], rename={"gh_issues_create": "open_ticket"},
                   description={"gh_issues_create": "Open an incident ticket."},
                   defaults={"gh_issues_create": {"owner": "acme"}})
    sel = select(cfg, CATALOG)
    (item,) = sel.listings["tools"]
    assert (item.key, item.source) == ("open_ticket", "gh_issues_create")
    assert item.wire["name"] == "open_ticket" and item.wire["description"] == "Open an incident ticket."
    assert item.wire["inputSchema"]["properties"] == {"title": {"type": "string"}}
    assert item.wire["inputSchema"]["required"] == ["title"]
    assert CATALOG["tools"][0].wire["inputSchema"]["required"] == ["owner", "title"]  # the catalog's is untouched
    assert sel.names["tools"] == {"gh_issues_create": "open_ticket"}


def test_fixed_arguments_win_over_the_callers() -> None:
    assert with_defaults({"owner": "evil", "title": "t"}, {"owner": "acme"}) == {"owner": "acme", "title": "t"}
    assert with_defaults({"a": 1}, None) == {"a": 1}
    assert fixed_schema({"type": "object", "properties": {"a": {}}, "required": ["a"]}, ["a"]) == \
        {"type": "object", "properties": {}}


def test_problems_a_rule_matching_nothing_a_colliding_rename_and_unknown_names() -> None:
    cfg = endpoint(select=[{"tools": ["gh_*"]}, {"connector": "nothing_here"}],
                   rename={"gh_pulls_list": "gh_issues_list", "gh_absent": "x"},
                   defaults={"rb_restart": {"force": True}})
    sel = select(cfg, CATALOG)
    messages = {p.path: p.message for p in sel.problems}
    assert "matches nothing" in messages[("select", 1)]
    assert "collides" in messages[("rename", "gh_pulls_list")]
    assert "not served" in messages[("rename", "gh_absent")]
    assert "not served" in messages[("defaults", "rb_restart")]
    # At run time the name keeps the component that had it; the renamed one is left out.
    assert keys(sel, "tools") == ["gh_issues_create", "gh_issues_list", "gh_pulls_merge"]
    assert sel.listings["tools"][1].source == "gh_issues_list"


def test_renames_may_swap_names() -> None:
    cfg = endpoint(select=[{"tools": ["gh_pulls_*"]}], rename={"gh_pulls_list": "gh_pulls_merge",
                                                               "gh_pulls_merge": "merge"})
    sel = select(cfg, CATALOG)
    assert [(i.key, i.source) for i in sel.listings["tools"]] == [("gh_pulls_merge", "gh_pulls_list"),
                                                                   ("merge", "gh_pulls_merge")]
    assert sel.problems == ()


def test_config_refuses_an_empty_rule_two_endpoints_of_one_name_and_reserved_names() -> None:
    with pytest.raises(ValueError, match="empty rule"):
        SelectRule()
    with pytest.raises(ValueError, match="search endpoint"):
        endpoint(select=[{"connector": "gh"}], discovery="search", rename={"gh_x": "find_tools"})
    with pytest.raises(ValueError, match="two components"):
        endpoint(select=[{"connector": "gh"}], rename={"a": "x", "b": "x"})
    text = "endpoints:\n  - {name: a, select: [{connector: x}]}\n  - {name: a, select: [{connector: x}]}\n"
    with pytest.raises(ConfigError, match="two endpoints are named 'a'"):
        parse_config(text)
    with pytest.raises(ConfigError) as info:
        parse_config("endpoints:\n  - name: a\n    select: []\n")
    assert "line 3" in str(info.value)


def test_admits() -> None:
    cfg = endpoint(select=[{"connector": "gh"}], principals=["group:oncall", "carol"])
    assert cfg.admits("alice", frozenset({"oncall"})) and cfg.admits("carol", frozenset())
    assert not cfg.admits("bob", frozenset({"dev"}))
    assert endpoint(select=[{"connector": "gh"}]).admits("anyone", frozenset())

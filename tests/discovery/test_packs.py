"""Domain packs (issue 28): the general core reads every catalog's queries; a pack's knowledge is
applied only to an endpoint that enabled it (``search: {packs: [github]}``), never by default.

A GitHub word in a query against another catalog changes nothing of the pack's: without the
pack, "move this ticket to the project" asks to move a ticket (the catalog's own words), not to
transfer a repository (GitHub's meaning of the same words)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.discovery import SearchIndex, doc_from_tool
from gateway.discovery.core_senses import CORE_SENSES
from gateway.discovery.lexicon import Lexicon, Pack, SenseTables
from gateway.discovery.packs import KNOWN, core, lexicon, load
from gateway.discovery.query import parse
from gateway.discovery.vocabulary import SYNONYMS
from gateway.protocol.errors import ConfigError
from tests.discovery.github_pack import GITHUB

# A small catalog that is not GitHub's: a help desk with tickets on project boards, and a
# registry of repositories (of container images) that can be transferred.
_OPS: list[tuple[str, str, str, str]] = [  # (operationId, method, path, summary)
    ("moveTicket", "post", "/tickets/{ticket_id}/move", "Move a ticket to another project"),
    ("getTicket", "get", "/tickets/{ticket_id}", "Get a ticket"),
    ("listTickets", "get", "/tickets", "List tickets"),
    ("closeTicket", "post", "/tickets/{ticket_id}/close", "Close a ticket"),
    ("listProjects", "get", "/projects", "List projects"),
    ("createProject", "post", "/projects", "Create a project"),
    ("transferRepository", "post", "/repositories/{repo_id}/transfer",
     "Transfer a repository to another owner"),
    ("listRepositories", "get", "/repositories", "List repositories"),
    ("createIssue", "post", "/issues", "Report an issue with the service"),
    ("listIssues", "get", "/issues", "List the issues reported"),
]
_QUERY = "move this ticket to the project"


def _tool(op: str, method: str, summary: str) -> dict[str, Any]:
    hints = {"readOnlyHint": True} if method == "get" else {"readOnlyHint": False, "destructiveHint": False}
    return {"name": op, "title": summary, "description": summary, "annotations": hints,
            "inputSchema": {"type": "object"}}


def _index(packs: tuple[str, ...] | None) -> SearchIndex:
    index = SearchIndex() if packs is None else SearchIndex(packs)
    index.sync(doc_from_tool(_tool(op, method, summary)) for op, method, _, summary in _OPS)
    return index


def _top(index: SearchIndex, query: str = _QUERY) -> list[str]:
    return [h.name for h in index.search(query, 5)]


def test_no_pack_by_default_and_the_github_pack_only_when_asked() -> None:
    assert SearchIndex().lexicon is core() and core().packs == ()
    assert SearchIndex(("github",)).lexicon is lexicon(["github"]) and lexicon(["github"]).packs == ("github",)
    assert KNOWN == ("github",)
    with pytest.raises(ValueError, match="known packs: github"):
        load("jira")


def test_a_github_word_means_nothing_of_the_packs_without_it() -> None:
    # Each of these is true only in GitHub's world; the core reads the caller's own word.
    for query, meaning in [("move this ticket", "transfer"), ("close the ticket", "issue"),
                           ("list my projects", "repository"), ("rotate the key", "regenerate"),
                           ("push the image", "package"), ("publish the site", "pages"),
                           ("merge the PR", "pull request"), ("report a bug", "issue")]:
        with_pack = {p for c in parse(query, lexicon=GITHUB).concepts for p in c.phrases}
        without = {p for c in parse(query).concepts for p in c.phrases}
        assert meaning in with_pack, query
        assert meaning not in without, query
    # The core map holds none of the pack's keys with the pack's meaning.
    for key, alts in load("github").vocabulary.items():
        assert SYNONYMS.get(key) in (None, alts), key
        if key in SYNONYMS:
            pytest.fail(f"{key} is both the core's and the github pack's")


def test_a_pack_changes_the_ranking_only_of_the_index_that_enabled_it() -> None:
    default, bare, github = _index(None), _index(()), _index(("github",))
    assert _top(default) == _top(bare)  # the default is packs: []
    assert _top(bare)[0] == "moveTicket"  # the catalog's own words
    # GitHub's meanings (transfer, issue, repository) at work: they pull in what the words mean there.
    assert _top(github) != _top(bare)
    assert "transferRepository" in _top(github) and "transferRepository" not in _top(bare)
    # A mapping added to a pack reaches only the indexes that enabled that pack.
    probe = Pack("probe", "a test pack", vocabulary={("ticket",): (("repository",),)})
    probed = _index(())
    probed.lexicon = Lexicon(SYNONYMS, core().soft, core().hints, (probe,))
    assert _top(probed) != _top(bare)
    assert _top(_index(())) == _top(bare)  # the core unchanged by it


def test_sense_tables_are_the_packs_data() -> None:
    # "who starred the repo" asks for the stargazers only with a pack whose tables say so.
    assert any("stargazer" in c.phrases for c in parse("who starred the repo", lexicon=GITHUB).concepts)
    assert not any("stargazer" in c.phrases for c in parse("who starred the repo").concepts)
    # The core's own tables hold English only (being told whenever ..., a reaction, telling
    # someone that ...): none of a pack's domain words.
    assert core().tables == CORE_SENSES
    assert not any(getattr(CORE_SENSES, f) for f in ("agents", "branch_names", "roles", "reactions",
                                                     "plus_one", "named", "numbered", "scopes"))
    # A value's hint in GitHub's world: owner/name is a repository, "#12" an issue or a PR.
    assert {"repo", "issue"} <= {p for c in parse("close #12 in acme/api", lexicon=GITHUB).soft for p in c.phrases}
    assert not {"repo", "issue"} & {p for c in parse("close #12 in acme/api").soft for p in c.phrases}


# -- the endpoint config and find_tools as served ---------------------------------------------------

def _spec(tmp: Path) -> Path:
    paths: dict[str, Any] = {}
    for op, method, path, summary in _OPS:
        params = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in ("ticket_id", "repo_id") if "{" + p + "}" in path]
        paths.setdefault(path, {})[method] = {"operationId": op, "summary": summary, "parameters": params,
                                              "responses": {"200": {"description": "ok"}}}
    doc = {"openapi": "3.0.3", "info": {"title": "desk", "version": "1"},
           "servers": [{"url": "https://desk.example.com/api"}], "paths": paths}
    file = tmp / "desk.json"
    file.write_text(json.dumps(doc))
    return file


_CONFIG = """
audit: {{store: none}}
telemetry: {{metrics: false}}
gateway: {{name: packs}}
auth:
  api_keys: [{{name: alice, key: {key}}}]
connectors:
  - {{name: desk, type: openapi, spec: "{spec}"}}
endpoints:  # semantic: off: what the packs do to the lexical ranking is asserted
  - {{name: plain, discovery: search, select: [{{connector: desk}}], search: {{semantic: off}}}}
  - {{name: none, discovery: search, select: [{{connector: desk}}], search: {{semantic: off, packs: []}}}}
  - {{name: gh, discovery: search, select: [{{connector: desk}}], search: {{semantic: off, packs: [github]}}}}
"""
_KEY = "alice-key-0123456789"


def test_an_unknown_pack_is_a_config_error_naming_the_known_ones() -> None:
    text = textwrap.dedent("""
        connectors: [{name: kit, type: static, prompts: [{name: p, messages: [{text: hi}]}]}]
        endpoints:
          - name: finder
            discovery: search
            select: [{connector: kit}]
            search: {packs: [jira]}
        """)
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert err.value.path == "endpoints[0].search.packs" and "known packs: github" in err.value.message
    assert err.value.line is not None
    ok = parse_config(text.replace("[jira]", "[github]"))
    search = ok.endpoints[0].search
    assert search is not None and search.packs == ("github",)


async def test_find_tools_differs_with_the_pack_and_the_default_is_none(tmp_path: Path) -> None:
    from tests.endpoints.test_e2e import endpoint_session
    from tests.support import running_gateway

    config = _CONFIG.format(key=_KEY, spec=_spec(tmp_path))
    found: dict[str, list[str]] = {}
    async with running_gateway(config, base_dir=str(tmp_path)) as gw:
        for name in ("plain", "none", "gh"):
            async with endpoint_session("streamable_http", gw.url, name, _KEY) as session:
                result = await session.call_tool("find_tools", {"query": _QUERY, "limit": 5})
                assert not result.is_error
                structured: dict[str, Any] = result.structured_content or {}
                found[name] = [t["name"] for t in structured["tools"]]
    assert found["plain"] == found["none"]
    assert found["none"] != found["gh"]
    assert "move" in found["none"][0].lower()  # the catalog's own words first
    assert any("transfer" in n.lower() for n in found["gh"])  # "move" → transfer: GitHub's meaning
    assert not any("transfer" in n.lower() for n in found["none"])


async def test_a_reload_that_turns_the_pack_off_reads_queries_with_the_core(tmp_path: Path) -> None:
    from tests.endpoints.test_e2e import endpoint_session
    from tests.support import config_from, running_gateway

    config = _CONFIG.format(key=_KEY, spec=_spec(tmp_path))

    async def found(gw: Any, name: str) -> list[str]:
        async with endpoint_session("streamable_http", gw.url, name, _KEY) as session:
            result = await session.call_tool("find_tools", {"query": _QUERY, "limit": 5})
            structured: dict[str, Any] = result.structured_content or {}
            return [t["name"] for t in structured["tools"]]

    async with running_gateway(config, base_dir=str(tmp_path)) as gw:
        with_pack, without = await found(gw, "gh"), await found(gw, "none")
        assert with_pack != without
        await gw.gateway.reload(config_from(config.replace("packs: [github]}", "packs: []}"),
                                            tmp_path))
        assert await found(gw, "gh") == without


def test_two_packs_merge_their_words() -> None:
    first = Pack("a", "", vocabulary={("case",): (("ticket",),)},
                 senses=SenseTables(agents={"star": ("stargazer",)}, branch_names=frozenset({"main"})))
    second = Pack("b", "", vocabulary={("case",): (("incident",),)},
                  senses=SenseTables(agents={"watch": ("watcher",)}, branch_names=frozenset({"trunk"}),
                                     why_not=(("rule",),)))
    both = Lexicon(SYNONYMS, core().soft, core().hints, (first, second))
    assert both.packs == ("a", "b")
    assert both.synonyms[("case",)] == (("incident",),)  # the later pack wins
    assert both.tables.agents == {"star": ("stargazer",), "watch": ("watcher",)}
    assert both.tables.branch_names == {"main", "trunk"} and both.tables.why_not == (("rule",),)
    assert Lexicon(SYNONYMS, core().soft, core().hints, (load("github"),)).tables == load("github").senses


def test_the_core_reads_english_senses_for_any_api() -> None:
    # Being told whenever something happens, a reaction as a verb, telling someone that ..., handing
    # work over to someone: how anyone asks, read without a pack (the github pack reads them alike).
    for query, meaning in [("post to https://hooks.example.com/x whenever a task gets created", "webhook"),
                           ("thumbs-up comment 55", "reaction"),
                           ("tell the customer that the order shipped", "message"),
                           ("hand alert 3f2a over to jake@acme.io", "assign")]:
        assert meaning in {p for c in parse(query).concepts for p in c.phrases}, query
    assert "message" not in {p for c in parse("tell the customer that it shipped", lexicon=GITHUB).concepts
                             for p in c.phrases}  # GitHub's own: a comment or a reply



def test_how_much_the_full_text_score_counts_is_the_cores_unless_a_pack_says() -> None:
    from gateway.discovery.lexicon import BM25_SHARE
    assert core().bm25_share == BM25_SHARE
    assert GITHUB.bm25_share == load("github").bm25_share == 0.5  # its map knows GitHub's words
    later = Pack("later", "a test pack", bm25_share=0.9)
    assert Lexicon(SYNONYMS, {}, {}, (load("github"), later)).bm25_share == 0.9  # the last pack decides
    assert Lexicon(SYNONYMS, {}, {}, (later, Pack("silent", "says nothing"))).bm25_share == 0.9


def test_a_packs_own_spec_verbs_ask_for_an_action_only_with_the_pack() -> None:
    # "redeliver" is GitHub's coinage (a webhook delivery redelivered): an action with the pack,
    # a plain word of the caller's without it.
    with_pack = parse("redeliver delivery 42", lexicon=GITHUB)
    assert any(c.verb and "redeliver" in c.phrases for c in with_pack.concepts)
    assert with_pack.intent.kind == "write" and with_pack.intent.strong
    assert not any(c.verb for c in parse("redeliver delivery 42").concepts)
    assert "redeliver" in GITHUB.verbs and "redeliver" not in core().verbs

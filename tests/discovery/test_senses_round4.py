"""Round 4's rules of English and HTTP for tool search: each one on its own, by what it parses to
or ranks, so a later change that breaks a rule fails here and not only as a recall number."""

from __future__ import annotations

from typing import Any

from gateway.discovery import SearchIndex, ToolDoc, doc_from_tool
from gateway.discovery.arguments import tokens
from tests.discovery.github_pack import GITHUB, PACKS, parse


def _said(query: str) -> list[str]:
    return [c.said for c in parse(query).concepts]


def _phrases(query: str) -> dict[str, tuple[str, ...]]:
    """The phrases of each word's concepts (a word carrying two concepts gets both)."""
    out: dict[str, tuple[str, ...]] = {}
    for c in parse(query).concepts:
        out[c.said] = out.get(c.said, ()) + c.phrases
    return out


def test_a_verbs_sense_depends_on_its_object() -> None:
    # "clear" notifications marks them read; "clear" a cache deletes it.
    assert "mark as read" in _phrases("clear all my notifications")["clear"]
    assert "delete" in _phrases("clear the actions cache")["clear"]
    # "lock main" protects a branch; "lock the issue" locks a conversation.
    assert "protection" in _phrases("lock main so only admins can merge")["lock"]
    assert "protection" not in _phrases("lock the issue")["lock"]
    # "hand ticket 77 over to jdoe" assigns it ("over" is no word of its own); a repo is transferred.
    assert _phrases("hand ticket 77 over to jdoe")["hand"] == ("assign", "assignee")
    assert _phrases("hand the repo over to the infra org")["hand"] == ("transfer",)


def test_a_new_person_is_not_something_to_create() -> None:
    assert "create" not in {p for c in parse("onboard a new engineer to the team").concepts for p in c.phrases}
    assert parse("add the new hire to our org").concepts[0].said == "add"
    assert "create" in _phrases("open a new issue")["open"]


def test_clauses_that_describe_are_not_asked_for() -> None:
    # A participle clause after the request says what the message will say.
    assert set(_said("reply on the ticket letting the reporter know the fix is live")) == {"reply", "ticket"}
    # A relative clause without "that" describes the thing ...
    assert "found" not in _said("revoke a leaked token we found in public code")
    # ... unless its verb says the thing's state ("deleted"), and "I need" is no past tense.
    assert "deleted" in _said("bring back a package someone deleted")
    assert "encrypt" in _said("the public key I need to encrypt a secret")


def test_asking_people_to_look_is_a_review_request() -> None:
    concepts = _phrases("ask alice and the platform team to look at my PR")
    assert "requested reviewers" in concepts["ask"] and "review" in concepts["look"]
    assert "alice" not in concepts
    # Asking no person: "ping the webhook to see if it works" is not a review request (the
    # catalog names tools "webhook": no person is called that).
    ping = parse("ping the webhook to see if it works", lambda w: w == "webhook")
    assert "requested reviewers" not in {p for c in ping.concepts for p in c.phrases}


def test_names_as_subjects_and_objects() -> None:
    assert "bob" not in _said("add bob to the backend team")
    assert "alice" not in _said("list the gists alice has shared")
    assert "(name)" in _said("list the gists alice has shared")


def test_owned_by_someone_else_is_not_mine() -> None:
    def mine(query: str) -> bool:
        return any("authenticated user" in c.phrases for c in parse(query).soft)

    assert not mine("repositories owned by user sindresorhus")
    assert mine("repositories owned by me") and mine("repositories I own")


def test_contractions_file_names_and_settings() -> None:
    assert tokens("who's in our org", lambda w: False).words == ["who", "is", "in", "our", "org"]
    assert "who is in" in _said("who's in our org")
    args = tokens("commit an updated package.json to main", lambda w: False)
    assert args.kinds == ["path"] and "json" not in args.words
    # A workflow's file name after "workflow" stays its name, not a path (GitHub's noun: the pack's).
    assert tokens("run workflow ci.yml", lambda w: False, GITHUB.tables).kinds == []
    assert tokens("run workflow ci.yml", lambda w: False).kinds == ["path"]
    assert tokens("the label needs-triage.v2", lambda w: False).kinds == []  # the core's own noun
    # "#12" after a noun with its own numbers (the pack's) is that thing's; else a ticket's number.
    assert tokens("rerun run #12", lambda w: False, GITHUB.tables).kinds == ["one"]
    assert tokens("rerun run #12", lambda w: False).kinds == ["ticket", "one"]
    # GITHUB_TOKEN is a name GitHub's pack reads as words; elsewhere a setting's name.
    assert tokens("rotate GITHUB_TOKEN", lambda w: False, GITHUB.tables).kinds == []
    assert tokens("rotate GITHUB_TOKEN", lambda w: False).kinds == ["setting"]
    args = tokens("set NODE_VERSION=20 as a variable", lambda w: False)
    assert args.kinds == ["setting"] and "node" not in args.words


def test_capabilities_and_locators() -> None:
    # "what secrets can our workflows see": the seeing is a capability, not a request.
    assert "see" not in _said("what secrets can our workflows see in this repo")
    # "on the staging branch" says where (a value of the call), not what.
    # (Since round 6 a query with no thing but values asks about what they are: the file, "(path)".)
    assert _said("read config/settings.yaml on the staging branch") == ["read", "(path)"]
    assert "branch" not in _said("recent commits on the main branch")
    assert "branch" in _said("delete the feature branch")


def test_questions_and_listings_ask_for_facts() -> None:
    assert parse("is acme/web archived").question
    assert parse("get the profile of user bob, including bio").question
    assert not parse("archive the repo").question
    assert ("list",) in {c.phrases for c in parse("every label we use in acme/web").soft}


def _tool(name: str, title: str, out: dict[str, Any] | None, read: bool = True) -> ToolDoc:
    tool: dict[str, Any] = {"name": name, "title": title, "description": title + ".",
                            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": read}}
    if out is not None:
        tool["outputSchema"] = out
    return doc_from_tool(tool)


def test_a_reads_answer_fields_say_what_it_answers() -> None:
    repo = {"type": "object", "$ref": "#/$defs/repo", "$defs": {"repo": {
        "type": "object", "properties": {"archived": {}, "default_branch": {}, "archive_url": {}, "id": {}}}}}
    docs = [
        _tool("repos_get", "Get a repository", repo),
        _tool("repos_list", "List repositories", {"type": "array", "items": repo}),
        _tool("repos_update", "Update a repository", repo, read=False),
        _tool("archives_download", "Download an archive", {"type": "object"}),
    ]
    assert docs[0].answers == "archived default branch"  # links and ids are no answers
    assert docs[1].answers == "" and docs[2].answers == ""  # many things; a write
    index = SearchIndex(PACKS)
    index.sync(docs)
    # A question ranks the read that answers it, and a state asked about ("archived") is a field
    # of that read before it is the word of another tool's name; no question, no such reading.
    assert index.search("what's the default branch of acme/web", 1)[0].name == "repos_get"
    assert [h.name for h in index.search("is acme/web archived", 2)] == ["repos_get", "archives_download"]
    assert index.search("download an archive of acme/web", 1)[0].name == "archives_download"


def test_when_and_negated_clauses_and_names_before_their_noun() -> None:
    # "before merging, I want ...": when, not what; "require reviews before merging" keeps it.
    assert "merging" not in _said("before merging I want to be sure PR 88 has no conflicts")
    assert "merging" in _said("require reviews before merging to main")
    # "PRs that nobody has reviewed": no review asked for; "nobody can force push" is a rule.
    assert "reviewed" not in _said("show open pull requests that nobody has reviewed yet")
    assert "nobody can" in _said("make sure nobody can force push to main")
    # "the needs-review label" is the label's name; "a self-hosted runner" is words.
    assert "review" not in _said("mark every PR with the needs-review label")
    assert "hosted" in _said("deregister a self-hosted runner")
    # "see whether ..." is a yes/no question: it asks for a fact.
    assert parse("need to see whether the docs site has https enforced").question


def test_frames_around_a_request_ask_nothing() -> None:
    # "how do I delete a branch" asks to delete one (not a read, not "my" branches).
    framed = parse("how do I delete a branch on acme/api")
    assert framed.intent.kind == "delete" and not framed.question
    assert not any("authenticated user" in c.phrases for c in framed.soft)
    assert parse("I'd like to archive acme/old").intent.kind == "write"
    assert parse("is there a way to rerun just one failed job").intent.kind == "write"
    # "how many" is a question, not a frame.
    assert parse("how many stars does acme/api have").question

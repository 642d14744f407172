"""Round 6's rules of English and HTTP for tool search, each on its own, by what it parses to, so a
later change that breaks a rule fails here and not only as a recall number."""

from __future__ import annotations

import pytest

from gateway.discovery.arguments import tokens
from gateway.discovery.clauses import split_context
from gateway.discovery.intent import DELETE, READ, WRITE
from gateway.discovery.packs.github.table import add
from gateway.discovery.senses import senses
from tests.discovery.github_pack import GITHUB, parse

imperative, known, phrasal, SYNONYMS = GITHUB.imperative, GITHUB.known, GITHUB.phrasal, GITHUB.synonyms


def _phrases(query: str) -> dict[str, tuple[str, ...]]:
    """The phrases of each word's concepts (a word carrying two concepts gets both)."""
    out: dict[str, tuple[str, ...]] = {}
    for c in parse(query).concepts:
        out[c.said] = out.get(c.said, ()) + c.phrases
    return out


def _soft(query: str) -> set[str]:
    return {p for c in parse(query).soft for p in c.phrases}


# --- the scene set before the request

def test_a_scene_before_the_request_is_split_off_at_the_clause_break() -> None:
    assert split_context("CI went green on 1507, squash it in", imperative) == ("CI went green on 1507", "squash it in")
    assert split_context("bob is on leave; take him off the reviewers", imperative)[1] == "take him off the reviewers"
    assert split_context("new Django project, what ignore file does GitHub suggest", imperative)[0] == \
        "new Django project"
    assert split_context("if the build fails, rerun it", imperative)[0] == "if the build fails"


def test_two_requests_or_a_list_are_not_a_scene() -> None:
    # "open a ticket, assign it to bob" asks for two things: the first is no scene.
    assert split_context("open a ticket, assign it to bob", imperative) == ("", "open a ticket, assign it to bob")
    # After the comma comes no request: "newest first" orders the list.
    assert split_context("List failed runs on branch main, newest first", imperative)[0] == ""
    # A phrasal verb's first word that is a stop word ("from commenting") opens no request.
    assert split_context("preview how my README will look once rendered, from a script", imperative)[0] == ""


def test_the_scene_keeps_its_things_but_not_its_actions_or_intent() -> None:
    query = parse("CI went green on 1507, squash it in")
    said = {c.said for c in query.concepts}
    assert "squash" in said and "ci" in said  # the request's verb, the scene's thing
    assert query.intent.kind == WRITE  # from "squash", not from the scene
    # The scene's verbs ask for nothing: "left" (a participle of the story) is no action.
    assert not any(c.verb for c in parse("author left the company; clear the stale review on PR 61").concepts
                   if c.said in ("left", "company"))


def test_the_request_after_a_scene_decides_a_question() -> None:
    assert parse("new Django project, what ignore file does GitHub suggest for Python").intent.kind == READ


# --- the fields of one item

def test_a_list_of_fields_before_of_asks_for_what_the_item_answers() -> None:
    query = parse("Retrieve the title, body, state and assignees of issue 77 in repository payments/ledger")
    fields = {c.said for c in query.concepts if c.answer}
    assert fields == {"title", "body", "state", "assignees"}
    assert not any(c.answer for c in query.concepts if c.said == "issue")  # the item itself


def test_no_list_or_a_plural_item_or_a_write_asks_for_no_fields() -> None:
    assert not any(c.answer for c in parse("the comments of issue 5").concepts)  # no list
    assert not any(c.answer for c in parse("the names and emails of the members of acme").concepts)  # each member's
    # A write sets its fields: they are no answer fields there.
    assert not any(c.answer for c in parse("update the title and body of issue 5").concepts)


def test_fields_of_a_value_ask_about_what_the_value_is() -> None:
    # The item is an advisory id, taken out as a value: what it is becomes the thing asked about.
    query = parse("Retrieve the affected package versions and severity of GHSA-jfh8-c2jp-5v3q")
    assert any("advisory" in c.phrases for c in query.concepts if not c.answer)


def test_a_field_weighs_fully_in_a_reads_answers_and_half_in_a_name() -> None:
    from gateway.discovery.rank import _ANSWER_WEIGHTS, FIELD_WEIGHTS
    answers = FIELD_WEIGHTS.index(0.3, 5)  # the answers column
    assert _ANSWER_WEIGHTS[answers] == 1.0 and _ANSWER_WEIGHTS[0] == FIELD_WEIGHTS[0] / 2


# --- clauses that say what for, what to say, how long

def test_a_purpose_clause_is_a_state_to_reach_not_an_action() -> None:
    query = parse("clear the stale review on PR 61 so it can merge")
    merge = [c for c in query.concepts if c.said == "merge"]
    assert merge and not merge[0].verb  # kept as a word (a state), asks no merge
    phrases = _phrases("send our scan results to GitHub so they show as alerts")
    assert "so" not in phrases and "they" not in phrases
    assert "alerts" in phrases  # the clause's other words still say where
    assert not any(c.verb for c in parse("send our scan results so they show as alerts").concepts
                   if c.said == "show")


def test_telling_someone_something_on_a_thread_is_a_comment() -> None:
    phrases = _phrases("tell the reporter on issue 88 that 2.4.1 ships the fix")
    assert "comment" in phrases["tell"] and "create" in phrases["tell"]
    assert "fix" not in phrases and "ships" not in phrases  # the message is no word of the request
    assert "comment" in _phrases("let the author of PR 8 know that the tests need a fixture")["let"]
    # Without "that" it is asking someone to look: a review request (round 4), not a comment.
    assert "comment" not in _phrases("tell bob to review my PR").get("tell", ())


def test_a_length_of_time_says_how_long() -> None:
    assert "hours" not in _phrases("let only collaborators comment on this repo for 24 hours")
    assert "hours" in _phrases("at what hours are commits made")  # the hours of a day


def test_why_cant_asks_about_a_rule_and_why_asks_for_logs() -> None:
    assert "protection" in _phrases("why can't I push to release/1.x")["why"]
    assert "log" in _phrases("the build failed, show me why")["why"]


# --- objects, roles, values

def test_clearing_a_review_dismisses_it() -> None:
    assert "dismiss" in _phrases("clear the stale changes-requested review on PR 61")["clear"]
    assert "dismiss" not in _phrases("clear the actions cache")["clear"]


def test_a_role_after_having_is_a_permission() -> None:
    words = "does liam have write or just read on".split()
    assert senses(words, known, phrasal, tables=GITHUB.tables).alts == {3: (("permission", "role"),), 6: (("permission", "role"),)}
    assert _phrases("does liam have write or just read on infra/secrets-vault")["write"] == ("permission", "role")
    assert "create" in _phrases("write a comment on issue 5")["write"]  # a verb elsewhere


def test_an_indefinite_subject_after_before_is_a_later_act() -> None:
    assert not any(c.verb for c in parse("main needs two approvals before anything merges").concepts
                   if c.said.startswith("merge"))


def test_values_advisory_ids_dot_folders_and_named_arguments() -> None:
    assert tokens("severity of CVE-2024-3094", lambda w: False).kinds == ["advisory"]
    assert tokens("details of ghsa-jfh8-c2jp-5v3q", lambda w: False).kinds == ["advisory"]
    assert tokens("push a change to .github/CODEOWNERS", lambda w: False).kinds == ["path"]
    # "with the comment 'LGTM'": the words naming the argument are no words of the request.
    assert "comment" not in tokens("approve PR 5 with the comment 'LGTM'", lambda w: False).words
    assert "comment" in tokens("approve PR 5 and comment 'LGTM'", lambda w: False).words


def test_a_query_of_nothing_but_a_value_asks_about_what_it_is() -> None:
    assert any("advisory" in c.phrases for c in parse("details of GHSA-jfh8-c2jp-5v3q").concepts)


# --- the vocabulary's table

def test_a_vocabulary_key_is_defined_once() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        add("pr", "pull request")
    assert SYNONYMS[("pr",)] == (("pull request", "pull"),)  # unchanged by the refused add


@pytest.mark.parametrize(("query", "word", "meaning"), [
    ("configure the webhook of acme/api", "configure", "update"),
    ("reclaim Copilot licenses from alice", "reclaim", "remove"),
    ("unregister runner 14 from the org", "unregister", "delete"),
    ("fork acme/tool into my account", "fork", "create"),
])
def test_round6_verbs_ask_for_their_action(query: str, word: str, meaning: str) -> None:
    assert meaning in _phrases(query)[word]
    assert parse(query).intent.kind in (WRITE, DELETE)


def test_the_state_a_scene_describes_is_no_thing_of_the_request() -> None:
    said = {c.said for c in parse("CI went green on 1507, squash it in").concepts}
    assert "ci" in said and "green" not in said  # "went green": how CI stands
    # "there are X": X is the subject, not a state.
    assert "fine" in {c.said for c in parse("there are fine-grained requests waiting, approve them").concepts}


def test_being_told_whenever_something_happens_sets_up_a_hook() -> None:
    query = parse("ping our chat server whenever someone opens an issue in acme/web")
    phrases = {p for c in query.concepts for p in c.phrases}
    assert "webhook" in phrases and "ping" not in phrases
    assert query.intent.kind == WRITE
    assert not any(c.verb for c in query.concepts if c.said == "opens")  # the event asks nothing


def test_stopping_a_named_thing_from_reading_takes_its_access_away() -> None:
    assert _phrases("stop repo acme/old from reading the org secret NPM_TOKEN")["stop"] == ("remove", "delete")
    assert "remove" not in _phrases("stop anyone from commenting on issue 3").get("stop anyone from", ())


def test_who_after_people_and_who_can_merge() -> None:
    assert "watcher" in _phrases("list everyone who watches acme/api")["watches"]
    assert "protection" in _phrases("who can merge into main in acme/api")["merge"]
    assert "permission" in _phrases("who can push to this repo")["push"]  # the map's own reading


def test_a_deleted_branch_brought_back_is_created_again() -> None:
    phrases = _phrases("bring back the hotfix branch someone deleted yesterday")
    assert "create" in phrases["bring"] and "ref" in phrases["bring"]
    assert "restore" in _phrases("bring back the package we deleted")["bring back"]


def test_find_the_one_item_looks_it_up_and_find_things_that_searches() -> None:
    assert _phrases("find the release for tag v1.2.0")["find"] == ("get",)
    assert "search" in _phrases("find the files that call deprecated_api")["find"]
    assert "search" in _phrases("find open bugs that mention timeout")["find"]


def test_letting_someone_know_keeps_where_and_drops_the_message() -> None:
    phrases = _phrases("let the contributor know on PR 19 that CI needs a rerun")
    assert "comment" in phrases["let"] and "pr" in phrases
    assert "rerun" not in phrases and "ci" not in phrases and "know" not in phrases


def test_with_a_version_a_tag_is_gits() -> None:
    assert _phrases("delete tag v3.0.0-rc1")["tag"] == ("tag", "ref")
    assert "create" in _phrases("tag commit 9fceb02 as v0.9.1")["tag"]
    assert "label" in _phrases("delete the wontfix tag from issue 5")["tag"]


def test_placing_a_person_in_a_team_adds_them() -> None:
    query = parse("put her on the on-call team")
    assert _phrases("put her on the on-call team")["put"] == ("add",)
    assert any("member" in c.phrases for c in query.concepts)  # the person: users, members
    assert "create" in _phrases("put the config in a gist")["put"]  # storing a thing


def test_an_event_opening_the_request_with_a_target_is_a_hook() -> None:
    query = parse("whenever a release is published, hit https://hooks.acme.dev/release")
    phrases = {p for c in query.concepts for p in c.phrases}
    assert "webhook" in phrases and "release" not in phrases  # the event says which, softly
    assert "release" in {p for c in query.soft for p in c.phrases}
    assert query.intent.kind == WRITE
    assert split_context("whenever a release is published, hit the hook", imperative)[0] == ""
    # A question opening "when" is no event.
    assert "webhook" not in {p for c in parse("when was acme/api last pushed to").concepts for p in c.phrases}


def test_a_reaction_opening_the_request_gives_one() -> None:
    assert _phrases("thumbs-up issue #12")["thumbs"] == ("reaction", "create")
    assert parse("thumbs up the ticket").intent.kind == WRITE
    assert parse("who gave a thumbs up to issue 5").intent.kind == READ  # a question: who reacted


def test_approving_submits_a_new_review() -> None:
    assert "create" in _phrases("approve PR 210")["approve"]


def test_a_word_only_in_a_names_thing_scope_says_less_than_its_object() -> None:
    from gateway.discovery.rank import _match, _phrase, profile
    release = [_phrase("release")]
    reaction = profile("reactions_create-for-release", "", "", "", "", "", "write")
    assert _match(reaction, release, scoped=True) == 0.9  # where it acts: as much as a title word
    assert _match(profile("repos_create-release", "", "", "", "", "", "write"), release, scoped=True) == 1.0
    # An owner scope says whose, as the query does: no discount; nor for a soft hint.
    org = profile("projects_update-item-for-org", "", "", "", "", "", "write")
    assert _match(org, [_phrase("org")], scoped=True) == 1.0
    assert _match(reaction, release) == 1.0


def test_a_hash_number_hints_at_an_issue_or_a_pull_request() -> None:
    assert {"issue", "pull"} <= _soft("squash and merge #99")
    assert "pull" not in _soft("rerun run #512")  # a run's own number
    assert tokens("close #482", lambda w: False).kinds == ["ticket", "one"]


def test_an_environment_named_after_to_is_which_one() -> None:
    assert "production" not in _phrases("what's deployed to production right now")  # a value: which
    assert "production" in _soft("what's deployed to production right now")
    assert "environment" in _phrases("add a secret to the production environment")["production"]  # named as one

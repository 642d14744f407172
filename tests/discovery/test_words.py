"""Name/word splitting and the caller-words → spec-words expansion."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.discovery.synonyms import expand
from gateway.discovery.words import split_words


def test_identifiers_split_into_words() -> None:
    assert split_words("listPullRequests") == ["list", "pull", "requests"]
    assert split_words("pulls/list-review-comments") == ["pulls", "list", "review", "comments"]
    assert split_words("get_HTTPStatus v2") == ["get", "http", "status", "v2"]
    assert split_words("  --  ") == []


def test_callers_words_expand_to_the_specs_words() -> None:
    concepts = {c.said: c.phrases for c in expand("show me the PRs waiting on the pipeline")}
    assert "pull request" in concepts["prs"]
    assert "workflow run" in concepts["pipeline"]
    assert "the" not in concepts and "me" not in concepts


def test_longest_phrase_wins_and_a_key_can_carry_two_concepts() -> None:
    said = [c.said for c in expand("kick off the deploy")]
    assert said == ["kick off", "deploy"]
    ship = expand("ship it")  # "ship it" means merge; plain "ship" is create + release
    assert [c.phrases for c in ship] == [("ship it", "merge")]
    assert [c.phrases[-1] for c in expand("ship 2.4")][:2] == ["release", "create"]


def test_repeated_actions_count_once() -> None:
    assert [c.said for c in expand("make a new repo")] == ["make", "repo"]


def test_a_query_of_only_stop_words_has_no_concepts() -> None:
    assert expand("what is this") == []


def test_stems_fold_inflections() -> None:
    from gateway.discovery.words import stem, stems

    assert stem("starred") == stem("stars") == "star"
    assert stem("reviewers") == stem("review")
    assert stems("Merged pullRequests") == ["merg", "pull", "request"]


def test_map_keys_are_found_in_inflected_forms_but_not_through_other_words() -> None:
    assert "issue" in expand("tickets")[0].phrases
    assert "deployment" in expand("deploying")[0].phrases
    # A stemmer would make "findings" the search verb "find"; only inflections are undone.
    assert expand("findings")[0].phrases == ("findings",)


def test_a_participle_names_a_thing_and_asks_no_action() -> None:
    from gateway.discovery.intent import READ
    from gateway.discovery.synonyms import parse

    q = parse("lines added per week")
    added = next(c for c in q.concepts if c.said == "added")
    assert added.phrases == ("added",) and not added.verb  # a state: no "create" pulled in
    assert q.intent.kind == READ and not q.intent.strong
    assert parse("add a label").intent.kind == "write"


def test_stop_doing_something_is_the_un_action() -> None:
    from gateway.discovery.synonyms import parse

    q = parse("stop following that user")
    assert q.concepts[0].said == "stop following" and "unfollow" in q.concepts[0].phrases
    assert q.intent.kind == "delete"
    assert parse("stop the CI job").concepts[0].phrases == ("stop", "cancel")


def test_phrases_that_ask_nothing_give_no_concept_and_no_hint() -> None:
    from gateway.discovery.synonyms import parse

    q = parse("show me my gists")
    assert [c.said for c in q.concepts] == ["gists"]
    # "my" hints at the authenticated user's tools; "me" of "show me" does not.
    assert [c.said for c in q.soft] == ["my", "(plural)"]
    assert all(c.said != "me" for c in parse("show me the logs").soft)


def test_questions_ask_for_reads_whatever_their_verbs() -> None:
    from gateway.discovery.intent import DELETE, READ, WRITE
    from gateway.discovery.synonyms import parse

    assert parse("has this PR been merged yet").intent.kind == READ
    assert parse("at what hours do people commit").intent.kind == READ
    assert parse("merge the PR").intent.kind == WRITE
    assert parse("remove the label").intent.kind == DELETE
    assert parse("my unread notifications").intent == parse("unread notifications").intent
    assert parse("unread notifications").intent.strong is False  # a noun phrase: most likely a read


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz ABC-_'?!0123456789")), max_size=80)
       | st.lists(st.sampled_from(["stop", "following", "show", "me", "my", "who", "at", "what", "added",
                                   "tickets", "take", "off", "give", "back", "on", "ing", "s", "un"]),
                  max_size=10).map(" ".join))
def test_any_query_parses_to_concepts_of_its_own_words(query: str) -> None:
    # Never raises; every concept and hint carries at least one non-empty phrase; the intent is one
    # of the three kinds.
    from gateway.discovery.synonyms import parse

    q = parse(query)
    assert all(c.phrases and all(p for p in c.phrases) for c in q.concepts + q.soft)
    assert q.intent.kind in ("read", "write", "delete")
    assert q.lead == "" or q.lead in query.lower()

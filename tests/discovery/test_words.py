"""Name/word splitting and the caller-words → spec-words expansion."""

from __future__ import annotations

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

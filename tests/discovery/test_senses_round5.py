"""Round 5's rules of English and HTTP for tool search, each on its own, by what it parses to, so a
later change that breaks a rule fails here and not only as a recall number."""

from __future__ import annotations

from gateway.discovery.arguments import tokens
from tests.discovery.github_pack import GITHUB, parse


def _phrases(query: str) -> dict[str, tuple[str, ...]]:
    """The phrases of each word's concepts (a word carrying two concepts gets both)."""
    out: dict[str, tuple[str, ...]] = {}
    for c in parse(query).concepts:
        out[c.said] = out.get(c.said, ()) + c.phrases
    return out


def _soft(query: str) -> set[str]:
    return {p for c in parse(query).soft for p in c.phrases}


def test_asking_someone_to_take_a_look_requests_their_review() -> None:
    phrases = _phrases("ask alice and bob to take a look at my pull request")
    assert "request" in phrases["ask"] and "review" in phrases["look"]
    assert "take" not in phrases  # the light verb says nothing; its noun is the action


def test_a_role_named_after_who_gets_it_is_a_permission() -> None:
    assert _phrases("give the qa team write on the etl repo")["write"] == ("permission", "role")
    assert "create" in _phrases("write a comment on the issue")["write"]  # a verb elsewhere


def test_closing_a_conversation_locks_it() -> None:
    assert _phrases("close the conversation on PR 5")["close"] == ("lock",)
    assert _phrases("reopen the conversation on issue 5")["reopen"] == ("unlock",)
    assert _phrases("close issue 5")["close"] != ("lock",)


def test_should_is_a_modal_so_nobody_should_states_a_rule() -> None:
    # "nobody should be able to reply": a rule about replying, not a clause describing a thing.
    assert "lock" in {p for ps in _phrases("nobody should be able to reply on issue 88").values() for p in ps}


def test_plus_one_is_a_reaction() -> None:
    assert "reaction" in _phrases("how many people +1'd that comment")["upvote"]
    assert "upvote" not in _phrases("list the top 1 repos")


def test_a_url_value_hints_at_a_webhook_and_a_constant_is_a_name() -> None:
    assert {"webhook", "url"} <= _soft("send push events to https://ci.example.com/hook")
    assert tokens("share the SONAR_TOKEN secret", lambda w: True).kinds == ["setting"]
    # GITHUB_TOKEN is the platform's own name (the github pack's reserved prefix): read as words.
    assert "token" in tokens("give GITHUB_TOKEN write permission", lambda w: True, GITHUB.tables).words


def test_who_pushed_asks_for_the_activity_log() -> None:
    assert "activity" in _phrases("who pushed to main yesterday")["pushed"]


def test_having_someone_look_requests_their_review() -> None:
    assert "request" in _phrases("have carol take a look at PR 31")["have"]
    assert "request" not in _phrases("I have to look at the failing build").get("have", ())


def test_a_later_act_says_what_for_not_what_is_asked() -> None:
    phrases = _phrases("I need the key to encrypt a value before I store it as an Actions secret")
    assert "store" not in phrases and "secret" in phrases  # its verb is dropped, its nouns kept
    assert "merge" in _phrases("merge PR 5")  # (no subordinate clause: nothing dropped)


def test_who_did_a_compound_verb_asks_for_its_agents() -> None:
    assert "activity" in _phrases("who force-pushed to main yesterday")["pushed"]

"""Name/word splitting and the caller-words → spec-words expansion."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.discovery.words import split_words
from tests.discovery.github_pack import expand


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
    assert "search" not in expand("findings")[0].phrases


def test_a_participle_names_a_thing_and_asks_no_action() -> None:
    from gateway.discovery.intent import READ
    from tests.discovery.github_pack import parse

    q = parse("labels added per day")
    added = next(c for c in q.concepts if c.said == "added")
    assert added.phrases == ("added",) and not added.verb  # a state: no "create" pulled in
    assert q.intent.kind == READ and not q.intent.strong
    assert parse("add a label").intent.kind == "write"


def test_stop_doing_something_is_the_un_action() -> None:
    from tests.discovery.github_pack import parse

    q = parse("stop following that user")
    assert q.concepts[0].said == "stop following" and "unfollow" in q.concepts[0].phrases
    assert q.intent.kind == "delete"
    assert parse("stop the CI job").concepts[0].phrases == ("stop", "cancel")


def test_phrases_that_ask_nothing_give_no_concept_and_no_hint() -> None:
    from tests.discovery.github_pack import parse

    q = parse("show me my gists")
    assert [c.said for c in q.concepts] == ["gists"]
    # "my" hints at the authenticated user's tools; "me" of "show me" does not.
    assert [c.said for c in q.soft] == ["my", "(plural)"]
    assert all(c.said != "me" for c in parse("show me the logs").soft)


def test_questions_ask_for_reads_whatever_their_verbs() -> None:
    from gateway.discovery.intent import DELETE, READ, WRITE
    from tests.discovery.github_pack import parse

    assert parse("has this PR been merged yet").intent.kind == READ
    assert parse("at what hours do people commit").intent.kind == READ
    assert parse("merge the PR").intent.kind == WRITE
    assert parse("remove the label").intent.kind == DELETE
    assert parse("my unread notifications").intent == parse("unread notifications").intent
    assert parse("unread notifications").intent.strong is False  # a noun phrase: most likely a read


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz ABC-_'?!0123456789")), max_size=80)
       | st.lists(st.sampled_from(["stop", "following", "show", "me", "my", "who", "at", "what", "added",
                                   "tickets", "take", "off", "give", "back", "on", "ing", "s", "un", "make",
                                   "open", "new", "set", "to", "without", "making", "starred", "does",
                                   "called", "kick", "bob", "42", "#7", "acme/api", "'x y'", "v1.2.0",
                                   "details", "getting", "can", "read", "a", "the", "is", "user"]),
                  max_size=10).map(" ".join))
def test_any_query_parses_to_concepts_of_its_own_words(query: str) -> None:
    # Never raises; every concept and hint carries at least one non-empty phrase; the intent is one
    # of the three kinds.
    from tests.discovery.github_pack import parse

    q = parse(query)
    assert all(c.phrases and all(p for p in c.phrases) for c in q.concepts + q.soft)
    assert q.intent.kind in ("read", "write", "delete")
    assert q.lead == "" or q.lead in query.lower()


def test_argument_values_are_not_searched_words() -> None:
    from gateway.discovery.arguments import tokens

    def ordinary(word: str) -> bool:
        return word in ("ci", "cd", "read", "write")

    agent = tokens("Get details of workflow run 123 in repository acme/api", ordinary)
    assert agent.words == ["get", "details", "of", "workflow", "run", "in", "repository"]
    assert agent.kinds == ["one", "repository"]  # run 123 is one run; acme/api a repository
    assert tokens("set up CI/CD with read/write access", ordinary).kinds == []  # ordinary words
    counts = tokens("the top 10 referrers in the last 30 days", ordinary)
    assert counts.kinds == [] and "10" not in counts.words and "30" not in counts.words
    values = tokens("cut v3.1.0, point docs.acme.com at it, ping @octocat, name it 'big launch'", ordinary)
    assert values.kinds == ["version", "domain", "user"]
    assert "big" not in values.words and "launch" not in values.words
    assert tokens("what's the SHA of deadbeef42", ordinary).kinds == ["sha"]
    assert tokens("ticket #42", ordinary).kinds == ["ticket", "one"]  # one item (round 6: an issue's or PR's)
    assert "jira" in tokens("link JIRA-123 references", ordinary).words  # a key, not an item number


def test_open_is_a_state_after_a_verb_or_before_plural_things_and_create_before_an_article() -> None:
    from tests.discovery.github_pack import parse

    q = parse("Retrieve open pull requests for the repository owner/repo")
    assert q.intent.kind == "read" and q.intent.strong
    opened = next(c for c in q.concepts if c.said == "open")
    assert opened.phrases == ("open",) and not opened.verb
    assert parse("open tickets in the repo").intent.kind == "read"
    assert parse("open a ticket for the crash").intent.kind == "write"
    assert parse("make a new repo").intent.kind == "write"


def test_make_something_so_is_a_setter_and_its_complement_a_value() -> None:
    from tests.discovery.github_pack import parse

    q = parse("make the repo public")
    assert q.concepts[0].phrases == ("set", "update") and q.intent.kind == "write"
    assert [c.said for c in q.soft] == ["public"]  # the new value: a hint, not a concept
    carol = parse("make carol an admin of the org")
    assert "carol" not in [c.said for c in carol.concepts]
    assert any("user" in c.phrases for c in carol.concepts)  # a person's name stands for a user
    assert "org" in [c.said for c in carol.concepts]  # "of the org" still says where
    dev = parse("set the default branch to develop")
    assert [c.said for c in dev.concepts] == ["set", "default branch"] and dev.soft[0].said == "develop"
    assert "file" in [c.said for c in parse("commit a change to a file").concepts]  # a noun "change"


def test_one_item_or_many() -> None:
    from tests.discovery.github_pack import parse

    def hints(query: str) -> list[str]:
        return [c.said for c in parse(query).soft]

    assert "(one)" in hints("details of ticket 42") and "(plural)" not in hints("details of ticket 42")
    assert "(one)" in hints("workflow run 123")
    assert "(plural)" in hints("PR 12's review comments") and "(one)" not in hints("PR 12's review comments")
    assert "(one)" in hints("info on the runner")


def test_questions_about_people_ask_for_who_did_it() -> None:
    from tests.discovery.github_pack import parse

    starred = parse("who starred our repo")
    assert "stargazer" in starred.concepts[0].phrases and "(plural)" in [c.said for c in starred.soft]
    assert "commit" in parse("who changed this file last").concepts[0].phrases
    assert "reviewer" in parse("who's reviewed PR 8").concepts[0].phrases
    follows = parse("who follows octocat")
    assert "octocat" not in [c.said for c in follows.concepts]
    assert "push" in [c.said for c in parse("who can push to main").concepts]  # no agent: a permission


def test_turning_things_on_and_off() -> None:
    from tests.discovery.github_pack import parse

    assert parse("start getting warned about insecure dependencies").concepts[0].phrases == ("enable",)
    assert parse("stop receiving notifications for the repo").intent.kind == "delete"
    assert parse("turn the nightly build off").concepts[0].phrases == ("disable",)
    assert parse("kick bob off the team").intent.kind == "delete"
    assert parse("create a branch off main").intent.kind == "write"  # "off" = from
    told = parse("tell the maintainers about a security hole without making it public")
    assert "make" not in [c.said for c in told.concepts] and "public" not in [c.said for c in told.concepts]


def test_read_verbs_that_do_not_say_one_or_many_are_read_cues_not_concepts() -> None:
    from tests.discovery.github_pack import parse

    for verb in ("retrieve", "obtain", "grab"):
        q = parse(f"{verb} the releases")
        assert [c.said for c in q.concepts] == ["releases"] and q.intent.kind == "read" and q.intent.strong


def test_imperatives_and_yes_no_questions() -> None:
    from tests.discovery.github_pack import parse

    tag = parse("tag a release")
    assert tag.intent.kind == "write" and not tag.intent.strong  # "WORD a ...": an imperative
    assert parse("tickets a week").intent.kind == "read"  # a plural noun opens a noun phrase
    check = parse("check if the branch is protected")
    assert check.intent.kind == "read" and check.intent.strong
    assert [c.said for c in check.concepts] == ["branch", "protected"] and "(yes/no)" in [c.said for c in check.soft]
    alice = parse("is alice a member of the org")
    assert "alice" not in [c.said for c in alice.concepts] and "(yes/no)" in [c.said for c in alice.soft]
    assert "develop" not in [c.said for c in parse("list commits on branch develop").concepts]


def test_a_name_after_a_naming_noun_is_a_value_but_plain_words_stay_words() -> None:
    from tests.discovery.github_pack import parse

    def said(query: str) -> list[str]:
        return [c.said for c in parse(query).concepts]

    assert said("delete the branch feature-x") == ["delete", "branch"]
    assert said("runs of workflow ci.yml") == ["runs", "workflow"]
    assert said("list workflow runs") == ["list", "workflow", "runs"]  # "runs" is no name
    assert "hosted" in said("a self-hosted runner") and "self" in said("a self-hosted runner")
    assert "org" in said("what does the org's member list look like")  # possessive 's is no word
    assert "s" not in [c.said for c in parse("the repo's CI").soft]


def test_paths_users_and_this_one() -> None:
    from gateway.discovery.arguments import tokens
    from tests.discovery.github_pack import parse

    assert tokens("the commit history of src/app.py", lambda w: False).kinds == ["path"]
    assert tokens("in acme/api", lambda w: False).kinds == ["repository"]
    assert tokens("the user 'octocat'", lambda w: False).kinds == ["user"]
    assert "(one)" in [c.said for c in parse("who is this github user").soft]
    asked = [c.said for c in parse("who has been asked to review this PR").soft]
    assert "(one)" not in asked  # the answer is people, not the PR
    assert "(yes/no)" in [c.said for c in parse("has this PR been merged yet").soft]


def test_stemming_is_safe_from_several_threads() -> None:
    # Search endpoints build their indexes in worker threads at once: a shared Snowball stemmer
    # (which keeps the word it works on in the object) raised IndexError mid-word.
    import threading

    from gateway.discovery.words import stem

    words = [f"{w}{i}ing" for i in range(3000) for w in ("repositori", "star", "review")]
    errors: list[BaseException] = []

    def work(part: list[str]) -> None:
        try:
            for w in part:
                stem.__wrapped__(w)
        except BaseException as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(words[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert stem.__wrapped__("stargazers") == "stargaz"

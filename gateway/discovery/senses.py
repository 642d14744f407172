"""Word senses the vocabulary map cannot see: the same word, another job in the sentence.

The map (:mod:`.vocabulary`) reads "open" as *create* ("open a ticket") and "make" as *create*
("make a repo"). English also says "Retrieve *open* pull requests" (an adjective: a state),
"*make* the repo public" and "*make* carol an admin" (a causative: set a property or a role),
"set the default branch *to develop*" (a new value, not a word describing the operation), "who
*starred* the repo" (asks for the people who did it: stargazers), "*stop getting* warned"
(disable), "... *without making* it public" (what is *not* asked), "*clear* my notifications"
(mark them read: a sense that depends on the object), "a token *we found* in public code" and
"... *letting the reporter know* ..." (clauses that describe, not ask), "*ask* alice *to look at*
my PR" (a review request), "add *bob* to the team" (a name). :func:`senses` finds these by
the words around them -- rules of English grammar, not of one API -- and tells the parser what
each such word means in its place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Senses", "senses"]

_DETERMINERS = frozenset("the a an my our your their its his her all any every some no these those this "
                         "that each".split())
# Verbs of reading and words that make "open" describe a state: "list open PRs", "PRs still open".
_READING = frozenset("list show get see view display fetch retrieve find count return give search "
                     "print read lookup".split())
_STATE_BEFORE = _DETERMINERS | _READING | frozenset("still currently are is were was remain stay "
                                                    "of with without for in and or not".split())
_MAKE_CREATE = frozenset("a an new another some one me us".split())  # "make a repo", "make me a gist"
# Verbs whose "to ..." is the new value: "set the default branch to develop", "rename it to api".
_SETTERS = frozenset("set change switch rename update flip turn point".split())
_CLAUSE_END = frozenset("and but so then because so that while when if".split())
# "who starred the repo" asks for the stargazers: the people who do what the verb says.
_AGENTS: dict[str, tuple[str, ...]] = {
    "star": ("stargazer", "star"),
    "watch": ("watcher", "subscriber", "subscription"),
    "follow": ("follower",),
    "fork": ("fork",),
    "assign": ("assignee",),
    "review": ("reviewer", "review"),
    "approve": ("review", "reviewer", "approval"),
    "contribute": ("contributor",),
    "sponsor": ("sponsor",),
    "collaborate": ("collaborator",),
    "change": ("commit", "author"),  # who changed / edited / touched a file: its commits' authors
    "edit": ("commit", "author"),
    "modify": ("commit", "author"),
    "touch": ("commit", "author"),
    "commit": ("commit", "author", "committer"),
    "push": ("activity", "activities", "push"),  # who pushed (to main): the repository's activity log
    "write": ("commit", "author"),
    "wrote": ("commit", "author"),
}
_PREPOSITIONS = frozenset("of in on for at from with within across to".split())
_PARTICLES = frozenset("out off on up down back over away".split())
_NAMING = frozenset("called named titled".split())
_PEOPLE = frozenset("user users member members person people collaborator account login username".split())
# Verbs whose object is a person: "invite carol", "kick bob off the team", "block mallory".
_PEOPLE_VERBS = frozenset("invite kick block unblock ban unban follow unfollow assign unassign promote "
                          "demote ping mention onboard offboard".split())
# "what repos does octocat have", "which orgs does alice belong to": the subject is a name.
_POSSESSING = frozenset("have own belong maintain use follow star watch contribute".split())
# The conventional names of long-lived branches: after "on", "into", "to", "branch" they name one.
_BRANCH_NAMES = frozenset("main master develop development trunk".split())
_ASKING = frozenset("check see verify confirm know ask tell".split())
_YES_NO = frozenset("is are was were does do did has have can".split())
_AUXILIARIES = frozenset("s is was are were has have had been got gets".split())
_MODALS = frozenset("can could may might will would should shall must".split())
_SEEING = frozenset("read see view use".split())
_GETTING = frozenset("getting receiving seeing".split())
# People a team or an org takes in: "add the *new* engineer" adds someone, it creates nothing.
# "add bob to the team", "remove eve from the org": an unknown word between is someone's name.
_PLACING = frozenset("add remove move put drop".split())
_ADDING = frozenset("add move put bring".split())
_NEWCOMERS = frozenset("engineer engineers developer developers devs hire hires teammate teammates intern "
                       "interns member members employee employees user users contributor contributors "
                       "joiner joiners colleague colleagues".split())
# "reply on the ticket *letting the reporter know* ...": a participle clause after the request
# says what the message will say, not what to do.
_TELLING = frozenset("letting telling saying asking explaining noting informing reminding thanking "
                     "announcing".split())
# "a token *we found* in public code", "the PR *I opened*": a relative clause without "that".
_SUBJECTS = frozenset("we i they you he she someone somebody".split())
_IRREGULAR_PAST = frozenset("found saw got made wrote put set left lost built ran took gave sent "
                            "kept began broke".split())
# "ask alice to look at my PR", "tell bob to review it": asking others to look is a review request.
_REQUESTING = frozenset("ask tell ping get have".split())
_LOOKING = frozenset("look check review see read approve".split())
# "take a look", "have a look", "give it a look": a light verb whose noun says the action.
_LIGHT_VERBS = frozenset("take have give".split())
_BRANCH_STATES = frozenset("default protected current base head new old stale remote local same other "
                           "whole".split())
_LOCATORS = frozenset("on in from of into to against".split())
_SUBORDINATORS = frozenset("before after once until".split())
# Indefinite subjects of a later act: "... before *anything* merges", "until *anyone* pushes".
_ANYONE = frozenset("anything anyone anybody everything everyone everybody something it".split())
# Repository roles, named right after who gets them: "give the team *write* on the repo".
_ROLES = frozenset("read write admin maintain triage push pull".split())
_ROLE_AFTER = frozenset("on to access rights permission permissions role over for".split())


@dataclass(slots=True)
class Senses:
    """What some words of a query mean in their place (indexes into its word list)."""

    alts: dict[int, tuple[tuple[str, ...], ...]] = field(default_factory=dict)  # overrides the map
    states: set[int] = field(default_factory=set)  # adjectives: a state asked about, not an action
    values: set[int] = field(default_factory=set)  # a value or a name: a soft hint, not a concept
    skip: set[int] = field(default_factory=set)  # words not asked for
    names: int = 0  # how many person names were found ("does octocat have", "make carol an admin")
    people: bool = False  # "who starred ...": asks for the people who did it (a list)
    yes_no: bool = False  # "check if the branch is protected": a yes/no question
    this: bool = False  # "this github user", "this run": one item pointed at
    fields: set[int] = field(default_factory=set)  # "the title, body and state of issue 77": what it answers
    outcomes: set[int] = field(default_factory=set)  # "... so it can merge": read as a state, not an act


def senses(words: list[str], known: Callable[[str], bool],
           phrasal: Callable[[tuple[str, ...]], tuple[tuple[str, ...], ...] | None],
           named: Callable[[str], bool] | None = None) -> Senses:
    """The senses of *words* (lower-case, as :func:`~gateway.discovery.words.split_words` gives);
    *known* says whether a word is the vocabulary's (stop word, map key or spec verb), *phrasal*
    gives the map's meaning of a two-word phrasal verb ("kick out") or None, *named* (optional)
    whether the catalog names a tool with the word: "assign *issue* 5" has no person's name."""
    def common(word: str) -> bool:
        return known(word) or (named is not None and named(word))

    out = Senses()
    n = len(words)
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < n else ""
        if i in out.skip or i in out.alts:
            continue
        if after and not common(after) and i + 1 not in out.values and (
                word in _PEOPLE_VERBS or (word in _PLACING and words[i + 2:i + 3] in (["to"], ["from"], ["as"]))):
            out.values.add(i + 1)  # "kick bob off the team", "add bob to the backend team": a name
            out.names += 1
        if word in _ADDING and _joining(words, i, common, out):
            continue  # "put her on the on-call team", "add bob to the platform team": a membership
        split = _split_phrasal(words, i, phrasal)
        sense = _object_sense(words, i)
        if sense:
            # "clear my notifications" marks them read, "lock main" protects a branch, "hand
            # ticket 77 over to jdoe" assigns it: the verb's sense depends on its object.
            out.alts[i] = sense
            if split:
                out.skip.add(split[1])
        elif split:
            # "kick dave out of the org", "turn the nightly build off": the verb and its particle
            # mean what "kick out", "turn off" mean; the object between them is read as usual.
            out.alts[i], particle = split
            out.skip.add(particle)
        elif word in _ASKING and after in ("if", "whether"):
            out.skip.update((i, i + 1))  # "check if the branch is protected": a yes/no question
            out.yes_no = True
        elif word in _BRANCH_NAMES and (before in _PREPOSITIONS or before in ("branch", "off", "rename")):
            out.values.add(i)  # "recent commits on main", "rename master to main": a branch's name
        elif word == "off" and after and not phrasal((before, word)):
            out.skip.add(i)  # "a branch off main", "bob off the team": from, not "turn off"
        elif word == "new" and after in _NEWCOMERS:
            out.skip.add(i)  # "onboard a new engineer": a person, nothing to create
        elif word in _TELLING and i > 1 and before not in _DETERMINERS:
            out.skip.update(_clause(words, i))  # "... letting the reporter know the fix is live"
        elif word in _SUBJECTS and 1 < i and before not in _STOP_BEFORE_SUBJECT and _past(after) \
                and not any(known(b) for b in _bases(after)):
            # "a token we found in public code": a description of the thing, not the request; a
            # verb the vocabulary knows says its state and is kept ("a package someone deleted").
            out.skip.update(range(i + 1, _clause(words, i).stop))
        elif word in _REQUESTING and _request(words, i, common, out):
            pass  # "ask alice and the platform team to look at my PR"
        elif word == "branch" and i > 2 and words[i - 2] in _DETERMINERS and words[i - 3] in _LOCATORS \
                and words[i - 1] not in _BRANCH_STATES and not phrasal((words[i - 1], word)):
            # "on the staging branch", "from the feature-x branch": which branch, a value of the
            # call; not "on the default branch" (a key of its own) or "the protected branch".
            out.values.update((i - 1, i))
        elif word == "branch" and i > 1 and before in _BRANCH_NAMES and i - 1 in out.values:
            out.values.add(i)  # "commits on the main branch": the branch names where, not what
        elif word in ("open", "opened", "new") and _adjective(word, before, after):
            out.states.add(i)
        elif word in ("make", "be") and after == "sure":
            out.skip.update((i, i + 1))  # "make sure", "I want to be sure PR 88 has no conflicts"
        elif i == 0 and word in ("before", "after", "when", "while") and after.endswith("ing") and len(after) > 5:
            out.skip.update((i, i + 1))  # "before merging, I want ...": when, not what
        elif word in _DURING and _duration(words, i, out):
            pass  # "let only collaborators comment for 24 hours": how long, not the hours of a day
        elif word in _ROLES and before in _HAVING and (not after or after in _ROLE_AFTER or after in ("or", "and")):
            out.alts[i] = (("permission", "role"),)  # "does liam have write or just read on ...": a role
        elif i == 0 and (word in _REACTING or word == "thumbs" and after in ("up", "down")):
            # "thumbs-up issue #12", "+1 that comment", "heart the release": a reaction used as a
            # verb at the start of a request gives one.
            out.alts[i] = (("reaction",), ("create",))
            if word == "thumbs":
                out.skip.add(i + 1)
        elif word in ("find", "locate") and after in ("the", "this", "that", "my", "our") and i + 2 < n \
                and not _plural(words[i + 2]) and not any(w in _WHO_WHICH for w in words[i + 3:i + 6]):
            out.alts[i] = (("get",),)  # "find the release for tag v1.2.0": look one item up, not a search
        elif word in _PREVENTING and _revoke(words, i, out):
            pass  # "stop repo acme/old from reading the org secret": take its access away
        elif word == "why" and any(w in ("t", "not", "cannot") for w in words[i + 1:i + 4]):
            # "why can't I push to release/1.x", "why won't it merge": what stops it is a rule or a
            # permission, not a failed run's logs (the map's "why").
            out.alts[i] = (("protection", "rule", "permission"),)
        elif i > 1 and word == "so" and _purpose(words, i, out):
            pass  # "clear the stale review on PR 61 *so it can merge*": what for, not what
        elif word in _MESSAGING and after not in ("me", "us") and _message(words, i, out):
            pass  # "tell the reporter on issue 88 that 2.4.1 ships the fix": a comment to post
        elif i > 1 and word in _SUBORDINATORS and (after in _SUBJECTS or after in _ANYONE) and i + 2 < n:
            # "... a key to encrypt a value *before I store* it as a secret": the later act says
            # what for; its nouns still say where ("a secret"), its verb is not asked for.
            out.skip.update(range(i, i + 3))
            if i + 3 < n and words[i + 3] in ("it", "them"):
                out.skip.add(i + 3)
        elif word in ("nobody", "noone") and after not in _MODALS:
            out.skip.update(_clause(words, i))  # "PRs that nobody has reviewed": not asked to review
        elif word in _ROLES and after in _ROLE_AFTER and (before in _ASKED or i - 1 in out.values):
            out.alts[i] = (("permission", "role"),)  # "give the team write on the repo": a role, not an act
        elif word == "make" and after and after not in _MAKE_CREATE:
            # "make the repo public", "make carol an admin": set a property or a role.
            out.alts[i] = (("set", "update"),)
            _complement(words, i, common, out)
        elif word in ("start", "begin", "stop", "quit") and after in _GETTING:
            # "start getting warned about ...": enable; "stop receiving ...": disable or unsubscribe.
            out.alts[i] = (("enable",),) if word in ("start", "begin") else (("disable", "delete"),)
            out.skip.add(i + 1)
        elif word in ("start", "begin") and after.endswith("ing") and len(after) > 5:
            out.skip.add(i)  # "start watching the repo": the watching is what is asked
        elif word == "without" and after.endswith("ing"):
            # "... without making it public": the rest of the clause is not asked for.
            out.skip.update(_clause(words, i))
        elif word in _NAMING and i + 1 < n:
            out.values.update(_clause(words, i + 1))  # "the codespace called fluffy-spoon"
        elif word in _PEOPLE and after and not common(after):
            out.values.add(i + 1)  # "the user torvalds": a name
            out.names += 1
        elif word in _YES_NO and i == 0 and after and not known(after) and i + 2 < n \
                and words[i + 2] in _DETERMINERS:
            out.values.add(i + 1)  # "is alice a member of the org": a name
            out.names += 1
        elif word in ("has", "have", "had") and i > 1 and not common(before) and before not in _DETERMINERS \
                and i - 1 not in out.values and _past(after):
            out.values.add(i - 1)  # "the gists alice has shared": the subject is a name
            out.names += 1
        elif word in ("does", "did", "do", "has") and i and after and not known(after) and i + 2 < n \
                and words[i + 2] in _POSSESSING:
            # "what repos does octocat have": the subject of a question's verb is a name.
            out.values.add(i + 1)
            out.names += 1
        if word == "this" and after and after not in _DETERMINERS and not _plural(after):
            out.this = True  # "this github user", "this PR": one item ("that" is often a pronoun)
        if word in _MODALS and i:
            # "the variables the workflows can read", "what secrets can our workflows see": a
            # capability, not a request.
            seeing = next((j for j in range(i + 1, min(n, i + 5)) if words[j] in _SEEING), None)
            if seeing is not None and not any(w in _CLAUSE_END for w in words[i + 1:seeing]):
                out.skip.add(seeing)
        if word in _SETTERS and after != "up" and before not in _DETERMINERS:  # not "a change to"
            _new_value(words, i, out)
    if words and words[0] in ("who", "whom") and n > 1:
        _agent(words, 1, known, out)
    if words and (words[0] in _NOTIFYING or words[0] in _WHENEVER):
        _event(words, out)  # "ping our chat server whenever someone opens an issue": a hook
    for i in range(1, n - 1):
        if words[i] == "who" and words[i - 1] in _GROUPS:
            _agent(words, i + 1, known, out)  # "list everyone who watches acme/api": the watchers
        if words[i] in _ABLE and words[i - 1] in ("who", "whom"):
            _permission(words, i + 1, out)  # "who can merge into main": a rule on merging
    for j, word in enumerate(words):
        if word == "of":
            out.fields.update(i for i in _fields(words, j) if i not in out.skip and i not in out.values)
    return out


def _purpose(words: list[str], i: int, out: Senses) -> bool:
    """"... so it can merge", "so they show as alerts", "so the status turns green": a purpose
    clause says what the request is for. Its subject and modal are not asked for, its verb is the
    state to reach (a word, not an action: no intent), its other words still say where ("as
    alerts"). False when "so" opens no such clause ("so far")."""
    j = i + 1 + (words[i + 1:i + 2] == ["that"])
    if j >= len(words):
        return False
    if words[j] in _SUBJECTS or words[j] in ("it", "they"):
        skip = [j]
        j += 1
    elif words[j] in _DETERMINERS and j + 2 < len(words):
        skip = [j]
        j += 2  # "so the status turns green": the subject's noun is kept
    else:
        return False
    while j < len(words) and (words[j] in _MODALS or words[j] in ("be", "not", "t")):
        skip.append(j)
        j += 1
    if j >= len(words) or words[j] in _DETERMINERS or words[j] in _PREPOSITIONS:
        return False
    out.skip.update((i, i + 1, *skip) if words[i + 1] == "that" else (i, *skip))
    out.outcomes.add(j)  # the outcome, a state to reach ("so it stops billing"), not an act asked for
    return True


# Verbs that pass a message to someone: "tell the reporter that ...", "let bob know that ...".
_MESSAGING = frozenset("tell inform notify remind let".split())


def _message(words: list[str], i: int, out: Senses) -> bool:
    """"tell the reporter on issue 88 that 2.4.1 ships the fix", "let the author of PR 8 know that
    the tests need a fixture": telling people something on a thread is posting a comment there.
    The verb asks for a comment; what it says (the "that" clause) is no word of the request; the
    words between say where. False without "that" ("tell bob to review it" asks for a review)."""
    know = None
    for j in range(i + 2, min(len(words), i + 10)):
        if words[i] == "let" and words[j] == "know" and know is None:
            know = j  # "let bob know (on PR 19) that ...": "know" is part of the verb
        elif words[j] == "that" and (words[i] != "let" or know is not None):
            out.alts[i] = (("comment", "reply"), ("create",))
            out.skip.update(range(j, _clause(words, j + 1).stop))
            if know is not None:
                out.skip.add(know)
            return True
        elif words[j] in _CLAUSE_END:
            return False
    return False


# Words before a time unit that make it a length of time: "for 24 hours", "within a day".
_DURING = frozenset("for within over during".split())
_UNITS = frozenset("second seconds minute minutes hour hours day days week weeks month months year years".split())
# Having a role: "does liam have *write*", "has *admin* on", "with just *read* on".
_HAVING = frozenset("have has had got get gets with just only".split())


def _duration(words: list[str], i: int, out: Senses) -> bool:
    """"for 24 hours", "for a day", "within the next two weeks": a length of time (its count, a
    number, was taken out before) says for how long, not what; False when no time unit follows."""
    j = i + 1
    while j < len(words) and j - i <= 3 and (words[j] in _DETERMINERS or words[j] in _COUNT_WORDS):
        j += 1
    if j >= len(words) or words[j] not in _UNITS:
        return False
    out.skip.update(range(i, j + 1))
    return True


_COUNT_WORDS = frozenset("one two three four five six seven ten twelve next few couple of another".split())


# Words that end a list of fields read backwards from its "of": "Retrieve *the* title, body ...".
_FIELDS_FROM = _DETERMINERS | _READING | frozenset("is are was were what which me us".split())


def _list_start(words: list[str], k: int) -> bool:
    """Whether *words*[k] opens what precedes a list of fields: a determiner, or a reading verb
    that is not a noun inside the list ("show the ...", not "star *count*")."""
    if words[k] in _DETERMINERS or words[k] in _FIELDS_FROM and words[k] not in _READING:
        return True
    return words[k] in _READING and (k == 0 or words[k - 1] in _FIELDS_FROM or words[k - 1] == "please")


def _fields(words: list[str], j: int) -> range:
    """"Retrieve the title, body, state and assignees of issue 77", "the mergeability status and
    head SHA of PR 4521": a list joined by "and" right before "of" and one item after it names
    the fields of that item's read (what it answers), not things to look for by name. Empty when
    the words before *j* (an "of") are not such a list."""
    k = j - 1
    joined = False
    while k >= 0 and j - k <= 9 and not _list_start(words, k):
        if words[k] == "and":
            joined = True
        elif words[k] in _PREPOSITIONS or words[k] in _CLAUSE_END:
            return range(0)
        k -= 1
    start = k + 1
    if not joined or j - start < 3 or "and" in (words[start], words[j - 1]):
        return range(0)
    thing = j + 1
    while thing < len(words) and words[thing] in _DETERMINERS:
        thing += 1
    if thing < len(words) and _plural(words[thing]):
        return range(0)  # "the names and emails of the members": each member's, a list
    # Nothing after "of" (or a preposition right after it): the item was a value, taken out
    # ("... of GHSA-jfh8-c2jp-5v3q", "... of acme/api in ...").
    return range(start, j)


# "the PR I opened" keeps its "I" (a soft hint), "to be honest we tried" is no relative clause.
_STOP_BEFORE_SUBJECT = _DETERMINERS | _PREPOSITIONS | frozenset("and but so then because if when while that "
                                                                "which".split())


_ASKED = _PEOPLE | _NEWCOMERS | frozenset("team teams someone somebody reviewer reviewers".split())


def _past(word: str) -> bool:
    """Whether *word* may be a past tense ("found", "opened"; not "need")."""
    return word in _IRREGULAR_PAST or (len(word) > 4 and word.endswith("ed") and not word.endswith("eed"))


def _request(words: list[str], i: int, common: Callable[[str], bool], out: Senses) -> bool:
    """"ask alice and the platform team to look at my PR": asking people to look at something is
    requesting their review. Marks the verb (request), the names before "to" (people) and the
    looking verb (review); False when the sentence is not of that shape."""
    if i and words[i - 1] not in _CLAUSE_END:
        return False  # "a way to get ...": "get" opens the request only at a clause's start
    for j in range(i + 1, min(len(words) - 1, i + 8)):
        if words[j] in _CLAUSE_END and words[j] != "and":  # "ask alice and bob to ..."
            return False
        bare = words[i] == "have" and (words[j] in _LOOKING or words[j] in _LIGHT_VERBS)
        if words[j] == "to" or bare:  # "ask bob to look at ...", "have bob look at ..."
            between = words[i + 1:j]
            look = j if bare else j + 1
            if words[look] in _LIGHT_VERBS and look + 2 < len(words) and words[look + 1] in ("a", "another"):
                look += 2  # "to take a look at", "to have another look at": the noun is the verb
            if words[look] not in _LOOKING or not any(w in _ASKED or not common(w) for w in between):
                return False  # "ping the webhook to see if it works" asks no person
            out.alts[i] = (("request", "requested reviewers", "reviewer"),)
            out.alts[look] = (("review", "reviewer"),)
            out.skip.update(range(j, look))
            if look + 1 < len(words) and words[look + 1] in ("at", "over", "through"):
                out.skip.add(look + 1)
            for k in range(i + 1, j):
                if not common(words[k]) and words[k] not in _DETERMINERS:
                    out.values.add(k)
                    out.names += 1
            return True
    return False


# Verbs whose sense depends on the kind of thing they act on (the object's singular form).
_OBJECT_SENSES: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    **{(verb, thing): (("mark as read", "mark", "read"),)
       for verb in ("clear", "dismiss", "empty") for thing in ("notification", "inbox", "alert")
       if (verb, thing) != ("dismiss", "alert")},
    **{("lock", thing): (("protection",), ("update", "set")) for thing in ("branch", "main", "master", "trunk")},
    **{(verb, thing): (("assign", "assignee"),) for verb in ("hand", "pass", "give", "reassign")
       for thing in ("ticket", "issue", "bug", "task", "pr", "pull", "incident")},
    # "close the conversation on PR 5" locks it; "reopen the conversation" unlocks it.
    **{(verb, thing): (("lock",),) for verb in ("close", "end", "hide", "freeze", "shut")
       for thing in ("conversation", "discussion", "thread")},
    **{(verb, thing): (("unlock",),) for verb in ("reopen", "unfreeze", "resume")
       for thing in ("conversation", "discussion", "thread")},
    # "bring back the hotfix branch someone deleted": a deleted branch or tag is created again (a
    # ref), not restored (a package is).
    **{(verb, thing): (("create",), ("ref", "reference")) for verb in ("bring", "restore", "recover", "undelete",
                                                                      "resurrect", "recreate")
       for thing in ("branch", "tag")},
    # "clear the stale changes-requested on PR 61", "withdraw my approval": a submitted review is
    # dismissed, not deleted.
    **{(verb, thing): (("dismiss",), ("review",)) for verb in ("clear", "lift", "withdraw", "retract", "overrule")
       for thing in ("review", "approval", "change", "block")},
}


# Words between a verb and its object that do not change what the object is: "all", the repository
# it is in, a state ("the *stale* review", "the *old* cache").
_OBJECT_SKIPPED = frozenset("all repo repository stale old outdated previous blocking existing current".split())


def _object_sense(words: list[str], i: int) -> tuple[tuple[str, ...], ...] | None:
    """The sense of the verb at *i* for the object after it (determiners, "all", numbers and
    possessives skipped): "clear all my notifications", "lock main", "hand ticket 77 over"."""
    if not any(v == words[i] for v, _ in _OBJECT_SENSES):
        return None
    j = i + 1
    while j < len(words) and (words[j] in _DETERMINERS or words[j] in _OBJECT_SKIPPED or words[j] in _PARTICLES):
        j += 1
    # The head noun may follow a modifier or two: "restore the *hotfix* branch", "lock the release branch".
    for k in range(j, min(len(words), j + 3)):
        if words[k] in _PREPOSITIONS or words[k] in _CLAUSE_END:
            return None
        thing = words[k][:-1] if _plural(words[k]) else words[k]
        sense = _OBJECT_SENSES.get((words[i], thing))
        if sense:
            return sense
    return None


def _split_phrasal(words: list[str], i: int,
                   phrasal: Callable[[tuple[str, ...]], tuple[tuple[str, ...], ...] | None]
                   ) -> tuple[tuple[tuple[str, ...], ...], int] | None:
    """The meaning of a phrasal verb split by its object ("kick dave out") and its particle's
    index: one to three words between the verb and the particle (no preposition among them), and
    the particle ends the phrase or is followed by a preposition or an article ("out of the org",
    "off the team")."""
    for gap in (2, 3, 4):
        j = i + gap
        if j >= len(words) or any(w in _PREPOSITIONS or w in _CLAUSE_END or w in _PARTICLES
                                  for w in words[i + 1:j]):
            return None
        if words[j] in _PARTICLES:
            alts = phrasal((words[i], words[j]))
            # "kick bob off the team" removes bob; only contiguous "kick off" starts something.
            if alts and (words[i], words[j]) != ("kick", "off") and (
                    j + 1 == len(words) or words[j + 1] in _PREPOSITIONS or words[j + 1] in _CLAUSE_END
                    or words[j + 1] in _DETERMINERS):
                return alts, j
    return None


def _adjective(word: str, before: str, after: str) -> bool:
    """Whether "open"/"new" here describes a thing ("open PRs", "the new issues") rather than
    asks to create one ("open a ticket", "new repo called api")."""
    if word == "new":
        return before in _READING or before in ("any", "the")
    if before in _STATE_BEFORE:
        return True
    # "open PRs for the repo": a plural after it is the things in that state.
    return bool(after) and after not in _DETERMINERS and len(after) > 2 and after.endswith("s") \
        and not after.endswith(("ss", "us", "is"))


def _clause(words: list[str], start: int) -> range:
    end = start
    while end < len(words) and (end == start or words[end] not in _CLAUSE_END):
        end += 1
    return range(start, end)


def _new_value(words: list[str], i: int, out: Senses) -> None:
    """The words after "to" in "set X to Y" (or "at" in "point X at Y") up to the clause's end are
    the new value: "set the default branch to develop", "rename the repo to new-name"."""
    for j in range(i + 1, min(len(words), i + 8)):
        if words[j] in _CLAUSE_END:
            return
        if words[j] == "to" or (words[i] == "point" and words[j] == "at"):
            out.values.update(_clause(words, j + 1))
            return


def _complement(words: list[str], i: int, known: Callable[[str], bool], out: Senses) -> None:
    """In "make OBJECT COMPLEMENT" the complement is the new value: "make the repo *public*",
    "make carol *an admin* of the org" (the "of ..." phrase still says where). An object that is
    no word of the vocabulary is a name ("carol")."""
    j = i + 1
    while j < len(words) and words[j] in _DETERMINERS:
        j += 1
    if j >= len(words):
        return
    if j == i + 1 and not known(words[j]):  # a name takes no article: "make carol ...", not "the"
        out.values.add(j)
        out.names += 1
    for k in range(j + 1, len(words)):
        if words[k] in _PREPOSITIONS or words[k] in _CLAUSE_END:
            return
        if words[k] not in _DETERMINERS:
            out.values.add(k)


# People named before a relative "who": "everyone who watches", "the users who starred".
_GROUPS = frozenset("everyone everybody people users accounts members folks those anyone all".split())
_ABLE = frozenset("can may could".split())
# Verbs whose "who can ..." is answered by a permission, not by the people who did it.
_GUARDED = frozenset("merge approve dismiss delete bypass deploy release publish".split())


# Verbs that tell someone or something that a thing happened: "ping", "email me", "notify".
_NOTIFYING = frozenset("ping email notify alert tell message post send call hit page text warn".split())
_WHENEVER = frozenset("when whenever every each anytime".split())


def _event(words: list[str], out: Senses) -> None:
    """"ping our chat server whenever someone opens an issue", "email me when a new release comes
    out": being told each time something happens is a webhook or a subscription. The clause after
    "when"/"whenever"/"every time" names the event: its words are soft hints (which event), none
    of them is asked for ("opens" asks to create nothing)."""
    for i in range(len(words) - 2):
        if words[i] not in _WHENEVER or words[i] in ("every", "each") and words[i + 1] != "time":
            continue
        start = i + 2 if words[i] in ("every", "each") else i + 1
        # The telling verb: first ("ping X whenever ...") or after the event ("whenever ..., hit URL").
        tell = 0 if i else next((k for k in range(start, len(words)) if words[k] in _NOTIFYING), None)
        if tell is None or (i == 0 and words[0] == "when"):
            return  # "when was acme/api last pushed to": a question, no event
        # Being told from now on is set up once: a hook or a subscription created; the verb of
        # telling ("ping", "email") is how, not what ("ping a webhook" is another operation).
        out.alts[i] = (("webhook", "hook", "subscription", "event"), ("create", "set"))
        out.skip.update((tell, *range(i + 1, start)))
        out.values.update(k for k in _clause(words, start) if k != tell and (i or k < tell))
        return


_REACTING = frozenset("upvote downvote heart".split())
# Words after which a description asks to search: "find the file *that* calls deprecated_api()".
_WHO_WHICH = frozenset("that which who where whose mentioning containing with matching".split())
_PRONOUNS = frozenset("her him them me us someone somebody".split())
_INTO = frozenset("to on onto in into".split())
_GROUPINGS = frozenset("team teams org organization squad group crew rotation".split())


def _joining(words: list[str], i: int, common: Callable[[str], bool], out: Senses) -> bool:
    """"put her on the on-call team", "add bob to the platform team": placing a person (a pronoun,
    a name, someone) in a team or an org adds them to it (as a member: the person is a soft hint),
    whatever the placing verb ("put" alone stores something)."""
    j = i + 1
    if j >= len(words) or not (words[j] in _PRONOUNS or words[j] in _NEWCOMERS or not common(words[j])):
        return False
    if j + 1 >= len(words) or words[j + 1] not in _INTO:
        return False
    if not any(w in _GROUPINGS for w in words[j + 2:j + 6]):
        return False
    out.alts[i] = (("add",),)
    out.names += 1  # the person: a soft hint at users and members
    if words[j] not in _PRONOUNS and words[j] not in _NEWCOMERS:
        out.values.add(j)
    return True


_PREVENTING = frozenset("stop prevent keep block".split())
_ACCESSING = frozenset("reading using accessing seeing getting pulling cloning".split())


def _revoke(words: list[str], i: int, out: Senses) -> bool:
    """"stop repo acme/old from reading the org secret", "keep the bot from accessing acme/api":
    stopping a named thing from reaching something takes its access away (remove it from what it
    may use). Not when the thing is people at large ("stop anyone from ...": a rule)."""
    for j in range(i + 1, min(len(words) - 1, i + 5)):
        if words[j] in _GROUPS or words[j] in ("anyone", "anybody", "people", "everyone", "someone"):
            return False
        if words[j] == "from":
            if words[j + 1] not in _ACCESSING:
                return False
            out.alts[i] = (("remove", "delete"),)
            out.skip.update((j, j + 1))
            return True
    return False


def _permission(words: list[str], i: int, out: Senses) -> None:
    """"who can merge into main", "who may approve PRs on acme/api": who is allowed to is a rule
    (a protection, a restriction) or a permission, not the act itself. "who can push" needs no
    rule: the map reads "push" as the permission already."""
    if i < len(words) and words[i] in _GUARDED and i not in out.alts:
        out.alts[i] = (("permission", "protection", "restriction", "access"),)


def _agent(words: list[str], i: int, known: Callable[[str], bool], out: Senses) -> None:
    """"who starred the repo", "who changed this file": the people who did it (a past or present
    tense verb right after "who"; not "who can push", which asks about a permission). Verbs
    without a known agent noun keep the map's meaning."""
    while i + 1 < len(words) and words[i] in _AUXILIARIES:
        i += 1  # "who's assigned", "who has starred"
    if words[i] in ("force", "re", "auto") and i + 1 < len(words):
        i += 1  # "who force-pushed", "who re-ran it": the compound's verb says who is asked for
    word = words[i]
    for base in _bases(word):
        if base in _AGENTS:
            out.alts[i] = (_AGENTS[base],)
            out.people = True
            if i + 1 < len(words) and not known(words[i + 1]):
                out.values.add(i + 1)  # "who follows octocat": a name
                out.names += 1
            return


def _bases(word: str) -> list[str]:
    """The base forms *word* may be an inflection of (starred → star, follows → follow)."""
    if word in ("wrote", "written"):
        return ["write"]
    forms = [word]
    if word.endswith("ed"):
        stem = word[:-2]
        forms += [stem, stem + "e"] + ([stem[:-1]] if len(stem) > 2 and stem[-1] == stem[-2] else [])
    elif word.endswith("es"):
        forms += [word[:-2], word[:-1]]
    elif word.endswith("s"):
        forms.append(word[:-1])
    return forms


def _plural(word: str) -> bool:
    return len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is"))

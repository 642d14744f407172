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
each such word means in its place. The rules about clauses around a request (round 6: purposes,
messages, durations, field lists, events, ...) are in :mod:`.clause_senses`; the word classes both
share and :class:`Senses` in :mod:`.sense_words`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gateway.discovery.clause_senses import (
    duration,
    event,
    field_list,
    joining,
    message,
    permission,
    purpose,
    revoke,
)
from gateway.discovery.lexicon import Alts, SenseTables
from gateway.discovery.sense_words import (
    CLAUSE_END,
    DETERMINERS,
    GROUPS,
    MODALS,
    NEWCOMERS,
    PREPOSITIONS,
    READING,
    SUBJECTS,
    Senses,
    clause,
    plural,
)

__all__ = ["Senses", "senses"]

_NO_TABLES = SenseTables()  # the core alone: no domain's words

# Words that make "open" describe a state: "list open PRs", "PRs still open".
_STATE_BEFORE = DETERMINERS | READING | frozenset("still currently are is were was remain stay "
                                                  "of with without for in and or not".split())
_MAKE_CREATE = frozenset("a an new another some one me us".split())  # "make a repo", "make me a gist"
# Verbs whose "to ..." is the new value: "set the default branch to develop", "rename it to api".
_SETTERS = frozenset("set change switch rename update flip turn point".split())
_PARTICLES = frozenset("out off on up down back over away".split())
_NAMING = frozenset("called named titled".split())
_PEOPLE = frozenset("user users member members person people collaborator account login username".split())
# Verbs whose object is a person: "invite carol", "kick bob off the team", "block mallory".
_PEOPLE_VERBS = frozenset("invite kick block unblock ban unban follow unfollow assign unassign promote "
                          "demote ping mention onboard offboard".split())
# "what repos does octocat have", "which orgs does alice belong to": the subject is a name.
_POSSESSING = frozenset("have own belong maintain use follow star watch contribute".split())
_ENVIRONMENT = frozenset("environment environments env envs".split())
_ASKING = frozenset("check see verify confirm know ask tell".split())
_YES_NO = frozenset("is are was were does do did has have can".split())
_AUXILIARIES = frozenset("s is was are were has have had been got gets".split())
_SEEING = frozenset("read see view use".split())
_GETTING = frozenset("getting receiving seeing".split())
# "add bob to the team", "remove eve from the org": an unknown word between is someone's name.
_PLACING = frozenset("add remove move put drop".split())
# "reply on the ticket *letting the reporter know* ...": a participle clause after the request
# says what the message will say, not what to do.
_TELLING = frozenset("letting telling saying asking explaining noting informing reminding thanking "
                     "announcing".split())
# Past tenses that do not end in -ed ("a token we *found* in public code").
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
_ROLE_AFTER = frozenset("on to access rights permission permissions role over for".split())
# Having a role: "does liam have *write*", "has *admin* on", "with just *read* on".
_HAVING = frozenset("have has had got get gets with just only".split())


def senses(words: list[str], known: Callable[[str], bool],
           phrasal: Callable[[tuple[str, ...]], tuple[tuple[str, ...], ...] | None],
           named: Callable[[str], bool] | None = None, tables: SenseTables = _NO_TABLES) -> Senses:
    """The senses of *words* (lower-case, as :func:`~gateway.discovery.words.split_words` gives);
    *known* says whether a word is the vocabulary's (stop word, map key or spec verb), *phrasal*
    gives the map's meaning of a two-word phrasal verb ("kick out") or None, *named* (optional)
    whether the catalog names a tool with the word: "assign *issue* 5" has no person's name;
    *tables* the enabled domain packs' words and meanings (none: the rules that need them do not
    fire)."""
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
        if joining(words, i, common, out):
            continue  # "put her on the on-call team", "add bob to the platform team": a membership
        split = _split_phrasal(words, i, phrasal)
        sense = _object_sense(words, i, tables.object_senses, tables.object_skipped)
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
            if particle == i + 2 and not common(words[i + 1]) and i + 1 not in out.values:
                out.values.add(i + 1)  # "take jake off the project": one unknown word between is a name
                out.names += 1
        elif word in _ASKING and after in ("if", "whether"):
            out.skip.update((i, i + 1))  # "check if the branch is protected": a yes/no question
            out.yes_no = True
        elif word in tables.environment_names and before in ("to", "on", "in", "into") and after not in _ENVIRONMENT:
            out.values.add(i)  # "what's deployed to production": which environment, a value of the call
        elif word in tables.branch_names and (before in PREPOSITIONS or before in ("branch", "off", "rename")):
            out.values.add(i)  # "recent commits on main", "rename master to main": a branch's name
        elif word == "off" and after and not phrasal((before, word)):
            out.skip.add(i)  # "a branch off main", "bob off the team": from, not "turn off"
        elif word == "new" and after in NEWCOMERS:
            out.skip.add(i)  # "onboard a new engineer": a person, nothing to create
        elif word in _TELLING and i > 1 and before not in DETERMINERS:
            out.skip.update(clause(words, i))  # "... letting the reporter know the fix is live"
        elif word in SUBJECTS and 1 < i and before not in _STOP_BEFORE_SUBJECT and _past(after) \
                and not any(known(b) for b in _bases(after)):
            # "a token we found in public code": a description of the thing, not the request; a
            # verb the vocabulary knows says its state and is kept ("a package someone deleted").
            out.skip.update(range(i + 1, clause(words, i).stop))
        elif word in _REQUESTING and tables.review_request and _request(words, i, common, out, tables):
            pass  # "ask alice and the platform team to look at my PR"
        elif word == "branch" and i > 2 and words[i - 2] in DETERMINERS and words[i - 3] in _LOCATORS \
                and words[i - 1] not in _BRANCH_STATES and not phrasal((words[i - 1], word)):
            # "on the staging branch", "from the feature-x branch": which branch, a value of the
            # call; not "on the default branch" (a key of its own) or "the protected branch".
            out.values.update((i - 1, i))
        elif word == "branch" and i > 1 and before in tables.branch_names and i - 1 in out.values:
            out.values.add(i)  # "commits on the main branch": the branch names where, not what
        elif word in ("open", "opened", "new") and _adjective(word, before, after):
            out.states.add(i)
        elif word in ("make", "be") and after == "sure":
            out.skip.update((i, i + 1))  # "make sure", "I want to be sure PR 88 has no conflicts"
        elif i == 0 and word in ("before", "after", "when", "while") and after.endswith("ing") and len(after) > 5:
            out.skip.update((i, i + 1))  # "before merging, I want ...": when, not what
        elif duration(words, i, out):
            pass  # "let only collaborators comment for 24 hours": how long, not the hours of a day
        elif word in tables.roles and before in _HAVING and (not after or after in _ROLE_AFTER or after in ("or", "and")):
            out.alts[i] = tables.role  # "does liam have write or just read on ...": a role
        elif tables.reaction and i == 0 and (word in tables.reactions or word == "thumbs" and after in ("up", "down")):
            # "thumbs-up issue #12", "+1 that comment", "heart the release": a reaction used as a
            # verb at the start of a request gives one.
            out.alts[i] = tables.reaction
            if word == "thumbs":
                out.skip.add(i + 1)
        elif word in ("find", "locate") and after in ("the", "this", "that", "my", "our") and i + 2 < n \
                and not plural(words[i + 2]) and not any(w in _WHO_WHICH for w in words[i + 3:i + 6]):
            out.alts[i] = (("get",),)  # "find the release for tag v1.2.0": look one item up, not a search
        elif revoke(words, i, out):
            pass  # "stop repo acme/old from reading the org secret": take its access away
        elif tables.why_not and word == "why" and any(w in ("t", "not", "cannot") for w in words[i + 1:i + 4]):
            # "why can't I push to release/1.x", "why won't it merge": what stops it is a rule or a
            # permission, not a failed run's logs (the map's "why").
            out.alts[i] = tables.why_not
        elif purpose(words, i, out):
            pass  # "clear the stale review on PR 61 *so it can merge*": what for, not what
        elif message(words, i, out, tables.message):
            pass  # "tell the reporter on issue 88 that 2.4.1 ships the fix": a comment to post
        elif i > 1 and word in _SUBORDINATORS and (after in SUBJECTS or after in _ANYONE) and i + 2 < n:
            # "... a key to encrypt a value *before I store* it as a secret": the later act says
            # what for; its nouns still say where ("a secret"), its verb is not asked for.
            out.skip.update(range(i, i + 3))
            if i + 3 < n and words[i + 3] in ("it", "them"):
                out.skip.add(i + 3)
        elif word in ("nobody", "noone") and after not in MODALS:
            out.skip.update(clause(words, i))  # "PRs that nobody has reviewed": not asked to review
        elif word in tables.roles and after in _ROLE_AFTER and (before in _ASKED or i - 1 in out.values):
            out.alts[i] = tables.role  # "give the team write on the repo": a role, not an act
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
            out.skip.update(clause(words, i))
        elif word in _NAMING and i + 1 < n:
            out.values.update(clause(words, i + 1))  # "the codespace called fluffy-spoon"
        elif word in _PEOPLE and after and not common(after):
            out.values.add(i + 1)  # "the user torvalds": a name
            out.names += 1
        elif word in _YES_NO and i == 0 and after and not known(after) and i + 2 < n \
                and words[i + 2] in DETERMINERS:
            out.values.add(i + 1)  # "is alice a member of the org": a name
            out.names += 1
        elif word in ("has", "have", "had") and i > 1 and not common(before) and before not in DETERMINERS \
                and i - 1 not in out.values and _past(after):
            out.values.add(i - 1)  # "the gists alice has shared": the subject is a name
            out.names += 1
        elif word in ("does", "did", "do", "has") and i and after and not known(after) and i + 2 < n \
                and words[i + 2] in _POSSESSING:
            # "what repos does octocat have": the subject of a question's verb is a name.
            out.values.add(i + 1)
            out.names += 1
        if word == "this" and after and after not in DETERMINERS and not plural(after):
            out.this = True  # "this github user", "this PR": one item ("that" is often a pronoun)
        if word in MODALS and i:
            # "the variables the workflows can read", "what secrets can our workflows see": a
            # capability, not a request.
            seeing = next((j for j in range(i + 1, min(n, i + 5)) if words[j] in _SEEING), None)
            if seeing is not None and not any(w in CLAUSE_END for w in words[i + 1:seeing]):
                out.skip.add(seeing)
        if word in _SETTERS and after != "up" and before not in DETERMINERS:  # not "a change to"
            _new_value(words, i, out)
    if words and words[0] in ("who", "whom") and n > 1:
        _agent(words, 1, known, out, tables.agents)
    event(words, out, tables.subscription)  # "ping our chat server whenever someone opens an issue": a hook
    for i in range(1, n - 1):
        if words[i] == "who" and words[i - 1] in GROUPS:
            _agent(words, i + 1, known, out, tables.agents)  # "list everyone who watches acme/api": the watchers
        permission(words, i, out, tables.guarded, tables.guard)  # "who can merge into main": a rule on merging
    for j, word in enumerate(words):
        if word == "of":
            out.fields.update(i for i in field_list(words, j) if i not in out.skip and i not in out.values)
    return out


# "the PR I opened" keeps its "I" (a soft hint), "to be honest we tried" is no relative clause.
_STOP_BEFORE_SUBJECT = DETERMINERS | PREPOSITIONS | frozenset("and but so then because if when while that "
                                                                "which".split())


_ASKED = _PEOPLE | NEWCOMERS | frozenset("team teams someone somebody reviewer reviewers".split())


def _past(word: str) -> bool:
    """Whether *word* may be a past tense ("found", "opened"; not "need")."""
    return word in _IRREGULAR_PAST or (len(word) > 4 and word.endswith("ed") and not word.endswith("eed"))


def _request(words: list[str], i: int, common: Callable[[str], bool], out: Senses, tables: SenseTables) -> bool:
    """"ask alice and the platform team to look at my PR": asking people to look at something is
    requesting their review. Marks the verb (request), the names before "to" (people) and the
    looking verb (review); False when the sentence is not of that shape."""
    if i and words[i - 1] not in CLAUSE_END:
        return False  # "a way to get ...": "get" opens the request only at a clause's start
    for j in range(i + 1, min(len(words) - 1, i + 8)):
        if words[j] in CLAUSE_END and words[j] != "and":  # "ask alice and bob to ..."
            return False
        bare = words[i] == "have" and (words[j] in _LOOKING or words[j] in _LIGHT_VERBS)
        if words[j] == "to" or bare:  # "ask bob to look at ...", "have bob look at ..."
            between = words[i + 1:j]
            look = j if bare else j + 1
            if words[look] in _LIGHT_VERBS and look + 2 < len(words) and words[look + 1] in ("a", "another"):
                look += 2  # "to take a look at", "to have another look at": the noun is the verb
            if words[look] not in _LOOKING or not any(w in _ASKED or not common(w) for w in between):
                return False  # "ping the webhook to see if it works" asks no person
            out.alts[i] = tables.review_request
            out.alts[look] = tables.review
            out.skip.update(range(j, look))
            if look + 1 < len(words) and words[look + 1] in ("at", "over", "through"):
                out.skip.add(look + 1)
            for k in range(i + 1, j):
                if not common(words[k]) and words[k] not in DETERMINERS:
                    out.values.add(k)
                    out.names += 1
            return True
    return False


# Words after which a description asks to search: "find the file *that* calls deprecated_api()".
_WHO_WHICH = frozenset("that which who where whose mentioning containing with matching".split())


# Words between a verb and its object that do not change what the object is: "all", a state ("the
# *stale* review", "the *old* cache"); a pack adds its own (where the object is: GitHub's "repo").
_OBJECT_SKIPPED = frozenset("all stale old outdated previous blocking existing current".split())


def _object_sense(words: list[str], i: int, table: Mapping[tuple[str, str], Alts],
                  skipped: frozenset[str] = frozenset()) -> Alts | None:
    """The sense of the verb at *i* for the object after it (determiners, "all", numbers and
    possessives skipped, and the pack's *skipped* words): "clear all my notifications", "lock
    main", "hand ticket 77 over"."""
    if not any(v == words[i] for v, _ in table):
        return None
    j = i + 1
    while j < len(words) and (words[j] in DETERMINERS or words[j] in _OBJECT_SKIPPED or words[j] in skipped
                                  or words[j] in _PARTICLES):
        j += 1
    # The head noun may follow a modifier or two: "restore the *hotfix* branch", "lock the release branch".
    for k in range(j, min(len(words), j + 3)):
        if words[k] in PREPOSITIONS or words[k] in CLAUSE_END:
            return None
        thing = words[k][:-1] if plural(words[k]) else words[k]
        sense = table.get((words[i], thing))
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
        if j >= len(words) or any(w in PREPOSITIONS or w in CLAUSE_END or w in _PARTICLES
                                  for w in words[i + 1:j]):
            return None
        if words[j] in _PARTICLES:
            alts = phrasal((words[i], words[j]))
            # "kick bob off the team" removes bob; only contiguous "kick off" starts something.
            if alts and (words[i], words[j]) != ("kick", "off") and (
                    j + 1 == len(words) or words[j + 1] in PREPOSITIONS or words[j + 1] in CLAUSE_END
                    or words[j + 1] in DETERMINERS):
                return alts, j
    return None


def _adjective(word: str, before: str, after: str) -> bool:
    """Whether "open"/"new" here describes a thing ("open PRs", "the new issues") rather than
    asks to create one ("open a ticket", "new repo called api")."""
    if word == "new":
        return before in READING or before in ("any", "the")
    if before in _STATE_BEFORE:
        return True
    # "open PRs for the repo": a plural after it is the things in that state.
    return bool(after) and after not in DETERMINERS and len(after) > 2 and after.endswith("s") \
        and not after.endswith(("ss", "us", "is"))


def _new_value(words: list[str], i: int, out: Senses) -> None:
    """The words after "to" in "set X to Y" (or "at" in "point X at Y") up to the clause's end are
    the new value: "set the default branch to develop", "rename the repo to new-name"."""
    for j in range(i + 1, min(len(words), i + 8)):
        if words[j] in CLAUSE_END:
            return
        if words[j] == "to" or (words[i] == "point" and words[j] == "at"):
            out.values.update(clause(words, j + 1))
            return


def _complement(words: list[str], i: int, known: Callable[[str], bool], out: Senses) -> None:
    """In "make OBJECT COMPLEMENT" the complement is the new value: "make the repo *public*",
    "make carol *an admin* of the org" (the "of ..." phrase still says where). An object that is
    no word of the vocabulary is a name ("carol")."""
    j = i + 1
    while j < len(words) and words[j] in DETERMINERS:
        j += 1
    if j >= len(words):
        return
    if j == i + 1 and not known(words[j]):  # a name takes no article: "make carol ...", not "the"
        out.values.add(j)
        out.names += 1
    for k in range(j + 1, len(words)):
        if words[k] in PREPOSITIONS or words[k] in CLAUSE_END:
            return
        if words[k] not in DETERMINERS:
            out.values.add(k)


def _agent(words: list[str], i: int, known: Callable[[str], bool], out: Senses,
           agents: Mapping[str, tuple[str, ...]]) -> None:
    """"who starred the repo", "who changed this file": the people who did it (a past or present
    tense verb right after "who"; not "who can push", which asks about a permission). Verbs
    without a known agent noun keep the map's meaning."""
    while i + 1 < len(words) and words[i] in _AUXILIARIES:
        i += 1  # "who's assigned", "who has starred"
    if words[i] in ("force", "re", "auto") and i + 1 < len(words):
        i += 1  # "who force-pushed", "who re-ran it": the compound's verb says who is asked for
    word = words[i]
    for base in _bases(word):
        if base in agents:
            out.alts[i] = (agents[base],)
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

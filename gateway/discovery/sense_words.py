"""The word classes the sense rules share, and :class:`Senses`, what they find.

:mod:`.senses` reads the senses of a query's words; :mod:`.clause_senses` the round-6 rules about
clauses around a request. Both read words by these classes (determiners, reading verbs, clause
ends, prepositions, subjects, modals, newcomers, groups of people) and write a :class:`Senses`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Senses", "clause", "plural", "DETERMINERS", "READING", "CLAUSE_END", "PREPOSITIONS", "SUBJECTS",
           "MODALS", "NEWCOMERS", "GROUPS"]

DETERMINERS = frozenset("the a an my our your their its his her all any every some no these those this "
                        "that each".split())
# Verbs of reading: "list open PRs", "show the title, body ... of issue 77".
READING = frozenset("list show get see view display fetch retrieve find count return give search "
                    "print read lookup".split())
CLAUSE_END = frozenset("and but so then because so that while when if".split())
PREPOSITIONS = frozenset("of in on for at from with within across to".split())
# "a token *we found* in public code", "the PR *I opened*": a relative clause without "that".
SUBJECTS = frozenset("we i they you he she someone somebody".split())
MODALS = frozenset("can could may might will would should shall must".split())
# People a team or an org takes in: "add the *new* engineer" adds someone, it creates nothing.
NEWCOMERS = frozenset("engineer engineers developer developers devs hire hires teammate teammates intern "
                      "interns member members employee employees user users contributor contributors "
                      "joiner joiners colleague colleagues".split())
# People named before a relative "who": "everyone who watches", "the users who starred".
GROUPS = frozenset("everyone everybody people users accounts members folks those anyone all".split())


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


def clause(words: list[str], start: int) -> range:
    """The clause of *words* from *start* to the next word that ends one ("and", "so", ...)."""
    end = start
    while end < len(words) and (end == start or words[end] not in CLAUSE_END):
        end += 1
    return range(start, end)


def plural(word: str) -> bool:
    """Whether *word* looks like a plural ("runs", not "status")."""
    return len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is"))

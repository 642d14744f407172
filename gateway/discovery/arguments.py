"""Argument values in a query: what the caller will pass, not words describing the operation.

"Get details of workflow run 123 in repository acme/api" names one run (``123``) of one repository
(``acme/api``); an agent writes queries like that. Searched as words, ``123``, ``acme`` and ``api``
are noise ("api" matches the Meta API, "octocat" the Octocat endpoint), and "details of ... 123"
says *get one*, not *list*. :func:`tokens` splits a query into words and typed values:

* quoted text (``"v2 launch"``, ```main```) and URLs: a literal value; the words naming it in
  "with the comment 'LGTM'" name an argument, not what is asked;
* advisory ids (``GHSA-jfh8-c2jp-5v3q``, ``CVE-2024-3094``): an advisory;
* file paths (``src/app.py``, ``docs/guide/``, ``.github/CODEOWNERS``: a dot-folder is no owner) and file names with a known extension
  (``package.json``, ``README.md``; not after a naming noun: "workflow ``ci.yml``" is its name): a
  file's path;
* settings (``NODE_VERSION=20``): a variable's or a configuration's value;
* ``owner/name`` (two slash-joined names that are not a pair of ordinary words like ``ci/cd`` or
  ``read/write``): a repository;
* versions (``v3.1.0``, ``1.4.0``): a tag or release name; ``@name``: a user; host names
  (``docs.acme.com``): a domain; e-mail addresses; hexadecimal ids of 7+ characters with a digit
  and a letter: a commit SHA;
* an identifier-like token (``feature-x``, ``ci.yml``) right after a noun that names things
  (branch, label, workflow, file, ...): that thing's name; elsewhere it is words ("self-hosted");
* opaque ids (``CA9f2c1e0a7b``, ``AC33b9``: letters and digits alternating, unlike a word with a
  number in it such as ``sha256`` or ``i18n``) and typed ids (``cus_P2x9``, ``sub_1Oa9``: a type
  prefix, an underscore and a code): one item; a typed id's prefix is kept
  (:attr:`Arguments.prefixes`) for the catalog to say what it abbreviates;
* numbers and ``#12``: an identifier when they follow a noun ("run 123", "ticket #42") -- evidence
  that the caller asks about *one* item -- or a count ("the last 30 days", "top 10").

A contracted "is" ("who's in the org", "what's the default branch") is read as "is", not as a
possessive. Each value kind carries *hint* words for the re-rank's soft concepts (a bonus for tools whose name
or title has them, never a cost): a domain hints at "domain"/"cname", a version at
"tag"/"release". The values themselves are never searched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.discovery.lexicon import SenseTables
from gateway.discovery.words import split_words

__all__ = ["Arguments", "tokens", "HINTS", "KINDS"]

# What a value of each kind hints at (soft concepts: a bonus in a tool's name or title): the core's,
# true of any API (a user's handle, an e-mail address, a path, a version). A domain pack adds what
# a value means in its world (the GitHub pack: owner/name → a repository, a SHA → a commit, "#N"
# → an issue or a pull request); a kind with no hint is still a value, taken out of the words.
HINTS: dict[str, tuple[str, ...]] = {
    "version": ("version",),
    "user": ("user", "username"),
    "domain": ("domain", "url"),
    "url": ("url",),
    "email": ("email",),
    "path": ("file", "path"),
    "setting": ("variable", "config"),
    "one": ("get",),
}
# Every kind of value :func:`tokens` finds (a soft hint's ``said`` when a lexicon hints at it).
KINDS = frozenset({"repository", "version", "user", "domain", "url", "email", "sha", "path", "setting",
                   "advisory", "one", "ticket"})

_TOKEN = re.compile(r"""
    (?P<quoted>(?<!\w)"[^"]+"|(?<!\w)'[^']+'(?!\w)|`[^`]+`|“[^”]+”|‘[^’]+’)
  | (?P<url>\b(?:https?|ssh|git)://\S+)
  | (?P<advisory>\b(?:(?i:ghsa)(?:-[0-9a-zA-Z]{4}){3}|(?i:cve)-\d{4}-\d{4,})\b)
  | (?P<email>\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+)
  | (?P<user>(?<![\w@])@[A-Za-z0-9][\w-]*)
  | (?P<version>(?<![\w.])[vV]?\d+(?:\.\d+)+(?:-[\w.]+)?(?![\w.])|(?<![\w.])[vV]\d+(?![\w.]))
  | (?P<domain>(?<![\w.@/])[A-Za-z][\w-]*(?:\.[\w-]+)*\.(?:com|org|net|io|dev|app|co|ai|sh|cloud|info|biz|us|uk|de)(?![\w.]))
  | (?P<setting>(?<![\w.-])[A-Za-z_][\w.-]*=\S+)
  | (?P<path>(?<![\w/{.])(?:[\w.-]+/)+[\w-]+\.[A-Za-z0-9]{1,8}(?![\w/}])|(?<![\w{])/?(?:[\w.-]+/){2,}[\w.-]*
            |(?<![\w/{.])\.[A-Za-z][\w-]*/[\w.-]+)
  | (?P<slash>(?<![\w/{.])[A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9](?![\w/}]))
  | (?P<ident>(?<![\w.-])[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)+(?![\w-]))
  | (?P<sha>(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-]))
  | (?P<number>(?<![\w.-])\#?\d+(?![\w.]))
  | (?P<opaque>(?<![\w.-])(?=(?:[A-Za-z]*\d){2})(?=(?:\d*[A-Za-z]){2})[A-Za-z0-9]{4,}(?![\w.-]))
""", re.VERBOSE)
# An object's id with its type's prefix ("cus_P2x9", "sub_1Oa9", "acct_1Nv0"): a short lower-case
# prefix, an underscore and a code with a digit (snake_case words have none).
_TYPED_ID = re.compile(r"[a-z]{2,5}_(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{3,}|[a-z]{2,5}_\d{3,}")

# An upper-case name with underscores is an environment variable's or a secret's, not words (a
# pack may name its platform's reserved prefixes, read as words: SenseTables.reserved_constants).
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# Nouns followed by the name of the thing they are: "branch feature-x", "label needs-triage"
# (a pack adds its world's: SenseTables.named).
_NAMED = frozenset("branch branches tag label labels team org organization milestone environment file "
                   "project package topic".split())
# Nouns before which an identifier-like token is the thing's name: "the needs-review label".
_NAMED_AFTER = frozenset("label labels branch tag team environment milestone topic".split())
_PEOPLE = frozenset("user users member person collaborator username login author".split())
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
# "who's in the org", "what's the default branch": a contracted "is", not a possessive.
_IS = re.compile(r"\b(who|what|that|there|it|where|how|here|when|which)['’]s\b", re.IGNORECASE)
# "don't", "isn't", "won't": the auxiliary and the "t" the sense rules read as "not" ("why can't
# I push"), so that no "don"/"isn" is left among the words.
_NOT = re.compile(r"\b([A-Za-z]+?)n['’]t\b")
_NOT_BASE = {"wo": "will", "ca": "can", "sha": "shall"}
# The extensions of files people name without a folder ("package.json", "README.md").
_FILE = re.compile(r"\.(json|ya?ml|md|txt|py|js|ts|tsx|jsx|toml|lock|xml|cfg|ini|sh|go|rs|java|rb|tf|gradle|"
                   r"csv|html|css|sql|conf|env|dockerfile|mod|sum|kt|swift|c|h|cpp|php)$", re.IGNORECASE)
# "with the comment 'LGTM'", "with a message of 'release 1.2'": up to three words naming an argument.
_ARGUMENT_NAME = re.compile(r"\bwith\s+(?:the|a|an)\s+((?:[A-Za-z]+\s+){0,2}[A-Za-z]+)\s*(?:of\s*|:\s*)?$",
                            re.IGNORECASE)
# Words after which a number is a count or a limit, not an identifier ("the last 30", "top 10").
_COUNTS = frozenset("last first top past next over under than least most every per within about "
                    "around only all".split())


@dataclass(slots=True)
class Arguments:
    """A query's words with its values taken out, and what the values say."""

    words: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # value kinds found, in order (see HINTS)
    prefixes: list[str] = field(default_factory=list)  # type prefixes of typed ids ("cus" of "cus_P2x9")
    # Where the values are: (start, end, kind) in ``text``, the query as read (the embedding's
    # query text takes them out: hybrid.query_text). A "name" is an identifier named by its noun.
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    text: str = ""


_NO_TABLES = SenseTables()


def tokens(query: str, ordinary: Callable[[str], bool], tables: SenseTables = _NO_TABLES, *,
           raw: bool = False) -> Arguments:
    """The words of *query* and the kinds of its values. *ordinary* says whether a word is one of
    the vocabulary's (a stop word or a map key): ``ci/cd`` and ``read/write`` are words, not an
    owner/name. *tables* are the enabled packs' words: more nouns that name things
    (``named``/``named_after``), nouns with their own "#N" (``numbered``; without one, "#N" is a
    ticket's number) and reserved variable prefixes read as words. *raw*: read the query as typed
    (no "is" for a contracted "'s", no possessive dropped), so that the values' ``spans`` index it."""
    out = Arguments()
    naming, naming_after = _NAMED | tables.named, _NAMED_AFTER | tables.named_after
    if not raw:
        query = _POSSESSIVE.sub("", _IS.sub(r"\1 is", query))  # "the repo's CI": the repo, CI (no word "s")
        query = _NOT.sub(lambda m: f"{_NOT_BASE.get(m.group(1).lower(), m.group(1))} t", query)
    out.text = query
    pos = 0
    for m in _TOKEN.finditer(query):
        out.words.extend(split_words(query[pos:m.start()]))
        pos = m.end()
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "slash":
            left, _, right = text.partition("/")
            parts = split_words(left) + split_words(right)
            if all(ordinary(w) for w in parts):
                out.words.extend(parts)
                continue
            kind = "repository"
        elif kind == "opaque" or (kind == "ident" and _TYPED_ID.fullmatch(text)):
            # "hang up CA9f2c1e0a7b", "cancel sub_1Oa9": an opaque id names one item; its letters
            # are no words. A word with a number in it ("sha256", "i18n", "arm64") changes
            # between letters and digits once or twice, an id's code more often.
            if kind == "opaque" and _changes(text) < 3:
                out.words.extend(split_words(text))
                continue
            if kind == "ident":
                out.prefixes.append(text.partition("_")[0])
            kind = "one"
        elif kind == "ident" and _CONSTANT.fullmatch(text) and not text.startswith(tables.reserved_constants):
            kind = "setting"  # "the secret SONAR_TOKEN", "NODE_VERSION": a variable's or secret's name
        elif kind == "ident":
            # "branch feature-x", "the label needs-triage", "workflow ci.yml": the thing's name;
            # elsewhere an identifier-like token is words ("self-hosted", "re-run").
            following = split_words(query[pos:pos + 40])[:1]
            if (out.words and out.words[-1] in naming) or (following and following[0] in naming_after):
                out.spans.append((m.start(), m.end(), "name"))
                continue  # "the needs-review label": the label's name (not "a self-hosted runner")
            if not _FILE.search(text):
                out.words.extend(split_words(text))
                continue
            kind = "path"  # "commit an updated package.json": a file's name
        elif kind == "number":
            after = split_words(query[pos:pos + 40])[:1]
            before = out.words[-1] if out.words else ""
            # "run 123", "ticket #42": one item; "the last 30 days", "top 10 referrers": a count.
            if text.startswith("#") or (before and before not in _COUNTS and not before.isdigit()
                                        and not (after and _plural(after[0]))):
                kind = "one"
                if text.startswith("#") and before not in tables.numbered:
                    out.kinds.append("ticket")  # "close #482": an issue's or a PR's number
            else:
                continue
        elif kind == "quoted" and out.words and out.words[-1] in _PEOPLE:
            kind = "user"  # "the user 'octocat'"
        elif kind == "quoted":
            # "approve it with the comment 'LGTM'", "an issue with the title 'flaky test'": the
            # words between "with the" and a quoted value name the argument, not what is asked.
            out.spans.append((m.start(), m.end(), "quoted"))
            named = _ARGUMENT_NAME.search(query[:m.start()])
            if named:
                del out.words[len(out.words) - len(split_words(named.group(1))):]
            continue
        out.kinds.append(kind)
        out.spans.append((m.start(), m.end(), kind))
    out.words.extend(split_words(query[pos:]))
    return out


def _plural(word: str) -> bool:
    return len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _changes(token: str) -> int:
    """How many times *token* changes between a letter and a digit ("AC33b9": 3, "sha256": 1)."""
    return sum(a.isdigit() != b.isdigit() for a, b in zip(token, token[1:], strict=False))


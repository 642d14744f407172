"""The ``github`` pack: GitHub's world, for an endpoint serving GitHub's REST API.

What only GitHub's world makes true: "ticket"/"bug"/"task" → issue, "project" → repository, "PR"
→ pull request, "pipeline" → workflow run, "move" → transfer, "image" → package, "site" → Pages
(the map: :mod:`.code`, :mod:`.tickets`, :mod:`.ci`, :mod:`.security`, :mod:`.people`,
:mod:`.verbs`, :mod:`.general`); what a value means here (owner/name → a repository, a SHA → a
commit, ``#N`` → an issue or a pull request); and the tables GitHub's sense rules read ("who
starred" → stargazers, "lock main" → a branch protection, "ask bob to look at my PR" → a review
request). Enabled per endpoint: ``search: {packs: [github]}``.
"""

from __future__ import annotations

# Importing a module adds its entries to the map.
from gateway.discovery.lexicon import Pack, SenseTables
from gateway.discovery.packs.github import ci, code, general, people, security, tickets, verbs  # noqa: F401
from gateway.discovery.packs.github.table import GITHUB

__all__ = ["PACK"]

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

SENSES = SenseTables(
    agents=_AGENTS,
    object_senses=_OBJECT_SENSES,
    # The conventional names of long-lived branches: after "on", "into", "to", "branch" they name one.
    branch_names=frozenset("main master develop development trunk".split()),
    # The conventional names of deployment environments: "deployed *to production*" names one.
    environment_names=frozenset("production prod staging stage qa dev uat canary preview".split()),
    # Repository roles, named right after who gets them: "give the team *write* on the repo".
    roles=frozenset("read write admin maintain triage push pull".split()),
    role=(("permission", "role"),),
    reactions=frozenset("upvote downvote heart".split()),
    reaction=(("reaction",), ("create",)),
    plus_one="upvote",  # "+1'd", "-1": a reaction, not the number 1
    review_request=(("request", "requested reviewers", "reviewer"),),
    review=(("review", "reviewer"),),
    why_not=(("protection", "rule", "permission"),),
    message=(("comment", "reply"), ("create",)),
    subscription=(("webhook", "hook", "subscription", "event"), ("create", "set")),
    guarded=frozenset("merge approve dismiss delete bypass deploy release publish".split()),
    guard=(("permission", "protection", "restriction", "access"),),
    # "delete tag v3.0.0-rc1", "tag commit 9fceb02 as v0.9.1": with a version, a tag is git's (a
    # ref), not an issue's label; opening the request, "tag X as v1" makes one.
    versioned={"tag": (("tag", "ref"),), "tags": (("tag", "ref"),)},
    committed_file=("content", "contents", "file"),
    # Nouns followed by the name of one of GitHub's things: "workflow ci.yml", "repo acme-api",
    # "the codespace fluffy-spoon" (the core knows branch, tag, label, team, file, ...).
    named=frozenset("ref repo repository workflow gist codespace runner".split()),
    # Things with their own "#N" (a run's, an alert's number): any other "#482" is an issue's or a PR's.
    numbered=frozenset("run runs job build alert dependabot deployment release check step workflow".split()),
    # GITHUB_TOKEN, GITHUB_SHA: the platform's built-in variables, asked about by name.
    reserved_constants=("GITHUB_",),
    # "lock the repo main": the repository an object is in says nothing of the object's kind.
    object_skipped=frozenset("repo repository".split()),
    # "list-for-authenticated-user", "list-for-repo": GitHub's owner scopes in operation names.
    scopes=frozenset("authenticated repo".split()),
    # GitHub's own spec verbs: a check suite is re-requested, a webhook delivery redelivered.
    verbs=frozenset("rerequest redeliver".split()),
)

PACK = Pack(
    name="github",
    summary="GitHub's REST API: issues, pull requests, repositories, Actions, Pages, packages, people",
    vocabulary=GITHUB.entries,
    soft={w: ("user", "member", "people", "collaborator") for w in "who whom whose someone somebody people".split()},
    hints={
        "repository": ("repository", "repo"),
        "version": ("tag", "release", "version"),
        "domain": ("domain", "cname", "url"),
        # A URL given as a value is mostly where something is sent: a webhook's (or callback's) target.
        "url": ("url", "webhook", "hook"),
        "sha": ("commit", "sha", "ref"),
        "path": ("content", "file", "path"),
        "setting": ("variable", "secret", "config"),
        # A published advisory's id (GHSA-xxxx-xxxx-xxxx, CVE-2024-3094): an advisory asked about.
        "advisory": ("advisory", "advisories", "vulnerability"),
        # "#482", "merge #99": the number of an issue or a pull request (how trackers write them).
        "ticket": ("issue", "pull"),
    },
    senses=SENSES,
    # The map covers GitHub's words (~760 keys): coverage of the query's concepts is the stronger
    # signal, the full-text score counts half of the best coverage (as tuned in rounds 1-6).
    bm25_share=0.5,
)

"""Soft hints: words that say a little about which tool, never what is asked for.

"my" hints at the authenticated user's operation, "who" at users and members, a person's name at
users: each adds a small bonus to the tools whose name or title matches and never counts against
the tools that do not ("list my gists": every gists list is a candidate; the one for the
authenticated user is a bit more likely). They are found before stop words are dropped: "my",
"who" are stop words. The hints of argument values (a repository, a path, a version) are in
:data:`gateway.discovery.arguments.HINTS`. These are the core's, true of any API; a domain pack
may replace a word's hints with its own (the GitHub pack adds "collaborator" to "who").
"""

from __future__ import annotations

__all__ = ["SOFT", "NAME_HINT"]

SOFT: dict[str, tuple[str, ...]] = {}
for _w in "my mine i me im own owned".split():
    SOFT[_w] = ("authenticated user", "authenticated", "current user")
for _w in "who whom whose someone somebody people".split():
    SOFT[_w] = ("user", "member", "people")

# A person's name in a query ("does octocat have", "make carol an admin") hints at users.
NAME_HINT = ("user", "member", "username")

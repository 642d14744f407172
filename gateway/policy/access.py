"""Allow/deny access rules over public names, compiled once, decided with a cache.

A rule names principals (``*``, ``group:<g>``, or a principal name) and glob patterns over public
tool, prompt, resource-template names and resource URIs (``fnmatch`` syntax, case-sensitive, ``*``
also crosses ``/``). For one principal, the *applicable* rules are those naming it; a name is
usable when some applicable rule allows it and no applicable rule denies it (deny wins). When rules
exist but none applies to a principal, that principal may use nothing: access is default-deny
once any rule is configured. With no rules at all the access filter is not built.

Glob lists are compiled into one regular expression per rule side at build time; the per-principal
view (:class:`PrincipalAccess`) is cached by ``(name, groups)``, and each view caches its answers,
so the hot path is two dict lookups.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["compile_globs", "CompiledRule", "PrincipalAccess", "AccessPolicy", "RuleLike", "PrincipalLike"]

_MAX_CACHE = 10_000  # bound per-view and per-policy caches (names and principals are attacker-chosen)


class RuleLike(Protocol):
    @property
    def principals(self) -> tuple[str, ...]: ...
    @property
    def allow(self) -> tuple[str, ...]: ...
    @property
    def deny(self) -> tuple[str, ...]: ...


class PrincipalLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def groups(self) -> frozenset[str]: ...


def compile_globs(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex matching any of the globs; None for an empty list (matches nothing)."""
    parts = [fnmatch.translate(p) for p in patterns]
    if not parts:
        return None
    return re.compile("|".join(f"(?:{p})" for p in parts))


def selector_matches(selector: str, name: str, groups: frozenset[str]) -> bool:
    if selector == "*":
        return True
    if selector.startswith("group:"):
        return selector[6:] in groups
    return selector == name


@dataclass(frozen=True, slots=True)
class CompiledRule:
    principals: tuple[str, ...]
    allow: tuple[str, ...]
    deny: tuple[str, ...]

    def applies_to(self, name: str, groups: frozenset[str]) -> bool:
        return any(selector_matches(s, name, groups) for s in self.principals)


class PrincipalAccess:
    """What one principal may use; ``allowed(name)`` is memoised."""

    __slots__ = ("_allow", "_deny", "_cache", "allow_all")

    def __init__(self, allow: Sequence[str], deny: Sequence[str]) -> None:
        self._allow = compile_globs(allow)
        self._deny = compile_globs(deny)
        self._cache: dict[str, bool] = {}
        # Fast path: "allow everything, deny nothing" needs no matching at all.
        self.allow_all = "*" in allow and not deny

    def allowed(self, name: str) -> bool:
        if self.allow_all:
            return True
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        ok = (self._allow is not None and self._allow.match(name) is not None
              and (self._deny is None or self._deny.match(name) is None))
        if len(self._cache) >= _MAX_CACHE:
            self._cache.clear()
        self._cache[name] = ok
        return ok

    def visible(self, kind: str, name: str) -> bool:
        """The :data:`gateway.context.Visibility` signature (kind is not used by the rules)."""
        return self.allowed(name)


class AccessPolicy:
    """All rules of a config; :meth:`for_principal` returns the cached per-principal view."""

    __slots__ = ("rules", "_views")

    def __init__(self, rules: Iterable[RuleLike]) -> None:
        self.rules = tuple(CompiledRule(tuple(r.principals), tuple(r.allow), tuple(r.deny)) for r in rules)
        self._views: dict[tuple[str, frozenset[str]], PrincipalAccess] = {}

    def for_principal(self, principal: PrincipalLike) -> PrincipalAccess:
        key = (principal.name, principal.groups)
        view = self._views.get(key)
        if view is None:
            allow: list[str] = []
            deny: list[str] = []
            for rule in self.rules:
                if rule.applies_to(principal.name, principal.groups):
                    allow.extend(rule.allow)
                    deny.extend(rule.deny)
            view = PrincipalAccess(allow, deny)
            if len(self._views) >= _MAX_CACHE:
                self._views.clear()
            self._views[key] = view
        return view

    def allowed(self, principal: PrincipalLike, name: str) -> bool:
        return self.for_principal(principal).allowed(name)

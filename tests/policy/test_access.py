"""Allow/deny matching: deny wins, groups, default deny, caching."""

from __future__ import annotations

from gateway.config import AccessRule
from gateway.context import Principal
from gateway.policy import AccessPolicy, compile_globs

RULES = (
    AccessRule(principals=("group:ops",), allow=("*",)),
    AccessRule(principals=("group:ci",), allow=("petstore_get*", "shop_query"), deny=("*_delete*",)),
    AccessRule(principals=("auditor",), allow=("docs://*",)),
)


def test_compile_globs() -> None:
    pat = compile_globs(["a*", "b?c"])
    assert pat is not None and pat.match("abc") and pat.match("bxc") and not pat.match("xbc")
    assert compile_globs([]) is None


def test_groups_allow_and_deny() -> None:
    policy = AccessPolicy(RULES)
    ops = Principal("ops-bot", frozenset({"ops"}))
    ci = Principal("ci", frozenset({"ci"}))
    assert policy.allowed(ops, "shop_delete_all")
    assert policy.allowed(ci, "petstore_get_pet")
    assert policy.allowed(ci, "shop_query")
    assert not policy.allowed(ci, "petstore_get_delete")  # deny wins over allow
    assert not policy.allowed(ci, "shop_update")
    assert policy.allowed(Principal("auditor"), "docs://runbook")


def test_default_deny_and_deny_across_rules() -> None:
    policy = AccessPolicy(RULES)
    assert not policy.allowed(Principal("stranger"), "shop_query")
    both = Principal("x", frozenset({"ops", "ci"}))
    assert not policy.allowed(both, "shop_delete_all")  # ci's deny applies to a member of both


def test_views_are_cached_per_principal() -> None:
    policy = AccessPolicy(RULES)
    ci = Principal("ci", frozenset({"ci"}))
    view = policy.for_principal(ci)
    assert policy.for_principal(Principal("ci", frozenset({"ci"}))) is view
    assert view.visible("tool", "shop_query") and not view.visible("tool", "shop_delete")
    assert policy.for_principal(Principal("ops-bot", frozenset({"ops"}))).allow_all

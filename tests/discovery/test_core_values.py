"""Values any API's callers paste into a query: opaque and typed ids name one item, never words."""

from __future__ import annotations

from typing import Any

from gateway.discovery import SearchIndex, doc_from_tool
from gateway.discovery.arguments import tokens
from gateway.discovery.query import parse


def _words(query: str) -> tuple[list[str], list[str], list[str]]:
    args = tokens(query, lambda w: False)
    return args.words, args.kinds, args.prefixes


def test_opaque_and_typed_ids_are_one_item_not_words() -> None:
    assert _words("hang up CA9f2c1e0a7b now") == (["hang", "up", "now"], ["one"], [])
    assert _words("suspend subaccount AC33b9") == (["suspend", "subaccount"], ["one"], [])
    assert _words("cancel sub_1Oa9 today") == (["cancel", "today"], ["one"], ["sub"])
    assert _words("refund ch_3000") == (["refund"], ["one"], ["ch"])
    # Words with a number in them stay words; a SHA stays a SHA; snake_case stays words.
    assert _words("sha256 for arm64 and i18n")[0] == ["sha256", "for", "arm64", "and", "i18n"]
    assert _words("revert 9fceb02")[1] == ["sha"]
    assert _words("clean node_modules")[0] == ["clean", "node", "modules"]


def _tool(name: str, description: str, read: bool) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": read, "destructiveHint": not read and "delete" in name}}


def test_a_typed_ids_prefix_names_the_catalogs_thing() -> None:
    index = SearchIndex()
    index.sync(doc_from_tool(t) for t in [
        _tool("delete_subscription", "Cancel a subscription", False),
        _tool("cancel_payout", "Cancel a payout", False),
        _tool("cancel_quote", "Cancel a quote", False),
        _tool("get_customer", "Retrieve a customer", True),
        _tool("list_subscriptions", "List subscriptions", True),
    ])
    # "sub" of sub_1Oa9 abbreviates the catalog's "subscription": asked about, it ranks first.
    assert index.search("cancel sub_1Oa9 right now", 3)[0].name == "delete_subscription"
    assert any(c.said == "(sub_)" for c in parse("cancel sub_1Oa9", abbreviated=lambda p: "subscript").concepts)
    # A prefix shorter than 3 letters or that starts no word of the catalog adds nothing.
    assert not any(c.said.startswith("(") for c in parse("cancel xq_1Oa9", abbreviated=lambda p: "").concepts)


def test_negative_contractions_leave_no_stub_words() -> None:
    # "don't" is "do" + the "t" the sense rules read as "not"; no "don"/"isn"/"won" word is left.
    words = _words("we don't use that line, it isn't ours and won't be, why can't I push")[0]
    assert not {"don", "isn", "won"} & set(words)
    assert words[:4] == ["we", "do", "t", "use"] and ["will", "t"] == words[words.index("will"):][:2]
    assert ["can", "t"] == words[words.index("can"):][:2]
    assert not any(c.said == "don" for c in parse("release that number, we don't use it").concepts)


def test_taking_someone_off_is_removing_a_named_person_in_any_api() -> None:
    parsed = parse("take jake off the Payroll project", named=lambda w: w in ("project", "payroll"))
    assert ("remove", "delete", "dismiss") in [c.phrases for c in parsed.concepts]
    assert "jake" not in [c.said for c in parsed.concepts]  # a name, not a thing asked for
    assert any(c.said == "(name)" for c in parsed.concepts)
    # Several words between the verb and its particle are its object, read as usual.
    assert "build" in [c.said for c in parse("take the nightly build off").concepts]


def test_the_full_text_share_weighs_bm25_against_coverage() -> None:
    from gateway.discovery.rank import profile, rerank

    profiles = {"get_balance": profile("get_balance", "Retrieve balance", "", "", "Funds available to pay out",
                                       "", "read"),
                "list_payouts": profile("list_payouts", "List payouts", "", "", "Payouts sent", "", "read")}
    parsed = parse("payouts available")
    pool = [("get_balance", 10.0), ("list_payouts", 1.0)]  # BM25 prefers the balance's description
    def order(share: float) -> list[str]:
        return [n for n, _ in rerank(pool, parsed, profiles, lambda p: 1, 2, share)]
    assert order(0.0) == ["list_payouts", "get_balance"]  # coverage alone: the name says payouts
    assert order(5.0) == ["get_balance", "list_payouts"]  # the text score dominates

"""The :class:`~gateway.discovery.ranker.Ranker` contract, kept by the lexical ranker."""

from __future__ import annotations

from typing import Any

from gateway.discovery import Ranker, SearchIndex, doc_from_tool


def _tool(name: str, description: str, read: bool = True) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": read}}


_TOOLS = [
    _tool("list_invoices", "List the invoices of a customer"),
    _tool("get_invoice", "Get one invoice"),
    _tool("void_invoice", "Void an open invoice", read=False),
    _tool("list_customers", "List customers"),
    _tool("create_customer", "Create a customer", read=False),
    _tool("delete_customer", "Delete a customer", read=False),
    _tool("list_payouts", "List payouts to the bank account"),
]


def _index() -> SearchIndex:
    index = SearchIndex()
    index.sync(doc_from_tool(t) for t in _TOOLS)
    return index


def test_the_lexical_ranker_is_a_ranker() -> None:
    assert isinstance(_index(), Ranker)


def test_hits_are_at_most_limit_unique_visible_and_best_first() -> None:
    index = _index()
    for query in ("void the invoice", "customers", "show me my payouts", "zzz nothing matches"):
        for limit in (1, 3, 10):
            for visible in (None, lambda n: "customer" not in n):
                for fill in (True, False):
                    hits = index.search(query, limit, visible, fill=fill)
                    names = [h.name for h in hits]
                    assert len(hits) <= limit and len(set(names)) == len(names)
                    assert visible is None or all(visible(n) for n in names)
                    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
                    if fill:  # padded to min(limit, visible tools)
                        assert len(hits) == min(limit, sum(visible is None or visible(t["name"]) for t in _TOOLS))
    assert index.search("void the invoice", 3)[0].name == "void_invoice"


def test_without_fill_only_matched_tools() -> None:
    hits = _index().search("payouts", 5, fill=False)
    assert [h.name for h in hits] == ["list_payouts"]

"""Portable names (issue 28) for an upstream MCP server's tools: through the gateway, the official
SDK as upstream (tools named ``search.issues``, ``search_issues``, ``2fa/enable``) and as client."""

from __future__ import annotations

from gateway.protocol.names import PORTABLE_NAME_RE, name_suffix
from tests.connectors.mcp.test_gateway_e2e import all_tools, client, config, mcp_entry
from tests.support import running_gateway


async def test_odd_upstream_names_are_served_portable_distinct_and_callable() -> None:
    entry = mcp_entry("up", "stdio", "--odd-names", protocol="legacy", include={"tools": ["*s*", "2fa*"]})
    async with running_gateway(config(entry)) as gw, client(gw.mcp_url) as (session, _rec):
        names = await all_tools(session)
        dotted = "up_search_issues_" + name_suffix("up_search.issues")
        assert {"up_search_issues", dotted, "up_2fa_enable"} <= set(names)
        assert all(PORTABLE_NAME_RE.match(n) for n in names), names
        # Each public name reaches the upstream tool it was made from.
        for public, upstream in ((dotted, "search.issues"), ("up_search_issues", "search_issues"),
                                 ("up_2fa_enable", "2fa/enable")):
            result = await session.call_tool(public, {})
            assert not result.is_error and result.content[0].text == f"called {upstream}"  # type: ignore[union-attr]


async def test_names_upstream_keeps_what_mcp_allows() -> None:
    entry = mcp_entry("up", "stdio", "--odd-names", protocol="legacy", names="upstream",
                      include={"tools": ["search*", "2fa*"]})
    async with running_gateway(config(entry)) as gw, client(gw.mcp_url) as (session, _rec):
        names = set(await all_tools(session))
        assert names == {"up_search.issues", "up_search_issues", "up_2fa_enable"}  # "/" is no MCP character
        result = await session.call_tool("up_search.issues", {})
        assert not result.is_error and result.content[0].text == "called search.issues"  # type: ignore[union-attr]

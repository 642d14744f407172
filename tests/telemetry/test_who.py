"""Metrics that answer "for whom" (issue 15): the opt-in principal (or group) label, capped under a
flood of distinct principals, and the tool label on refusals, bounded against invented names.

Real gateway, real API-key authentication over Streamable HTTP, real scrapes of /metrics.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import aiohttp
import pytest

from gateway.telemetry import metrics
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.backend import backend, openapi_connector_yaml
from tests.telemetry.metrics_client import Samples, scrape

N_PRINCIPALS = 60


def who_config(url: str, mode: str, cap: int, n: int = N_PRINCIPALS, rate_backend: str = "memory",
               extra: str = "") -> str:
    """``n`` API keys (bot-0 … with groups team-<i % 3>), a prompt each may get once an hour, a
    tool (``api_slow``, of the loopback OpenAPI backend at ``url``) nobody may call, and invented
    names under ``secret_*`` denied too."""
    keys = "\n".join(f"    - {{name: bot-{i}, key: key-{i}, groups: [team-{i % 3}]}}" for i in range(n))
    return f"""
gateway: {{http: {{json_response: true}}}}
{extra}audit: {{enabled: false}}
telemetry: {{metrics_principal_label: {mode}, metrics_max_principals: {cap}}}
auth:
  api_keys:
{keys}
access:
  - {{principals: ["*"], allow: ["*"], deny: ["api_slow", "secret_*"]}}
rate_limits:
  backend: {rate_backend}
  # Redis answers in well under 50 ms (the default), but not always on a loaded 2-core CI machine:
  # these tests count refusals, not timeouts, so an open breaker must not let a call through.
  redis_timeout_s: 2
  redis_prefix: "gw:who:{uuid.uuid4().hex}"
  rules:
    - {{scope: principal, match: "team_hello", rate: 1/h, burst: 1}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, messages: [{{text: hi}}]}}]
""" + openapi_connector_yaml(url)


@pytest.fixture(autouse=True)
def fresh_principal_cap() -> Iterator[None]:
    """The cap counts values per process (their series live as long as it does); each test here
    starts from none seen, as a freshly started gateway does."""
    metrics.PrincipalLabels.forget()
    yield
    metrics.PrincipalLabels.forget()


async def each_bot_gets_twice(http: aiohttp.ClientSession, url: str, n: int) -> None:
    """Every principal opens a session, gets the prompt (ok), then again (rate limited), and calls
    the denied tool."""
    async def one(i: int) -> None:
        client = await McpHttp(http, url, f"key-{i}").initialize()
        assert "result" in await client.call("prompts/get", {"name": "team_hello"})
        assert (await client.call("prompts/get", {"name": "team_hello"}))["error"]["code"] == -32029
        assert (await client.call("tools/call", {"name": "api_slow"}))["error"]["code"] == -32003

    for start in range(0, n, 10):  # ten sessions at a time: bounded load on a shared machine
        await asyncio.gather(*(one(i) for i in range(start, min(n, start + 10))))


def moved(after: Samples, before: Samples, name: str) -> dict[str, float]:
    """principal label value -> how much the series of ``name`` with it grew."""
    out: dict[str, float] = {}
    for labels in after.series(name):
        grew = after.delta(before, name, **labels)
        if grew:
            key = labels.get("principal", "")
            out[key] = out.get(key, 0) + grew
    return out


async def test_principal_label_is_capped_under_a_flood_of_principals(tmp_path):
    cap = 5
    async with backend() as be, running_gateway(who_config(be.url, "principal", cap)) as gw, \
            aiohttp.ClientSession() as http:
        before = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-0")
        await each_bot_gets_twice(http, gw.mcp_url, N_PRINCIPALS)
        after = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-0")

    requests = moved(after, before, "mcp_gateway_requests_total")
    limited = moved(after, before, "mcp_gateway_rate_limited_total")
    denied = moved(after, before, "mcp_gateway_denied_total")
    for counted in (requests, limited, denied):
        named = set(counted) - {metrics.OTHER}
        # 60 distinct callers, at most `cap` of them by name, the rest in one series.
        assert len(named) <= cap and named <= {f"bot-{i}" for i in range(N_PRINCIPALS)}, counted
        assert named, counted
        assert counted[metrics.OTHER] >= N_PRINCIPALS - cap, counted
    # Every call is still counted: the cap merges series, it loses nothing.
    assert sum(limited.values()) == N_PRINCIPALS
    assert sum(denied.values()) == N_PRINCIPALS
    # initialize + 2 prompts/get + 1 tools/call each
    assert sum(requests.values()) == 4 * N_PRINCIPALS
    # "Who is being rate limited": a named principal's series says so, with the scope; the
    # histogram never carries the principal.
    some = next(iter(set(limited) - {metrics.OTHER}))
    assert after.delta(before, "mcp_gateway_rate_limited_total", connector="team", scope="principal",
                       principal=some) == 1
    assert all("principal" not in s for s in after.series("mcp_gateway_request_duration_seconds_count"))


async def test_group_label_counts_by_group(tmp_path):
    async with backend() as be, running_gateway(who_config(be.url, "group", 50, n=9)) as gw, \
            aiohttp.ClientSession() as http:
        before = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-0")
        await each_bot_gets_twice(http, gw.mcp_url, 9)
        after = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-0")
    assert moved(after, before, "mcp_gateway_rate_limited_total") == {"team-0": 3, "team-1": 3, "team-2": 3}
    assert moved(after, before, "mcp_gateway_denied_total") == {"team-0": 3, "team-1": 3, "team-2": 3}


def test_principal_labels_unit():
    """The labeler alone: off is empty, the cap holds across instances (a reload builds a new one)."""
    assert metrics.PrincipalLabels()("alice") == ""
    first = metrics.PrincipalLabels("principal", 3)
    assert [first(f"p{i}") for i in range(5)] == ["p0", "p1", "p2", metrics.OTHER, metrics.OTHER]
    assert first("p1") == "p1"
    reloaded = metrics.PrincipalLabels("principal", 3)
    assert reloaded("p9") == metrics.OTHER and reloaded("p2") == "p2"
    assert metrics.PrincipalLabels("group", 10)("x", frozenset({"b", "a"})) == "a"
    assert metrics.PrincipalLabels("group", 10)("x") == "_none"
    with pytest.raises(ValueError):
        metrics.PrincipalLabels("email")


async def test_refusals_name_the_tool_and_invented_names_collapse(tmp_path):
    """A caller inventing tool names (each denied by `secret_*`) adds one series, `_unknown`."""
    async with backend() as be, running_gateway(who_config(be.url, "none", 50, n=1)) as gw, \
            aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url, "key-0").initialize()
        before = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-0")
        for i in range(200):
            assert (await client.call("tools/call", {"name": f"secret_{i}"}))["error"]["code"] == -32003
        assert (await client.call("tools/call", {"name": "api_slow"}))["error"]["code"] == -32003
        after = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-0")
    assert after.delta(before, "mcp_gateway_denied_total", method="tools/call", tool=metrics.UNKNOWN) == 200
    assert after.delta(before, "mcp_gateway_denied_total", method="tools/call", connector="api",
                       tool="api_slow") == 1
    tools = {s.get("tool") for s in after.series("mcp_gateway_denied_total")}
    assert not {t for t in tools if t and t.startswith("secret_")}, tools

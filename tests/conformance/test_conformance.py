"""The official MCP conformance suite (:mod:`tests.conformance.harness`) against the SDK 2.x reference
server (:mod:`tests.conformance.upstream_fixture`), through the gateway and directly.

* 2025-11-25, through the gateway: ``conformance server --spec-version 2025-11-25`` (0.1.16) runs
  every active server scenario against the gateway, which chains the reference with an ``mcp``
  connector and an empty prefix, so the suite sees the reference's names unchanged. Failures other
  than those listed in ``baseline.yml`` (and baseline entries that now pass) fail the test.
* Every run through the gateway is compared with the same run directly against the reference
  (:func:`assert_as_clean_as_directly`): what passes directly passes through the gateway, and no
  check warns through the gateway that does not directly.
* 2026-07-28, directly: ``conformance server --requirements 2026-07-28`` (0.2.x) against the
  reference itself, served dual-era and modern-only, to know what the reference passes before the
  gateway stands in front of it; then the same requirement set through the gateway.
* The client scenarios, with the gateway's MCP connector as the client under test
  (:mod:`tests.conformance.connector_client`: a gateway chaining the scenario's server, driven by
  an SDK client): the 2026-07-28 requirement set's client scenarios but the ``auth/*`` ones
  (authorization towards an upstream is issue 17), scored and not scored, and the 2025-11-25
  client scenarios of 0.1.16 but ``auth/*``. Every one passes: there is no expected-failures list.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from tests.conformance import harness
from tests.connectors.mcp.helpers import mcp_server_process
from tests.support import running_gateway

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "upstream_fixture.py"
MODERN = "2026-07-28"

CONNECTOR_CLIENT = f"{sys.executable} {HERE / 'connector_client.py'}"
# The 2025-11-25 client scenarios of 0.1.16 (``conformance list``) but auth/*: 0.1.x has no
# requirement sets to read them from.
STABLE_CLIENT_SCENARIOS = ("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry")

# The scored 2026-07-28 server scenarios the reference (SDK 2.x, mcp 2.3.0) passes directly, as
# measured with conformance 0.2.0-alpha.12, dual-era and modern-only alike: all 37 of the
# requirement set. A lower count is a regression of the reference (or of the SDK under it). Of the
# 13 scenarios run but not scored, it passes json-schema-2020-12, http-custom-header-server-validation
# and tasks-status-notifications; the 9 other tasks-* ones need the tasks extension, which SDK 2.3
# does not implement, and http-header-validation fails on the SDK's own check of a whitespace-padded
# Mcp-Name header (-32020).
REFERENCE_2026_PASSES = 37


@asynccontextmanager
async def reference(era: str = "dual") -> AsyncIterator[str]:
    """The reference over Streamable HTTP on a free port, serving ``era``; yields its MCP URL."""
    async with mcp_server_process(FIXTURE, "--era", era, "--http") as url:
        yield url


@asynccontextmanager
async def through_gateway(upstream: str, era: str = "dual") -> AsyncIterator[str]:
    """A gateway chaining the reference (over ``upstream``: stdio or streamable_http, served as
    ``era``) with an empty prefix; yields the gateway's MCP URL."""
    async with AsyncExitStack() as stack:
        entry: dict[str, object] = {"name": "conformance", "type": "mcp", "prefix": "", "transport": upstream}
        if upstream == "stdio":
            entry.update(command=sys.executable, args=[str(FIXTURE), "--era", era])
        else:
            entry["url"] = await stack.enter_async_context(reference(era))
        config = json.dumps({"audit": {"enabled": False}, "connectors": [entry]})
        gw = await stack.enter_async_context(running_gateway(config))
        assert gw.connectors["conformance"].health().up
        yield gw.mcp_url


# Runs directly against the reference, by (revision, era): measured once per module, compared with
# every run through the gateway.
_DIRECT: dict[tuple[str, str], harness.Run] = {}


async def direct_run(revision: str, era: str, tmp_path: Path) -> harness.Run:
    """The server scenarios of ``revision`` (2025-11-25: suite 0.1.16; 2026-07-28: the 0.2.x
    requirement set) run directly against the reference served ``era``."""
    if (revision, era) not in _DIRECT:  # (tests run one at a time: no two fill it at once)
        out = tmp_path / "direct"
        out.mkdir()
        async with reference(era) as url:
            if revision == MODERN:
                _DIRECT[revision, era] = await harness.run_server(url, out, requirement=MODERN)
            else:
                _DIRECT[revision, era] = await harness.run_server(url, out, package=harness.STABLE,
                                                                  spec_version=revision)
    return _DIRECT[revision, era]


def assert_as_clean_as_directly(direct: harness.Run, through: harness.Run) -> None:
    """Every scenario that passes directly passes through the gateway, and no check warns through
    the gateway that does not warn directly (the tasks extension aside: the reference lacks it)."""
    lost = set(direct.passing(False)) - set(through.passing(False))
    assert not lost, f"pass directly, fail through the gateway: {sorted(lost)}\n{through.report()}"
    new_warnings = {w for w in through.warnings(False) - direct.warnings(False) if not w.startswith("tasks-")}
    assert not new_warnings, f"warnings through the gateway only: {sorted(new_warnings)}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("upstream", ["stdio", "streamable_http"])
async def test_conformance_suite_through_the_gateway(upstream: str, tmp_path: Path) -> None:
    """2025-11-25 through the gateway chaining the dual-era reference, whose sampling and
    elicitation tools ask over the session (issue 25: a legacy caller reaches them over an upstream
    session, not the stateless revision): every scenario passes, as it does directly."""
    direct = await direct_run("2025-11-25", "dual", tmp_path)
    async with through_gateway(upstream) as url:
        run = await harness.run_server(url, tmp_path, package=harness.STABLE, spec_version="2025-11-25",
                                       expected_failures=HERE / "baseline.yml")
    print(f"conformance {harness.STABLE.version} --spec-version 2025-11-25: directly {len(direct.passing())}/"
          f"{len(direct.scenarios)}, through the gateway ({upstream}) {len(run.passing())}/{len(run.scenarios)}")
    assert run.returncode == 0, f"conformance failed (exit {run.returncode}):\n{run.summary}"
    assert "Baseline check passed" in run.output, run.summary
    assert run.scenarios and not run.failing(), run.report()
    assert {"tools-call-sampling", "tools-call-elicitation", "elicitation-sep1034-defaults",
            "elicitation-sep1330-enums"} <= set(run.passing())
    assert_as_clean_as_directly(direct, run)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("era", ["dual", "modern"])
async def test_2026_requirements_directly_against_the_sdk_reference(era: str, tmp_path: Path) -> None:
    async with reference(era) as url:
        run = await harness.run_server(url, tmp_path, requirement=MODERN)
    print(f"conformance {harness.NEXT.version} --requirements {MODERN}, SDK reference served {era}:\n{run.report()}")
    assert run.scored is not None and set(run.scenarios) >= run.scored, "a required scenario did not run"
    passing = run.passing()
    assert len(passing) >= REFERENCE_2026_PASSES, f"{len(passing)} scored scenarios pass:\n{run.report()}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("upstream, era", [("streamable_http", "dual"), ("streamable_http", "modern"),
                                           ("stdio", "dual")])
async def test_2026_requirements_through_the_gateway(upstream: str, era: str, tmp_path: Path) -> None:
    """Every scored 2026-07-28 scenario the reference passes directly (all of them: see
    REFERENCE_2026_PASSES) passes with the gateway in front of it, chaining it unprefixed."""
    direct = await direct_run(MODERN, era, tmp_path)
    async with through_gateway(upstream, era) as url:
        run = await harness.run_server(url, tmp_path, requirement=MODERN)
    print(f"conformance {harness.NEXT.version} --requirements {MODERN}: directly {len(direct.passing())}/"
          f"{len(run.scored or ())}, through the gateway ({upstream} upstream served {era}) "
          f"{len(run.passing())}:\n{run.report()}")
    assert run.scored is not None and set(run.scored) <= set(run.scenarios), "a required scenario did not run"
    assert set(run.passing()) >= set(run.scored), run.report()
    assert len(run.scored) >= REFERENCE_2026_PASSES
    # server-stateless: the diagnostic tools are listed and the list_changed SHOULDs are met (issue 25)
    assert not run.scenarios["server-stateless"].warnings, run.scenarios["server-stateless"]
    assert_as_clean_as_directly(direct, run)


def modern_client_scenarios() -> list[str]:
    """The client scenarios of the 2026-07-28 requirement set, scored and not, but ``auth/*``."""
    reqs = harness.requirements(MODERN)
    unscored = [key.split(":", 1)[1] for key in reqs.not_scored if key.startswith("client:")]
    return sorted(n for n in {*reqs.client, *unscored} if not n.startswith("auth/"))


async def _client_runs(scenarios: list[str] | tuple[str, ...], tmp_path: Path, **kwargs: object) -> dict[str, harness.Run]:
    """One ``conformance client --scenario S`` per scenario, two at a time (each starts a gateway)."""
    gate = asyncio.Semaphore(2)

    async def one(name: str) -> harness.Run:
        out = tmp_path / name.replace("/", "_")
        out.mkdir()
        async with gate:
            return await harness.run_client(CONNECTOR_CLIENT, out, scenario=name, timeout=120, **kwargs)  # type: ignore[arg-type]

    return dict(zip(scenarios, await asyncio.gather(*(one(n) for n in scenarios)), strict=True))


@pytest.mark.timeout(300)
async def test_2026_client_scenarios_against_the_mcp_connector(tmp_path: Path) -> None:
    """The gateway's MCP connector, as a client, passes every non-auth 2026-07-28 client scenario:
    per-request _meta and the version header, a retry after -32022 (request-metadata), requestState
    echoed and input rounds completed (sep-2322-client-request-state), Mcp-Method/Mcp-Name and
    Mcp-Param-* headers (http-standard-headers, http-custom-headers), tools with invalid
    x-mcp-header annotations left out (http-invalid-tool-headers), no network $ref fetched and
    JSON Schema 2020-12 keywords preserved (json-schema-ref-no-deref, json-schema-2020-12-preservation)."""
    scenarios = modern_client_scenarios()
    assert {"request-metadata", "sep-2322-client-request-state", "http-standard-headers", "http-custom-headers",
            "json-schema-ref-no-deref"} <= set(scenarios)
    runs = await _client_runs(scenarios, tmp_path, spec_version=MODERN)
    report = "\n".join(f"{name}: {run.report() or run.output[-2000:]}" for name, run in runs.items())
    print(f"conformance {harness.NEXT.version} client scenarios of {MODERN} against the MCP connector:\n{report}")
    for name, run in runs.items():
        assert list(run.scenarios) == [name], f"{name} did not run:\n{run.output[-3000:]}"
        assert run.scenarios[name].passed and run.returncode == 0, report


@pytest.mark.timeout(300)
async def test_2025_client_scenarios_against_the_mcp_connector(tmp_path: Path) -> None:
    runs = await _client_runs(STABLE_CLIENT_SCENARIOS, tmp_path, package=harness.STABLE)
    report = "\n".join(f"{name}: {run.report() or run.output[-2000:]}" for name, run in runs.items())
    print(f"conformance {harness.STABLE.version} client scenarios of 2025-11-25 against the MCP connector:\n{report}")
    for name, run in runs.items():
        assert list(run.scenarios) == [name], f"{name} did not run:\n{run.output[-3000:]}"
        assert run.scenarios[name].passed and run.returncode == 0, report

"""The official conformance suites through three replicas behind HAProxy ``balance roundrobin``
(no stickiness), sharing Redis: what passes against one gateway passes through the proxy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from tests.conformance import harness
from tests.conformance.test_conformance import HERE, MODERN, REFERENCE_2026_PASSES, reference
from tests.scale.harness import replicas, roundrobin_proxy, state_section


@asynccontextmanager
async def through_replicas() -> AsyncIterator[str]:
    """Three gateways chaining one reference (Streamable HTTP, dual-era), behind the proxy."""
    async with AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(reference("dual"))
        entry = {"name": "conformance", "type": "mcp", "prefix": "", "transport": "streamable_http", "url": upstream}
        config = json.dumps({"audit": {"enabled": False}, "gateway": {"cursor_secret": "conformance"},
                             "connectors": [entry], "state": state_section()})
        gws = await stack.enter_async_context(replicas(config))
        url = await stack.enter_async_context(roundrobin_proxy([g.url for g in gws]))
        yield url + "/mcp"


@pytest.mark.timeout(300)
async def test_conformance_2025_11_25_through_roundrobin_replicas(tmp_path: Path) -> None:
    async with through_replicas() as url:
        run = await harness.run_server(url, tmp_path, package=harness.STABLE, spec_version="2025-11-25",
                                       expected_failures=HERE / "baseline.yml")
    assert run.returncode == 0, f"conformance failed (exit {run.returncode}):\n{run.summary}"
    assert run.scenarios and not run.failing(), run.report()


@pytest.mark.timeout(300)
async def test_2026_requirements_through_roundrobin_replicas(tmp_path: Path) -> None:
    async with through_replicas() as url:
        run = await harness.run_server(url, tmp_path, requirement=MODERN)
    assert run.scored is not None and set(run.scored) <= set(run.scenarios), "a required scenario did not run"
    assert set(run.passing()) >= set(run.scored), run.report()
    assert len(run.scored) >= REFERENCE_2026_PASSES

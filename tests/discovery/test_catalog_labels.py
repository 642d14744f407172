"""Every label of every task set resolves to a tool the gateway serves (bench/discovery_catalogs.py).

The bench maps each labelled operation (an operationId, or ``METHOD path``) to the tool an OpenAPI
connector serves for it by reading the running connector's tool → operation table, never by
deriving a name from an operationId; this checks that mapping for the six catalogs of issue 28 and
every GitHub set, so a change to tool naming or to what the connector exposes shows here. It asserts
no recall. For measurement-only sets a failure reports counts only (their per-query detail is
never printed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.discovery.fusion_eval import bench
from tests.support import running_gateway

REPO = Path(__file__).resolve().parents[2]
GITHUB_SETS = sorted(p.name for p in (REPO / "tests" / "data" / "discovery").glob("github-tasks*.yaml"))


BENCH = bench()  # bench/discovery_catalogs.py as a module (one copy, shared with fusion_eval)


@pytest.mark.parametrize("catalog", BENCH.CATALOGS, ids=lambda c: c.name)
async def test_every_label_names_a_served_tool(catalog: Any, tmp_path: Path) -> None:
    sets = GITHUB_SETS if catalog.name == "github" else [catalog.tasks]
    assert catalog.tasks in sets
    # A list endpoint names tools as a search endpoint does (one view), without indexing them.
    text = BENCH.config_text([catalog], BENCH.spec_files([catalog], tmp_path), discovery="list")
    async with running_gateway(text, base_dir=tmp_path) as gw:
        view = gw.gateway.endpoints.get(catalog.name).view
        assert len(view.snapshot("tools").entries) > 100
        for tasks_file in sets:
            wants, unresolved = BENCH.resolve_labels(catalog, view, tasks_file)
            detail = "" if catalog.measurement_only or "blind5" in tasks_file else f": {unresolved}"
            assert not unresolved, f"{tasks_file}: {len(unresolved)} label(s) name no served tool{detail}"
            assert wants and all(wants), f"{tasks_file}: a task with no label"

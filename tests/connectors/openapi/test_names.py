"""Portable tool names (issue 28) for OpenAPI operations, through the real connector and catalog.

Every spec in ``tests/data/openapi`` (GitHub's included) is served with names a model API
accepts (``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``), distinct, derivable as ``docs/architecture.md``
says; operationIds that map to one name stay distinct; ``names: upstream`` keeps the spelling.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.protocol.names import PORTABLE_NAME_RE, public_names

DATA = Path(__file__).resolve().parents[2] / "data" / "openapi"
SPECS = sorted(p for p in DATA.iterdir() if p.name.endswith((".json", ".json.gz", ".yaml", ".yml")))


def _servable(spec: Path, tmp: Path) -> Path:
    """*spec* as published: Swagger 2.0 documents are served too (converted by the connector,
    operationIds kept exactly). ``tmp`` is unused."""
    del tmp
    return spec


def _config(*entries: dict[str, Any]) -> str:
    return json.dumps({"audit": {"enabled": False}, "telemetry": {"metrics": False},
                       "connectors": [{"type": "openapi", "base_url": "http://127.0.0.1:9", **e} for e in entries]})


async def _tool_names(config: str, base_dir: Path = DATA) -> dict[str, tuple[str, str]]:
    """public name → (connector, local name) of every tool the gateway serves."""
    gateway = Gateway(parse_config(config, base_dir=base_dir))
    await gateway.start()
    try:
        return {e.key: (e.connector.name, e.local) for e in gateway.catalog.snapshot("tools").entries}
    finally:
        await gateway.stop(grace_s=0)


def test_every_spec_in_the_corpus_is_here() -> None:
    assert len(SPECS) >= 7 and any(p.name == "github-api.json.gz" for p in SPECS)


async def test_every_spec_gets_portable_distinct_names_under_any_prefix(tmp_path: Path) -> None:
    entries = [{"name": f"s{i}", "spec": str(_servable(spec, tmp_path))} for i, spec in enumerate(SPECS)]
    names = await _tool_names(_config(*entries))  # the default prefix: "s0_", ...
    locals_: dict[str, list[str]] = {}
    for name, (connector, local) in names.items():
        assert PORTABLE_NAME_RE.match(name), (connector, name)
        locals_.setdefault(connector, []).append(local)
    assert set(locals_) == {e["name"] for e in entries}  # every spec served tools
    assert len(locals_["s" + str(SPECS.index(DATA / "github-api.json.gz"))]) == 1223
    # Under a prefix that needs mapping itself (a dot, a slash, a leading digit) too: the catalog
    # names each connector's tools with this function.
    for tools in locals_.values():
        for prefix in ("9.v1/", ""):
            mapped = public_names(prefix, tools)
            assert len(set(mapped)) == len(tools) and all(PORTABLE_NAME_RE.match(n) for n in mapped)


async def test_github_names_shortened_end_in_the_documented_digest() -> None:
    names = await _tool_names(_config({"name": "github", "spec": str(DATA / "github-api.json.gz")}))
    shortened = {n: local for n, (_c, local) in names.items() if len("github_" + local) > 64}
    assert len(shortened) > 20  # GitHub's operationIds run to 74 characters
    for name, local in shortened.items():
        original = "github_" + local  # the operationId with "/" made "_": the connector's local name
        assert name == original[:55] + "_" + hashlib.sha256(original.encode()).hexdigest()[:8]
    # Not cut before the digest: two operationIds that differ only past 70 characters differ.
    by_local = {local: n for n, (_c, local) in names.items()}
    one = by_local["orgs_custom-properties-for-repos-create-or-update-organization-definition"]
    many = by_local["orgs_custom-properties-for-repos-create-or-update-organization-definitions"]
    assert one != many and one[:55] == many[:55]


CLASHING = {
    "openapi": "3.0.3", "info": {"title": "clash", "version": "1"},
    "paths": {
        "/a": {"get": {"operationId": "AddonPropertiesResource.getAddonProperties_get", "responses": {"200": {"description": "ok"}}}},
        "/b": {"get": {"operationId": "AddonPropertiesResource_getAddonProperties_get", "responses": {"200": {"description": "ok"}}}},
        "/c": {"get": {"operationId": "2fa.enable", "responses": {"200": {"description": "ok"}}}},
    },
}


async def test_operation_ids_that_map_to_one_name_stay_distinct_and_upstream_keeps_the_spelling(tmp_path: Path) -> None:
    spec = tmp_path / "clash.json"
    spec.write_text(json.dumps(CLASHING))
    dotted, underscored = CLASHING["paths"]["/a"]["get"]["operationId"], CLASHING["paths"]["/b"]["get"]["operationId"]
    digest = hashlib.sha256(f"tracker_{dotted}".encode()).hexdigest()[:8]
    expected = {f"tracker_{underscored}": underscored, f"tracker_{underscored}_{digest}": dotted,
                "tracker_2fa_enable": "2fa.enable"}
    for _ in range(2):  # deterministic: the same names on every start
        names = await _tool_names(_config({"name": "tracker", "spec": str(spec)}), tmp_path)
        assert {n: local for n, (_c, local) in names.items()} == expected
    # A leading digit needs a "_" only where the name starts with it.
    names = await _tool_names(_config({"name": "t", "spec": str(spec), "prefix": ""}), tmp_path)
    assert "_2fa_enable" in names
    upstream = await _tool_names(_config({"name": "tracker", "spec": str(spec), "names": "upstream"}), tmp_path)
    assert set(upstream) == {f"tracker_{dotted}", f"tracker_{underscored}", "tracker_2fa.enable"}


def test_names_accepts_portable_or_upstream_only() -> None:
    with pytest.raises(Exception, match=r"names"):
        parse_config(_config({"name": "t", "spec": "x.json", "names": "original"}))

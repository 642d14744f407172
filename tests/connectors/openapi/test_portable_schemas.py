r"""Generated schemas carry only patterns every client compiles (issue 15, finding 9), tested on
real spec fragments with Java syntax (``\p{L}``, ``\p{Print}``, ``\x{60}``: the AWS excerpts in
tests/data/openapi) and on GitHub's whole description; arguments are still checked against the
spec's own patterns before a call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from jsonschema import Draft202012Validator

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.connector import OpenAPIConnector
from connectors.openapi.loader import check_version
from connectors.openapi.mapping import _COOKIE_TEXT, _HEADER_TEXT, map_spec
from connectors.openapi.refs import _BASE64
from gateway.protocol.errors import ToolExecutionError
from tests.protocol.test_patterns import javascript

from .upstream import DATA, SPECS, RecordingEvents, ctx, load_doc

LOCATION = DATA / "aws-location-excerpt.yaml"
TRANSFER = DATA / "aws-transfer-excerpt.yaml"


def _yaml(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return doc


def _tools(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cfg = OpenAPIConfig.model_validate({"name": "t", "type": "openapi", "spec": "x.yaml"})
    return {op.name: op.definition for op in map_spec(doc, check_version(doc, "x"), cfg).operations}


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties" and isinstance(value, dict):
                yield from value
                yield from _patterns(value)
            else:
                yield from _patterns(value)
    elif isinstance(node, list):
        for item in node:
            yield from _patterns(item)


def test_the_fragments_java_patterns_are_rewritten_or_left_out_with_a_note() -> None:
    geo, xfer = _tools(_yaml(LOCATION)), _tools(_yaml(TRANSFER))
    key = geo["CreateKey"]["inputSchema"]["$defs"]
    referer = next(v for k, v in key.items() if k.endswith("RefererPattern"))
    assert referer["pattern"] == r"^([$\-._+!*\x60(),;/?:@=&\w]|%([0-9a-fA-F?]{2}|[0-9a-fA-F?]?[*]))+$"
    subject = next(v for k, v in xfer["CreateConnector"]["inputSchema"]["$defs"].items() if k.endswith("MessageSubject"))
    assert subject["pattern"] == r"^[\x20-\x7E\x20\t]+"
    # \p{L} has no form in Python's re: left out, and the description says what it was.
    device_id = next(v for k, v in geo["BatchDeleteDevicePositionHistory"]["inputSchema"]["$defs"].items()
                     if k.endswith("Id"))
    assert "pattern" not in device_id
    assert r"^[-._\p{L}\p{N}]+$" in device_id["description"] and "checks it before calling the API" in device_id["description"]
    tag_key = next(v for k, v in xfer["TagFile"]["inputSchema"]["$defs"].items() if k.endswith("S3TagKey"))
    assert "pattern" not in tag_key and r"\p{Z}" in tag_key["description"]
    # What was portable already is untouched (ResourceName's ^[-._\w]+$, the TrackerName parameter).
    tracker = geo["BatchDeleteDevicePositionHistory"]["inputSchema"]["properties"]["TrackerName"]
    assert tracker["pattern"] == r"^[-._\w]+$" and tracker["description"].startswith("The name of the tracker")


def test_every_published_pattern_compiles_in_javascript_and_python() -> None:
    """The fragments and GitHub's 1,223 operations: Node's RegExp (u flag) and jsonschema (Python)."""
    found: set[str] = set()
    for doc in (_yaml(LOCATION), _yaml(TRANSFER), load_doc(SPECS["github"]), load_doc(SPECS["recursion"])):
        for tool in _tools(doc).values():
            for schema in (tool["inputSchema"], tool.get("outputSchema")):
                found.update(_patterns(schema))
    assert len(found) >= 15
    found |= {_HEADER_TEXT, _COOKIE_TEXT, _BASE64}  # the patterns the mapping writes itself
    verdicts = javascript([(p, []) for p in sorted(found)])
    assert [p for p, v in zip(sorted(found), verdicts, strict=True) if "error" in v] == []
    for pattern in found:
        Draft202012Validator({"type": "string", "pattern": pattern}).is_valid("x")  # compiles with re


def test_a_python_client_validates_arguments_against_the_published_schema() -> None:
    """Before: jsonschema raised re.error ("bad escape \\p") on the Transfer tool's schema."""
    xfer = _tools(_yaml(TRANSFER))
    schema = xfer["CreateConnector"]["inputSchema"]
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"MessageSubject": "Invoice 42: shipped"})
    assert not validator.is_valid({"MessageSubject": "Übersicht für März"})  # \p{Print}: US-ASCII in Java


async def _backend(seen: list[dict[str, Any]]) -> tuple[web.AppRunner, str]:
    async def record(request: web.Request) -> web.Response:
        seen.append({"path": request.path, "body": await request.json()})
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def test_arguments_are_checked_against_the_specs_own_patterns_before_the_call() -> None:
    seen: list[dict[str, Any]] = []
    runner, url = await _backend(seen)
    geo = OpenAPIConnector(OpenAPIConfig.model_validate(
        {"name": "geo", "type": "openapi", "spec": str(LOCATION), "base_url": url}))
    xfer = OpenAPIConnector(OpenAPIConfig.model_validate(
        {"name": "xfer", "type": "openapi", "spec": str(TRANSFER), "base_url": url}))
    await geo.start(RecordingEvents())
    await xfer.start(RecordingEvents())
    try:
        # \p{L}\p{N}: left out of the published schema, still enforced here with its meaning.
        with pytest.raises(ToolExecutionError) as refused:
            await geo.call_tool("BatchDeleteDevicePositionHistory", {"TrackerName": "t", "DeviceIds": ["a b"]}, ctx())
        assert r"'a b' does not match '^[-._\\p{L}\\p{N}]+$'" in refused.value.message  # quoted as the spec has it
        assert "No request was sent" in refused.value.message and seen == []
        await geo.call_tool("BatchDeleteDevicePositionHistory", {"TrackerName": "t", "DeviceIds": ["Nguyễn-1"]}, ctx())
        assert seen[-1]["body"] == {"DeviceIds": ["Nguyễn-1"]}
        # \x{60} (a backtick) and \p{Print}, Java's US-ASCII class.
        restrictions = {"AllowActions": ["geo:GetMap*"], "AllowResources": ["arn:aws:geo:eu-west-1:1:map/M"],
                        "AllowReferers": ["https://example.com/`x`/*"]}
        await geo.call_tool("CreateKey", {"KeyName": "k", "Restrictions": restrictions}, ctx())
        assert seen[-1]["body"]["Restrictions"]["AllowReferers"] == ["https://example.com/`x`/*"]
        with pytest.raises(ToolExecutionError, match="does not match"):
            await geo.call_tool("CreateKey", {"KeyName": "k", "Restrictions": {**restrictions, "AllowReferers": ["a b"]}},
                                ctx())
        with pytest.raises(ToolExecutionError, match=r"does not match '\^\[\\\\p\{Print\}"):
            await xfer.call_tool("CreateConnector", {"MessageSubject": "Übersicht für März"}, ctx())
        await xfer.call_tool("CreateConnector", {"MessageSubject": "Invoice 42"}, ctx())
        assert [s["path"] for s in seen] == ["/tracking/v0/trackers/t/delete-positions", "/metadata/v0/keys",
                                             "/connectors"]
    finally:
        await geo.stop()
        await xfer.stop()
        await runner.cleanup()


def test_the_fragments_are_the_published_schemas() -> None:
    """The excerpts keep the patterns exactly as AWS publishes them (the point of the test data)."""
    schemas = {**_yaml(LOCATION)["components"]["schemas"], **_yaml(TRANSFER)["components"]["schemas"]}
    assert schemas["Id"]["pattern"] == r"^[-._\p{L}\p{N}]+$"
    assert schemas["RefererPattern"]["pattern"].count(r"\x{60}") == 1
    assert schemas["MessageSubject"]["pattern"] == r"^[\p{Print}\p{Blank}]+"

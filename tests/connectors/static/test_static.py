"""The static connector: pure mapping to wire objects, and the connector over real files."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from connectors.static import mapping
from connectors.static.config import StaticConfig, StaticPrompt, StaticResource
from connectors.static.connector import StaticConnector
from gateway.app import Gateway
from gateway.context import CallContext
from gateway.protocol.errors import ConfigError, InvalidParams, ResourceNotFound
from tests.support import config_from


def _prompt(**kw: object) -> StaticPrompt:
    return StaticPrompt.model_validate({"name": "p", "messages": [{"text": "Hi {who}, {mood} {unknown}"}], **kw})


def test_prompt_definition() -> None:
    plain = _prompt()
    assert mapping.prompt_definition(plain) == {"name": "p"}
    full = _prompt(title="T", description="D", arguments=[{"name": "who", "required": True}, {"name": "mood"}])
    assert mapping.prompt_definition(full) == {
        "name": "p", "title": "T", "description": "D",
        "arguments": [{"name": "who", "required": True}, {"name": "mood", "required": False}]}


def test_render_prompt() -> None:
    prompt = _prompt(description="D", arguments=[{"name": "who", "required": True}, {"name": "mood"}],
                     messages=[{"text": "Hi {who}, {mood} {unknown}"}, {"role": "assistant", "text": "ok {who}"}])
    result = mapping.render_prompt(prompt, {"who": "Ada"})
    assert result == {"description": "D", "messages": [
        {"role": "user", "content": {"type": "text", "text": "Hi Ada,  {unknown}"}},
        {"role": "assistant", "content": {"type": "text", "text": "ok Ada"}}]}
    for args in ({}, {"who": ""}, {"mood": "x"}):
        with pytest.raises(InvalidParams) as info:
            mapping.render_prompt(prompt, args)
        assert info.value.data == {"missing": ["who"]}
    with pytest.raises(InvalidParams) as info:
        mapping.render_prompt(prompt, {"who": "a", "zzz": "b"})
    assert info.value.data == {"unknown": ["zzz"]}


def test_resource_mapping() -> None:
    text = StaticResource(uri="docs://a", name="a", title="A", description="d", mime_type="text/markdown", text="# A")
    assert mapping.resource_definition(text, 3) == {"uri": "docs://a", "name": "a", "title": "A", "description": "d",
                                                    "mimeType": "text/markdown", "size": 3}
    assert mapping.resource_contents(text, None) == {"uri": "docs://a", "mimeType": "text/markdown", "text": "# A"}
    png = StaticResource(uri="docs://p", name="p", mime_type="image/png", path="x.png")
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    item = mapping.resource_contents(png, data)
    assert set(item) == {"uri", "mimeType", "blob"} and base64.b64decode(item["blob"]) == data
    # Without a MIME type, UTF-8 files are text and anything else is a blob.
    untyped = StaticResource(uri="docs://u", name="u", path="u")
    assert mapping.resource_contents(untyped, "héllo".encode()) == {"uri": "docs://u", "text": "héllo"}
    assert "blob" in mapping.resource_contents(untyped, b"\xff\xfe\x00")
    as_json = StaticResource(uri="docs://j", name="j", mime_type="application/vnd.api+json", path="j")
    assert mapping.resource_contents(as_json, b'{"a": 1}')["text"] == '{"a": 1}'
    assert "blob" in mapping.resource_contents(StaticResource(uri="x://e", name="e", mime_type="image/png", path="e"), b"")


def test_config_requires_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        StaticResource(uri="x://1", name="one")
    with pytest.raises(ValueError, match="exactly one"):
        StaticResource(uri="x://1", name="one", text="t", path="p")


def _connector(tmp_path: Path, **entry: object) -> StaticConnector:
    cfg = StaticConfig.model_validate({"name": "s", "type": "static", **entry})
    return StaticConnector(cfg, base_dir=tmp_path)


class _Events:
    def components_changed(self) -> None: ...
    def resource_updated(self, uri: str) -> None: ...
    def log(self, level: str, data: object, logger: str | None = None) -> None: ...
    def health_changed(self, health: object) -> None: ...


async def test_connector_reads_files_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data.bin").write_bytes(b"\x00\x01\xff")
    connector = _connector(tmp_path, resources=[{"uri": "b://1", "name": "bin", "path": "sub/data.bin"},
                                                {"uri": "t://1", "name": "txt", "text": "héllo"}],
                           prompts=[{"name": "p", "messages": [{"text": "x"}]}])
    await connector.start(_Events())
    assert connector.capabilities() == {"prompts", "resources"}
    sizes = {spec.uri: spec.definition["size"] for spec in connector.resources()}
    assert sizes == {"b://1": 3, "t://1": len("héllo".encode())}
    ctx = CallContext(session=None, method="resources/read", request_id=1, params={})  # type: ignore[arg-type]
    blob = await connector.read_resource("b://1", ctx)
    assert base64.b64decode(blob["contents"][0]["blob"]) == b"\x00\x01\xff"
    with pytest.raises(ResourceNotFound):
        await connector.read_resource("b://2", ctx)
    with pytest.raises(InvalidParams):
        await connector.get_prompt("nope", {}, ctx)
    assert (await connector.complete({"type": "ref/prompt", "name": "p"}, {"name": "a", "value": ""}, ctx)) == \
        {"completion": {"values": [], "hasMore": False}}


async def test_missing_file_fails_the_connector_not_the_gateway(tmp_path: Path) -> None:
    connector = _connector(tmp_path, resources=[{"uri": "b://1", "name": "bin", "path": "nope.bin"}])
    with pytest.raises(ConfigError) as info:
        await connector.start(_Events())
    assert "nope.bin" in str(info.value) and info.value.path == "connectors[s].resources[0].path"

    gw = Gateway(config_from("""
        audit: {enabled: false}
        telemetry: {metrics: false}
        connectors:
          - name: broken
            type: static
            resources: [{uri: "b://1", name: bin, path: nope.bin}]
          - name: fine
            type: static
            prompts: [{name: p, messages: [{text: x}]}]
        """, base_dir=tmp_path))
    await gw.start()
    try:
        assert gw.ready and "broken" in gw.failed and list(gw.connectors) == ["fine"]
        assert gw.catalog.counts()["prompts"] == 1
        health = gw.health()
        assert health["connectors"]["broken"]["up"] is False and "nope.bin" in health["connectors"]["broken"]["detail"]
        assert health["connectors"]["fine"] == {"up": True}
    finally:
        await gw.stop(grace_s=0)

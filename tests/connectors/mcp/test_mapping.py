"""Pure parts of the MCP connector: SSE decoding, URI templates, _meta rewriting, config."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from connectors.mcp import mapping
from connectors.mcp.config import MCPConfig
from connectors.mcp.sse import SSEDecoder


def _events(text: bytes) -> list:
    decoder = SSEDecoder()
    out = [decoder.feed_line(line) for line in text.splitlines(keepends=True)]
    return [e for e in out if e is not None], decoder


def test_sse_decoder_joins_data_and_tracks_id_and_retry() -> None:
    events, decoder = _events(b"retry: 100\nid: 1\ndata:\n\n: comment\nevent: message\ndata: {\"a\":\ndata: 1}\n\n")
    assert [(e.event, e.data, e.id) for e in events] == [("message", "", "1"), ("message", '{"a":\n1}', None)]
    assert decoder.last_event_id == "1" and decoder.retry_ms == 100


def test_sse_decoder_handles_crlf_and_endpoint_event() -> None:
    events, _ = _events(b"event: endpoint\r\ndata: /messages/?session_id=x\r\n\r\n")
    assert events[0].event == "endpoint" and events[0].data == "/messages/?session_id=x"


@pytest.mark.parametrize("template,uri,ok", [
    ("test://template/{id}/data", "test://template/123/data", True),
    ("test://template/{id}/data", "test://template/1/2/data", False),
    ("file:///{+path}", "file:///a/b/c.txt", True),
    ("mem://item/{id}", "mem://item/", False),
    ("search://q{?term,limit}", "search://q?term=x&limit=3", True),
    ("a://{x}.json", "a://v.json", True),
])
def test_template_regex(template: str, uri: str, ok: bool) -> None:
    assert bool(mapping.template_regex(template).match(uri)) is ok


def test_outgoing_meta_replaces_progress_token_and_keeps_the_rest() -> None:
    meta = {"progressToken": "client-token", "traceparent": "00-abc-def-01", "x": 1}
    assert mapping.outgoing_meta(meta, "up-1", None) == {"progressToken": "up-1", "traceparent": "00-abc-def-01", "x": 1}
    assert mapping.outgoing_meta(meta, None, None) == {"traceparent": "00-abc-def-01", "x": 1}
    assert mapping.outgoing_meta(None, None, "00-t-s-01") == {"traceparent": "00-t-s-01"}
    assert mapping.outgoing_meta({}, None, None) is None
    # a 2026-07-28 caller's own per-request fields describe its hop, never the upstream's
    hop = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/logLevel": "debug",
           "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "c"}}
    assert mapping.outgoing_meta({**hop, "x": 1}, None, None) == {"x": 1}


def test_specs_pass_definitions_through_and_skip_garbage() -> None:
    tool = {"name": "t", "inputSchema": {"type": "object"}, "_meta": {"ui": {"resourceUri": "ui://t"}}}
    specs = mapping.tool_specs([tool, {"name": 3}, "x", dict(tool)])
    assert len(specs) == 1 and specs[0].definition is tool
    res = mapping.resource_specs([{"uri": "a://1"}])
    assert res[0].name == "a://1"


def test_capability_set() -> None:
    caps = mapping.capability_set({"tools": {}, "resources": {"subscribe": True}, "logging": {}})
    assert caps == {"tools", "resources", "subscribe"}


def test_config_requires_transport_fields() -> None:
    MCPConfig.model_validate({"name": "a", "type": "mcp", "transport": "stdio", "command": "x"})
    cfg = MCPConfig.model_validate({"name": "b", "type": "mcp", "transport": "streamable_http",
                                    "url": "http://h/mcp", "headers": {"Authorization": "Bearer t"},
                                    "session": "per_client", "timeout_s": 30})
    assert cfg.session == "per_client" and cfg.timeout_s == 30
    with pytest.raises(ValidationError, match="needs command"):
        MCPConfig.model_validate({"name": "a", "type": "mcp", "transport": "stdio"})
    with pytest.raises(ValidationError, match="needs url"):
        MCPConfig.model_validate({"name": "a", "type": "mcp", "transport": "sse"})
    with pytest.raises(ValidationError):
        MCPConfig.model_validate({"name": "a", "type": "mcp", "command": "x", "bogus": 1})

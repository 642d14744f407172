"""JSON-RPC framing: parse and classify edge cases, and the one exception → wire mapping."""

from __future__ import annotations

import json

import pytest

from gateway.protocol import jsonrpc
from gateway.protocol.errors import (
    AccessDenied,
    InvalidParams,
    RateLimited,
    ResourceNotFound,
    ToolExecutionError,
)


def _one(data: bytes | str) -> jsonrpc.Incoming:
    messages, was_batch = jsonrpc.parse(data)
    assert not was_batch and len(messages) == 1
    return messages[0]


def _code(inc: jsonrpc.Incoming) -> int:
    assert inc.kind == "invalid" and inc.error is not None
    return int(inc.error["error"]["code"])


@pytest.mark.parametrize("data", [b"", b"   ", b"{", b"nul", b"\xff\xfe", b'{"a":1}{"b":2}', "{'single': 1}",
                                  b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
                                  b"[" * 100_000 + b"]" * 100_000, b"Infinity"])
def test_unparseable_frames_are_parse_errors(data: bytes | str) -> None:
    inc = _one(data)
    assert _code(inc) == -32700
    assert inc.error is not None and inc.error["id"] is None and inc.error["jsonrpc"] == "2.0"


def test_requests_notifications_and_responses() -> None:
    assert _one(b'{"jsonrpc":"2.0","id":1,"method":"ping"}').kind == "request"
    assert _one(b'{"jsonrpc":"2.0","id":"a","method":"x","params":{}}').kind == "request"
    note = _one(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert note.kind == "notification" and note.id is None and note.method == "notifications/initialized"
    assert _one(b'{"jsonrpc":"2.0","id":1,"result":{}}').kind == "response"
    assert _one(b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}').kind == "response"
    huge = 10**30
    req = _one(json.dumps({"jsonrpc": "2.0", "id": huge, "method": "ping"}))
    assert req.kind == "request" and req.id == huge


@pytest.mark.parametrize("message, echoed_id", [
    (1, None),
    ("text", None),
    (None, None),
    ({}, None),
    ({"id": 1, "method": "ping"}, 1),  # no jsonrpc
    ({"jsonrpc": "1.0", "id": "x", "method": "ping"}, "x"),
    ({"jsonrpc": 2.0, "id": 1, "method": "ping"}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": ""}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": None}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1, 2]}, 1),  # positional params
    ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": "s"}, 1),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),  # MCP forbids null ids
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 4}, 4),  # neither request nor response
])
def test_invalid_requests(message: object, echoed_id: object) -> None:
    inc = _one(json.dumps(message))
    assert _code(inc) == -32600
    assert inc.error is not None and inc.error["id"] == echoed_id


def test_malformed_responses_get_no_reply() -> None:
    inc = _one(b'{"jsonrpc":"2.0","id":[1],"result":{}}')
    assert inc.kind == "invalid" and inc.error is None


def test_batches() -> None:
    messages, was_batch = jsonrpc.parse(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}, 3, '
                                        b'{"jsonrpc":"2.0","method":"n"}]')
    assert was_batch
    assert [m.kind for m in messages] == ["request", "invalid", "notification"]
    empty, was_batch = jsonrpc.parse(b"[]")
    assert not was_batch and _code(empty[0]) == -32600
    nested, was_batch = jsonrpc.parse(b"[[[]]]")
    assert was_batch and _code(nested[0]) == -32600


def test_builders_and_dumps() -> None:
    assert jsonrpc.request(1, "m") == {"jsonrpc": "2.0", "id": 1, "method": "m"}
    assert jsonrpc.request("a", "m", {"x": 1})["params"] == {"x": 1}
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.result_response(2, {}) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert jsonrpc.error_response(None, -32600, "m", {"d": 1}) == \
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "m", "data": {"d": 1}}}
    data = jsonrpc.dumps({"text": "line\nbreak é"})
    assert b"\n" not in data and json.loads(data) == {"text": "line\nbreak é"}
    assert "é".encode() in data  # UTF-8, not escaped
    # A lone surrogate (valid as a JSON escape, not encodable as UTF-8) is escaped instead of crashing.
    lone = jsonrpc.dumps({"id": "\ud800"})
    assert json.loads(lone) == {"id": "\ud800"}


def test_error_from_exception() -> None:
    assert jsonrpc.error_from_exception(1, InvalidParams("bad", {"k": 1}))["error"] == \
        {"code": -32602, "message": "bad", "data": {"k": 1}}
    assert jsonrpc.error_from_exception(1, ResourceNotFound("x://y"))["error"]["code"] == -32002
    assert jsonrpc.error_from_exception(1, AccessDenied("no"))["error"]["code"] == -32003
    limited = jsonrpc.error_from_exception("r", RateLimited("slow down", 1500, "principal"))
    assert limited["error"]["data"] == {"retryAfterMs": 1500, "scope": "principal"}
    internal = jsonrpc.error_from_exception(3, KeyError("secret-password"))
    assert internal["error"] == {"code": -32603, "message": "Internal error (KeyError)"}
    assert "secret" not in json.dumps(internal)


def test_tool_execution_error_is_a_result() -> None:
    err = ToolExecutionError("backend said 500", status=500, structured={"a": 1})
    assert err.to_result() == {"content": [{"type": "text", "text": "backend said 500"}], "isError": True,
                               "structuredContent": {"a": 1}}


# The fast codec (orjson) must give what the standard library gives: the same values, the same
# errors, the same bytes; what orjson cannot do exactly goes to the standard library.
_TEXTS = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"h\xc3\xa9"}}}',
    b'{"id":123456789012345678901234567890,"n":-98765432109876543210}',  # past 64 bits: every digit kept
    b'{"big":18446744073709551615,"neg":-9223372036854775808,"f":0.30000000000000004,"e":1E-7}',
    b'{"a":1,"a":2}', b'"\\ud800"', b'"\\ud83d\\ude00"', b'[1e400]', b'{"x":NaN}', b'Infinity', b'-Infinity',
    b'\xef\xbb\xbf{}', '{"s":"\ud800"}', "\ufeff{}", b'"\xed\xa0\x80"', b'"a\x01"', b"  [] \n", b"", b"{",
    b"[" * 2000 + b"]" * 2000, b'{"k":"' + b"9" * 30 + b'"}', '{"id":123456789012345678901}',
    bytearray(b'{"id":-123456789012345678901,"x":[1.5]}'), b"[9223372036854775807,18446744073709551616]",
]


def _outcome(fn: object, data: bytes | bytearray | str) -> object:
    try:
        value = fn(data)  # type: ignore[operator]
    except (ValueError, RecursionError) as exc:
        return type(exc)
    return repr(value)  # repr: NaN != NaN, and 1 == 1.0 == True must not pass


@pytest.mark.parametrize("data", _TEXTS)
def test_loads_is_json_loads(data: bytes | bytearray | str) -> None:
    assert _outcome(jsonrpc.loads, data) == _outcome(json.loads, data)

    def strict(text: bytes | bytearray | str) -> object:
        return jsonrpc.loads(text, constants=False)

    text = bytes(data) if not isinstance(data, str) else data.encode("utf-8", "surrogatepass")
    if b"NaN" in text or b"Infinity" in text:
        assert _outcome(strict, data) is ValueError
    else:
        assert _outcome(strict, data) == _outcome(json.loads, data)


@pytest.mark.parametrize("value", [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "h\u00e9 \u2028 \U0001f600"}]}},
    {"id": "\ud800"}, {"n": 2 ** 70, "m": -(2 ** 64)}, {1: "int key", None: "none key", 2.5: "float key"},
    {"t": (1, 2), "f": [0.1, 1e16, -0.0, 123456.789e-30], "b": [True, False, None]},
    [[[[[[[[[[{"deep": []}]]]]]]]]]], {"d": [[]] * 3}, {"x": [[[1]]] * 300},
])
def test_dumps_is_json_dumps(value: object) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        assert jsonrpc.dumps(value) == expected.encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, as before
        assert jsonrpc.dumps(value) == json.dumps(value, separators=(",", ":")).encode()


def test_dumps_nests_past_orjsons_limit() -> None:
    value: object = []
    for _ in range(400):
        value = [value]
    assert jsonrpc.loads(jsonrpc.dumps(value)) == value


def test_dumps_writes_no_invalid_json_for_nan() -> None:
    # The one difference from json.dumps: NaN and infinities become null, not the invalid NaN.
    assert jsonrpc.dumps({"x": float("nan"), "y": float("inf")}) == b'{"x":null,"y":null}'

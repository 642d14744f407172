"""Streamable HTTP request metadata headers (2026-07-28): value encoding (the specification's table
verbatim), x-mcp-header validity, what a client sends, and the server's header/body check."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.protocol.errors import HeaderMismatch
from gateway.protocol.headers import (
    decode_header_value,
    encode_header_value,
    expected_headers,
    header_value,
    validate_request_headers,
    x_mcp_header_params,
    x_mcp_header_problems,
)
from gateway.protocol.meta import CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION

META = {PROTOCOL_VERSION: "2026-07-28", CLIENT_INFO: {"name": "ExampleClient", "version": "1.0.0"},
        CLIENT_CAPABILITIES: {}}

# The specification's example tool (streamable-http.mdx, "Custom Headers from Tool Parameters").
EXECUTE_SQL_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "description": "The region to execute the query in", "x-mcp-header": "Region"},
        "query": {"type": "string", "description": "The SQL query to execute"},
    },
    "required": ["region", "query"],
}
SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "limit": {"type": "integer", "x-mcp-header": "Limit"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        "target": {"type": "object", "properties": {"tenant": {"type": ["string", "null"], "x-mcp-header": "Tenant"}}},
        "query": {"type": "string"},
    },
}


def _call(arguments: dict[str, Any] | None = None, name: str = "execute_sql") -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": META, "name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


# -- value encoding -------------------------------------------------------------------------------

# streamable-http.mdx, "Value Encoding", the encoding examples table, verbatim.
SPEC_EXAMPLES = [
    ("us-west1", "Mcp-Param-Region: us-west1"),
    ("Hello, 世界", "Mcp-Param-Greeting: =?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "Mcp-Param-Text: =?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "Mcp-Param-Text: =?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "Mcp-Param-Val: =?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
]


@pytest.mark.parametrize(("original", "header_line"), SPEC_EXAMPLES)
def test_spec_encoding_examples(original: str, header_line: str) -> None:
    encoded = header_line.split(": ", 1)[1]
    assert encode_header_value(original) == encoded
    assert decode_header_value(encoded) == original


@pytest.mark.parametrize("value", ["get_weather", "file:///projects/myapp/config.json", "a b", "x=?base64?",
                                   "", "SELECT * FROM t WHERE a = 'b'"])
def test_plain_values_stay_plain(value: str) -> None:
    assert encode_header_value(value) == value
    assert decode_header_value(value) == value


@pytest.mark.parametrize("value", ["tab\there", "\ttab", "trailing ", "é", "\x7f", "=?base64?=", "=?base64??="])
def test_unsafe_values_are_encoded_and_round_trip(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert decode_header_value(encoded) == value


def test_type_conversion() -> None:
    assert header_value(42) == "42" and header_value(-7) == "-7" and header_value(42.0) == "42"
    assert header_value(True) == "true" and header_value(False) == "false"
    assert header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert header_value(None) is None and header_value(1.5) is None and header_value({"a": 1}) is None
    assert header_value([1]) is None and header_value(float("inf")) is None


@pytest.mark.parametrize("bad", ["=?base64?not base64!?=", "=?base64?SGVsbG8?=", "=?base64?//79?=",
                                 "=?base64?=", "caf\u00e9", "a\x00b", "line\nbreak"])
def test_decode_refuses_malformed_values(bad: str) -> None:
    with pytest.raises(HeaderMismatch) as info:
        decode_header_value(bad)
    assert info.value.code == -32020


# -- x-mcp-header validity ------------------------------------------------------------------------


def test_valid_annotations() -> None:
    assert x_mcp_header_problems(EXECUTE_SQL_SCHEMA) == []
    assert x_mcp_header_problems(SCHEMA) == []
    assert x_mcp_header_problems({"type": "object"}) == []
    assert x_mcp_header_problems(None) == []
    assert x_mcp_header_params(SCHEMA) == {"Region": ("region",), "Limit": ("limit",), "Dry": ("dry",),
                                           "Tenant": ("target", "tenant")}


def _one(prop: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"type": "object", "properties": {name: prop}}


@pytest.mark.parametrize(("schema", "reason"), [
    (_one({"type": "string", "x-mcp-header": ""}), "non-empty string"),
    (_one({"type": "string", "x-mcp-header": 5}), "non-empty string"),
    (_one({"type": "string", "x-mcp-header": "Has Space"}), "token"),
    (_one({"type": "string", "x-mcp-header": "Line\r\nBreak"}), "token"),
    (_one({"type": "string", "x-mcp-header": "Tab\tX"}), "token"),
    (_one({"type": "string", "x-mcp-header": "Région"}), "token"),
    (_one({"type": "string", "x-mcp-header": "a:b"}), "token"),
    (_one({"type": "number", "x-mcp-header": "N"}), "number"),
    (_one({"type": ["number", "null"], "x-mcp-header": "N"}), "number"),
    (_one({"type": "object", "x-mcp-header": "O"}), "primitive"),
    (_one({"type": "array", "items": {"type": "string"}, "x-mcp-header": "A"}), "primitive"),
    (_one({"x-mcp-header": "Untyped"}), "primitive"),
    ({"type": "object", "x-mcp-header": "Root"}, "reachable"),
    (_one({"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}), "reachable"),
    (_one({"anyOf": [{"type": "string", "x-mcp-header": "Any"}]}), "reachable"),
    (_one({"oneOf": [{"type": "string", "x-mcp-header": "One"}]}), "reachable"),
    (_one({"allOf": [{"type": "string", "x-mcp-header": "All"}]}), "reachable"),
    (_one({"not": {"type": "string", "x-mcp-header": "Not"}}), "reachable"),
    (_one({"if": {"type": "string"}, "then": {"type": "string", "x-mcp-header": "Then"}}), "reachable"),
    ({"type": "object", "properties": {"p": {"$ref": "#/$defs/s"}},
      "$defs": {"s": {"type": "string", "x-mcp-header": "Ref"}}}, "reachable"),
    ({"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "Extra"}}, "reachable"),
])
def test_invalid_annotations(schema: dict[str, Any], reason: str) -> None:
    problems = x_mcp_header_problems(schema)
    assert problems and any(reason in p for p in problems), problems


def test_duplicate_names_case_insensitive() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Region"},
                                               "b": {"type": "string", "x-mcp-header": "region"}}}
    problems = x_mcp_header_problems(schema)
    assert len(problems) == 1 and "not unique" in problems[0] and "/properties/a" in problems[0]
    assert x_mcp_header_params(schema) == {"Region": ("a",)}


def test_problems_name_the_location() -> None:
    schema = _one({"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}, name="ids")
    assert x_mcp_header_problems(schema)[0].startswith("x-mcp-header at /properties/ids/items ")
    assert x_mcp_header_params(schema) == {}


def test_data_keywords_and_property_names_are_not_annotations() -> None:
    schema = {"type": "object", "properties": {
        "x-mcp-header": {"type": "string"},  # a property called x-mcp-header
        "cfg": {"type": "object", "default": {"x-mcp-header": "NotOne"}, "examples": [{"x-mcp-header": "No"}],
                "const": {"x-mcp-header": "No"}, "enum": [{"x-mcp-header": "No"}]},
    }}
    assert x_mcp_header_problems(schema) == [] and x_mcp_header_params(schema) == {}


# -- what a client sends --------------------------------------------------------------------------


def test_expected_headers_spec_example() -> None:
    message = _call({"region": "us-west1", "query": "SELECT * FROM users"})
    assert expected_headers(message, EXECUTE_SQL_SCHEMA) == {
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_sql",
        "Mcp-Param-Region": "us-west1"}


def test_expected_headers_for_named_methods() -> None:
    read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read",
            "params": {"uri": "file:///projects/myapp/config.json", "_meta": META}}
    assert expected_headers(read) == {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read",
                                      "Mcp-Name": "file:///projects/myapp/config.json"}
    prompt = {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "résumé", "_meta": META}}
    assert expected_headers(prompt)["Mcp-Name"] == "=?base64?csOpc3Vtw6k=?="
    listing = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": META}}
    assert expected_headers(listing) == {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}


def test_expected_param_headers_types_nesting_and_omission() -> None:
    message = _call({"region": "Hello, 世界", "limit": 42, "dry": False, "target": {"tenant": "acme"}})
    assert expected_headers(message, SCHEMA) == {
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_sql",
        "Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?=", "Mcp-Param-Limit": "42",
        "Mcp-Param-Dry": "false", "Mcp-Param-Tenant": "acme"}
    sparse = expected_headers(_call({"region": None, "target": {"tenant": None}}), SCHEMA)
    assert not any(h.startswith("Mcp-Param-") for h in sparse)
    assert not any(h.startswith("Mcp-Param-") for h in expected_headers(_call(None), SCHEMA))
    assert not any(h.startswith("Mcp-Param-") for h in expected_headers(_call({"region": "x"})))  # no schema


# -- server validation ----------------------------------------------------------------------------


def _mismatch(headers: dict[str, str], message: dict[str, Any], schema: dict[str, Any] | None = None) -> str:
    with pytest.raises(HeaderMismatch) as info:
        validate_request_headers(headers, message, schema)
    assert info.value.code == -32020 and info.value.message.startswith("Header mismatch: ")
    return info.value.message


def test_conforming_requests_pass() -> None:
    message = _call({"region": "us-west1", "limit": 42, "dry": True, "target": {"tenant": "=?base64?x?="}})
    validate_request_headers(expected_headers(message, SCHEMA), message, SCHEMA)
    spec = _call({"region": "us-west1", "query": "SELECT * FROM users"})
    validate_request_headers({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                              "Mcp-Name": "execute_sql", "Mcp-Param-Region": "us-west1"}, spec, EXECUTE_SQL_SCHEMA)


def test_header_names_are_case_insensitive() -> None:
    message = _call({"region": "us-west1"})
    validate_request_headers({"mcp-protocol-version": "2026-07-28", "MCP-METHOD": "tools/call",
                              "mcp-name": "execute_sql", "MCP-PARAM-REGION": "us-west1"}, message, SCHEMA)


@pytest.mark.parametrize("missing", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region"])
def test_missing_required_header(missing: str) -> None:
    message = _call({"region": "us-west1"})
    headers = {k: v for k, v in expected_headers(message, SCHEMA).items() if k != missing}
    assert _mismatch(headers, message, SCHEMA) == f"Header mismatch: missing required header {missing}"


def test_name_mismatch_message_as_in_the_spec() -> None:
    message = _call({}, name="bar")
    headers = {**expected_headers(message), "Mcp-Name": "foo"}
    assert _mismatch(headers, message) == "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'"


@pytest.mark.parametrize(("header", "value"), [
    ("MCP-Protocol-Version", "2025-11-25"),
    ("Mcp-Method", "tools/list"),
    ("Mcp-Method", "Tools/Call"),  # values are case-sensitive
    ("Mcp-Param-Region", "eu-west1"),
    ("Mcp-Param-Limit", "43"),
    ("Mcp-Param-Limit", "42.5"),
    ("Mcp-Param-Limit", "forty-two"),
    ("Mcp-Param-Dry", "True"),
    ("Mcp-Param-Dry", "1"),
    ("Mcp-Param-Region", "=?base64?ZXUtd2VzdDE=?="),  # decodes to eu-west1
])
def test_values_that_do_not_match(header: str, value: str) -> None:
    message = _call({"region": "us-west1", "limit": 42, "dry": True})
    headers = {**expected_headers(message, SCHEMA), header: value}
    assert "does not match body value" in _mismatch(headers, message, SCHEMA)


@pytest.mark.parametrize("value", ["42", "42.0", "4.2e1", "42.000"])
def test_integers_compare_numerically(value: str) -> None:
    message = _call({"limit": 42})
    validate_request_headers({**expected_headers(message, SCHEMA), "Mcp-Param-Limit": value}, message, SCHEMA)
    float_body = _call({"limit": 42.0})  # as a JSON decoder may hand it over
    validate_request_headers({**expected_headers(float_body, SCHEMA), "Mcp-Param-Limit": value}, float_body, SCHEMA)


def test_encoded_values_are_decoded_before_comparing() -> None:
    message = _call({"region": "us-west1"}, name="résumé")
    headers = {**expected_headers(message, SCHEMA), "Mcp-Param-Region": "=?base64?dXMtd2VzdDE=?="}
    assert headers["Mcp-Name"] == "=?base64?csOpc3Vtw6k=?="
    validate_request_headers(headers, message, SCHEMA)


@pytest.mark.parametrize(("header", "value", "why"), [
    ("Mcp-Param-Region", "us-west1\x00", "invalid characters"),
    ("Mcp-Param-Region", "us-wést1", "invalid characters"),
    ("Mcp-Name", "exécute", "invalid characters"),
    ("Mcp-Method", "tools/call\x7f", "invalid characters"),
    ("Mcp-Param-Region", "=?base64?@@@?=", "not valid Base64"),
    ("Mcp-Name", "=?base64?/w==?=", "not valid Base64"),  # decodes, but not to UTF-8
])
def test_invalid_characters_and_malformed_encoding(header: str, value: str, why: str) -> None:
    message = _call({"region": "us-west1"})
    headers = {**expected_headers(message, SCHEMA), header: value}
    assert why in _mismatch(headers, message, SCHEMA)


def test_null_or_absent_parameters_must_not_be_sent() -> None:
    for arguments in ({"region": None}, {}, None):
        message = _call(arguments)
        validate_request_headers(expected_headers(message, SCHEMA), message, SCHEMA)  # not expected
        headers = {**expected_headers(message, SCHEMA), "Mcp-Param-Region": "us-west1"}
        assert "present but the body has no value" in _mismatch(headers, message, SCHEMA)


def test_unrecognized_param_headers_are_ignored() -> None:
    message = _call({"region": "us-west1"})
    validate_request_headers({**expected_headers(message, SCHEMA), "Mcp-Param-Unknown": "\x01anything"},
                             message, SCHEMA)


def test_repeated_recognized_header_is_refused() -> None:
    class Multi(dict[str, str]):
        def items(self) -> Any:  # a multi-dict: one name twice
            return [*super().items(), ("mcp-name", "other")]

    message = _call({})
    assert "repeated" in _mismatch(Multi(expected_headers(message)), message)


def test_notifications_need_no_headers_but_sent_ones_must_match() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": META}}
    validate_request_headers({}, note)
    validate_request_headers({"Mcp-Method": "notifications/cancelled"}, note)
    assert "does not match" in _mismatch({"Mcp-Method": "tools/call"}, note)


def test_legacy_bodies_expect_no_protocol_version_header() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert expected_headers(message) == {"Mcp-Method": "tools/list"}
    validate_request_headers({"Mcp-Method": "tools/list", "MCP-Protocol-Version": "2025-11-25"}, message)


def test_deeply_nested_schemas_do_not_overflow() -> None:
    leaf: dict[str, Any] = {"type": "string", "x-mcp-header": "Deep"}
    schema: dict[str, Any] = leaf
    for _ in range(5000):
        schema = {"type": "object", "properties": {"n": schema}}
    assert x_mcp_header_problems(schema) == []
    assert x_mcp_header_params(schema) == {"Deep": ("n",) * 5000}
    buried: Any = {"type": "string", "x-mcp-header": "Buried"}
    for _ in range(5000):
        buried = {"anyOf": [buried]}
    assert "reachable" in x_mcp_header_problems({"type": "object", "properties": {"p": buried}})[0]


def _outcome(headers: Any, message: dict[str, Any], schema: dict[str, Any] | None) -> str:
    try:
        validate_request_headers(headers, message, schema)
    except HeaderMismatch as exc:
        return exc.message
    return "ok"


@pytest.mark.parametrize("pairs", [
    [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql"),
     ("Mcp-Param-Region", "us-west1")],
    [("mcp-protocol-version", "2026-07-28"), ("MCP-METHOD", "tools/call"), ("mcp-name", "execute_sql"),
     ("MCP-PARAM-REGION", "us-west1"), ("Accept", "a"), ("accept", "b")],  # an unrecognized repeat is fine
    [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql"),
     ("mcp-name", "execute_sql"), ("Mcp-Param-Region", "us-west1")],  # repeated
    [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "execute_sql"),
     ("Mcp-Param-Region", "us-west1"), ("MCP-PARAM-REGION", "eu")],  # a recognized param repeated
    [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list"), ("Mcp-Name", "execute_sql")],
    [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Param-Region", "us-west1")],
    [("MCP-Protocol-Version", "2025-11-25"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?ZXhlY3V0ZV9zcWw=?="),
     ("Mcp-Param-Region", "us-west1")],
])
def test_aiohttp_headers_are_checked_as_any_mapping(pairs: list[tuple[str, str]]) -> None:
    """A request's own headers (a case-insensitive multi-dict) take a shorter path: same verdicts."""
    from multidict import CIMultiDict, CIMultiDictProxy

    class Pairs(dict[str, str]):  # the same pairs as a plain mapping with repeats
        def items(self) -> Any:
            return list(pairs)

    message = _call({"region": "us-west1"})
    expected = _outcome(Pairs(pairs), message, SCHEMA)
    assert _outcome(CIMultiDictProxy(CIMultiDict(pairs)), message, SCHEMA) == expected
    assert _outcome(CIMultiDict(pairs), message, SCHEMA) == expected


_V, _M = ("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call")


@pytest.mark.parametrize(("name", "pairs"), [
    ("execute_sql", [_V, _M, ("Mcp-Name", "execute_sql")]),
    ("execute_sql", [_V, _M, ("Mcp-Name", "execute_sql"), ("mcp-name", "execute_sql")]),  # repeated, equal
    ("execute_sql", [_V, _M, _M, ("Mcp-Name", "execute_sql")]),
    ("execute_sql", [_V, _M]),  # missing
    # A body value that looks encoded must be sent encoded: the same text verbatim decodes to "hi".
    ("=?base64?aGk=?=", [_V, _M, ("Mcp-Name", "=?base64?aGk=?=")]),
    ("hi", [_V, _M, ("Mcp-Name", "=?base64?aGk=?=")]),
    ("tab\tname", [_V, _M, ("Mcp-Name", "tab\tname")]),  # a tab is sent encoded, not verbatim
    ("naïve", [_V, _M, ("Mcp-Name", "naïve")]),  # non-ASCII verbatim: refused
    ("bell\x07", [_V, _M, ("Mcp-Name", "bell\x07")]),
])
def test_plainly_matching_shortcut_gives_the_full_checks_verdict(name: str, pairs: list[tuple[str, str]]) -> None:
    """Without Mcp-Param headers a request's own headers are decided in a few lookups when they
    match the body verbatim; every case the shortcut does not accept gets the full check's verdict."""
    from multidict import CIMultiDict, CIMultiDictProxy

    class Pairs(dict[str, str]):
        def items(self) -> Any:
            return list(pairs)

    message = _call(name=name)
    expected = _outcome(Pairs(pairs), message, None)
    assert _outcome(CIMultiDictProxy(CIMultiDict(pairs)), message, None) == expected
    if name in ("execute_sql", "hi") and len(pairs) == 3:
        assert expected == "ok"
    if "=?base64?aGk=?=" == name or "\x07" in name or "ï" in name or len(pairs) != 3:
        assert expected != "ok"

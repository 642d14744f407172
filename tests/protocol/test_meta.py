"""The per-request ``_meta`` protocol fields of 2026-07-28: which requests are modern, what is
required, what is refused and with which code."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gateway.protocol import meta
from gateway.protocol.errors import InvalidParams, MissingRequiredClientCapability, UnsupportedProtocolVersion
from gateway.protocol.meta import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    PROTOCOL_VERSION,
    RequestMeta,
    parse_request_meta,
    request_meta_fields,
    require_request_meta,
)

CLIENT = {"name": "ExampleClient", "version": "1.0.0"}


def _params(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "get_weather", "_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}, **(extra or {})}}


def test_reserved_keys() -> None:
    assert meta.PROTOCOL_VERSION == "io.modelcontextprotocol/protocolVersion"
    assert meta.CLIENT_CAPABILITIES == "io.modelcontextprotocol/clientCapabilities"
    assert meta.CLIENT_INFO == "io.modelcontextprotocol/clientInfo"
    assert meta.SERVER_INFO == "io.modelcontextprotocol/serverInfo"
    assert meta.LOG_LEVEL == "io.modelcontextprotocol/logLevel"
    assert meta.SUBSCRIPTION_ID == "io.modelcontextprotocol/subscriptionId"
    assert (meta.PROGRESS_TOKEN, meta.TRACEPARENT, meta.TRACESTATE, meta.BAGGAGE) == (
        "progressToken", "traceparent", "tracestate", "baggage")
    assert meta.LOG_LEVELS == ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def test_spec_example_request() -> None:
    params = {"name": "get_weather", "arguments": {"location": "Seattle, WA"},
              "_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_INFO: CLIENT, CLIENT_CAPABILITIES: {}}}
    assert parse_request_meta(params) == RequestMeta("2026-07-28", {}, CLIENT, None)


def test_full_meta() -> None:
    caps = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/ui": {}}, "custom": 1}
    got = parse_request_meta({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: caps,
                                        CLIENT_INFO: {**CLIENT, "title": "Example"}, LOG_LEVEL: "warning",
                                        "progressToken": 3}})
    assert got == RequestMeta("2026-07-28", caps, {**CLIENT, "title": "Example"}, "warning")
    assert got is not None and got.client_capabilities is not caps  # a copy


@pytest.mark.parametrize("params", [
    {},
    {"name": "x"},
    {"_meta": {}},
    {"_meta": {"progressToken": 1}},
    {"_meta": 5},
    {"_meta": {CLIENT_CAPABILITIES: {}}},  # capabilities but no version: not a modern request
    {"_meta": [PROTOCOL_VERSION]},
])
def test_legacy_requests_parse_to_none(params: dict[str, Any]) -> None:
    assert parse_request_meta(params) is None


@pytest.mark.parametrize("version", ["1900-01-01", "2026-07-29", "", "latest",
                                     "2025-11-25", "2024-11-05"])  # legacy: initialize, not _meta
def test_unsupported_version(version: str) -> None:
    with pytest.raises(UnsupportedProtocolVersion) as info:
        parse_request_meta(_params({PROTOCOL_VERSION: version}))
    assert info.value.code == -32022
    assert info.value.data["requested"] == version
    assert "2026-07-28" in info.value.data["supported"]


@pytest.mark.parametrize("version", [None, 20260728, ["2026-07-28"], {"v": 1}, True])
def test_malformed_version(version: object) -> None:
    with pytest.raises(UnsupportedProtocolVersion) as info:
        parse_request_meta({"_meta": {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: {}}})
    assert "requested" not in info.value.data


def test_capabilities_are_required() -> None:
    with pytest.raises(InvalidParams, match="Missing required _meta field io.modelcontextprotocol/clientCapabilities"):
        parse_request_meta({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_INFO: CLIENT}})


@pytest.mark.parametrize("caps", [None, [], "all", 1, {"elicitation": True}, {"roots": []},
                                  {"sampling": "yes"}, {"extensions": []}, {"experimental": 1}])
def test_malformed_capabilities(caps: object) -> None:
    with pytest.raises(InvalidParams) as info:
        parse_request_meta({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: caps}})
    assert info.value.code == -32602


def test_client_info_is_optional() -> None:
    got = parse_request_meta({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}})
    assert got is not None and got.client_info == {} and got.log_level is None


@pytest.mark.parametrize("info", ["ExampleClient", [], {"name": "x"}, {"version": "1"}, {"name": 1, "version": "1"},
                                  {"name": "x", "version": 1}])
def test_malformed_client_info(info: object) -> None:
    with pytest.raises(InvalidParams, match="clientInfo"):
        parse_request_meta(_params({CLIENT_INFO: info}))


@pytest.mark.parametrize("level", ["verbose", "DEBUG", "", 7, ["info"]])
def test_unknown_log_level(level: object) -> None:
    with pytest.raises(InvalidParams, match="logLevel"):
        parse_request_meta(_params({LOG_LEVEL: level}))


@pytest.mark.parametrize("level", meta.LOG_LEVELS)
def test_every_log_level(level: str) -> None:
    got = parse_request_meta(_params({LOG_LEVEL: level}))
    assert got is not None and got.log_level == level


def test_require_request_meta() -> None:
    assert require_request_meta(_params()).version == "2026-07-28"
    with pytest.raises(InvalidParams, match="Missing required _meta field io.modelcontextprotocol/protocolVersion"):
        require_request_meta({"name": "x"})
    with pytest.raises(UnsupportedProtocolVersion) as info:
        require_request_meta({"_meta": {PROTOCOL_VERSION: "2025-11-25", CLIENT_CAPABILITIES: {}}})
    assert info.value.data["requested"] == "2025-11-25"


def test_request_meta_require() -> None:
    got = RequestMeta("2026-07-28", {"elicitation": {}}, {}, None)
    got.require("elicitation")
    with pytest.raises(MissingRequiredClientCapability) as info:
        got.require("elicitation", "sampling", "roots")
    assert info.value.data == {"requiredCapabilities": {"sampling": {}, "roots": {}}}


def test_request_meta_is_frozen_and_slotted() -> None:
    got = RequestMeta("2026-07-28", {}, {}, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.version = "x"  # type: ignore[misc]
    assert not hasattr(got, "__dict__")


def test_request_meta_fields_round_trip() -> None:
    fields = request_meta_fields("2026-07-28", {"elicitation": {}}, CLIENT, "info")
    assert fields == {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {"elicitation": {}},
                      CLIENT_INFO: CLIENT, LOG_LEVEL: "info"}
    assert parse_request_meta({"_meta": fields}) == RequestMeta("2026-07-28", {"elicitation": {}}, CLIENT, "info")
    assert request_meta_fields("2026-07-28", {}) == {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}

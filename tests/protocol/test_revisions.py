"""Protocol revisions: the version constants, negotiation (never modern), the new error classes, and
the per-revision table (methods, batches, features, error codes, result shaping)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gateway.protocol import versions
from gateway.protocol.errors import (
    ACCESS_DENIED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    RATE_LIMITED,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatch,
    InvalidParams,
    MissingRequiredClientCapability,
    ProtocolError,
    RateLimited,
    ResourceNotFound,
    UnsupportedProtocolVersion,
)
from gateway.protocol.jsonrpc import error_from_exception
from gateway.protocol.meta import SERVER_INFO
from gateway.protocol.revisions import FEATURES, MODERN_RATE_LIMITED, REVISIONS, CacheHint, Revision, revision
from gateway.protocol.shaping import shape_result

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
MODERN = "2026-07-28"
CACHEABLE = ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
             "resources/read"]
INFO = {"name": "mcp-gateway", "version": "1.2.3"}

# -- versions -------------------------------------------------------------------------------------


def test_version_constants() -> None:
    assert versions.LEGACY_VERSIONS == tuple(LEGACY)
    assert versions.MODERN_VERSIONS == (MODERN,)
    assert versions.SUPPORTED_VERSIONS == (*LEGACY, MODERN)
    assert list(versions.SUPPORTED_VERSIONS) == sorted(versions.SUPPORTED_VERSIONS)  # oldest → newest
    assert versions.LATEST_VERSION == MODERN
    assert versions.LATEST_LEGACY_VERSION == "2025-11-25"


def test_is_modern_is_legacy_is_supported() -> None:
    assert versions.is_modern(MODERN) and not versions.is_legacy(MODERN) and versions.is_supported(MODERN)
    for v in LEGACY:
        assert versions.is_legacy(v) and not versions.is_modern(v) and versions.is_supported(v)
    for v in ("", "2026-07-29", "2099-01-01", "2025-11-24"):
        assert not versions.is_modern(v) and not versions.is_legacy(v) and not versions.is_supported(v)


@pytest.mark.parametrize("asked", [MODERN, "2099-01-01", "", None, 20260728, ["2026-07-28"]])
def test_negotiate_never_returns_a_modern_version(asked: object) -> None:
    assert versions.negotiate(asked) == "2025-11-25"


@pytest.mark.parametrize("version", LEGACY)
def test_negotiate_keeps_a_legacy_version(version: str) -> None:
    assert versions.negotiate(version) == version


# -- errors ---------------------------------------------------------------------------------------


def test_new_error_codes() -> None:
    assert (HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION) == (-32020, -32021, -32022)
    err = HeaderMismatch("Header mismatch: missing required header Mcp-Name")
    assert isinstance(err, ProtocolError)
    assert err.to_error() == {"code": -32020, "message": "Header mismatch: missing required header Mcp-Name"}


def test_unsupported_protocol_version_data() -> None:
    err = UnsupportedProtocolVersion("1900-01-01")
    assert err.to_error() == {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                 "requested": "1900-01-01"},
    }
    assert UnsupportedProtocolVersion("x", supported=["2026-07-28"]).data == {"supported": ["2026-07-28"],
                                                                              "requested": "x"}
    assert UnsupportedProtocolVersion(None).data == {"supported": list(err.supported)}
    assert len(UnsupportedProtocolVersion("9" * 10_000).data["requested"]) == 100  # not echoed whole
    wire = error_from_exception(7, err)
    assert wire["error"]["code"] == -32022 and wire["id"] == 7


def test_missing_required_client_capability_data() -> None:
    err = MissingRequiredClientCapability({"elicitation": {"form": {}}, "sampling": None})
    assert err.code == -32021
    assert err.data == {"requiredCapabilities": {"elicitation": {"form": {}}, "sampling": {}}}
    assert err.message == "Missing required client capability: elicitation, sampling"


# -- the table ------------------------------------------------------------------------------------


def test_every_supported_version_has_a_revision() -> None:
    assert set(REVISIONS) == set(versions.SUPPORTED_VERSIONS)
    for v, rev in REVISIONS.items():
        assert revision(v) is rev and rev.version == v
        assert rev.modern is versions.is_modern(v)


@pytest.mark.parametrize("bad", ["2099-01-01", "", "2025-11-24"])
def test_unknown_revision_is_unsupported_protocol_version(bad: str) -> None:
    with pytest.raises(UnsupportedProtocolVersion) as info:
        revision(bad)
    assert info.value.data["requested"] == bad


def test_revision_is_a_frozen_slotted_value() -> None:
    rev = revision(MODERN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rev.modern = False  # type: ignore[misc]
    assert not hasattr(rev, "__dict__")
    assert repr(rev) == "Revision(version='2026-07-28', modern=True, batches=False)"


def test_batches_only_in_2025_03_26() -> None:
    assert [v for v, rev in REVISIONS.items() if rev.batches] == ["2025-03-26"]


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe", "notifications/initialized",
                                    "notifications/roots/list_changed"])
def test_legacy_only_methods(method: str) -> None:
    assert all(revision(v).knows(method) for v in LEGACY)
    assert not revision(MODERN).knows(method)


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
def test_modern_only_methods(method: str) -> None:
    assert revision(MODERN).knows(method)
    assert not any(revision(v).knows(method) for v in LEGACY)


@pytest.mark.parametrize("method", ["tools/list", "tools/call", "resources/list", "resources/templates/list",
                                    "resources/read", "prompts/list", "prompts/get", "completion/complete",
                                    "notifications/cancelled"])
def test_methods_of_every_revision(method: str) -> None:
    assert all(rev.knows(method) for rev in REVISIONS.values())


def test_tasks_methods_in_2025_11_25_core_and_the_2026_extension() -> None:
    # 2025-11-25: experimental core tasks; 2026-07-28: the io.modelcontextprotocol/tasks extension
    # (tasks/get, tasks/update, tasks/cancel; no tasks/list or tasks/result).
    assert [v for v, rev in REVISIONS.items() if rev.knows("tasks/get")] == ["2025-11-25", MODERN]
    assert [v for v, rev in REVISIONS.items() if rev.knows("tasks/update")] == [MODERN]
    assert [v for v, rev in REVISIONS.items() if rev.knows("tasks/list")] == ["2025-11-25"]
    assert not revision(MODERN).knows("nonsense/method")


def test_features() -> None:
    old, mid, latest, modern = revision("2024-11-05"), revision("2025-06-18"), revision("2025-11-25"), revision(MODERN)
    assert not old.supports("annotations") and revision("2025-03-26").supports("annotations")
    assert mid.supports("structuredContent") and not mid.supports("icons") and latest.supports("icons")
    assert latest.supports("tasks") and not modern.supports("tasks") and not mid.supports("tasks")
    assert modern.supports("icons") and modern.supports("resultType") and modern.supports("caching")
    assert not latest.supports("resultType") and not latest.supports("caching") and not latest.supports("mrtr")
    assert latest.supports("sessions") and not modern.supports("sessions")
    assert old.supports("someFutureField") and "someFutureField" not in FEATURES  # unknown: passes through


# -- error codes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", LEGACY)
def test_resource_not_found_is_32002_in_legacy(version: str) -> None:
    exc = ResourceNotFound("x://missing")
    assert revision(version).error_code(exc) == RESOURCE_NOT_FOUND == -32002
    assert revision(version).to_error(exc) == {"code": -32002, "message": "Resource not found: x://missing",
                                               "data": {"uri": "x://missing"}}


def test_resource_not_found_is_32602_in_2026_07_28_with_its_data() -> None:
    exc = ResourceNotFound("x://missing")
    assert revision(MODERN).error_code(exc) == INVALID_PARAMS == -32602
    assert revision(MODERN).to_error(exc) == {"code": -32602, "message": "Resource not found: x://missing",
                                              "data": {"uri": "x://missing"}}
    assert exc.code == -32002  # the exception itself is not changed
    # An upstream's -32002 passed through as a plain ProtocolError is remapped by code too.
    assert revision(MODERN).error_code(ProtocolError("gone", code=-32002)) == -32602


def test_codes_reserved_by_2026_07_28_are_not_emitted() -> None:
    rate = RateLimited("slow down", 1500)
    assert revision("2025-11-25").error_code(rate) == RATE_LIMITED == -32029
    assert revision(MODERN).error_code(rate) == MODERN_RATE_LIMITED
    assert not -32768 <= MODERN_RATE_LIMITED <= -32000  # application range
    assert revision(MODERN).to_error(rate)["data"] == {"retryAfterMs": 1500}
    assert revision(MODERN).error_code(ProtocolError("url elicitation", code=-32042)) == INTERNAL_ERROR
    assert revision("2025-11-25").error_code(ProtocolError("url elicitation", code=-32042)) == -32042
    for exc in (HeaderMismatch("h"), MissingRequiredClientCapability({"x": {}}), UnsupportedProtocolVersion("v"),
                InvalidParams("p"), ProtocolError("denied", code=ACCESS_DENIED)):
        assert revision(MODERN).error_code(exc) == exc.code


# -- shaping: legacy ------------------------------------------------------------------------------


def _tools() -> dict[str, object]:
    return {"tools": [{"name": "t", "title": "T", "outputSchema": {"type": "object"}, "icons": [],
                       "annotations": {"readOnlyHint": True}, "inputSchema": {"type": "object"},
                       "execution": {"taskSupport": "optional"}, "_meta": {"x": 1}}]}


def test_legacy_shaping_is_unchanged_for_2025_11_25() -> None:
    tools = _tools()
    assert revision("2025-11-25").shape_result("tools/list", tools) is tools
    assert shape_result("tools/list", tools, "2025-11-25") is tools
    call = {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"a": 1}}
    assert shape_result("tools/call", call, "2025-11-25") is call


def test_legacy_shaping_ignores_cache_and_server_info() -> None:
    listing: dict[str, Any] = {"tools": []}
    shaped = revision("2025-11-25").shape_result("tools/list", listing, cache=CacheHint(5, "public"),
                                                 server_info=INFO)
    assert shaped == {"tools": []}


def test_legacy_results_never_carry_modern_fields() -> None:
    upstream = {"tools": [], "resultType": "complete", "ttlMs": 10, "cacheScope": "public", "_meta": {"k": 1}}
    for v in LEGACY:
        assert shape_result("tools/list", upstream, v) == {"tools": [], "_meta": {"k": 1}}
    assert "resultType" in upstream  # never mutated


def test_legacy_downgrades_per_revision() -> None:
    tools = _tools()
    old = shape_result("tools/list", tools, "2024-11-05")["tools"][0]
    assert set(old) == {"name", "inputSchema", "_meta"}
    mid = shape_result("tools/list", tools, "2025-06-18")["tools"][0]
    assert "icons" not in mid and "execution" not in mid and mid["title"] == "T" and "outputSchema" in mid
    assert "execution" in shape_result("tools/list", tools, "2025-11-25")["tools"][0]


def test_thin_wrapper_leaves_unknown_versions_alone() -> None:
    tools = _tools()
    assert shape_result("tools/list", tools, "") is tools
    assert shape_result("tools/list", tools, "2099-01-01") is tools


# -- shaping: modern ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "completion/complete", "subscriptions/listen",
                                    *CACHEABLE])
def test_modern_results_carry_result_type_complete(method: str) -> None:
    result: dict[str, object] = {}
    shaped = revision(MODERN).shape_result(method, result)
    assert shaped["resultType"] == "complete"
    assert result == {}  # never mutated


def test_modern_keeps_input_required() -> None:
    interim = {"resultType": "input_required", "inputRequests": {"a": {"method": "elicitation/create"}},
               "requestState": "opaque", "ttlMs": 5, "cacheScope": "public"}
    shaped = revision(MODERN).shape_result("resources/read", interim, cache=CacheHint(1000, "public"))
    assert shaped == {"resultType": "input_required", "inputRequests": {"a": {"method": "elicitation/create"}},
                      "requestState": "opaque"}  # interim results carry no caching hints


@pytest.mark.parametrize("method", CACHEABLE)
def test_modern_cacheable_results_carry_the_hint(method: str) -> None:
    shaped = revision(MODERN).shape_result(method, {"x": 1}, cache=CacheHint(60_000, "public"))
    assert shaped == {"x": 1, "resultType": "complete", "ttlMs": 60_000, "cacheScope": "public"}


@pytest.mark.parametrize("method", CACHEABLE)
def test_modern_cacheable_results_default_to_stale_and_private(method: str) -> None:
    upstream = {"ttlMs": 999_999, "cacheScope": "public"}  # an upstream's hint is not the gateway's
    shaped = revision(MODERN).shape_result(method, upstream)
    assert (shaped["ttlMs"], shaped["cacheScope"]) == (0, "private")


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "completion/complete"])
def test_modern_other_results_carry_no_cache_fields(method: str) -> None:
    shaped = revision(MODERN).shape_result(method, {"content": [], "ttlMs": 1, "cacheScope": "public"},
                                           cache=CacheHint(1000, "public"))
    assert shaped == {"content": [], "resultType": "complete"}


def test_modern_server_info_goes_into_meta() -> None:
    result: dict[str, Any] = {"tools": [], "_meta": {"com.example/k": 1, SERVER_INFO: {"name": "upstream", "version": "0"}}}
    shaped = revision(MODERN).shape_result("tools/list", result, server_info=INFO)
    assert shaped["_meta"] == {"com.example/k": 1, SERVER_INFO: INFO}
    assert result["_meta"][SERVER_INFO] == {"name": "upstream", "version": "0"}  # not mutated
    assert revision(MODERN).shape_result("tools/call", {"content": []}, server_info=INFO)["_meta"] == {
        SERVER_INFO: INFO}
    assert "_meta" not in revision(MODERN).shape_result("tools/call", {"content": []})


def test_modern_tools_keep_every_field_but_tasks_execution() -> None:
    tool = revision(MODERN).shape_result("tools/list", _tools())["tools"][0]
    assert set(tool) == {"name", "title", "outputSchema", "icons", "annotations", "inputSchema", "_meta"}


def test_modern_through_the_thin_wrapper() -> None:
    assert shape_result("tools/list", {"tools": []}, MODERN) == {"tools": [], "resultType": "complete",
                                                                 "ttlMs": 0, "cacheScope": "private"}


@pytest.mark.parametrize("bad", [{"ttl_ms": -1, "scope": "public"}, {"ttl_ms": 1.5, "scope": "public"},
                                 {"ttl_ms": True, "scope": "public"}, {"ttl_ms": 1, "scope": "shared"}])
def test_cache_hint_validates(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CacheHint(**bad)  # type: ignore[arg-type]


def test_revision_type_is_exported() -> None:
    assert isinstance(revision(MODERN), Revision)

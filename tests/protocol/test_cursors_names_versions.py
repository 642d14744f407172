"""Cursors (opaque, signed, listing-bound), public names (valid, deterministic, distinct) and
protocol revisions (negotiation, batches, shaping for older clients)."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.protocol import versions
from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import InvalidParams
from gateway.protocol.names import (
    MAX_NAME,
    NAME_RE,
    PORTABLE_NAME_RE,
    is_portable_name,
    is_valid_name,
    name_suffix,
    public_name,
    public_names,
    sanitize,
)
from gateway.protocol.shaping import shape_result

# -- cursors ------------------------------------------------------------------------------------


def test_cursor_round_trip_and_opacity() -> None:
    codec = CursorCodec("s3cret")
    cursor = codec.encode("tools/list", "kit_echo_007")
    assert codec.decode("tools/list", cursor) == "kit_echo_007"
    assert "kit_echo" not in cursor and "=" not in cursor
    # Replicas sharing the secret accept each other's cursors; others do not.
    assert CursorCodec("s3cret").decode("tools/list", cursor) == "kit_echo_007"
    with pytest.raises(InvalidParams):
        CursorCodec("other").decode("tools/list", cursor)
    with pytest.raises(InvalidParams):
        CursorCodec().decode("tools/list", cursor)  # a random secret per process


def test_cursor_is_bound_to_its_listing() -> None:
    codec = CursorCodec(b"k")
    with pytest.raises(InvalidParams, match="another listing"):
        codec.decode("prompts/list", codec.encode("tools/list", "a"))


@pytest.mark.parametrize("bad", ["", "x", "!!!!", "é", "A" * 5000, 5, None, ["a"], {"c": 1}])
def test_garbage_cursors(bad: object) -> None:
    with pytest.raises(InvalidParams) as info:
        CursorCodec("s").decode("tools/list", bad)
    assert info.value.code == -32602


def test_tampered_cursor() -> None:
    codec = CursorCodec("s")
    raw = bytearray(base64.urlsafe_b64decode(codec.encode("tools/list", "abc") + "=="))
    for i in range(len(raw)):
        flipped = bytearray(raw)
        flipped[i] ^= 0x01
        forged = base64.urlsafe_b64encode(bytes(flipped)).decode().rstrip("=")
        with pytest.raises(InvalidParams):
            codec.decode("tools/list", forged)


@settings(max_examples=150, deadline=None)
@given(key=st.text(), listing=st.sampled_from(["tools/list", "prompts/list", "resources/list"]))
def test_cursor_round_trips_any_key(key: str, listing: str) -> None:
    codec = CursorCodec("prop")
    assert codec.decode(listing, codec.encode(listing, key)) == key


@settings(max_examples=150, deadline=None)
@given(garbage=st.text(max_size=200))
def test_random_strings_are_never_accepted(garbage: str) -> None:
    with pytest.raises(InvalidParams):
        CursorCodec("prop").decode("tools/list", garbage)


# -- names --------------------------------------------------------------------------------------


def test_public_names() -> None:
    assert public_name("team_", "summarize") == "team_summarize"
    assert public_name("", "summarize") == "summarize"
    assert public_name("a.", "b-c") == "a_b-c"  # portable by default: no dots
    assert public_name("a.", "b-c", portable=False) == "a.b-c"  # the upstream spelling keeps them
    assert public_name("team_", "get /users/{id}") == "team_get__users__id_"
    assert public_name("", "2fa.enable") == "_2fa_enable"  # a letter or "_" first
    assert public_name("", "2fa.enable", portable=False) == "2fa.enable"
    assert public_name("tracker_", "AddonPropertiesResource.getAddonProperties_get") == \
        "tracker_AddonPropertiesResource_getAddonProperties_get"
    assert sanitize("") == "_" and public_name("", "") == "_" and public_name("", "", portable=False) == "_"
    assert is_valid_name("ok_name-1.2") and not is_valid_name("") and not is_valid_name("a b")
    assert not is_valid_name("x" * 65)
    assert is_portable_name("ok_name-1") and not is_portable_name("ok.name") and not is_portable_name("1ok")
    assert not is_portable_name("-ok") and is_portable_name("_1ok") and not is_portable_name("x" * 65)


def test_long_names_are_shortened_deterministically_and_distinctly() -> None:
    a = public_name("verylongconnector_", "operation_" + "x" * 80 + "_alpha")
    b = public_name("verylongconnector_", "operation_" + "x" * 80 + "_beta")
    assert len(a) == len(b) == MAX_NAME
    assert NAME_RE.match(a) and NAME_RE.match(b)
    assert a != b and a[:55] == b[:55]
    assert a == public_name("verylongconnector_", "operation_" + "x" * 80 + "_alpha")
    # Names that sanitise the same but differ in the original still differ once shortened.
    long1 = public_name("p_", "é" * 70)
    long2 = public_name("p_", "ü" * 70)
    assert long1 != long2 and is_portable_name(long1) and is_portable_name(long2)


def test_a_shortened_name_ends_in_the_sha256_of_its_original_as_documented() -> None:
    # The documented derivation: the first 55 characters of the mapped name, "_", then
    # printf %s "$prefix$local" | sha256sum | cut -c1-8.
    prefix, local = "github_", "orgs/custom-properties-for-repos-create-or-update-organization-definitions"
    digest = hashlib.sha256((prefix + local).encode()).hexdigest()[:8]
    assert public_name(prefix, local) == (prefix + local).replace("/", "_")[:55] + "_" + digest
    assert name_suffix(prefix + local) == digest
    assert public_name(prefix, local, portable=False) == public_name(prefix, local)  # only "/": same both ways


def test_locals_that_map_to_one_name_stay_distinct_whatever_their_order() -> None:
    locals_ = ["get.item", "get_item", "get/item", "other"]
    names = public_names("t_", locals_)
    assert names[0] == "t_get_item_" + name_suffix("t_get.item")
    assert names[1] == "t_get_item"  # already spelled that way: keeps it
    assert names[2] == "t_get_item_" + name_suffix("t_get/item")
    assert names[3] == "t_other"
    assert len(set(names)) == len(names) and all(is_portable_name(n) for n in names)
    assert public_names("t_", locals_[::-1]) == names[::-1]
    # The upstream spelling keeps the dot, so only "/" clashes there.
    assert public_names("t_", locals_, portable=False) == [
        "t_get.item", "t_get_item", "t_get_item_" + name_suffix("t_get/item"), "t_other"]


@settings(max_examples=150, deadline=None)
@given(prefix=st.text(max_size=30), local=st.text(max_size=120))
def test_public_names_are_always_valid(prefix: str, local: str) -> None:
    name = public_name(prefix, local)
    assert PORTABLE_NAME_RE.match(name) and NAME_RE.match(name)
    assert name == public_name(prefix, local)
    if PORTABLE_NAME_RE.match(prefix + local):
        assert name == prefix + local  # portable names are left alone
    upstream = public_name(prefix, local, portable=False)
    assert NAME_RE.match(upstream)
    if NAME_RE.match(prefix + local):
        assert upstream == prefix + local


@settings(max_examples=150, deadline=None)
@given(locals_=st.sets(st.text(alphabet="abcdefghij_", min_size=60, max_size=100), min_size=2, max_size=6))
def test_distinct_long_names_stay_distinct(locals_: set[str]) -> None:
    names = {public_name("connector_", local) for local in locals_}
    assert len(names) == len(locals_)


@settings(max_examples=150, deadline=None)
@given(locals_=st.sets(st.text(alphabet="ab._/-1", min_size=1, max_size=8), min_size=2, max_size=8))
def test_distinct_locals_of_one_connector_get_distinct_portable_names(locals_: set[str]) -> None:
    ordered = sorted(locals_)
    names = public_names("c_", ordered)
    assert len(set(names)) == len(names) and all(PORTABLE_NAME_RE.match(n) for n in names)
    assert public_names("c_", ordered[::-1]) == names[::-1]


# -- versions and shaping -----------------------------------------------------------------------


def test_negotiation() -> None:
    for version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"):
        assert versions.negotiate(version) == version
        assert versions.is_supported(version)
    assert versions.negotiate("2099-01-01") == versions.LATEST_LEGACY_VERSION == "2025-11-25"
    assert versions.negotiate(None) == versions.LATEST_LEGACY_VERSION
    assert versions.negotiate(20250618) == versions.LATEST_LEGACY_VERSION
    assert not versions.is_supported("2025-06-17")
    assert versions.allows_batches("2025-03-26")
    assert not any(versions.allows_batches(v) for v in ("2024-11-05", "2025-06-18", "2025-11-25"))


def test_shaping_for_older_clients() -> None:
    tools = {"tools": [{"name": "t", "title": "T", "outputSchema": {"type": "object"}, "icons": [],
                        "annotations": {"readOnlyHint": True}, "inputSchema": {"type": "object"}, "_meta": {"x": 1}}]}
    assert shape_result("tools/list", tools, "2025-11-25") is tools
    old = shape_result("tools/list", tools, "2024-11-05")["tools"][0]
    assert set(old) == {"name", "inputSchema", "_meta"}
    mid = shape_result("tools/list", tools, "2025-06-18")["tools"][0]
    assert "icons" not in mid and mid["title"] == "T" and "outputSchema" in mid
    assert "title" in tools["tools"][0]  # the catalog's object is never mutated

    call = {"content": [{"type": "resource_link", "uri": "x://y", "name": "y"}, {"type": "audio", "data": "", "mimeType": "a"}],
            "structuredContent": {"a": 1}}
    shaped = shape_result("tools/call", call, "2024-11-05")
    assert "structuredContent" not in shaped
    assert [c["type"] for c in shaped["content"]] == ["text", "text"]
    assert shape_result("tools/call", call, "2025-06-18")["content"][0]["type"] == "resource_link"
    prompt = {"messages": [{"role": "user", "content": {"type": "audio", "data": "", "mimeType": "a"}}]}
    assert shape_result("prompts/get", prompt, "2024-11-05")["messages"][0]["content"]["type"] == "text"

"""Sealed MRTR ``requestState``: round trip, and every way a presented state is refused (tampered,
expired, another principal, another method, other params, malformed, another secret), plus the
request digest and the signing scheme shared with cursors."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import InvalidParams
from gateway.protocol.request_state import MAX_REQUEST_STATE, RequestStateCodec, request_digest
from gateway.protocol.signing import SignatureError, Signer

T0 = 1_800_000_000.0
CALL = {"name": "deploy", "arguments": {"env": "prod", "replicas": 3}}
DIGEST = request_digest("tools/call", CALL)
PAYLOAD = {"step": 2, "upstream": "opaque-upstream-state", "asked": ["confirm"]}


def _seal(codec: RequestStateCodec, **overrides: object) -> str:
    args: dict[str, object] = {"principal": "alice", "method": "tools/call", "digest": DIGEST, "now": T0}
    args.update(overrides)
    return codec.seal(PAYLOAD, **args)  # type: ignore[arg-type]


def _refused(codec: RequestStateCodec, token: object, **overrides: object) -> str:
    args: dict[str, object] = {"principal": "alice", "method": "tools/call", "digest": DIGEST, "now": T0 + 1}
    args.update(overrides)
    with pytest.raises(InvalidParams) as info:
        codec.open(token, **args)  # type: ignore[arg-type]
    assert info.value.code == -32602
    assert info.value.message.startswith("Invalid requestState: ")
    return info.value.message


def test_round_trip() -> None:
    codec = RequestStateCodec("s3cret")
    token = _seal(codec)
    assert codec.open(token, principal="alice", method="tools/call", digest=DIGEST, now=T0 + 599) == PAYLOAD
    # Replicas sharing the secret open each other's states.
    assert RequestStateCodec("s3cret").open(token, principal="alice", method="tools/call", digest=DIGEST,
                                            now=T0 + 1) == PAYLOAD
    assert RequestStateCodec(b"s3cret").open(token, principal="alice", method="tools/call", digest=DIGEST,
                                             now=T0 + 1) == PAYLOAD


def test_token_is_opaque_and_url_safe() -> None:
    token = _seal(RequestStateCodec("s3cret"))
    assert "=" not in token and "+" not in token and "/" not in token
    assert "alice" not in base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode(errors="replace")


def test_another_secret_is_refused() -> None:
    token = _seal(RequestStateCodec("s3cret"))
    assert "integrity check failed" in _refused(RequestStateCodec("other"), token)
    assert "integrity check failed" in _refused(RequestStateCodec(None), token)  # random per process


def test_tampered_state_is_refused() -> None:
    codec = RequestStateCodec("s3cret")
    raw = bytearray(base64.urlsafe_b64decode(_seal(codec) + "=="))
    for i in range(len(raw)):
        flipped = bytearray(raw)
        flipped[i] ^= 0x01
        forged = base64.urlsafe_b64encode(bytes(flipped)).decode().rstrip("=")
        assert "integrity check failed" in _refused(codec, forged)


def test_edited_payload_is_refused() -> None:
    codec = RequestStateCodec("s3cret")
    raw = base64.urlsafe_b64decode(_seal(codec) + "==")
    mac, body = raw[:32], json.loads(raw[32:])
    body["s"]["step"] = 99
    edited = base64.urlsafe_b64encode(mac + json.dumps(body).encode()).decode().rstrip("=")
    assert "integrity check failed" in _refused(codec, edited)


def test_expired_state_is_refused() -> None:
    codec = RequestStateCodec("s3cret", ttl_s=30)
    token = _seal(codec)
    codec.open(token, principal="alice", method="tools/call", digest=DIGEST, now=T0 + 29.9)
    assert "expired" in _refused(codec, token, now=T0 + 30)
    assert "expired" in _refused(codec, token, now=T0 + 10_000)


def test_state_of_another_principal_is_refused() -> None:
    codec = RequestStateCodec("s3cret")
    message = _refused(codec, _seal(codec), principal="mallory")
    assert "another principal" in message and "alice" not in message and "mallory" not in message


def test_state_for_another_method_is_refused() -> None:
    codec = RequestStateCodec("s3cret")
    assert _refused(codec, _seal(codec), method="prompts/get") == (
        "Invalid requestState: it was issued for tools/call, not prompts/get")


def test_state_for_other_params_is_refused() -> None:
    codec = RequestStateCodec("s3cret")
    other = request_digest("tools/call", {"name": "deploy", "arguments": {"env": "prod", "replicas": 30}})
    assert "other parameters" in _refused(codec, _seal(codec), digest=other)


@pytest.mark.parametrize("bad", ["", "x", "!!!!", "é", "a.b", "A" * (MAX_REQUEST_STATE + 1), 5, None, ["t"], {"t": 1}])
def test_malformed_state_is_refused(bad: object) -> None:
    assert "malformed" in _refused(RequestStateCodec("s3cret"), bad)


def test_signed_garbage_is_malformed_not_trusted() -> None:
    signer = Signer("s3cret", mac_len=32, context=b"mcp-gateway/request-state/v1")
    codec = RequestStateCodec("s3cret")
    for body in (b"not json", b"[1,2]", b'{"v":2,"s":{}}', b'{"v":1,"s":[],"x":1}', b'{"v":1,"s":{}}'):
        assert "malformed" in _refused(codec, signer.sign(body))


def test_error_messages_never_echo_the_secret_or_token() -> None:
    codec = RequestStateCodec("hunter2-secret")
    token = _seal(codec)
    for message in (_refused(codec, token[:-4] + "AAAA"), _refused(codec, token, principal="bob"),
                    _refused(codec, token, now=T0 + 10_000)):
        assert "hunter2" not in message and token not in message


def test_seal_refuses_oversized_payloads_and_bad_ttl() -> None:
    with pytest.raises(ValueError, match="too large"):
        RequestStateCodec("s").seal({"blob": "x" * MAX_REQUEST_STATE}, principal="a", method="tools/call",
                                    digest=DIGEST)
    with pytest.raises(ValueError):
        RequestStateCodec("s", ttl_s=0)


def test_default_clock() -> None:
    codec = RequestStateCodec("s")
    token = codec.seal({"a": 1}, principal="p", method="resources/read", digest="d")
    assert codec.open(token, principal="p", method="resources/read", digest="d") == {"a": 1}


# -- request digest -------------------------------------------------------------------------------


def test_digest_ignores_meta_input_responses_and_request_state() -> None:
    retry = {**CALL, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
             "inputResponses": {"confirm": {"action": "accept"}}, "requestState": "opaque"}
    assert request_digest("tools/call", retry) == DIGEST


def test_digest_is_stable_and_order_independent() -> None:
    reordered = {"arguments": {"replicas": 3, "env": "prod"}, "name": "deploy"}
    assert request_digest("tools/call", reordered) == DIGEST
    assert request_digest("tools/call", {"name": "t"}) == request_digest("tools/call", {"name": "t", "arguments": {}})
    assert request_digest("tools/call", {"name": "t", "arguments": None}) == request_digest("tools/call", {"name": "t"})
    assert len(DIGEST) == 32 and DIGEST == request_digest("tools/call", dict(CALL))


def test_digest_covers_the_salient_params() -> None:
    assert request_digest("tools/call", {**CALL, "name": "destroy"}) != DIGEST
    assert request_digest("tools/call", {**CALL, "arguments": {"env": "dev", "replicas": 3}}) != DIGEST
    assert request_digest("prompts/get", CALL) != DIGEST  # the method counts
    assert request_digest("prompts/get", {"name": "p", "arguments": {"a": "1"}}) != request_digest(
        "prompts/get", {"name": "p", "arguments": {"a": "2"}})
    read = request_digest("resources/read", {"uri": "x://a"})
    assert read != request_digest("resources/read", {"uri": "x://b"})
    assert read == request_digest("resources/read", {"uri": "x://a", "requestState": "s", "_meta": {}})
    # Other methods: every param but the three ignored ones.
    assert request_digest("completion/complete", {"ref": 1}) != request_digest("completion/complete", {"ref": 2})


# -- the shared signing scheme --------------------------------------------------------------------


def test_cursors_and_request_states_do_not_cross() -> None:
    cursor = CursorCodec("shared").encode("tools/list", "a" * 100)  # long enough to carry a 32-byte MAC
    assert "integrity check failed" in _refused(RequestStateCodec("shared"), cursor)
    state = _seal(RequestStateCodec("shared"))
    with pytest.raises(InvalidParams):
        CursorCodec("shared").decode("tools/list", state)


def test_cursor_format_is_unchanged() -> None:
    # base64url(HMAC-SHA256(secret, payload)[:12] + payload): cursors issued before stay valid.
    payload = b'["tools/list","kit_echo_007"]'
    legacy = base64.urlsafe_b64encode(hmac.new(b"s3cret", payload, hashlib.sha256).digest()[:12] + payload)
    assert CursorCodec("s3cret").decode("tools/list", legacy.decode().rstrip("=")) == "kit_echo_007"
    assert CursorCodec("s3cret").encode("tools/list", "kit_echo_007") == legacy.decode().rstrip("=")


def test_signer_tells_malformed_from_forged() -> None:
    signer = Signer("k", mac_len=16)
    assert signer.unsign(signer.sign(b"payload"), 100) == b"payload"
    with pytest.raises(SignatureError) as info:
        signer.unsign("short", 100)
    assert info.value.malformed
    with pytest.raises(SignatureError) as info:
        Signer("other", mac_len=16).unsign(signer.sign(b"payload"), 100)
    assert not info.value.malformed
    with pytest.raises(ValueError):
        Signer("k", mac_len=4)


def test_request_state_key_is_derived_not_the_raw_secret() -> None:
    body = json.dumps({"v": 1, "p": "x", "m": "tools/call", "d": DIGEST, "x": T0 + 600, "s": {}}).encode()
    raw_key_token = Signer("shared", mac_len=32).sign(body)  # what a codec using the raw secret would make
    assert "integrity check failed" in _refused(RequestStateCodec("shared"), raw_key_token)

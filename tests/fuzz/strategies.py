"""Hypothesis strategies for hostile input, and the validity check every reply must pass.

Frames are arbitrary bytes, broken JSON, random JSON values and JSON-RPC-shaped objects whose
members have the wrong types (jsonrpc, id, method, params), huge ids, nested arrays and batches.
Method names and params are biased towards what the gateway serves, so the fuzz reaches the
dispatcher and the connectors, not only the parser.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

__all__ = ["frames", "check_reply", "is_json", "METHODS", "static_config"]

METHODS = [
    "initialize", "ping", "logging/setLevel", "tools/list", "tools/call", "prompts/list", "prompts/get",
    "resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
    "resources/unsubscribe", "completion/complete", "notifications/initialized", "notifications/cancelled",
    "notifications/progress", "notifications/roots/list_changed", "sampling/createMessage", "rpc.discover", "",
]
PARAM_KEYS = ["name", "uri", "cursor", "arguments", "level", "_meta", "protocolVersion", "capabilities",
              "clientInfo", "requestId", "ref", "argument", "progressToken"]
REAL_TARGETS = ["fz_hello", "fz_greet", "mem://one", "mem://bin", "fz_", "debug", "2025-03-26"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63, max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20), st.sampled_from(REAL_TARGETS),
)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

ids = st.one_of(st.integers(), st.integers(min_value=10**20, max_value=10**60), st.text(max_size=12),
                st.just("\ud800"), st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
methods = st.one_of(st.sampled_from(METHODS), st.text(max_size=15), json_values)
params = st.one_of(
    st.dictionaries(st.sampled_from(PARAM_KEYS), json_values, max_size=4),
    st.fixed_dictionaries({"name": st.sampled_from(REAL_TARGETS)},
                          optional={"arguments": st.dictionaries(st.sampled_from(["who", "x"]), json_values, max_size=2)}),
    st.fixed_dictionaries({"uri": st.sampled_from(REAL_TARGETS)}),
    st.fixed_dictionaries({"cursor": json_values}),
    json_values,
)
messages = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.one_of(st.just("2.0"), st.just("2.0"), json_values),
    "id": ids,
    "method": methods,
    "params": params,
    "result": json_values,
    "error": st.one_of(json_values, st.fixed_dictionaries({"code": json_values, "message": json_values})),
})
# Mostly requests with a valid envelope, so the interesting checks run after the envelope's.
requests = st.builds(lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p},
                     st.integers(0, 10**6) | st.text(max_size=6), st.sampled_from(METHODS), params)


def _dump(value: Any) -> bytes:
    return json.dumps(value).encode()


frames = st.one_of(
    st.binary(max_size=200),
    st.builds(_dump, json_values),
    st.builds(_dump, messages),
    st.builds(_dump, requests),
    st.builds(_dump, st.lists(st.one_of(messages, requests, json_values), min_size=0, max_size=5)),
    st.builds(lambda m, cut: _dump(m)[:cut], messages, st.integers(1, 40)),  # truncated JSON
    st.builds(lambda d: b"[" * d + b"]" * d, st.integers(1, 50_000)),  # nested arrays
    st.builds(lambda d: b'{"a":' * d + b"1" + b"}" * d, st.integers(1, 5_000)),
)


def _no_constants(name: str) -> Any:
    raise ValueError(name)


def is_json(data: bytes) -> bool:
    """The oracle for -32700: strict JSON (no NaN/Infinity), any nesting depth."""
    try:
        json.loads(data, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return False
    return True


def check_reply(reply: Any) -> None:
    """A server message must be valid JSON-RPC: a response with ``id`` and exactly one of
    result/error (error with an integer code and a string message), or a notification."""
    if isinstance(reply, list):
        assert reply, "an empty batch reply"
        for item in reply:
            check_reply(item)
        return
    assert isinstance(reply, dict), reply
    assert reply.get("jsonrpc") == "2.0", reply
    if "method" in reply:  # a server notification or request
        assert isinstance(reply["method"], str) and reply["method"], reply
        return
    assert "id" in reply, reply
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        err = reply["error"]
        assert isinstance(err, dict) and isinstance(err.get("code"), int) and not isinstance(err["code"], bool), reply
        assert isinstance(err.get("message"), str), reply
    else:
        assert isinstance(reply["result"], dict), reply
        assert isinstance(reply["id"], (str, int)) and not isinstance(reply["id"], bool), reply


def static_config(base: str = "") -> str:
    """A static connector ("fz") with prompts and a text and a binary resource."""
    return base + """
audit: {enabled: false}
telemetry: {metrics: false}
gateway: {name: fuzz, page_size: 2}
connectors:
  - name: fz
    type: static
    prompts:
      - {name: hello, messages: [{text: "hello"}]}
      - {name: greet, arguments: [{name: who, required: true}], messages: [{text: "hi {who}"}]}
    resources:
      - {uri: "mem://one", name: one, text: "one"}
      - {uri: "mem://two", name: two, text: "two"}
      - {uri: "mem://three", name: three, text: "three"}
"""

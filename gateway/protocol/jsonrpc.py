"""JSON-RPC 2.0 framing: parse incoming bytes into messages, build outgoing ones.

Pure functions over plain values. :func:`parse` never raises on bad input: it returns
:class:`Incoming` objects, and an invalid message carries the error response the transport must
send back. This is the single place where exceptions become JSON-RPC error objects
(:func:`error_response`).

JSON itself goes through :func:`dumps` and :func:`loads`, the hot path of every message: orjson
when it produces exactly what the standard library would, the standard library otherwise (see
each function), so the bytes and values are those of :mod:`json` either way, at a fraction of
its cost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from .errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    ProtocolError,
)

__all__ = [
    "Incoming",
    "parse",
    "classify",
    "dumps",
    "loads",
    "request",
    "notification",
    "result_response",
    "error_response",
    "error_from_exception",
]

RequestId = str | int
Kind = Literal["request", "notification", "response", "invalid"]


@dataclass(frozen=True, slots=True)
class Incoming:
    """One decoded message. ``error`` is set (and ``kind == "invalid"``) when it must be refused."""

    kind: Kind
    message: dict[str, Any]
    error: dict[str, Any] | None = None

    @property
    def id(self) -> RequestId | None:
        return self.message.get("id")

    @property
    def method(self) -> str:
        return str(self.message.get("method", ""))


# Built once: json.dumps with options builds a new encoder on every call.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_ENCODE_ASCII = json.JSONEncoder(separators=(",", ":")).encode
# A run of 19 digits may be an integer orjson would read as a float (it keeps 64 bits): such a
# text is left to the standard library, which keeps every digit (ids, counters). Bytes are
# searched with translate (every digit a "0", all else a space) and a substring test, many times
# faster than a regular expression; str (rare: in-process callers) with one.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_RUN = b"0" * 19
_LONG_NUMBER = re.compile(r"[0-9]{19}")


def _long_number(data: bytes | bytearray | str) -> bool:
    if isinstance(data, str):
        return _LONG_NUMBER.search(data) is not None
    return _LONG_RUN in data.translate(_DIGITS_ONLY)


def dumps(message: Any) -> bytes:
    """Compact UTF-8 JSON, one line (safe for newline-delimited stdio).

    orjson writes what ``json`` would with these options, but for a float NaN or infinity (``null``
    where ``json`` wrote the invalid ``NaN``). What it refuses (a lone surrogate, an integer past
    64 bits, a key that is not a string, nesting past 254) the standard library writes."""
    try:
        return orjson.dumps(message)
    except TypeError:  # orjson.JSONEncodeError included
        pass
    text = _ENCODE(message)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate (e.g. echoed id "\ud800"): escape it as JSON allows
        return _ENCODE_ASCII(message).encode()


def loads(data: bytes | bytearray | str, *, constants: bool = True) -> Any:
    """``json.loads(data)``: the same value, or the same error (:class:`ValueError`,
    :class:`UnicodeDecodeError`, :class:`RecursionError`). With ``constants=False`` the
    non-JSON ``NaN``, ``Infinity`` and ``-Infinity`` are refused too (:class:`ValueError`).

    orjson decodes what it can decode exactly; it refuses the rest (those constants, a lone
    surrogate, a BOM or UTF-16, nesting past 1024), and that and a long digit run go to the
    standard library, whose answer (value or error) is then the one given."""
    if isinstance(data, (bytes, bytearray, str)) and not _long_number(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    if constants:
        return json.loads(data)
    return json.loads(data, parse_constant=_reject_constant)


def _valid_id(value: Any) -> bool:
    # JSON-RPC allows null ids only in error responses; MCP forbids null request ids.
    return (isinstance(value, str) or isinstance(value, int)) and not isinstance(value, bool)


def classify(obj: Any) -> Incoming:
    """Classify one decoded JSON value as request, notification, response or invalid."""
    if not isinstance(obj, dict):
        return Incoming("invalid", {}, error_response(None, INVALID_REQUEST, "Invalid Request: not an object"))
    raw_id = obj.get("id")
    if obj.get("jsonrpc") != "2.0":
        rid = raw_id if _valid_id(raw_id) else None
        return Incoming("invalid", obj, error_response(rid, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'))
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            rid = raw_id if _valid_id(raw_id) else None
            return Incoming("invalid", obj, error_response(rid, INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string'))
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            rid = raw_id if _valid_id(raw_id) else None
            # MCP params are always objects; positional params are not used by any method.
            return Incoming("invalid", obj, error_response(rid, INVALID_REQUEST, 'Invalid Request: "params" must be an object'))
        if "id" not in obj:
            return Incoming("notification", obj)
        if not _valid_id(raw_id):
            return Incoming("invalid", obj, error_response(None, INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'))
        return Incoming("request", obj)
    if "result" in obj or "error" in obj:
        if not _valid_id(raw_id) and raw_id is not None:
            return Incoming("invalid", obj, None)  # a malformed response gets no reply
        return Incoming("response", obj)
    rid = raw_id if _valid_id(raw_id) else None
    return Incoming("invalid", obj, error_response(rid, INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response"))


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; accepting them would let us echo invalid JSON back.
    raise ValueError(f"{name} is not valid JSON")


def parse(data: bytes | str) -> tuple[list[Incoming], bool]:
    """Decode one transport frame. Returns ``(messages, was_batch)``.

    A frame that is not JSON yields one invalid message carrying a -32700 error; an empty batch
    yields one -32600 error, as JSON-RPC 2.0 prescribes.
    """
    try:
        obj = loads(data, constants=False)
    except (ValueError, UnicodeDecodeError) as exc:
        return [Incoming("invalid", {}, error_response(None, PARSE_ERROR, f"Parse error: {exc}"))], False
    except RecursionError:  # absurdly deep nesting must not kill the reader
        return [Incoming("invalid", {}, error_response(None, PARSE_ERROR, "Parse error: nesting too deep"))], False
    if isinstance(obj, list):
        if not obj:
            return [Incoming("invalid", {}, error_response(None, INVALID_REQUEST, "Invalid Request: empty batch"))], False
        return [classify(item) for item in obj], True
    return [classify(obj)], False


def request(request_id: RequestId, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": err}


def error_from_exception(request_id: RequestId | None, exc: BaseException) -> dict[str, Any]:
    """The one mapping from exceptions to JSON-RPC errors.

    A :class:`ProtocolError` keeps its code and data; anything else is an internal error whose
    message names only the exception type, so no backend detail or secret leaks to clients.
    """
    if isinstance(exc, ProtocolError):
        return {"jsonrpc": "2.0", "id": request_id, "error": exc.to_error()}
    return error_response(request_id, INTERNAL_ERROR, f"Internal error ({type(exc).__name__})")

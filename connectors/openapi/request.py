"""Tool arguments → the exact HTTP request an operation expects (pure: no I/O).

:func:`build_request` serialises each argument where :class:`mapping.Arg` says it goes, following
OpenAPI's parameter styles: path ``simple``/``label``/``matrix``; query ``form`` (exploded or not),
``spaceDelimited``, ``pipeDelimited`` and ``deepObject``; headers ``simple``; cookies ``form``;
parameters declared with ``content`` are sent as JSON. Bodies are JSON, form-urlencoded or
multipart (built here, byte for byte, so the exact bytes can be validated before sending), or the
raw ``body`` argument for other media types.

Header and cookie values are single lines: a CR, LF or NUL (or a ';' in a cookie) is an
:class:`ArgumentError` naming the argument. A path value that would be the segment ``.`` or ``..``
is sent percent-encoded (``%2E``), so no client or server removes it as a dot segment.

The result carries the encoded path and query separately from the server URL so that the same
request can be checked by openapi-core against the spec's own server while being sent to a
``base_url`` override.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .mapping import Arg, Operation

__all__ = ["PreparedRequest", "build_request", "ArgumentError", "server_url", "encode_component"]

_UNRESERVED = "-._~"
_NOT_IN_HEADERS = ("\r", "\n", "\0")
_DOT_SEGMENTS = frozenset({".", ".."})
_RESERVED = ":/?#[]@!$&'()*+,;="


class ArgumentError(ValueError):
    """An argument that cannot be serialised; ``arg`` names it for the model."""

    def __init__(self, arg: str, message: str) -> None:
        self.arg = arg
        super().__init__(f"argument {arg!r}: {message}")


@dataclass(slots=True)
class PreparedRequest:
    method: str
    path: str  # encoded path (without the server's base path)
    query: list[tuple[str, str]] = field(default_factory=list)  # decoded pairs, in order
    query_string: str = ""  # encoded exactly as sent
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str | None = None

    def target(self) -> str:
        """Encoded path plus query string."""
        return self.path + ("?" + self.query_string if self.query_string else "")


def server_url(servers: Any, variables: dict[str, str] | None = None) -> str:
    """The first server's URL with its variables filled (config values, else defaults)."""
    variables = variables or {}
    for server in servers or ():
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            continue
        url: str = server["url"]
        for name, spec in (server.get("variables") or {}).items():
            value = variables.get(name, (spec or {}).get("default", ""))
            url = url.replace("{" + name + "}", str(value))
        return url
    return "/"


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def encode_component(text: str, allow_reserved: bool = False) -> str:
    return quote(text, safe=_UNRESERVED + (_RESERVED if allow_reserved else ""))


_enc = encode_component


def _seg(text: str) -> str:
    """A path segment: ':' and '@' are legal there (RFC 3986 pchar) and servers that validate
    the raw path (openapi-core does) see ``sha256:...`` as written."""
    return quote(text, safe=_UNRESERVED + ":@")


def _path_value(a: Arg, value: Any) -> str:
    style, explode, name = a.style, a.explode, a.name
    if a.content_type:
        return _seg(_scalar(value))
    if isinstance(value, list):
        items = [_seg(_scalar(v)) for v in value]
        if style == "label":
            return "." + (".".join(items) if explode else ",".join(items))
        if style == "matrix":
            if explode:
                return "".join(f";{name}={v}" for v in items)
            return f";{name}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        pairs = [(_seg(str(k)), _seg(_scalar(v))) for k, v in value.items()]
        if explode:
            joined = ("." if style == "label" else ";" if style == "matrix" else ",").join(f"{k}={v}" for k, v in pairs)
        else:
            joined = ",".join(f"{k},{v}" for k, v in pairs)
        if style == "label":
            return "." + joined
        if style == "matrix":
            return ";" + joined if explode else f";{name}=" + joined
        return joined
    text = _seg(_scalar(value))
    if style == "label":
        return "." + text
    if style == "matrix":
        return f";{name}={text}"
    return text


def _query_pairs(a: Arg, value: Any) -> list[tuple[str, str]]:
    name, style, explode = a.name, a.style, a.explode
    if a.content_type:
        return [(name, json.dumps(value, separators=(",", ":"), ensure_ascii=False))]
    if isinstance(value, list):
        items = [_scalar(v) for v in value]
        if style == "spaceDelimited" and not explode:
            return [(name, " ".join(items))]
        if style == "pipeDelimited" and not explode:
            return [(name, "|".join(items))]
        if explode:
            return [(name, v) for v in items]
        return [(name, ",".join(items))]
    if isinstance(value, dict):
        if style == "deepObject":
            return [(f"{name}[{k}]", _scalar(v)) for k, v in value.items()]
        if explode:
            return [(str(k), _scalar(v)) for k, v in value.items()]
        return [(name, ",".join(f"{k},{_scalar(v)}" for k, v in value.items()))]
    return [(name, _scalar(value))]


def _header_value(a: Arg, value: Any) -> str:
    if a.content_type:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    elif isinstance(value, list):
        text = ",".join(_scalar(v) for v in value)
    elif isinstance(value, dict):
        sep = "=" if a.explode else ","
        text = ",".join(f"{k}{sep}{_scalar(v)}" for k, v in value.items())
    else:
        text = _scalar(value)
    # A line break would end the header and start another one (header injection); a ';' in a
    # cookie value would start another cookie (one that could shadow a credential cookie).
    if any(c in text for c in _NOT_IN_HEADERS) or (a.location == "cookie" and ";" in text):
        where = "a cookie value cannot carry ';', CR, LF or NUL" if a.location == "cookie" else \
            "a header value cannot carry CR, LF or NUL (one line only)"
        raise ArgumentError(a.arg, where)
    return text


def _form_body(fields: dict[str, Any]) -> bytes:
    pairs: list[str] = []
    for k, v in fields.items():
        for item in (v if isinstance(v, list) else [v]):
            pairs.append(f"{_enc(k)}={_enc(_scalar(item))}")
    return "&".join(pairs).encode()


def _multipart(fields: dict[str, Any], binary: set[str]) -> tuple[bytes, str]:
    boundary = "gw-" + uuid.uuid4().hex
    out = bytearray()
    for k, v in fields.items():
        for item in (v if isinstance(v, list) and k in binary else [v]):
            out += f"--{boundary}\r\n".encode()
            if k in binary:
                data = item.encode() if isinstance(item, str) else _scalar(item).encode()
                out += (f'Content-Disposition: form-data; name="{k}"; filename="{k}"\r\n'
                        "Content-Type: application/octet-stream\r\n\r\n").encode()
                out += data
            elif isinstance(item, (dict, list)):
                out += f'Content-Disposition: form-data; name="{k}"\r\nContent-Type: application/json\r\n\r\n'.encode()
                out += json.dumps(item, ensure_ascii=False).encode()
            else:
                out += f'Content-Disposition: form-data; name="{k}"\r\n\r\n'.encode()
                out += _scalar(item).encode()
            out += b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def _body(op: Operation, fields: dict[str, Any], whole: Any, has_whole: bool) -> tuple[bytes | None, str | None]:
    media = op.body_media
    if media is None or (not has_whole and not fields and not op.body_required):
        return None, None
    base = media.split(";")[0].strip().lower()
    value = whole if has_whole else fields
    if base == "application/json" or base.endswith("+json"):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(), media
    if base == "application/x-www-form-urlencoded":
        return _form_body(value if isinstance(value, dict) else {"body": value}), media
    if base.startswith("multipart/"):
        binary = {a.name for a in op.args if a.is_binary}
        return _multipart(value if isinstance(value, dict) else {"body": value}, binary)
    if isinstance(value, str):
        return value.encode(), media
    if isinstance(value, dict) and set(value) == {"base64"}:
        return base64.b64decode(value["base64"]), media
    return json.dumps(value, ensure_ascii=False).encode(), media


def build_request(op: Operation, arguments: dict[str, Any]) -> PreparedRequest:
    """Serialise ``arguments`` for ``op``. Unknown arguments raise :class:`ArgumentError`."""
    unknown = [k for k in arguments if k not in op.by_arg]
    if unknown:
        raise ArgumentError(unknown[0], f"is not a parameter of {op.name} (expected one of: "
                            f"{', '.join(op.by_arg) or 'no arguments'})")
    missing = [a.arg for a in op.args if a.location == "path" and arguments.get(a.arg) is None]
    if missing:
        raise ArgumentError(missing[0], "is a required path parameter")
    path = op.path
    req = PreparedRequest(op.method, "")
    fields: dict[str, Any] = {}
    whole: Any = None
    has_whole = False
    for a in op.args:
        if a.arg not in arguments:
            continue
        value = arguments[a.arg]
        if a.location == "path":
            segment = _path_value(a, value)
            if segment in _DOT_SEGMENTS:  # RFC 3986 5.2.4 would remove it: /items/.. is /, not item ".."
                segment = segment.replace(".", "%2E")
            path = path.replace("{" + a.name + "}", segment)
        elif a.location == "query":
            if value is None:
                continue
            req.query.extend(_query_pairs(a, value))
        elif a.location == "header":
            req.headers[a.name] = _header_value(a, value)
        elif a.location == "cookie":
            req.cookies[a.name] = _header_value(a, value)
        elif a.location == "body":
            fields[a.name] = value
        else:
            whole, has_whole = value, True
    req.path = path
    allow = {a.name for a in op.args if a.location == "query" and a.allow_reserved}
    req.query_string = "&".join(
        f"{_enc(k)}={_enc(v, k in allow)}" for k, v in req.query)
    req.body, req.content_type = _body(op, fields, whole, has_whole)
    return req

"""Streamable HTTP request metadata headers (2026-07-28): what a client mirrors from the body into
headers, how values are encoded, and the server's check that headers and body agree.

* ``MCP-Protocol-Version`` (the body's ``_meta`` protocol version) and ``Mcp-Method`` on every
  request; ``Mcp-Name`` (``params.name``, or ``params.uri`` for ``resources/read``) on
  ``tools/call``, ``prompts/get`` and ``resources/read`` (``params.taskId`` on the tasks
  extension's ``tasks/get``, ``tasks/update`` and ``tasks/cancel``); ``Mcp-Param-{Name}`` for each argument of
  a ``tools/call`` whose property in the tool's ``inputSchema`` carries ``x-mcp-header: Name``,
  when the argument has a non-null value.
* Values: strings as they are, integers in decimal, booleans as ``true``/``false``. A string that
  is not plain visible ASCII (non-ASCII, control characters, leading or trailing whitespace), or
  that looks like the sentinel itself, is sent as ``=?base64?{base64 of UTF-8}?=``. Only
  ``Mcp-Name`` and ``Mcp-Param-*`` values may be encoded.
* The server rejects with :class:`HeaderMismatch` (-32020, HTTP 400): a missing required header, a
  value with invalid characters or a malformed sentinel, a value that differs from the body after
  decoding (numbers compare numerically: ``42.0`` equals ``42``), a header repeated, or a
  recognized ``Mcp-Param-*`` header whose argument is absent or null. Unknown ``Mcp-Param-*``
  headers are ignored. Notifications need no headers here (the revision defines none for them),
  but any that is sent must match.

Header names compare case-insensitively, values case-sensitively.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from .errors import HeaderMismatch
from .meta import PROTOCOL_VERSION

__all__ = [
    "PROTOCOL_VERSION_HEADER",
    "METHOD_HEADER",
    "NAME_HEADER",
    "PARAM_HEADER_PREFIX",
    "NAMED_METHODS",
    "encode_header_value",
    "decode_header_value",
    "header_value",
    "x_mcp_header_params",
    "x_mcp_header_problems",
    "expected_headers",
    "validate_request_headers",
]

PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
PARAM_HEADER_PREFIX = "Mcp-Param-"
NAMED_METHODS: Mapping[str, str] = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                                    # the tasks extension (ext-tasks 2026-07-28, "Routing Headers")
                                    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}

_VERSION, _METHOD, _NAME = PROTOCOL_VERSION_HEADER.lower(), METHOD_HEADER.lower(), NAME_HEADER.lower()
# Header collections whose lookups ignore case (aiohttp's request headers are a proxy of one).
_CASE_INSENSITIVE = (CIMultiDict, CIMultiDictProxy)
_PREFIX, _SUFFIX = "=?base64?", "?="
_PLAIN = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")  # visible ASCII, inner spaces
_VALID = re.compile(r"[\x20-\x7e\t]*")  # what a received field value may contain (RFC 9110)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 tchar
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_PRIMITIVE = frozenset({"string", "integer", "boolean"})
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})  # hold instances, not schemas
_ABSENT: Any = object()
_ECHO = 64


def _is_sentinel(value: str) -> bool:
    return value.startswith(_PREFIX) and value.endswith(_SUFFIX)


def encode_header_value(value: str) -> str:
    """``value`` as a header value: as it is when plain visible ASCII, else the Base64 sentinel."""
    if value == "" or (_PLAIN.fullmatch(value) and not _is_sentinel(value)):
        return value
    return _PREFIX + base64.b64encode(value.encode()).decode() + _SUFFIX


def _decode(header: str, value: str) -> str:
    if not _VALID.fullmatch(value):
        raise HeaderMismatch(f"Header mismatch: {header} header value contains invalid characters")
    if not _is_sentinel(value):
        return value
    malformed = HeaderMismatch(f"Header mismatch: {header} header value is not valid Base64-encoded UTF-8")
    if len(value) < len(_PREFIX) + len(_SUFFIX):  # "=?base64?=": prefix and suffix overlap
        raise malformed
    try:
        return base64.b64decode(value[len(_PREFIX):-len(_SUFFIX)], validate=True).decode()
    except (ValueError, binascii.Error):
        raise malformed from None


def decode_header_value(value: str) -> str:
    """The original of an encoded value; :class:`HeaderMismatch` for invalid characters or a
    malformed sentinel."""
    return _decode("the", value)


def header_value(value: object) -> str | None:
    """A body value as its header value, or ``None`` when no header is sent: absent or null, or
    not a primitive (an argument the tool's input validation will refuse anyway)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))  # 42.0 from a JSON decoder is the integer 42
    if isinstance(value, str):
        return encode_header_value(value)
    return None


# -- x-mcp-header annotations ---------------------------------------------------------------------

def _escape(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _annotations(schema: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...] | None, Mapping[str, Any]]]:
    """Every ``x-mcp-header`` in ``schema``, in document order: (JSON pointer of the annotated
    schema, its property path or ``None`` when it is not statically reachable through
    ``properties`` alone, the annotated schema). Iterative: no depth makes it overflow the stack."""
    found: list[tuple[str, tuple[str, ...] | None, Mapping[str, Any]]] = []
    stack: list[tuple[Any, str, tuple[str, ...] | None]] = [(schema, "", ())]
    while stack:
        node, pointer, path = stack.pop()
        children: list[tuple[Any, str, tuple[str, ...] | None]] = []
        if isinstance(node, list):
            children = [(item, f"{pointer}/{i}", None) for i, item in enumerate(node)]
        elif isinstance(node, Mapping):
            if "x-mcp-header" in node:
                found.append((pointer or "/", path or None, node))
            for key, child in node.items():
                if key in _DATA_KEYWORDS:
                    continue
                ptr = f"{pointer}/{_escape(key)}"
                if key == "properties" and isinstance(child, Mapping):
                    children.extend((sub, f"{ptr}/{_escape(name)}", None if path is None else (*path, str(name)))
                                    for name, sub in child.items())
                else:
                    children.append((child, ptr, None))
        stack.extend(reversed(children))
    return found


def x_mcp_header_problems(input_schema: Mapping[str, Any] | None) -> list[str]:
    """Why a tool's ``x-mcp-header`` annotations are invalid (specification 2026-07-28, tools and
    Streamable HTTP "Schema Extension"); empty when valid. A tool with problems must not be listed
    to clients on Streamable HTTP."""
    if not isinstance(input_schema, Mapping):
        return []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for pointer, path, node in _annotations(input_schema):
        name = node["x-mcp-header"]
        where = f"x-mcp-header at {pointer}"
        if path is None:
            problems.append(f"{where} is not on a property reachable from the root through 'properties' "
                            "alone (not through items, composition, conditionals or $ref)")
        if not isinstance(name, str) or not name:
            problems.append(f"{where} must be a non-empty string")
            continue
        if not _TOKEN.fullmatch(name):
            problems.append(f"{where}: {name!r} is not an HTTP field-name token "
                            "(letters, digits and !#$%&'*+-.^_`|~ only; no controls, spaces or separators)")
        elif name.lower() in seen:
            problems.append(f"{where}: {name!r} is not unique (case-insensitively) among x-mcp-header values; "
                            f"also at {seen[name.lower()]}")
        else:
            seen[name.lower()] = pointer
        kind = node.get("type")
        kinds = [kind] if isinstance(kind, str) else [k for k in kind if k != "null"] if isinstance(kind, list) else []
        if "number" in kinds:
            problems.append(f"{where}: parameters of type number cannot be mirrored (integer, string or boolean only)")
        elif not kinds or not all(isinstance(k, str) and k in _PRIMITIVE for k in kinds):
            problems.append(f"{where}: the property must declare a primitive type (integer, string or boolean)")
    return problems


def x_mcp_header_params(input_schema: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """``{header name part: property path}`` of the usable annotations of ``input_schema``
    (statically reachable, a token, first of case-insensitive duplicates). Callers are expected to
    have refused tools with :func:`x_mcp_header_problems` first."""
    # None and dict first: an isinstance against the Mapping ABC is a Python-level call.
    if input_schema is None or not (isinstance(input_schema, dict) or isinstance(input_schema, Mapping)):
        return {}
    # Asked on every tools/call of a 2026-07-28 client with the same catalog schema objects:
    # remembered by identity (schemas are not mutated once listed; the entry keeps the schema
    # alive, so an id is never reused while cached). The result must not be mutated either.
    hit = _PARAMS_CACHE.get(id(input_schema))
    if hit is not None and hit[0] is input_schema:
        return hit[1]
    params: dict[str, tuple[str, ...]] = {}
    lowered: set[str] = set()
    for _pointer, path, node in _annotations(input_schema):
        name = node["x-mcp-header"]
        if path is not None and isinstance(name, str) and _TOKEN.fullmatch(name) and name.lower() not in lowered:
            params[name] = path
            lowered.add(name.lower())
    if len(_PARAMS_CACHE) >= _PARAMS_CACHE_SIZE:
        _PARAMS_CACHE.clear()
    _PARAMS_CACHE[id(input_schema)] = (input_schema, params)
    return params


_PARAMS_CACHE: dict[int, tuple[Mapping[str, Any], dict[str, tuple[str, ...]]]] = {}
_PARAMS_CACHE_SIZE = 4096


# -- expected headers and server validation -------------------------------------------------------

def _value_at(arguments: object, path: tuple[str, ...]) -> Any:
    for step in path:
        if not isinstance(arguments, Mapping) or step not in arguments:
            return _ABSENT
        arguments = arguments[step]
    return arguments


def _body(message: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    params = message.get("params")
    method = message.get("method", "")
    return method if type(method) is str else str(method), \
        params if isinstance(params, dict) or isinstance(params, Mapping) else {}


def expected_headers(message: Mapping[str, Any], input_schema: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The request metadata headers a conforming client sends with ``message`` (values encoded);
    ``input_schema`` is the called tool's, for ``Mcp-Param-*`` headers of a ``tools/call``."""
    method, params = _body(message)
    headers: dict[str, str] = {}
    meta = params.get("_meta")
    if (isinstance(meta, dict) or isinstance(meta, Mapping)) and isinstance(meta.get(PROTOCOL_VERSION), str):
        headers[PROTOCOL_VERSION_HEADER] = meta[PROTOCOL_VERSION]
    headers[METHOD_HEADER] = method
    field = NAMED_METHODS.get(method)
    if field is not None and isinstance(params.get(field), str):
        headers[NAME_HEADER] = encode_header_value(params[field])
    if method == "tools/call" and input_schema is not None:
        arguments = params.get("arguments")
        for name, path in x_mcp_header_params(input_schema).items():
            value = header_value(_value_at(arguments, path))
            if value is not None:
                headers[PARAM_HEADER_PREFIX + name] = value
    return headers


def _short(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text if len(text) <= _ECHO else text[:_ECHO] + "…")


def _matches(decoded: str, body: object) -> bool:
    if type(body) is str:  # the common case first (a str is never a bool or a number)
        return decoded == body
    if isinstance(body, bool):
        return decoded == ("true" if body else "false")
    if isinstance(body, str):
        return decoded == body
    if isinstance(body, (int, float)) and _NUMBER.fullmatch(decoded):
        try:
            return Decimal(decoded) == Decimal(body)  # exact: "42.0" equals 42, "42.5" does not
        except ArithmeticError:
            return False
    return False


def _plain(header: str, value: str) -> str:
    if not _VALID.fullmatch(value):
        raise HeaderMismatch(f"Header mismatch: {header} header value contains invalid characters")
    return value


def _wanted(method: str, params: Mapping[str, Any], params_of_tool: Mapping[str, Any]) -> set[str]:
    """The lower-case names of the headers ``expected_headers`` would give for this body."""
    wanted = {_METHOD}
    meta = params.get("_meta")
    if (isinstance(meta, dict) or isinstance(meta, Mapping)) and isinstance(meta.get(PROTOCOL_VERSION), str):
        wanted.add(_VERSION)
    field = NAMED_METHODS.get(method)
    if field is not None and isinstance(params.get(field), str):
        wanted.add(_NAME)
    if params_of_tool:
        wanted.update((PARAM_HEADER_PREFIX + name).lower() for name in params_of_tool)
    return wanted


def _scan(headers: Mapping[str, str], wanted: set[str]) -> dict[str, str]:
    """Every header by lower-case name; a recognized one that is repeated is refused."""
    received: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        if key in received and key in wanted:
            raise HeaderMismatch(f"Header mismatch: {name} header is repeated")
        received[key] = value
    return received


def _once(headers: CIMultiDictProxy[str] | CIMultiDict[str], name: str, body: str) -> bool:
    """Whether ``name`` is sent exactly once, as ``body`` itself (plain: no sentinel to decode,
    nothing outside visible ASCII and inner spaces)."""
    sent = headers.getall(name, ())
    return len(sent) == 1 and sent[0] == body and body.isascii() and body.isprintable() \
        and not _is_sentinel(body)


def _plainly_matching(headers: CIMultiDictProxy[str] | CIMultiDict[str], method: str,
                      params: Mapping[str, Any]) -> bool:
    """The common case, decided in a few lookups: every header the body calls for is sent once,
    with the body's own value verbatim, and no ``Mcp-Param-*`` is involved. False is no verdict:
    the full check then names the problem, or finds none (an encoded value, an absent optional)."""
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION) if type(meta) is dict else None
    if type(version) is not str or not _once(headers, _VERSION, version) or not _once(headers, _METHOD, method):
        return False
    field = NAMED_METHODS.get(method)
    if field is None:
        return True
    value = params.get(field)
    return type(value) is str and _once(headers, _NAME, value)


def validate_request_headers(headers: Mapping[str, str], message: Mapping[str, Any],
                             input_schema: Mapping[str, Any] | None = None) -> None:
    """Check ``headers`` against ``message`` (see the module doc); :class:`HeaderMismatch` names
    the first problem. ``headers`` may be any mapping, a multi-dict included (a repeated
    recognized header is refused: an intermediary may have routed on either copy)."""
    params_of_tool = x_mcp_header_params(input_schema)
    method, params = _body(message)
    if not params_of_tool and isinstance(headers, _CASE_INSENSITIVE) and _plainly_matching(headers, method, params):
        return
    wanted = _wanted(method, params, params_of_tool)
    lookup: Callable[[str], str | None]
    if isinstance(headers, _CASE_INSENSITIVE):
        # A request's own headers (aiohttp's): the few recognized names are looked up, rather
        # than every header lower-cased. A repeated one is named by the full scan.
        if any(len(headers.getall(name, ())) > 1 for name in wanted):
            _scan(headers, wanted)
        lookup = headers.get
    else:
        received = _scan(headers, wanted)

        def lookup(header: str) -> str | None:
            return received.get(header.lower())

    is_request = "id" in message

    def check(header: str, body: Any, encoded: bool) -> None:
        raw = lookup(header)
        if raw is None:
            if is_request and body is not _ABSENT and header_value(body) is not None:
                raise HeaderMismatch(f"Header mismatch: missing required header {header}")
            return
        if body is _ABSENT or body is None:
            raise HeaderMismatch(f"Header mismatch: {header} header is present but the body has no value for it")
        decoded = _decode(header, raw) if encoded else _plain(header, raw)
        if not _matches(decoded, body):
            raise HeaderMismatch(f"Header mismatch: {header} header value {_short(decoded)} does not match "
                                 f"body value {_short(body)}")

    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION) if isinstance(meta, dict) or isinstance(meta, Mapping) else None
    if isinstance(version, str):
        check(PROTOCOL_VERSION_HEADER, version, False)
    check(METHOD_HEADER, method, False)
    field = NAMED_METHODS.get(method)
    if field is not None:
        name_value = params.get(field, _ABSENT)
        check(NAME_HEADER, name_value if isinstance(name_value, str) else _ABSENT, True)
    if method == "tools/call":
        arguments = params.get("arguments")
        for name, path in params_of_tool.items():
            check(PARAM_HEADER_PREFIX + name, _value_at(arguments, path), True)

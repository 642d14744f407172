"""Loading an OpenAPI document: bytes → dict, version check, external ``$ref`` bundling.

Contract:

* :func:`parse_document` accepts JSON or YAML, gzip-compressed or not, and returns the dict. JSON
  gives exactly what :func:`json.loads` gives (value or error), read by orjson where that is the
  same, at a lower peak of memory (see :func:`_json`).
* :func:`check_version` accepts OpenAPI 3.0.x and 3.1.x; Swagger 2.0 and anything else raise
  :class:`SpecError` naming the version found.
* :func:`bundle` rewrites ``$ref``s to other files or URLs into local ones: each external target is
  copied once under ``x-bundled`` and referenced as ``#/x-bundled/<key>``, so refs between external
  documents (even recursive ones) terminate. The document is only walked when its text contains a
  non-local ``$ref`` at all, which keeps loading GitHub's 13 MB description fast. A document
  fetched from a URL may refer to other URLs only (each fetched through the connector, so through
  its egress policy), never to local files.

Every error is a :class:`SpecError` whose ``path`` names the source and the JSON pointer of the
problem, so a broken spec fails its connector with a message an operator can act on.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import orjson
import yaml

from gateway.protocol.errors import ConfigError

from .refs import PointerError, escape_pointer, resolve_pointer

__all__ = ["SpecError", "parse_document", "check_version", "bundle", "is_url", "read_source", "Fetch"]

Fetch = Callable[[str], Awaitable[bytes]]
_EXTERNAL_REF = re.compile(rb"""["']?\$ref["']?\s*:\s*["']?(?!#)[^\s"'#]""")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SpecError(ConfigError):
    """A spec that cannot be used; ``path`` is ``<source>#<pointer>``."""


def is_url(source: str) -> bool:
    return urlsplit(source).scheme in ("http", "https")


# Every byte a digit becomes "0", every other one a space: long digit runs are then found by
# bytes.find, many times faster over megabytes than a regular expression.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_RUN = b"0" * 19
_SPACE = b" \t\r\n"


def _big_integer(data: bytes) -> bool:
    """Whether ``data`` may hold an integer *token* of 19 digits or more (orjson keeps 64 bits and
    reads a larger one as a float; :mod:`json` keeps every digit). A digit run inside a string (a
    timestamp in an example) is told apart by what surrounds it: a number follows ``:`` ``,`` or
    ``[`` and is followed by ``,`` ``}`` or ``]``. A string that happens to look like that only
    sends the document to the slower exact parser, never to a wrong value."""
    digits = data.translate(_DIGITS_ONLY)
    at = digits.find(_LONG_RUN)
    while at != -1:
        start, end = at, at + len(_LONG_RUN)
        while start > 0 and digits[start - 1] == 0x30:
            start -= 1
        while end < len(digits) and digits[end] == 0x30:
            end += 1
        before = start - 1
        if before >= 0 and data[before] == 0x2D:  # "-"
            before -= 1
        while before >= 0 and data[before] in _SPACE:
            before -= 1
        after = end
        while after < len(data) and data[after] in _SPACE:
            after += 1
        if (before < 0 or data[before] in b":,[") and (after == len(data) or data[after] in b",}]"):
            return True
        at = digits.find(_LONG_RUN, end)
    return False


def _json(data: bytes) -> Any:
    """``json.loads(data)``: the same value or the same error, at a lower peak of memory.

    orjson reads the UTF-8 bytes directly; json.loads first decodes them into one str, four bytes
    a character once the text holds an emoji (GitHub's 13 MB description: a 50 MB str beside the
    bytes and the growing dict, the peak of a whole load-and-list). What orjson refuses or would
    read differently (an integer past 64 bits, ``NaN``, a BOM) goes to :mod:`json`, whose answer
    (value or error) is then the one given."""
    if not _big_integer(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def parse_document(data: bytes, source: str) -> dict[str, Any]:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise SpecError(f"invalid gzip data: {exc}", source) from None
    head = data.lstrip()[:1]
    try:
        if head in (b"{", b"["):
            doc = _json(data)
        else:
            doc = yaml.load(data, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader
    except json.JSONDecodeError as exc:
        raise SpecError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise SpecError(f"invalid YAML: {getattr(exc, 'problem', exc)}{where}", source) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text: {exc}", source) from None
    if not isinstance(doc, dict):
        raise SpecError("the document is not a mapping", source)
    return doc


def check_version(doc: dict[str, Any], source: str) -> str:
    """The document's version: ``openapi`` (3.0.x or 3.1.x), or ``"2.0"`` for a Swagger 2.0
    document (converted by :mod:`swagger2` once bundled), or a clear error."""
    if "swagger" in doc:
        if str(doc.get("swagger")) != "2.0":
            raise SpecError(f"Swagger {doc.get('swagger')!r} is not supported (2.0, 3.0.x and 3.1.x are)",
                            source + "#/swagger")
        if not isinstance(doc.get("paths", {}), dict):
            raise SpecError("paths must be a mapping", source + "#/paths")
        return "2.0"
    version = doc.get("openapi")
    if not isinstance(version, str) or not re.match(r"^3\.[01]\.\d+", version):
        raise SpecError(f"unsupported OpenAPI version {version!r} (expected 3.0.x or 3.1.x)", source + "#/openapi")
    if not isinstance(doc.get("paths", {}), dict):
        raise SpecError("paths must be a mapping", source + "#/paths")
    return version


async def read_source(source: str, fetch: Fetch) -> bytes:
    if is_url(source):
        return await fetch(source)
    path = Path(source[7:] if source.startswith("file://") else source)
    try:
        return await asyncio.to_thread(path.read_bytes)
    except OSError as exc:
        raise SpecError(f"cannot read the spec: {exc.strerror or exc}", str(path)) from None


def _join(base: str, ref: str) -> str:
    if is_url(base) or is_url(ref):
        return urljoin(base, ref)
    if Path(ref).is_absolute():
        return ref
    return str(Path(base).parent / ref)


async def bundle(doc: dict[str, Any], raw: bytes, source: str, fetch: Fetch) -> dict[str, Any]:
    """Make every ``$ref`` local (see the module docstring). Mutates and returns ``doc``."""
    if not _EXTERNAL_REF.search(raw):
        return doc
    documents: dict[str, dict[str, Any]] = {source: doc}
    bundled: dict[str, Any] = doc.setdefault("x-bundled", {})
    keys: dict[tuple[str, str], str] = {}
    pending: list[tuple[Any, str, str]] = [(doc, source, "#")]

    async def load(uri: str, where: str) -> dict[str, Any]:
        if uri not in documents:
            try:
                data = await read_source(uri, fetch)
            except SpecError as exc:
                raise SpecError(f"cannot load $ref target {uri}: {exc.message}", f"{source}{where}") from None
            documents[uri] = parse_document(data, uri)
        return documents[uri]

    async def localise(ref: str, base: str, where: str) -> str:
        file_part, _, fragment = ref.partition("#")
        uri = _join(base, file_part) if file_part else base
        fragment = "#" + fragment
        if is_url(base) and not is_url(uri):  # file:///etc/... from a downloaded spec
            raise SpecError(f"$ref {ref!r}: a document fetched from a URL may refer to URLs only, not to local "
                            "files", f"{source}{where}")
        if uri == source:
            return fragment
        ident = (uri, fragment)
        if ident not in keys:
            key = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(urlsplit(uri).path).name + fragment)
            while key in bundled:
                key += "_"
            keys[ident] = key
            target_doc = await load(uri, where)
            try:
                target = resolve_pointer(target_doc, fragment, where)
            except PointerError:
                raise SpecError(f"unresolvable $ref {ref!r}", f"{source}{where}") from None
            # Copy before rewriting so a target used from several places is rewritten once.
            copied = json.loads(json.dumps(target))
            bundled[key] = copied
            pending.append((copied, uri, f"#/x-bundled/{escape_pointer(key)}"))
        return "#/x-bundled/" + escape_pointer(keys[ident])

    while pending:
        node, base, where = pending.pop()
        stack: list[tuple[Any, str]] = [(node, where)]
        while stack:
            item, at = stack.pop()
            if isinstance(item, dict):
                ref = item.get("$ref")
                if isinstance(ref, str) and not ref.startswith("#"):
                    item["$ref"] = await localise(ref, base, at)
                elif isinstance(ref, str) and base != source:
                    # A local ref inside an external document points into that document.
                    item["$ref"] = await localise(ref, base, at)
                for k, v in item.items():
                    if isinstance(v, (dict, list)) and not (item is doc and k == "x-bundled"):
                        stack.append((v, f"{at}/{escape_pointer(str(k))}"))
            elif isinstance(item, list):
                for i, v in enumerate(item):
                    if isinstance(v, (dict, list)):
                        stack.append((v, f"{at}/{i}"))
    return doc

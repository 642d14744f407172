"""Request validation with openapi-core before anything is sent.

The :class:`RequestValidator` builds openapi-core's ``OpenAPI`` object lazily (the first call, not
start-up: for GitHub's spec that costs more than listing every tool) and without re-validating the
spec itself. A :class:`~request.PreparedRequest` is checked as it would arrive at the spec's *own*
server URL, so a ``base_url`` override does not make every request "unknown path".

:func:`describe` turns openapi-core's nested exceptions into one sentence naming the argument,
because the model must know what to fix.

Patterns are checked with the spec's own meaning: one Python's ``re`` cannot read as written
(Java's ``\\p{L}``, ``\\x{60}`` ...) is rewritten by :func:`python_patterns` into one it can
(:func:`gateway.protocol.patterns.python_pattern`), in the validator's copy only; the few that have
no Python form at all are left unchecked and logged, rather than failing every call.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any
from urllib.parse import urlsplit

from jsonschema_path import SchemaPath
from openapi_core.datatypes import RequestParameters
from openapi_core.validation.request.validators import (
    V30RequestBodyValidator,
    V30RequestParametersValidator,
    V31RequestBodyValidator,
    V31RequestParametersValidator,
)
from werkzeug.datastructures import Headers, ImmutableMultiDict

from gateway.protocol.patterns import python_pattern

from .request import PreparedRequest

__all__ = ["RequestValidator", "CoreRequest", "describe", "openapi_core_quirk", "split_server", "python_patterns"]

log = logging.getLogger(__name__)


class CoreRequest:
    """openapi-core's ``Request`` protocol over a prepared request."""

    __slots__ = ("host_url", "path", "method", "body", "content_type", "parameters")

    def __init__(self, host_url: str, path: str, req: PreparedRequest) -> None:
        self.host_url = host_url
        self.path = path
        self.method = req.method.lower()
        self.body = req.body
        self.content_type = (req.content_type or "").lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(req.query),
            header=Headers(req.headers),
            cookie=ImmutableMultiDict(req.cookies),
        )


def split_server(url: str) -> tuple[str, str]:
    """(host_url, base path) for openapi-core; relative server URLs get a dummy host."""
    parts = urlsplit(url)
    if parts.scheme and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    return "http://localhost", url.rstrip("/")


class RequestValidator:
    """Parameters and body only: security is left out on purpose (credentials are added after
    validation so they can never appear in an error) and because openapi-core stops at the
    first security error without looking at the arguments."""

    def __init__(self, doc: dict[str, Any], spec_server_url: str, version: str) -> None:
        self._doc = doc
        self._v31 = version.startswith("3.1")
        self._validators: tuple[Any, Any] | None = None
        self._host, self._base = split_server(spec_server_url)
        # Patterns rewritten for Python's re → the spec's own text (errors quote the latter).
        self.originals: dict[str, str] = {}

    def _get(self) -> tuple[Any, Any]:
        if self._validators is None:
            spec = SchemaPath.from_dict(python_patterns(self._doc, self.originals))
            if self._v31:
                self._validators = (V31RequestParametersValidator(spec), V31RequestBodyValidator(spec))
            else:
                self._validators = (V30RequestParametersValidator(spec), V30RequestBodyValidator(spec))
        return self._validators

    def errors(self, req: PreparedRequest, server: str | None = None) -> list[Exception]:
        """openapi-core's errors for this request (empty: valid); ``server`` is the operation's
        own server URL when it declares one."""
        params, body = self._get()
        host, base = split_server(server) if server else (self._host, self._base)
        core = CoreRequest(host, base + req.path, req)
        with warnings.catch_warnings():
            # openapi-core warns when a deprecated parameter is used; the spec allows using it.
            warnings.simplefilter("ignore", DeprecationWarning)
            return self._errors(params, body, core)

    def _errors(self, params: Any, body: Any, core: CoreRequest) -> list[Exception]:
        # OpenAPI says header parameters named Accept, Content-Type or Authorization are ignored.
        found = [e for e in params.iter_errors(core) if not openapi_core_quirk(e)]
        if not any(type(e).__name__ in ("PathNotFound", "OperationNotFound", "ServerNotFound") for e in found):
            found.extend(e for e in body.iter_errors(core) if type(e).__name__ != "MissingRequestBody")
        return found


def python_patterns(node: Any, originals: dict[str, str] | None = None) -> Any:
    """``node`` with every ``pattern`` that Python's ``re`` cannot compile rewritten into one it can
    (same meaning; ``originals`` maps each rewriting back to the spec's text, for messages), or
    removed when there is none (logged once). Unchanged subtrees are shared, so a spec without
    such patterns costs one walk and no copy."""
    originals = {} if originals is None else originals
    if isinstance(node, dict):
        changed: dict[str, Any] | None = None
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                new: Any = python_pattern(value)
                if new == value:
                    continue
                if new is None and value not in originals.values():
                    log.warning("the pattern %s has no form in Python's re: arguments are not checked against it",
                                value)
                originals[value if new is None else new] = value
            else:
                new = python_patterns(value, originals)
            if new is not value:
                changed = dict(node) if changed is None else changed
                if new is None:
                    del changed[key]
                else:
                    changed[key] = new
        return node if changed is None else changed
    if isinstance(node, list):
        items = [python_patterns(v, originals) for v in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    return node


def openapi_core_quirk(exc: Exception) -> bool:
    """Errors where openapi-core departs from the OpenAPI specification, ignored on both sides:

    * header parameters named Accept, Content-Type or Authorization "SHALL be ignored";
    * ``readOnly`` is "relevant only for Schema properties", yet openapi-core refuses any value
      of a *parameter* whose schema says ``readOnly: true`` (GitHub's ``alert_number``).
    """
    location = getattr(exc, "location", None)
    if location == "header" and str(getattr(exc, "name", "")).lower() in ("accept", "content-type", "authorization"):
        return True
    errors = _schema_errors(exc)
    return bool(location and errors and all(
        getattr(se, "validator", None) == "readOnly" and not list(getattr(se, "absolute_path", ()) or ())
        for se in errors))


def _schema_errors(exc: BaseException | None) -> list[Any]:
    while exc is not None:
        found = getattr(exc, "schema_errors", None)
        if found:
            return list(found)
        exc = exc.__cause__
    return []


def describe(errors: list[Exception], originals: dict[str, str] | None = None) -> str:
    """One readable clause per problem, naming the parameter or body property; a pattern is quoted
    as the spec wrote it (``originals``: see :attr:`RequestValidator.originals`)."""
    lines: list[str] = []
    for exc in errors:
        name = getattr(exc, "name", None)
        location = getattr(exc, "location", None)
        where = f"{location} parameter {name!r}" if name and location else "request body"
        schema_errors = _schema_errors(exc)
        if schema_errors:
            for se in schema_errors[:5]:
                path = "/".join(str(p) for p in getattr(se, "absolute_path", ()) or ())
                message = getattr(se, "message", se)
                pattern = getattr(se, "validator_value", None)
                if getattr(se, "validator", None) == "pattern" and originals and pattern in originals:
                    message = f"{getattr(se, 'instance', None)!r} does not match {originals[pattern]!r}"
                lines.append(f"{where}{' at ' + path if path else ''}: {message}")
            continue
        msg = str(exc)
        cause = exc.__cause__
        if cause is not None and str(cause) and str(cause) not in msg:
            msg += f" ({cause})"
        lines.append(msg)
    return "; ".join(dict.fromkeys(lines)) or "the request does not match the API description"

"""Structured logs: one JSON object per line on stderr, carrying the trace id of the request.

``configure(config)`` installs one handler on the root logger (replacing the one it installed
before, so hot reload can change the level or format) with the level and format of
``gateway.log_level`` / ``gateway.log_format``. Every record gets ``trace_id`` and ``span_id``
when it is emitted inside a traced request (or one whose client sent a ``traceparent``), so a log
line can be joined to its trace and to the audit event of the same call.

JSON fields: ``ts`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``message``, then
``trace_id``/``span_id`` when known, ``exc`` for exceptions, and any ``extra={...}`` values that
are JSON-serialisable. stdout is never used: the stdio transport owns it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

from opentelemetry import trace

from gateway.telemetry import tracing

__all__ = ["JsonFormatter", "TextFormatter", "TraceContextFilter", "configure"]

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is logged.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime",
                                                                              "trace_id", "span_id"}
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


class TraceContextFilter(logging.Filter):
    """Adds ``trace_id``/``span_id`` of the current span (or the client's traceparent) to records."""

    def filter(self, record: logging.LogRecord) -> bool:
        sc = trace.get_current_span().get_span_context()
        if sc.is_valid:
            record.trace_id = format(sc.trace_id, "032x")
            record.span_id = format(sc.span_id, "016x")
        else:
            record.trace_id = tracing.current_trace_id()
            record.span_id = None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {
            "ts": f"{ts}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            out["trace_id"] = trace_id
            span_id = getattr(record, "span_id", None)
            if span_id:
                out["span_id"] = span_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        trace_id = getattr(record, "trace_id", None)
        return f"{text} trace_id={trace_id}" if trace_id else text


_installed: logging.Handler | None = None


def configure(config: Any, stream: IO[str] | None = None) -> logging.Handler:
    """Log to stderr (or ``stream``) in the configured format and level; returns the handler."""
    global _installed
    section = getattr(config, "gateway", config)
    level = _LEVELS.get(str(getattr(section, "log_level", "info")), logging.INFO)
    fmt = str(getattr(section, "log_format", "json"))
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(TraceContextFilter())
    root = logging.getLogger()
    if _installed is not None:
        root.removeHandler(_installed)
    root.addHandler(handler)
    root.setLevel(level)
    _installed = handler
    # Libraries that log every request at INFO would drown the gateway's own lines.
    for noisy in ("aiohttp.access", "httpx", "urllib3"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    return handler

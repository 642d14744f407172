"""configure(config) installs one JSON (or text) handler with the configured level, replacing the
one it installed before, so a reload can change the level or format."""

from __future__ import annotations

import io
import json
import logging

from gateway.config import parse_config
from gateway.telemetry import logging as gw_logging


def test_configure_json_then_text_replaces_the_handler():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        stream = io.StringIO()
        first = gw_logging.configure(parse_config("gateway: {log_level: warning}\n"), stream=stream)
        logging.getLogger("gateway.test").info("hidden")
        logging.getLogger("gateway.test").warning("shown %d", 1)
        (line,) = stream.getvalue().splitlines()
        record = json.loads(line)
        assert record["message"] == "shown 1" and record["level"] == "warning"
        assert record["logger"] == "gateway.test" and "trace_id" not in record

        text = io.StringIO()
        second = gw_logging.configure(parse_config("gateway: {log_format: text, log_level: debug}\n"), stream=text)
        assert first not in root.handlers and second in root.handlers
        logging.getLogger("gateway.test").debug("plain")
        assert text.getvalue().rstrip().endswith("DEBUG gateway.test: plain")
    finally:
        for handler in list(root.handlers):
            if handler not in saved[1]:
                root.removeHandler(handler)
        root.setLevel(saved[0])
        gw_logging._installed = None


def test_exceptions_are_one_json_line():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(gw_logging.JsonFormatter())
    logger = logging.getLogger("tests.telemetry.exc")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["message"] == "failed" and "ValueError: boom" in record["exc"]

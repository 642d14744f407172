"""The last lines a stdio upstream wrote to stderr while ``validate --deep`` probed it, so that a
probe that failed says why in the child's own words (npm's 404, a traceback's last line) rather
than only "upstream process exited (code 1)"."""

from __future__ import annotations

import logging
from collections import deque

from connectors.config import ConnectorConfig
from connectors.mcp.config import MCPConfig

__all__ = ["StderrTail"]


class StderrTail(logging.Handler):
    """The last lines a stdio upstream wrote to stderr during its probe. The MCP connector logs
    each line on the logger ``connectors.mcp.<name>``; while the probe runs, that logger passes
    every line here (and nowhere else: ``validate`` prints probes, not logs)."""

    _KEEP = 8

    def __init__(self, cfg: ConnectorConfig) -> None:
        super().__init__(logging.DEBUG)
        self.lines: deque[str] = deque(maxlen=self._KEEP)
        stdio = isinstance(cfg, MCPConfig) and cfg.transport == "stdio"
        self._logger = logging.getLogger(f"connectors.mcp.{cfg.name}") if stdio else None
        self._saved = (logging.NOTSET, True)

    def __enter__(self) -> StderrTail:
        if self._logger is not None:
            self._saved = (self._logger.level, self._logger.propagate)
            self._logger.setLevel(logging.DEBUG)
            self._logger.propagate = False
            self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._logger is not None:
            self._logger.removeHandler(self)
            self._logger.setLevel(self._saved[0])
            self._logger.propagate = self._saved[1]

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage().strip()
        if line and line not in self.lines:  # a retried start repeats itself: each line once
            self.lines.append(line)

    def explain(self, detail: str) -> str:
        """``detail``, with the stderr tail when the connector's own words lack it."""
        tail = [line for line in self.lines if line not in detail]
        return f"{detail}; its stderr ended: {' | '.join(tail)}" if tail else detail

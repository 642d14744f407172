"""``/status``: the operator's HTML page (connectors, catalog search, sessions, audit, rate limits).

:mod:`.view` (pure values and rules) · :mod:`.collect` (read the running gateway into a view) ·
:mod:`.render` (the view as HTML, no JavaScript, no external assets) · :mod:`.page` (the response).
"""

from __future__ import annotations

from .collect import StatusSource, collect
from .page import ViewSource, refusal, respond
from .view import StatusQuery, StatusView

__all__ = ["StatusSource", "collect", "respond", "refusal", "ViewSource", "StatusQuery", "StatusView"]

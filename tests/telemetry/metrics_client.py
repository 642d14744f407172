"""Scrape helpers: read /metrics over HTTP and compare samples before and after traffic.

Metrics are process-wide (one registry per process, like in production), so tests compare
deltas between two scrapes rather than absolute values for counters.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "scrape"]

Key = tuple[str, frozenset[tuple[str, str]]]


class Samples:
    """One scrape: ``value(name, **labels)`` and ``delta(before, name, **labels)``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.values: dict[Key, float] = {}
        self._series: dict[str, list[dict[str, str]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.values[_key(sample.name, sample.labels)] = sample.value
                self._series.setdefault(sample.name, []).append(dict(sample.labels))

    def value(self, name: str, **labels: str) -> float:
        return self.values.get(_key(name, labels), 0.0)

    def delta(self, before: Samples, name: str, **labels: str) -> float:
        return self.value(name, **labels) - before.value(name, **labels)

    def series(self, name: str) -> list[dict[str, str]]:
        """Every series of ``name`` with all its labels as exported (empty values included)."""
        return list(self._series.get(name, []))


def _key(name: str, labels: dict[str, str]) -> Key:
    # As in PromQL, a label with an empty value is the same as no label: `principal=""` (the
    # opt-in principal label, off) matches a query that does not name it.
    return name, frozenset((k, v) for k, v in labels.items() if v != "")


async def scrape(http: aiohttp.ClientSession, url: str, **headers: Any) -> Samples:
    async with http.get(url, headers=headers) as resp:
        assert resp.status == 200, (resp.status, await resp.text())
        assert resp.headers["Content-Type"].startswith("text/plain"), resp.headers["Content-Type"]
        return Samples(await resp.text())

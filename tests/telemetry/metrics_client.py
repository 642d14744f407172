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
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.values[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def delta(self, before: Samples, name: str, **labels: str) -> float:
        return self.value(name, **labels) - before.value(name, **labels)

    def series(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for (n, labels) in self.values if n == name]


async def scrape(http: aiohttp.ClientSession, url: str, **headers: Any) -> Samples:
    async with http.get(url, headers=headers) as resp:
        assert resp.status == 200, (resp.status, await resp.text())
        assert resp.headers["Content-Type"].startswith("text/plain"), resp.headers["Content-Type"]
        return Samples(await resp.text())

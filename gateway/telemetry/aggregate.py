"""One exposition from several workers' expositions (``serve --workers N``): pure, no I/O.

Each worker renders its whole registry (counters, histograms, the scrape-time
:class:`~gateway.telemetry.metrics.GatewayStateCollector`, process and GC collectors) as text; the
supervisor parses them and :func:`merge` adds them up sample by sample (same name, same labels):

* counters and histograms (``_bucket``, ``_sum``, ``_count``) are **summed**: the pod served the
  calls of all its workers;
* gauges are summed too (requests in flight, audit queue depth, sessions, resident memory, open
  file descriptors) unless :data:`GAUGE_POLICY` names another rule for the family: ``min`` where
  the pod is only as good as its worst worker (``connector_up``: a connector down in one worker
  fails the calls the kernel hands that worker; the oldest start and last successful reload),
  ``max`` where every worker reports the same thing and a sum would multiply it (catalog sizes,
  the build and Python info series, the breaker's 0/1 states, the fd limit).

A family whose type differs between workers (never, with one code base) is an error, not a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gateway.telemetry import metrics

__all__ = ["GAUGE_POLICY", "AggregateError", "merge"]

Combine = Callable[[float, float], float]


def _add(a: float, b: float) -> float:
    return a + b


# Gauge families not to be summed, by family name (the name ``# TYPE`` gives).
GAUGE_POLICY: dict[str, Combine] = {
    metrics.CONNECTOR_UP: min,
    metrics.CATALOG_ITEMS: max,
    f"{metrics.NAMESPACE}_build_info": max,
    f"{metrics.NAMESPACE}_config_last_reload_success_timestamp_seconds": min,
    f"{metrics.NAMESPACE}_rate_limit_breaker_state": max,
    "process_start_time_seconds": min,
    "process_max_fds": max,
    "python_info": max,
}


class AggregateError(ValueError):
    """The workers' expositions cannot be merged (one is not valid text, or types disagree)."""


def merge(texts: Sequence[str]) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of all ``texts`` merged as described above."""
    families: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for index, text in enumerate(texts):
        try:
            parsed = list(text_string_to_metric_families(text))
        except ValueError as exc:
            raise AggregateError(f"worker {index}'s exposition is not valid text: {exc}") from None
        for family in parsed:
            known = families.get(family.name)
            if known is None:
                families[family.name] = known = Metric(family.name, family.documentation, family.type,
                                                       family.unit)
                values[family.name] = {}
            elif known.type != family.type:
                raise AggregateError(f"{family.name} is a {known.type} in one worker and a {family.type} in "
                                     "another")
            combine = GAUGE_POLICY.get(family.name, _add) if family.type == "gauge" else _add
            into = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                before = into.get(key)
                into[key] = sample.value if before is None else combine(before, sample.value)
    for name, family in families.items():
        for (sample_name, labels), value in values[name].items():
            family.add_sample(sample_name, dict(labels), value)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(families.values())))
    return generate_latest(registry)


class _Families(Collector):
    """The merged families, as a collector ``generate_latest`` renders (escaping and order its own)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families

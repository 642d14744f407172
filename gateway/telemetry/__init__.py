"""Telemetry: Prometheus metrics (metrics.py, every name defined once), OpenTelemetry tracing
(tracing.py; sql.py traces SQL backends), structured JSON logs (logging.py) and the /metrics HTTP
routes (http.py). The per-request filter is gateway/filters/telemetry.py."""

"""Telemetry: Prometheus metrics (metrics.py, every name defined once), OpenTelemetry tracing
(tracing.py), structured JSON logs (logging.py) and the /metrics HTTP routes (http.py)."""

"""Issue 14, rows 14 and 15: a Host header that only starts like a loopback host, and what the
public port tells a stranger.

Before: ``Host: [::1]evil.example`` passed the loopback Host check (DNS rebinding); ``/readyz``
listed every connector with its health and error text and the session count, and ``/metrics``
named every tool, to anyone. Now the Host and Origin are parsed strictly, the public ``/readyz``
answers its status alone, and the detail (``/readyz?verbose=1``, ``/metrics``) takes a credential
when auth is on, or lives on the metrics port. A ``/healthz`` probe answers within 100 ms throughout.
"""

from __future__ import annotations

import json
import secrets
import time

import aiohttp

from tests.e2e.rawhttp import ACCEPT
from tests.support import free_port, gateway_process

from .http_support import INIT, closed_after, open_raw, probing_healthz

BAD_HOSTS = [
    "[::1]evil.example", "[::1]:8080evil.example", "[::1]@evil.example", "[::1].evil.example",
    "localhost.evil.example", "127.0.0.1.evil.example", "localhost@evil.example", "localhost:80@evil.example",
    "evil.example", "evil.example:8080", "[::1", "[::1]]", "[evil.example]", "localhost:8080:80",
    "127.0.0.1:80x", "localhost,evil.example", "[::ffff:203.0.113.9]",
]
GOOD_HOSTS = ["localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:8080", "127.9.9.9", "[::1]", "[::1]:8080"]
BAD_ORIGINS = ["http://[::1]evil.example", "http://[::1]:80evil.example", "http://[::1", "http://localhost.evil.example",
               "http://localhost@evil.example", "http://evil.example", "null", "http://localhost/path"]
GOOD_ORIGINS = ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443"]

STATIC = """
    audit: {enabled: false}
    connectors:
      - name: kit
        type: static
        prompts: [{name: hello, messages: [{text: hi}]}]
"""


async def _status(url: str, host: str, origin: str | None = None) -> tuple[int, str]:
    """POST an initialize with exactly these Host and Origin bytes; the status and body."""
    body = json.dumps(INIT).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n" + (f"Origin: {origin}\r\n" if origin else "") + "\r\n")
    reader, writer = await open_raw(url)
    writer.write(head.encode() + body)
    _, received = await closed_after(reader, time.perf_counter())
    writer.close()
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.decode(errors="replace")


async def test_a_host_that_only_starts_like_loopback_is_refused() -> None:
    async with gateway_process(STATIC) as gw:
        async with probing_healthz(gw.url) as probe:
            refused = {host: await _status(gw.url, host) for host in BAD_HOSTS}
            allowed = {host: await _status(gw.url, host) for host in GOOD_HOSTS}
            bad_origins = {origin: await _status(gw.url, "127.0.0.1", origin) for origin in BAD_ORIGINS}
            good_origins = {origin: await _status(gw.url, "127.0.0.1", origin) for origin in GOOD_ORIGINS}
        assert {host: status for host, (status, _) in refused.items()} == dict.fromkeys(BAD_HOSTS, 403)
        assert all("Forbidden" in body and "host" in body.lower() for _, body in refused.values())
        assert "the Host header is malformed" in refused["[::1]evil.example"][1]
        assert {host: status for host, (status, _) in allowed.items()} == dict.fromkeys(GOOD_HOSTS, 200)
        # An Origin that does not parse used to escape as a 500 (ValueError from urlsplit).
        assert {origin: status for origin, (status, _) in bad_origins.items()} == dict.fromkeys(BAD_ORIGINS, 403)
        assert {origin: status for origin, (status, _) in good_origins.items()} == dict.fromkeys(GOOD_ORIGINS, 200)
        assert probe.worst < 0.1, f"/healthz took up to {probe.worst * 1000:.0f} ms"


KEY = secrets.token_hex(16)
FAILING = """
      - name: billing
        type: openapi
        spec: ./specs/billing-internal-Zq7.yaml
"""


def _auth_config(metrics_port: int | None = None) -> str:
    telemetry = f"telemetry: {{metrics_port: {metrics_port}}}" if metrics_port else "telemetry: {metrics: true}"
    return STATIC + FAILING + f"""
    auth:
      api_keys: [{{name: ops, key: {KEY}}}]
    {telemetry}
"""


async def test_readyz_and_metrics_tell_a_stranger_nothing_with_auth_on() -> None:
    secret_bits = ("billing", "Zq7", "kit", "hello", "sessions", "cannot read")
    async with gateway_process(_auth_config()) as gw, aiohttp.ClientSession() as http:
        async with probing_healthz(gw.url) as probe:
            async with http.get(gw.url + "/readyz") as resp:
                public = await resp.text()
                assert resp.status == 200 and json.loads(public) == {"status": "ready"}
            async with http.get(gw.url + "/readyz?strict=1") as resp:  # a connector is down: not strictly ready
                strict = await resp.text()
                assert resp.status == 503 and json.loads(strict) == {"status": "degraded"}
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                async with http.get(gw.url + "/readyz?verbose=1", headers=headers) as resp:
                    refused = await resp.text()
                    assert resp.status == 401 and "WWW-Authenticate" in resp.headers
                async with http.get(gw.url + "/metrics", headers=headers) as resp:
                    scraped = await resp.text()
                    assert resp.status == 401
                for text in (public, strict, refused, scraped):
                    assert not any(bit in text for bit in secret_bits), text

            bearer = {"Authorization": f"Bearer {KEY}"}
            async with http.get(gw.url + "/readyz?verbose=1", headers=bearer) as resp:
                detail = await resp.json()
                assert resp.status == 200 and detail["status"] == "ready" and detail["sessions"] == 0
                assert detail["connectors"]["kit"] == {"up": True}
                assert detail["connectors"]["billing"]["up"] is False
                assert "billing-internal-Zq7.yaml" in detail["connectors"]["billing"]["detail"]
            async with http.get(gw.url + "/metrics", headers=bearer) as resp:
                assert resp.status == 200 and 'connector="kit"' in await resp.text()
        assert probe.worst < 0.1, f"/healthz took up to {probe.worst * 1000:.0f} ms"


async def test_the_metrics_port_serves_the_detail_and_the_public_port_no_metrics() -> None:
    port = free_port()
    async with gateway_process(_auth_config(port)) as gw, aiohttp.ClientSession() as http:
        metrics_url = f"http://127.0.0.1:{port}"
        async with probing_healthz(gw.url) as probe:
            async with http.get(gw.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}) as resp:
                assert resp.status == 404  # not on the public port at all
            async with http.get(gw.url + "/readyz") as resp:
                assert json.loads(await resp.text()) == {"status": "ready"}
            async with http.get(metrics_url + "/readyz") as resp:  # the monitoring network's view
                detail = await resp.json()
                assert resp.status == 200 and detail["connectors"]["billing"]["up"] is False
                assert "billing-internal-Zq7.yaml" in detail["connectors"]["billing"]["detail"]
            async with http.get(metrics_url + "/readyz?strict=1") as resp:
                assert resp.status == 503 and (await resp.json())["status"] == "degraded"
            async with http.get(metrics_url + "/metrics") as resp:
                assert resp.status == 200 and 'connector="kit"' in await resp.text()
        assert probe.worst < 0.1, f"/healthz took up to {probe.worst * 1000:.0f} ms"

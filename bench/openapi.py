"""Benchmark: load GitHub's REST API description and list all its tools, this gateway vs FastMCP.

Each side runs in a fresh child process (so imports, caches and memory do not leak between them)
and reports: wall time from "spec file path known" to "every tool listed over MCP", the number of
tools, and the process's peak RSS over the load and the listing (``VmHWM``, which includes the
interpreter and imports; target: under 170 MB for GitHub's spec). The gateway's child also says
whether the tool-search ranker was loaded: it must not be, since no endpoint searches.

* gateway: ``Gateway.start()`` with one ``type: openapi`` connector on the file, the real HTTP app on
  loopback, then ``initialize`` + ``tools/list`` page by page over Streamable HTTP (plain aiohttp
  JSON-RPC client, so client-side weight stays out of the number). It also times the first and the
  last pages: page time must not grow with the number of tools.
* FastMCP: ``FastMCP.from_openapi`` on the same spec, listed with ``fastmcp.Client`` in memory, run
  by ``$FASTMCP_PYTHON`` or else this interpreter (``make bench`` installs the ``bench`` extra,
  fastmcp, into the test venv beside the SDK). If fastmcp cannot be imported, that column says so.

Run: ``.venv/bin/python bench/openapi.py [--spec PATH] [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = REPO / "tests" / "data" / "openapi" / "github-api.json.gz"

# The peak of this process's own memory: VmHWM, which exec resets; ru_maxrss keeps the parent's
# high-water mark across fork and exec (a child of a 360 MB pytest reports 360 MB).
PEAK_RSS = r"""
def peak_rss_kb():
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""

GATEWAY_CHILD = r"""
import asyncio, json, resource, sys, time
sys.path.insert(0, sys.argv[2])
""" + PEAK_RSS + r"""
import aiohttp
from aiohttp import web
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.transports.http_app import build_app

async def main(spec):
    base_rss = peak_rss_kb()
    t0 = time.perf_counter()
    cfg = parse_config(f'''
gateway: {{page_size: 50}}
audit: {{enabled: false}}
telemetry: {{metrics: false}}
connectors:
  - {{name: gh, type: openapi, spec: "{spec}", base_url: "http://127.0.0.1:9"}}
''')
    gw = Gateway(cfg)
    await gw.start()
    runner = web.AppRunner(build_app(gw))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        async def rpc(body):
            async with http.post(url, json=body, headers=headers) as r:
                if "mcp-session-id" in r.headers:
                    headers["mcp-session-id"] = r.headers["mcp-session-id"]
                    headers["mcp-protocol-version"] = "2025-06-18"
                text = await r.text()
                if r.content_type == "text/event-stream":
                    text = [l[5:] for l in text.splitlines() if l.startswith("data:")][-1]
                return json.loads(text) if text.strip() else None
        await rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        await rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, cursor, pages = 0, None, []
        while True:
            p0 = time.perf_counter()
            res = await rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                             "params": {"cursor": cursor} if cursor else {}})
            pages.append(time.perf_counter() - p0)
            tools += len(res["result"]["tools"])
            cursor = res["result"].get("nextCursor")
            if not cursor:
                break
    elapsed = time.perf_counter() - t0
    peak = peak_rss_kb()
    await runner.cleanup()
    await gw.stop()
    first = sum(pages[:5]) / len(pages[:5]); last = sum(pages[-5:]) / len(pages[-5:])
    print(json.dumps({"seconds": elapsed, "tools": tools, "peak_rss_mb": peak / 1024,
                      "base_rss_mb": base_rss / 1024, "pages": len(pages),
                      "first_pages_ms": first * 1000, "last_pages_ms": last * 1000,
                      "search_index_loaded": "gateway.discovery.index" in sys.modules}))

asyncio.run(main(sys.argv[1]))
"""

FASTMCP_CHILD = r"""
import asyncio, gzip, json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from fastmcp import FastMCP, Client
""" + PEAK_RSS + r"""

async def main(spec):
    base_rss = peak_rss_kb()
    t0 = time.perf_counter()
    raw = open(spec, "rb").read()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    server = FastMCP.from_openapi(openapi_spec=doc)  # its default client; nothing is sent
    async with Client(server) as client:
        tools = await client.list_tools()
    elapsed = time.perf_counter() - t0
    peak = peak_rss_kb()
    import fastmcp
    print(json.dumps({"seconds": elapsed, "tools": len(tools), "peak_rss_mb": peak / 1024,
                      "base_rss_mb": base_rss / 1024, "version": fastmcp.__version__}))

asyncio.run(main(sys.argv[1]))
"""


def run_child(python: str, code: str, spec: Path) -> dict[str, object]:
    proc = subprocess.run([python, "-c", code, str(spec), str(REPO)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best(results: list[dict[str, object]]) -> dict[str, object]:
    ok = [r for r in results if "error" not in r]
    return min(ok, key=lambda r: float(r["seconds"])) if ok else results[0]  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per side; the fastest is shown")
    parser.add_argument("--skip-fastmcp", action="store_true")
    args = parser.parse_args(argv)
    fastmcp_python = os.environ.get("FASTMCP_PYTHON", sys.executable)

    gateway = best([run_child(sys.executable, GATEWAY_CHILD, args.spec) for _ in range(args.runs)])
    if args.skip_fastmcp:
        fast: dict[str, object] = {"error": "skipped"}
    elif subprocess.run([fastmcp_python, "-c", "import fastmcp"], capture_output=True).returncode != 0:
        fast = {"error": f"fastmcp is not installed for {fastmcp_python} (make bench installs it)"}
    else:
        fast = best([run_child(fastmcp_python, FASTMCP_CHILD, args.spec) for _ in range(args.runs)])

    print(f"spec: {args.spec.name} ({args.spec.stat().st_size / 1e6:.1f} MB on disk), best of {args.runs} fresh processes")
    print(f"{'':28}{'gateway':>14}{'FastMCP':>14}{'ratio':>10}")

    def row(label: str, key: str, fmt: str) -> None:
        g, f = gateway.get(key), fast.get(key)
        gs = format(g, fmt) if isinstance(g, (int, float)) else "-"
        fs = format(f, fmt) if isinstance(f, (int, float)) else "-"
        ratio = f"{float(f) / float(g):.2f}x" if isinstance(g, (int, float)) and isinstance(f, (int, float)) and g else ""
        print(f"{label:28}{gs:>14}{fs:>14}{ratio:>10}")

    row("load + list all tools (s)", "seconds", ".3f")
    row("peak RSS, load + list (MB)", "peak_rss_mb", ".0f")
    row("RSS after imports (MB)", "base_rss_mb", ".0f")
    row("tools", "tools", "d")
    if "first_pages_ms" in gateway:
        print(f"gateway tools/list: {gateway['pages']} pages of 50; first 5 pages {gateway['first_pages_ms']:.2f} ms "
              f"each, last 5 pages {gateway['last_pages_ms']:.2f} ms each")
    for side, res in (("gateway", gateway), ("FastMCP", fast)):
        if "error" in res:
            print(f"{side}: {res['error']}")
    if "version" in fast:
        print(f"FastMCP {fast['version']} from {fastmcp_python}")
    if "search_index_loaded" in gateway:
        print(f"gateway search index loaded (no endpoint searches): {gateway['search_index_loaded']}")
    target_ok = isinstance(gateway.get("seconds"), float) and float(gateway["seconds"]) < 1.2 \
        and float(gateway["peak_rss_mb"]) < 170  # type: ignore[arg-type]
    print(f"target (< 1.2 s and < 170 MB): {'met' if target_ok else 'NOT met'}")
    return 0 if "error" not in gateway else 1


if __name__ == "__main__":
    raise SystemExit(main())

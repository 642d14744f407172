"""The command line: validate (exit 0 / exit 2 with the precise error), list (text and --json,
items exactly as */list sends them), and serve (the quickstart over Streamable HTTP, SIGHUP
reload, SIGTERM exit)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from gateway.cli import main
from tests.e2e import testkit
from tests.e2e.clients import CORE_ONLY, sdk_client, write_static_config
from tests.support import REPO, free_port, running_gateway


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_validate_ok_and_precise_errors(tmp_path: Path) -> None:
    ok = _cli("validate", str(REPO / "examples" / "quickstart.yaml"))
    assert ok.returncode == 0 and ok.stdout.strip().endswith(": OK")
    bad = tmp_path / "bad.yaml"
    bad.write_text("gateway:\n  name: x\nconnectors:\n  - {name: a, type: static}\n"
                   "  - name: b\n    type: static\n    spec: ./openapi.yaml\n")
    result = _cli("validate", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"{bad}: connectors[1].spec (line 7): unknown key"
    missing = _cli("validate", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert _cli("validate").returncode == 2  # argparse usage error


async def _live_listing(config_text: str, base_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every item of every listing, walking the pages over a live Streamable HTTP session."""
    import aiohttp

    from tests.e2e.rawhttp import initialize

    out: dict[str, list[dict[str, Any]]] = {}
    async with running_gateway(config_text, base_dir=base_dir) as gw, aiohttp.ClientSession() as http:
        session = await initialize(http, gw.mcp_url)
        for key, method in (("tools", "tools/list"), ("resources", "resources/list"),
                            ("resourceTemplates", "resources/templates/list"), ("prompts", "prompts/list")):
            items: list[dict[str, Any]] = []
            cursor = None
            while True:
                page = (await session.request(method, {"cursor": cursor} if cursor else {}))["result"]
                items += page[key]
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            out[key] = items
    return out


def test_list_json_matches_a_live_listing(tmp_path: Path) -> None:
    path = write_static_config(tmp_path, page_size=4)
    result = _cli("list", str(path), "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert list(printed) == ["tools", "resources", "resourceTemplates", "prompts"]
    live = asyncio.run(_live_listing(path.read_text(), tmp_path))
    assert printed == live
    assert len(printed["prompts"]) == 10 and len(printed["resources"]) == 11


def test_list_json_with_tools_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    testkit.register(monkeypatch)
    text = CORE_ONLY + "gateway: {page_size: 5}\nconnectors:\n  - {name: kit, type: testkit, tools: 12}\n"
    path = tmp_path / "kit.yaml"
    path.write_text(text)
    assert main(["list", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    live = asyncio.run(_live_listing(text, tmp_path))
    assert printed == live and len(printed["tools"]) == 17
    assert main(["list", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tools (17):" in out and "  kit_echo_000  - Echo number 0" in out and "prompts (0):" in out


def test_list_text_and_failed_connectors(tmp_path: Path) -> None:
    result = _cli("list", str(REPO / "examples" / "quickstart.yaml"))
    assert result.returncode == 0
    assert "prompts (4):" in result.stdout and "docs://logo  [logo]" in result.stdout  # team 2 + shop 2
    broken = tmp_path / "broken.yaml"
    broken.write_text(CORE_ONLY + "connectors:\n  - name: s\n    type: static\n    resources:\n"
                      "      - {uri: 'x://1', name: one, path: ./missing.bin}\n")
    failed = _cli("list", str(broken))
    assert failed.returncode == 1
    assert "connector s failed to start" in failed.stderr and "missing.bin" in failed.stderr


async def test_serve_quickstart_reload_and_terminate(tmp_path: Path) -> None:
    """`make run`'s command on a copy of the quickstart: an SDK client uses it, SIGHUP reloads the
    file (sessions stay and hear list_changed), SIGTERM drains and exits 0."""
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("audit*"))
    config = tmp_path / "examples" / "quickstart.yaml"
    config.write_text(config.read_text() + CORE_ONLY)
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port),
        stderr=asyncio.subprocess.PIPE, cwd=tmp_path)
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            changed.set()

    try:
        assert proc.stderr is not None
        async with asyncio.timeout(30):
            while b"listening on" not in await proc.stderr.readline():
                pass
        async with sdk_client("streamable_http", url=f"http://127.0.0.1:{port}", message_handler=on_message) as session:
            prompts = await session.list_prompts()
            assert [p.name for p in prompts.prompts] == ["incident_review", "shop_explore_table",
                                                         "shop_write_query", "summarize"]
            # Every connector of the quickstart answers: static, the SQLite shop, the stdio upstream.
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"shop_query", "shop_top_customers", "tiny_echo"} <= tools
            echoed = await session.call_tool("tiny_echo", {"text": "hi"})
            assert not echoed.is_error and isinstance(echoed.content[0], types.TextContent)
            assert echoed.content[0].text == "hi"
            top = await session.call_tool("shop_top_customers", {"region": "emea", "n": 3})
            assert not top.is_error and top.structured_content is not None
            assert len(top.structured_content["rows"]) == 3
            runbook = await session.read_resource("docs://runbook")  # type: ignore[arg-type]
            assert isinstance(runbook.contents[0], types.TextResourceContents)
            assert runbook.contents[0].text == (REPO / "examples" / "docs" / "runbook.md").read_text()
            text = config.read_text().replace(
                "    resources:",
                "      - {name: added, messages: [{text: 'new'}]}\n    resources:", 1)
            config.write_text(text)
            # (The SDK opened its GET stream right after initialize, two round trips ago.)
            proc.send_signal(signal.SIGHUP)
            async with asyncio.timeout(10):
                await changed.wait()
            names = [p.name for p in (await session.list_prompts()).prompts]
            assert names == ["added", "incident_review", "shop_explore_table", "shop_write_query", "summarize"]
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_name_collision_is_a_start_up_error_naming_both_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "clash.yaml"
    path.write_text(CORE_ONLY + """gateway: {names: {on_collision: error}}
connectors:
  - {name: one, type: static, prefix: "", prompts: [{name: same, messages: [{text: a}]}]}
  - {name: two, type: static, prefix: "", prompts: [{name: same, messages: [{text: b}]}]}
""")
    for args in (("list", str(path)), ("stdio", "--config", str(path))):
        result = _cli(*args)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert "prompt name collision: 'same'" in result.stderr
        assert "connector 'one'" in result.stderr and "connector 'two'" in result.stderr


def _stdio_session(config: Path) -> subprocess.CompletedProcess[str]:
    """``mcp-gateway stdio`` in ``config``'s folder: initialize, then prompts/get team_hi (id 2)."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "team_hi"}},
    ]
    return subprocess.run([sys.executable, "-m", "gateway.cli", "stdio", "--config", str(config)],
                          input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                          text=True, timeout=60, cwd=config.parent)


def test_stdio_keeps_stdout_for_the_protocol_even_with_audit_on_stdout(tmp_path: Path) -> None:
    """audit.jsonl: stdout would corrupt the stdio stream; under stdio the mirror goes to stderr."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"audit: {{store: 'sqlite:///{tmp_path}/a.db', jsonl: stdout, spill_path: '{tmp_path}/s.jsonl'}}\n"
        "connectors:\n  - {name: team, type: static, prompts: [{name: hi, messages: [{text: hello}]}]}\n")
    proc = _stdio_session(config)
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r.get("id") for r in replies] == [1, 2] and all(r["jsonrpc"] == "2.0" for r in replies)
    audit_lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith('{"event_id"')]
    assert [e["method"] for e in audit_lines] == ["initialize", "prompts/get"]


def test_stdio_serves_when_the_configs_metrics_port_is_taken(tmp_path: Path) -> None:
    """The ops trial (issue 27): ``stdio --config gateway.yaml`` beside ``serve`` of the same file,
    whose metrics port the server holds. The stdio gateway serves, without a /metrics of its own."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        config = tmp_path / "gateway.yaml"
        config.write_text(f"audit: {{enabled: false}}\ntelemetry: {{metrics_port: {port}}}\n"
                          "connectors:\n  - {name: team, type: static, prompts: [{name: hi, messages: [{text: hello}]}]}\n")
        proc = _stdio_session(config)
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert replies[2]["result"]["messages"][0]["content"]["text"] == "hello"
    assert f"telemetry.metrics_port {port}:" in proc.stderr and "serves no /metrics" in proc.stderr


def test_stdio_serves_both_eras_on_one_pipe(tmp_path: Path) -> None:
    """The 2026-07-28 ``server/discover`` probe and stateless requests are answered on the same
    stdin/stdout as a legacy session (initialize first), each by its own rules."""
    config = tmp_path / "gateway.yaml"
    config.write_text("audit: {enabled: false}\n"
                      "connectors:\n  - {name: team, type: static, prompts: [{name: hi, messages: [{text: hello}]}]}\n")
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    requests = [
        {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": "m", "method": "prompts/get", "params": {"name": "team_hi", "_meta": meta}},
        {"jsonrpc": "2.0", "id": "u", "method": "prompts/get",
         "params": {"name": "team_hi", "_meta": {**meta, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}}},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "team_hi"}},
    ]
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "stdio", "--config", str(config)],
                          input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert replies["d"]["result"]["supportedVersions"] == ["2026-07-28"]
    assert replies["m"]["result"]["resultType"] == "complete"
    assert replies["m"]["result"]["messages"][0]["content"]["text"] == "hello"
    assert replies["u"]["error"]["code"] == -32022
    assert replies[1]["result"]["protocolVersion"] == "2025-11-25"
    assert "resultType" not in replies[2]["result"]


def test_version() -> None:
    from importlib.metadata import version

    result = _cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"mcp-gateway {version('mcp-gateway')}"


def test_validate_catches_what_the_config_alone_can_tell(tmp_path: Path) -> None:
    """Each of these used to pass validate and then fail serve or silently mis-serve (issue 15)."""
    spec = REPO / "tests" / "data" / "openapi" / "petstore-v3.json"
    bad = tmp_path / "gateway.yaml"
    bad.write_text(f"""\
auth:
  api_keys:
    - {{name: ops, key_file: ./ops.key, groups: [ops]}}
    - {{name: ci, key: abc, groups: [ci]}}
    - {{name: bot, key_file: ./bot.key}}
access:
  - {{principals: ["group:ops", "group:opz", "robot"], allow: ["*"]}}
connectors:
  - {{name: pets, type: openapi, spec: ./missing.yaml}}
  - name: shop
    type: openapi
    spec: {spec}
    overrides: {{getPetByIdd: {{name: get_pet}}}}
    include: {{operations: [getPetById, findPetsByStatuss]}}
  - {{name: up, type: mcp, command: nodee, args: [server.js]}}
  - {{name: db, type: sql, url: "sqlite+aiosqlite:///./nope.db"}}
  - {{name: team, type: static, resources: [{{uri: "x://1", name: one, path: ./gone.md}}]}}
""")
    (tmp_path / "ops.key").write_text("abc\n")  # the same key as ci's
    result = _cli("validate", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    expected = [
        "auth.api_keys[1] (line 4): the same key as api key 'ops'",
        "auth.api_keys[2].key_file (line 5): cannot read",
        "access[0].principals[1] (line 7): no principal has the group 'opz' (no api key lists it)",
        "access[0].principals[2] (line 7): no principal is named 'robot'",
        "connectors[0].spec (line 9): cannot read the spec file",
        "connectors[1].overrides.getPetByIdd (line 13): the spec has no operation with operationId 'getPetByIdd'",
        "connectors[1].include.operations[1] (line 14): the spec has no operation with operationId 'findPetsByStatuss'",
        "connectors[2].command (line 15): command 'nodee' is not on PATH",
        "connectors[3].url (line 16): sqlite database file not found",
        "connectors[4].resources[0].path (line 17): file not found",
        # Not an error (exit 2 is the others'): stdio would serve 'local' nothing (issue 27).
        "warning: auth.stdio_principal (line 1): no access rule allows anything to the stdio principal 'local'",
    ]
    assert len(lines) == len(expected), result.stderr
    for line, want in zip(lines, expected, strict=True):
        assert line.startswith(f"{bad}: {want}"), (line, want)
    # JWTs may carry groups and subjects nobody can list in advance: those references are not errors.
    (tmp_path / "bot.key").write_text("bot-key\n")
    (tmp_path / "ops.key").write_text("ops-key\n")
    jwt = bad.read_text().replace("access:", "  jwt: {jwks_url: 'https://idp.example/jwks.json', groups_claim: groups}\n"
                                              "access:")
    bad.write_text(jwt)
    assert "access[" not in _cli("validate", str(bad)).stderr


@pytest.mark.parametrize(("snippet", "message"), [
    ("auth: {api_keys: [{name: a, key_sha256: '9f86d0...'}]}",
     "auth.api_keys[0].key_sha256 (line 1): key_sha256 must be 64 hexadecimal characters"),
    ("auth: {api_keys: [{name: a, key: k}, {name: b, key_sha256: "
     "'8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a'}]}",
     "auth (line 1): api_keys 'a' and 'b' have the same key"),
    ("audit: {store: 'mysql://u:hunter2@db/audit'}", "audit.store (line 1): store must be sqlite:///PATH or "
                                                      "postgresql+asyncpg://"),
    ("rate_limits: {backend: 'redis:127.0.0.1:6379'}", "rate_limits.backend (line 1): backend must be memory, redis://"),
    ("telemetry: {otlp_endpoint: 'otel-collector:4318'}", "telemetry.otlp_endpoint (line 1): otlp_endpoint (OTLP/HTTP)"
                                                          " must be an http:// or https:// URL"),
    ("connectors: [{name: p, type: openapi, spec: 'ftp://host/spec.json'}]", "connectors[0].spec (line 1): spec must be "
                                                                              "a file path"),
    ("connectors: [{name: p, type: openapi, spec: ./s.json, base_url: 'petstore:8080'}]",
     "connectors[0].base_url (line 1): base_url must be an http:// or https:// URL"),
])
def test_validate_refuses_malformed_values_with_their_line(tmp_path: Path, snippet: str, message: str) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(snippet + "\n")
    result = _cli("validate", str(path))
    assert result.returncode == 2 and result.stderr.startswith(f"{path}: {message}"), result.stderr
    assert "hunter2" not in result.stderr


def test_a_malformed_key_stops_serve_before_anything_starts(tmp_path: Path) -> None:
    """It used to start the connectors, then fail with asyncio's "Task was destroyed" noise."""
    config = tmp_path / "gateway.yaml"
    config.write_text(CORE_ONLY + f"auth: {{api_keys: [{{name: ops, key_file: ./missing.key}}]}}\n"
                      f"connectors:\n  - {{name: tiny, type: mcp, command: {sys.executable}, "
                      f"args: [{REPO / 'examples' / 'tiny_mcp_server.py'}]}}\n")
    result = _cli("serve", "--config", str(config), "--port", "0")
    assert result.returncode == 2
    assert "auth.api_keys[0].key_file: cannot read" in result.stderr
    assert "Task was destroyed" not in result.stderr and "Traceback" not in result.stderr
    assert "connector tiny" not in result.stderr  # nothing was started


async def test_validate_deep_starts_every_connector_and_reaches_every_backend(tmp_path: Path, pg_url: str,
                                                                               redis_url: str) -> None:
    from aiohttp import web
    from sqlalchemy.engine import make_url

    pg = make_url(pg_url)
    missing_db = pg.set(drivername="postgresql+asyncpg", database="h15_no_such_database").render_as_string(False)
    audit = pg.set(drivername="postgres").render_as_string(False)  # postgres:// is read as postgresql+asyncpg://
    # A spec given as a URL is only read by --deep: its operationIds are checked then.
    async def serve_spec(request: web.Request) -> web.FileResponse:
        return web.FileResponse(REPO / "tests/data/openapi/petstore-v3.json")

    spec = web.Application()
    spec.router.add_get("/openapi.json", serve_spec)
    runner = web.AppRunner(spec)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    spec_port = runner.addresses[0][1]
    config = tmp_path / "gateway.yaml"
    config.write_text(f"""\
audit: {{store: "{audit}", spill_path: ./spill.jsonl}}
rate_limits: {{backend: "{redis_url}"}}
connectors:
  - {{name: team, type: static, prompts: [{{name: hi, messages: [{{text: hello}}]}}]}}
  - {{name: shop, type: sql, url: "sqlite+aiosqlite:///{REPO}/examples/data/shop.db"}}
  - {{name: orders, type: sql, url: "{missing_db}"}}
  - {{name: pets, type: openapi, spec: "http://127.0.0.1:{spec_port}/openapi.json", overrides: {{getPetByIdd: {{}}}}}}
  - {{name: tiny, type: mcp, command: {sys.executable}, args: [{REPO / 'examples' / 'tiny_mcp_server.py'}]}}
""")
    assert _cli("validate", str(config)).returncode == 0  # without --deep: nothing to see offline
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "gateway.cli", "validate", "--deep", str(config),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
    finally:
        await runner.cleanup()
    lines = out.decode().splitlines()
    assert proc.returncode == 1, (out, err)
    assert lines[0] == "connector team (static): ok: 1 prompt"
    assert lines[1] == "connector shop (sql): ok: 4 tools, 6 resources, 1 resource template, 2 prompts"
    assert lines[2] == ('connector orders (sql): FAILED: down: Database unavailable: database "h15_no_such_database"'
                        ' does not exist')
    assert lines[3] == ("connector pets (openapi): FAILED: overrides.getPetByIdd: the spec has no operation with "
                        "operationId 'getPetByIdd'")
    assert lines[4] == "connector tiny (mcp): ok: 3 tools"
    assert lines[5] == f"rate-limit backend {redis_url}: ok: reachable"
    assert lines[6].startswith("audit store postgres://") and lines[6].endswith(": ok: reachable")
    assert len(lines) == 7 and err.decode().strip().endswith("2 of 7 checks failed")


def test_validate_deep_passes_the_quickstart() -> None:
    result = _cli("validate", "--deep", str(REPO / "examples" / "quickstart.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "connector team (static)", "connector shop (sql)", "connector tiny (mcp)", "audit store sqlite", f"{REPO / 'examples' / 'quickstart.yaml'}"]


def test_list_fails_and_names_a_connector_that_started_down(tmp_path: Path, pg_url: str) -> None:
    """A SQL connector with a wrong database name starts down (it keeps retrying): it used to log
    nothing and list exited 0 without its tables."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql+asyncpg", database="h15_no_such_database")
    config = tmp_path / "gateway.yaml"
    config.write_text(CORE_ONLY + "gateway: {log_format: text}\nconnectors:\n"
                      f"  - {{name: shop, type: sql, url: '{url.render_as_string(False)}'}}\n"
                      "  - {name: team, type: static, prompts: [{name: hi, messages: [{text: hello}]}]}\n")
    result = _cli("list", str(config))
    assert result.returncode == 1
    assert 'connector shop is down: Database unavailable: database "h15_no_such_database" does not exist' in result.stderr
    assert "connector shop is down after start" in result.stderr  # the gateway's own ERROR log line

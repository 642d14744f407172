"""Hot reload with live sessions: unchanged connectors keep running, changed ones restart, sessions
stay connected and receive list_changed, calls in flight finish, an invalid config is refused and
the old one keeps serving (in-process, through the file watcher, and on SIGHUP in a real process)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import aiohttp

from gateway.reloader import ConfigReloader
from tests.filters.mcp_http import McpHttp
from tests.support import config_from, gateway_process, running_gateway
from tests.telemetry.backend import backend, openapi_connector_yaml
from tests.telemetry.metrics_client import scrape
from tests.telemetry.streams import NotificationStream

HEAD = "gateway:\n  http: {json_response: true}\naudit: {enabled: false}\n"


def docs(*names: str) -> str:
    lines = ["  - name: docs", "    type: static", "    resources:"]
    lines += [f"      - {{uri: 'docs://{n}', name: {n}, text: 'text of {n}'}}" for n in names]
    return "\n".join(lines) + "\n"


TEAM = """\
  - name: team
    type: static
    prompts:
      - {name: hello, messages: [{text: hi}]}
"""


def config_text(url: str, *parts: str, api_extra: str = "") -> str:
    return HEAD + "connectors:\n" + openapi_connector_yaml(url) + api_extra + "".join(parts)


async def call_tool(client: McpHttp, name: str, **arguments: str) -> dict:
    return await client.call("tools/call", {"name": name, "arguments": arguments})


async def test_reload_keeps_sessions_and_unchanged_connectors():
    async with backend() as be, aiohttp.ClientSession() as http:
        async with running_gateway(config_text(be.url, docs("about"))) as gw:
            client = await McpHttp(http, gw.mcp_url).initialize()
            async with NotificationStream(http, gw.mcp_url, client.headers) as stream:
                api = gw.connectors["api"]
                slow = asyncio.create_task(call_tool(client, "api_slow"))
                await asyncio.wait_for(be.slow_started.wait(), 10)

                result = await gw.reload(config_from(config_text(be.url, docs("about", "faq"), TEAM)))
                assert result["kept"] == ["api"]
                assert set(result["started"]) == {"docs", "team"} and result["stopped"] == ["docs"]
                assert gw.connectors["api"] is api  # not restarted

                await stream.wait_for("notifications/resources/list_changed")
                await stream.wait_for("notifications/prompts/list_changed")
                assert "notifications/tools/list_changed" not in stream.methods()  # tools did not change

                # The same session sees the new catalog and still calls the kept connector.
                uris = [r["uri"] for r in (await client.call("resources/list"))["result"]["resources"]]
                assert uris == ["docs://about", "docs://faq"]
                prompts = (await client.call("prompts/list"))["result"]["prompts"]
                assert [p["name"] for p in prompts] == ["team_hello"]
                assert "result" in await call_tool(client, "api_getItem", id="1")

                # The call that was in flight during the reload completes.
                be.release()
                reply = await asyncio.wait_for(slow, 10)
                assert reply["result"]["structuredContent"] == {"slow": "done"}
                assert not stream.ended.is_set()
            assert len(gw.sessions) == 1


async def test_calls_in_flight_on_a_restarted_connector_finish():
    async with backend() as be, aiohttp.ClientSession() as http:
        async with running_gateway(config_text(be.url)) as gw:
            client = await McpHttp(http, gw.mcp_url).initialize()
            old = gw.connectors["api"]
            slow = asyncio.create_task(call_tool(client, "api_slow"))
            await asyncio.wait_for(be.slow_started.wait(), 10)
            # Changing the connector's config restarts it; the old instance serves its call to the end.
            result = await gw.reload(config_from(config_text(be.url, api_extra="    timeout_s: 50\n")))
            assert result["started"] == ["api"] and result["stopped"] == ["api"]
            assert gw.connectors["api"] is not old
            assert "result" in await call_tool(client, "api_getItem", id="2")  # the new instance serves
            be.release()
            reply = await asyncio.wait_for(slow, 10)
            assert reply["result"]["structuredContent"] == {"slow": "done"}


async def test_invalid_config_is_refused_and_the_old_one_keeps_serving(tmp_path, caplog):
    path = tmp_path / "gateway.yaml"
    async with backend() as be, aiohttp.ClientSession() as http:
        path.write_text(config_text(be.url, docs("about")))
        async with running_gateway(config_from(path.read_text(), tmp_path)) as gw:
            client = await McpHttp(http, gw.mcp_url).initialize()
            reloader = ConfigReloader(gw.gateway, path)
            before = await scrape(http, gw.url + "/metrics")
            running = gw.config

            path.write_text(config_text(be.url, docs("about")).replace("type: static", "type: statc"))
            with caplog.at_level(logging.ERROR, logger="gateway.reload"):
                assert await reloader.reload() is False
            (line,) = [r.getMessage() for r in caplog.records if r.name == "gateway.reload"]
            assert "refused, keeping the running config" in line and "connectors[1].type" in line
            assert gw.config is running

            # Valid YAML whose catalog collides (two connectors, same public name), where the config
            # asks for strictness (gateway.names.on_collision: error; keep_first would serve it): refused too.
            clash = TEAM + TEAM.replace("name: team", "name: team2").replace(
                "type: static", "type: static\n    prefix: team_")
            strict = config_text(be.url, docs("about"), clash).replace(
                "gateway:\n", "gateway:\n  names: {on_collision: error}\n", 1)
            path.write_text(strict)
            assert await reloader.reload() is False
            assert gw.config is running and set(gw.connectors) == {"api", "docs"}

            # The session was never disturbed.
            assert "result" in await call_tool(client, "api_getItem", id="3")
            assert (await client.call("resources/read", {"uri": "docs://about"}))["result"]["contents"]

            path.write_text(config_text(be.url, docs("about", "faq")))
            assert await reloader.reload() is True
            after = await scrape(http, gw.url + "/metrics")
            assert after.delta(before, "mcp_gateway_config_reloads_total", result="failed") == 2
            assert after.delta(before, "mcp_gateway_config_reloads_total", result="ok") == 1
            assert after.value("mcp_gateway_config_last_reload_success_timestamp_seconds") >= \
                before.value("mcp_gateway_config_last_reload_success_timestamp_seconds")


async def test_a_changed_file_is_reloaded_by_the_watcher(tmp_path):
    path = tmp_path / "gateway.yaml"
    async with backend() as be, aiohttp.ClientSession() as http:
        path.write_text(config_text(be.url, docs("about")))
        async with running_gateway(config_from(path.read_text(), tmp_path)) as gw:
            client = await McpHttp(http, gw.mcp_url).initialize()
            reloader = ConfigReloader(gw.gateway, path)
            watcher = asyncio.create_task(reloader.watch(interval=0.05))
            try:
                async with NotificationStream(http, gw.mcp_url, client.headers) as stream:
                    atomic_write(path, config_text(be.url, docs("about"), TEAM))
                    await stream.wait_for("notifications/prompts/list_changed")
                    assert "team" in gw.connectors
            finally:
                watcher.cancel()


class _Stderr:
    """Collects a subprocess's stderr lines; ``wait_for(text)`` returns once a line contains it."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._new = asyncio.Condition()
        self.task = asyncio.create_task(self._pump(stream))

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            async with self._new:
                self.lines.append(raw.decode(errors="replace"))
                self._new.notify_all()

    async def wait_for(self, text: str, timeout: float = 15.0) -> str:
        async with asyncio.timeout(timeout), self._new:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                await self._new.wait()


async def test_sighup_reloads_a_running_process():
    async with backend() as be, aiohttp.ClientSession() as http:
        # File polling off: this test is about the signal alone.
        async with gateway_process(config_text(be.url, docs("about")),
                                   env={"MCP_GATEWAY_RELOAD_POLL_S": "0"}) as proc:
            assert proc.proc.stderr is not None
            stderr = _Stderr(proc.proc.stderr)
            client = await McpHttp(http, proc.mcp_url).initialize()
            async with NotificationStream(http, proc.mcp_url, client.headers) as stream:
                # An invalid file on SIGHUP: one clear line, the old config keeps serving.
                proc.config_path.write_text("connectors: [{name: x, type: nope}]\n")
                proc.proc.send_signal(signal.SIGHUP)
                line = await stderr.wait_for("refused")
                assert "connectors[0].type" in line
                assert "result" in await call_tool(client, "api_getItem", id="1")

                proc.config_path.write_text(config_text(be.url, docs("about"), TEAM))
                proc.proc.send_signal(signal.SIGHUP)
                await stream.wait_for("notifications/prompts/list_changed")
                prompts = (await client.call("prompts/list"))["result"]["prompts"]
                assert [p["name"] for p in prompts] == ["team_hello"]
                samples = await scrape(http, proc.url + "/metrics")
                assert samples.value("mcp_gateway_config_reloads_total", result="failed") == 1
                assert samples.value("mcp_gateway_config_reloads_total", result="ok") == 1


def atomic_write(path, text: str) -> None:
    """Replace the file in one step (as Kubernetes swaps a ConfigMap), so a poll never reads half of it."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def test_a_running_process_reloads_its_changed_file():
    async with backend() as be, aiohttp.ClientSession() as http:
        async with gateway_process(config_text(be.url, docs("about")),
                                   env={"MCP_GATEWAY_RELOAD_POLL_S": "0.1"}) as proc:
            assert proc.proc.stderr is not None
            stderr = _Stderr(proc.proc.stderr)
            client = await McpHttp(http, proc.mcp_url).initialize()
            async with NotificationStream(http, proc.mcp_url, client.headers) as stream:
                atomic_write(proc.config_path, config_text(be.url, docs("about", "faq")))
                await stream.wait_for("notifications/resources/list_changed")
                await stderr.wait_for("config reloaded (file changed)")
                uris = [r["uri"] for r in (await client.call("resources/list"))["result"]["resources"]]
                assert uris == ["docs://about", "docs://faq"]
                # A broken edit is refused once (not on every poll) and the session keeps working.
                atomic_write(proc.config_path, "gateway: [not, a, mapping\n")
                await stderr.wait_for("refused, keeping the running config")
                assert "result" in await call_tool(client, "api_getItem", id="1")
                samples = await scrape(http, proc.url + "/metrics")
                assert samples.value("mcp_gateway_config_reloads_total", result="ok") == 1
                assert samples.value("mcp_gateway_config_reloads_total", result="failed") == 1

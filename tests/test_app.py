"""Gateway start-up fails loudly and cleanly (issue 15, findings 2 and 3): a connector that starts
down is an ERROR naming it and the cause; a start that fails after the connectors started stops
them first; what policy references nobody is logged as a warning."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any, Literal

import pytest

from connectors.base import Components, Connector, ConnectorEvents, Health, ToolSpec
from connectors.config import ConnectorConfig
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from connectors.registry import ConnectorKind
from gateway.app import Gateway
from gateway.protocol.errors import ConfigError
from tests.support import config_from


class ProbeConfig(ConnectorConfig):
    type: Literal["probe"]
    down: str | None = None  # start, but report this as the reason it is down


class ProbeConnector(Connector):
    kind = "probe"
    config: ProbeConfig
    stopped: list[str] = []

    def __init__(self, config: ProbeConfig, base_dir: Path = Path(".")) -> None:
        super().__init__(config, base_dir)
        self.components = Components(tools=(ToolSpec("t", {"name": "t", "inputSchema": {"type": "object"}}),))

    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)

    async def stop(self) -> None:
        ProbeConnector.stopped.append(self.name)

    def health(self) -> Health:
        return Health(False, self.config.down) if self.config.down else Health(True)

    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"content": []}


@pytest.fixture(autouse=True)
def probe_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from connectors import registry

    monkeypatch.setitem(registry.KINDS, "probe", ConnectorKind(lambda: ProbeConfig, lambda: ProbeConnector))
    ProbeConnector.stopped = []


CORE = "audit: {enabled: false}\ntelemetry: {metrics: false}\n"


async def test_a_connector_down_after_start_is_an_error_naming_it_and_the_cause(caplog: pytest.LogCaptureFixture) -> None:
    gateway = Gateway(config_from(CORE + "connectors:\n  - {name: ok, type: probe}\n"
                                  "  - {name: shop, type: probe, down: 'database \"shopx\" does not exist'}\n"))
    with caplog.at_level(logging.INFO, logger="gateway.app"):
        await gateway.start()
    try:
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert [r.getMessage() for r in errors] == [
            'connector shop is down after start: database "shopx" does not exist (it keeps retrying)']
        # Before the "ready" line: among the first lines an operator reads.
        messages = [r.getMessage() for r in caplog.records]
        assert messages.index(errors[0].getMessage()) < next(i for i, m in enumerate(messages) if " ready: " in m)
        assert gateway.health()["connectors"]["shop"] == {"up": False, "detail": 'database "shopx" does not exist'}
    finally:
        await gateway.stop(grace_s=0)


async def test_a_start_that_fails_after_the_connectors_started_stops_them_first() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        gateway = Gateway(config_from(f"audit: {{enabled: false}}\ntelemetry: {{metrics_port: {port}}}\n"
                                      "connectors:\n  - {name: a, type: probe}\n  - {name: b, type: probe}\n"))
        with pytest.raises(ConfigError, match=f"cannot serve /metrics on port {port}") as info:
            await gateway.start()
    assert info.value.path == "telemetry.metrics_port"
    assert sorted(ProbeConnector.stopped) == ["a", "b"]  # nothing left running behind the error
    assert gateway.filters == []


async def test_a_key_the_gateway_cannot_read_fails_before_any_connector_starts(tmp_path: Path) -> None:
    gateway = Gateway(config_from(CORE + "auth: {api_keys: [{name: ops, key_file: ./missing.key}]}\n"
                                  "connectors:\n  - {name: a, type: probe}\n", base_dir=tmp_path))
    with pytest.raises(ConfigError, match="cannot read"):
        await gateway.start()
    assert gateway.connectors == {} and ProbeConnector.stopped == []


async def test_policy_that_names_nobody_is_logged_at_start(caplog: pytest.LogCaptureFixture) -> None:
    gateway = Gateway(config_from(CORE + "auth: {api_keys: [{name: ops, key: k, groups: [ops]}]}\n"
                                  "access:\n  - {principals: ['group:opz'], allow: ['*']}\n"
                                  "connectors:\n  - {name: a, type: probe}\n"))
    with caplog.at_level(logging.WARNING, logger="gateway.app"):
        await gateway.start()
    await gateway.stop(grace_s=0)
    assert "config access[0].principals[0]: no principal has the group 'opz' (no api key lists it)" in [
        r.getMessage() for r in caplog.records]

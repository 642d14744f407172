"""The egress policy as plain values: address classes, the rules in order, resolving (every address
checked, the checked addresses returned), the redirect rule, the ``egress:`` config block and how
the gateway-wide block reaches connectors. The attacks on a running connector are
tests/security/test_egress.py."""

from __future__ import annotations

import asyncio
import socket
import textwrap
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError
from yarl import URL

from connectors.config import EgressConfig
from connectors.egress import (
    BY_NAME,
    NON_ROUTABLE,
    PRIVATE,
    PUBLIC,
    EgressPolicy,
    EgressRefused,
    RedirectRefused,
    classify,
)
from gateway.config import parse_config
from gateway.protocol.errors import ConfigError


class FakeDNS:
    """A lookup answering from a table, recording every question."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int, family: int) -> Sequence[str]:
        self.asked.append(host)
        return self.table.get(host, [])


@pytest.mark.parametrize(("address", "kind"), [
    ("93.184.215.14", PUBLIC), ("2606:4700::1111", PUBLIC), ("::ffff:8.8.8.8", PUBLIC),
    ("127.0.0.1", PRIVATE), ("127.9.9.9", PRIVATE), ("10.1.2.3", PRIVATE), ("172.31.0.1", PRIVATE),
    ("192.168.1.1", PRIVATE), ("100.64.0.1", PRIVATE), ("::1", PRIVATE), ("fd12::1", PRIVATE),
    ("169.254.169.254", BY_NAME), ("169.254.0.1", BY_NAME), ("fe80::1", BY_NAME), ("fe80::1%2", BY_NAME),
    ("100.100.100.200", BY_NAME), ("fd00:ec2::254", BY_NAME), ("168.63.129.16", BY_NAME),
    # IPv6 forms that carry an IPv4 address are judged as that address.
    ("::ffff:169.254.169.254", BY_NAME), ("64:ff9b::a9fe:a9fe", BY_NAME), ("2002:a9fe:a9fe::1", BY_NAME),
    ("::ffff:127.0.0.1", PRIVATE), ("::ffff:10.0.0.1", PRIVATE),
    ("0.0.0.0", NON_ROUTABLE), ("::", NON_ROUTABLE), ("224.0.0.1", NON_ROUTABLE), ("ff02::1", NON_ROUTABLE),
    ("240.0.0.1", NON_ROUTABLE), ("255.255.255.255", NON_ROUTABLE), ("192.0.2.1", NON_ROUTABLE),
])
def test_address_classes(address: str, kind: str) -> None:
    assert classify(address) == kind


def _refused(policy: EgressPolicy, host: str, address: str, port: int = 80) -> str:
    with pytest.raises(EgressRefused) as info:
        policy.check_address(host, address, port)
    return info.value.reason


def test_the_default_refuses_everything_but_public_addresses() -> None:
    policy = EgressPolicy()
    policy.check_address("api.example.com", "93.184.215.14")
    assert _refused(policy, "api.example.com", "10.0.0.5") == PRIVATE
    assert _refused(policy, "127.0.0.1", "127.0.0.1") == PRIVATE
    assert _refused(policy, "api.example.com", "169.254.169.254") == BY_NAME
    assert _refused(policy, "api.example.com", "0.0.0.0") == NON_ROUTABLE


def test_allow_private_opens_its_networks_only_and_never_link_local() -> None:
    policy = EgressPolicy(EgressConfig(allow_private=["10.0.0.0/8", "0.0.0.0/0"]))
    policy.check_address("svc.internal", "10.1.2.3")
    policy.check_address("svc.internal", "192.168.0.9")  # 0.0.0.0/0: every private IPv4 range
    assert _refused(policy, "svc.internal", "fd12::1") == PRIVATE  # not IPv6
    assert _refused(policy, "svc.internal", "169.254.169.254") == BY_NAME
    assert _refused(policy, "svc.internal", "::ffff:169.254.169.254") == BY_NAME


def test_allow_hosts_names_exactly_or_by_suffix() -> None:
    policy = EgressPolicy(EgressConfig(allow_hosts=["Metadata.Google.Internal.", "*.svc.cluster.local", "10.9.9.9"]))
    policy.check_address("metadata.google.internal", "169.254.169.254")
    policy.check_address("api.ns.svc.cluster.local", "10.0.0.7")
    assert _refused(policy, "svc.cluster.local", "10.0.0.7") == PRIVATE  # the suffix itself is not a subdomain
    assert _refused(policy, "evilsvc.cluster.local", "10.0.0.7") == PRIVATE
    policy.check_address("10.9.9.9", "10.9.9.9")  # a literal named as a host
    assert _refused(policy, "other.internal", "10.9.9.9") == PRIVATE  # ... is not a network rule


def test_deny_wins_over_everything() -> None:
    policy = EgressPolicy(EgressConfig(deny=["203.0.113.0/24", "10.0.0.0/8"], allow_private=["10.0.0.0/8"],
                                       allow_hosts=["admin.example.com"]))
    assert _refused(policy, "admin.example.com", "203.0.113.10") == "a denied address"
    assert _refused(policy, "x.internal", "::ffff:10.0.0.1") == "a denied address"


def test_config_literals_are_trusted_for_their_origin_only() -> None:
    policy = EgressPolicy(trusted=["http://127.0.0.1:8080/api", "https://[::1]/spec.json", None, "not a url",
                                   "http://localhost:9000", "http://169.254.169.254/"])
    policy.check_address("127.0.0.1", "127.0.0.1", 8080)
    policy.check_address("::1", "::1", 443)
    assert _refused(policy, "127.0.0.1", "127.0.0.1", 8081) == PRIVATE  # another port: another origin
    assert _refused(policy, "localhost", "127.0.0.1", 9000) == PRIVATE  # names are checked after DNS
    assert _refused(policy, "169.254.169.254", "169.254.169.254", 80) == BY_NAME  # never trusted


def test_host_checks_need_no_dns() -> None:
    policy = EgressPolicy()
    for url in ("http://metadata.google.internal/computeMetadata/v1/", "http://METADATA.GOOGLE.INTERNAL./",
                "http://[::ffff:a9fe:a9fe]/", "http://169.254.169.254/latest/meta-data/", "http://0.0.0.0:8080/"):
        with pytest.raises(EgressRefused):
            policy.check_url(url)
    with pytest.raises(EgressRefused, match="only http and https"):
        policy.check_url("file:///etc/passwd")
    policy.check_url("https://api.example.com/v1")  # a name: decided after DNS
    EgressPolicy(EgressConfig(allow_hosts=["metadata.google.internal"])).check_url("http://metadata.google.internal/")


async def test_resolve_checks_every_address_and_returns_what_it_checked() -> None:
    dns = FakeDNS({"api.test": ["127.0.0.1", "::1"], "mixed.test": ["127.0.0.1", "169.254.169.254"],
                   "meta.test": ["169.254.169.254"]})
    policy = EgressPolicy(EgressConfig(allow_private=["127.0.0.0/8", "::1"]), lookup=dns)
    assert await policy.resolve("api.test", 80) == ["127.0.0.1", "::1"]
    with pytest.raises(EgressRefused) as info:
        await policy.resolve("mixed.test", 80)  # one bad address refuses the name
    assert info.value.address == "169.254.169.254" and "allow_hosts" in str(info.value)
    with pytest.raises(EgressRefused):
        await policy.resolve("meta.test", 80)
    with pytest.raises(socket.gaierror):
        await policy.resolve("nowhere.test", 80)
    before = list(dns.asked)
    assert await policy.resolve("127.0.0.1", 80) == ["127.0.0.1"]  # a literal is not looked up
    with pytest.raises(EgressRefused):
        await policy.resolve("metadata.google.internal", 80)  # refused before any DNS question
    assert dns.asked == before


def _response(status: int, location: str | None) -> Any:
    return SimpleNamespace(status=status, headers={"Location": location} if location else {})


def test_the_redirect_rule() -> None:
    policy = EgressPolicy(EgressConfig(max_redirects=2))
    here = URL("http://api.example.com:8080/v1/items?x=1")
    assert policy._redirect("GET", here, _response(302, "/v1/other"), 0) == URL("http://api.example.com:8080/v1/other")
    assert policy._redirect("HEAD", here, _response(308, "http://API.example.com:8080/a"), 1) is not None
    assert policy._redirect("GET", here, _response(200, "/ignored"), 0) is None
    assert policy._redirect("GET", here, _response(302, None), 0) is None  # no Location: the answer itself
    refused = {
        "another port": ("GET", _response(302, "http://api.example.com:9090/v1"), 0),
        "another scheme": ("GET", _response(301, "https://api.example.com:8080/v1"), 0),
        "another host": ("GET", _response(307, "http://169.254.169.254/latest/meta-data/"), 0),
        "a sibling host": ("GET", _response(303, "http://files.example.com:8080/v1"), 0),
        "not GET": ("POST", _response(307, "/v1/other"), 0),
        "too many": ("GET", _response(302, "/v1/again"), 2),
    }
    for case, (method, resp, hops) in refused.items():
        with pytest.raises(RedirectRefused) as info:
            policy._redirect(method, here, resp, hops)
        assert info.value.status == resp.status, case
    assert "max_redirects = 2" in str(info.value)


def test_the_config_block_is_validated_and_normalised() -> None:
    cfg = EgressConfig(allow_private=["10.0.0.1", "fd00::/8"], allow_hosts=["API.Internal.", "[::1]", "*.svc.local"])
    assert cfg.allow_private == ("10.0.0.1/32", "fd00::/8")
    assert cfg.allow_hosts == ("api.internal", "::1", "*.svc.local")
    for bad in ({"allow_private": ["169.254.169.254"]}, {"allow_private": ["fe80::/64"]},
                {"allow_private": ["not-a-network"]}, {"allow_hosts": ["http://x/"]}, {"allow_hosts": ["a b"]},
                {"deny": ["x"]}, {"max_redirects": -1}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            EgressConfig.model_validate(bad)


def test_the_gateway_wide_block_is_every_connectors_default() -> None:
    config = parse_config(textwrap.dedent("""
        egress: {allow_private: [10.0.0.0/8], max_redirects: 1}
        connectors:
          - {name: a, type: openapi, spec: a.json}
          - {name: b, type: openapi, spec: b.json, egress: {allow_hosts: [metadata.google.internal], max_redirects: 0}}
          - {name: c, type: openapi, spec: c.json, egress: {allow_private: []}}
          - {name: d, type: static}
    """))
    a, b, c, _ = config.connectors
    assert a.egress == EgressConfig(allow_private=["10.0.0.0/8"], max_redirects=1)  # type: ignore[attr-defined]
    assert b.egress == EgressConfig(allow_private=["10.0.0.0/8"], allow_hosts=["metadata.google.internal"],  # type: ignore[attr-defined]
                                    max_redirects=0)
    assert c.egress.allow_private == ()  # type: ignore[attr-defined]
    assert config.egress.allow_private == ("10.0.0.0/8",)


def test_an_invalid_egress_block_names_its_path_and_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(textwrap.dedent("""
            egress: {allow_private: [169.254.169.254]}
            connectors:
              - name: a
                type: openapi
                spec: a.json
                egress: {allow_hosts: ["bad host"]}
        """))
    text = str(info.value)
    assert "egress.allow_private (line 2)" in text and "allowed by name only" in text
    assert "connectors[0].egress.allow_hosts (line 7)" in text
    assert text.count("169.254.169.254") == 1  # the invalid default is reported once, not per connector


async def test_create_connection_connects_only_to_checked_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam for a client with its own sockets (the MCP connector's HTTP/1.1 client)."""
    accepted: list[str] = []
    arrived = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.get_extra_info("sockname")[0])
        arrived.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    tried: list[Any] = []
    original = loop.create_connection

    async def recording(*args: Any, **kwargs: Any) -> Any:
        tried.append(args[1])
        return await original(*args, **kwargs)

    monkeypatch.setattr(loop, "create_connection", recording)
    dns = FakeDNS({"up.test": ["127.0.0.2", "127.0.0.1"], "meta.test": ["127.0.0.1", "169.254.169.254"]})
    policy = EgressPolicy(EgressConfig(allow_private=["127.0.0.0/8"]), lookup=dns)
    try:
        # 127.0.0.2 refuses the connection (nothing listens there): the next checked address is tried.
        transport, _ = await policy.create_connection(asyncio.Protocol, "up.test", port)
        transport.close()
        await asyncio.wait_for(arrived.wait(), 5)
        assert tried == ["127.0.0.2", "127.0.0.1"]
        with pytest.raises(EgressRefused):
            await policy.create_connection(asyncio.Protocol, "meta.test", port)
        with pytest.raises(EgressRefused):
            await EgressPolicy(lookup=dns).create_connection(asyncio.Protocol, "up.test", port)
        assert tried == ["127.0.0.2", "127.0.0.1"]  # nothing more was even tried
    finally:
        server.close()
        await server.wait_closed()
    assert accepted == ["127.0.0.1"]

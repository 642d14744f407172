"""The README's config reference is a real, valid config that shows the keys an operator looks for,
and the README links only to what a clone has (docs that drift fail the suite)."""

from __future__ import annotations

import re
from pathlib import Path

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

"""The README's config reference is a real, valid config (docs that drift fail the suite)."""

from __future__ import annotations

import re
from pathlib import Path

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
    import yaml

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

"""The top-level ``oauth:`` block: the store a config names, its key, and the cross-section checks
(each error names the path and the line)."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest

from connectors.oauth.port import Grant, GrantKey
from gateway.config import parse_config
from gateway.oauth.config import KEY_ENV, GatewayOAuthConfig, resolve_key
from gateway.oauth.file_store import EncryptedFileTokenStore
from gateway.oauth.redis_store import RedisTokenStore
from gateway.oauth.service import open_token_store
from gateway.protocol.errors import ConfigError

KEY_B64 = base64.b64encode(bytes(range(32))).decode()


def test_the_store_defaults_to_a_file_or_to_the_shared_state_store() -> None:
    config = parse_config("gateway: {name: x}\n")
    assert config.oauth.store_url(config.state.store) == "file:./oauth-tokens.bin"
    shared = parse_config("gateway: {cursor_secret: s}\nstate: {store: 'redis://127.0.0.1:6379/0', "
                          "redis_prefix: 'gw:a'}\n")
    assert shared.oauth.store_url(shared.state.store) == "redis://127.0.0.1:6379/0"
    assert shared.oauth.prefix(shared.state.redis_prefix) == "gw:a:oauth"
    own = parse_config("oauth: {token_store: 'file:/var/lib/gw/t.bin', redis_prefix: p}\n")
    assert own.oauth.store_url("redis://x:1/0") == "file:/var/lib/gw/t.bin" and own.oauth.prefix("gw:st") == "p"


def test_bad_values_are_errors_naming_the_line() -> None:
    cases = {
        "oauth:\n  token_store: 'postgres://db'\n": ("oauth.token_store (line 2)", "file:PATH"),
        "oauth:\n  encryption_key: 'c2hvcnQ='\n": ("oauth.encryption_key (line 2)", "decodes to 5 bytes"),
        "oauth:\n  encryption_key: '!!!not base64!!!'\n": ("oauth.encryption_key (line 2)", "not base64"),
        "oauth:\n  client_metadata_url: 'http://gw.example/client.json'\n":
            ("oauth.client_metadata_url (line 2)", "https://"),
        "oauth:\n  client_metadata_url: 'https://gw.example'\n": ("oauth.client_metadata_url (line 2)", "a path"),
        "oauth:\n  client_metadata_url: 'https://gw.example/mcp'\n":
            ("oauth.client_metadata_url (line 2)", "serves /mcp itself"),
        "oauth:\n  public_url: 'ftp://gw'\n": ("oauth.public_url (line 2)", "http://"),
        "oauth:\n  tokens: x\n": ("oauth.tokens (line 2)", "unknown key"),
    }
    for text, (where, what) in cases.items():
        with pytest.raises(ConfigError) as info:
            parse_config(text)
        assert where in str(info.value) and what in str(info.value), (text, str(info.value))
    # The value of a key is never echoed.
    with pytest.raises(ConfigError) as info:
        parse_config("oauth: {encryption_key: 'c2VjcmV0LXZhbHVl'}\n")
    assert "c2VjcmV0LXZhbHVl" not in str(info.value)
    ok = parse_config("oauth:\n  client_metadata_url: 'http://127.0.0.1:8080/oauth/client.json'\n"
                      f"  encryption_key: '{KEY_B64}'\n  public_url: 'https://gw.example/'\n")
    assert ok.oauth.metadata_path() == "/oauth/client.json" and ok.oauth.public_url == "https://gw.example"
    assert "encryption_key" not in repr(ok.oauth) or KEY_B64 not in repr(ok.oauth)


def test_user_and_exchange_identities_need_downstream_auth() -> None:
    text = ("connectors:\n"
            "  - name: crm\n    type: mcp\n    transport: streamable_http\n    url: https://crm.example/mcp\n"
            "    oauth:\n      identity: user\n      redirect_uri: https://gw.example/oauth/callback\n"
            "  - name: api\n    type: mcp\n    transport: streamable_http\n    url: https://api.example/mcp\n"
            "    oauth:\n      identity: exchange\n")
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    message = str(info.value)
    assert "connectors[0].oauth.identity (line 7): oauth identity user keeps a grant per caller" in message
    assert "connectors[1].oauth.identity (line 14): oauth identity exchange" in message and "auth.jwt" in message
    # API keys give user identities what they need; exchange still needs a JWT.
    with pytest.raises(ConfigError) as info:
        parse_config(text + "auth:\n  api_keys: [{name: a, key: k}]\n")
    assert "connectors[0].oauth.identity (line" not in str(info.value)
    assert "connectors[1].oauth.identity (line 14)" in str(info.value)


def test_the_key_comes_from_config_or_environment_and_is_checked() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_key(GatewayOAuthConfig(), env={})
    assert "oauth.encryption_key" in str(info.value) and KEY_ENV in str(info.value) and "32 bytes" in str(info.value)
    with pytest.raises(ConfigError) as info:
        resolve_key(GatewayOAuthConfig(), env={KEY_ENV: base64.b64encode(b"x" * 16).decode()})
    assert f"{KEY_ENV} decodes to 16 bytes" in str(info.value)
    assert resolve_key(GatewayOAuthConfig(), env={KEY_ENV: KEY_B64}) == bytes(range(32))
    url_safe = base64.urlsafe_b64encode(b"\xff" * 32).decode().rstrip("=")
    assert resolve_key(GatewayOAuthConfig(encryption_key=url_safe), env={}) == b"\xff" * 32


async def test_open_token_store_builds_what_the_config_names(tmp_path: Path, redis_url: str) -> None:
    config = parse_config(f"oauth: {{encryption_key: '{KEY_B64}', token_store: 'file:tokens.bin'}}\n",
                          base_dir=tmp_path)
    store = await open_token_store(config)
    assert isinstance(store, EncryptedFileTokenStore) and store.path == tmp_path / "tokens.bin"
    await store.put(GrantKey("c", "i", "p"), Grant(access_token="t"))
    wrong = parse_config(f"oauth: {{encryption_key: '{base64.b64encode(bytes(32)).decode()}', "
                         "token_store: 'file:tokens.bin'}\n", base_dir=tmp_path)
    with pytest.raises(ConfigError) as info:
        await open_token_store(wrong)
    assert "oauth.token_store" in str(info.value) and "sealed with another key" in str(info.value)

    prefix = f"gw:test:{secrets.token_hex(6)}"
    shared = parse_config(f"gateway: {{cursor_secret: s}}\nstate: {{store: '{redis_url}', redis_prefix: '{prefix}'}}\n"
                          f"oauth: {{encryption_key: '{KEY_B64}'}}\n")
    redis = await open_token_store(shared)
    try:
        assert isinstance(redis, RedisTokenStore) and redis.grants_key == "{" + prefix + ":oauth}:grants"
    finally:
        await redis.client.delete(redis.check_key)
        await redis.close()


async def test_validate_deep_opens_the_token_store(tmp_path: Path) -> None:
    from gateway.oauth.service import probe_token_store

    text = f"oauth: {{encryption_key: '{KEY_B64}', token_store: 'file:tokens.bin'}}\n"
    assert await probe_token_store(parse_config(text, base_dir=tmp_path)) == (True, "opened (file)")
    store = await open_token_store(parse_config(text, base_dir=tmp_path))
    await store.put(GrantKey("c", "i", "p"), Grant(access_token="t"))
    other = base64.b64encode(secrets.token_bytes(32)).decode()
    ok, detail = await probe_token_store(parse_config(text.replace(KEY_B64, other), base_dir=tmp_path))
    assert not ok and "sealed with another key" in detail and other not in detail

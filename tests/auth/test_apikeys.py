"""API keys: hashed, plain (from the environment) and secret-file keys; constant-time lookup."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gateway.auth import Authenticator, Unauthenticated
from gateway.config import parse_config
from gateway.protocol.errors import ConfigError


def _config(tmp_path: Path) -> Authenticator:
    (tmp_path / "key.txt").write_text("file-secret\n")
    text = f"""
auth:
  api_keys:
    - {{name: ops-bot, key_sha256: "{hashlib.sha256(b'hashed-secret').hexdigest()}", groups: [ops]}}
    - {{name: ci, key: "${{CI_GATEWAY_KEY}}", groups: [ci]}}
    - {{name: batch, key_file: key.txt}}
"""
    cfg = parse_config(text, base_dir=tmp_path, env={"CI_GATEWAY_KEY": "env-secret"})
    return Authenticator(cfg.auth, cfg.base_dir)


async def test_each_key_kind_maps_to_its_principal(tmp_path: Path) -> None:
    auth = _config(tmp_path)
    for token, name, groups in (("hashed-secret", "ops-bot", {"ops"}), ("env-secret", "ci", {"ci"}),
                                ("file-secret", "batch", set())):
        principal = await auth.authenticate({"Authorization": f"Bearer {token}"})
        assert (principal.name, set(principal.groups), principal.kind) == (name, groups, "api_key")


async def test_refusals(tmp_path: Path) -> None:
    auth = _config(tmp_path)
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"},
                    {"Authorization": "Bearer hashed-secretX"}):
        with pytest.raises(Unauthenticated) as info:
            await auth.authenticate(headers)
        assert info.value.status == 401 and "resource_metadata=" in info.value.www_authenticate


async def test_auth_off_is_anonymous() -> None:
    auth = Authenticator(parse_config("gateway: {name: x}").auth)
    assert (await auth.authenticate({})).name == "anonymous"


def test_bad_key_config(tmp_path: Path) -> None:
    # What the config alone tells fails at load (validate catches it, serve starts nothing) ...
    for entry, message in (('{name: a}', "exactly one of"), ('{name: a, key: x, key_file: k.txt}', "exactly one of"),
                           ('{name: a, key: x, key_sha256: "00"}', "64 hexadecimal characters"),
                           ('{name: a, key_sha256: "zz"}', "64 hexadecimal characters")):
        with pytest.raises(ConfigError, match=message):
            parse_config(f"auth: {{api_keys: [{entry}]}}", base_dir=tmp_path)
    # ... what needs the key file fails when the authenticator is built, before any connector starts.
    cfg = parse_config("auth: {api_keys: [{name: a, key_file: missing.txt}]}", base_dir=tmp_path)
    with pytest.raises(ConfigError, match="cannot read"):
        Authenticator(cfg.auth, tmp_path)
    (tmp_path / "b.key").write_text("same\n")
    cfg = parse_config("auth: {api_keys: [{name: a, key: same}, {name: b, key_file: b.key}]}", base_dir=tmp_path)
    with pytest.raises(ConfigError, match="the same key as api key 'a'"):
        Authenticator(cfg.auth, tmp_path)

"""gateway.yaml loading: the issue's keys as written, ${ENV} interpolation, and errors that name
the path and the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from connectors.static.config import StaticConfig
from gateway.config import GatewayConfig, interpolate, load_config, parse_config
from gateway.protocol.errors import ConfigError

ISSUE_EXAMPLE = """\
gateway:
  name: ops-gateway
  page_size: 50                # listings page size
  http: {host: 127.0.0.1, port: 8080}
connectors:
  - name: team                 # unique; default prefix "team_"
    type: static               # static | openapi | sql | mcp
    prefix: ""                 # optional
    prompts:
      - name: summarize
        description: Summarize a text
        arguments: [{name: text, description: The text, required: true}]
        messages: [{role: user, text: "Summarize: {text}"}]
    resources:
      - {uri: "docs://runbook", name: runbook, mime_type: text/markdown, text: "# Runbook"}
      - {uri: "docs://logo", name: logo, mime_type: image/png, path: ./logo.png}   # binary → blob
"""


def _error(text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(textwrap.dedent(text), env=env or {})
    return info.value


def test_the_issue_example_is_accepted_as_written() -> None:
    config = parse_config(ISSUE_EXAMPLE, base_dir="/srv", env={})
    assert config.gateway.name == "ops-gateway" and config.gateway.page_size == 50
    assert config.gateway.http.host == "127.0.0.1" and config.gateway.http.port == 8080
    [team] = config.connectors
    assert isinstance(team, StaticConfig)
    assert team.public_prefix == "" and team.prompts[0].arguments[0].required
    assert team.resources[1].path == "./logo.png"
    assert config.base_dir == "/srv"


def test_quickstart_validates() -> None:
    config = load_config(Path(__file__).resolve().parent.parent / "examples" / "quickstart.yaml")
    assert config.connectors[0].name == "team"
    assert Path(config.base_dir).name == "examples"


def test_defaults_and_prefixes() -> None:
    config = parse_config("connectors:\n  - {name: a, type: static}\n  - {name: b, type: static, prefix: 'x.'}\n", env={})
    assert config.gateway.page_size == 50 and config.gateway.http.port == 8080
    assert [c.public_prefix for c in config.connectors] == ["a_", "x."]
    assert parse_config("gateway: {name: g}\n", env={}).connectors == ()


def test_env_interpolation() -> None:
    text = """\
    gateway:
      name: ${NAME}
      http: {port: "${PORT:-9090}", host: "${HOST:-0.0.0.0}"}
      instructions: "literal $${NOT_A_VAR} and ${EMPTY:-fallback}"
    """
    config = parse_config(textwrap.dedent(text), env={"NAME": "from-env", "EMPTY": ""})
    assert config.gateway.name == "from-env"
    assert config.gateway.http.port == 9090 and config.gateway.http.host == "0.0.0.0"
    assert config.gateway.instructions == "literal ${NOT_A_VAR} and fallback"
    config = parse_config(textwrap.dedent(text), env={"NAME": "n", "PORT": "1234", "EMPTY": "set"})
    assert config.gateway.http.port == 1234 and config.gateway.instructions.endswith("and set")  # type: ignore[union-attr]
    assert interpolate({"a": ["${X}-${Y:-y}"]}, {"X": "x"}) == {"a": ["x-y"]}


def test_missing_env_var_names_path_and_line() -> None:
    err = _error("""\
    gateway:
      name: ok
    connectors:
      - name: a
        type: static
        prompts:
          - {name: p, messages: [{text: "${SECRET_TEXT}"}]}
    """)
    assert err.path == "connectors[0].prompts[0].messages[0].text"
    assert err.line == 7
    assert "SECRET_TEXT" in str(err) and "connectors[0].prompts[0].messages[0].text (line 7)" in str(err)


def test_unknown_key_names_path_and_line() -> None:
    err = _error("""\
    gateway:
      name: g
    connectors:
      - name: first
        type: static
      - name: second
        type: static
        spec: ./nope.yaml
    """)
    assert err.path == "connectors[1].spec" and err.line == 8
    assert str(err) == "connectors[1].spec (line 8): unknown key"
    top = _error("gateway:\n  name: g\n  pagesize: 3\n")
    assert top.path == "gateway.pagesize" and top.line == 3


def test_wrong_values_name_path_and_line() -> None:
    err = _error("""\
    gateway:
      page_size: 0
    """)
    assert err.path == "gateway.page_size" and err.line == 2
    err = _error("""\
    connectors:
      - name: a
        type: static
        resources:
          - {uri: "x://1", name: one, text: hi}
          - {uri: "x://2", name: two}
    """)
    assert err.path.startswith("connectors[0].resources[1]") and err.line == 6
    assert "exactly one of text or path" in str(err)
    err = _error("connectors:\n  - name: 'bad name!'\n    type: static\n")
    assert err.path == "connectors[0].name" and err.line == 2


def test_several_errors_are_all_reported() -> None:
    err = _error("""\
    gateway:
      page_size: -1
    connectors:
      - {name: a, type: static, bogus: 1}
      - {name: b, type: nosuchkind}
    """)
    text = str(err)
    assert "connectors[0].bogus (line 4): unknown key" in text
    assert "connectors[1].type (line 5): unknown connector type 'nosuchkind'" in text
    assert "gateway.page_size (line 2)" in text
    assert len(err.errors) == 3  # type: ignore[attr-defined]


def test_duplicate_connector_names() -> None:
    err = _error("""\
    connectors:
      - {name: twin, type: static}
      - name: other
        type: static
      - name: twin
        type: static
    """)
    assert err.path == "connectors[2].name" and err.line == 5
    assert "duplicate connector name 'twin'" in str(err) and "connectors[0]" in str(err)


def test_structural_errors() -> None:
    assert "empty" in str(_error(""))
    assert _error("- a\n- b\n").line == 1
    bad_yaml = _error("gateway:\n  name: [unclosed\n")
    assert "invalid YAML" in str(bad_yaml) and bad_yaml.line is not None
    assert _error("connectors: {a: 1}\n").path == "connectors"
    assert _error("connectors:\n  - just-a-string\n").path == "connectors[0]"


def test_load_config_reports_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_models_are_frozen_and_comparable() -> None:
    a = parse_config(ISSUE_EXAMPLE, env={})
    b = parse_config(ISSUE_EXAMPLE, env={})
    assert a == b and a.connectors[0] == b.connectors[0]
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type is an implementation detail
        a.gateway.page_size = 3  # type: ignore[misc]
    assert isinstance(a, GatewayConfig) and a.connector("team") is a.connectors[0] and a.connector("x") is None

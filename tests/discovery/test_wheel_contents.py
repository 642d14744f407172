"""The labelled task sets and their helpers stay out of the wheel (issue 28): the gateway ships
no knowledge of how it is measured."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_takes_the_gateway_and_connectors_only_and_python_only() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    find = config["packages"]["find"]
    assert config["include-package-data"] is False  # no data file found in a package is shipped
    for package in ("tests", "tests.discovery", "tests.data", "bench"):
        shipped = any(fnmatch(package, p) for p in find["include"]) and \
            not any(fnmatch(package, p) for p in find.get("exclude", []))
        assert not shipped, package
    assert "package-data" not in config


def test_no_labelled_set_or_its_helpers_in_the_shipped_packages() -> None:
    for root in ("gateway", "connectors"):
        for path in (REPO / root).rglob("*"):
            assert path.name != "labelled.py", path
            assert not (path.suffix in (".yaml", ".yml") and "tasks" in path.name), path

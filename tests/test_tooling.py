"""Strict tooling as tests: ruff everywhere, mypy --strict on the pure core, no import cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def test_ruff_is_clean() -> None:
    proc = subprocess.run([str(BIN / "ruff"), "check", "gateway", "connectors", "tests", "bench"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_on_gateway_and_connectors() -> None:
    """``mypy --strict`` (pyproject.toml: strict, with the pydantic plugin) on all shipped code."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "gateway", "connectors"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Every import of the module: at module level, under ``TYPE_CHECKING`` and inside functions
    alike (a type-only or deferred cycle is still a design cycle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name in known and name != module}


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for root in ("gateway", "connectors") for p in (REPO / root).rglob("*.py")}
    known = set(files)
    return {mod: _imports(path, mod, known) for mod, path in files.items()}


def test_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                dfs(nxt)
        stack.pop()
        state[node] = 2

    for mod in sorted(graph):
        if mod not in state:
            dfs(mod)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# What a connector may import of the gateway: the sans-I/O protocol and the call context.
_CONNECTOR_MAY_IMPORT = ("gateway.protocol", "gateway.context")


def test_connectors_import_only_the_contract() -> None:
    """Connectors are configured, they do not configure: no import of the app, its config, its
    telemetry or its filters (the instrumentation port is ``connectors.instrumentation``)."""
    bad = sorted(
        f"{mod} -> {dep}"
        for mod, deps in _graph().items() if mod.startswith("connectors")
        for dep in deps
        if dep.startswith("gateway") and not any(dep == p or dep.startswith(p + ".") for p in _CONNECTOR_MAY_IMPORT)
    )
    assert not bad, "connectors importing the gateway beyond its contract:\n" + "\n".join(bad)


def test_cycle_check_sees_type_only_and_deferred_imports(tmp_path: Path) -> None:
    """The checker itself: an import under TYPE_CHECKING and one inside a function both count."""
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    known = {"a", "b"}
    assert _imports(tmp_path / "a.py", "a", known) == {"b"}
    assert _imports(tmp_path / "b.py", "b", known) == {"a"}

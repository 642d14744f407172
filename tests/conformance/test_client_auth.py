"""The conformance suite's client ``auth/*`` scenarios against the gateway's MCP connector with an
``oauth`` block (:mod:`tests.conformance.auth_client`: a gateway chaining the scenario's server,
driven by an SDK client; the broker completes authorizations as a person's browser would).

Both requirement sets of the pinned 0.2.0-alpha.12 (``conformance-next``): the 14 ``auth/*``
client scenarios of 2025-11-25 (run at the 2025-11-25 wire) and the 25 of 2026-07-28 (at its wire),
plus the ``client-credentials-basic`` and ``client-credentials-jwt`` extensions; and the same 14
2025-11-25 scenarios as the stable 0.1.16 runs them. Every one must be
clean: no expected-failures list. A rejection scenario (``resource-mismatch``, ``iss-wrong-issuer``,
``metadata-issuer-mismatch`` ...) counts only beside its positive counterpart, which passes in the
same run (a client that never authorised would pass the rejections alone).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.conformance import harness

HERE = Path(__file__).resolve().parent
AUTH_CLIENT = f"{sys.executable} {HERE / 'auth_client.py'}"
EXTENSIONS = ("auth/client-credentials-basic", "auth/client-credentials-jwt")
# Each rejection scenario, and the scenario showing the same client does authorise when all is well.
POSITIVE = {"auth/resource-mismatch": "auth/metadata-default", "auth/iss-wrong-issuer": "auth/iss-supported",
            "auth/iss-supported-missing": "auth/iss-supported", "auth/iss-unexpected": "auth/iss-not-advertised",
            "auth/iss-normalized": "auth/iss-supported", "auth/metadata-issuer-mismatch": "auth/metadata-default",
            "auth/scope-retry-limit": "auth/scope-step-up"}


def auth_scenarios(revision: str) -> list[str]:
    return sorted(n for n in harness.requirements(revision).client if n.startswith("auth/"))


async def run_all(scenarios: list[str], tmp_path: Path, spec_version: str | None,
                  package: harness.Package = harness.NEXT) -> dict[str, harness.Run]:
    gate = asyncio.Semaphore(2)  # each run starts a gateway and two servers

    async def one(name: str) -> harness.Run:
        out = tmp_path / f"{spec_version}-{name.replace('/', '_')}"
        out.mkdir()
        # An extension is on no spec timeline: it runs without a version filter.
        version = None if name in EXTENSIONS else spec_version
        async with gate:
            return await harness.run_client(AUTH_CLIENT, out, scenario=name, spec_version=version, timeout=150,
                                            package=package)

    return dict(zip(scenarios, await asyncio.gather(*(one(n) for n in scenarios)), strict=True))


def _verdicts(runs: dict[str, harness.Run]) -> tuple[list[str], str]:
    clean = [name for name, run in runs.items()
             if list(run.scenarios) == [name] and run.scenarios[name].passed and run.returncode == 0]
    report = "\n".join(f"{name}: {run.report() or run.output[-2000:]}" + (
        "" if name in clean else f" (exit {run.returncode}){run.output[-1500:]}") for name, run in runs.items())
    return clean, report


@pytest.mark.timeout(900)
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_client_auth_requirement_set(revision: str, tmp_path: Path) -> None:
    scenarios = auth_scenarios(revision)
    assert len(scenarios) == {"2025-11-25": 14, "2026-07-28": 25}[revision]
    if revision == "2026-07-28":
        scenarios += list(EXTENSIONS)
    runs = await run_all(scenarios, tmp_path, revision)
    clean, report = _verdicts(runs)
    print(f"conformance {harness.NEXT.version} client auth scenarios of {revision} against the MCP connector: "
          f"{len(clean)}/{len(scenarios)} clean\n{report}")
    for rejection, positive in POSITIVE.items():
        if rejection in runs:
            assert positive in clean, f"{rejection} counts only beside {positive}, which failed\n{report}"
    assert sorted(clean) == sorted(scenarios), report


@pytest.mark.timeout(900)
async def test_client_auth_scenarios_of_the_stable_suite(tmp_path: Path) -> None:
    """The same 14 2025-11-25 scenarios as 0.1.16 (``@modelcontextprotocol/conformance``) runs them."""
    scenarios = auth_scenarios("2025-11-25")
    runs = await run_all(scenarios, tmp_path, None, harness.STABLE)
    clean, report = _verdicts(runs)
    print(f"conformance {harness.STABLE.version} client auth scenarios of 2025-11-25 against the MCP connector: "
          f"{len(clean)}/{len(scenarios)} clean\n{report}")
    assert sorted(clean) == sorted(scenarios), report

"""Pure policy rules: rate parsing and GCRA token-bucket math (:mod:`.rates`), allow/deny glob
matching over public names (:mod:`.access`), the circuit breaker around a remote backend
(:mod:`.breaker`), the caps on server→client requests (:mod:`.server_requests`) and on the
notifications relayed about one call (:mod:`.relay`). No I/O, no
asyncio: tested with plain values and shared by the rate-limit backends, the access filter and the
sessions."""

from __future__ import annotations

from .access import AccessPolicy, CompiledRule, compile_globs
from .breaker import CircuitBreaker
from .rates import Decision, Rate, gcra_check, parse_rate
from .relay import RelayBudget, Verdict
from .server_requests import Refusal, ServerRequestBudget

__all__ = ["AccessPolicy", "CompiledRule", "compile_globs", "CircuitBreaker", "Decision", "Rate", "gcra_check",
           "parse_rate", "Refusal", "ServerRequestBudget", "RelayBudget", "Verdict"]

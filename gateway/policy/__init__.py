"""Pure policy rules: rate parsing and GCRA token-bucket math (:mod:`.rates`), allow/deny glob
matching over public names (:mod:`.access`). No I/O, no asyncio: tested with plain values and shared
by the memory and Redis rate-limit backends and by the access filter."""

from __future__ import annotations

from .access import AccessPolicy, CompiledRule, compile_globs
from .rates import Decision, Rate, gcra_check, parse_rate

__all__ = ["AccessPolicy", "CompiledRule", "compile_globs", "Decision", "Rate", "gcra_check", "parse_rate"]

"""Public names: ``{prefix}{local}``, made portable, shortened and told apart deterministically.

The rule (documented in ``docs/architecture.md``, "Names"; a reader can derive every name from the
connector's prefix and its local name, the *original* ``O = prefix + local``):

1. **Characters.** Portable (the default, ``names: portable`` on a connector): every character
   outside ``A-Z a-z 0-9 _ -`` becomes ``_``, and a name that does not start with a letter or
   ``_`` gets a ``_`` in front, so every name matches ``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``: the
   function-name rules of the major model APIs (OpenAI's, Gemini's), which a client passing
   names through applies. Upstream spelling (``names: upstream``): only characters MCP itself
   rejects (outside ``A-Z a-z 0-9 _ . -``) become ``_``; dots and a leading digit stay.
2. **Length.** A name longer than 64 characters keeps its first 55, then ``_`` and the first 8 hex
   digits of the SHA-256 of ``O`` (UTF-8): ``printf %s "$O" | sha256sum | cut -c1-8``.
3. **Clashes.** Two originals of one connector that step 1 maps to one name (``a.b`` and ``a_b``)
   stay distinct: the original already spelled that way keeps the name, every other one ends in
   ``_`` and the same 8 hex digits of its own ``O`` (after at most 55 characters). Which name an
   original gets never depends on the order the connector listed them in.

The same input always gives the same name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

__all__ = ["NAME_RE", "PORTABLE_NAME_RE", "MAX_NAME", "sanitize", "public_name", "public_names",
           "is_valid_name", "is_portable_name", "name_suffix"]

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # what MCP clients accept
PORTABLE_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")  # what model APIs accept too
MAX_NAME = 64
_KEEP = 55  # characters kept before "_" + 8 hex digits: 55 + 1 + 8 = 64
_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_UNPORTABLE = re.compile(r"[^A-Za-z0-9_-]")
_GOOD_FIRST = re.compile(r"[A-Za-z_]")


def is_valid_name(name: str) -> bool:
    return bool(NAME_RE.match(name))


def is_portable_name(name: str) -> bool:
    return bool(PORTABLE_NAME_RE.match(name))


def sanitize(name: str) -> str:
    """Replace characters MCP clients reject; never returns an empty string."""
    cleaned = _BAD.sub("_", name)
    return cleaned or "_"


def name_suffix(original: str) -> str:
    """The 8 hex digits a shortened or told-apart name ends in: SHA-256 of *original* (UTF-8)."""
    return hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _mapped(original: str, portable: bool) -> str:
    if not portable:
        return sanitize(original)
    cleaned = _UNPORTABLE.sub("_", original) or "_"
    return cleaned if _GOOD_FIRST.match(cleaned) else "_" + cleaned


def _suffixed(mapped: str, original: str) -> str:
    return f"{mapped[:_KEEP]}_{name_suffix(original)}"


def public_name(prefix: str, local: str, portable: bool = True) -> str:
    """``prefix + local`` by steps 1 and 2 of the module's rule (one name alone: no clashes)."""
    original = prefix + local
    mapped = _mapped(original, portable)
    return mapped if len(mapped) <= MAX_NAME else _suffixed(mapped, original)


def public_names(prefix: str, locals_: Sequence[str], portable: bool = True) -> list[str]:
    """The public names of one connector's *locals_* (distinct), in their order, by the whole rule:
    two locals that map to one name are told apart (step 3)."""
    names = [public_name(prefix, local, portable) for local in locals_]
    count: dict[str, int] = {}
    for name in names:
        count[name] = count.get(name, 0) + 1
    if len(count) == len(names):
        return names
    out = []
    for local, name in zip(locals_, names, strict=True):
        original = prefix + local
        # A shortened name already ends in its original's digest: only a kept name can clash.
        out.append(_suffixed(name, original) if count[name] > 1 and name != original else name)
    return out

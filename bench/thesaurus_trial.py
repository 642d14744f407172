"""Does a catalog-gated API thesaurus raise tool-search recall? (issue 28 trial; not served)

The expansion source is an *API thesaurus* written by an independent author who saw neither the
ranker nor any task set (``bench/data/api-thesaurus.txt``, provenance in
``bench/data/api-thesaurus.md``: ``term: target, target, ...``, the term as people type it, the
targets as API documentation says it, most likely first; ``#`` comments and section headers; a
term may repeat in several domain sections: its targets are then interleaved by rank, each section's first before any second).

A thesaurus term is matched on the query's stemmed words (Snowball, as the index stems), longest
first over the whole query (3 words, then 2, then 1; ``phrases`` off: single words only); a single
word counts only when the parser kept it in a concept (not a stop word or a value), a phrase when
one of its words is. A matched term whose concept the catalog lacks or has rarely (the most
frequent of the term itself and the phrases of the concept the parser made of exactly those words,
in at most ``rare`` tools) gets the targets that occur in the catalog (the index's own document
frequency: in at least one tool, at most half of them; not already a phrase of the query) — at
most ``most`` of them, in the thesaurus's order — as a concept weighing ``alpha`` × its IDF (the
concept itself when none of its phrases is in the catalog, else an extra concept beside it, as
``bench/wordnet_trial.py`` does). ``known`` > 0 expands the terms the catalog *does* have too, as
an extra concept at ``known`` × its IDF. ``dense`` appends every kept target to the embedded query
text as well (the dense side re-encoded with the served local model).

The replay, the leave-one-out report and the monkeypatches are ``bench/wordnet_trial.py``'s (its
``rerun``, ``report``, ``measurement_report``, ``table``): the fusion is replayed with the served
constants; nothing in the gateway's code path changes.

Run (after ``bench/fusion_fit.py --cache /tmp/thes_fusion.pkl`` made the cache of the served tasks)::

    PYTHONPATH=$PWD .venv/bin/python bench/thesaurus_trial.py --selftest
    PYTHONPATH=$PWD .venv/bin/python bench/thesaurus_trial.py --cache /tmp/thes_fusion.pkl [--thesaurus PATH]
        [--table NAME | --show NAME | --diff NAME | --measurement NAME]

It prints, per variant, the tuning sets' lexical and fused found @1/@5 (core: the 240 person+model
queries of stripe, twilio, opsgenie and vikunja; GitHub: its tuning sets) against the served
ranking, then leave-one-catalog-out over the core and leave-one-set-out over GitHub's tuning sets
(the variant, or none, best on the others by fusion_fit's merit, measured on the held-out one).
``--measurement NAME`` prints the measurement-only aggregates of the one variant NAME
(before/after; never a query). ``--diff NAME`` lists the tuning queries whose fused top 5 found
changes under NAME, with the expansion made (tuning sets only).

Result at 8cddbce with the thesaurus of 2026-11-27 (3,028 term lines, 2,544 terms; sha256 e3f96919…;
found @1/@5 over the 240 core person+model queries and GitHub's 638 tuning queries, gaps = queries
below the better of lexical and dense): served fused core 129/192/3, GitHub 508/624/0; lexical
alone 97/174 and 491/619. In sample the lacking-terms-only variants with a low alpha (0.1-0.25),
rarity 2-10 and one target per term reach core 131-133/199-200 with GitHub unchanged @5
(506-508/624); expanding terms the catalog has (``known``) adds @1 on the core but costs GitHub up
to 50 @1; the dense side lowers the fused ranking (as WordNet's did). Held out, one variant chosen
on all the other tuning groups (core and GitHub together): both rounds 131/199/1 (GitHub
507/624/0; chosen on all: ``a0.1-r10-m1-infl``), round 1's grid alone 126/195/7; core-only
leave-one-out 131/198/6 (round 1) and 130/197/4 (both), with variants that cost GitHub.
Measurement-only, ``a0.1-r10-m1-infl``: fused +1 @1 and +1 @5 over the 240 queries of
digitalocean, box, slack and sendgrid (blind-5 unchanged); lexical alone +4 @1, +5 @5. Not served:
+7 held out only in the grid extended after round 1's in-sample table, +3 in the grid fixed
beforehand, and the measurement-only sets do not confirm it (issue 28's note of this session).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import fusion_fit as ff  # noqa: E402
import wordnet_trial as wt  # noqa: E402

from gateway.discovery.concepts import Concept, Query  # noqa: E402
from gateway.discovery.fillers import STOPWORDS  # noqa: E402
from gateway.discovery.lexicon import inflections  # noqa: E402
from gateway.discovery.words import split_words, stem  # noqa: E402

THESAURUS = REPO / "bench" / "data" / "api-thesaurus.txt"
MARK = "~th"  # a lacking term's expansion concept (IDF × alpha)
KNOWN = "~thk"  # a known term's expansion concept (IDF × known)
LONGEST = 3  # words in the longest term matched


def _stems(text: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in split_words(text))


class Thesaurus:
    """``term: target, ...`` lines: term → targets (sections interleaved by rank), keyed two ways:
    by the term's stems (``terms``) and by its words (``words``)."""

    def __init__(self, text: str) -> None:
        per: dict[tuple[str, ...], list[list[str]]] = {}
        self.skipped = 0  # terms longer than LONGEST words
        self.lines = 0
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if ":" not in line:
                continue
            term, _, rest = line.partition(":")
            key = tuple(split_words(term))
            targets = [t.strip().lower() for t in rest.split(",") if t.strip()]
            if not key or not targets:
                continue
            self.lines += 1
            if len(key) > LONGEST:
                self.skipped += 1
                continue
            per.setdefault(key, []).append(targets)
        self.words: dict[tuple[str, ...], list[str]] = {}
        by_stems: dict[tuple[str, ...], list[list[str]]] = {}
        for key, lists in per.items():
            self.words[key] = _interleave(lists, key)
            by_stems.setdefault(tuple(stem(w) for w in key), []).extend(lists)
        # Terms that share their stems ("custom", "customer") share their targets here.
        self.terms = {key: _interleave(lists, key) for key, lists in by_stems.items()}

    @classmethod
    def load(cls, path: Path) -> Thesaurus:
        return cls(path.read_text(encoding="utf-8"))

    def matches(self, words: Sequence[str], phrases: bool, by_stem: bool) -> list[tuple[int, int, list[str]]]:
        """(start, end, targets) of the terms in *words* (the query's, lower case): longest first
        over the whole query, not overlapping; *by_stem*: on the words' Snowball stems, else on the
        words or their whole inflections undone (``lexicon.inflections``: "invoices" → invoice)."""
        used = [False] * len(words)
        stems = [stem(w) for w in words]
        forms = [[w, *inflections(w)] for w in words]
        out = []
        for n in range(LONGEST if phrases else 1, 0, -1):
            for i in range(len(words) - n + 1):
                if any(used[i:i + n]):
                    continue
                if by_stem:
                    targets = self.terms.get(tuple(stems[i:i + n]))
                else:
                    targets = next((self.words[k] for k in itertools.product(*forms[i:i + n]) if k in self.words),
                                   None)
                if targets is not None:
                    out.append((i, i + n, targets))
                    used[i:i + n] = [True] * n
        return sorted(out)


def _interleave(lists: list[list[str]], key: tuple[str, ...]) -> list[str]:
    """The targets of a term's lines, each line's first before any second; not the term itself."""
    merged = [t for rank in itertools.zip_longest(*lists) for t in rank if t is not None]
    own = tuple(stem(w) for w in key)
    return [t for t in dict.fromkeys(merged) if _stems(t) != own]


@dataclass(frozen=True)
class Variant:
    alpha: float = 0.5
    rare: int = 0  # a term counts as lacking when it (its concept) is in at most this many tools
    most: int = 3  # at most this many targets per term
    known: float = 0.0  # > 0: terms the catalog has are expanded too, at this share of the IDF
    phrases: bool = True  # terms of 2-3 words are matched (longest first)
    dense: bool = False  # the targets are appended to the embedded query text too
    by_stem: bool = True  # terms matched on stems (else on words, whole inflections undone)

    @property
    def name(self) -> str:
        return (f"a{self.alpha}-r{self.rare}-m{self.most}" + (f"-k{self.known}" if self.known else "")
                + ("" if self.phrases else "-single") + ("" if self.by_stem else "-infl")
                + ("-dense" if self.dense else ""))


class Expander:
    """Expands a parsed query against the index being searched (wordnet_trial.rerun's protocol)."""

    def __init__(self, thesaurus: Thesaurus) -> None:
        self.thesaurus = thesaurus
        self.variant: Variant | None = None
        self.current: Any = None  # the SearchIndex being searched
        self.last: list[str] = []  # the targets added to the query being searched
        self.made: list[tuple[str, bool, list[str]]] = []  # (term, known, targets) of the last query

    def alpha_of(self, concept: Concept) -> float | None:
        v = self.variant
        if v is None:
            return None
        if concept.said.endswith(KNOWN):
            return v.known
        return v.alpha if concept.said.endswith(MARK) else None

    def __call__(self, query: Query) -> Query:
        v, idx = self.variant, self.current
        self.made = []
        if v is None or idx is None:
            return query
        return self.expand(query, v, idx)

    def expand(self, query: Query, v: Variant, idx: Any) -> Query:
        common = idx._len // 2
        text = split_words(query_text_of(query))
        words = [stem(w) for w in text]
        concepts = list(query.concepts)
        usable = [k for k, c in enumerate(concepts)
                  if not c.answer and not c.said.startswith("(") and c.said not in STOPWORDS]
        said = {k: _stems(concepts[k].said) for k in usable}
        in_concepts = {w for k in usable for w in said[k]}
        asked = {_stems(p) for c in concepts for p in c.phrases}
        extra: list[Concept] = []
        for i, j, listed in self.thesaurus.matches(text, v.phrases, v.by_stem):
            span = tuple(words[i:j])
            if not any(w in in_concepts for w in span):
                continue  # a stop word or a value, not something asked for
            own = next((k for k in usable if said[k] == span), None)
            term = " ".join(span)
            if own is None and j - i == 1:
                continue  # one word of a longer concept: that concept is what was asked
            dfs = [idx._df(term)] + ([idx._df(p) for p in concepts[own].phrases] if own is not None else [])
            lacking = max(dfs) <= v.rare
            if not lacking and not v.known:
                continue
            targets = [t for t in listed if t not in STOPWORDS and _stems(t) not in asked and _stems(t) != span
                       and 0 < idx._df(t) <= common][:v.most]
            if not targets:
                continue
            asked |= {_stems(t) for t in targets}
            self.made.append((term, not lacking, targets))
            self.last += [t for t in targets if t not in self.last]
            if lacking and own is not None and all(idx._df(p) == 0 for p in concepts[own].phrases):
                c = concepts[own]
                concepts[own] = Concept(c.said + MARK, (*c.phrases, *targets), c.participle)
            else:
                extra.append(Concept(term + (MARK if lacking else KNOWN), tuple(targets)))
        if not self.made:
            return query
        return replace(query, concepts=tuple(concepts + extra))


# The query text being parsed: wordnet_trial's patched parse hands the Query only, so the text is
# recorded by a wrapper around the original parse (below).
_TEXT: list[str] = [""]


def query_text_of(query: Query) -> str:
    return _TEXT[0]


_orig_parse = wt._parse


def _parse_recording(text: str, *args: Any, **kwargs: Any) -> Query:
    _TEXT[0] = text
    return _orig_parse(text, *args, **kwargs)


wt._parse = _parse_recording  # wordnet_trial's patched parse calls wt._parse, then the expander


def grid() -> list[Variant]:
    """Round 1: alpha x rarity x targets per term x known terms (off, 0.1, 0.25) x phrases on/off x
    matching on stems or on words (lexical only); then the dense side on the lacking-terms-only
    variants. Round 2 (after round 1's in-sample table: known terms and single words cost GitHub,
    the lowest alpha and rarity 2 did best): lower alphas and higher rarities, phrases on, lacking
    terms only, lexical and dense."""
    return list(dict.fromkeys(round1() + round2()))


def round1() -> list[Variant]:
    out = [Variant(a, r, m, k, p, False, s) for a, r, m, k, p, s in itertools.product(
        (0.25, 0.5, 1.0), (0, 2), (1, 2, 3), (0.0, 0.1, 0.25), (True, False), (True, False))]
    return out + [Variant(a, r, m, 0.0, True, True, s) for a, r, m, s in itertools.product(
        (0.25, 0.5, 1.0), (0, 2), (1, 3), (True, False))]


def round2() -> list[Variant]:
    return [Variant(a, r, m, 0.0, True, d, s) for a, r, m, s, d in itertools.product(
        (0.1, 0.15, 0.25), (2, 5, 10), (1, 3), (True, False), (False, True))]


def joint(got: dict[Any, list[ff.Row]], variants: Sequence[Variant]) -> None:
    """Leave one tuning group out (each core catalog, each GitHub set), the variant (or none)
    chosen on all the other groups together, core and GitHub: one variant must serve both."""
    def group(r: ff.Row) -> str:
        return r.catalog if r.catalog in ff.CORE else r.name

    options: list[Variant | None] = [None, *variants]
    names = list(dict.fromkeys(group(r) for r in got[None]))
    merits = {o: {g: wt.merit([r for r in got[o] if group(r) == g]) for g in names} for o in options}
    total = {o: sum(m.values()) for o, m in merits.items()}
    held: dict[str, list[ff.Row]] = {"core": [], "GitHub": []}
    print("\njoint leave one out (chosen on all other core catalogs and GitHub sets) → held out (found @1, @5, gaps)")
    for g in names:
        best = max(options, key=lambda o: (total[o] - merits[o][g], o is None))
        rows_g = [r for r in got[best] if group(r) == g]
        held["core" if g in ff.CORE else "GitHub"] += rows_g
        print(f"  {g:22} {best.name if best else 'served':36} "
              f"{ff.totals([ff.counts(r, ff.served(wt.CALIBRATION)) for r in rows_g])}")
    for label, rows in held.items():
        base = [r for r in got[None] if (group(r) in ff.CORE) == (label == "core")]
        print(f"  {label} held-out total {ff.totals([ff.counts(r, ff.served(wt.CALIBRATION)) for r in rows])}; "
              f"served {ff.totals([ff.counts(r, ff.served(wt.CALIBRATION)) for r in base])}; lexical alone "
              f"{wt.lexical_totals(rows)} (served {wt.lexical_totals(base)})")
    best = max(options, key=lambda o: (total[o], o is None))
    print(f"  chosen on all tuning groups: {best.name if best else 'served'} (merit {total[best]:.0f}, "
          f"served {total[None]:.0f})")


def selftest() -> None:
    """A tiny catalog, a tiny thesaurus and a few queries: what the expansion adds, and the ranking
    it changes (no gateway, no task set, no WordNet)."""
    from gateway.discovery import SearchIndex, ToolDoc

    idx = SearchIndex()
    idx.sync([ToolDoc("deprovision_server", "Deprovision a server", "Deprovisions and destroys a server."),
              ToolDoc("list_servers", "List servers", "Lists the servers of the account."),
              ToolDoc("create_server", "Create a server", "Provisions a new server."),
              ToolDoc("refund_charge", "Create a refund", "Refunds a charge to the customer."),
              ToolDoc("get_balance", "Get the balance", "The account's balance."),
              ToolDoc("configure_server", "Configure a server", "Sets a server's options.")])
    th = Thesaurus("# general\nblow away: destroy, deprovision, delete\nnuke: purge, deprovision\n"
                   "# money\nmoney back: refund, reimburse\nnuke: destroy\n"
                   "server: server, machine\nfoo bar baz qux: nothing\ncustom: configure\n")
    assert th.skipped == 1 and th.terms[("nuke",)] == ["purge", "destroy", "deprovision"], th.terms
    ex = Expander(th)
    ex.current = idx
    wt.EXPANDER = ex
    try:
        for text, v, want in [
            ("blow away the staging server", Variant(0.5, 0, 3), [("blow away", False, ["destroy", "deprovision"])]),
            ("blow away the staging server", Variant(0.5, 0, 1), [("blow away", False, ["destroy"])]),
            ("blow away the staging server", Variant(0.5, 0, 3, phrases=False), []),
            ("nuke the server", Variant(0.5, 0, 3), [("nuke", False, ["destroy", "deprovision"])]),
            ("nuke the server", Variant(0.5, 0, 3, known=0.1), [("nuke", False, ["destroy", "deprovision"])]),
            ("give the customer their money back", Variant(0.5, 0, 3), [("money back", False, ["refund"])]),
            ("give the customer their money back", Variant(0.5, 0, 3, phrases=False), []),
            ("list servers", Variant(0.5, 0, 3, known=0.1), []),  # "server" is its own only target
            ("blowing away the servers", Variant(0.5, 0, 3, by_stem=False),
             [("blow away", False, ["destroy", "deprovision"])]),
            ("refund the customer", Variant(0.5, 0, 3, known=0.1), [("custom", True, ["configure"])]),  # stems
            ("refund the customer", Variant(0.5, 0, 3, known=0.1, by_stem=False), []),
            ("refund the customer", Variant(0.5, 0, 3), []),  # the catalog has "customer"
        ]:
            ex.variant = v
            parsed = wt.index_mod.parse(text, idx._heads.names, idx.lexicon, idx._heads.abbreviated)
            assert ex.made == want, (text, v.name, ex.made)
            marked = [c for c in parsed.concepts if c.said.endswith((MARK, KNOWN))]
            assert len(marked) == (1 if want else 0), parsed.concepts
            if want:
                assert ex.alpha_of(marked[0]) == (v.known if want[0][1] else v.alpha)
                assert set(want[0][2]) <= set(marked[0].phrases)
        ex.variant = None
        before = [h.name for h in idx.search("nuke the staging server", 3, fill=False)]
        ex.variant = Variant(1.0, 0, 3)
        after = [h.name for h in idx.search("nuke the staging server", 3, fill=False)]
        assert after[0] == "deprovision_server" and before != after, (before, after)
        idf = wt._patched_idf(Concept("nuke" + MARK, ("nuke", "destroy")), idx._df, idx._len)
        ex.variant = None
        assert abs(idf - wt._patched_idf(Concept("nuke" + MARK, ("nuke", "destroy")), idx._df, idx._len)) < 1e-12
        ex.variant = Variant(0.25, 0, 3)
        assert abs(wt._patched_idf(Concept("nuke" + MARK, ("nuke", "destroy")), idx._df, idx._len) - idf / 4) < 1e-12
    finally:
        wt.EXPANDER = None
    print(f"selftest ok: 'nuke the staging server' served {before} → expanded {after}")


def diff(before: Sequence[ff.Row], after: Sequence[ff.Row], expander: Expander, v: Variant) -> None:
    """The tuning queries whose fused found @1 or @5 changes under *v* (tuning sets only)."""
    for b, a in zip(before, after, strict=True):
        assert not b.measurement_only
        for tb, ta in zip(b.tasks, a.tasks, strict=True):
            fb, fa = wt.fused(tb)[:5], wt.fused(ta)[:5]
            lb, la = tb.lexical, ta.lexical
            f1 = (bool(fb) and fb[0] in tb.want, bool(fa) and fa[0] in ta.want)
            f5 = (bool(tb.want & set(fb)), bool(ta.want & set(fa)))
            l5 = (bool(tb.want & set(lb)), bool(ta.want & set(la)))
            if f1[0] != f1[1] or f5[0] != f5[1] or l5[0] != l5[1]:
                sign = "+" if (f5[1] - f5[0], f1[1] - f1[0]) > (0, 0) else "-"
                print(f"{sign} {b.catalog:9}{b.name:22}{tb.by:7} fused @1 {f1[0]:d}→{f1[1]:d} @5 {f5[0]:d}→{f5[1]:d} "
                      f"lexical @5 {l5[0]:d}→{l5[1]:d}  {tb.query!r}  want {sorted(tb.want)} top {fa[:3]}"
                      f"  was {fb[:3]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, help="bench/fusion_fit.py's cache of the served tasks")
    p.add_argument("--thesaurus", type=Path, default=THESAURUS)
    p.add_argument("--selftest", action="store_true", help="the expansion on a tiny catalog and thesaurus")
    p.add_argument("--quick", action="store_true", help="a few variants only")
    p.add_argument("--table", help="a variant's name: per tuning catalog and wording, lexical and fused before/after")
    p.add_argument("--show", help="a variant's name: the expansions it makes on the tuning queries")
    p.add_argument("--diff", help="a variant's name: the tuning queries whose found changes")
    p.add_argument("--measurement", help="a variant's name: print the measurement-only aggregates before/after")
    p.add_argument("--round", type=int, default=0, help="report round 1's variants only (default: both rounds)")
    p.add_argument("--rankings", type=Path, help="keep the grid's re-ranked tuning rows in this file between runs")
    args = p.parse_args(argv)
    if args.selftest:
        selftest()
        return 0
    if args.cache is None:
        p.error("--cache is required")
    th = Thesaurus.load(args.thesaurus)
    print(f"thesaurus {args.thesaurus}: {th.lines} lines, {len(th.terms)} terms of 1-{LONGEST} words "
          f"({th.skipped} longer terms skipped)")
    expander = Expander(th)
    rows = ff.load(args.cache)
    variants = grid()
    named = args.table or args.show or args.diff or args.measurement
    if named:
        chosen = next(v for v in variants + [Variant()] if v.name == named)
        if args.measurement:
            meas = [r for r in rows if r.measurement_only]
            got = asyncio.run(wt.rerun(meas, [None, chosen], expander))
            wt.measurement_report(got, chosen)
            return 0
        tuning = [r for r in rows if not r.measurement_only]
        if args.show:
            _show(tuning, chosen, expander)
            return 0
        got = asyncio.run(wt.rerun(tuning, [None, chosen], expander))
        if args.table:
            wt.table(got[None], got[chosen], chosen)
        else:
            diff(got[None], got[chosen], expander, chosen)
        return 0
    tuning = [r for r in rows if not r.measurement_only]
    chosen_grid = variants[:4] if args.quick else round1() if args.round == 1 else variants
    if args.rankings and args.rankings.exists():
        saved = pickle.loads(args.rankings.read_bytes())
        by_name = {v.name: v for v in chosen_grid}
        got = {by_name.get(k) if k else None: [ff.Row(*f) for f in rs] for k, rs in saved.items()
               if k is None or k in by_name}
    else:
        got = asyncio.run(wt.rerun(tuning, [None, *chosen_grid], expander))
        if args.rankings:
            args.rankings.write_bytes(pickle.dumps({v.name if v else None: [
                (r.catalog, r.tasks_file, r.measurement_only, r.tasks) for r in rs] for v, rs in got.items()}))
    wt.report(got, chosen_grid)
    joint(got, chosen_grid)
    return 0


def _show(rows: Sequence[ff.Row], v: Variant, expander: Expander) -> None:
    """The expansions *v* makes on the tuning queries (the index of each catalog, no ranking)."""
    import tempfile

    from gateway.discovery.catalog_search import CatalogSearch
    from tests.discovery import fusion_eval as fe
    from tests.support import running_gateway

    async def run() -> None:
        cats = [c for c in fe.catalogs() if any(r.catalog == c.name for r in rows)]
        wt.EXPANDER = expander
        expander.variant = v
        n = made = 0
        with tempfile.TemporaryDirectory() as tmp:
            async with running_gateway(fe.config_text(cats), base_dir=tmp) as gw:
                for cat in cats:
                    search = CatalogSearch(fe._host(gw, cat.name).view, packs=cat.packs)
                    search.refresh()
                    idx = expander.current = search.index
                    for r in rows:
                        if r.catalog != cat.name:
                            continue
                        for t in r.tasks:
                            wt.index_mod.parse(t.query, idx._heads.names, idx.lexicon, idx._heads.abbreviated)
                            n += 1
                            if expander.made:
                                made += 1
                                print(f"  [{cat.name}/{r.name}/{t.by}] {t.query!r}: "
                                      + "; ".join(f"{term}{' (known)' if k else ''} → {ts}"
                                                  for term, k, ts in expander.made))
        print(f"{made} of {n} tuning queries expanded by {v.name}")

    asyncio.run(run())


if __name__ == "__main__":
    raise SystemExit(main())

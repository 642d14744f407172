"""Does a catalog-gated WordNet expansion raise tool-search recall? (issue 28 trial; not served)

A query concept the catalog's index lacks (every phrase of it in no tool, or in at most ``rare``
tools) is given the lemmas of its word's first WordNet senses (synonyms; optionally direct
hypernyms, verb entailments, "also see", derivations) that *do* occur in the catalog (the index's
own document frequency: gated by the catalog), at a reduced weight (``alpha`` × the IDF the
re-rank gives a concept). Only the lexical side changes; the dense side (the committed query
vectors) is as served, and the fusion is replayed with the served constants
(:func:`gateway.discovery.fusion.fuse` through ``bench/fusion_fit.py``).

WordNet 3.0 is read from ``/usr/share/wordnet`` (Debian's ``wordnet-base``; the plain-text
database of wndb(5)): ``index.<pos>`` gives a lemma's synsets in sense order (most frequent
first), ``data.<pos>`` a synset's lemmas and pointers by byte offset, ``<pos>.exc`` the irregular
inflections; regular ones are undone with morphy's detachment rules.

The trial monkeypatches two functions for its own process only: ``gateway.discovery.index.parse``
(the parsed query is expanded) and ``gateway.discovery.rank._idf`` (an expansion concept weighs
``alpha`` of its IDF). Nothing in the gateway's code path changes. ``bench/thesaurus_trial.py``
reuses the replay (:func:`rerun`, which takes another expander), :func:`report` and the patches.

Run (after ``bench/fusion_fit.py --cache /tmp/wn_fusion.pkl`` made the cache of the served tasks)::

    PYTHONPATH=$PWD .venv/bin/python bench/wordnet_trial.py --cache /tmp/wn_fusion.pkl [--measurement NAME]

It prints, per variant, the tuning catalogs' lexical and fused found@1/@5 against the served
ranking, then leave-one-catalog-out CV over the variants (core, 240 queries) and leave-one-set-out
over GitHub's tuning sets. ``--measurement NAME`` adds the measurement-only aggregates of the one
variant NAME (before/after; never a query).

Result at d7ed63d (220 variants; found @1/@5 over the 240 core person+model queries, gaps = queries
below the better of lexical and dense): served fused 129/192/3, lexical alone 97/174. Best in
sample +3 to +5 at 5 fused (e.g. ``s9t-syn+hyper-a0.25-r0-m3`` 131/197) while lexical alone loses
up to 5 at 5. Held out (variant chosen on the other three catalogs, served constants): round 1
131/194/5, round 2 131/192/3; chosen jointly with the core's fusion constants: 129/193/5 against
127/192/5 for the same refit without WordNet. GitHub held out 507/624/0 (served 508/624/0).
Appending the lemmas to the embedded query text lowers the fused ranking in every variant.
Not served: below the +5 held-out bar set for it (issue 28).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import fusion_fit as ff  # noqa: E402

from gateway.discovery import index as index_mod  # noqa: E402
from gateway.discovery import rank as rank_mod  # noqa: E402
from gateway.discovery.concepts import Concept, Query  # noqa: E402
from gateway.discovery.fillers import STOPWORDS  # noqa: E402
from gateway.discovery.fusion import CALIBRATION  # noqa: E402
from tests.discovery import fusion_eval as fe  # noqa: E402

WORDNET = Path("/usr/share/wordnet")
POS = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
MARK = "~wn"  # an expansion concept's ``said`` ends with it (its IDF is scaled by alpha)
# morphy's detachment rules (wndb/morphy(7)): suffix → ending of the base form.
_RULES = {"n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
                ("men", "man"), ("ies", "y")],
          "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
          "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")], "r": []}
RELATIONS = {"syn": (), "hyper": ("@", "@i"), "entail": ("*",), "also": ("^",), "similar": ("&",),
             "deriv": ("+",)}


class WordNet:
    """A small reader of WordNet's plain-text database (index, data and exception files)."""

    def __init__(self, root: Path = WORDNET) -> None:
        self.index: dict[str, dict[str, tuple[list[int], int]]] = {}  # lemma → pos → (offsets, tagged senses)
        self.exc: dict[str, dict[str, list[str]]] = {}
        self._data = {p: open(root / f"data.{name}", "rb") for p, name in POS.items()}  # noqa: SIM115
        for p, name in POS.items():
            for line in (root / f"index.{name}").read_text(encoding="latin-1").splitlines():
                if line.startswith(" "):
                    continue
                f = line.split()
                lemma, n_syn, n_ptr = f[0], int(f[2]), int(f[3])
                tagged = int(f[5 + n_ptr])
                offsets = [int(x) for x in f[6 + n_ptr:6 + n_ptr + n_syn]]
                self.index.setdefault(lemma, {})[p] = (offsets, tagged)
            for line in (root / f"{name}.exc").read_text(encoding="latin-1").splitlines():
                f = line.split()
                if len(f) > 1:
                    self.exc.setdefault(f[0], {}).setdefault(p, []).extend(f[1:])

    def base_forms(self, word: str) -> dict[str, list[str]]:
        """pos → the lemmas *word* may be an inflection of (morphy: itself, exceptions, rules)."""
        out: dict[str, list[str]] = {}
        for p in POS:
            forms = [word] + self.exc.get(word, {}).get(p, [])
            forms += [word[:-len(s)] + e for s, e in _RULES[p] if word.endswith(s) and len(word) > len(s) + 1]
            found = [f for f in dict.fromkeys(forms) if p in self.index.get(f, {})]
            if found:
                out[p] = found
        return out

    @cache  # noqa: B019 (one reader per process)
    def synset(self, pos: str, offset: int) -> tuple[tuple[str, ...], tuple[tuple[str, str, int, int], ...]]:
        """(lemmas, pointers (symbol, pos, offset, target word number)) of one synset."""
        fh = self._data[pos]
        fh.seek(offset)
        f = fh.readline().decode("latin-1").split(" | ")[0].split()
        n = int(f[3], 16)
        words = tuple(re.sub(r"\(\w+\)$", "", f[4 + 2 * i]).lower().replace("_", " ") for i in range(n))
        k = 4 + 2 * n
        n_ptr = int(f[k])
        ptrs = []
        for j in range(n_ptr):
            sym, off, ppos, st = f[k + 1 + 4 * j:k + 5 + 4 * j]
            ptrs.append((sym, "a" if ppos == "s" else ppos, int(off), int(st[2:], 16)))
        return words, tuple(ptrs)

    def related(self, word: str, senses: int, relations: Sequence[str], tagged_only: bool,
                pos: str = "nvar") -> list[str]:
        """The lemmas of *word*'s first *senses* synsets per part of speech (only senses tagged in
        the SemCor counts when *tagged_only*, at least one) and of the synsets *relations* point
        to, in sense order, without the word itself."""
        out: list[str] = []
        key = word.replace(" ", "_")
        for p, forms in self.base_forms(key).items():
            if p not in pos:
                continue
            for lemma in forms:
                offsets, tagged = self.index[lemma][p]
                n = min(senses, max(1, tagged)) if tagged_only else senses
                for off in offsets[:n]:
                    words, ptrs = self.synset(p, off)
                    out += words
                    for sym, ppos, poff, target in ptrs:
                        if any(sym in RELATIONS[r] for r in relations):
                            rwords, _ = self.synset(ppos, poff)
                            if sym == "+":  # a derivation links one lemma to one lemma
                                out += [rwords[target - 1]] if target else []
                            else:
                                out += rwords
        seen = {word, key.replace("_", " ")} | {f.replace("_", " ") for fs in self.base_forms(key).values() for f in fs}
        return [w for w in dict.fromkeys(out) if w not in seen]


@dataclass(frozen=True)
class Variant:
    senses: int = 1
    relations: tuple[str, ...] = ()
    alpha: float = 0.5
    rare: int = 0  # a concept counts as lacking when its phrases are in at most this many tools
    most: int = 3  # at most this many lemmas per concept
    tagged_only: bool = False
    pos: str = "nvar"  # the parts of speech whose senses are read
    heads: bool = False  # only lemmas some tool's name or title holds
    dense: bool = False  # the lemmas are appended to the embedded query text too

    @property
    def name(self) -> str:
        rel = "+".join(("syn",) + self.relations)
        return (f"s{self.senses}{'t' if self.tagged_only else ''}-{rel}-a{self.alpha}-r{self.rare}-m{self.most}"
                + (f"-{self.pos}" if self.pos != "nvar" else "") + ("-heads" if self.heads else "")
                + ("-dense" if self.dense else ""))


class Expander:
    """Expands a parsed query against the index being searched (set in :attr:`current`)."""

    def __init__(self, wn: WordNet) -> None:
        self.wn = wn
        self.variant: Variant | None = None
        self.current: Any = None  # the SearchIndex being searched
        self.expanded = 0  # concepts expanded (for the report)
        self.last: list[str] = []  # the lemmas added to the query being searched

    def alpha_of(self, concept: Concept) -> float | None:
        """The share of its IDF an expansion concept weighs (None: not an expansion concept)."""
        return self.variant.alpha if self.variant is not None and concept.said.endswith(MARK) else None

    def __call__(self, query: Query) -> Query:
        v, idx = self.variant, self.current
        if v is None or idx is None:
            return query
        common = idx._len // 2
        extra: list[Concept] = []
        concepts = list(query.concepts)
        for k, c in enumerate(concepts):
            if c.answer or c.said.startswith("(") or c.said in STOPWORDS or len(c.said) < 3:
                continue
            if max((idx._df(p) for p in c.phrases), default=0) > v.rare:
                continue
            lemmas = [w for w in self.wn.related(c.said, v.senses, v.relations, v.tagged_only, v.pos)
                      if w not in STOPWORDS and len(w) > 2 and 0 < idx._df(w) <= common
                      and (not v.heads or _named(idx, w))][:v.most]
            if not lemmas:
                continue
            self.expanded += 1
            self.last += [w for w in lemmas if w not in self.last]
            if SHOW:
                print(f"    {c.said!r} -> {lemmas}")
            if all(idx._df(p) == 0 for p in c.phrases):
                concepts[k] = Concept(c.said + MARK, (*c.phrases, *lemmas), c.participle)
            else:
                extra.append(Concept(c.said + MARK, tuple(lemmas), c.participle))
        if not extra and concepts == list(query.concepts):
            return query
        return replace(query, concepts=tuple(concepts + extra))


def _named(idx: Any, phrase: str) -> bool:
    """Whether some tool's name or title holds every stem of *phrase* (the head index)."""
    stems = rank_mod._phrase(phrase)
    return bool(stems) and all(w in idx._heads._tools for w in stems)


EXPANDER: Expander | None = None
SHOW: list[bool] = []  # --show: print each expansion
_parse, _idf = index_mod.parse, rank_mod._idf


def _patched_parse(*args: Any, **kwargs: Any) -> Query:
    q = _parse(*args, **kwargs)
    return EXPANDER(q) if EXPANDER is not None else q


def _patched_idf(concept: Concept, df: Callable[[str], int], total: int) -> float:
    w = _idf(concept, df, total)
    alpha = EXPANDER.alpha_of(concept) if EXPANDER is not None else None
    return w if alpha is None else alpha * w


index_mod.parse = _patched_parse  # type: ignore[assignment]
rank_mod._idf = _patched_idf  # type: ignore[assignment]


Key = tuple[str, str]  # (catalog, tasks file)


async def rerun(rows: list[ff.Row], variants: Sequence[Any], expander: Any = None) -> dict[Any, list[ff.Row]]:
    """The rows re-ranked lexically under each variant (None: as served), dense inputs kept.

    *expander* (default: WordNet's :class:`Expander`) is called on every parsed query; it has
    ``variant``, ``current`` (the index searched), ``last`` (what it added to the query, for the
    dense side) and ``alpha_of(concept)``. A query whose expansion (the parsed query, the alphas
    of its concepts, the dense text) was ranked already under another variant is not searched
    again: the rankings are a function of those."""
    import numpy as np

    from gateway.discovery.catalog_search import CatalogSearch
    from gateway.discovery.hybrid import Semantic, query_text
    from gateway.discovery.local_model import model_dir
    from gateway.discovery.minilm import MiniLM
    from gateway.endpoints.config import EmbeddingsConfig
    from tests.support import running_gateway

    model: list[Any] = []
    checked: dict[str, int] = {}
    encoded: dict[str, Any] = {}

    def encode(text: str) -> Any:
        if text not in encoded:
            if not model:
                model.append(MiniLM(model_dir()))
            v = np.asarray(model[0].encode([text])[0], np.float32)
            encoded[text] = v / np.linalg.norm(v)
        return encoded[text]

    global EXPANDER
    EXPANDER = expander if expander is not None else Expander(WordNet())
    done: dict[Any, tuple[Any, ...]] = {}  # (catalog, query, expansion) → (lex, top, dense)
    wanted = {(r.catalog, r.tasks_file): r for r in rows}
    cats = [c for c in fe.catalogs() if any(k[0] == c.name for k in wanted)]
    out: dict[Any, list[ff.Row]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        async with running_gateway(fe.config_text(cats), base_dir=tmp) as gw:
            for cat in cats:
                semantic = Semantic(EmbeddingsConfig(url="http://127.0.0.1:9/v1/embeddings", model=fe.MODEL), cat.name)
                search = CatalogSearch(fe._host(gw, cat.name).view, semantic=semantic, packs=cat.packs)
                search.refresh()
                vectors = fe.Vectors.load(cat.name)
                names = list(search.prints)
                semantic.store.put([search.prints[n] for n in names], np.stack([vectors.tools[n] for n in names]))
                semantic.complete_for = search.prints
                EXPANDER.current = search.index
                for v in variants:
                    EXPANDER.variant = v
                    for key, row in wanted.items():
                        if key[0] != cat.name:
                            continue
                        tasks = []
                        for t in row.tasks:
                            if SHOW and v is not None:
                                print(f"  [{cat.name}/{t.by}] {t.query}")
                            EXPANDER.last = []
                            idx = search.index
                            parsed = index_mod.parse(t.query, idx._heads.names, idx.lexicon, idx._heads.abbreviated)
                            dense_text = (query_text(t.query, idx.lexicon) + " " + " ".join(EXPANDER.last)
                                          if v is not None and v.dense and EXPANDER.last else None)
                            key = (cat.name, t.query, parsed, tuple(EXPANDER.alpha_of(c) for c in parsed.concepts),
                                   dense_text)
                            if key in done and not SHOW:
                                lex, top, dense = done[key]
                                new = replace(t, lexical=top, backfill=top, lex_candidates=lex)
                                if dense is not None:
                                    new = replace(new, dense_candidates=dense, dense=[h.name for h in dense[:fe.LIMIT]])
                                tasks.append(new)
                                continue
                            EXPANDER.last = []
                            lex = search.index.search(t.query, fe.CANDIDATES, None, fill=False)
                            top = [h.name for h in search.index.search(t.query, fe.LIMIT)]
                            new = replace(t, lexical=top, backfill=top, lex_candidates=lex)
                            dense = None
                            if v is None and checked.get(cat.name, 0) < 3:  # the encoder is the served one
                                checked[cat.name] = checked.get(cat.name, 0) + 1
                                again = semantic.rank(encode(query_text(t.query, search.index.lexicon)),
                                                      search.prints, fe.CANDIDATES, None)
                                assert [h.name for h in again[:fe.LIMIT]] == t.dense, (cat.name, t.query)
                            if v is not None and v.dense and EXPANDER.last:
                                text = query_text(t.query, search.index.lexicon) + " " + " ".join(EXPANDER.last)
                                dense = semantic.rank(encode(text), search.prints, fe.CANDIDATES, None)
                                new = replace(new, dense_candidates=dense, dense=[h.name for h in dense[:fe.LIMIT]])
                            done[key] = (lex, top, dense)
                            tasks.append(new)
                        out[v].append(ff.Row(row.catalog, row.tasks_file, row.measurement_only, tasks))
    return out


def fused(t: fe.Task) -> list[str]:
    return fe.replay(t, ff.fuse, domain_pack=t.domain_pack, calibration=CALIBRATION)


def lexical(t: fe.Task) -> list[str]:
    return t.lexical


def found(rows: Sequence[ff.Row], ranking: Callable[[fe.Task], list[str]]) -> dict[tuple[str, str, str], tuple[int, int, int]]:
    """(catalog, set, wording) → (found@1, found@5, n)."""
    out = {}
    for r in rows:
        for wording, idx in ff._wordings(r.tasks).items():
            tops = [ranking(r.tasks[i])[:fe.LIMIT] for i in idx]
            out[(r.catalog, r.name, wording)] = (
                sum(bool(tp) and tp[0] in r.tasks[i].want for tp, i in zip(tops, idx, strict=True)),
                sum(bool(r.tasks[i].want & set(tp)) for tp, i in zip(tops, idx, strict=True)), len(idx))
    return out


def table(before: Sequence[ff.Row], after: Sequence[ff.Row], v: Variant) -> None:
    """Per catalog, set and wording: found @1/@5 of lexical and fused, served → *v*."""
    bl, al, bf, af = found(before, lexical), found(after, lexical), found(before, fused), found(after, fused)
    print(f"{'catalog':10}{'set':24}{'wording':>8}{'n':>5}   lexical served → {v.name}   fused served → {v.name}")
    for k in bl:
        print(f"{k[0]:10}{k[1]:24}{k[2]:>8}{bl[k][2]:>5}   {bl[k][0]:>3}/{bl[k][1]:<3} → {al[k][0]:>3}/{al[k][1]:<3}"
              f"      {bf[k][0]:>3}/{bf[k][1]:<3} → {af[k][0]:>3}/{af[k][1]:<3}")


def variants() -> list[Variant]:
    """Round 1 (senses x relations x alpha x rarity) and round 2 (around round 1's best in-sample
    variants: parts of speech, lemmas in names/titles only, the dense side too, lemmas per concept)."""
    return round1() + round2()


def round2() -> list[Variant]:
    out = []
    bases = [Variant(1, ("hyper",), 0.25, 0), Variant(1, ("hyper",), 0.25, 2), Variant(3, ("hyper",), 0.25, 0),
             Variant(9, ("hyper",), 0.25, 0, 3, True), Variant(3, (), 0.5, 0)]
    for b in bases:
        for pos, heads, dense, most in itertools.product(("nvar", "n", "v"), (False, True), (False, True), (1, 3)):
            v = replace(b, pos=pos, heads=heads, dense=dense, most=most)
            if v != b:
                out.append(v)
    out += [replace(b, alpha=a, dense=True) for b in bases for a in (0.1, 0.5) if a != b.alpha]
    return out


def round1() -> list[Variant]:
    grid = []
    for senses, rel, alpha, rare in itertools.product(
            (1, 2, 3), ((), ("hyper",), ("entail", "also", "similar"), ("deriv",), ("hyper", "entail", "also", "deriv")),
            (0.25, 0.5, 1.0), (0, 2)):
        grid.append(Variant(senses, rel, alpha, rare))
    grid += [Variant(9, (), a, 0, 3, True) for a in (0.25, 0.5, 1.0)]
    grid += [Variant(9, ("hyper",), a, 0, 3, True) for a in (0.25, 0.5, 1.0)]
    return grid


def merit(rows: Sequence[ff.Row]) -> float:
    return ff.merit([ff.counts(r, ff.served(CALIBRATION)) for r in rows])


def measurement_report(got: dict[Any, list[ff.Row]], chosen: Any) -> None:
    """The measurement-only rows' aggregates, served → *chosen* (recall per catalog, set and wording)."""
    print(f"measurement-only aggregates (recall@1/@5), served → {chosen.name}; aggregates only")
    for name, rank in (("lexical", lexical), ("fused", fused)):
        b, a = found(got[None], rank), found(got[chosen], rank)
        for k in b:
            print(f"  {name:8}{k[0]:14}{k[1]:22}{k[2]:>8} n={b[k][2]:>3}  "
                  f"{b[k][0] / b[k][2]:.3f}/{b[k][1] / b[k][2]:.3f} → {a[k][0] / a[k][2]:.3f}/{a[k][1] / a[k][2]:.3f}")


def lexical_totals(rows: Sequence[ff.Row]) -> tuple[int, int]:
    """The lexical ranking's found @1, @5 over *rows* (person and model, or all when a set has neither)."""
    n1 = n5 = 0
    for r in rows:
        res = ff.counts(r, fused)
        for wording, c in res.items():
            if wording != "all" or len(res) == 1:
                n1, n5 = n1 + c[2], n5 + c[3]
    return n1, n5


def report(got: dict[Any, list[ff.Row]], grid: Sequence[Any]) -> list[Any]:
    """Per variant the tuning sets' lexical and fused found @1/@5 and merit, then leave one core
    catalog out and leave one GitHub set out over (served, *grid*); returns the options."""
    base_f, base_l = found(got[None], fused), found(got[None], lexical)

    def tot(f: dict[tuple[str, str, str], tuple[int, int, int]], core: bool) -> tuple[int, int]:
        keys = [k for k in f if (k[0] in ff.CORE) == core and (k[2] != "all" if core else True)]
        return sum(f[k][0] for k in keys), sum(f[k][1] for k in keys)

    print(f"served: core lexical {tot(base_l, True)} fused {tot(base_f, True)}; "
          f"GitHub lexical {tot(base_l, False)} fused {tot(base_f, False)}  (found @1, @5)")
    print(f"{'variant':36}{'core lex':>12}{'core fused':>12}{'gh lex':>12}{'gh fused':>12}  merit core/gh")
    merits: dict[Variant, dict[str, float]] = {}
    for v in grid:
        lf, ll = found(got[v], fused), found(got[v], lexical)
        groups = {c: [r for r in got[v] if r.catalog == c] for c in ff.CORE}
        groups.update({r.name: [r] for r in got[v] if r.catalog not in ff.CORE})
        merits[v] = {g: merit(rs) for g, rs in groups.items()}
        mc = sum(m for g, m in merits[v].items() if g in ff.CORE)
        mg = sum(m for g, m in merits[v].items() if g not in ff.CORE)
        print(f"{v.name:36}{str(tot(ll, True)):>12}{str(tot(lf, True)):>12}{str(tot(ll, False)):>12}"
              f"{str(tot(lf, False)):>12}  {mc:.0f}/{mg:.0f}")
    base_groups = {c: [r for r in got[None] if r.catalog == c] for c in ff.CORE}
    base_groups.update({r.name: [r] for r in got[None] if r.catalog not in ff.CORE})
    base_m = {g: merit(rs) for g, rs in base_groups.items()}
    print(f"served merit core/gh {sum(m for g, m in base_m.items() if g in ff.CORE):.0f}/"
          f"{sum(m for g, m in base_m.items() if g not in ff.CORE):.0f}")
    # Leave one out: the variant (or none) best on the other groups, measured on the held-out one.
    options: list[Variant | None] = [None, *grid]

    def m_of(o: Variant | None, g: str) -> float:
        return base_m[g] if o is None else merits[o][g]

    for label, names in (("core", list(ff.CORE)), ("GitHub", [g for g in base_m if g not in ff.CORE])):
        held: list[ff.Row] = []
        print(f"\nleave one out ({label}): chosen on the others → held out (found @1, @5, gaps)")
        for g in names:
            best = max(options, key=lambda o: (sum(m_of(o, h) for h in names if h != g), o is None))
            rows_g = [r for r in got[best] if (r.catalog if label == "core" else r.name) == g]
            held += rows_g
            print(f"  {g:22} {best.name if best else 'served':36} "
                  f"{ff.totals([ff.counts(r, ff.served(CALIBRATION)) for r in rows_g])}")
        base_rows = [r for r in got[None] if (r.catalog if label == "core" else r.name) in names]
        print(f"  held-out total {ff.totals([ff.counts(r, ff.served(CALIBRATION)) for r in held])}; "
              f"served {ff.totals([ff.counts(r, ff.served(CALIBRATION)) for r in base_rows])}")
        print(f"  held-out lexical alone {lexical_totals(held)}; served {lexical_totals(base_rows)}")
    return options


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, required=True, help="bench/fusion_fit.py's cache of the served tasks")
    p.add_argument("--measurement", help="a variant's name: print the measurement-only aggregates before/after")
    p.add_argument("--quick", action="store_true", help="a few variants only")
    p.add_argument("--refit", action="store_true",
                   help="leave one core catalog out over (variant x the fusion's k_core x sure_core) jointly")
    p.add_argument("--family", choices=("all", "syn-hyper"), default="all",
                   help="syn-hyper: round 1's synonym and synonym+hypernym variants only")
    p.add_argument("--round", type=int, default=0, help="only round 1 or 2 of the variants (default both)")
    p.add_argument("--table", help="a variant's name: per tuning catalog and wording, lexical and fused before/after")
    p.add_argument("--show", help="a variant's name: the expansions it makes on the core tuning queries")
    args = p.parse_args(argv)
    rows = ff.load(args.cache)
    if args.table or args.show:
        chosen = next(v for v in variants() if v.name == (args.table or args.show))
        tuning = [r for r in rows if not r.measurement_only and (args.table or r.catalog in ff.CORE)]
        if args.show:
            SHOW.append(True)
        got = asyncio.run(rerun(tuning, [None, chosen]))
        if args.table:
            table(got[None], got[chosen], chosen)
        return 0
    if args.measurement:
        chosen = next(v for v in variants() if v.name == args.measurement)
        meas = [r for r in rows if r.measurement_only]
        got = asyncio.run(rerun(meas, [None, chosen]))
        measurement_report(got, chosen)
        return 0
    tuning = [r for r in rows if not r.measurement_only]
    grid = variants()[:4] if args.quick else round2() if args.round == 2 else round1() if args.round == 1 else variants()
    if args.family == "syn-hyper":
        grid = [v for v in round1() if v.relations in ((), ("hyper",))]
    got = asyncio.run(rerun(tuning, [None, *grid]))
    options = report(got, grid)
    if args.refit:
        refit(got, options)
    return 0


def refit(got: dict[Variant | None, list[ff.Row]], options: Sequence[Variant | None]) -> None:
    """Leave one core catalog out, choosing the variant (or none) and the core's fusion constants
    together on the other three; against the same refit without WordNet (options = served only)."""
    cals = ff.core_grid(CALIBRATION, leads=False)
    table = {(o, i, c): [ff.counts(r, ff.served(cal)) for r in got[o] if r.catalog == c]
             for o in options for i, cal in enumerate(cals) for c in ff.CORE}
    for label, opts in (("refit without WordNet", [None]), ("refit with WordNet", list(options))):
        held: list[dict[str, ff.Counts]] = []
        print(f"\n{label}: leave one core catalog out (variant, k_core/sure_core) → held out")
        for g in ff.CORE:
            best = max(((o, i) for o in opts for i in range(len(cals))),
                       key=lambda oi: (ff.merit([x for h in ff.CORE if h != g for x in table[(oi[0], oi[1], h)]]),
                                       oi[0] is None, -oi[1]))
            held += table[(best[0], best[1], g)]
            print(f"  {g:10} {best[0].name if best[0] else 'served':40} {cals[best[1]].k_core}/{cals[best[1]].sure_core}"
                  f"  {ff.totals(table[(best[0], best[1], g)])}")
        print(f"  held-out total {ff.totals(held)}")


if __name__ == "__main__":
    raise SystemExit(main())

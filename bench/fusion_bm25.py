"""Plain BM25 as a third input of the fusion, or as a guard on it? (issue 28; a replay, tuning sets only)

Issue 28's bar includes "never below plain BM25". The served fusion (:mod:`gateway.discovery.fusion`)
sees two rankings: the lexical ranker's (BM25 candidates re-ranked by generic signals) and the
cosine's. This script records, beside what ``tests/discovery/fusion_eval.py`` records, three BM25
rankings of every labelled query (top 50, with scores):

* ``stage1``: the lexical ranker's own BM25 candidates (``SearchIndex._best`` in ``_ranked``: the
  weighted columns, the query's concept phrases), computed anyway, so free to serve;
* ``plain``: the bench's plain BM25 (``bench/discovery_catalogs.py``'s :class:`PlainBM25`: four
  unweighted columns, the whole description, every word of the query), what the bar compares to;
* ``raw``: the index's FTS table (weighted columns) queried with the query's own words (every
  ``[A-Za-z0-9]+`` run), one more FTS5 query per search;

and replays the served fusion with each of them added in one of these ways, the fusion's
constants refitted with every variant by the protocol of ``bench/fusion_fit.py`` (leave one core
catalog out; leave one GitHub tuning set out):

* ``term``: a third score term, ``+ u · b`` where ``b`` is the BM25 score over the list's best (0..1;
  a tool outside the BM25 list 0), u on a grid;
* ``zterm``: the same with the BM25 score's z over its list, scaled by the fusion's own w;
* ``guard``: the BM25 first kept within the fused top k (after the lexical first's floor, which
  wins), k on a grid;
* ``agree``: when the BM25 first is the cosine's first, it is kept within the top k;
* ``boost``: when the BM25 first is the cosine's first and not the lexical first, the fusion's
  weight of the cosine is multiplied by (1 + a);
* ``conf``: BM25 agreement as the lexical ranking's confidence: the cosine's weight times (1 - a)
  when the lexical first is BM25's first (the re-rank kept it), times (1 + a) when it is not;
  ``sure``: only the (1 - a);
* ``rrf``: a third term ``u / (1 + BM25 rank)``.

Only tuning sets are read per query (stripe, twilio, opsgenie, vikunja, GitHub's sets but blind5);
``--measurement NAME`` prints the measurement-only sets' aggregates for one chosen variant, before
and after, never a query.

Run::

    PYTHONPATH=$PWD .venv/bin/python bench/fusion_bm25.py [--cache /tmp/fusion_bm25.pkl] [--only FAMILIES|grid|headroom] [--show SOURCE:MODE] [--measurement SOURCE:MODE]
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

from gateway.discovery import fusion as fusion_mod  # noqa: E402
from gateway.discovery.fusion import CALIBRATION, Calibration, fuse  # noqa: E402
from gateway.discovery.index import SearchHit, SearchIndex  # noqa: E402
from tests.discovery import fusion_eval  # noqa: E402
from tests.discovery.fusion_eval import LIMIT, Task  # noqa: E402

CORE = ("stripe", "twilio", "opsgenie", "vikunja")
K_CORE_GRID = (0.4, 0.5, 0.6, 0.7, 0.8)
SURE_CORE_GRID = (1.6, 1.8, 2.0, 2.2)
K_PACK_GRID = (0.01, 0.02, 0.03, 0.05)
SURE_PACK_GRID = (1.6, 2.0, 2.2, 2.4)
GAP_COST = 3
N = 50
INPUTS = ("stage1", "plain", "raw")


# ---- recording ----

@dataclass
class Row:
    catalog: str
    tasks_file: str
    measurement_only: bool
    tasks: list[Task]
    extra: list[dict[str, list[SearchHit]]]  # per task: input → BM25 top N (name, score; higher better)

    @property
    def name(self) -> str:
        return self.tasks_file.removesuffix(".yaml")


def _record() -> tuple[dict[tuple[int, str], list[SearchHit]], dict[tuple[int, str], list[SearchHit]],
                       dict[tuple[int, str], list[SearchHit]]]:
    """Patch the index and the bench's BM25 to keep their BM25 orders, keyed by (tool count, query)."""
    stage1: dict[tuple[int, str], list[SearchHit]] = {}
    raw: dict[tuple[int, str], list[SearchHit]] = {}
    plain: dict[tuple[int, str], list[SearchHit]] = {}
    state: dict[str, Any] = {"query": None, "ranked": False}
    search, ranked, best = SearchIndex.search, SearchIndex._ranked, SearchIndex._best
    b = fusion_eval.bench()

    def search_(self: SearchIndex, query: str, *a: Any, **k: Any) -> Any:
        state["query"] = query
        key = (len(self), query)
        if key not in raw:
            words = b._WORD.findall(query)
            rows = self._db.execute(
                "SELECT rowid, bm25(tools, 6.0, 4.0, 2.0, 1.5, 1.0, 0.5) AS s FROM tools WHERE tools MATCH ? "
                "ORDER BY s, rowid LIMIT ?", (" OR ".join(f'"{w}"' for w in words), N)).fetchall() if words else []
            raw[key] = [SearchHit(self._names[r], -s) for r, s in rows]
        return search(self, query, *a, **k)

    def ranked_(self: SearchIndex, *a: Any, **k: Any) -> Any:
        state["ranked"] = True
        try:
            return ranked(self, *a, **k)
        finally:
            state["ranked"] = False

    def best_(self: SearchIndex, *a: Any, **k: Any) -> Any:
        out = best(self, *a, **k)
        key = (len(self), state["query"])
        if state["ranked"] and key not in stage1:
            stage1[key] = [SearchHit(n, s) for n, s in out[:N]]
        state["ranked"] = False  # only the first call of _ranked is the candidate pool
        return out

    def plain_(self: Any, query: str, limit: int = LIMIT) -> list[str]:
        terms = b._WORD.findall(query)
        rows = self.db.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid LIMIT ?",
                               (" OR ".join(f'"{w}"' for w in terms), N)).fetchall() if terms else []
        plain[(len(self.names), query)] = [SearchHit(self.names[r], -s) for r, s in rows]
        return [self.names[r] for r, _ in rows[:limit]]

    SearchIndex.search, SearchIndex._ranked, SearchIndex._best = search_, ranked_, best_  # type: ignore[method-assign]
    b.PlainBM25.search = plain_
    return stage1, plain, raw


def load(cache: Path | None) -> list[Row]:
    if cache and cache.exists():  # plain tuples: readable whatever module loads them
        return [Row(*fields) for fields in pickle.loads(cache.read_bytes())]
    stage1, plain, raw = _record()
    evaluated = asyncio.run(fusion_eval.evaluate())
    rows = []
    for ev in evaluated:
        # The catalog's tool count keys the recorded lists (the index and the plain BM25 hold the
        # same served tools): the count of a query asked of one catalog only.
        counts = [{k[0] for k in plain if k[1] == t.query} for t in ev.tasks]
        count = next(next(iter(c)) for c in counts if len(c) == 1)
        extra = [{"plain": plain[(count, t.query)], "stage1": stage1.get((count, t.query), []),
                  "raw": raw.get((count, t.query), [])} for t in ev.tasks]
        assert all([h.name for h in e["plain"][:LIMIT]] == t.bm25 for e, t in zip(extra, ev.tasks, strict=True))
        rows.append(Row(ev.catalog.name, ev.tasks_file, ev.measurement_only, ev.tasks, extra))
    if cache:
        cache.write_bytes(pickle.dumps([(r.catalog, r.tasks_file, r.measurement_only, r.tasks, r.extra)
                                        for r in rows]))
    return rows


# ---- replay ----

@dataclass(frozen=True)
class Variant:
    """How a BM25 ranking (*source*) enters the fusion: *mode* with parameter *p* (0: served)."""

    source: str = "stage1"
    mode: str = "none"  # none | term | zterm | guard | agree | boost
    p: float = 0.0


def fused(task: Task, extra: dict[str, list[SearchHit]], cal: Calibration, v: Variant,
          limit: int = LIMIT) -> list[str]:
    """The served answer (``fuse`` then the lexical back-fill) with *v* applied; ``Variant()`` is
    exactly the served ``fuse`` (checked by :func:`check`)."""
    lexical, semantic = task.lex_candidates, task.dense_candidates
    bm = extra[v.source]
    if v.mode in ("none", "guard", "agree") or v.p == 0:
        names = [h.name for h in fuse(lexical, semantic, 60, domain_pack=task.domain_pack, calibration=cal)]
    else:
        names = _fuse_extra(lexical, semantic, bm, cal, task.domain_pack, v)
    if bm and v.mode in ("guard", "agree") and v.p >= 1:
        first = bm[0].name
        cos_first = semantic[0].name if semantic else None
        if v.mode == "guard" or first == cos_first:
            names = _lift(names, first, int(v.p))
            if lexical:  # the lexical first's floor wins
                names = _lift(names, lexical[0].name, cal.lexical_first_within)
    names = names[:limit]
    if len(names) < limit:
        names += [n for n in task.backfill if n not in names][:limit - len(names)]
    return names


def _lift(names: list[str], name: str, within: int) -> list[str]:
    if within < 1:
        return names
    if name in names:
        at = names.index(name)
        if at < within:
            return names
        names = names[:at] + names[at + 1:]
    return names[:within - 1] + [name] + names[within - 1:]


def _fuse_extra(lexical: Sequence[SearchHit], semantic: Sequence[SearchHit], bm: Sequence[SearchHit],
                c: Calibration, domain_pack: bool, v: Variant) -> list[str]:
    """``fuse``'s scores (the same arithmetic) plus the BM25 term of *v*, then its lexical-first floor."""
    lex: dict[str, float] = {}
    lex_rank: dict[str, int] = {}
    for rank, hit in enumerate(lexical):
        if hit.name not in lex:
            lex[hit.name], lex_rank[hit.name] = hit.score, rank
    cos: dict[str, float] = {}
    sem_rank: dict[str, int] = {}
    for rank, hit in enumerate(semantic):
        if hit.name not in cos:
            cos[hit.name], sem_rank[hit.name] = hit.score, rank
    z = fusion_mod._z_scores(cos)
    best = max(lex.values(), default=0.0)
    k, sure = (c.k_pack, c.sure_pack) if domain_pack else (c.k_core, c.sure_core)
    unsure = sure - best
    w = k * min(c.w_max, max(c.w_min, unsure))
    bms = {h.name: h.score for h in bm}
    if v.mode == "boost":
        # The BM25 first agrees with the cosine's first but not with the lexical first: more say to the cosine.
        if bm and semantic and lexical and bm[0].name == semantic[0].name != lexical[0].name:
            w *= 1 + v.p
    elif v.mode == "conf" and bm and lexical:
        # The re-rank kept BM25's first (the lexical ranking is surer): less say to the cosine;
        # it overruled it: more.
        w *= (1 - v.p) if bm[0].name == lexical[0].name else (1 + v.p)
    elif v.mode == "sure" and bm and lexical and bm[0].name == lexical[0].name:
        w *= 1 - v.p  # only the first half of "conf"
    lex_absent = min(lex.values(), default=0.0) - c.absent_gap
    z_absent = min(z.values(), default=0.0)
    pool = lex.keys() | z.keys()
    scores = {name: lex.get(name, lex_absent) + w * z.get(name, z_absent) for name in pool}
    if v.mode == "term" and bms:
        top = max(bms.values()) or 1.0
        for name in pool:
            scores[name] += v.p * bms.get(name, 0.0) / top
    elif v.mode == "zterm" and bms:
        bz = fusion_mod._z_scores(bms)
        low = min(bz.values())
        for name in pool:
            scores[name] += v.p * w * bz.get(name, low)
    elif v.mode == "rrf" and bms:
        bm_rank = {h.name: i for i, h in enumerate(bm)}
        for name in pool:
            scores[name] += v.p / (1 + bm_rank[name]) if name in bm_rank else 0.0
    far = len(lex) + len(cos)
    order = sorted(scores, key=lambda n: (-scores[n], lex_rank.get(n, far), sem_rank.get(n, far), n))
    if lexical:
        order = _lift(order, lexical[0].name, c.lexical_first_within)
    return order


Counts = tuple[int, int, int, int, int, int, int, int]


def _wordings(tasks: Sequence[Task]) -> dict[str, list[int]]:
    out = {by: [i for i, t in enumerate(tasks) if t.by == by] for by in ("person", "model")}
    return {**{k: v for k, v in out.items() if v}, "all": list(range(len(tasks)))}


def counts(row: Row, cal: Calibration, v: Variant) -> dict[str, Counts]:
    """Per wording: found @1/@5 by the variant, the lexical, the dense and plain BM25 rankings."""
    lists = [[fused(t, e, cal, v) for t, e in zip(row.tasks, row.extra, strict=True)],
             [t.lexical for t in row.tasks], [t.dense for t in row.tasks], [t.bm25 for t in row.tasks]]
    out: dict[str, Counts] = {}
    for wording, idx in _wordings(row.tasks).items():
        c: list[int] = []
        for top in lists:
            c += [sum(bool(top[i]) and top[i][0] in row.tasks[i].want for i in idx),
                  sum(bool(row.tasks[i].want & set(top[i][:LIMIT])) for i in idx)]
        out[wording] = tuple(c)  # type: ignore[assignment]
    return out


def gaps(c: Counts) -> tuple[int, int]:
    return max(0, max(c[2], c[4]) - c[0]), max(0, max(c[3], c[5]) - c[1])


def bm25_gaps(c: Counts) -> tuple[int, int]:
    return max(0, c[6] - c[0]), max(0, c[7] - c[1])


def merit(results: Sequence[dict[str, Counts]]) -> float:
    return sum(c[0] + c[1] - GAP_COST * sum(gaps(c)) for res in results for c in res.values())


def totals(results: Sequence[dict[str, Counts]]) -> tuple[int, int, int, int]:
    """Found @1, @5 (person + model, or all for a set without wordings), below-better, below-BM25."""
    n1 = n5 = g = gb = 0
    for res in results:
        for wording, c in res.items():
            g += sum(gaps(c))
            gb += sum(bm25_gaps(c))
            if wording != "all" or len(res) == 1:
                n1, n5 = n1 + c[0], n5 + c[1]
    return n1, n5, g, gb


Cand = tuple[Calibration, Variant]


def cv(groups: dict[str, list[Row]], cands: list[Cand]) -> tuple[tuple[int, int, int, int], Cand,
                                                                   tuple[int, int, int, int], dict[str, Cand]]:
    """Leave one group out (fit on the others by merit, measure on it); then fitted on all."""
    table = {i: {g: [counts(r, *c) for r in rows] for g, rows in groups.items()} for i, c in enumerate(cands)}

    def best(names: Sequence[str]) -> int:
        return max(table, key=lambda i: (merit([x for g in names for x in table[i][g]]), -i))

    held: list[dict[str, Counts]] = []
    folds: dict[str, Cand] = {}
    for g in groups:
        i = best([h for h in groups if h != g])
        held += table[i][g]
        folds[g] = cands[i]
    chosen = best(list(groups))
    return totals(held), cands[chosen], totals([x for g in groups for x in table[chosen][g]]), folds


def core_cands(v: list[Variant]) -> list[Cand]:
    return [(replace(CALIBRATION, k_core=k, sure_core=s), x)
            for x, k, s in itertools.product(v, K_CORE_GRID, SURE_CORE_GRID)]


def pack_cands(v: list[Variant]) -> list[Cand]:
    return [(replace(CALIBRATION, k_pack=k, sure_pack=s), x)
            for x, k, s in itertools.product(v, K_PACK_GRID, SURE_PACK_GRID)]


FAMILIES: dict[str, tuple[str, tuple[float, ...]]] = {
    "term": ("term", (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)),
    "zterm": ("zterm", (0.0, 0.1, 0.25, 0.5, 1.0)),
    "rrf": ("rrf", (0.0, 0.05, 0.1, 0.2, 0.4)),
    "guard": ("guard", (0, 2, 3, 5)),
    "agree": ("agree", (0, 1, 2, 3, 5)),
    "boost": ("boost", (0.0, 0.5, 1.0, 2.0)),
    "conf": ("conf", (0.0, 0.25, 0.5, 0.75)),
    "sure": ("sure", (0.0, 0.25, 0.5, 0.75)),
}


def check(rows: list[Row]) -> None:
    """The replay without a BM25 input is the served fusion, query by query."""
    bad = sum(fused(t, e, CALIBRATION, Variant()) != t.fused or
              fused(t, e, CALIBRATION, Variant(mode="term", p=1e-300)) != t.fused
              for r in rows for t, e in zip(r.tasks, r.extra, strict=True))
    print(f"replay check: {bad} tasks differ from the served fusion (must be 0)")
    assert bad == 0


def headroom(rows: list[Row]) -> None:
    """How often a BM25 ranking holds what the served fusion misses (the most any use of it could add)."""
    print("\nheadroom (tuning sets; person + model, or all): fused misses that the BM25 ranking has")
    print(f"{'catalog':10}{'set':22}{'n':>5}" + "".join(f"{s + ' @1':>12}{s + ' @5':>12}" for s in INPUTS)
          + f"{'lex<-BM25@1':>13}{'lex<-BM25@5':>13}")
    for r in rows:
        n = len(r.tasks)
        c1 = {s: 0 for s in INPUTS}
        c5 = {s: 0 for s in INPUTS}
        l1 = l5 = 0
        for t, e in zip(r.tasks, r.extra, strict=True):
            f1 = bool(t.fused) and t.fused[0] in t.want
            f5 = bool(t.want & set(t.fused[:LIMIT]))
            for s in INPUTS:
                top = [h.name for h in e[s][:LIMIT]]
                c1[s] += (not f1) and bool(top) and top[0] in t.want
                c5[s] += (not f5) and bool(t.want & set(top))
            l1 += bool(t.bm25) and t.bm25[0] in t.want and not (t.lexical and t.lexical[0] in t.want)
            l5 += bool(t.want & set(t.bm25)) and not (t.want & set(t.lexical))
        print(f"{r.catalog:10}{r.name:22}{n:>5}" + "".join(f"{c1[s]:>12}{c5[s]:>12}" for s in INPUTS)
              + f"{l1:>13}{l5:>13}")


def disagreements(rows: list[Row]) -> None:
    """Where a BM25 first is not the fused first: how often each is right, by whom BM25 agrees with
    (the cosine's first ``b=d``, the lexical first ``b=l``, in the fused top 5 or not)."""
    print("\nBM25 first != fused first: (queries, BM25 first right, fused first right) by agreement")
    for source in INPUTS:
        for group, core in (("core", True), ("GitHub", False)):
            stats: dict[str, list[int]] = {}
            for r in rows:
                if (r.catalog in CORE) != core:
                    continue
                for t, e in zip(r.tasks, r.extra, strict=True):
                    b = [h.name for h in e[source][:LIMIT]]
                    if not b or not t.fused or b[0] == t.fused[0]:
                        continue
                    key = " ".join(k for k, on in (("b=d", bool(t.dense) and b[0] == t.dense[0]),
                                                   ("b=l", bool(t.lexical) and b[0] == t.lexical[0]),
                                                   ("in-f5", b[0] in t.fused[:LIMIT])) if on) or "alone"
                    c = stats.setdefault(key, [0, 0, 0])
                    c[0] += 1
                    c[1] += b[0] in t.want
                    c[2] += t.fused[0] in t.want
            print(f"  {source:7}{group:7}" + "; ".join(f"{k} {tuple(v)}" for k, v in sorted(stats.items())))


def table(rows: list[Row], cols: dict[str, Any],
          aggregate: bool = False) -> None:
    """Per catalog, set and wording: BM25, lexical, dense, then each column's fused ranking (counts,
    or recall when *aggregate*: the measurement-only sets)."""
    print(f"\n{'catalog':13}{'set':22}{'wording':>8}{'n':>5}" + "".join(f"{h:>14}" for h in ["BM25", "lexical", "dense", *cols]))
    for r in rows:
        per = {}
        for k, c in cols.items():
            cand = c.get(r.catalog) if isinstance(c, dict) else c
            if cand is not None:
                per[k] = counts(r, *cand)
        for wording, idx in _wordings(r.tasks).items():
            n = len(idx)
            base = next(iter(per.values()))[wording]
            cells: list[tuple[int, int] | None] = [(base[6], base[7]), (base[2], base[3]), (base[4], base[5])]
            cells += [per[k][wording][:2] if k in per else None for k in cols]
            print(f"{r.catalog:13}{r.name:22}{wording:>8}{n:>5}" + "".join(f"{_cell(x, n, aggregate):>14}" for x in cells))


def _cell(x: tuple[int, int] | None, n: int, aggregate: bool) -> str:
    if x is None:
        return ""
    return f"{x[0] / n:.3f}/{x[1] / n:.3f}" if aggregate else f"{x[0]}/{x[1]}"


def parse_variant(text: str) -> Variant:
    source, mode, p = text.split(":")
    return Variant(source, mode, float(p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--only", help="families to run (comma-separated; default all)")
    parser.add_argument("--measurement", help="measurement-only aggregates for SOURCE:MODE (fitted on the tuning sets), before/after")
    parser.add_argument("--show", help="per catalog/wording table for SOURCE:MODE (fitted on all, held out)")
    args = parser.parse_args(argv)
    rows = load(args.cache)
    check(rows)
    tuning = [r for r in rows if not r.measurement_only]
    core = {c: [r for r in tuning if r.catalog == c] for c in CORE}
    pack = {r.name: [r] for r in tuning if r.catalog not in CORE}
    if args.show or args.measurement:
        # SOURCE:MODE: the family's grid and the constants fitted by leave-one-out, as in the search
        source, mode = (args.show or args.measurement).split(":")[:2]
        vs = [Variant(source, mode, p) for p in FAMILIES[mode][1]]
        _, cc, _, folds = cv(core, core_cands(vs))
        _, cp, _, _ = cv(pack, pack_cands(vs))
        # The core's fit on the core-only catalogs, the pack's (its constants and parameter) on GitHub.
        cal = replace(cc[0], k_pack=cp[0].k_pack, sure_pack=cp[0].sure_pack)
        fitted: dict[str, tuple[Calibration, Variant]] = {c: (cal, cc[1]) for c in CORE}
        fitted.update({r.catalog: (cal, cp[1]) for r in rows if r.catalog not in CORE})
        print(f"variant {cc[1]} (the pack's fit chose {cp[1]}): fitted on all {cal}; "
              f"folds {[(g, f[0].k_core, f[0].sure_core, f[1].p) for g, f in folds.items()]}")
        if args.measurement:
            table([r for r in rows if r.measurement_only], {"served": (CALIBRATION, Variant()), "variant": fitted},
                  aggregate=True)
        else:
            table(tuning, {"served": (CALIBRATION, Variant()), "variant": fitted, "held-out": folds})
        return 0
    if args.only == "grid":  # every parameter with the served constants, in-sample (no fit)
        for fam, (mode, grid) in FAMILIES.items():
            for source in INPUTS:
                cells = []
                for p in grid:
                    v = Variant(source, mode, p)
                    tc = totals([counts(r, CALIBRATION, v) for rows_ in core.values() for r in rows_])
                    tp = totals([counts(r, CALIBRATION, v) for rows_ in pack.values() for r in rows_])
                    cells.append(f"{p:g}: {tc[0]}/{tc[1]}/{tc[2]} {tp[0]}/{tp[1]}/{tp[2]}")
                print(f"{fam + ' ' + source:14} " + " | ".join(cells))
        return 0
    if args.only == "headroom":
        headroom(tuning)
        disagreements(tuning)
        return 0
    families = args.only.split(",") if args.only else list(FAMILIES)
    print("held out = each catalog (set) with the constants and the variant's parameter fitted on the others;"
          " totals: found @1, @5, (catalog, wording, @k) query counts below the better of lexical/dense,"
          " below plain BM25")
    base_core = cv(core, core_cands([Variant()]))
    base_pack = cv(pack, pack_cands([Variant()]))
    print(f"{'served design (k/sure refit)':32} core held {base_core[0]} fitted {base_core[2]}; "
          f"GitHub held {base_pack[0]} fitted {base_pack[2]}")
    for fam in families:
        mode, grid = FAMILIES[fam]
        for source in INPUTS:
            vs = [Variant(source, mode, p) for p in grid]
            hc, cc, fc, folds = cv(core, core_cands(vs))
            hp, cp, fp, _ = cv(pack, pack_cands(vs))
            print(f"{fam + ' ' + source:32} core held {hc} fitted {fc} p={cc[1].p} k/sure {cc[0].k_core}/"
                  f"{cc[0].sure_core} folds p {[f[1].p for f in folds.values()]}; GitHub held {hp} fitted {fp} "
                  f"p={cp[1].p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
